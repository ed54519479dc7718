//! A job's per-second samples as plots (`tapeloom report`, and the status page's
//! figure of a job), and the summary of what they show
//! ([`tapeloom_proto::report::Drawn`]).

use crate::Catalogued;
use anyhow::Result;
use std::collections::BTreeMap;
use std::path::PathBuf;
use tapeloom_catalog::{Catalog, Mark, Phase};
use tapeloom_engine::{escape_controls, JobError, Series};
use tapeloom_proto::health::CartridgeHealth;
use tapeloom_proto::report::{
    Drawn, DriveCartridge, DriveTotal, RecallOut, RecallPoint, SpanOut, StagePeak,
};
use tapeloom_report::{
    render, render_staged, DataPhase, JobSeries, Sample, Span, StageFill, StageSample, Track,
};

/// A job without samples of the operation.
#[derive(Debug, thiserror::Error)]
#[error("job {job} has no {op} samples (jobs written before tapeloom kept them have none)")]
pub struct NoSamples {
    /// The job.
    pub job: i64,
    /// backup or restore.
    pub op: String,
}

/// A stored drive health that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("job {job}: drive health of {barcode} unreadable: {source}")]
pub struct HealthUnreadable {
    /// The job.
    pub job: i64,
    /// The cartridge.
    pub barcode: String,
    /// The parser's error.
    pub source: serde_json::Error,
}

/// The figures of a recall's `samples` (in time order); `None` when there are none.
fn recall_out(samples: &[tapeloom_catalog::RecallSample]) -> Option<RecallOut> {
    let last = samples.last()?;
    Some(RecallOut {
        files: last.files,
        bytes: last.bytes,
        peak_waiting: samples.iter().map(|s| s.waiting).max().unwrap_or(0),
        seconds: last.t_ms as f64 / 1000.0,
        samples: (samples.iter())
            .map(|s| RecallPoint {
                t_s: s.t_ms as f64 / 1000.0,
                files: s.files,
                bytes: s.bytes,
                waiting: s.waiting,
            })
            .collect(),
    })
}

/// The summary's line of a recall.
fn recall_line(r: &RecallOut) -> String {
    format!(
        "{} files, {:.1} MB written back in {:.1} s; at most {} waiting",
        r.files,
        r.bytes as f64 / 1e6,
        r.seconds,
        r.peak_waiting
    )
}

/// The bytes a recall wrote back, as a track of the figure.
fn recall_track(r: &RecallOut) -> Track {
    let samples = (r.samples.iter())
        .map(|s| Sample {
            t: s.t_s,
            bytes: s.bytes,
            pool_fill: 0.0,
            buffer_fill: None,
            backhitches: 0,
            speed_mb_s: None,
        })
        .collect();
    Track {
        name: "written back".to_string(),
        samples,
    }
}

/// A run's samples, by stream name and by drive index (the plots say "drive"
/// themselves: a drive's track is named by its index), and the stages' fill of a
/// staged backup.
#[derive(Default)]
struct Tracks {
    streams: Vec<Track>,
    drives: Vec<(usize, Track)>,
    stage: Option<StageFill>,
}

impl Tracks {
    fn new(rows: &[tapeloom_catalog::Sample]) -> Self {
        let mut streams: BTreeMap<String, Vec<Sample>> = BTreeMap::new();
        let mut drives: BTreeMap<usize, Vec<Sample>> = BTreeMap::new();
        let mut stage: Option<StageFill> = None;
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
                Series::Stage => stage.get_or_insert_default().samples.push(StageSample {
                    t: s.t,
                    bytes: s.bytes,
                    share: s.pool_fill,
                }),
            }
        }
        // Names in the figure are for people: escaped as on a terminal.
        Tracks {
            streams: (streams.into_iter())
                .map(|(name, samples)| Track {
                    name: escape_controls(&name).into_owned(),
                    samples,
                })
                .collect(),
            drives: (drives.into_iter())
                .map(|(d, samples)| {
                    let name = d.to_string();
                    (d, Track { name, samples })
                })
                .collect(),
            stage,
        }
    }

    /// The summary's lines of each drive and stream (from its last sample), and the
    /// drives' totals.
    fn summary(&self, summary: &mut Vec<(String, String)>) -> Vec<DriveTotal> {
        let mb = |bytes: u64, t: f64| (bytes as f64 / 1e6, bytes as f64 / 1e6 / t.max(1e-9));
        let mut totals = Vec::new();
        for (drive, t) in &self.drives {
            if let Some(s) = t.samples.last() {
                let (m, rate) = mb(s.bytes, s.t);
                let bh = s.backhitches;
                let phase = DataPhase::of(t);
                let data = while_data_moved(phase.as_ref(), false);
                let line = format!("{m:.1} MB, {rate:.1} MB/s{data}, {bh} backhitches");
                summary.push((format!("drive {drive}"), line));
                totals.push(DriveTotal {
                    drive: *drive,
                    bytes: s.bytes,
                    backhitches: bh,
                    data_mb_per_s: phase.and_then(|p| p.mb_per_s()),
                });
            }
        }
        for t in &self.streams {
            if let Some(s) = t.samples.last() {
                let (m, rate) = mb(s.bytes, s.t);
                let data = while_data_moved(DataPhase::of(t).as_ref(), false);
                summary.push((
                    format!("stream {}", t.name),
                    format!("{m:.1} MB, {rate:.1} MB/s{data}"),
                ));
            }
        }
        if let Some(peak) = self.stage_peak() {
            let size = match peak.size_bytes {
                Some(b) => format!(" of {:.1} MB", b as f64 / 1e6),
                None => String::new(),
            };
            summary.push((
                "stage fill".to_string(),
                format!(
                    "peak {:.1} MB{size} ({:.0}%)",
                    peak.peak_bytes as f64 / 1e6,
                    peak.peak_share * 100.0
                ),
            ));
        }
        totals
    }

    /// The most the stages held, for a staged backup with stage samples.
    fn stage_peak(&self) -> Option<StagePeak> {
        let stage = self.stage.as_ref()?;
        let peak = stage.peak()?;
        Some(StagePeak {
            peak_bytes: peak.bytes,
            peak_share: peak.share,
            size_bytes: stage.size(),
        })
    }
}

/// Renders job `job`'s samples of operation `op` into `out` (.svg, .png or .html).
pub fn draw(at: &impl Catalogued, job: i64, op: &str, out: PathBuf) -> Result<Drawn> {
    let cat = at.ops_catalog();
    let Plot {
        series,
        stage,
        mut drawn,
    } = plot(cat, job, op)?;
    match &stage {
        Some(stage) => render_staged(&series, stage, &out)?,
        None => render(&series, &out)?,
    }
    drawn.out = out.display().to_string();
    Ok(drawn)
}

/// Job `job`'s figure of operation `op` as `report --out FILE.svg` draws it.
pub fn svg(at: &impl Catalogued, job: i64, op: &str) -> Result<String> {
    let cat = at.ops_catalog();
    let p = plot(cat, job, op)?;
    Ok(tapeloom_report::svg(&p.series, p.stage.as_ref())?)
}

/// A job's figure and the summary of it, before it is drawn.
struct Plot {
    series: JobSeries,
    stage: Option<StageFill>,
    /// The summary, its `out` not yet set.
    drawn: Drawn,
}

/// The figure of job `job`'s samples of operation `op`.
fn plot(cat: &Catalog, job: i64, op: &str) -> Result<Plot> {
    let j = cat
        .job(job)?
        .ok_or(tapeloom_engine::Error::Job(JobError::NoJob(job)))?;
    let rows = cat.samples(job, op)?;
    if rows.is_empty() {
        let op = op.to_string();
        return Err(NoSamples { job, op }.into());
    }
    let tracks = Tracks::new(&rows);
    let spans = spans(&cat.marks(job, op)?);
    let data = DataPhase::of_all(tracks.drives.iter().map(|(_, t)| t));
    let mut summary = vec![
        (
            "job".to_string(),
            format!("{} ({})", j.id, escape_controls(&j.name)),
        ),
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
    let drives = tracks.summary(&mut summary);
    let stage_fill = tracks.stage_peak();
    let recall = match op {
        "recall" => recall_out(&cat.recall_samples(job)?),
        _ => None,
    };
    let mut streams = tracks.streams;
    if let Some(r) = &recall {
        summary.push(("recall".to_string(), recall_line(r)));
        streams.push(recall_track(r));
    }
    let staged = match op {
        "backup" => tracks.stage.is_some(),
        _ => (cat.samples(job, "backup")?.iter()).any(|r| r.series == Series::Stage),
    };
    let mut cartridges = Vec::new();
    for (drive, barcode, text) in cat.drive_health(job, op)? {
        let h: tapeloom_device::DriveHealth =
            serde_json::from_str(&text).map_err(|source| HealthUnreadable {
                job,
                barcode: barcode.clone(),
                source,
            })?;
        summary.push((
            format!("drive {drive} on {}", escape_controls(&barcode)),
            health_line(&h),
        ));
        let health = CartridgeHealth {
            barcode,
            tape_alerts: h.tape_alerts,
            volume_statistics: h.volume_statistics.map(crate::docs::volume_statistics),
        };
        cartridges.push(DriveCartridge { drive, health });
    }
    let spans_out = (spans.iter())
        .map(|s| SpanOut {
            what: s.label.clone(),
            drive: s.drive.clone(),
            from_s: s.from,
            to_s: s.to,
        })
        .collect();
    let series = JobSeries {
        title: format!("job {} ({op}: {})", j.id, escape_controls(&j.name)),
        summary,
        streams,
        drives: tracks.drives.into_iter().map(|(_, t)| t).collect(),
        spans,
    };
    let drawn = Drawn {
        job_id: job,
        op: op.to_string(),
        out: String::new(),
        samples: rows.len(),
        data_mb_per_s: data.and_then(|p| p.mb_per_s()),
        drives,
        spans: spans_out,
        cartridges,
        staged,
        stage_fill,
        recall,
    };
    Ok(Plot {
        series,
        stage: tracks.stage,
        drawn,
    })
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

/// `" (33.0 MB/s while data moved)"`, or with `when`, `"; 33.0 MB/s while data
/// moved (17.0 to 27.0 s)"`; nothing without a data phase.
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
