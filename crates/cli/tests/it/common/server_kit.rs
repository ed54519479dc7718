//! A running `tapeloom server` for the end-to-end tests, and a raw TLS client
//! for requests by hand.

use crate::common::{bin, library_with, noise, ok, write};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A running server, killed (by its pid) when dropped.
pub struct Server {
    child: Child,
    pub url: String,
    pub addr: String,
    pub fingerprint: String,
    stderr: Arc<Mutex<String>>,
}

impl Server {
    pub fn start(home: &Path, config: Option<&Path>) -> Server {
        Self::start_with_env(home, config, &[])
    }

    /// A server started with the variables `env` set.
    pub fn start_with_env(home: &Path, config: Option<&Path>, env: &[(&str, &str)]) -> Server {
        Self::start_with(home, config, env, &[]).0
    }

    /// A server that also serves S3 on a free port of 127.0.0.1 (over plain
    /// HTTP when `plain`), and the S3 front end's URL.
    pub fn start_s3(home: &Path, plain: bool) -> (Server, String) {
        Self::start_s3_with(home, if plain { &["--s3-plain"] } else { &[] })
    }

    /// A server that also serves S3 on a free port of 127.0.0.1, with the
    /// further flags `args`, and the S3 front end's URL.
    pub fn start_s3_with(home: &Path, args: &[&str]) -> (Server, String) {
        let mut all = vec!["--s3-listen", "127.0.0.1:0"];
        all.extend_from_slice(args);
        let (server, s3) = Self::start_with(home, None, &[], &all);
        (server, s3.expect("the server names where it serves S3"))
    }

    /// [`Server::start_s3_with`] with the variables `env` set.
    pub fn start_s3_with_env(home: &Path, args: &[&str], env: &[(&str, &str)]) -> (Server, String) {
        let mut all = vec!["--s3-listen", "127.0.0.1:0"];
        all.extend_from_slice(args);
        let (server, s3) = Self::start_with(home, None, env, &all);
        (server, s3.expect("the server names where it serves S3"))
    }

    /// A server started with the variables `env` set and the further flags
    /// `args`, and the URL of its S3 front end when it has one.
    fn start_with(
        home: &Path,
        config: Option<&Path>,
        env: &[(&str, &str)],
        args: &[&str],
    ) -> (Server, Option<String>) {
        let mut cmd = Command::new(bin());
        cmd.envs(env.iter().copied());
        cmd.arg("--home")
            .arg(home)
            .args(["server", "--listen", "127.0.0.1:0"])
            .args(args);
        if let Some(c) = config {
            cmd.arg("--config").arg(c);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the server");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (mut err, log) = (child.stderr.take().unwrap(), stderr.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                log.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = |prefix: &str| {
            let mut l = String::new();
            out.read_line(&mut l).unwrap();
            l.trim()
                .strip_prefix(prefix)
                .unwrap_or_else(|| panic!("'{l}' does not start with '{prefix}'"))
                .to_string()
        };
        let url = line("listening on ");
        let fingerprint = line("certificate fingerprint (SHA-256) ");
        let s3 = args.contains(&"--s3-listen").then(|| line("S3 on "));
        let addr = url.strip_prefix("https://").unwrap().to_string();
        let server = Server {
            child,
            url,
            addr,
            fingerprint,
            stderr,
        };
        (server, s3)
    }

    /// Runs a client command against this server with `token`; (exit code,
    /// stdout, stderr).
    pub fn client(&self, token: &str, args: &[&str]) -> (i32, String, String) {
        let out = Command::new(bin())
            .args(args)
            .args(["--server", &self.url, "--fingerprint", &self.fingerprint])
            .args(["--token", token])
            .env_remove("TAPELOOM_SERVER")
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    pub fn json(&self, token: &str, args: &[&str]) -> Value {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        let (code, out, err) = self.client(token, &a);
        assert_eq!(code, 0, "{args:?}: {err}");
        serde_json::from_str(&out).unwrap()
    }

    /// Starts a client's backup of `src` through this server with `token` (held
    /// to `rate` bytes/s, when given): the client process, its `--json` output
    /// piped.
    pub fn spawn_backup(&self, token: &str, src: &Path, rate: Option<&str>) -> Child {
        let mut c = Command::new(bin());
        c.args(["--json", "backup", src.to_str().unwrap()]);
        if let Some(r) = rate {
            c.args(["--limit-rate", r]);
        }
        c.args(["--server", &self.url, "--fingerprint", &self.fingerprint])
            .args(["--token", token])
            .env_remove("TAPELOOM_SERVER")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    pub fn log(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The log once it holds each of `wanted`, or as it is after 20 s: a thread
    /// of its own reads it from the server's stderr, and may not have read yet
    /// what the server wrote before it answered.
    pub fn log_with(&self, wanted: &[&str]) -> String {
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            let log = self.log();
            if wanted.iter().all(|w| log.contains(w)) || Instant::now() > until {
                return log;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server process's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the server process still runs.
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Kills the server process with SIGKILL (nothing of it runs after: no
    /// handler, no cleanup) and waits for its end.
    pub fn kill9(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.pid() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
        let status = self.child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(9), "{status}");
    }
}

impl Server {
    /// Sends SIGTERM and waits up to `limit` for the server's end: its exit code
    /// and how long it took; none when it still ran at the limit.
    pub fn term(&mut self, limit: Duration) -> Option<(i32, Duration)> {
        let pid = nix::unistd::Pid::from_raw(self.pid() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        self.wait(limit)
    }

    /// Waits up to `limit` for the server's end: its exit code and how long it
    /// took; none when it still ran at the limit.
    pub fn wait(&mut self, limit: Duration) -> Option<(i32, Duration)> {
        let started = std::time::Instant::now();
        while started.elapsed() < limit {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some((status.code().unwrap_or(-1), started.elapsed()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A TLS client that trusts any certificate, for requests by hand.
pub mod raw {
    use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
    use rustls::{DigitallySignedStruct, SignatureScheme};
    use std::sync::Arc;

    #[derive(Debug)]
    struct Any(rustls::crypto::WebPkiSupportedAlgorithms);

    impl ServerCertVerifier for Any {
        fn verify_server_cert(
            &self,
            _: &CertificateDer<'_>,
            _: &[CertificateDer<'_>],
            _: &ServerName<'_>,
            _: &[u8],
            _: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            Ok(ServerCertVerified::assertion())
        }
        fn verify_tls12_signature(
            &self,
            m: &[u8],
            c: &CertificateDer<'_>,
            d: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls12_signature(m, c, d, &self.0)
        }
        fn verify_tls13_signature(
            &self,
            m: &[u8],
            c: &CertificateDer<'_>,
            d: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls13_signature(m, c, d, &self.0)
        }
        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.supported_schemes()
        }
    }

    pub fn config() -> Arc<rustls::ClientConfig> {
        let p = Arc::new(rustls::crypto::ring::default_provider());
        let any = Arc::new(Any(p.signature_verification_algorithms));
        let c = rustls::ClientConfig::builder_with_provider(p)
            .with_safe_default_protocol_versions()
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(any)
            .with_no_client_auth();
        Arc::new(c)
    }
}

/// A TLS connection to the server at `addr`, trusting any certificate; a read
/// waits at most 20 s.
pub fn connect(addr: &str) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    let sock = TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(raw::config(), name).unwrap();
    rustls::StreamOwned::new(conn, sock)
}

/// Sends `bytes` and closes at once, reading nothing.
pub fn send_and_go(addr: &str, bytes: &[u8]) {
    let mut tls = connect(addr);
    tls.write_all(bytes).unwrap();
    tls.flush().unwrap();
    let _ = tls.sock.shutdown(std::net::Shutdown::Both);
}

/// Sends `bytes` over TLS, waits `pause`, and reads until the server closes:
/// what it answered (empty when it closed without an answer). Panics when the
/// server keeps the connection open for 20 s.
pub fn exchange(addr: &str, bytes: &[u8], pause: Duration) -> String {
    let mut tls = connect(addr);
    // The server may close before all is sent (a head too large): not an error.
    let _ = tls.write_all(bytes).and_then(|()| tls.flush());
    std::thread::sleep(pause);
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tls.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                panic!("the server kept the connection open: {e}")
            }
            Err(_) => break,
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// GET `path` with `token` (none: no Authorization); (status, body).
pub fn get(addr: &str, path: &str, token: Option<&str>) -> (u16, String) {
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\n{auth}\r\n");
    let answer = exchange(addr, req.as_bytes(), Duration::ZERO);
    let (head, body) = answer.split_once("\r\n\r\n").expect("an answer");
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let chunked = (head.lines()).any(|l| l.eq_ignore_ascii_case("transfer-encoding: chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_string()
    };
    (status, body)
}

/// A chunked body's bytes, its chunks joined (a streamed answer: a base's tree).
pub fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    loop {
        let (size, rest) = body.split_once("\r\n").expect("a chunk's size");
        let size = usize::from_str_radix(size.trim(), 16).expect("a chunk size in hex");
        if size == 0 {
            return out;
        }
        out.push_str(&rest[..size]);
        body = &rest[size + 2..];
    }
}

/// POSTs `body` to `path` with `token`; (status, body).
pub fn post(addr: &str, path: &str, token: &str, body: &str) -> (u16, String) {
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let answer = exchange(addr, req.as_bytes(), Duration::ZERO);
    let (head, body) = answer.split_once("\r\n\r\n").expect("an answer");
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let chunked = (head.lines()).any(|l| l.eq_ignore_ascii_case("transfer-encoding: chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_string()
    };
    (status, body)
}

/// Begins a job named `name` of one stream with 64 KiB blocks by hand, at
/// `level` when given (else the server's default): the server's document.
pub fn begin(s: &Server, token: &str, name: &str, level: Option<&str>) -> Value {
    let level = level.map_or(String::new(), |l| format!(r#""level":"{l}","#));
    let body = format!(
        r#"{{"name":"{name}","set":null,"pool":null,"block_size":65536,{level}"streams":[{{"name":"s","source":"/x/s","root":"."}}]}}"#
    );
    let (status, body) = post(&s.addr, "/api/backups", token, &body);
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// The head of a request that sends stream `stream` of backup `backup` with
/// `token`; its frames follow as a chunked body, as a client sends a stream.
pub fn stream_head(backup: u64, stream: u16, token: &str) -> Vec<u8> {
    format!(
        "POST /api/backups/{backup}/streams/{stream} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    .into_bytes()
}

/// `body` as a whole chunked body: one chunk, then the last.
pub fn chunked(body: &[u8]) -> Vec<u8> {
    let mut c = Vec::new();
    if !body.is_empty() {
        c.extend_from_slice(format!("{:x}\r\n", body.len()).as_bytes());
        c.extend_from_slice(body);
        c.extend_from_slice(b"\r\n");
    }
    c.extend_from_slice(b"0\r\n\r\n");
    c
}

/// The start of a chunk of `len` bytes whose first bytes are `part`: a body
/// that has more to come.
pub fn chunk_start(len: usize, part: &[u8]) -> Vec<u8> {
    let mut c = format!("{len:x}\r\n").into_bytes();
    c.extend_from_slice(part);
    c
}

/// Sends stream 1 of backup `backup` with `token`: its head, then `body` as a
/// whole chunked body; the answer.
pub fn send_stream(addr: &str, backup: u64, token: &str, body: &[u8]) -> String {
    let mut req = stream_head(backup, 1, token);
    req.extend_from_slice(&chunked(body));
    exchange(addr, &req, Duration::ZERO)
}

/// `bytes` as one frame of a stream: its length, then itself.
pub fn frame(bytes: &[u8]) -> Vec<u8> {
    let mut f = (bytes.len() as u32).to_le_bytes().to_vec();
    f.extend_from_slice(bytes);
    f
}

/// A client's tree: one file of `big` bytes of noise and a few small ones.
pub fn client_tree(src: &Path, seed: u64, big: usize) {
    write(&src.join("big"), &noise(seed, big));
    for i in 0..3 {
        write(&src.join(format!("small/{i}")), &noise(seed * 10 + i, 5000));
    }
}

/// Makes `home` with a library of one LTO-3 drive at a twentieth of its speed
/// (4 MB/s, its lowest step 1.35 MB/s, a 6.4 MB buffer) on the real clock: a job
/// stays on the drive for seconds, and a drive left without data stops and
/// backhitches as it would.
pub fn slow_library(home: &Path) {
    let model = ["--model", "lto3", "--clock", "real", "--scale", "0.05"];
    library_with(home, 1, 4, "4G", &model);
}

/// The command of client `args` as `token`, to the server at `url` pinned by
/// `fingerprint` (none taken from the environment).
pub fn client_command(url: &str, fingerprint: &str, token: &str, args: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.args(args)
        .args(["--server", url, "--fingerprint", fingerprint])
        .args(["--token", token])
        .env_remove("TAPELOOM_SERVER");
    c
}

/// Chunks the catalog of `home` holds as spooled on its stages (not yet on
/// tape); 1 when the catalog cannot be read now.
pub fn spooled_chunks(home: &Path) -> i64 {
    let q = "SELECT COUNT(*) FROM staged_chunks WHERE state = 'spooled'";
    let rows = crate::common::sql_try(home, q).unwrap_or_default();
    let n = rows.first().and_then(|r| r[0].as_deref()?.parse().ok());
    n.unwrap_or(1)
}

/// A new token of `home` for client `name` (`server token add`).
pub fn token(home: &Path, name: &str) -> String {
    ok(home, &["server", "token", "add", name])["token"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A new admin token of `home` named `name` (`server token add --admin`).
pub fn admin_token(home: &Path, name: &str) -> String {
    ok(home, &["server", "token", "add", name, "--admin"])["token"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A server's clock starting at `now` (RFC 3339) and running 30 times fast, as
/// the variables for [`Server::start_with_env`].
pub fn fast_clock(now: &str) -> [(&'static str, &str); 2] {
    [("TAPELOOM_NOW", now), ("TAPELOOM_CLOCK_SPEED", "30")]
}

/// A home with the client tokens `alice` and `bob`; (temporary folder, home,
/// alice's token, bob's token).
pub fn home_with_clients() -> (tempfile::TempDir, PathBuf, String, String) {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let (alice, bob) = (token(&home, "alice"), token(&home, "bob"));
    (t, home, alice, bob)
}

/// A home with the client tokens `alice` and `bob`, the server running on it,
/// and a job alice backed up through it.
pub struct ClientJob {
    pub t: tempfile::TempDir,
    pub home: PathBuf,
    /// What the job holds, as `make` made it.
    pub src: PathBuf,
    pub server: Server,
    pub alice: String,
    pub bob: String,
    pub job: String,
}

/// A [`ClientJob`] of the tree `make` makes.
pub fn client_job(make: impl FnOnce(&Path)) -> ClientJob {
    let (t, home, alice, bob) = home_with_clients();
    let src = t.path().join("src");
    make(&src);
    let server = Server::start(&home, None);
    let doc = server.json(&alice, &["backup", src.to_str().unwrap()]);
    assert_eq!(doc["status"], "ok", "{doc}");
    let job = doc["job_id"].as_i64().unwrap().to_string();
    ClientJob {
        t,
        home,
        src,
        server,
        alice,
        bob,
        job,
    }
}
