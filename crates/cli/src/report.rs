//! `tapeloom report`: a job's per-second samples drawn as plots.

use anyhow::{anyhow, bail, Result};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use tapeloom_engine::{Home, Series};
use tapeloom_report::{render, JobSeries, Sample, Track};

/// Renders job `job`'s samples of operation `op` into `out` (.svg, .png or .html).
pub fn report(home: &Home, job: i64, op: &str, out: &Path) -> Result<Value> {
    let cat = &home.catalog;
    let j = cat
        .job(job)?
        .ok_or_else(|| anyhow!("no job {job} in the catalog"))?;
    let rows = cat.samples(job, op)?;
    if rows.is_empty() {
        bail!("job {job} has no {op} samples (jobs written before tapeloom kept them have none)");
    }
    let mut streams: BTreeMap<String, Vec<Sample>> = BTreeMap::new();
    let mut drives: BTreeMap<usize, Vec<Sample>> = BTreeMap::new();
    for r in &rows {
        let s = Sample {
            t: r.t_ms as f64 / 1000.0,
            bytes: r.bytes,
            pool_fill: r.pool_fill,
            buffer_fill: r.buffer_fill,
            backhitches: r.backhitches,
            speed_mb_s: r.speed_mb_s,
        };
        match &r.series {
            Series::Stream(name) => streams.entry(name.clone()).or_default().push(s),
            Series::Drive(d) => drives.entry(*d).or_default().push(s),
        }
    }
    let track = |(name, samples): (String, Vec<Sample>)| Track { name, samples };
    let last = |v: &Vec<Sample>| v.last().map(|s| (s.bytes, s.backhitches, s.t));
    let mut summary = vec![
        ("job".to_string(), format!("{} ({})", j.id, j.name)),
        ("status".to_string(), j.status.to_string()),
        ("files".to_string(), j.files.to_string()),
        (
            "data".to_string(),
            format!("{:.1} MB in {:.1} s", j.bytes as f64 / 1e6, j.seconds),
        ),
        (
            "rate".to_string(),
            format!("{:.1} MB/s", j.bytes as f64 / 1e6 / j.seconds.max(1e-9)),
        ),
    ];
    let mut drive_json = Vec::new();
    for (name, v) in &drives {
        if let Some((bytes, bh, t)) = last(v) {
            summary.push((
                format!("drive {name}"),
                format!(
                    "{:.1} MB, {:.1} MB/s, {bh} backhitches",
                    bytes as f64 / 1e6,
                    bytes as f64 / 1e6 / t.max(1e-9)
                ),
            ));
            drive_json.push(json!({"drive": name, "bytes": bytes, "backhitches": bh}));
        }
    }
    for (name, v) in &streams {
        if let Some((bytes, _, t)) = last(v) {
            summary.push((
                format!("stream {name}"),
                format!(
                    "{:.1} MB, {:.1} MB/s",
                    bytes as f64 / 1e6,
                    bytes as f64 / 1e6 / t.max(1e-9)
                ),
            ));
        }
    }
    let mut health_json = Vec::new();
    for (drive, barcode, text) in cat.drive_health(job, op)? {
        let h: tapeloom_device::DriveHealth = serde_json::from_str(&text)
            .map_err(|e| anyhow!("job {job}: drive health of {barcode} unreadable: {e}"))?;
        summary.push((format!("drive {drive} on {barcode}"), health_line(&h)));
        health_json.push(json!({
            "drive": drive,
            "barcode": barcode,
            "tape_alerts": h.tape_alerts,
            "volume_statistics": h.volume_statistics,
        }));
    }
    let series = JobSeries {
        title: format!("job {} ({op}: {})", j.id, j.name),
        summary,
        streams: streams.into_iter().map(track).collect(),
        // The plots say "drive" themselves: the index is the name.
        drives: drives
            .into_iter()
            .map(|(d, samples)| track((d.to_string(), samples)))
            .collect(),
    };
    render(&series, out).map_err(|e| anyhow!("{e}"))?;
    Ok(json!({
        "job_id": job,
        "op": op,
        "out": out.display().to_string(),
        "samples": rows.len(),
        "drives": drive_json,
        "cartridges": health_json,
    }))
}

/// One line of a report's summary on what a drive said about a cartridge: its
/// TapeAlert flags and the main volume statistics.
fn health_line(h: &tapeloom_device::DriveHealth) -> String {
    let mut parts = vec![match &h.tape_alerts {
        None => "no TapeAlert page".to_string(),
        Some(f) if f.is_empty() => "TapeAlert: none".to_string(),
        Some(f) => format!("TapeAlert: {}", f.join(", ")),
    }];
    match &h.volume_statistics {
        None => parts.push("no volume statistics".into()),
        Some(v) => {
            if let (Some(w), Some(r)) = (v.last_mount_mb_written, v.last_mount_mb_read) {
                parts.push(format!("this mount {w} MB written, {r} MB read"));
            }
            if let (Some(u), Some(c)) = (v.used_native_capacity_mb, v.native_capacity_mb) {
                parts.push(format!("{u} of {c} MB used"));
            }
            for (what, n) in [
                ("recovered write errors", v.recovered_write_errors),
                ("unrecovered write errors", v.unrecovered_write_errors),
                ("recovered read errors", v.recovered_read_errors),
                ("unrecovered read errors", v.unrecovered_read_errors),
                ("mounts", v.mounts),
                ("middle-of-tape passes", v.middle_of_medium_passes),
            ] {
                if let Some(n) = n {
                    parts.push(format!("{n} {what}"));
                }
            }
            if v.write_protected == Some(true) {
                parts.push("write protected".into());
            }
        }
    }
    parts.join("; ")
}
