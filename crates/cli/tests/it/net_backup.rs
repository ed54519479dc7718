//! `tapeloom backup --server`: a client packs its tree and the server writes it
//! to its library, records the job for the client's token, and restores and
//! verifies it as a local job; a client that sends a bad block or goes away fails
//! its job and no other.

use crate::common::server_kit;
use crate::common::server_kit::{exchange, home_with_clients, Server};
use crate::common::*;
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

fn job_ids(v: &Value) -> Vec<i64> {
    let jobs = v["jobs"].as_array().unwrap();
    jobs.iter().map(|j| j["job_id"].as_i64().unwrap()).collect()
}

/// A tree of every kind of object, with files of several sizes.
fn source_tree(src: &Path) {
    rich_tree(src);
    for (i, len) in [1usize, 4095, 65_536, 300_001, 1 << 20]
        .into_iter()
        .enumerate()
    {
        write(&src.join(format!("sizes/f{i}")), &noise(10 + i as u64, len));
    }
}

/// The job's status in the catalog, and its errors' reasons.
/// The catalog's id of the job named `name` (waiting up to 20 s for the server to
/// record it).
fn job_named(home: &Path, name: &str) -> i64 {
    let db = rusqlite::Connection::open(home.join("catalog.sqlite")).unwrap();
    for _ in 0..200 {
        let id = db.query_row("SELECT id FROM jobs WHERE name = ?1", [name], |r| r.get(0));
        if let Ok(id) = id {
            return id;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("no job {name} in the catalog");
}

fn job_state(home: &Path, job: i64) -> (String, Vec<String>) {
    let db = rusqlite::Connection::open(home.join("catalog.sqlite")).unwrap();
    let status: String = db
        .query_row("SELECT status FROM jobs WHERE id = ?1", [job], |r| r.get(0))
        .unwrap();
    let mut st = db
        .prepare("SELECT reason FROM job_errors WHERE job_id = ?1")
        .unwrap();
    let reasons = st
        .query_map([job], |r| r.get(0))
        .unwrap()
        .collect::<Result<Vec<String>, _>>()
        .unwrap();
    (status, reasons)
}

#[test]
fn a_clients_backup_restores_identical_on_the_server() {
    let (t, home, alice, bob) = home_with_clients();
    let src = t.path().join("src");
    source_tree(&src);
    let src_arg = src.to_str().unwrap();
    // The same tree backed up on the server's machine, for the figure (in a set of
    // its own: a client's sets hold only its jobs).
    let t0 = Instant::now();
    let local = ok(&home, &["backup", src_arg, "--set", "here"]);
    let local_s = t0.elapsed().as_secs_f64();
    let s = Server::start(&home, None);
    let t0 = Instant::now();
    let doc = s.json(&alice, &["backup", src_arg]);
    let net_s = t0.elapsed().as_secs_f64();
    eprintln!(
        "backup of {} bytes: local {local_s:.2} s, through the server on loopback {net_s:.2} s",
        doc["bytes"]
    );
    assert_eq!(doc["status"], "ok", "{doc}");
    // The same document as a local backup's.
    for k in ["files", "bytes", "level", "via"] {
        assert_eq!(doc[k], local[k], "{k}");
    }
    assert_eq!(doc["set"], "src", "{doc}");
    let job = doc["job_id"].as_i64().unwrap();
    assert!(job_ids(&s.json(&alice, &["jobs"])).contains(&job));
    assert!(!job_ids(&s.json(&bob, &["jobs"])).contains(&job));
    // The human form is a local backup's line.
    let (code, out, err) = s.client(&alice, &["backup", src_arg]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with(&format!("job {} ok: ", job + 1)), "{out}");
    let out_dir = t.path().join("out");
    restores_identical(&home, &job.to_string(), &src, &out_dir);
    let v = ok(&home, &["verify", &job.to_string()]);
    assert_eq!(v["ok"], true, "{v}");
}

#[test]
fn several_sources_are_streams_of_one_job() {
    let (t, home, alice, _) = home_with_clients();
    let (a, b) = (t.path().join("alpha"), t.path().join("beta"));
    source_tree(&a);
    for i in 0..50u64 {
        write(
            &b.join(format!("d{}/f{i}", i % 7)),
            &noise(i, (i as usize) * 3001),
        );
    }
    let s = Server::start(&home, None);
    let doc = s.json(
        &alice,
        &["backup", a.to_str().unwrap(), b.to_str().unwrap()],
    );
    assert_eq!(doc["status"], "ok", "{doc}");
    assert_eq!(doc["streams"].as_array().unwrap().len(), 2, "{doc}");
    let job = doc["job_id"].as_i64().unwrap().to_string();
    let out = t.path().join("out");
    ok(&home, &["restore", &job, "--to", out.to_str().unwrap()]);
    assert_same_tree(&a, &out.join("alpha"));
    assert_same_tree(&b, &out.join("beta"));
}

#[test]
fn objects_a_client_cannot_read_make_its_job_partial() {
    use std::os::unix::fs::PermissionsExt;
    let (t, home, alice, _) = home_with_clients();
    let src = t.path().join("src");
    write(&src.join("ok1"), b"one");
    write(&src.join("secret"), b"nobody may read this");
    std::fs::create_dir_all(src.join("closed")).unwrap();
    write(&src.join("closed/inner"), b"x");
    let mode = |p: &str, m| {
        std::fs::set_permissions(src.join(p), std::fs::Permissions::from_mode(m)).unwrap()
    };
    mode("secret", 0o000);
    mode("closed", 0o000);
    let s = Server::start(&home, None);
    let mut cmd = if is_root() {
        // Root reads everything: the client runs as an unprivileged user.
        for p in [t.path(), src.as_path()] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let mut c = std::process::Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", bin()]);
        c
    } else {
        std::process::Command::new(bin())
    };
    cmd.args(["--json", "backup", src.to_str().unwrap()]).args([
        "--server",
        &s.url,
        "--fingerprint",
        &s.fingerprint,
        "--token",
        &alice,
    ]);
    let (code, doc, err) = parse(cmd.output().unwrap());
    mode("closed", 0o755);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("is partial: 2 source objects"), "{err}");
    assert_eq!(doc["status"], "partial", "{doc}");
    let errors = doc["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 2, "{doc}");
    assert!(
        errors[0]["path"].as_str().unwrap().ends_with("/closed"),
        "{doc}"
    );
    assert!(
        errors[1]["path"].as_str().unwrap().ends_with("/secret"),
        "{doc}"
    );
    assert_eq!(err.matches("tapeloom: warning: ").count(), 2, "{err}");
    let (status, reasons) = job_state(&home, doc["job_id"].as_i64().unwrap());
    assert_eq!((status.as_str(), reasons.len()), ("partial", 2));
}

#[test]
fn flags_a_client_cannot_use_yet_are_refused_in_one_line() {
    let (t, home, alice, _) = home_with_clients();
    let src = t.path().join("src");
    write(&src.join("a"), b"a");
    let s = Server::start(&home, None);
    let args = ["backup", src.to_str().unwrap(), "--via", "stage"];
    let (code, out, err) = s.client(&alice, &args);
    assert_eq!((code, out.as_str()), (1, ""));
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--via") && err.contains("--server"), "{err}");
}

/// Begins a job for `token` by hand: (backup, tag, block size).
fn begin(s: &Server, token: &str, name: &str) -> (i64, u64, usize) {
    let body = format!(
        r#"{{"name":"{name}","set":null,"pool":null,"block_size":65536,"streams":[{{"name":"s","source":"/x/s","root":"."}}]}}"#
    );
    let req = format!(
        "POST /api/backups HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let answer = exchange(&s.addr, req.as_bytes(), Duration::ZERO);
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{answer}");
    let v: Value = serde_json::from_str(body).unwrap();
    (
        v["backup"].as_i64().unwrap(),
        v["tag"].as_u64().unwrap(),
        v["block_size"].as_u64().unwrap() as usize,
    )
}

/// Sends `frames` (raw bytes after the head) as stream 1 of `job`; the answer.
fn send(s: &Server, token: &str, job: i64, frames: &[u8]) -> String {
    let mut req = format!(
        "POST /api/backups/{job}/streams/1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n"
    )
    .into_bytes();
    req.extend_from_slice(frames);
    exchange(&s.addr, &req, Duration::ZERO)
}

/// Sends `frames` as stream 1 of `job` and closes the connection at once.
fn send_and_go(s: &Server, token: &str, job: i64, frames: &[u8]) {
    let sock = std::net::TcpStream::connect(&s.addr).unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(server_kit::raw::config(), name).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, sock);
    let mut req = format!(
        "POST /api/backups/{job}/streams/1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n"
    )
    .into_bytes();
    req.extend_from_slice(frames);
    std::io::Write::write_all(&mut tls, &req).unwrap();
    std::io::Write::flush(&mut tls).unwrap();
    let _ = tls.sock.shutdown(std::net::Shutdown::Both);
}

fn frame(bytes: &[u8]) -> Vec<u8> {
    let mut f = (bytes.len() as u32).to_le_bytes().to_vec();
    f.extend_from_slice(bytes);
    f
}

#[test]
fn a_malformed_stream_fails_its_job_and_others_are_served() {
    let (t, home, alice, bob) = home_with_clients();
    let s = Server::start(&home, None);
    // A damaged block: its CRC does not hold.
    let (job, _, block_size) = begin(&s, &alice, "damaged");
    let mut body = frame(&noise(5, block_size));
    body.extend_from_slice(&0u32.to_le_bytes());
    let answer = send(&s, &alice, job, &body);
    assert!(answer.starts_with("HTTP/1.1 409"), "{answer}");
    assert!(answer.contains("stream 1, block 0"), "{answer}");
    // Another client may not send a job's streams.
    let (job2, _, _) = begin(&s, &alice, "oversized");
    let answer = send(&s, &bob, job2, &frame(b"x"));
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    // A frame longer than any block of the job.
    let answer = send(&s, &alice, job2, &u32::MAX.to_le_bytes());
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    // A client that goes away midway through a frame.
    let (job3, _, _) = begin(&s, &alice, "cut");
    let mut part = 1000u32.to_le_bytes().to_vec();
    part.extend_from_slice(&[0; 10]);
    send_and_go(&s, &alice, job3, &part);
    // Each fails with its reason in the catalog; another client's backup goes on.
    let src = t.path().join("src");
    write(&src.join("a"), b"after the failures");
    let doc = s.json(&bob, &["backup", src.to_str().unwrap()]);
    assert_eq!(doc["status"], "ok", "{doc}");
    for (name, why) in [
        ("damaged", "stream 1, block 0"),
        ("oversized", "longer than any block"),
        ("cut", "the client's frames"),
    ] {
        let j = job_named(&home, name);
        let (status, reasons) = job_state(&home, j);
        assert_eq!(status, "failed", "job {j}");
        assert!(
            reasons.iter().any(|r| r.contains(why)),
            "job {j}: {reasons:?}"
        );
    }
    let log = s.log();
    assert!(log.contains("failed"), "{log}");
}
