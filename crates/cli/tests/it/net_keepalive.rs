//! A client's incremental whose walk passes over unchanged files for longer than
//! the server lets a client be silent: its streams send keepalives, and the job
//! ends well, whether it waits on the spool or is already on a drive. Each level
//! that would fail a silent client is passed: the connection's timeout (both
//! tests), the job's idle limit while it waits (on the spool) and the drive's wait
//! for its stream (on a drive).

use crate::common::server_kit::{token, Server};
use crate::common::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The server's timeout (s): a socket silent for it, or a job for four, fails.
const TIMEOUT: u64 = 1;

/// Each stream's walk begins this late: longer than a job may be silent.
const WALK_DELAY: Duration = Duration::from_millis(6 * TIMEOUT * 1000);

/// A server on `home` with the short timeout and start rate `rate` (0: a job goes
/// to a drive at once; high: it waits on the spool until all its streams are in).
fn server(t: &Path, home: &Path, rate: u32) -> Server {
    let config = t.join(format!("server-{rate}.toml"));
    let text =
        format!("[limits]\ntimeout_seconds = {TIMEOUT}\n[queue]\nstart_rate_mb_s = {rate}\n");
    std::fs::write(&config, text).unwrap();
    Server::start(home, Some(&config))
}

/// `tapeloom --json backup SRC --set web --level LEVEL` through `s`, each
/// stream's walk begun `delay` late; the document and how long it took.
fn backup(s: &Server, token: &str, src: &Path, level: &str, delay: Duration) -> (Value, Duration) {
    let t0 = Instant::now();
    let out = Command::new(bin())
        .args(["--json", "backup", src.to_str().unwrap()])
        .args(["--set", "web", "--level", level])
        .args(["--server", &s.url, "--fingerprint", &s.fingerprint])
        .args(["--token", token])
        .env_remove("TAPELOOM_SERVER")
        .env("TAPELOOM_TEST_WALK_DELAY_MS", delay.as_millis().to_string())
        .output()
        .unwrap();
    let took = t0.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{level}: {err}\n{}", s.log());
    (serde_json::from_slice(&out.stdout).unwrap(), took)
}

/// A full, a change, then an incremental whose walk sends nothing for
/// [`WALK_DELAY`]; it ends ok and the set restores as the tree is.
fn a_long_walk_keeps_its_job(rate: u32) {
    if !test_hooks() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let alice = token(&home, "alice");
    let src = t.path().join("src");
    for i in 0..12 {
        write(
            &src.join(format!("d{}/f{i}", i % 3)),
            &noise(i, 3000 + 97 * i as usize),
        );
    }
    let s = server(t.path(), &home, rate);
    let (full, _) = backup(&s, &alice, &src, "full", Duration::ZERO);
    assert_eq!(full["status"], "ok", "{full}");
    write(&src.join("d1/f4"), b"changed since the full");

    let (inc, took) = backup(&s, &alice, &src, "incremental", WALK_DELAY);
    assert_eq!(inc["status"], "ok", "{inc}");
    assert_eq!(inc["level"], "incremental", "{inc}");
    assert_eq!(inc["source_files_opened"], 1, "{inc}");
    // Silent for longer than the job's idle limit (four timeouts) and than each
    // socket's: only its keepalives kept it.
    assert!(took >= WALK_DELAY, "the walk took {took:?}");
    assert!(WALK_DELAY > Duration::from_secs(4 * TIMEOUT));
    assert!(!s.log().contains("sent nothing"), "{}", s.log());

    let out = t.path().join("out");
    ok(
        &home,
        &["restore", "--set", "web", "--to", out.to_str().unwrap()],
    );
    assert_same_tree(&src, &out);
}

#[test]
fn a_long_walk_of_unchanged_files_keeps_its_job_on_the_spool() {
    a_long_walk_keeps_its_job(10_000);
}

#[test]
fn a_long_walk_of_unchanged_files_keeps_its_job_on_a_drive() {
    a_long_walk_keeps_its_job(0);
}
