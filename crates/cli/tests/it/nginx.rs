//! Any HTTP stack carries tapeloom's protocol: a backup and a restore of a real
//! tree pass through nginx, started here as a TLS reverse proxy in front of the
//! server with request buffering off, the client pinning nginx's certificate;
//! and curl with a token reads `/api/jobs` through it.

use crate::common::server_kit::{admin_token, home_with_clients, Server};
use crate::common::{self, assert_same_tree, need, program, rich_tree};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// nginx's binary, when installed (Debian package nginx): missing, the test
/// says so and passes under a plain `cargo test`, and fails under the test
/// command (`need`).
fn nginx() -> Option<PathBuf> {
    if !(need(program("nginx", "nginx")) && need(program("curl", "curl"))) {
        return None;
    }
    ["/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// A running nginx, stopped (by its pid) when dropped.
struct Nginx(Child);

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A free port on 127.0.0.1.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// A certificate for nginx, its files in `dir`: its fingerprint as clients pin it.
fn certificate(dir: &Path) -> String {
    let c =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    std::fs::write(dir.join("cert.pem"), c.cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), c.key_pair.serialize_pem()).unwrap();
    let d = ring::digest::digest(&ring::digest::SHA256, c.cert.der());
    let hex: Vec<String> = d.as_ref().iter().map(|b| format!("{b:02X}")).collect();
    hex.join(":")
}

/// Starts nginx in `dir`, listening on `port` with TLS and proxying to `upstream`
/// (`127.0.0.1:PORT`, the server's own TLS) without buffering requests or answers.
fn start_nginx(bin: &Path, dir: &Path, port: u16, upstream: &str) -> Nginx {
    let d = dir.display();
    let conf = format!(
        r#"daemon off;
master_process off;
pid {d}/nginx.pid;
error_log {d}/error.log info;
events {{ worker_connections 256; }}
http {{
    access_log {d}/access.log;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {d}/cert.pem;
        ssl_certificate_key {d}/key.pem;
        client_max_body_size 0;
        location / {{
            proxy_pass https://{upstream};
            proxy_http_version 1.1;
            proxy_request_buffering off;
            proxy_buffering off;
            proxy_read_timeout 300s;
            proxy_send_timeout 300s;
            proxy_ssl_server_name off;
        }}
    }}
}}
"#
    );
    let path = dir.join("nginx.conf");
    std::fs::write(&path, conf).unwrap();
    let child = Command::new(bin)
        .arg("-c")
        .arg(&path)
        .arg("-p")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start nginx");
    let n = Nginx(child);
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "nginx did not start: {log}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    n
}

/// Runs a client command through nginx: (exit code, stdout, stderr).
fn client(url: &str, fingerprint: &str, token: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(common::bin())
        .args(args)
        .args([
            "--server",
            url,
            "--fingerprint",
            fingerprint,
            "--token",
            token,
        ])
        .env_remove("TAPELOOM_SERVER")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_backup_and_a_restore_pass_through_nginx() {
    let Some(bin) = nginx() else {
        return;
    };
    let (t, home, alice, _bob) = home_with_clients();
    let admin = admin_token(&home, "root");
    let s = Server::start(&home, None);
    let dir = t.path().join("nginx");
    std::fs::create_dir_all(&dir).unwrap();
    let fingerprint = certificate(&dir);
    let port = free_port();
    let _proxy = start_nginx(&bin, &dir, port, &s.addr);
    let url = format!("https://127.0.0.1:{port}");
    // A real tree, with files of several sizes: several blocks go through.
    let src = t.path().join("src");
    rich_tree(&src);
    common::write(&src.join("big"), &common::noise(7, 3 << 20));
    let (code, out, err) = client(
        &url,
        &fingerprint,
        &alice,
        &["--json", "backup", src.to_str().unwrap()],
    );
    assert_eq!(
        code,
        0,
        "{err}\n{}",
        std::fs::read_to_string(dir.join("error.log")).unwrap_or_default()
    );
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["status"], "ok", "{doc}");
    let job = doc["job_id"].to_string();
    let to = t.path().join("restored");
    let (code, _, err) = client(
        &url,
        &fingerprint,
        &alice,
        &["restore", &job, "--to", to.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    assert_same_tree(&src, &to);
    // The client pins nginx's certificate, not the server's.
    let (code, _, err) = client(&url, &s.fingerprint, &alice, &["jobs"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("fingerprint"), "{err}");
    // curl with a token reads the jobs through nginx.
    let out = Command::new("curl")
        .args(["-sS", "--insecure", "--fail", "-H"])
        .arg(format!("Authorization: Bearer {admin}"))
        .arg(format!("{url}/api/jobs"))
        .output()
        .expect("curl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let jobs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ids: Vec<String> = (jobs["jobs"].as_array().unwrap().iter())
        .map(|j| j["job_id"].to_string())
        .collect();
    assert_eq!(ids, [job], "{jobs}");
}
