//! `tapeloom report`: a job's per-second samples drawn as plots.

use anyhow::{anyhow, bail, Result};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use tapeloom_catalog::{Mark, Phase};
use tapeloom_engine::{Home, Series};
use tapeloom_report::{render, DataPhase, JobSeries, Sample, Span, Track};

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
    let (streams, drives) = tracks(&rows);
    let spans = spans(&cat.marks(job, op)?);
    let data = DataPhase::of_all(&drives);
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
            format!(
                "{:.1} MB/s over the whole job{}",
                j.bytes as f64 / 1e6 / j.seconds.max(1e-9),
                while_data_moved(data.as_ref(), true)
            ),
        ),
    ];
    if let Some(row) = time_without_data(&spans) {
        summary.push(("time without data".to_string(), row));
    }
    let mut drive_json = Vec::new();
    for t in &drives {
        let Some(last) = t.samples.last() else {
            continue;
        };
        let phase = DataPhase::of(t);
        summary.push((
            format!("drive {}", t.name),
            format!(
                "{:.1} MB, {:.1} MB/s{}, {} backhitches",
                last.bytes as f64 / 1e6,
                last.bytes as f64 / 1e6 / last.t.max(1e-9),
                while_data_moved(phase.as_ref(), false),
                last.backhitches
            ),
        ));
        drive_json.push(json!({
            "drive": t.name.parse::<u64>().ok(),
            "bytes": last.bytes,
            "backhitches": last.backhitches,
            "data_mb_per_s": phase.and_then(|p| p.mb_per_s()),
        }));
    }
    for t in &streams {
        if let Some(last) = t.samples.last() {
            summary.push((
                format!("stream {}", t.name),
                format!(
                    "{:.1} MB, {:.1} MB/s{}",
                    last.bytes as f64 / 1e6,
                    last.bytes as f64 / 1e6 / last.t.max(1e-9),
                    while_data_moved(DataPhase::of(t).as_ref(), false)
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
    let spans_json: Vec<Value> = spans
        .iter()
        .map(|s| json!({"what": s.label, "drive": s.drive, "from_s": s.from, "to_s": s.to}))
        .collect();
    let series = JobSeries {
        title: format!("job {} ({op}: {})", j.id, j.name),
        summary,
        streams,
        drives,
        spans,
    };
    render(&series, out).map_err(|e| anyhow!("{e}"))?;
    Ok(json!({
        "job_id": job,
        "op": op,
        "out": out.display().to_string(),
        "samples": rows.len(),
        "data_mb_per_s": data.and_then(|p| p.mb_per_s()),
        "drives": drive_json,
        "spans": spans_json,
        "cartridges": health_json,
    }))
}

/// The catalog's samples as the figure's tracks: (streams by name, drives by index).
fn tracks(rows: &[tapeloom_catalog::Sample]) -> (Vec<Track>, Vec<Track>) {
    let mut streams: BTreeMap<String, Vec<Sample>> = BTreeMap::new();
    let mut drives: BTreeMap<usize, Vec<Sample>> = BTreeMap::new();
    for r in rows {
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
    // The plots say "drive" themselves: the index is the name.
    let streams: Vec<Track> = streams
        .into_iter()
        .map(|(name, samples)| Track { name, samples })
        .collect();
    let drives: Vec<Track> = drives
        .into_iter()
        .map(|(d, samples)| Track {
            name: d.to_string(),
            samples,
        })
        .collect();
    (streams, drives)
}

/// The catalog's marks as the figure's shaded spans.
fn spans(marks: &[Mark]) -> Vec<Span> {
    marks
        .iter()
        .map(|m| Span {
            label: match m.phase {
                Phase::Load => "loading",
                Phase::Position => "positioning",
                Phase::Index => "index",
            }
            .to_string(),
            drive: m.drive.map(|d| d.to_string()),
            from: m.from_ms as f64 / 1000.0,
            to: m.to_ms as f64 / 1000.0,
        })
        .collect()
}

/// `" (33.0 MB/s while data moved, 17.0-27.0 s)"`, or nothing without a data phase.
fn while_data_moved(p: Option<&DataPhase>, when: bool) -> String {
    match p.and_then(|p| Some((p, p.mb_per_s()?))) {
        Some((p, r)) if when => format!(
            "; {r:.1} MB/s while data moved ({:.1} to {:.1} s)",
            p.from, p.to
        ),
        Some((_, r)) => format!(" ({r:.1} MB/s while data moved)"),
        None => String::new(),
    }
}

/// Seconds the drives spent on each kind of span, e.g. `loading 17.2 s, index 0.4 s`.
fn time_without_data(spans: &[Span]) -> Option<String> {
    let mut by: Vec<(&str, f64)> = Vec::new();
    for s in spans {
        match by.iter_mut().find(|(l, _)| *l == s.label) {
            Some((_, t)) => *t += s.to - s.from,
            None => by.push((&s.label, s.to - s.from)),
        }
    }
    let parts: Vec<String> = by.iter().map(|(l, t)| format!("{l} {t:.1} s")).collect();
    (!parts.is_empty()).then(|| parts.join(", "))
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
