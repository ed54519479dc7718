//! Human output: sizes, times and the progress bar.

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tapeloom_engine::Progress;

/// A size for people: 1.5 GiB.
pub fn bytes(n: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", units[u])
    }
}

/// Nanoseconds since the epoch as RFC 3339 UTC with nanoseconds.
pub fn time(ns: i64) -> String {
    let secs = ns.div_euclid(1_000_000_000);
    let nanos = ns.rem_euclid(1_000_000_000);
    let days = secs.div_euclid(86400);
    let sod = secs.rem_euclid(86400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{nanos:09}Z",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    )
}

/// Progress on stderr, only when stderr is a terminal: a line for the job, and once
/// the job has run a second, a line per drive and per stream with its bytes and rate
/// (and a drive's backhitches, when it has a model).
pub fn progress_bar(p: Arc<Progress>) -> Option<ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let multi = MultiProgress::new();
    let style = ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner());
    let sub =
        ProgressStyle::with_template("{msg}").unwrap_or_else(|_| ProgressStyle::default_spinner());
    let bar = multi.add(ProgressBar::new_spinner());
    bar.set_style(style);
    let b = bar.clone();
    std::thread::spawn(move || {
        let t0 = std::time::Instant::now();
        let mut lines: std::collections::BTreeMap<String, (ProgressBar, u64, f64)> =
            Default::default();
        while !b.is_finished() {
            let now = t0.elapsed().as_secs_f64();
            let bytes_done = p.bytes.load(Ordering::Relaxed);
            let files = p.files.load(Ordering::Relaxed);
            let rate = bytes_done as f64 / 1e6 / now.max(1e-3);
            b.set_message(format!(
                "{files} files, {} ({rate:.1} MB/s)",
                bytes(bytes_done)
            ));
            b.tick();
            let live = p.series.lock().map(|s| s.clone()).unwrap_or_default();
            for (name, (n, hitches)) in live {
                let (line, last_n, last_t) = lines.entry(name.to_string()).or_insert_with(|| {
                    let l = multi.add(ProgressBar::new_spinner());
                    l.set_style(sub.clone());
                    (l, 0, 0.0)
                });
                if n != *last_n || now - *last_t > 2.0 {
                    let r = (n.saturating_sub(*last_n)) as f64 / 1e6 / (now - *last_t).max(1e-3);
                    let extra = hitches
                        .map(|h| format!(", {h} backhitches"))
                        .unwrap_or_default();
                    line.set_message(format!("  {name}: {} ({r:.1} MB/s){extra}", bytes(n)));
                    *last_n = n;
                    *last_t = now;
                }
                line.tick();
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        for (l, _, _) in lines.into_values() {
            l.finish();
        }
    });
    Some(bar)
}

/// The drive line of a backup's JSON: rate, utilization against the drive's maximum
/// at the data's compressibility (when the drive has a model), waits and backhitches:
/// those while the drive's data streamed, and the stops after its last data block
/// (waiting for the job's other drives, the index, the flush that ends the job).
/// Utilization counts the time the tape moved or stood during the job, not loads.
pub fn drive_summary(r: &tapeloom_engine::DriveReport) -> serde_json::Value {
    let (utilization, backhitches, after, ratio, modeled) = match &r.drive_stats {
        Some(s) => {
            let secs = (s.streaming_seconds + s.stopped_seconds).max(1e-9);
            let ratio = s.compression_ratio();
            let top = s.speed_steps_mb_s.last().copied().unwrap_or(0.0) * ratio;
            let rate = s.host_bytes as f64 / secs / 1e6;
            let streaming = r.backhitches.unwrap_or(s.backhitches);
            (
                (top > 0.0).then(|| (rate / top).min(1.0)),
                Some(streaming),
                Some(s.backhitches.saturating_sub(streaming)),
                Some(ratio),
                Some(s.modeled_seconds),
            )
        }
        None => (None, None, None, None, None),
    };
    serde_json::json!({
        "drive": r.drive.unwrap_or(0),
        "bytes": r.bytes,
        "mb_per_s": r.bytes as f64 / 1e6 / r.seconds.max(1e-9),
        "volumes": r.volumes,
        "streams": r.streams,
        "max_concurrency": r.max_concurrency,
        "filemarks": r.filemarks,
        "utilization": utilization,
        "backhitches": backhitches,
        "stops_after_data": after,
        "compression_ratio": ratio,
        "modeled_seconds": modeled,
        "writer_waits": r.writer_waits,
        "writer_wait_seconds": r.writer_wait_seconds,
        "reader_waits": r.reader_waits,
        "reader_wait_seconds": r.reader_wait_seconds,
        "drive_compression": r.drive_compressed,
        "tape_alerts": tape_alerts(&r.health),
        "cartridges": cartridges(&r.health),
    })
}

/// What a drive said about each cartridge at the end of its mount.
pub fn cartridges(health: &[(String, tapeloom_device::DriveHealth)]) -> serde_json::Value {
    health
        .iter()
        .map(|(barcode, h)| {
            serde_json::json!({
                "barcode": barcode,
                "tape_alerts": h.tape_alerts,
                "volume_statistics": h.volume_statistics,
            })
        })
        .collect()
}

/// The TapeAlert flags a drive raised during a job, over all its mounts, each once;
/// null when the drive has no TapeAlert page.
pub fn tape_alerts(health: &[(String, tapeloom_device::DriveHealth)]) -> Option<Vec<String>> {
    let mut all: Option<Vec<String>> = None;
    for (_, h) in health {
        if let Some(flags) = &h.tape_alerts {
            let all = all.get_or_insert_with(Vec::new);
            for f in flags {
                if !all.contains(f) {
                    all.push(f.clone());
                }
            }
        }
    }
    all
}

#[cfg(test)]
mod tests {
    #[test]
    fn times() {
        assert_eq!(super::time(0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(
            super::time(1_700_000_000_123_456_789),
            "2023-11-14T22:13:20.123456789Z"
        );
        assert_eq!(
            super::time(-1_000_000_000),
            "1969-12-31T23:59:59.000000000Z"
        );
    }
}
