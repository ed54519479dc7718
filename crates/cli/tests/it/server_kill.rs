//! A server killed (SIGKILL) while one job is on its drive and another still comes
//! in from its client: each client fails at once with a clear error; started
//! again, the server writes both from its stage (the whole one ok and identical,
//! the cut one partial and naming its stream), the jobs before verify and
//! restore, and new jobs go on the same cartridges.

use crate::common::server_kit::{self, admin_token, client_tree, token, Server};
use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

/// A home whose library has one LTO-3 drive at a twentieth of its speed (4 MB/s)
/// on the real clock, so that a job stays on the drive for seconds; the client
/// tokens `c0` and `c1` and an admin's.
fn slow_home(t: &Path) -> (PathBuf, [String; 3]) {
    let home = t.join("home");
    server_kit::slow_library(&home);
    let tokens = [
        token(&home, "c0"),
        token(&home, "c1"),
        admin_token(&home, "admin"),
    ];
    (home, tokens)
}

/// The queue's entry of the job named `name` once `ready` holds of it (waiting
/// up to `secs`).
fn entry_when(
    s: &Server,
    admin: &str,
    name: &str,
    secs: u64,
    ready: impl Fn(&Value) -> bool,
) -> Value {
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        let q = s.json(admin, &["queue"]);
        let e = (q["queue"].as_array().unwrap().iter()).find(|e| e["name"] == name);
        if let Some(e) = e.filter(|e| ready(e)) {
            return e.clone();
        }
        assert!(Instant::now() < until, "job {name} never got there: {q}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The client's exit code and stderr, once it ended (within 30 s of the kill).
fn ended(mut c: Child) -> (i32, String) {
    let until = Instant::now() + Duration::from_secs(30);
    while c.try_wait().unwrap().is_none() {
        assert!(Instant::now() < until, "the client still runs");
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = c.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().unwrap_or(-1), err)
}

/// The catalog's jobs: (id, name, status, reasons).
fn jobs_with_reasons(home: &Path) -> Vec<(i64, String, String, Vec<String>)> {
    (catalog_jobs(home).into_iter())
        .map(|(id, name, status)| (id, name, status, job_state(home, id).1))
        .collect()
}

/// Waits (up to `secs`) until no job of the catalog is running or has chunks
/// left on the stages: the jobs a restarted server resumes have ended.
fn wait_resumed(home: &Path, secs: u64) -> Vec<(i64, String, String, Vec<String>)> {
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        let left = server_kit::spooled_chunks(home);
        let cat = jobs_with_reasons(home);
        if left == 0 && cat.iter().all(|j| j.2 != "running") {
            return cat;
        }
        assert!(Instant::now() < until, "not resumed: {cat:?}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn a_killed_server_writes_what_it_had_received_when_it_starts_again() {
    let t = tempfile::tempdir().unwrap();
    let (home, [c0, c1, admin]) = slow_home(t.path());
    let mut s = Server::start(&home, None);
    // The earlier job, whole on tape before the kill.
    let earlier = t.path().join("earlier");
    client_tree(&earlier, 1, 300_000);
    let doc = s.json(&c0, &["backup", earlier.to_str().unwrap()]);
    assert_eq!(doc["status"], "ok", "{doc}");
    let earlier_job = doc["job_id"].as_i64().unwrap().to_string();
    // (b) a slow client's (1 MB/s, below the drive's lowest step): its blocks
    // wait on the stage, and its stream is cut by the kill.
    let receiving = t.path().join("receiving");
    client_tree(&receiving, 3, 30_000_000);
    let b = s.spawn_backup(&c1, &receiving, Some("1MB"));
    entry_when(&s, &admin, "receiving", 30, |e| {
        e["state"] == "receiving" && e["received_bytes"].as_u64() > Some(1_500_000)
    });
    // (a) a fast client's job, whole on the stage at once and on the drive for
    // seconds (16 MB at 4 MB/s);
    let writing = t.path().join("writing");
    client_tree(&writing, 2, 16_000_000);
    let a = s.spawn_backup(&c0, &writing, None);
    let on_drive = entry_when(&s, &admin, "writing", 60, |e| {
        e["state"] == "writing" && e["job"].is_i64() && e["written_bytes"].as_u64() > Some(0)
    });
    let cut = entry_when(&s, &admin, "receiving", 1, |_| true);
    assert_eq!(
        cut["state"], "receiving",
        "the slow job is not receiving: {cut}"
    );
    let still = entry_when(&s, &admin, "writing", 1, |_| true);
    assert_eq!(still["state"], "writing", "the job left the drive: {still}");
    // The writing job's stream was acknowledged whole; the log says so first.
    let log = s.log();
    let whole = format!("job={} stream=1", on_drive["job"]);
    assert!(
        log.lines()
            .any(|l| l.contains("whole on the stage") && l.contains(&whole)),
        "{log}"
    );
    s.kill9();
    // Each client fails at once with one line that names the server it lost.
    for (who, c) in [("writing", a), ("receiving", b)] {
        let (code, err) = ended(c);
        eprintln!("the {who} client's error: {}", err.trim());
        assert_ne!(code, 0, "{who}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{who}: {err}");
        assert!(err.starts_with("tapeloom: "), "{who}: {err}");
        assert!(err.contains(&s.addr), "{who}: {err}");
        let plain = ["closed the connection", "Connection refused", "reset"];
        assert!(plain.iter().any(|p| err.contains(p)), "{who}: {err}");
    }
    // Started again (on another port), the server writes both jobs from the
    // stage: the whole one ends ok, the cut one partial, naming its stream.
    let s2 = Server::start(&home, None);
    let cat = wait_resumed(&home, 180);
    let names: Vec<&str> = cat.iter().map(|j| j.1.as_str()).collect();
    assert_eq!(names, ["earlier", "receiving", "writing"], "{cat:?}");
    let job = |name: &str| cat.iter().find(|j| j.1 == name).expect(name).clone();
    let w = job("writing");
    assert_eq!(on_drive["job"].as_i64(), Some(w.0));
    assert_eq!(w.2, "ok", "{w:?}");
    let r = job("receiving");
    assert_eq!(r.2, "partial", "{r:?}");
    assert!(
        r.3.iter()
            .any(|why| why.contains("stopped while this stream was spooling")),
        "{r:?}"
    );
    let out = t.path().join("out-writing");
    let (code, _, err) = s2.client(
        &c0,
        &["restore", &w.0.to_string(), "--to", out.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    assert_same_tree(&writing, &out);
    // Of the cut job, what was restored is identical to its source.
    let out = t.path().join("out-receiving");
    let _ = s2.client(
        &c1,
        &["restore", &r.0.to_string(), "--to", out.to_str().unwrap()],
    );
    let restored: Vec<PathBuf> = if out.exists() {
        tree(&out).into_values().filter(|f| f.is_file()).collect()
    } else {
        Vec::new()
    };
    for f in &restored {
        let rel = f.strip_prefix(&out).unwrap();
        let same = std::fs::read(f).unwrap() == std::fs::read(receiving.join(rel)).unwrap();
        assert!(same, "{rel:?} differs from its source");
    }
    eprintln!("the cut job restored {} files identical", restored.len());
    // The earlier job verifies and restores identical through the new server.
    let v = ok(&home, &["verify", &earlier_job]);
    assert_eq!(v["ok"], true, "{v}");
    let out = t.path().join("out");
    let (code, _, err) = s2.client(
        &c0,
        &["restore", &earlier_job, "--to", out.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    assert_same_tree(&earlier, &out);
    // A new job goes on, after what the killed one left on the cartridge.
    let after = t.path().join("after");
    client_tree(&after, 4, 2_000_000);
    let doc = s2.json(&c1, &["backup", after.to_str().unwrap()]);
    assert_eq!(doc["status"], "ok", "{doc}");
    let job = doc["job_id"].as_i64().unwrap().to_string();
    let v = ok(&home, &["verify", &job]);
    assert_eq!(v["ok"], true, "{v}");
    let out = t.path().join("out-after");
    let (code, _, err) = s2.client(&c1, &["restore", &job, "--to", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_same_tree(&after, &out);
}

/// Three clients send everything to a one-drive server, which is then killed.
/// From its restart on, the jobs waiting on the stage are listed as queued
/// (saying why), never as failed, while the server resumes them one after
/// another; all three end ok and restore identical.
#[test]
fn jobs_a_killed_server_will_resume_are_queued_never_failed() {
    let t = tempfile::tempdir().unwrap();
    let (home, [c0, c1, admin]) = slow_home(t.path());
    let c2 = token(&home, "c2");
    let mut s = Server::start(&home, None);
    let mut sent = Vec::new();
    for (i, tok) in [&c0, &c1, &c2].into_iter().enumerate() {
        let src = t.path().join(format!("src{i}"));
        client_tree(&src, i as u64 + 1, 12_000_000);
        let child = s.spawn_backup(tok, &src, None);
        sent.push((tok.clone(), src, child));
    }
    // Every job's streams whole on the stage (the drive writes the first).
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let log = s.log();
        let whole: std::collections::HashSet<&str> = (log.lines())
            .filter(|l| l.contains("whole on the stage"))
            .filter_map(|l| l.split_whitespace().find(|w| w.starts_with("job=")))
            .collect();
        if whole.len() == 3 {
            break;
        }
        assert!(Instant::now() < until, "not all on the stage:\n{log}");
        std::thread::sleep(Duration::from_millis(20));
    }
    s.kill9();
    let sent: Vec<(String, PathBuf)> = (sent.into_iter())
        .map(|(tok, src, c)| {
            let _ = ended(c);
            (tok, src)
        })
        .collect();
    let s2 = Server::start(&home, None);
    // From the restart until all three ended: never failed.
    let until = Instant::now() + Duration::from_secs(180);
    let mut seen_queued = false;
    let mut seen = Vec::new();
    let cat = loop {
        let jobs = s2.json(&admin, &["jobs"]);
        let list = jobs["jobs"].as_array().unwrap().clone();
        let now: Vec<String> = list.iter().map(|j| j["status"].to_string()).collect();
        if seen.last() != Some(&now) {
            seen.push(now);
        }
        for j in &list {
            assert_ne!(j["status"], "failed", "{j}");
            if j["status"] == "queued" {
                seen_queued = true;
                let why = j["why"].as_str().unwrap_or_default();
                assert!(why.contains("waits to be resumed"), "{j}");
            }
        }
        if list.len() == 3 && list.iter().all(|j| j["status"] == "ok") {
            break list;
        }
        assert!(Instant::now() < until, "not resumed: {jobs}\n{}", s2.log());
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        seen_queued,
        "no job was seen waiting: {seen:?}\n{}",
        s2.log()
    );
    for (i, (tok, src)) in sent.iter().enumerate() {
        let mine = (cat.iter()).find(|j| j["client"] == format!("c{i}").as_str());
        let job = mine.expect("a job of each client")["job_id"].to_string();
        let out = t.path().join(format!("out{i}"));
        let (code, _, err) = s2.client(tok, &["restore", &job, "--to", out.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        assert_same_tree(src, &out);
    }
}
