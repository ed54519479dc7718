//! `tapeloom server` end to end: the real binary serves a temporary home on
//! 127.0.0.1 (port 0, the real one read from what it prints), clients pin its
//! certificate and give tokens, and raw TLS clients send it malformed requests.

use crate::common::server_kit::{admin_token, connect, exchange, get, token, Server};
use crate::common::*;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

/// A home with two jobs, a client token `alice` (job 2 is hers) and an admin
/// token `root`; (temporary folder, home, alice's token, root's token).
fn home_with_jobs() -> (tempfile::TempDir, PathBuf, String, String) {
    let t = tempfile::tempdir().unwrap();
    let (home, src) = (t.path().join("home"), t.path().join("src"));
    write(&src.join("a"), b"first");
    write(&src.join("d/b"), b"second");
    ok(&home, &["backup", src.to_str().unwrap()]);
    ok(&home, &["backup", src.to_str().unwrap()]);
    let alice = token(&home, "alice");
    let root = admin_token(&home, "root");
    sql_exec(&home, "UPDATE jobs SET client = 'alice' WHERE id = 2");
    (t, home, alice, root)
}

fn one_line_error(err: &str, has: &str) {
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.starts_with("tapeloom: error: ") && err.contains(has),
        "{err}"
    );
}

#[test]
fn clients_see_their_jobs_and_admins_all() {
    let (_t, home, alice, root) = home_with_jobs();
    assert!(alice.starts_with("tl_") && alice.len() == 67, "{alice}");
    let s = Server::start(&home, None);
    assert_eq!(job_ids(&s.json(&alice, &["jobs"])), [2]);
    assert_eq!(job_ids(&s.json(&root, &["jobs"])), [1, 2]);
    // The same document and the same lines as on the server's machine.
    assert_eq!(s.json(&root, &["jobs"]), ok(&home, &["jobs"]));
    let local = Command::new(bin())
        .arg("--home")
        .arg(&home)
        .arg("jobs")
        .output()
        .unwrap();
    let local = String::from_utf8(local.stdout).unwrap();
    assert!(local.contains("(client alice)"), "{local}");
    assert_eq!(s.client(&root, &["jobs"]).1, local);
    assert_eq!(
        s.json(&alice, &["ls", "2", "d"]),
        ok(&home, &["ls", "2", "d"])
    );
    // Another client's job is one that does not exist.
    let (code, out, err) = s.client(&alice, &["ls", "1"]);
    assert_eq!((code, out.as_str()), (1, ""));
    one_line_error(&err, "no job 1 in the catalog (HTTP 404)");
    let (code, _, err) = s.client(&root, &["ls", "2", "nonesuch"]);
    assert_eq!(code, 1);
    one_line_error(&err, "HTTP 404");
    // Through the environment.
    let out = Command::new(bin())
        .args(["--json", "jobs"])
        .env("TAPELOOM_SERVER", &s.url)
        .env("TAPELOOM_TOKEN", &alice)
        .env(
            "TAPELOOM_FINGERPRINT",
            s.fingerprint.replace(':', "").to_lowercase(),
        )
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(job_ids(&v), [2]);
}

#[test]
fn missing_wrong_and_revoked_tokens_and_certificates_are_refused() {
    let (_t, home, alice, root) = home_with_jobs();
    let s = Server::start(&home, None);
    let wrong = format!("tl_{}", "0".repeat(64));
    let (code, out, err) = s.client(&wrong, &["jobs"]);
    assert_eq!((code, out.as_str()), (1, ""));
    one_line_error(&err, "unknown token (HTTP 401)");
    let out = Command::new(bin())
        .args(["jobs", "--server", &s.url, "--fingerprint", &s.fingerprint])
        .env_remove("TAPELOOM_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    one_line_error(&String::from_utf8_lossy(&out.stderr), "--token");
    let (status, body) = get(&s.addr, "/api/jobs", None);
    assert_eq!(status, 401, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert!(v["error"].as_str().unwrap().contains("no token"), "{body}");

    // Revoked while the server runs: refused from the next request on.
    assert_eq!(job_ids(&s.json(&alice, &["jobs"])), [2]);
    ok(&home, &["server", "token", "revoke", "alice"]);
    let (code, _, err) = s.client(&alice, &["jobs"]);
    assert_eq!(code, 1);
    one_line_error(&err, "the token is revoked (HTTP 401)");
    let list = ok(&home, &["server", "token", "list"]);
    assert!(list["tokens"][0]["revoked"].is_string(), "{list}");
    assert!(list["tokens"][1]["revoked"].is_null(), "{list}");

    // The log names who was refused, from where and for what, never the token: a
    // warning each, the peer as a field.
    let log = s.log_with(&[
        "refused unknown token: GET /api/jobs: ",
        "refused alice: GET /api/jobs: ",
    ]);
    let refused = |who: &str| {
        log.lines().any(|l| {
            l.contains(" WARN ")
                && l.contains(&format!("refused {who}: GET /api/jobs: "))
                && l.contains(" peer=127.0.0.1:")
        })
    };
    assert!(refused("unknown token"), "{log}");
    assert!(refused("alice"), "{log}");
    assert!(!log.contains(&alice) && !log.contains(&wrong), "{log}");

    // Another certificate than the one pinned.
    let other = format!("{}:00", &s.fingerprint[..s.fingerprint.len() - 3]);
    let other = if other == s.fingerprint {
        other.replace(":00", ":01")
    } else {
        other
    };
    let out = Command::new(bin())
        .args(["jobs", "--server", &s.url, "--token", &root])
        .args(["--fingerprint", &other])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    one_line_error(&err, &s.fingerprint);
    assert!(err.contains(&other), "{err}");
}

#[test]
fn malformed_requests_are_closed_or_refused_while_others_are_served() {
    let (t, home, _alice, root) = home_with_jobs();
    let config = t.path().join("server.toml");
    std::fs::write(
        &config,
        "[limits]\ntimeout_seconds = 2\nmax_header_bytes = 8192\nmax_body_bytes = 1024\n",
    )
    .unwrap();
    let s = Arc::new(Server::start(&home, Some(&config)));
    let long = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(20_000));
    let many = format!("GET / HTTP/1.1\r\n{}\r\n", "A: b\r\n".repeat(100));
    let cases: Vec<(&str, Vec<u8>, Duration, Option<&str>)> = vec![
        (
            "garbage",
            b"\x00\x01\x02\xff\r\n\r\n".to_vec(),
            Duration::ZERO,
            Some("400"),
        ),
        (
            "no version",
            b"GET /api/jobs\r\n\r\n".to_vec(),
            Duration::ZERO,
            Some("400"),
        ),
        (
            "long header",
            long.into_bytes(),
            Duration::ZERO,
            Some("431"),
        ),
        (
            "many headers",
            many.into_bytes(),
            Duration::ZERO,
            Some("431"),
        ),
        (
            "body too large",
            b"GET / HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n".to_vec(),
            Duration::ZERO,
            Some("413"),
        ),
        (
            "bad length",
            b"GET / HTTP/1.1\r\nContent-Length: x1\r\n\r\n".to_vec(),
            Duration::ZERO,
            Some("400"),
        ),
        (
            "chunked",
            b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".to_vec(),
            Duration::ZERO,
            Some("200"),
        ),
        (
            "bad chunk",
            b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".to_vec(),
            Duration::ZERO,
            None,
        ),
        (
            "bad escape",
            b"GET /api/jobs/1/files?path=%zz HTTP/1.1\r\n\r\n".to_vec(),
            Duration::ZERO,
            Some("400"),
        ),
        (
            "no colon",
            b"GET / HTTP/1.1\r\nHost x\r\n\r\n".to_vec(),
            Duration::ZERO,
            Some("400"),
        ),
        (
            "stalled head",
            b"GET /api/jobs HTTP/1.1\r\nHost: x".to_vec(),
            Duration::from_secs(3),
            None,
        ),
        (
            "stalled body",
            b"GET / HTTP/1.1\r\nContent-Length: 10\r\n\r\nab".to_vec(),
            Duration::from_secs(3),
            None,
        ),
    ];
    let threads: Vec<_> = cases
        .into_iter()
        .map(|(name, bytes, pause, want)| {
            let addr = s.addr.clone();
            std::thread::spawn(move || {
                let answer = exchange(&addr, &bytes, pause);
                match want {
                    Some(status) => assert!(
                        answer.starts_with(&format!("HTTP/1.1 {status} ")),
                        "{name}: {answer}"
                    ),
                    None => assert_eq!(answer, "", "{name}"),
                }
            })
        })
        .collect();
    // A request trickled a byte at a time, past the timeout: closed, no answer.
    let addr = s.addr.clone();
    let trickle = std::thread::spawn(move || {
        let mut tls = connect(&addr);
        let started = std::time::Instant::now();
        for b in b"GET /api/jobs HTTP/1.1\r\nHost: localhost\r\nX-Slow: yes\r\n\r\n" {
            if tls.write_all(&[*b]).and_then(|()| tls.flush()).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(150));
        }
        let mut got = Vec::new();
        let _ = tls.read_to_end(&mut got);
        let got = String::from_utf8_lossy(&got);
        assert!(!got.contains("HTTP/1.1 200"), "trickled: {got}");
        assert!(started.elapsed() < Duration::from_secs(15));
    });
    // Not TLS at all: closed.
    let mut plain = TcpStream::connect(&s.addr).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let _ = plain.write_all(b"GET / HTTP/1.1\r\n\r\n");
    let mut buf = Vec::new();
    let _ = plain.read_to_end(&mut buf);
    assert!(!String::from_utf8_lossy(&buf).contains("HTTP/1.1"));
    // A well-behaved client is answered all along.
    for _ in 0..4 {
        assert_eq!(job_ids(&s.json(&root, &["jobs"])), [1, 2]);
        std::thread::sleep(Duration::from_millis(300));
    }
    for t in threads {
        t.join().unwrap();
    }
    trickle.join().unwrap();
    assert_eq!(job_ids(&s.json(&root, &["jobs"])), [1, 2]);
    let log = s.log();
    assert!(!log.contains("panicked"), "{log}");
}

#[test]
fn connections_beyond_the_limit_are_closed_until_one_ends() {
    let (t, home, _alice, root) = home_with_jobs();
    let config = t.path().join("server.toml");
    std::fs::write(
        &config,
        "[limits]\nmax_connections = 1\ntimeout_seconds = 2\n",
    )
    .unwrap();
    let s = Server::start(&home, Some(&config));
    let idle = TcpStream::connect(&s.addr).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let (code, _, err) = s.client(&root, &["jobs"]);
    assert_eq!(code, 1, "{err}");
    one_line_error(&err, "ask 127.0.0.1:");
    // The idle connection is dropped at its deadline; its place is free again.
    std::thread::sleep(Duration::from_millis(2000));
    let started = std::time::Instant::now();
    loop {
        let (code, out, err) = s.client(&root, &["--json", "jobs"]);
        if code == 0 {
            assert_eq!(job_ids(&serde_json::from_str(&out).unwrap()), [1, 2]);
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{err}");
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(idle);
}

#[test]
fn metrics_are_prometheus_text_for_admins() {
    let (_t, home, alice, root) = home_with_jobs();
    let s = Server::start(&home, None);
    assert_eq!(get(&s.addr, "/metrics", Some(&alice)).0, 403);
    assert_eq!(get(&s.addr, "/metrics", None).0, 401);
    let (status, text) = get(&s.addr, "/metrics", Some(&root));
    assert_eq!(status, 200, "{text}");
    let mut typed = std::collections::BTreeMap::new();
    let name_ok = |n: &str| {
        !n.is_empty()
            && !n.starts_with(|c: char| c.is_ascii_digit())
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    };
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap();
            assert!(name_ok(name) && !help.is_empty(), "{line}");
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(
                name_ok(name) && ["counter", "gauge"].contains(&kind),
                "{line}"
            );
            typed.insert(name.to_string(), kind.to_string());
        } else {
            let (series, value) = line.rsplit_once(' ').unwrap();
            let value: f64 = value.parse().unwrap_or_else(|_| panic!("{line}"));
            assert!(value >= 0.0, "{line}");
            let (name, labels) = match series.split_once('{') {
                Some((n, l)) => (n, l.strip_suffix('}').unwrap_or_else(|| panic!("{line}"))),
                None => (series, ""),
            };
            assert!(typed.contains_key(name), "{line}: no # TYPE before it");
            for l in labels.split(',').filter(|l| !l.is_empty()) {
                let (k, v) = l.split_once('=').unwrap();
                assert!(
                    name_ok(k) && v.starts_with('"') && v.ends_with('"'),
                    "{line}"
                );
            }
        }
    }
    assert!(text.contains("tapeloom_jobs{state=\"ok\"} 2\n"), "{text}");
    assert!(text.contains("tapeloom_http_refused_total 2\n"), "{text}");
    assert!(
        text.contains("tapeloom_http_requests_total{status=\"401\"} 1\n"),
        "{text}"
    );
}

#[test]
fn a_certificate_is_made_once_or_given() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    let first = Server::start(&a, None).fingerprint.clone();
    assert_eq!(
        Server::start(&a, None).fingerprint,
        first,
        "kept in the home"
    );
    let key = a.join("server/key.pem");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&key).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    // Given with --cert and --key in the configuration: served as it is.
    let config = t.path().join("server.toml");
    let text = format!("cert = {:?}\nkey = {:?}\n", a.join("server/cert.pem"), key);
    std::fs::write(&config, text).unwrap();
    assert_eq!(Server::start(&b, Some(&config)).fingerprint, first);
    assert!(!b.join("server").exists());
}

#[test]
fn a_configuration_with_an_unknown_key_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let config = t.path().join("server.toml");
    std::fs::write(&config, "listen = \"127.0.0.1:0\"\nport = 3\n").unwrap();
    let out = Command::new(bin())
        .arg("--home")
        .arg(t.path().join("home"))
        .args(["server", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    one_line_error(&err, "unknown field `port`");
}
