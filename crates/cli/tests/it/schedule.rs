//! Scheduled jobs: a `[[schedule]]` of the server's configuration, run by the
//! server on a clock sped up 30 times (a minute in 2 s), recorded for its client,
//! shown in the queue, and restored through the server by that client alone.

use crate::common::server_kit::{admin_token, fast_clock, token, Server};
use crate::common::*;
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

const NAME: &str = "every-minute";

/// The entries of `list` (jobs or queue entries) that `key` names `NAME`.
fn named<'a>(list: &'a Value, key: &str) -> Vec<&'a Value> {
    (list.as_array().unwrap().iter())
        .filter(|j| j[key] == NAME)
        .collect()
}

/// A server of `home` whose one schedule backs up `src` for `c1` at 03:01:00, on
/// a clock that starts at 03:00:30 and runs 30 times fast; `queue` is a line of
/// its `[queue]` table.
fn scheduled_server(t: &Path, home: &Path, src: &Path, queue: &str) -> Server {
    let config = t.join("server.toml");
    let text = format!(
        "[queue]\n{queue}\n[[schedule]]\nname = \"{NAME}\"\n\
         calendar = \"*-*-* 03:01:00\"\nclient = \"c1\"\nsources = [{:?}]\n",
        src.to_str().unwrap()
    );
    std::fs::write(&config, text).unwrap();
    let env = fast_clock("2026-01-05T03:00:30Z");
    Server::start_with_env(home, Some(&config), &env)
}

/// Waits (up to 30 s) until the schedule's job is writing; the queue then.
fn scheduled_writing(s: &Server, admin: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let q = s.json(admin, &["queue"]);
        if named(&q["queue"], "name")
            .iter()
            .any(|e| e["state"] == "writing")
        {
            return q;
        }
        assert!(Instant::now() < deadline, "{q}\n{}", s.log());
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_schedule_runs_at_each_minute_for_its_client() {
    if !test_hooks() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let (c1, c2) = (token(&home, "c1"), token(&home, "c2"));
    let src = t.path().join("src");
    write(&src.join("a.txt"), b"scheduled");
    write(&src.join("dir/b.bin"), &noise(7, 100_000));
    let config = t.path().join("server.toml");
    let text = format!(
        "[[schedule]]\nname = \"{NAME}\"\ncalendar = \"*:*\"\nclient = \"c1\"\n\
         sources = [{:?}]\n",
        src.to_str().unwrap()
    );
    std::fs::write(&config, text).unwrap();
    let env = fast_clock("2026-01-05T03:00:00Z");
    let s = Server::start_with_env(&home, Some(&config), &env);
    // 03:01 and 03:02 on the server's clock: about 2 s and 4 s from its start.
    let deadline = Instant::now() + Duration::from_secs(60);
    let recent = loop {
        let q = s.json(&c1, &["queue"]);
        let ended: Vec<Value> = named(&q["recent"], "name").into_iter().cloned().collect();
        if ended.len() >= 2 {
            break ended;
        }
        assert!(Instant::now() < deadline, "{q}\n{}", s.log());
        std::thread::sleep(Duration::from_millis(200));
    };
    // Exactly one job in each of the two scheduled minutes, none before.
    let jobs = s.json(&c1, &["jobs"]);
    let mut mine = named(&jobs["jobs"], "name");
    mine.retain(|j| j["started"].as_str().unwrap() < "2026-01-05T03:03");
    mine.sort_by_key(|j| j["job_id"].as_i64());
    let started: Vec<&str> = mine
        .iter()
        .map(|j| j["started"].as_str().unwrap())
        .collect();
    assert_eq!(started.len(), 2, "{jobs}\n{}", s.log());
    assert!(started[0].starts_with("2026-01-05T03:01:"), "{started:?}");
    assert!(started[1].starts_with("2026-01-05T03:02:"), "{started:?}");
    for j in &mine {
        assert_eq!(
            (&j["status"], &j["client"]),
            (&"ok".into(), &"c1".into()),
            "{j}"
        );
    }
    // The queue shows them ended, of origin `schedule NAME`, newest first.
    let ids: Vec<&Value> = mine.iter().rev().map(|j| &j["job_id"]).collect();
    let oldest = &recent[recent.len() - 2..];
    for (e, id) in oldest.iter().zip(ids) {
        assert_eq!(e["origin"], format!("schedule {NAME}"), "{e}");
        assert_eq!(
            (&e["state"], &e["client"]),
            (&"ended".into(), &"c1".into()),
            "{e}"
        );
        assert_eq!(&e["job"], id, "{e}");
        assert!(e["files"].as_u64().unwrap() >= 2, "{e}");
    }
    // Another client sees neither the jobs nor their queue entries.
    assert!(named(&s.json(&c2, &["jobs"])["jobs"], "name").is_empty());
    let q2 = s.json(&c2, &["queue"]);
    assert!(named(&q2["recent"], "name").is_empty(), "{q2}");
    assert!(named(&q2["queue"], "name").is_empty(), "{q2}");
    let job = mine[0]["job_id"].to_string();
    let theirs = t.path().join("theirs");
    let (code, _, err) = s.client(&c2, &["restore", &job, "--to", theirs.to_str().unwrap()]);
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("404"), "{err}");
    assert!(!theirs.exists());
    let out = t.path().join("out");
    // Its client restores one through the server.
    let r = s.json(&c1, &["restore", &job, "--to", out.to_str().unwrap()]);
    assert_eq!(r["errors"], Value::Array(vec![]), "{r}");
    assert_same_tree(&src, &out);
}

#[test]
fn a_scheduled_job_takes_its_clients_place() {
    if !test_hooks() {
        return;
    }
    // One job of c1 at a time. The schedule's job runs first, on a slow modeled
    // drive (its load alone takes the model's quarter minute); c1's own backup,
    // asked for meanwhile, waits for the place and runs after it.
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let model = ["--model", "lto3", "--clock", "real", "--scale", "0.05"];
    library_with(&home, 1, 2, "1G", &model);
    let c1 = token(&home, "c1");
    let admin = admin_token(&home, "ops");
    let (src, own) = (t.path().join("src"), t.path().join("own"));
    write(&src.join("a.bin"), &noise(5, 2_000_000));
    write(&own.join("b.txt"), b"c1's own");
    let s = scheduled_server(t.path(), &home, &src, "max_jobs_per_client = 1");
    // The scheduled job is let in (about 1 s from the start).
    scheduled_writing(&s, &admin);
    let client = std::process::Command::new(bin())
        .args(["--json", "backup", own.to_str().unwrap()])
        .args([
            "--server",
            &s.url,
            "--fingerprint",
            &s.fingerprint,
            "--token",
            &c1,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut client = Some(client);
    let (mut most_inside, mut waited) = (0, false);
    while client.as_mut().unwrap().try_wait().unwrap().is_none() {
        let q = s.json(&admin, &["queue"]);
        let entries = q["queue"].as_array().unwrap();
        let inside = (entries.iter())
            .filter(|e| e["client"] == "c1")
            .filter(|e| e["state"] == "receiving" || e["state"] == "writing")
            .count();
        most_inside = most_inside.max(inside);
        waited |= (entries.iter()).any(|e| e["name"] == "own" && e["state"] == "waiting");
        std::thread::sleep(Duration::from_millis(150));
    }
    let (code, doc, err) = parse(client.take().unwrap().wait_with_output().unwrap());
    assert_eq!(code, 0, "{err}");
    assert_eq!(doc["status"], "ok", "{doc}");
    assert_eq!(most_inside, 1, "c1 had more than one job let in at once");
    assert!(waited, "c1's own job did not wait for the scheduled one");
    let jobs = s.json(&c1, &["jobs"]);
    let sched = named(&jobs["jobs"], "name");
    assert_eq!(sched.len(), 1, "{jobs}");
    assert!(
        sched[0]["job_id"].as_i64() < doc["job_id"].as_i64(),
        "{jobs}"
    );
}

#[test]
fn a_scheduled_job_runs_on_a_free_drive_beside_a_clients_job() {
    if !test_hooks() {
        return;
    }
    // Two slow modeled drives (LTO-3 at a hundredth: 0.8 MB/s, each load a real
    // quarter minute). The schedule's job of 8 MB writes for about 10 s after its
    // load; a client's small job, asked for once the scheduled one is on its
    // drive, takes the other drive and ends first. Were the home locked for the
    // scheduled job alone, the client's job would wait for its end.
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let model = ["--model", "lto3", "--clock", "real", "--scale", "0.01"];
    library_with(&home, 2, 4, "1G", &model);
    let c1 = token(&home, "c1");
    let c2 = token(&home, "c2");
    let admin = admin_token(&home, "ops");
    let (src, own) = (t.path().join("src"), t.path().join("own"));
    write(&src.join("a.bin"), &noise(6, 8_000_000));
    write(&own.join("b.txt"), b"c2's own");
    let s = scheduled_server(t.path(), &home, &src, "start_rate_mb_s = 0");
    let q = scheduled_writing(&s, &admin);
    assert_eq!(q["drives_busy"], 1, "{q}");
    let doc = s.json(&c2, &["backup", own.to_str().unwrap()]);
    assert_eq!(doc["status"], "ok", "{doc}");
    // The scheduled job still writes: the client's ran beside it.
    let q = s.json(&admin, &["queue"]);
    let sched = named(&q["queue"], "name");
    assert!(
        sched.iter().any(|e| e["state"] == "writing"),
        "the scheduled job ended before the client's: {q}"
    );
    assert_eq!(q["drives_busy"], 1, "{q}");
    // Each on a drive of its own, and the scheduled job ends well too.
    let until = Instant::now() + Duration::from_secs(120);
    let job = loop {
        let jobs = s.json(&c1, &["jobs"]);
        let mine = named(&jobs["jobs"], "name");
        if let Some(j) = mine.first().filter(|j| j["status"] != "running") {
            break (*j).clone();
        }
        assert!(Instant::now() < until, "{jobs}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(job["status"], "ok", "{job}");
    // Two cartridges: two jobs never write one.
    assert_ne!(doc["volumes"], job["volumes"], "{doc} {job}");
    drop(s);
    let check = ok(&home, &["catalog", "check"]);
    assert_eq!(check["ok"], true, "{check}");
}

#[test]
fn a_read_back_schedule_verifies_a_pools_jobs_and_marks_a_damaged_cartridge_suspect() {
    if !test_hooks() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let admin = admin_token(&home, "admin");
    small_library(&home);
    let src = t.path().join("src");
    for i in 0..3 {
        write(&src.join(format!("f{i}")), &noise(i, 600_000));
    }
    let job = ok(&home, &["backup", src.to_str().unwrap()])["job_id"]
        .as_i64()
        .unwrap();
    crate::common::keyed::flip(&home, 3, false);
    let config = t.path().join("server.toml");
    let text = "[[schedule]]\nname = \"readback\"\ncalendar = \"*:*\"\n\
                verify = \"pool:default,older-than:1d\"\n";
    std::fs::write(&config, text).unwrap();
    let s = Server::start_with_env(&home, Some(&config), &fast_clock("2026-01-05T03:00:00Z"));
    // 03:01 on the server's clock: about 2 s from its start.
    let deadline = Instant::now() + Duration::from_secs(60);
    let last = loop {
        let jobs = s.json(&admin, &["jobs"]);
        let j = (jobs["jobs"].as_array().unwrap().iter()).find(|j| j["job_id"] == job);
        if let Some(l) = j
            .map(|j| j["last_verified"].clone())
            .filter(|l| !l.is_null())
        {
            break l;
        }
        assert!(Instant::now() < deadline, "{jobs}\n{}", s.log());
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        (last["ok"].as_bool(), last["how"].as_str()),
        (Some(false), Some("schedule readback")),
        "{last}"
    );
    assert!(last["at"].as_str().unwrap() >= "2026-01-05T03:01", "{last}");
    assert!(last["bad_blocks"].as_u64().unwrap() >= 1, "{last}");
    drop(s);
    let status = ok(&home, &["library", "status"]);
    let tape = (status["cartridges"].as_array().unwrap().iter())
        .find(|c| c["barcode"] == "TL0001L9")
        .cloned();
    let tape = tape.unwrap_or_default();
    assert_eq!(tape["state"], "suspect", "{status}");
}
