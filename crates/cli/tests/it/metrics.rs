//! `GET /metrics` of a real server while a client's backup runs on a modeled drive
//! that takes real time, and after it ended: `promtool check metrics` passes both,
//! the drive's counter never goes back and ends at what the drive wrote, the queue
//! shows the job while it runs, the counters of ended jobs and received bytes rise
//! as the job ends (counted then, not rebuilt when read), and no series names a
//! job or a client.

use crate::common::server_kit::{admin_token, get, token, Server};
use crate::common::*;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `promtool check metrics` on `text`; panics when promtool is missing, finds
/// a problem or says anything.
pub(crate) fn promtool_check(text: &str) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus) must be installed for this test");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool check metrics: {:?}: {said}\n{text}",
        out.status
    );
}

/// The value of the sample whose line starts with `series` (name and labels).
fn value(text: &str, series: &str) -> Option<u64> {
    let line = text
        .lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))?;
    line.rsplit(' ').next()?.parse().ok()
}

/// The bytes of the last sample of drive 0 stored with `job`.
fn last_drive_sample(home: &Path, job: i64) -> u64 {
    let q = format!(
        "SELECT bytes FROM samples WHERE job_id = {job} AND op = 'backup' \
         AND series = 'drive:0' ORDER BY t_ms DESC LIMIT 1"
    );
    sql_i64(home, &q) as u64
}

const DRIVE: &str = "tapeloom_drive_written_bytes_total{drive=\"0\"}";
const ENDED: &str = "tapeloom_jobs_ended_total{state=\"ended\"}";
const RECEIVED: &str = "tapeloom_received_bytes_total";

#[test]
fn metrics_pass_promtool_during_and_after_a_clients_backup() {
    if !need(program("promtool", "prometheus")) {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let (home, src) = (t.path().join("home"), t.path().join("src"));
    // LTO-3 at a tenth of its speed, on a real clock: a job of several seconds.
    library_with(
        &home,
        1,
        2,
        "256M",
        &["--model", "lto3", "--clock", "real", "--scale", "0.1"],
    );
    for i in 0..3u64 {
        write(&src.join(format!("f{i}")), &noise(i + 1, 2 << 20));
    }
    let alice = token(&home, "alice");
    let root = admin_token(&home, "root");
    let s = Server::start(&home, None);
    let (status, idle) = get(&s.addr, "/metrics", Some(&root));
    assert_eq!(status, 200, "{idle}");
    promtool_check(&idle);
    assert_eq!(value(&idle, DRIVE), None, "no drive wrote yet:\n{idle}");
    assert_eq!(value(&idle, ENDED), Some(0), "{idle}");
    assert_eq!(value(&idle, RECEIVED), Some(0), "{idle}");
    assert_eq!(value(&idle, "tapeloom_drives_busy"), Some(0), "{idle}");

    let (doc, during) = std::thread::scope(|sc| {
        let backup = sc.spawn(|| s.json(&alice, &["backup", src.to_str().unwrap()]));
        let mut during: Vec<String> = Vec::new();
        let t0 = Instant::now();
        while !backup.is_finished() && t0.elapsed() < Duration::from_secs(120) {
            let (status, text) = get(&s.addr, "/metrics", Some(&root));
            assert_eq!(status, 200, "{text}");
            if value(&text, DRIVE).is_some_and(|b| b > 0) {
                during.push(text);
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        (backup.join().unwrap(), during)
    });
    assert_eq!(doc["status"], "ok", "{doc}");
    let job = doc["job_id"].as_i64().unwrap();
    let text = during
        .iter()
        .find(|t| value(t, "tapeloom_queue_jobs{state=\"writing\"}") == Some(1))
        .unwrap_or_else(|| panic!("no read saw the job writing: {} reads", during.len()));
    promtool_check(text);
    // Its drive held while it writes.
    assert_eq!(value(text, "tapeloom_drives_busy"), Some(1), "{text}");
    // The job's bytes, counted as its client sent them, before it ended.
    assert!(value(text, RECEIVED).is_some_and(|b| b > 0), "{text}");
    assert_eq!(value(text, ENDED), Some(0), "{text}");
    assert!(
        text.contains("tapeloom_drive_buffer_fill_ratio{drive=\"0\"}"),
        "{text}"
    );
    assert!(
        text.contains("tapeloom_drive_speed_bytes_per_second{drive=\"0\"}"),
        "{text}"
    );
    let seen: Vec<u64> = during.iter().filter_map(|t| value(t, DRIVE)).collect();
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");

    let (status, after) = get(&s.addr, "/metrics", Some(&root));
    assert_eq!(status, 200, "{after}");
    promtool_check(&after);
    let total = value(&after, DRIVE).unwrap();
    assert!(
        total > 0 && total >= *seen.last().unwrap(),
        "{total} after {seen:?}"
    );
    // The drive's bytes are the stored bytes of the job's data blocks: its last
    // sample, and at least the files' bytes (noise does not compress).
    assert_eq!(total, last_drive_sample(&home, job));
    assert!(total >= doc["bytes"].as_u64().unwrap(), "{total} {doc}");
    assert_eq!(
        value(&after, "tapeloom_queue_jobs{state=\"writing\"}"),
        Some(0)
    );
    // Counted as the job ended: one more job ended, none failed, and its client's
    // bytes (at least the files') received.
    assert_eq!(value(&after, ENDED), Some(1), "{after}");
    assert_eq!(value(&after, "tapeloom_jobs_failed_total"), Some(0));
    let received = value(&after, RECEIVED).unwrap();
    assert!(
        received >= doc["bytes"].as_u64().unwrap(),
        "{received} {doc}"
    );
    assert_eq!(
        value(&after, "tapeloom_spool_used_bytes"),
        Some(0),
        "{after}"
    );
    assert_eq!(value(&after, "tapeloom_drives_busy"), Some(0), "{after}");
    // No label names a job, a client or a job's name: their values are unbounded.
    for t in during.iter().chain([&idle, &after]) {
        assert!(!t.contains("job=\"") && !t.contains("alice"), "{t}");
    }
    // Read again: nothing is added twice.
    let (_, again) = get(&s.addr, "/metrics", Some(&root));
    assert_eq!(value(&again, DRIVE), Some(total));
    assert_eq!(value(&again, ENDED), Some(1));
    assert_eq!(value(&again, RECEIVED), Some(received));
}
