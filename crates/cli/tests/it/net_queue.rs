//! Many clients at once: their jobs wait in the server's queue under its limits,
//! slow clients' blocks wait on the spool until their job is whole, and the drive
//! writes one job after another without waiting for any client.

use crate::common::server_kit::{self, admin_token, begin, client_tree, token, Server};
use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

/// A home whose library has one LTO-3 drive at a twentieth of its speed (4 MB/s,
/// its lowest step 1.35 MB/s, a 6.4 MB buffer) on the real clock, so a drive left
/// without data stops and backhitches as it would; and `n` client tokens `c0`,
/// `c1`, ...
fn lto3_home(t: &Path, n: usize) -> (PathBuf, Vec<String>) {
    let home = t.join("home");
    server_kit::slow_library(&home);
    let tokens = (0..n).map(|i| token(&home, &format!("c{i}"))).collect();
    (home, tokens)
}

/// A slow client's data: more than a job's buffers (64 blocks of 256 KiB, the
/// writer starting at half) and the drive's buffer hold, so that a drive fed at
/// the client's pace runs dry again and again.
const BIG: usize = 24_000_000;

/// The admin's view of the queue.
fn queue(s: &Server, admin: &str) -> Value {
    s.json(admin, &["queue"])
}

fn count(q: &Value, states: &[&str]) -> usize {
    let e = q["queue"].as_array().unwrap();
    (e.iter())
        .filter(|e| states.iter().any(|s| e["state"] == *s))
        .count()
}

/// Waits for every client, watching the queue meanwhile: (each one's document, the
/// most jobs seen let in (receiving or writing) at once, the most seen waiting at
/// once).
fn watch(s: &Server, admin: &str, clients: Vec<Child>) -> (Vec<Value>, usize, usize) {
    let (mut receiving, mut waiting) = (0, 0);
    let mut clients: Vec<Option<Child>> = clients.into_iter().map(Some).collect();
    let mut docs = vec![Value::Null; clients.len()];
    let until = Instant::now() + Duration::from_secs(600);
    while clients.iter().any(Option::is_some) {
        assert!(Instant::now() < until, "the clients did not end");
        let q = queue(s, admin);
        receiving = receiving.max(count(&q, &["receiving", "writing"]));
        waiting = waiting.max(count(&q, &["waiting"]));
        for (i, c) in clients.iter_mut().enumerate() {
            if c.as_mut().is_some_and(|c| c.try_wait().unwrap().is_some()) {
                let (code, doc, err) = parse(c.take().unwrap().wait_with_output().unwrap());
                assert_eq!(code, 0, "client {i}: {err}");
                docs[i] = doc;
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    (docs, receiving, waiting)
}

#[test]
fn slow_clients_wait_on_the_spool_and_the_drive_streams() {
    // Four clients at 1 MB/s each, below the drive's lowest step alone
    // (`bench/clients.py` runs sixteen at 2 MB/s on a drive at a quarter).
    let t = tempfile::tempdir().unwrap();
    let (home, tokens) = lto3_home(t.path(), 4);
    let admin = admin_token(&home, "admin");
    let s = Server::start(&home, None);
    let srcs: Vec<PathBuf> = (0..4).map(|i| t.path().join(format!("src{i}"))).collect();
    for (i, src) in srcs.iter().enumerate() {
        client_tree(src, i as u64 + 1, BIG);
    }
    let clients = (srcs.iter().zip(&tokens))
        .map(|(src, tok)| s.spawn_backup(tok, src, Some("1MB")))
        .collect();
    let (docs, receiving, _) = watch(&s, &admin, clients);
    // Several jobs took their clients' blocks at once.
    assert!(receiving >= 3, "at most {receiving} jobs let in at once");
    for (i, d) in docs.iter().enumerate() {
        assert_eq!(d["status"], "ok", "client {i}: {d}");
        // The drive never waited for a client while data streamed.
        let drive = &d["drives"][0];
        assert_eq!(drive["backhitches"], 0, "client {i}: {d}");
    }
    let q = queue(&s, &admin);
    assert_eq!(q["recent"].as_array().unwrap().len(), 4, "{q}");
    assert_eq!(q["spool_used_bytes"], 0, "{q}");
    for (i, d) in docs.iter().enumerate() {
        let job = d["job_id"].as_i64().unwrap().to_string();
        let v = ok(&home, &["verify", &job]);
        assert_eq!(v["ok"], true, "job {job}: {v}");
        let out = t.path().join(format!("out{i}"));
        let (code, _, err) = s.client(
            &tokens[i],
            &["restore", &job, "--to", out.to_str().unwrap()],
        );
        assert_eq!(code, 0, "{err}");
        assert_same_tree(&srcs[i], &out);
    }
}

#[test]
fn a_slow_client_written_at_once_stops_the_drive() {
    // The same slow client, its job sent to the drive as its blocks come (a start
    // rate of 0): the drive runs dry and backhitches, which the spool spares it.
    let t = tempfile::tempdir().unwrap();
    let (home, tokens) = lto3_home(t.path(), 1);
    let config = t.path().join("server.toml");
    std::fs::write(&config, "[queue]\nstart_rate_mb_s = 0\n").unwrap();
    let s = Server::start(&home, Some(&config));
    // A cartridge in the drive first, so that the slow job's data meets a drive
    // ready to write.
    let first = t.path().join("first");
    client_tree(&first, 2, 100_000);
    let (code, _, err) = s.client(&tokens[0], &["backup", first.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let src = t.path().join("src");
    client_tree(&src, 3, BIG);
    let c = s.spawn_backup(&tokens[0], &src, Some("1MB"));
    let (code, d, err) = parse(c.wait_with_output().unwrap());
    assert_eq!(code, 0, "{err}");
    let hitches = d["drives"][0]["backhitches"].as_u64().unwrap();
    assert!(hitches > 0, "{d}");
}

#[test]
fn a_job_whose_client_sends_nothing_loses_its_place() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let c0 = token(&home, "c0");
    let config = t.path().join("server.toml");
    let limits = "[limits]\ntimeout_seconds = 2\n[queue]\nmax_jobs_per_client = 1\n";
    std::fs::write(&config, limits).unwrap();
    let s = Server::start(&home, Some(&config));
    // A job begun by hand whose client never sends its stream.
    begin(&s, &c0, "silent", None);
    // The client's next job waits for that place, and gets it once the silent job
    // failed (after four timeouts: 8 s).
    let src = t.path().join("src");
    client_tree(&src, 5, 100_000);
    let t0 = Instant::now();
    let (code, out, err) = s.client(&c0, &["--json", "backup", src.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(t0.elapsed() >= Duration::from_secs(5), "it did not wait");
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["status"], "ok", "{doc}");
    let jobs = s.json(&c0, &["jobs"]);
    let silent = (jobs["jobs"].as_array().unwrap().iter())
        .find(|j| j["name"] == "silent")
        .cloned()
        .unwrap();
    assert_eq!(silent["status"], "failed", "{jobs}");
}

#[test]
fn a_clients_jobs_beyond_its_limit_wait_in_the_queue() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let c0 = token(&home, "c0");
    let admin = admin_token(&home, "admin");
    let config = t.path().join("server.toml");
    std::fs::write(&config, "[queue]\nmax_jobs_per_client = 1\n").unwrap();
    let s = Server::start(&home, Some(&config));
    let srcs: Vec<PathBuf> = (0..2).map(|i| t.path().join(format!("src{i}"))).collect();
    for (i, src) in srcs.iter().enumerate() {
        client_tree(src, i as u64 + 7, 4_000_000);
    }
    let first = s.spawn_backup(&c0, &srcs[0], Some("2MB"));
    // The second is asked for once the first is let in (not after a while, which
    // a slow start of the first client could outlast).
    let until = Instant::now() + Duration::from_secs(60);
    while count(&queue(&s, &admin), &["receiving", "writing"]) == 0 {
        assert!(Instant::now() < until, "the first job was never let in");
        std::thread::sleep(Duration::from_millis(50));
    }
    let second = s.spawn_backup(&c0, &srcs[1], Some("2MB"));
    let (docs, receiving, waiting) = watch(&s, &admin, vec![first, second]);
    assert_eq!(receiving, 1, "one job of the client at a time");
    assert_eq!(waiting, 1, "the second waited");
    for d in &docs {
        assert_eq!(d["status"], "ok", "{d}");
    }
    // The second began after the first: its job id is the later one.
    let ids: Vec<i64> = docs.iter().map(|d| d["job_id"].as_i64().unwrap()).collect();
    assert!(ids[0] < ids[1], "{ids:?}");
}
