//! A PostgreSQL server for tests: Debian's `postgresql` package, started in a
//! temporary folder on 127.0.0.1 with a port of its own, and stopped when the
//! test process ends.
//!
//! One server serves every test of a process ([`server`]); each test takes a
//! database of its own ([`Server::database`]). The server trusts every local
//! connection, runs without `fsync` (the tests check behaviour, not durability),
//! and is run as the `postgres` user when the tests run as root (PostgreSQL
//! refuses to run as root). A watchdog process stops the server by its own
//! process id and removes its folder once the test process is gone, also when a
//! test panics or the process is killed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

/// A PostgreSQL server started for the tests of this process.
#[derive(Debug)]
pub struct Server {
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Its folder (data, socket, log).
    pub dir: PathBuf,
    bin: PathBuf,
    /// Options it was started with besides the common ones (its TLS).
    extra: String,
}

/// Where PostgreSQL's server programs are: beside `initdb` on PATH, or in the
/// newest `/usr/lib/postgresql/*/bin`.
fn bin_dir() -> Result<PathBuf, String> {
    if let Some(p) = super::need::find_program("initdb") {
        let real = std::fs::canonicalize(&p).unwrap_or(p);
        if let Some(d) = real.parent() {
            if d.join("pg_ctl").exists() {
                return Ok(d.to_path_buf());
            }
        }
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|r| r.flatten().map(|e| e.path().join("bin")).collect())
        .unwrap_or_default();
    found.retain(|d| d.join("initdb").exists() && d.join("pg_ctl").exists());
    found.sort();
    found
        .pop()
        .ok_or_else(|| "PostgreSQL is not installed (install the package postgresql)".to_string())
}

/// Whether this process runs as root (`/proc/self` belongs to its user).
fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// `program args` as the `postgres` user when this process is root.
fn as_owner(program: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid=postgres",
            "--regid=postgres",
            "--init-groups",
            "--",
        ])
        .arg(program);
        c
    } else {
        Command::new(program)
    }
}

fn run(mut c: Command, what: &str) -> Result<(), String> {
    let out = c
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{what}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what}: {}{}",
            String::from_utf8_lossy(&out.stderr).trim(),
            String::from_utf8_lossy(&out.stdout).trim()
        ))
    }
}

fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("a free port: {e}"))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("a free port: {e}"))
}

/// Writes the certificate and key a server offers TLS with into `dir` (the key
/// readable by its owner only, the postgres user when run as root); the options
/// that name them.
fn write_tls(dir: &std::path::Path, cert: &str, key: &str) -> Result<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let (c, k) = (dir.join("server.crt"), dir.join("server.key"));
    for (path, text) in [(&c, cert), (&k, key)] {
        std::fs::write(path, text).map_err(|e| format!("write {}: {e}", path.display()))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| format!("set the mode of {}: {e}", path.display()))?;
        if is_root() {
            let mut ch = Command::new("chown");
            ch.arg("postgres:postgres").arg(path);
            run(ch, "give the certificate to the postgres user")?;
        }
    }
    Ok(format!(
        " -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
        c.display(),
        k.display()
    ))
}

impl Server {
    /// A server of its own, for a test that stops and starts it (the shared one
    /// of [`server`] is not to be stopped: other tests use it).
    pub fn start_new() -> Result<Server, String> {
        Server::start(None)
    }

    /// A server of its own that offers TLS with the certificate and key given
    /// (PEM).
    pub fn start_with_tls(cert_pem: &str, key_pem: &str) -> Result<Server, String> {
        Server::start(Some((cert_pem, key_pem)))
    }

    fn start(tls: Option<(&str, &str)>) -> Result<Server, String> {
        static STARTED: AtomicU32 = AtomicU32::new(0);
        let bin = bin_dir()?;
        let n = STARTED.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("tapeloom-pg-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
        if is_root() {
            let mut c = Command::new("chown");
            c.arg("postgres:postgres").arg(&dir);
            run(
                c,
                "give the folder to the postgres user (install the package postgresql)",
            )?;
        }
        let data = dir.join("data");
        let mut init = as_owner(&bin.join("initdb"));
        init.arg("-D").arg(&data).args([
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
        ]);
        run(init, "initdb")?;
        let extra = match tls {
            Some((cert, key)) => write_tls(&dir, cert, key)?,
            None => String::new(),
        };
        let port = free_port()?;
        let opts = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off \
             -c synchronous_commit=off -c full_page_writes=off -c max_connections=200{extra}",
            dir.display()
        );
        let mut start = as_owner(&bin.join("pg_ctl"));
        start
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(dir.join("log"))
            .args(["-o", &opts, "-w", "start"]);
        run(start, "pg_ctl start")?;
        let server = Server {
            port,
            dir,
            bin,
            extra,
        };
        server.watch()?;
        Ok(server)
    }

    /// The server's process id, from its pid file.
    pub fn pid(&self) -> Option<u32> {
        let text = std::fs::read_to_string(self.dir.join("data/postmaster.pid")).ok()?;
        text.lines().next()?.trim().parse().ok()
    }

    /// Starts the watchdog: once this process is gone, it stops the server by its
    /// process id (SIGQUIT, PostgreSQL's immediate shutdown) and removes the folder.
    fn watch(&self) -> Result<(), String> {
        // The pid is read when the process is gone: the server may have been
        // stopped and started again meanwhile.
        let script = format!(
            "while kill -0 {me} 2>/dev/null; do sleep 0.5; done; \
             pid=$(head -n 1 '{dir}/data/postmaster.pid' 2>/dev/null); \
             if [ -n \"$pid\" ]; then kill -QUIT \"$pid\" 2>/dev/null; \
               while kill -0 \"$pid\" 2>/dev/null; do sleep 0.2; done; fi; \
             rm -rf '{dir}'",
            me = std::process::id(),
            dir = self.dir.display()
        );
        Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map(|_| ())
            .map_err(|e| format!("start the watchdog: {e}"))
    }

    /// A new, empty database of its own; its URL.
    pub fn database(&self) -> Result<String, String> {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "t{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let mut c = Command::new(self.bin.join("createdb"));
        c.args([
            "-h",
            "127.0.0.1",
            "-p",
            &self.port.to_string(),
            "-U",
            "postgres",
        ])
        .arg(&name);
        run(c, "createdb")?;
        Ok(self.url(&name))
    }

    /// The URL of database `name`.
    pub fn url(&self, name: &str) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// Stops the server (PostgreSQL's fast shutdown: every connection is cut) and
    /// waits for it; [`Server::restart`] starts it again. Not a crash: the tests'
    /// servers commit without waiting for the disk, so a crash would lose the
    /// last commits.
    pub fn stop(&self) -> Result<(), String> {
        let mut c = as_owner(&self.bin.join("pg_ctl"));
        c.arg("-D")
            .arg(self.dir.join("data"))
            .args(["-m", "fast", "-w", "stop"]);
        run(c, "pg_ctl stop")
    }

    /// Starts the server again on the same port, after [`Server::stop`].
    pub fn restart(&self) -> Result<(), String> {
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off \
             -c synchronous_commit=off -c full_page_writes=off -c max_connections=200{}",
            self.port,
            self.dir.display(),
            self.extra
        );
        let mut c = as_owner(&self.bin.join("pg_ctl"));
        c.arg("-D")
            .arg(self.dir.join("data"))
            .arg("-l")
            .arg(self.dir.join("log"))
            .args(["-o", &opts, "-w", "start"]);
        run(c, "pg_ctl start")
    }
}

/// The PostgreSQL server of this test process, started at the first call; an
/// error says in one line what is missing or what failed.
pub fn server() -> Result<&'static Server, String> {
    static SERVER: OnceLock<Result<Server, String>> = OnceLock::new();
    SERVER
        .get_or_init(|| Server::start(None))
        .as_ref()
        .map_err(Clone::clone)
}
