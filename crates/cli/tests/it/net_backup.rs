//! `tapeloom backup --server`: a client packs its tree and the server writes it
//! to its library, records the job for the client's token, and restores and
//! verifies it as a local job; a client that sends a bad block or goes away fails
//! its job and no other.

use crate::common::server_kit::{
    self, frame, home_with_clients, send_and_go, send_stream, stream_head, Server,
};
use crate::common::*;
use std::path::Path;
use std::time::{Duration, Instant};

/// The catalog's id of the job named `name` (waiting up to 20 s for the server to
/// record it).
fn job_named(home: &Path, name: &str) -> i64 {
    let q = format!("SELECT id FROM jobs WHERE name = '{name}'");
    for _ in 0..200 {
        let rows = sql(home, &q);
        if let Some(id) = rows.first().and_then(|r| r[0].as_deref()) {
            return id.parse().unwrap();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("no job {name} in the catalog");
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
    // The same document as a local backup's, but for the way: the server
    // receives every client's streams onto its stage.
    for k in ["files", "bytes", "level"] {
        assert_eq!(doc[k], local[k], "{k}");
    }
    assert_eq!(
        (local["via"].as_str(), doc["via"].as_str()),
        (Some("direct"), Some("stage"))
    );
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
    // As root the client runs as another user, through setpriv.
    if is_root() && !need(program("setpriv", "util-linux")) {
        return;
    }
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

/// Begins a job for `token` by hand: (backup, block size).
fn begin(s: &Server, token: &str, name: &str) -> (u64, usize) {
    let v = server_kit::begin(s, token, name, None);
    (
        v["backup"].as_u64().unwrap(),
        v["block_size"].as_u64().unwrap() as usize,
    )
}

#[test]
fn a_malformed_stream_fails_its_job_and_others_are_served() {
    let (t, home, alice, bob) = home_with_clients();
    // A short timeout: a stream whose connection broke off waits two of them for
    // its client to send it again.
    let config = t.path().join("server.toml");
    std::fs::write(&config, "[limits]\ntimeout_seconds = 2\n").unwrap();
    let s = Server::start(&home, Some(&config));
    // A damaged block: its CRC does not hold.
    let (job, block_size) = begin(&s, &alice, "damaged");
    let mut body = frame(&noise(5, block_size));
    body.extend_from_slice(&0u32.to_le_bytes());
    let answer = send_stream(&s.addr, job, &alice, &body);
    assert!(answer.starts_with("HTTP/1.1 409"), "{answer}");
    assert!(answer.contains("stream 1, block 0"), "{answer}");
    // Another client may not send a job's streams.
    let (job2, _) = begin(&s, &alice, "oversized");
    let answer = send_stream(&s.addr, job2, &bob, &frame(b"x"));
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    // A frame longer than any block of the job.
    let answer = send_stream(&s.addr, job2, &alice, &u32::MAX.to_le_bytes());
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    // A client that goes away midway through a frame.
    let (job3, _) = begin(&s, &alice, "cut");
    let mut part = stream_head(job3, 1, &alice);
    let mut cut = 1000u32.to_le_bytes().to_vec();
    cut.extend_from_slice(&[0; 10]);
    part.extend_from_slice(&server_kit::chunk_start(1004, &cut));
    send_and_go(&s.addr, &part);
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
        let mut state = job_state(&home, j);
        let until = Instant::now() + Duration::from_secs(30);
        while state.0 == "running" && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(200));
            state = job_state(&home, j);
        }
        let (status, reasons) = state;
        assert_eq!(status, "failed", "job {j}");
        assert!(
            reasons.iter().any(|r| r.contains(why)),
            "job {j}: {reasons:?}"
        );
    }
    let log = s.log_with(&["failed"]);
    assert!(log.contains("failed"), "{log}");
}
