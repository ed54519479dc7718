//! Every drive busy: the server runs a job on each free drive at once, gives a job
//! of several streams several drives when no other job waits for one, and never
//! puts two jobs on one drive or one cartridge.

use crate::common::server_kit::{admin_token, client_tree, token, Server};
use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

/// A home whose library has `drives` plain virtual drives, `n` client tokens
/// `c0`, `c1`, ..., an admin token, and a server that sends each job to a drive as
/// soon as it is let in (a start rate of 0).
fn site(t: &Path, drives: u32, n: usize) -> (PathBuf, Vec<String>, String, Server) {
    let home = t.join("home");
    library(&home, drives, 8, "1G");
    let tokens = (0..n).map(|i| token(&home, &format!("c{i}"))).collect();
    let admin = admin_token(&home, "admin");
    let config = t.join("server.toml");
    std::fs::write(&config, "[queue]\nstart_rate_mb_s = 0\n").unwrap();
    let s = Server::start(&home, Some(&config));
    (home, tokens, admin, s)
}

/// Waits for every client while watching the queue: (each one's document, the
/// most drives seen writing at once, the most jobs seen writing at once).
fn watch(s: &Server, admin: &str, clients: Vec<Child>) -> (Vec<Value>, u64, usize) {
    let (mut busy, mut writing) = (0, 0);
    let mut clients: Vec<Option<Child>> = clients.into_iter().map(Some).collect();
    let mut docs = vec![Value::Null; clients.len()];
    let until = Instant::now() + Duration::from_secs(300);
    while clients.iter().any(Option::is_some) {
        assert!(Instant::now() < until, "the clients did not end");
        let q = s.json(admin, &["queue"]);
        busy = busy.max(q["drives_busy"].as_u64().unwrap());
        let w = (q["queue"].as_array().unwrap().iter())
            .filter(|e| e["state"] == "writing")
            .count();
        writing = writing.max(w);
        for (i, c) in clients.iter_mut().enumerate() {
            if c.as_mut().is_some_and(|c| c.try_wait().unwrap().is_some()) {
                let (code, doc, err) = parse(c.take().unwrap().wait_with_output().unwrap());
                assert_eq!(code, 0, "client {i}: {err}");
                docs[i] = doc;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    (docs, busy, writing)
}

/// A drive's data span: (first data block, last), Unix nanoseconds.
fn span(drive: &Value) -> (i64, i64) {
    let s = drive["data_span_ns"].as_array().expect("a data span");
    (s[0].as_i64().unwrap(), s[1].as_i64().unwrap())
}

/// Restores job `doc` through the server with `token` and compares it with `src`.
fn restores_through(s: &Server, token: &str, doc: &Value, src: &Path, out: &Path) {
    let job = doc["job_id"].as_i64().unwrap().to_string();
    let (code, _, err) = s.client(token, &["restore", &job, "--to", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_same_tree(src, out);
}

#[test]
fn each_drive_writes_a_job_at_once() {
    // Three clients held to 2 MB/s (each job lasts seconds) on two drives: two
    // jobs write at once, each on a drive and a cartridge of its own, and the
    // third takes the first drive that is free.
    let t = tempfile::tempdir().unwrap();
    let (home, tokens, admin, s) = site(t.path(), 2, 3);
    let srcs: Vec<PathBuf> = (0..3).map(|i| t.path().join(format!("src{i}"))).collect();
    for (i, src) in srcs.iter().enumerate() {
        client_tree(src, i as u64 + 1, 6_000_000);
    }
    let clients = (srcs.iter().zip(&tokens))
        .map(|(src, tok)| s.spawn_backup(tok, src, Some("2MB")))
        .collect();
    let (docs, busy, writing) = watch(&s, &admin, clients);
    assert_eq!(busy, 2, "drives seen writing at once");
    assert_eq!(writing, 2, "jobs seen writing at once");
    let drives: Vec<&Value> = docs.iter().map(|d| &d["drives"][0]).collect();
    for (i, d) in docs.iter().enumerate() {
        assert_eq!(d["status"], "ok", "client {i}: {d}");
        assert_eq!(d["drives"].as_array().unwrap().len(), 1, "{d}");
    }
    // Some two jobs wrote at once: their data spans overlap, on two drives and
    // two cartridges.
    let overlapping = (0..3)
        .flat_map(|a| (a + 1..3).map(move |b| (a, b)))
        .find(|&(a, b)| {
            let (x, y) = (span(drives[a]), span(drives[b]));
            x.0 < y.1 && y.0 < x.1
        });
    let (a, b) = overlapping.unwrap_or_else(|| panic!("no two jobs wrote at once: {docs:?}"));
    assert_ne!(drives[a]["drive"], drives[b]["drive"], "{docs:?}");
    assert_ne!(drives[a]["volumes"], drives[b]["volumes"], "{docs:?}");
    for (i, d) in docs.iter().enumerate() {
        restores_through(
            &s,
            &tokens[i],
            d,
            &srcs[i],
            &t.path().join(format!("out{i}")),
        );
    }
    drop(s);
    let check = ok(&home, &["catalog", "check"]);
    assert_eq!(check["ok"], true, "{check}");
    for d in &docs {
        let job = d["job_id"].as_i64().unwrap().to_string();
        assert_eq!(ok(&home, &["verify", &job])["ok"], true, "job {job}");
    }
}

#[test]
fn a_job_of_several_streams_takes_the_free_drives() {
    // One client's job of two sources, alone on a two-drive server: both drives
    // write it.
    let t = tempfile::tempdir().unwrap();
    let (home, tokens, _admin, s) = site(t.path(), 2, 1);
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    client_tree(&a, 1, 3_000_000);
    client_tree(&b, 2, 3_000_000);
    let args = ["--json", "backup", a.to_str().unwrap(), b.to_str().unwrap()];
    let (code, out, err) = s.client(&tokens[0], &args);
    assert_eq!(code, 0, "{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["status"], "ok", "{doc}");
    let drives = doc["drives"].as_array().unwrap();
    assert_eq!(drives.len(), 2, "{doc}");
    assert_ne!(drives[0]["drive"], drives[1]["drive"], "{doc}");
    let out = t.path().join("out");
    let job = doc["job_id"].as_i64().unwrap().to_string();
    let (code, _, err) = s.client(
        &tokens[0],
        &["restore", &job, "--to", out.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    assert_same_tree(&a, &out.join("a"));
    assert_same_tree(&b, &out.join("b"));
    drop(s);
    assert_eq!(ok(&home, &["verify", &job])["ok"], true);
}
