//! `GET /metrics`: the server's counters, its queue and the drives of its running
//! jobs, and the catalog's gauges, in Prometheus's text format (version 0.0.4).
//! Counters are 64-bit and start at zero with the process.
//!
//! A drive's bytes and backhitches are counters over all the server's jobs: the
//! running jobs' latest samples on top of what the ended ones wrote. The queue
//! forgets a job's progress when the job ends, so the ended jobs are added up here
//! as `/metrics` is read ([`Ended`]).

use super::queue::{Entry, Live as Running, Queue, State};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use tapeloom_catalog::{Catalog, JobState, VolumeState};
use tapeloom_engine::{Latest, Progress, Series};

/// The content type of the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What the server counts while it runs.
#[derive(Default)]
pub struct Metrics {
    by_status: Mutex<BTreeMap<u16, u64>>,
    refused: AtomicU64,
    dropped: AtomicU64,
    ended: Mutex<Ended>,
}

impl Metrics {
    /// A request answered with `status`.
    pub fn answered(&self, status: u16) {
        let mut m = self.by_status.lock().unwrap_or_else(|p| p.into_inner());
        *m.entry(status).or_insert(0) += 1;
    }

    /// A request refused for its token (missing, unknown, revoked, not an admin's).
    pub fn refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection closed without an answer (TLS failure, stall, over the limit).
    pub fn dropped(&self) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// The text format: the requests, the jobs and volumes of `cat` by state, the
    /// drives, running jobs and queue of `queue`, the stages, the errors.
    pub fn render(&self, queue: &Queue, cat: &Catalog) -> tapeloom_catalog::Result<String> {
        let (running, recent) = queue.snapshot();
        let ended = {
            let mut e = self.ended.lock().unwrap_or_else(PoisonError::into_inner);
            e.update(&running, &recent, cat)?;
            (e.drives.clone(), e.errors, e.failed)
        };
        let mut s = String::new();
        self.http(&mut s);
        catalog_states(&mut s, cat)?;
        drives(&mut s, &ended.0, &running);
        running_jobs(&mut s, &running);
        queue_states(&mut s, &running);
        stages(&mut s, cat)?;
        family(
            &mut s,
            "tapeloom_job_errors_total",
            "counter",
            "Source objects the server's ended jobs could not back up.",
        );
        let _ = writeln!(s, "tapeloom_job_errors_total {}", ended.1);
        family(
            &mut s,
            "tapeloom_jobs_failed_total",
            "counter",
            "The server's jobs that failed.",
        );
        let _ = writeln!(s, "tapeloom_jobs_failed_total {}", ended.2);
        Ok(s)
    }

    fn http(&self, s: &mut String) {
        let by_status = self
            .by_status
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        family(
            s,
            "tapeloom_http_requests_total",
            "counter",
            "HTTP requests answered, by status.",
        );
        for (status, n) in by_status {
            let _ = writeln!(s, "tapeloom_http_requests_total{{status=\"{status}\"}} {n}");
        }
        let refused = self.refused.load(Ordering::Relaxed);
        family(
            s,
            "tapeloom_http_refused_total",
            "counter",
            "Requests refused for a missing, unknown or revoked token, or one without the rights.",
        );
        let _ = writeln!(s, "tapeloom_http_refused_total {refused}");
        let dropped = self.dropped.load(Ordering::Relaxed);
        family(s, "tapeloom_http_connections_dropped_total", "counter", "Connections closed without an answer: TLS failures, stalled clients, over the connection limit.");
        let _ = writeln!(s, "tapeloom_http_connections_dropped_total {dropped}");
    }
}

/// The jobs and volumes of `cat` by state.
fn catalog_states(s: &mut String, cat: &Catalog) -> tapeloom_catalog::Result<()> {
    let mut jobs: BTreeMap<&str, u64> = [
        JobState::Running,
        JobState::Ok,
        JobState::Partial,
        JobState::Failed,
    ]
    .iter()
    .map(|s| (s.as_str(), 0))
    .collect();
    for j in cat.jobs()? {
        *jobs.entry(j.status.as_str()).or_insert(0) += 1;
    }
    let mut volumes: BTreeMap<&str, u64> = [
        VolumeState::Append,
        VolumeState::Full,
        VolumeState::Suspect,
        VolumeState::Expired,
    ]
    .iter()
    .map(|s| (s.as_str(), 0))
    .collect();
    for v in cat.volumes()? {
        *volumes.entry(v.status.as_str()).or_insert(0) += 1;
    }
    family(
        s,
        "tapeloom_jobs",
        "gauge",
        "Jobs in the catalog, by state.",
    );
    for (state, n) in jobs {
        let _ = writeln!(s, "tapeloom_jobs{{state=\"{state}\"}} {n}");
    }
    family(
        s,
        "tapeloom_volumes",
        "gauge",
        "Volumes in the catalog, by state.",
    );
    for (state, n) in volumes {
        let _ = writeln!(s, "tapeloom_volumes{{state=\"{state}\"}} {n}");
    }
    Ok(())
}

/// A drive's figures added up over jobs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct DriveTotal {
    bytes: u64,
    backhitches: u64,
}

impl DriveTotal {
    fn add(&mut self, o: DriveTotal) {
        self.bytes += o.bytes;
        self.backhitches += o.backhitches;
    }
}

/// What the server's ended jobs add to the counters, brought up to date as
/// `/metrics` is read. A job running at the previous read is added from the
/// progress kept since, whose last sample is the job's last (taken as its drive
/// ended); a job that ran entirely between two reads, from the samples stored with
/// it in the catalog (none when it failed before they were stored). A job
/// is missed only when it began and ended between two reads and more than the
/// queue's recent entries (50) ended after it.
#[derive(Default)]
struct Ended {
    drives: BTreeMap<usize, DriveTotal>,
    errors: u64,
    failed: u64,
    /// The backups (by queue number) added, while the queue lists them as recent.
    folded: BTreeSet<u64>,
    /// The jobs running at the previous read: queue number, catalog job, progress.
    seen: BTreeMap<u64, (Option<i64>, Arc<Progress>)>,
}

impl Ended {
    /// Adds the jobs that ended since the previous read; keeps the running ones.
    fn update(
        &mut self,
        running: &[Running],
        recent: &[Entry],
        cat: &Catalog,
    ) -> tapeloom_catalog::Result<()> {
        for e in recent {
            if self.folded.contains(&e.backup) {
                continue;
            }
            let kept = self.seen.get(&e.backup).map(|(_, p)| Arc::clone(p));
            self.fold(e.job, kept.as_deref(), Some(e.state == State::Failed), cat)?;
            self.seen.remove(&e.backup);
            self.folded.insert(e.backup);
        }
        // Seen running, and since gone from the recent entries too.
        let live: BTreeSet<u64> = running.iter().map(|r| r.entry.backup).collect();
        let gone: Vec<u64> = (self.seen.keys())
            .filter(|b| !live.contains(b))
            .copied()
            .collect();
        for b in gone {
            if let Some((job, p)) = self.seen.get(&b).cloned() {
                self.fold(job, Some(&p), None, cat)?;
                self.seen.remove(&b);
            }
        }
        self.folded
            .retain(|b| recent.iter().any(|e| e.backup == *b));
        self.seen = (running.iter())
            .filter_map(|r| {
                Some((
                    r.entry.backup,
                    (r.entry.job, Arc::clone(r.progress.as_ref()?)),
                ))
            })
            .collect();
        Ok(())
    }

    /// Adds an ended job: its drives from `kept` or the catalog, its errors, and
    /// whether it `failed` (the catalog says, when not known).
    fn fold(
        &mut self,
        job: Option<i64>,
        kept: Option<&Progress>,
        failed: Option<bool>,
        cat: &Catalog,
    ) -> tapeloom_catalog::Result<()> {
        let drives = match (kept, job) {
            (Some(p), _) => latest_drives(p)
                .into_iter()
                .map(|(d, l)| (d, total_of(&l)))
                .collect(),
            (None, Some(j)) => stored_drives(cat, j)?,
            (None, None) => BTreeMap::new(),
        };
        let errors = match job {
            Some(j) => cat.errors(j)?.len() as u64,
            None => 0,
        };
        let failed = match (failed, job) {
            (Some(f), _) => f,
            (None, Some(j)) => cat.job(j)?.is_some_and(|x| x.status == JobState::Failed),
            (None, None) => false,
        };
        for (d, t) in drives {
            self.drives.entry(d).or_default().add(t);
        }
        self.errors += errors;
        self.failed += u64::from(failed);
        Ok(())
    }
}

fn total_of(l: &Latest) -> DriveTotal {
    DriveTotal {
        bytes: l.bytes,
        backhitches: l.backhitches.unwrap_or(0),
    }
}

/// The latest sample of each drive of a job.
fn latest_drives(p: &Progress) -> BTreeMap<usize, Latest> {
    let series = p.series.lock().unwrap_or_else(PoisonError::into_inner);
    (series.iter())
        .filter_map(|(s, l)| match s {
            Series::Drive(d) => Some((*d, *l)),
            _ => None,
        })
        .collect()
}

/// The last figures of each drive of `job`, from the samples stored with it.
fn stored_drives(cat: &Catalog, job: i64) -> tapeloom_catalog::Result<BTreeMap<usize, DriveTotal>> {
    let mut out: BTreeMap<usize, DriveTotal> = BTreeMap::new();
    for x in cat.samples(job, "backup")? {
        if let Series::Drive(d) = x.series {
            let t = out.entry(d).or_default();
            t.bytes = t.bytes.max(x.bytes);
            t.backhitches = t.backhitches.max(x.backhitches);
        }
    }
    Ok(out)
}

/// Per drive: bytes and backhitches (ended jobs' and running ones'), and the
/// running jobs' latest buffer fill and speed step.
fn drives(s: &mut String, ended: &BTreeMap<usize, DriveTotal>, running: &[Running]) {
    let mut totals = ended.clone();
    let mut now: BTreeMap<usize, Latest> = BTreeMap::new();
    for p in running.iter().filter_map(|r| r.progress.as_ref()) {
        for (d, l) in latest_drives(p) {
            totals.entry(d).or_default().add(total_of(&l));
            now.insert(d, l);
        }
    }
    family(s, "tapeloom_drive_written_bytes_total", "counter", "Bytes of blocks written by the server's jobs, by drive (the running jobs' as of their latest sample, each second).");
    for (d, t) in &totals {
        let _ = writeln!(
            s,
            "tapeloom_drive_written_bytes_total{{drive=\"{d}\"}} {}",
            t.bytes
        );
    }
    family(
        s,
        "tapeloom_drive_backhitches_total",
        "counter",
        "Backhitches of the server's jobs, by drive (drives with a model count them).",
    );
    for (d, t) in &totals {
        let _ = writeln!(
            s,
            "tapeloom_drive_backhitches_total{{drive=\"{d}\"}} {}",
            t.backhitches
        );
    }
    family(s, "tapeloom_drive_buffer_fill_ratio", "gauge", "Fill of the drive's buffer, 0 to 1, at the latest sample of the job writing with it (drives with a model).");
    for (d, l) in &now {
        if let Some(f) = l.buffer_fill {
            let _ = writeln!(s, "tapeloom_drive_buffer_fill_ratio{{drive=\"{d}\"}} {f}");
        }
    }
    family(s, "tapeloom_drive_speed_bytes_per_second", "gauge", "The speed step the tape runs at (bytes of tape per second; 0 when it stands), at the latest sample of the job writing with it (drives with a model).");
    for (d, l) in &now {
        if let Some(v) = l.speed_mb_s {
            let _ = writeln!(
                s,
                "tapeloom_drive_speed_bytes_per_second{{drive=\"{d}\"}} {}",
                v * 1e6
            );
        }
    }
}

/// Per running job: the bytes its drives wrote.
fn running_jobs(s: &mut String, running: &[Running]) {
    family(
        s,
        "tapeloom_job_written_bytes_total",
        "counter",
        "Bytes of blocks written by each running job, all its drives, as of their latest sample.",
    );
    for r in running {
        let (Some(job), Some(p)) = (r.entry.job, &r.progress) else {
            continue;
        };
        let bytes: u64 = latest_drives(p).values().map(|l| l.bytes).sum();
        let (client, name) = (escape(&r.entry.client), escape(&r.entry.name));
        let _ = writeln!(s, "tapeloom_job_written_bytes_total{{job=\"{job}\",client=\"{client}\",name=\"{name}\"}} {bytes}");
    }
}

/// The queue's jobs by state.
fn queue_states(s: &mut String, running: &[Running]) {
    let states = [State::Waiting, State::Receiving, State::Writing];
    family(
        s,
        "tapeloom_queue_jobs",
        "gauge",
        "The server's jobs not ended, by where they are in its queue.",
    );
    for state in states {
        let n = running.iter().filter(|r| r.entry.state == state).count();
        let name = match state {
            State::Waiting => "waiting",
            State::Receiving => "receiving",
            _ => "writing",
        };
        let _ = writeln!(s, "tapeloom_queue_jobs{{state=\"{name}\"}} {n}");
    }
}

/// Per stage: the bytes its limit counts, and the limit.
fn stages(s: &mut String, cat: &Catalog) -> tapeloom_catalog::Result<()> {
    let stages = cat.stages()?;
    let usage: BTreeMap<i64, u64> = (cat.stage_use()?.into_iter())
        .map(|(id, u)| (id, u.used()))
        .collect();
    family(
        s,
        "tapeloom_stage_used_bytes",
        "gauge",
        "Bytes a stage holds that its limit counts: chunks not yet on tape, and kept ones.",
    );
    for st in &stages {
        let used = usage.get(&st.id).copied().unwrap_or(0);
        let path = escape(&st.path.to_string_lossy());
        let _ = writeln!(s, "tapeloom_stage_used_bytes{{stage=\"{path}\"}} {used}");
    }
    family(
        s,
        "tapeloom_stage_capacity_bytes",
        "gauge",
        "Bytes of chunk files tapeloom may keep on a stage (its limit).",
    );
    for st in &stages {
        let path = escape(&st.path.to_string_lossy());
        let _ = writeln!(
            s,
            "tapeloom_stage_capacity_bytes{{stage=\"{path}\"}} {}",
            st.size_limit
        );
    }
    Ok(())
}

/// A label value as the text format writes it.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn family(s: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(s, "# HELP {name} {help}");
    let _ = writeln!(s, "# TYPE {name} {kind}");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(text: &str, line_start: &str) -> Option<f64> {
        let line = text.lines().find(|l| l.starts_with(line_start))?;
        line.rsplit(' ').next()?.parse().ok()
    }

    fn on_drive(p: &Progress, drive: usize, bytes: u64, backhitches: u64) {
        let latest = Latest {
            bytes,
            backhitches: Some(backhitches),
            buffer_fill: Some(0.5),
            speed_mb_s: Some(40.0),
        };
        p.series
            .lock()
            .unwrap()
            .insert(Series::Drive(drive), latest);
    }

    #[test]
    fn every_family_has_help_and_type_and_every_state_a_line() {
        let d = tempfile::tempdir().unwrap();
        let cat = Catalog::open(&d.path().join("c.db")).unwrap();
        let m = Metrics::default();
        m.answered(200);
        m.answered(200);
        m.refused();
        let text = m.render(&Queue::default(), &cat).unwrap();
        assert!(text.contains("tapeloom_http_requests_total{status=\"200\"} 2\n"));
        assert!(text.contains("tapeloom_http_refused_total 1\n"));
        assert!(text.contains("tapeloom_jobs{state=\"failed\"} 0\n"));
        assert!(text.contains("tapeloom_volumes{state=\"expired\"} 0\n"));
        assert!(text.contains("tapeloom_queue_jobs{state=\"receiving\"} 0\n"));
        assert_eq!(text.matches("# TYPE").count(), 15);
        assert_eq!(text.matches("# HELP").count(), 15);
    }

    #[test]
    fn a_drives_counter_adds_the_ended_jobs_and_never_goes_back() {
        let d = tempfile::tempdir().unwrap();
        let cat = Catalog::open(&d.path().join("c.db")).unwrap();
        let (m, q) = (Metrics::default(), Queue::default());
        let bytes = |text: &str| value(text, "tapeloom_drive_written_bytes_total{drive=\"1\"}");
        let a = q.add("alice", "a\"b", "client");
        let p = Arc::new(Progress::default());
        q.writing(a, 7, Arc::clone(&p));
        on_drive(&p, 1, 100, 2);
        let text = m.render(&q, &cat).unwrap();
        assert_eq!(bytes(&text), Some(100.0));
        assert!(text.contains("tapeloom_queue_jobs{state=\"writing\"} 1\n"));
        assert!(text.contains(
            "tapeloom_job_written_bytes_total{job=\"7\",client=\"alice\",name=\"a\\\"b\"} 100\n"
        ));
        assert!(text.contains("tapeloom_drive_buffer_fill_ratio{drive=\"1\"} 0.5\n"));
        assert!(text.contains("tapeloom_drive_speed_bytes_per_second{drive=\"1\"} 40000000\n"));
        // Its last sample, then it ends: the counter keeps it.
        on_drive(&p, 1, 150, 3);
        q.ended(a, Some("the client went away".into()));
        let text = m.render(&q, &cat).unwrap();
        assert_eq!(bytes(&text), Some(150.0));
        assert_eq!(
            value(&text, "tapeloom_drive_backhitches_total{drive=\"1\"}"),
            Some(3.0)
        );
        assert_eq!(value(&text, "tapeloom_jobs_failed_total"), Some(1.0));
        assert!(!text.contains("tapeloom_job_written_bytes_total{"));
        assert!(!text.contains("tapeloom_drive_buffer_fill_ratio{"));
        // The next job on the drive counts on top; a read more adds nothing twice.
        let b = q.add("bob", "b", "client");
        let p = Arc::new(Progress::default());
        q.writing(b, 8, Arc::clone(&p));
        on_drive(&p, 1, 30, 0);
        assert_eq!(bytes(&m.render(&q, &cat).unwrap()), Some(180.0));
        q.ended(b, None);
        assert_eq!(bytes(&m.render(&q, &cat).unwrap()), Some(180.0));
        let text = m.render(&q, &cat).unwrap();
        assert_eq!(bytes(&text), Some(180.0));
        assert_eq!(value(&text, "tapeloom_jobs_failed_total"), Some(1.0));
    }

    #[test]
    fn a_label_value_is_escaped() {
        assert_eq!(escape("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
    }
}
