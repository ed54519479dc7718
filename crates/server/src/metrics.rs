//! `GET /metrics`: what the server counts, in Prometheus's text format (version
//! 0.0.4), kept and encoded by `prometheus-client`. `docs/METRICS.md` lists the
//! series for their readers.
//!
//! Counters are bumped where their event happens, so a scrape only reads them and
//! no event between two scrapes can be missed: the connections' threads count
//! requests, the queue counts jobs as they end ([`Jobs`]), the spools count what
//! clients send, and the queue adds what each running job's drives wrote as the
//! engine samples them, once a second, and their last sample as the job ends.
//! Levels are gauges: the queue moves its own as jobs move; the catalog's (jobs,
//! volumes and stages by state) are read at each scrape, since local commands
//! change the catalog too.
//!
//! No label takes its values from clients or grows without bound: requests are
//! counted by the status the server answered (its own dozen codes), jobs by
//! state, drives by index, stages by path (the admin's few).

use crate::metrics_s3::{Reading, S3Metrics};
use prometheus_client::encoding::{prometheus_text, EncodeLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, PoisonError};
use tapeloom_engine::{Latest, Progress, Series};
use tapeloom_ops::metrics::{ByState, Figures};
use tapeloom_ops::Catalogued;
use tapeloom_proto::backup::State;

/// The content type of the text format.
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabel {
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DriveLabel {
    drive: usize,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ThreadLabel {
    thread: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageLabel {
    stage: String,
}

/// A gauge of a fraction or a rate.
type Ratio = Gauge<f64, AtomicU64>;

/// The server's threads whose panics are counted, by the `thread` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadKind {
    /// The drives' thread, which writes the queue's jobs.
    DriveWriter,
    /// A connection's thread.
    Connection,
    /// A scheduled job's thread.
    Schedule,
    /// A verify's thread.
    Verify,
}

impl ThreadKind {
    const ALL: [ThreadKind; 4] = [
        ThreadKind::DriveWriter,
        ThreadKind::Connection,
        ThreadKind::Schedule,
        ThreadKind::Verify,
    ];

    fn label(self) -> ThreadLabel {
        let thread = match self {
            ThreadKind::DriveWriter => "drive_writer",
            ThreadKind::Connection => "connection",
            ThreadKind::Schedule => "schedule",
            ThreadKind::Verify => "verify",
        };
        ThreadLabel { thread }
    }
}

/// The queue's states of a job not ended, by their label.
const QUEUED: [(State, &str); 3] = [
    (State::Waiting, "waiting"),
    (State::Receiving, "receiving"),
    (State::Writing, "writing"),
];

fn queued_label(s: State) -> Option<StateLabel> {
    let (_, state) = QUEUED.iter().find(|(q, _)| *q == s)?;
    Some(StateLabel { state })
}

/// Makes the series of `label` in `family`, at zero until counted, so that a rate
/// over it starts from its first event.
fn declare<S, M>(family: &Family<S, M>, label: S)
where
    S: Clone + std::hash::Hash + Eq,
    M: Default,
{
    drop(family.get_or_create(&label));
}

/// What the server counts while it runs, and the registry that encodes it.
pub struct Metrics {
    registry: Registry,
    requests: Family<StatusLabel, Counter>,
    refused: Counter,
    dropped: Counter,
    panics: Family<ThreadLabel, Counter>,
    job_errors: Counter,
    jobs: Jobs,
    s3: Option<Arc<S3Metrics>>,
}

impl Default for Metrics {
    fn default() -> Self {
        let m = Metrics {
            registry: Registry::default(),
            requests: Family::default(),
            refused: Counter::default(),
            dropped: Counter::default(),
            panics: Family::default(),
            job_errors: Counter::default(),
            jobs: Jobs::default(),
            s3: None,
        };
        m.register()
    }
}

impl Metrics {
    fn register(mut self) -> Self {
        for k in ThreadKind::ALL {
            declare(&self.panics, k.label());
        }
        let r = &mut self.registry;
        r.register(
            "tapeloom_http_requests",
            "HTTP requests answered, by status",
            self.requests.clone(),
        );
        r.register(
            "tapeloom_http_refused",
            "Requests refused for a missing, unknown or revoked token, or one without the rights",
            self.refused.clone(),
        );
        r.register(
            "tapeloom_http_connections_dropped",
            "Connections closed without an answer: TLS failures, stalled clients, over the connection limit",
            self.dropped.clone(),
        );
        r.register(
            "tapeloom_server_panics",
            "Panics in the server's threads, by kind of thread",
            self.panics.clone(),
        );
        r.register(
            "tapeloom_job_errors",
            "Source objects the server's jobs that ended could not back up",
            self.job_errors.clone(),
        );
        self.jobs.register(r);
        self
    }

    /// A request answered with `status`.
    pub fn answered(&self, status: u16) {
        self.requests.get_or_create(&StatusLabel { status }).inc();
    }

    /// A request refused for its token (missing, unknown, revoked, not an admin's).
    pub fn refused(&self) {
        self.refused.inc();
    }

    /// A connection closed without an answer (TLS failure, stall, over the limit).
    pub fn dropped(&self) {
        self.dropped.inc();
    }

    /// A thread of kind `kind` panicked (and the thread caught it).
    pub fn panicked(&self, kind: ThreadKind) {
        self.panics.get_or_create(&kind.label()).inc();
    }

    /// A job ended with `n` source objects it could not back up.
    pub fn job_errors(&self, n: usize) {
        self.job_errors.inc_by(n as u64);
    }

    /// Counts what the S3 front end answers too, beside the restore cache's
    /// limit `cache_limit`; what the front end tells.
    pub fn s3_on(&mut self, cache_limit: u64) -> Arc<S3Metrics> {
        let m = Arc::new(S3Metrics::new(cache_limit));
        m.register(&mut self.registry);
        self.s3 = Some(Arc::clone(&m));
        m
    }

    /// What the S3 front end counts, when it is on.
    pub fn s3(&self) -> Option<&Arc<S3Metrics>> {
        self.s3.as_ref()
    }

    /// The restoring thread reads `n` restores from tape until the guard is
    /// dropped.
    pub fn s3_reading(&self, n: usize) -> Option<Reading> {
        self.s3.as_ref().map(|m| m.reading(n))
    }

    /// What the queue and the spools count; give it to the server's queue.
    pub fn jobs(&self) -> Jobs {
        self.jobs.clone()
    }

    /// The text format: every series the server counts, then the catalog's
    /// levels as `at` holds them now, the hierarchical storage's of the home
    /// at `home`, and the S3 front end's when it is on.
    pub fn render(
        &self,
        at: &impl Catalogued,
        home: &std::path::Path,
    ) -> tapeloom_ops::Result<String> {
        let figures = tapeloom_ops::metrics::figures(at)?;
        let mut levels = catalog_levels(&figures);
        super::metrics_hsm::levels(figures.hsm.as_ref(), home, &mut levels);
        if let Some(m) = &self.s3 {
            let f = tapeloom_ops::metrics::s3_figures(at)?;
            super::metrics_s3::levels(&f, m, &mut levels);
        }
        let mut s = String::new();
        // Writing to a String fails only when a value's own formatting does.
        let _ = prometheus_text::encode(&mut s, &self.registry);
        let _ = prometheus_text::encode(&mut s, &levels);
        Ok(s)
    }
}

/// What the queue and the spools count of the server's jobs: their ends, their
/// places in the queue, the bytes their clients sent, what their drives wrote.
/// A clone counts into the same series.
#[derive(Clone, Default)]
pub struct Jobs {
    ended: Family<StateLabel, Counter>,
    failed: Counter,
    queued: Family<StateLabel, Gauge>,
    spooled: Gauge,
    drives_busy: Gauge,
    received_bytes: Counter,
    received_blocks: Counter,
    drive_bytes: Family<DriveLabel, Counter>,
    drive_backhitches: Family<DriveLabel, Counter>,
    drive_fill: Family<DriveLabel, Ratio>,
    drive_speed: Family<DriveLabel, Ratio>,
}

/// What a running job's drives had written at its previous sample.
#[derive(Default)]
pub struct DriveTally(BTreeMap<usize, Latest>);

impl Jobs {
    fn register(&self, r: &mut Registry) {
        for state in ["ended", "failed"] {
            declare(&self.ended, StateLabel { state });
        }
        for (_, state) in QUEUED {
            declare(&self.queued, StateLabel { state });
        }
        r.register(
            "tapeloom_jobs_ended",
            "The server's jobs that ended, by how: ended (ok or partial) or failed",
            self.ended.clone(),
        );
        r.register(
            "tapeloom_jobs_failed",
            "The server's jobs that failed (the same as tapeloom_jobs_ended_total{state=\"failed\"})",
            self.failed.clone(),
        );
        r.register(
            "tapeloom_queue_jobs",
            "The server's jobs not ended, by where they are in its queue",
            self.queued.clone(),
        );
        r.register(
            "tapeloom_spool_used_bytes",
            "Bytes clients sent that wait on the server's spool (in memory or in its files) for a drive",
            self.spooled.clone(),
        );
        r.register(
            "tapeloom_drives_busy",
            "The library's drives that the server's running jobs hold",
            self.drives_busy.clone(),
        );
        r.register(
            "tapeloom_received_bytes",
            "Bytes of blocks and notes received from clients for their backups",
            self.received_bytes.clone(),
        );
        r.register(
            "tapeloom_received_blocks",
            "Blocks received from clients for their backups",
            self.received_blocks.clone(),
        );
        r.register(
            "tapeloom_drive_written_bytes",
            "Bytes of blocks the server's jobs wrote, by drive (a running job's as of the engine's latest sample, each second)",
            self.drive_bytes.clone(),
        );
        r.register(
            "tapeloom_drive_backhitches",
            "Backhitches of the server's jobs, by drive (drives with a model count them)",
            self.drive_backhitches.clone(),
        );
        r.register(
            "tapeloom_drive_buffer_fill_ratio",
            "Fill of the drive's buffer, 0 to 1, at the latest sample of the job writing with it (drives with a model)",
            self.drive_fill.clone(),
        );
        r.register(
            "tapeloom_drive_speed_bytes_per_second",
            "The speed step the tape runs at (bytes of tape per second; 0 when it stands), at the latest sample of the job writing with it (drives with a model)",
            self.drive_speed.clone(),
        );
    }

    /// A job moved in the queue from `from` to `to` (none: it was not there, or
    /// it ended).
    pub fn moved(&self, from: Option<State>, to: Option<State>) {
        if from == to {
            return;
        }
        if let Some(l) = from.and_then(queued_label) {
            self.queued.get_or_create(&l).dec();
        }
        if let Some(l) = to.and_then(queued_label) {
            self.queued.get_or_create(&l).inc();
        }
    }

    /// A job ended, `failed` or well.
    pub fn ended(&self, failed: bool) {
        let state = if failed { "failed" } else { "ended" };
        self.ended.get_or_create(&StateLabel { state }).inc();
        if failed {
            self.failed.inc();
        }
    }

    /// `n` bytes came from a client onto the spool, a block or not.
    pub fn received(&self, n: u64, block: bool) {
        self.received_bytes.inc_by(n);
        self.received_blocks.inc_by(u64::from(block));
        self.spooled.inc_by(n as i64);
    }

    /// The gauge of the drives running jobs hold (the server's drives count into it).
    pub fn drives_busy(&self) -> Gauge {
        self.drives_busy.clone()
    }

    /// `n` bytes left the spool.
    pub fn unspooled(&self, n: u64) {
        self.spooled.dec_by(n as i64);
    }

    /// `n` more bytes are held on the stages.
    pub fn spooled_more(&self, n: u64) {
        self.spooled.inc_by(n as i64);
    }

    /// Adds what the drives of a running job wrote since `tally`, from its latest
    /// samples in `p`, and shows their buffer and speed.
    pub fn sampled(&self, tally: &mut DriveTally, p: &Progress) {
        let series = p.series.lock().unwrap_or_else(PoisonError::into_inner);
        for (s, now) in series.iter() {
            let Series::Drive(d) = s else {
                continue;
            };
            let label = DriveLabel { drive: *d };
            let before = tally.0.entry(*d).or_default();
            (self.drive_bytes.get_or_create(&label)).inc_by(now.bytes.saturating_sub(before.bytes));
            let hitches = |l: &Latest| l.backhitches.unwrap_or(0);
            (self.drive_backhitches.get_or_create(&label))
                .inc_by(hitches(now).saturating_sub(hitches(before)));
            if let Some(f) = now.buffer_fill {
                self.drive_fill.get_or_create(&label).set(f);
            }
            if let Some(v) = now.speed_mb_s {
                self.drive_speed.get_or_create(&label).set(v * 1e6);
            }
            // A sample never goes back; a later one that did would add nothing.
            before.bytes = before.bytes.max(now.bytes);
            before.backhitches = before.backhitches.max(now.backhitches);
        }
    }

    /// A job's drives are done: their buffer and speed are no one's now.
    pub fn drives_done(&self, tally: &DriveTally) {
        for d in tally.0.keys() {
            let label = DriveLabel { drive: *d };
            self.drive_fill.remove(&label);
            self.drive_speed.remove(&label);
        }
    }
}

/// A gauge per state of `counts`.
fn by_state(counts: &ByState) -> Family<StateLabel, Gauge> {
    let family: Family<StateLabel, Gauge> = Family::default();
    for (&state, &n) in counts {
        family.get_or_create(&StateLabel { state }).set(n as i64);
    }
    family
}

/// The catalog's levels as it holds them now: jobs and volumes by state, per
/// stage its bytes and its limit, and the site's queue and servers.
fn catalog_levels(f: &Figures) -> Registry {
    let used: Family<StageLabel, Gauge<u64, AtomicU64>> = Family::default();
    let capacity: Family<StageLabel, Gauge<u64, AtomicU64>> = Family::default();
    for st in &f.stages {
        let label = StageLabel {
            stage: st.path.clone(),
        };
        used.get_or_create(&label).set(st.used);
        capacity.get_or_create(&label).set(st.limit);
    }
    let mut r = Registry::default();
    r.register(
        "tapeloom_jobs",
        "Jobs in the catalog, by state",
        by_state(&f.jobs),
    );
    r.register(
        "tapeloom_volumes",
        "Volumes in the catalog, by state",
        by_state(&f.volumes),
    );
    r.register(
        "tapeloom_stage_used_bytes",
        "Bytes a stage holds that its limit counts: chunks not yet on tape, and kept ones",
        used,
    );
    r.register(
        "tapeloom_stage_capacity_bytes",
        "Bytes of chunk files tapeloom may keep on a stage (its limit)",
        capacity,
    );
    // On a site's catalog (one servers registered in).
    if let Some(site) = &f.site {
        r.register(
            "tapeloom_site_queue_jobs",
            "Backups of the site's queue not ended, by state: queued, claimed by a server, begun",
            by_state(&site.queue),
        );
        r.register(
            "tapeloom_site_servers",
            "Servers of the site, by what the catalog says of them: up, dead (taken for dead), stopped",
            by_state(&site.servers),
        );
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::Queue;

    fn value(text: &str, series: &str) -> Option<f64> {
        let line = text
            .lines()
            .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))?;
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

    fn catalog() -> (tempfile::TempDir, tapeloom_engine::Home) {
        let d = tempfile::tempdir().unwrap();
        let home = tapeloom_engine::Home::open(d.path()).unwrap();
        (d, home)
    }

    #[test]
    fn every_family_has_help_and_type_and_every_state_a_line() {
        let (_d, cat) = catalog();
        let m = Metrics::default();
        m.answered(200);
        m.answered(200);
        m.answered(404);
        m.refused();
        let text = m
            .render(&cat, std::path::Path::new("/nonexistent"))
            .unwrap();
        let requests = |status: u16| format!("tapeloom_http_requests_total{{status=\"{status}\"}}");
        assert_eq!(value(&text, &requests(200)), Some(2.0));
        assert_eq!(value(&text, &requests(404)), Some(1.0));
        assert_eq!(value(&text, &requests(500)), None);
        assert_eq!(value(&text, "tapeloom_http_refused_total"), Some(1.0));
        assert_eq!(value(&text, "tapeloom_jobs{state=\"failed\"}"), Some(0.0));
        assert_eq!(
            value(&text, "tapeloom_volumes{state=\"expired\"}"),
            Some(0.0)
        );
        assert_eq!(
            value(&text, "tapeloom_queue_jobs{state=\"receiving\"}"),
            Some(0.0)
        );
        assert_eq!(
            value(&text, "tapeloom_jobs_ended_total{state=\"failed\"}"),
            Some(0.0)
        );
        let panics = "tapeloom_server_panics_total{thread=\"drive_writer\"}";
        assert_eq!(value(&text, panics), Some(0.0));
        m.panicked(ThreadKind::DriveWriter);
        assert_eq!(
            value(
                &m.render(&cat, std::path::Path::new("/nonexistent"))
                    .unwrap(),
                panics
            ),
            Some(1.0)
        );
        assert_eq!(text.matches("# TYPE").count(), 14, "{text}");
        assert_eq!(text.matches("# HELP").count(), 14);
    }

    #[test]
    fn the_s3_families_have_help_and_type_and_count_what_the_front_end_tells() {
        use tapeloom_s3::{Budget, Watch};
        let (_d, cat) = catalog();
        let mut m = Metrics::default();
        let watch = m.s3_on(4096);
        watch.answered("PutObject", 200);
        watch.answered("PutObject", 200);
        watch.answered("PutObject", 503);
        watch.answered("ListObjectsV2", 200);
        watch.received(100);
        watch.received(28);
        watch.sent(7);
        watch.slowed_down(Budget::Bulk);
        let text = m
            .render(&cat, std::path::Path::new("/nonexistent"))
            .unwrap();
        let req = |op: &str, status: u16| {
            let series =
                format!("tapeloom_s3_requests_total{{operation=\"{op}\",status=\"{status}\"}}");
            value(&text, &series)
        };
        assert_eq!(req("PutObject", 200), Some(2.0));
        assert_eq!(req("PutObject", 503), Some(1.0));
        assert_eq!(req("ListObjectsV2", 200), Some(1.0));
        assert_eq!(
            value(&text, "tapeloom_s3_received_bytes_total"),
            Some(128.0)
        );
        assert_eq!(value(&text, "tapeloom_s3_sent_bytes_total"), Some(7.0));
        let slow = |b: &str| {
            value(
                &text,
                &format!("tapeloom_s3_slow_down_total{{budget=\"{b}\"}}"),
            )
        };
        assert_eq!((slow("bulk"), slow("control")), (Some(1.0), Some(0.0)));
        assert_eq!(value(&text, "tapeloom_s3_objects_waiting"), Some(0.0));
        assert_eq!(value(&text, "tapeloom_s3_objects_waiting_bytes"), Some(0.0));
        assert_eq!(
            value(&text, "tapeloom_s3_restores{state=\"waiting\"}"),
            Some(0.0)
        );
        assert_eq!(
            value(&text, "tapeloom_s3_restores{state=\"running\"}"),
            Some(0.0)
        );
        assert_eq!(
            value(&text, "tapeloom_s3_restore_cache_used_bytes"),
            Some(0.0)
        );
        assert_eq!(
            value(&text, "tapeloom_s3_restore_cache_capacity_bytes"),
            Some(4096.0)
        );
        // The S3 front end's 4 counters and 5 levels, each with its HELP and
        // its TYPE, beside the server's own families.
        assert_eq!(text.matches("# TYPE tapeloom_s3_").count(), 9, "{text}");
        assert_eq!(text.matches("# HELP tapeloom_s3_").count(), 9);
        assert_eq!(text.matches("# TYPE").count(), 22, "{text}");
        assert_eq!(text.matches("# HELP").count(), 22);
        assert_eq!(m.s3().map(|s| s.answered_total()), Some(4));
    }

    #[test]
    fn a_drives_counter_adds_each_sample_and_the_last_and_never_goes_back() {
        let (_d, cat) = catalog();
        let m = Metrics::default();
        let q = Queue::new(m.jobs());
        let bytes = |text: &str| value(text, "tapeloom_drive_written_bytes_total{drive=\"1\"}");
        let a = q.add("alice", "a\"b", "client");
        let p = Arc::new(Progress::default());
        q.writing(a, 7, Arc::clone(&p));
        on_drive(&p, 1, 100, 2);
        q.sample();
        let text = m
            .render(&cat, std::path::Path::new("/nonexistent"))
            .unwrap();
        assert_eq!(bytes(&text), Some(100.0));
        assert_eq!(
            value(&text, "tapeloom_queue_jobs{state=\"writing\"}"),
            Some(1.0)
        );
        assert_eq!(
            value(&text, "tapeloom_drive_buffer_fill_ratio{drive=\"1\"}"),
            Some(0.5)
        );
        let speed = "tapeloom_drive_speed_bytes_per_second{drive=\"1\"}";
        assert_eq!(value(&text, speed), Some(40e6));
        // No label names a job, a client or a job's name.
        assert!(
            !text.contains("alice") && !text.contains("job=\""),
            "{text}"
        );
        // Its last sample, then it ends, unseen by a scrape: the counter keeps it.
        on_drive(&p, 1, 150, 3);
        q.ended(a, Some("the client went away".into()));
        let text = m
            .render(&cat, std::path::Path::new("/nonexistent"))
            .unwrap();
        assert_eq!(bytes(&text), Some(150.0));
        assert_eq!(
            value(&text, "tapeloom_drive_backhitches_total{drive=\"1\"}"),
            Some(3.0)
        );
        assert_eq!(value(&text, "tapeloom_jobs_failed_total"), Some(1.0));
        assert_eq!(
            value(&text, "tapeloom_queue_jobs{state=\"writing\"}"),
            Some(0.0)
        );
        assert!(
            !text.contains("tapeloom_drive_buffer_fill_ratio{"),
            "{text}"
        );
        // The next job on the drive counts on top; a sample more adds nothing twice.
        let b = q.add("bob", "b", "client");
        let p = Arc::new(Progress::default());
        q.writing(b, 8, Arc::clone(&p));
        on_drive(&p, 1, 30, 0);
        q.sample();
        q.sample();
        assert_eq!(
            bytes(
                &m.render(&cat, std::path::Path::new("/nonexistent"))
                    .unwrap()
            ),
            Some(180.0)
        );
        q.ended(b, None);
        q.sample();
        let text = m
            .render(&cat, std::path::Path::new("/nonexistent"))
            .unwrap();
        assert_eq!(bytes(&text), Some(180.0));
        assert_eq!(
            value(&text, "tapeloom_jobs_ended_total{state=\"ended\"}"),
            Some(1.0)
        );
        assert_eq!(value(&text, "tapeloom_jobs_failed_total"), Some(1.0));
    }

    /// Counted at scrape time from the queue's last 50 ended entries, jobs that
    /// ended between two scrapes beyond those were missed.
    #[test]
    fn no_job_is_missed_when_many_end_between_two_scrapes() {
        let (_d, cat) = catalog();
        let m = Metrics::default();
        let q = Queue::new(m.jobs());
        for i in 0..120u64 {
            let n = q.add("c", "j", "client");
            let p = Arc::new(Progress::default());
            q.writing(n, i as i64, Arc::clone(&p));
            on_drive(&p, 0, 10, 0);
            q.ended(n, (i % 3 == 0).then(|| "failed".to_string()));
        }
        let text = m
            .render(&cat, std::path::Path::new("/nonexistent"))
            .unwrap();
        assert_eq!(
            value(&text, "tapeloom_jobs_ended_total{state=\"ended\"}"),
            Some(80.0)
        );
        assert_eq!(
            value(&text, "tapeloom_jobs_ended_total{state=\"failed\"}"),
            Some(40.0)
        );
        let drive = "tapeloom_drive_written_bytes_total{drive=\"0\"}";
        assert_eq!(value(&text, drive), Some(1200.0));
        assert_eq!(
            value(&text, "tapeloom_queue_jobs{state=\"waiting\"}"),
            Some(0.0)
        );
    }

    #[test]
    fn the_spool_gauge_follows_what_the_jobs_hold_on_the_stages() {
        let (_d, cat) = catalog();
        let m = Metrics::default();
        let q = Queue::new(m.jobs());
        let n = q.add("c", "j", "client");
        let c = q.counters(n).unwrap();
        c.received(100, true);
        c.received(20, false);
        // The drives wrote some: the job holds 70 bytes on the stages.
        c.held_now(70);
        let text = m
            .render(&cat, std::path::Path::new("/nonexistent"))
            .unwrap();
        assert_eq!(value(&text, "tapeloom_spool_used_bytes"), Some(70.0));
        assert_eq!(value(&text, "tapeloom_received_bytes_total"), Some(120.0));
        assert_eq!(value(&text, "tapeloom_received_blocks_total"), Some(1.0));
        c.held_now(90);
        assert_eq!(
            value(
                &m.render(&cat, std::path::Path::new("/nonexistent"))
                    .unwrap(),
                "tapeloom_spool_used_bytes"
            ),
            Some(90.0)
        );
        c.held_now(0);
        assert_eq!(
            value(
                &m.render(&cat, std::path::Path::new("/nonexistent"))
                    .unwrap(),
                "tapeloom_spool_used_bytes"
            ),
            Some(0.0)
        );
    }

    #[test]
    fn a_stages_path_is_escaped_as_a_label_value() {
        let (_d, cat) = catalog();
        cat.catalog
            .add_stage(std::path::Path::new("/a\"b"), 1 << 30, 0)
            .unwrap();
        let text = Metrics::default()
            .render(&cat, std::path::Path::new("/nonexistent"))
            .unwrap();
        assert!(
            text.contains("tapeloom_stage_capacity_bytes{stage=\"/a\\\"b\"} 1073741824\n"),
            "{text}"
        );
    }
}
