//! The server as a daemon: SIGTERM drains it (no new job, the running ones ended
//! or left on the stage, exit 0 within 30 s; the next start writes them), and a
//! panic in the drives' writer fails only its job.

use crate::common::server_kit::{self, admin_token, home_with_clients, Server};
use crate::common::{self, catalog_jobs, job_state, ok, write};
use std::path::Path;
use std::time::Duration;

/// Every job of the catalog: (id, name, status).
fn jobs(home: &Path) -> Vec<(i64, String, String)> {
    catalog_jobs(home)
}

/// A tree of `files` files of `size` bytes under `dir`.
fn tree(dir: &Path, files: usize, size: usize) {
    for i in 0..files {
        write(
            &dir.join(format!("f{i}")),
            &common::noise(i as u64 + 1, size),
        );
    }
}

/// Waits (up to `secs`) until no job of the catalog is running or failed with
/// chunks left on the stages: the jobs a server resumes after its start.
fn wait_resumed(home: &Path, secs: u64) -> Vec<(i64, String, String)> {
    let until = std::time::Instant::now() + Duration::from_secs(secs);
    loop {
        let left = server_kit::spooled_chunks(home);
        let all = jobs(home);
        if left == 0 && all.iter().all(|(_, _, st)| st != "running") {
            return all;
        }
        assert!(std::time::Instant::now() < until, "not resumed: {all:?}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn sigterm_drains_running_jobs_refuses_new_ones_and_exits_zero() {
    let (t, home, alice, bob) = home_with_clients();
    let admin = admin_token(&home, "root");
    // A slow drive (4 MB/s): the jobs are still on it when the signal comes.
    server_kit::slow_library(&home);
    let mut s = Server::start(&home, None);
    let srcs: Vec<std::path::PathBuf> = (0..4).map(|i| t.path().join(format!("s{i}"))).collect();
    for (i, src) in srcs.iter().enumerate() {
        tree(src, 2 + i, 1 << 20);
    }
    let url = (s.url.clone(), s.fingerprint.clone());
    let client = |token: String, src: std::path::PathBuf, name: String| {
        let url = url.clone();
        std::thread::spawn(move || {
            let args = ["backup", "--name", &name, src.to_str().unwrap()];
            server_kit::client_command(&url.0, &url.1, &token, &args)
                .output()
                .unwrap()
        })
    };
    let running: Vec<_> = (srcs.iter().enumerate())
        .map(|(i, src)| {
            let token = if i.is_multiple_of(2) { &alice } else { &bob };
            client(token.clone(), src.clone(), format!("j{i}"))
        })
        .collect();
    // The four are let in before the signal, one of them on the drive.
    let started = std::time::Instant::now();
    loop {
        let q = s.json(&admin, &["queue"]);
        let entries = q["queue"].as_array().unwrap();
        let busy = (entries.iter())
            .filter(|e| e["state"] == "receiving" || e["state"] == "writing")
            .count();
        let writing = entries.iter().any(|e| e["state"] == "writing");
        if busy == 4 && writing {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{q}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let pid = s.pid();
    let stopper = std::thread::spawn(move || {
        let r = s.term(Duration::from_secs(30));
        (r, s)
    });
    // While it drains, a new job is refused with a retry hint.
    std::thread::sleep(Duration::from_millis(300));
    let c = t.path().join("c");
    tree(&c, 1, 1000);
    let late = client(alice.clone(), c, "late".into()).join().unwrap();
    let err = String::from_utf8_lossy(&late.stderr);
    assert_ne!(late.status.code(), Some(0), "{err}");
    assert!(
        err.contains("stopping") || err.contains("connect"),
        "a job asked while the server stops: {err}"
    );
    let (ended, s) = stopper.join().unwrap();
    let (code, took) = ended.unwrap_or_else(|| panic!("server {pid} still ran 30 s after SIGTERM"));
    assert_eq!(code, 0, "{}", s.log());
    assert!(took < Duration::from_secs(30), "{took:?}");
    eprintln!("the server drained and exited 0 in {took:?}");
    for r in running {
        let _ = r.join().unwrap();
    }
    let log = s.log();
    assert!(log.contains("SIGTERM"), "{log}");
    // Started again, the server writes what the stopped one left on the stage:
    // every job ends ok, none for the job refused.
    let s2 = Server::start(&home, None);
    let all = wait_resumed(&home, 180);
    assert!(all.iter().all(|(_, n, _)| n != "late"), "{all:?}");
    assert_eq!(all.len(), 4, "{all:?}");
    for (id, name, status) in &all {
        assert_eq!(
            status,
            "ok",
            "job {id} ({name}): {:?}",
            job_state(&home, *id)
        );
        let i: usize = name.trim_start_matches('j').parse().unwrap();
        let token = if i.is_multiple_of(2) { &alice } else { &bob };
        let to = t.path().join(format!("restored-{i}"));
        let (code, _, err) = s2.client(
            token,
            &["restore", &id.to_string(), "--to", to.to_str().unwrap()],
        );
        assert_eq!(code, 0, "{err}");
        common::assert_same_tree(&srcs[i], &to);
    }
    drop(s2);
    let check = ok(&home, &["catalog", "check"]);
    assert_eq!(check["ok"], true, "{check}");
}

#[test]
fn a_panic_in_the_drives_writer_fails_its_job_and_the_next_completes() {
    if !common::test_hooks() {
        return;
    }
    let (t, home, alice, _bob) = home_with_clients();
    let admin = admin_token(&home, "root");
    let s = Server::start_with_env(&home, None, &[("TAPELOOM_TEST_PANIC_JOB", "boom")]);
    let src = t.path().join("src");
    tree(&src, 3, 10_000);
    let (code, _, err) = s.client(&alice, &["backup", "--name", "boom", src.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("panicked"), "{err}");
    // The job is recorded failed with the panic's reason.
    let all = jobs(&home);
    let (id, _, status) = all.iter().find(|(_, n, _)| n == "boom").expect("job boom");
    assert_eq!(status, "failed");
    let (_, reasons) = job_state(&home, *id);
    assert!(
        reasons.iter().any(|r| r.contains("panicked")),
        "{reasons:?}"
    );
    // Counted, and the next job on the same server completes and restores.
    let (status, text) = server_kit::get(&s.addr, "/metrics", Some(&admin));
    assert_eq!(status, 200);
    assert!(
        text.lines()
            .any(|l| l.starts_with("tapeloom_server_panics_total{thread=\"drive_writer\"} 1")),
        "{text}"
    );
    let doc = s.json(
        &alice,
        &["backup", "--name", "after", src.to_str().unwrap()],
    );
    assert_eq!(doc["status"], "ok", "{doc}");
    let to = t.path().join("restored");
    let job = doc["job_id"].to_string();
    let r = s.json(&alice, &["restore", &job, "--to", to.to_str().unwrap()]);
    // The folder and its three files.
    assert_eq!(r["files"], 4, "{r}");
    common::assert_same_tree(&src, &to);
}
