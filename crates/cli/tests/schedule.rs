//! Scheduled jobs: a `[[schedule]]` of the server's configuration, run by the
//! server on a clock sped up 30 times (a minute in 2 s), recorded for its client,
//! shown in the queue, and restored through the server by that client alone.

mod common;
#[path = "common/server_kit.rs"]
mod server_kit;
use common::*;
use serde_json::Value;
use server_kit::Server;
use std::time::{Duration, Instant};

const NAME: &str = "every-minute";

/// The entries of `list` (jobs or queue entries) that `key` names `NAME`.
fn named<'a>(list: &'a Value, key: &str) -> Vec<&'a Value> {
    (list.as_array().unwrap().iter())
        .filter(|j| j[key] == NAME)
        .collect()
}

#[test]
fn a_schedule_runs_at_each_minute_for_its_client() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let token = |name: &str| {
        let v = ok(&home, &["server", "token", "add", name]);
        v["token"].as_str().unwrap().to_string()
    };
    let (c1, c2) = (token("c1"), token("c2"));
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
    let env = [
        ("TAPELOOM_NOW", "2026-01-05T03:00:00Z"),
        ("TAPELOOM_CLOCK_SPEED", "30"),
    ];
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
