//! One drive's writer: it pulls streams from the job's queue, interleaves the ones it
//! holds in extents, lands their blocks through its [`VolumeWriter`], records where
//! every entry went, and samples its counters every second.
//!
//! Streams are balanced across drives by pull: a drive takes a waiting stream when
//! its own writer runs dry or when the queue's tail must start for the streams to end
//! together (`--concurrency auto`, see [`ConcurrencyRule`]), or when one of its
//! streams ends (a fixed concurrency). Once every waiting stream's size is estimated,
//! the largest goes first. A drive fed by fast streams stays with few; a drive whose
//! streams are slow takes more. A stream never moves between drives, so each stream's
//! blocks stay in order along one drive's chain of cartridges.

use crate::backup::estimate::Estimates;
use crate::backup::mux::{Done, Extents, Lane, Msg, Outlet, Shared};
use crate::backup::pack::PackerSetup;
use crate::backup::plan::{DespoolOrder, Interleave, Pending};
use crate::backup::staged::{self, Feed};
use crate::backup::{BackupOptions, DriveReport, Progress, StreamReport};
use crate::error::{Error, Result};
use crate::media::writer::VolumeWriter;
use crate::sampler::Sampler;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tapeloom_catalog::{FileRow, Sample};
use tapeloom_format::PackedBlock;

/// What the drives of one job share.
pub(crate) struct JobShared<'a> {
    /// The process's CPU seconds when the job began.
    pub cpu0: Option<f64>,
    pub opts: &'a BackupOptions,
    pub tag: u64,
    pub job_id: i64,
    pub skip: Vec<(u64, u64)>,
    pub pending: Mutex<VecDeque<Pending>>,
    pub progress: Arc<Progress>,
    pub t0: Instant,
    /// Set when a drive failed: the others stop too.
    pub stop: AtomicBool,
    /// Streams each drive expects to hold at once, to size its channels.
    pub expected: usize,
    /// Whether packers compress their blocks (zstd).
    pub software: bool,
    /// What they did.
    pub counters: Arc<tapeloom_tree::pack::compress::CompressionCounters>,
    /// Each stream's estimated size.
    pub estimates: Arc<Estimates>,
    /// Drives writing the job.
    pub drives: usize,
    /// The index entries of the files that have landed, from every drive.
    pub index: Mutex<crate::backup::index::IndexSpool>,
    /// Blocks the drives wrote again after deferred write errors.
    pub moved: Mutex<Vec<crate::media::writer::Moved>>,
    /// When the job goes through the stages: what its spoolers have staged.
    pub feed: Option<Arc<Feed>>,
    /// When the streams were packed elsewhere: their ways in.
    pub received: Option<Arc<crate::backup::received::Received>>,
    /// When the job goes on after its process died: what it had done.
    pub prior: Option<crate::backup::plan::Prior>,
    /// What the job reads of its sources, and its base.
    pub scan: Arc<crate::backup::changes::Scan>,
    /// Its set, level and base.
    pub set: crate::backup::changes::SetChoice,
}

impl JobShared<'_> {
    /// What each stream's packer is started with.
    pub(crate) fn packer_setup(&self) -> PackerSetup {
        PackerSetup {
            tag: self.tag,
            block_size: self.opts.block_size,
            tail: self.tail(),
            readers: self.opts.readers,
            skip: self.skip.clone(),
            counters: self.software.then(|| Arc::clone(&self.counters)),
            scan: Arc::clone(&self.scan),
        }
    }

    /// Bytes each block keeps free after its payload: an encrypted block's nonce
    /// and tag.
    pub(crate) fn tail(&self) -> usize {
        if self.opts.encrypt.is_some() {
            tapeloom_format::CRYPT_TAIL_LEN
        } else {
            0
        }
    }

    /// The next stream for the drive that is `slot`th of the job's drives.
    fn next_stream(&self, slot: usize) -> Option<Pending> {
        let mut q = self.pending.lock().ok()?;
        if self.opts.interleave == Interleave::InTurn {
            // Sizes are estimated as the job goes and drives pull as they run
            // dry: both are timing. In turn, stream `k` of the order given goes to
            // drive `k mod drives`, and each drive takes its own in that order.
            let mine =
                |p: &Pending| usize::from(p.id).saturating_sub(1) % self.drives.max(1) == slot;
            let i = q.iter().position(mine)?;
            return q.remove(i);
        }
        let i = largest_first(q.iter().map(|p| self.estimates.get(p.id)));
        q.remove(i)
    }
}

/// Which waiting stream to take, given their estimated sizes in queue order: the
/// largest, once every size is known, else the first. Largest first is the classic
/// rule for ending parallel work together: the small streams come last and fill in
/// around the large ones.
fn largest_first(sizes: impl Iterator<Item = Option<u64>>) -> usize {
    let mut best: Option<(usize, u64)> = None;
    for (i, s) in sizes.enumerate() {
        let Some(s) = s else { return 0 };
        if best.is_none_or(|(_, b)| s > b) {
            best = Some((i, s));
        }
    }
    best.map_or(0, |(i, _)| i)
}

/// What one drive's writer hands back.
pub(crate) struct Woven {
    pub report: DriveReport,
    pub streams: Vec<(u16, StreamReport)>,
    pub errors: Vec<(String, String)>,
    pub entries: u64,
    pub stored: u64,
    pub samples: Vec<Sample>,
}

/// When a drive with `--concurrency auto` takes another stream.
///
/// - When its writer waited for data a fifth or more of the last tenth of a second:
///   the streams in hand cannot keep the drive busy. A drive that never waits is
///   saturated and takes no more on this account.
/// - When the next waiting stream, if it were started only as a held one ends, would
///   end after all the others and run alone, or with too few to keep the drive
///   streaming: see [`Backlog::next_ends_late`]. This is what makes the streams of
///   a job end together instead of leaving the last one to stall the drive.
///
/// With a fixed concurrency, the target never moves.
#[derive(Debug)]
pub(crate) struct ConcurrencyRule {
    fixed: bool,
    target: usize,
    window_start: Instant,
    window_wait: Duration,
}

/// The span over which a writer's waits are judged: at the end of each, a writer
/// with adaptive concurrency that waited [`DRY_SHARE`] of it or more takes another
/// stream. The window planner of the measuring tools follows the same rule with
/// these constants.
pub const JUDGE_WINDOW: Duration = Duration::from_millis(100);
/// The share of a window spent waiting that calls for one more stream.
pub const DRY_SHARE: f64 = 0.2;
/// The longest a writer that ran dry waits for its streams' buffers to fill to the
/// high-water mark (`BackupOptions::high_water`) before it writes again.
pub const HIGH_WATER_WAIT: Duration = Duration::from_secs(2);

impl ConcurrencyRule {
    /// A fixed number of streams at once, or `None` to adapt starting from one.
    pub fn new(fixed: Option<usize>, now: Instant) -> Self {
        ConcurrencyRule {
            fixed: fixed.is_some(),
            target: fixed.unwrap_or(1).max(1),
            window_start: now,
            window_wait: Duration::ZERO,
        }
    }

    /// The writer waited this long for data.
    pub fn waited(&mut self, d: Duration) {
        self.window_wait += d;
    }

    /// Closes the window when it is over; returns how many streams to hold, given
    /// that `held` are held now and what `backlog` tells (asked only when a window
    /// closes; `None` when sizes are not known yet).
    pub fn target(
        &mut self,
        now: Instant,
        held: usize,
        backlog: impl FnOnce() -> Option<Backlog>,
    ) -> usize {
        let span = now.saturating_duration_since(self.window_start);
        if span >= JUDGE_WINDOW {
            if !self.fixed && self.window_wait.as_secs_f64() >= DRY_SHARE * span.as_secs_f64() {
                self.target = self.target.max(held) + 1;
            } else if !self.fixed && backlog().is_some_and(|b| b.next_ends_late(held)) {
                self.target = self.target.max(held + 1);
            }
            self.window_start = now;
            self.window_wait = Duration::ZERO;
        }
        self.target
    }

    /// No stream is left to take: hold what is held.
    pub fn none_left(&mut self, held: usize) {
        self.target = held;
    }
}

/// What a drive knows of the bytes still to come when it decides whether to take
/// one more stream (sizes are estimates, see [`crate::backup::estimate`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Backlog {
    /// Bytes the streams this drive holds have still to send.
    pub held_left: u64,
    /// Size of the next waiting stream (the largest, see [`largest_first`]).
    pub next: u64,
    /// Bytes of all the waiting streams, the next one included.
    pub waiting: u64,
    /// Drives taking streams from the waiting queue.
    pub drives: usize,
}

impl Backlog {
    /// Whether the next waiting stream must start now for the streams to end together.
    ///
    /// A drive shares itself evenly among the streams it holds (it turns to the next
    /// stream with data after each extent), so the next stream, started now beside
    /// the `held` ones, is done once the drive has written about `(held + 1) * next`
    /// bytes, or sooner if the others end first. This drive's remaining work is what
    /// its streams still hold plus its share of the queue (at least the next
    /// stream). When that work is no more than the next stream would take, starting
    /// it any later would make it end after everything else, with the drive fed by
    /// it alone: a single slow stream is below the drive's lowest speed step, and
    /// the tape stops and starts. The rule needs no rates, only remaining bytes, and
    /// a long queue keeps it quiet until its tail, so interleaving stays the least
    /// the waits call for until then.
    pub fn next_ends_late(&self, held: usize) -> bool {
        let share = (self.waiting / self.drives.max(1) as u64).max(self.next);
        let work = self.held_left.saturating_add(share);
        (held as u64 + 1).saturating_mul(self.next) >= work
    }
}

/// The bytes still to come for a drive holding `lanes`, of which `sent` have been
/// written, when every stream held and waiting has its size estimated. Bytes are
/// counted as they land in blocks (after any software compression, so a compressed
/// stream looks further from its end than it is, and starts its followers a little
/// early).
fn backlog(job: &JobShared<'_>, lanes: &[Lane], sent: &HashMap<u16, u64>) -> Option<Backlog> {
    let sizes = &job.estimates;
    let mut held_left = 0u64;
    for l in lanes {
        let done = sent.get(&l.id).copied().unwrap_or(0);
        held_left = held_left.saturating_add(sizes.get(l.id)?.saturating_sub(done));
    }
    let q = job.pending.lock().ok()?;
    let mut next = 0u64;
    let mut waiting = 0u64;
    for p in q.iter() {
        let s = sizes.get(p.id)?;
        next = next.max(s);
        waiting = waiting.saturating_add(s);
    }
    if q.is_empty() {
        return None;
    }
    Some(Backlog {
        held_left,
        next,
        waiting,
        drives: job.drives,
    })
}

/// Where a stream's blocks landed, from the oldest block an unfinished entry still
/// needs: volume sequence and block number, by the stream's block sequence. Seqs
/// rise but may skip: a block damaged on a disk stage never lands.
#[derive(Debug, Default)]
struct Landed {
    at: VecDeque<(u64, (u32, u64))>,
}

impl Landed {
    /// Block `seq`, after every block already landed, landed at `at`.
    fn push(&mut self, seq: u64, at: (u32, u64)) {
        self.at.push_back((seq, at));
    }

    fn get(&self, seq: u64, what: &'static str) -> Result<(u32, u64)> {
        let i = self.at.partition_point(|&(s, _)| s < seq);
        match self.at.get(i) {
            Some(&(s, at)) if s == seq => Ok(at),
            _ => Err(Error::PositionLost { what }),
        }
    }

    fn forget_before(&mut self, keep_from: u64) {
        while self.at.front().is_some_and(|&(s, _)| s < keep_from) {
            self.at.pop_front();
        }
    }
}

/// One drive's writer: it holds the lanes of the streams it weaves and what it has
/// learned of them, until no stream is left for it.
pub(crate) struct Weaver<'j, 'w> {
    job: &'j JobShared<'j>,
    w: &'w mut VolumeWriter,
    /// Which of the job's drives this is (0 for the first).
    slot: usize,
    shared: Arc<Shared>,
    lane_cap: usize,
    rule: ConcurrencyRule,
    sampler: Sampler,
    lanes: Vec<Lane>,
    names: HashMap<u16, String>,
    errors: Vec<(String, String)>,
    rows: Vec<FileRow>,
    landed: HashMap<u16, Landed>,
    per_stream: HashMap<u16, StreamReport>,
    stream_written: HashMap<u16, u64>,
    extents: Extents,
    report: DriveReport,
    entries: u64,
    stored: u64,
    written: u64,
    writer_wait: Duration,
    /// The lane being written, and blocks of it written in a row.
    cur: usize,
    run: usize,
    /// The writer ran out of data: wait for the high-water mark before writing on.
    dry: bool,
    /// The stream of the current run, when despooling in whole runs.
    whole: Option<u16>,
    lanes_done: usize,
    /// When despooling: the drive's streaming rate for the staged data, bytes/s.
    rate: Option<f64>,
    /// Blocks landed, for the despooler's periodic checks.
    since_check: u64,
    /// When the first and the last data block landed.
    first_land: Option<Instant>,
    last_land: Option<Instant>,
}

impl<'j, 'w> Weaver<'j, 'w> {
    /// A writer for `w`'s drive, the `slot`th of the job's drives.
    pub fn new(job: &'j JobShared<'j>, w: &'w mut VolumeWriter, slot: usize) -> Self {
        let opts = job.opts;
        // Despooling holds all its streams at once: each has what is staged of it,
        // and the writer takes them one whole run after another.
        let fixed = match &job.feed {
            Some(feed) => Some(feed.streams().div_ceil(job.drives).max(1)),
            None => opts.concurrency.map(|k| k.max(1)),
        };
        let lane_cap = (opts.buffers / fixed.unwrap_or(job.expected).max(1)).max(2);
        let report = DriveReport {
            drive: w.drive_index(),
            ..Default::default()
        };
        Weaver {
            job,
            w,
            slot,
            shared: Arc::new(Shared::default()),
            lane_cap,
            rule: ConcurrencyRule::new(fixed, Instant::now()),
            sampler: Sampler::new(job.t0),
            lanes: Vec::new(),
            names: HashMap::new(),
            errors: Vec::new(),
            rows: Vec::new(),
            landed: HashMap::new(),
            per_stream: HashMap::new(),
            stream_written: HashMap::new(),
            extents: Extents::default(),
            report,
            entries: 0,
            stored: 0,
            written: 0,
            writer_wait: Duration::ZERO,
            cur: 0,
            run: 0,
            dry: true,
            whole: None,
            lanes_done: 0,
            rate: None,
            since_check: 0,
            first_land: None,
            last_land: None,
        }
    }

    /// Writes until no stream is left for this drive.
    pub fn run(mut self) -> Result<Woven> {
        let result = self.weave();
        // Whatever happened, let the packers go: dropping the lanes closes their
        // channels.
        self.lanes.clear();
        if result.is_err() {
            self.job.stop.store(true, Ordering::Relaxed);
        }
        result?;
        self.sample(true);
        let r = &mut self.report;
        r.backhitches = self.w.drive_stats().map(|s| s.backhitches);
        r.seconds = self.job.t0.elapsed().as_secs_f64();
        r.writer_wait_seconds = self.writer_wait.as_secs_f64();
        r.reader_waits = self.shared.reader_waits.load(Ordering::Relaxed);
        r.reader_wait_seconds = self.shared.reader_wait_ns.load(Ordering::Relaxed) as f64 / 1e9;
        r.data_bytes = self.written;
        if let (Some(a), Some(b)) = (self.first_land, self.last_land) {
            let now = Instant::now();
            let wall = wall_ns();
            let ago = |t: Instant| now.saturating_duration_since(t).as_nanos() as i64;
            r.data_span_ns = Some((wall - ago(a), wall - ago(b)));
        }
        if self.job.feed.is_some() {
            r.despool = Some(crate::backup::Despool {
                bytes: self.written,
                seconds: match (self.first_land, self.last_land) {
                    (Some(a), Some(b)) => (b - a).as_secs_f64(),
                    _ => 0.0,
                },
                max_bytes_per_s: self.rate,
            });
        }
        Ok(Woven {
            report: self.report,
            streams: self.per_stream.into_iter().collect(),
            errors: self.errors,
            entries: self.entries,
            stored: self.stored,
            samples: self.sampler.out,
        })
    }

    fn weave(&mut self) -> Result<()> {
        loop {
            if self.job.stop.load(Ordering::Relaxed) {
                return Err(Error::Stopped);
            }
            self.admit();
            if self.sampler.due() {
                self.sample(false);
            }
            if self.lanes.is_empty() {
                break;
            }
            if let Some(e) = self.job.feed.as_ref().and_then(|f| f.take_failure()) {
                return Err(e);
            }
            if let Some(e) = self.job.received.as_ref().and_then(|r| r.take_failure()) {
                return Err(e);
            }
            if self.dry {
                match self.job.feed.clone() {
                    Some(feed) => self.wait_for_stage(&feed),
                    None => self.fill_to_high_water(),
                }
            }
            if !self.choose_lane() {
                // Nothing to write: a spooler may be waiting for the space this
                // drive's landed chunks hold.
                if let Some(feed) = self.job.feed.clone() {
                    self.give_back_staged(&feed, true)?;
                }
                continue;
            }
            let id = self.lanes[self.cur].id;
            match self.lanes[self.cur].take() {
                Some(Msg::Block {
                    block,
                    done,
                    keep_from,
                }) => self.land(id, block, done, keep_from)?,
                Some(Msg::OnTape {
                    seq,
                    at,
                    done,
                    keep_from,
                }) => self.on_tape(id, (seq, at), done, keep_from)?,
                Some(Msg::Error(p, why)) => {
                    self.w.cat.add_error(self.job.job_id, &p, &why)?;
                    self.errors.push((crate::display_path(&p), why));
                }
                Some(Msg::End(e, b)) => self.end_lane(id, e, b)?,
                None => {}
            }
        }
        self.extents.finish();
        self.flush()
    }

    /// Takes streams from the job's queue up to the rule's target.
    fn admit(&mut self) {
        let held = self.lanes.len();
        let (job, lanes, sent) = (self.job, &self.lanes, &self.stream_written);
        let target = self
            .rule
            .target(Instant::now(), held, || backlog(job, lanes, sent));
        while self.lanes.len() < target {
            let Some(p) = self.job.next_stream(self.slot) else {
                self.rule.none_left(self.lanes.len());
                break;
            };
            self.names.insert(p.id, p.name.clone());
            self.per_stream.insert(
                p.id,
                StreamReport {
                    name: p.name.clone(),
                    bytes: 0,
                    files: 0,
                    seconds: 0.0,
                    drive: self.w.drive_index(),
                    spool: None,
                },
            );
            self.report.streams.push(p.name.clone());
            let lane = self.start_lane(p);
            self.lanes.push(lane);
        }
        self.report.max_concurrency = self.report.max_concurrency.max(self.lanes.len());
    }

    /// Starts what feeds a lane of this drive: the stream's walker, readers and
    /// packer, or, when the job goes through the stages, its despooler.
    fn start_lane(&self, p: Pending) -> Lane {
        let job = self.job;
        let (tx, rx) = sync_channel::<Msg>(self.lane_cap);
        let queued = Arc::new(AtomicUsize::new(0));
        let out = Outlet::new(
            tx,
            Arc::clone(&self.shared),
            Arc::clone(&queued),
            if job.feed.is_some() {
                None
            } else {
                crate::backup::generated::rate(&p.abs).or(job.opts.limit_rate)
            },
        );
        let id = p.id;
        let thread = match (&job.feed, &job.received) {
            (Some(feed), _) => {
                let (feed, tag, name) = (Arc::clone(feed), job.tag, p.name);
                std::thread::spawn(move || staged::despool_stream(&feed, tag, id, &name, out))
            }
            (None, Some(r)) => {
                let facts = (job.tag, job.opts.block_size, job.tail());
                crate::backup::received::spawn(r, facts, id, out)
            }
            (None, None) => crate::backup::pack::spawn(&job.packer_setup(), p, out),
        };
        Lane::new(id, rx, queued, thread)
    }

    /// Samples the drive and its streams; `last` marks the closing sample, when the
    /// pools are empty.
    fn sample(&mut self, last: bool) {
        let t = self.sampler.round();
        let cap = (self.lane_cap * self.lanes.len().max(1)) as f64;
        let fill = if last {
            0.0
        } else {
            (self.shared.queued.load(Ordering::Relaxed) as f64 / cap).min(1.0)
        };
        let live = Some(&self.job.progress.series);
        let stats = self.w.drive_stats();
        let drive = self.w.drive_index().unwrap_or(0);
        self.sampler
            .drive(t, drive, self.written, fill, stats.as_ref(), live);
        for (id, name) in &self.names {
            let bytes = self.stream_written.get(id).copied().unwrap_or(0);
            let fill = match self.lanes.iter().find(|l| l.id == *id) {
                Some(l) if !last => l.queued() as f64 / self.lane_cap as f64,
                _ => 0.0,
            };
            self.sampler.stream(t, name, bytes, fill, live);
        }
        if let Some(feed) = &self.job.feed {
            let (held, size) = feed.stage_use();
            self.sampler.stage(t, held, size);
        }
    }

    /// The pool fills to the high-water mark before the writer starts, and after it
    /// ran dry; a stream that has sent everything cannot fill it further.
    fn fill_to_high_water(&mut self) {
        let want = (self.job.opts.high_water * (self.lane_cap * self.lanes.len()) as f64) as usize;
        let t = Instant::now();
        let queued = |w: &Self| w.shared.queued.load(Ordering::Relaxed);
        let waited = queued(self) < want;
        while queued(self) < want && t.elapsed() < HIGH_WATER_WAIT {
            let seen = self.shared.rung();
            if self.shared.finished.load(Ordering::Relaxed) > self.lanes_done {
                break;
            }
            self.shared.wait(seen, Duration::from_millis(20));
            // The pool filling is what a young job's plot shows.
            if self.sampler.due() {
                self.sample(false);
            }
        }
        if waited {
            self.writer_wait += t.elapsed();
            self.rule.waited(t.elapsed());
        }
        self.dry = false;
    }

    /// Waits, before the drive starts (and after it ran dry), until the stage holds
    /// enough for the drive to stream to the end of the sources (see
    /// [`staged::start_now`]).
    fn wait_for_stage(&mut self, feed: &Feed) {
        let t = Instant::now();
        let mut waited = false;
        loop {
            if self.job.stop.load(Ordering::Relaxed) {
                break;
            }
            if self.rate.is_none() {
                self.sample_rate();
            }
            if self.may_despool(feed) {
                break;
            }
            waited = true;
            if self.give_back_staged(feed, true).is_err() {
                // The write that fails next reports it.
                break;
            }
            let seen = self.shared.rung();
            self.shared.wait(seen, Duration::from_millis(20));
            if self.sampler.due() {
                self.sample(false);
            }
        }
        if waited {
            self.writer_wait += t.elapsed();
        }
        self.dry = false;
    }

    /// Whether the drive may start (or go on after it stopped) under the job's
    /// despool order.
    fn may_despool(&self, feed: &Feed) -> bool {
        let job = self.job;
        let sources = job.estimates.total();
        match job.opts.despool {
            DespoolOrder::Early => feed.may_start(self.rate, sources),
            DespoolOrder::Whole => {
                let ids: Vec<u16> = self.lanes.iter().map(|l| l.id).collect();
                feed.may_start_whole(&ids, self.rate, |id| job.estimates.get(id), sources)
            }
        }
    }

    /// The drive's streaming rate for the staged data, from a block waiting in a lane.
    fn sample_rate(&mut self) {
        for l in self.lanes.iter_mut() {
            if let Some(b) = l.peek_block() {
                self.rate = self.w.streaming_rate(&b.buf);
                return;
            }
        }
    }

    /// Keeps the drive's rate for the staged data up to date, every 64 blocks.
    fn staged_rate(&mut self, block: &PackedBlock) {
        self.since_check += 1;
        if self.since_check.is_multiple_of(64) {
            if let Some(r) = self.w.streaming_rate(&block.buf) {
                self.rate = Some(self.rate.map_or(r, |old| 0.8 * old + 0.2 * r));
            }
        }
    }

    /// When a spooler waits for space and chunks of this drive's streams are on
    /// tape, flushes the drive, stores the rows of the entries that ended, and gives
    /// those chunks back to their stage. When the writer is `idle` (it has written
    /// everything staged) and no chunk is free of open entries, it gives back what
    /// landed all the same: nothing else can make room (see `chunk_released`).
    fn give_back_staged(&mut self, feed: &Feed, idle: bool) -> Result<()> {
        if !feed.set.pressed() {
            return Ok(());
        }
        let ids: Vec<u16> = self.lanes.iter().map(|l| l.id).collect();
        let force = if feed.releasable(&ids, false) {
            false
        } else if idle && feed.releasable(&ids, true) {
            true
        } else {
            return Ok(());
        };
        self.flush()?;
        self.w.sync()?;
        self.follow_moved()?;
        feed.release(&self.w.cat, &ids, force)
    }

    /// Stays with the current stream for up to an extent while it has data, else
    /// turns to the next with data. False when none has any (after waiting a while).
    fn choose_lane(&mut self) -> bool {
        if let Some(feed) = self.job.feed.clone() {
            if self.job.opts.despool == DespoolOrder::Whole {
                return self.choose_whole(&feed);
            }
        }
        if self.job.opts.interleave == Interleave::InTurn {
            return self.choose_in_turn();
        }
        // A despooled stream is written for as long as the stage holds of it.
        let extent = match self.job.feed {
            Some(_) => usize::MAX,
            None => self.job.opts.extent_blocks.max(1),
        };
        if self.cur < self.lanes.len() && self.run < extent && self.lanes[self.cur].ready() {
            return true;
        }
        self.run = 0;
        let n = self.lanes.len();
        if let Some(i) = (1..=n)
            .map(|k| (self.cur + k) % n)
            .find(|&i| self.lanes[i].ready())
        {
            self.cur = i;
            return true;
        }
        let seen = self.shared.rung();
        if self.lanes.iter_mut().any(|l| l.ready()) {
            return false;
        }
        self.report.writer_waits += 1;
        let t = Instant::now();
        self.shared.wait(seen, Duration::from_millis(50));
        self.writer_wait += t.elapsed();
        self.rule.waited(t.elapsed());
        self.dry = true;
        false
    }

    /// Under [`Interleave::InTurn`]: stays with the current stream for a whole
    /// extent, then turns to the next in the order the lanes were taken, waiting
    /// for the blocks of the stream whose turn it is rather than passing it by.
    /// False when they have not come (after waiting a while).
    fn choose_in_turn(&mut self) -> bool {
        let extent = self.job.opts.extent_blocks.max(1);
        if self.cur >= self.lanes.len() {
            // The last lane ended: the turn goes back to the first.
            self.cur = 0;
            self.run = 0;
        } else if self.run >= extent {
            self.cur = (self.cur + 1) % self.lanes.len();
            self.run = 0;
        }
        let seen = self.shared.rung();
        if self.lanes[self.cur].ready() {
            return true;
        }
        self.report.writer_waits += 1;
        let t = Instant::now();
        self.shared.wait(seen, Duration::from_millis(50));
        self.writer_wait += t.elapsed();
        self.rule.waited(t.elapsed());
        false
    }

    /// Under [`DespoolOrder::Whole`]: stays with the current run's stream until it
    /// ends, waiting for its next chunk, and turns to another only when the stages
    /// are pressed and must make room. A new run takes the ready stream whose source
    /// ends first, once the runs left fit ([`Weaver::may_despool`]); until then the
    /// drive waits as one that has not started.
    fn choose_whole(&mut self, feed: &Feed) -> bool {
        let cur = self
            .whole
            .and_then(|id| self.lanes.iter().position(|l| l.id == id));
        if let Some(i) = cur {
            self.cur = i;
            let seen = self.shared.rung();
            if self.lanes[i].ready() {
                return true;
            }
            if !feed.set.pressed() {
                self.report.writer_waits += 1;
                let t = Instant::now();
                self.shared.wait(seen, Duration::from_millis(50));
                self.writer_wait += t.elapsed();
                return false;
            }
        }
        if !self.may_despool(feed) {
            self.dry = true;
            return false;
        }
        let job = self.job;
        let ids: Vec<u16> = self.lanes.iter().map(|l| l.id).collect();
        let mut order = feed
            .run_figures(&ids, |id| job.estimates.get(id))
            .unwrap_or_default();
        order.sort_by(|a, b| a.to_end.total_cmp(&b.to_end));
        let ranked = order.iter().map(|f| f.id).chain(ids.iter().copied());
        let at: Vec<usize> = ranked
            .filter_map(|id| self.lanes.iter().position(|l| l.id == id))
            .collect();
        let next = at.into_iter().find(|&i| self.lanes[i].ready());
        match next {
            Some(i) => {
                self.cur = i;
                self.whole = Some(self.lanes[i].id);
                true
            }
            None => {
                self.run = 0;
                self.whole = None;
                let seen = self.shared.rung();
                self.report.writer_waits += 1;
                let t = Instant::now();
                self.shared.wait(seen, Duration::from_millis(50));
                self.writer_wait += t.elapsed();
                self.dry = true;
                false
            }
        }
    }

    /// Writes one block of stream `id` and records the entries that ended in it.
    fn land(
        &mut self,
        id: u16,
        mut block: PackedBlock,
        done: Vec<Done>,
        keep_from: u64,
    ) -> Result<()> {
        self.shared.queued.fetch_sub(1, Ordering::Relaxed);
        self.run += 1;
        let len = block.header.payload_len as u64;
        let at = self.w.write(&mut block)?;
        self.follow_moved()?;
        let now = Instant::now();
        self.first_land.get_or_insert(now);
        self.last_land = Some(now);
        self.written += len;
        *self.stream_written.entry(id).or_default() += len;
        self.extents
            .landed(id, block.header.stream_offset, at.0, at.1);
        self.record_done(id, block.seq, at, done, keep_from)?;
        if let Some(feed) = self.job.feed.clone() {
            feed.landed(id, block.seq, keep_from, len);
            self.staged_rate(&block);
            if self.since_check.is_multiple_of(16) {
                self.give_back_staged(&feed, false)?;
            }
        }
        self.shared.give(block.buf);
        if self.rows.len() >= 4096 || self.extents.closed.len() >= 1024 {
            self.flush()?;
        }
        Ok(())
    }

    /// Block `seq` of stream `id` is at `at`: the rows of the entries that ended in
    /// it get their positions.
    fn record_done(
        &mut self,
        id: u16,
        seq: u64,
        at: (u32, u64),
        done: Vec<Done>,
        keep_from: u64,
    ) -> Result<()> {
        let landed = self.landed.entry(id).or_default();
        landed.push(seq, at);
        let progress = &self.job.progress;
        for d in done {
            let s = landed.get(d.start_block, "entry start")?;
            let e = landed.get(d.end_block, "entry end")?;
            let row = crate::backup::mux::landed(d.row, s, e);
            self.report.files += 1;
            let sr = self.per_stream.get_mut(&id);
            let data = row.has_data().then_some(row.size);
            if let Some(sr) = sr {
                sr.files += 1;
                sr.bytes += data.unwrap_or(0);
            }
            if let Some(size) = data {
                self.report.bytes += size;
                progress.bytes.fetch_add(size, Ordering::Relaxed);
            }
            progress.files.fetch_add(1, Ordering::Relaxed);
            self.rows.push(row);
        }
        landed.forget_before(keep_from);
        Ok(())
    }

    /// A block a despooler found on tape already: its entries' rows, no write.
    fn on_tape(
        &mut self,
        id: u16,
        (seq, at): (u64, (u32, u64)),
        done: Vec<Done>,
        keep_from: u64,
    ) -> Result<()> {
        self.record_done(id, seq, at, done, keep_from)?;
        if let Some(feed) = &self.job.feed {
            feed.landed(id, seq, keep_from, 0);
        }
        Ok(())
    }

    /// A stream has sent everything: its packer ends.
    fn end_lane(&mut self, id: u16, entries: u64, stored: u64) -> Result<()> {
        self.entries += entries;
        self.stored += stored;
        if let Some(sr) = self.per_stream.get_mut(&id) {
            sr.seconds = self.job.t0.elapsed().as_secs_f64();
        }
        if let Some(feed) = &self.job.feed {
            // Every block the despooler sent has landed; blocks it left out (damaged
            // on the stage) hold nothing more to wait for.
            feed.stream_landed(id);
        }
        let mut lane = self.lanes.remove(self.cur);
        lane.ended = true;
        self.lanes_done += 1;
        if let Some(t) = lane.thread.take() {
            t.join().map_err(|_| Error::Panicked {
                what: "a packer thread",
            })?;
        }
        self.run = 0;
        Ok(())
    }

    /// After a deferred write error the writer wrote lost blocks again elsewhere:
    /// what is stored is pointed at their new places, and so is what is not yet
    /// (the blocks' positions kept for entries still open, and the index).
    fn follow_moved(&mut self) -> Result<()> {
        let moved = self.w.take_moved();
        if moved.is_empty() {
            return Ok(());
        }
        self.extents.finish();
        self.flush()?;
        crate::backup::moved::follow_moved(&self.w.cat, self.job.job_id, &self.job.moved, &moved)?;
        for landed in self.landed.values_mut() {
            for (_, at) in landed.at.iter_mut() {
                if let Some(m) = moved.iter().find(|m| m.from == *at) {
                    *at = m.to;
                }
            }
        }
        Ok(())
    }

    /// Stores the rows and closed extents gathered so far.
    fn flush(&mut self) -> Result<()> {
        let job = self.job.job_id;
        if self.job.feed.is_some() {
            // A job through the stage may be finished by another process: the rows
            // stored must find their blocks in stored extents.
            self.extents.finish();
        }
        self.w.cat.add_extents(job, &self.extents.closed)?;
        self.extents.closed.clear();
        self.w.cat.add_files(job, &self.rows)?;
        let rows = std::mem::take(&mut self.rows);
        self.job
            .index
            .lock()
            .map_err(|_| Error::Panicked {
                what: "a drive thread holding the index",
            })?
            .add(rows)
    }
}

/// This machine's clock now, in Unix nanoseconds.
fn wall_ns() -> i64 {
    crate::clock::system_ns()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_concurrency_adds_a_stream_when_the_writer_waits() {
        let t0 = Instant::now();
        let mut r = ConcurrencyRule::new(None, t0);
        assert_eq!(r.target(t0, 0, || None), 1);
        // Waiting 10 ms of 100: saturated, no more.
        r.waited(Duration::from_millis(10));
        assert_eq!(r.target(t0 + Duration::from_millis(100), 1, || None), 1);
        // Waiting 30 ms of the next 100: one more.
        r.waited(Duration::from_millis(30));
        assert_eq!(r.target(t0 + Duration::from_millis(200), 1, || None), 2);
        // Before the window is over nothing changes, however long the wait.
        r.waited(Duration::from_millis(90));
        assert_eq!(r.target(t0 + Duration::from_millis(250), 2, || None), 2);
        assert_eq!(r.target(t0 + Duration::from_millis(300), 2, || None), 3);
        // No stream left: the target is what is held.
        r.none_left(2);
        assert_eq!(r.target(t0 + Duration::from_millis(310), 2, || None), 2);
    }

    #[test]
    fn a_fixed_concurrency_never_moves() {
        let t0 = Instant::now();
        let mut r = ConcurrencyRule::new(Some(3), t0);
        r.waited(Duration::from_millis(100));
        assert_eq!(r.target(t0 + Duration::from_millis(100), 3, || None), 3);
    }

    /// One drive writing `rate` bytes a tick of 100 ms, shared evenly among the
    /// streams it holds, each of which sends at most `cap` bytes a tick; the rule
    /// decides when the streams of `sizes` start, with their remaining bytes known
    /// or not. Returns the tick at which each stream ended, in queue order.
    fn simulate(sizes: &[u64], rate: u64, cap: u64, known: bool) -> Vec<u64> {
        let tick = Duration::from_millis(100);
        let t0 = Instant::now();
        let mut rule = ConcurrencyRule::new(None, t0);
        let mut queue: VecDeque<(usize, u64)> = sizes.iter().copied().enumerate().collect();
        let mut held: Vec<(usize, u64)> = Vec::new();
        let mut ended = vec![0; sizes.len()];
        for k in 1..100_000u32 {
            let now = t0 + tick * k;
            let backlog = || {
                known.then(|| Backlog {
                    held_left: held.iter().map(|h| h.1).sum(),
                    next: queue.iter().map(|q| q.1).max().unwrap_or(0),
                    waiting: queue.iter().map(|q| q.1).sum(),
                    drives: 1,
                })
            };
            let target = rule.target(now, held.len(), backlog);
            while held.len() < target {
                let i = largest_first(queue.iter().map(|q| known.then_some(q.1)));
                match queue.remove(i) {
                    Some(q) => held.push(q),
                    None => {
                        rule.none_left(held.len());
                        break;
                    }
                }
            }
            if held.is_empty() {
                return ended;
            }
            // The drive's rate, shared evenly; what a stream cannot take goes to
            // the others.
            held.sort_by_key(|h| h.1.min(cap));
            let mut free = rate;
            let n = held.len() as u64;
            for (j, h) in held.iter_mut().enumerate() {
                let give = (free / (n - j as u64)).min(cap).min(h.1);
                h.1 -= give;
                free -= give;
            }
            rule.waited(tick.mul_f64(free as f64 / rate as f64));
            for h in held.iter().filter(|h| h.1 == 0) {
                ended[h.0] = u64::from(k);
            }
            held.retain(|h| h.1 > 0);
        }
        panic!("the simulated job never ended");
    }

    #[test]
    fn auto_concurrency_starts_streams_so_that_they_end_together() {
        // A drive taking 42 MB/s fed by streams of 8 MB/s of unequal sizes (1.2 GB
        // in all, 28.6 s at best): one stream alone runs the drive below its lowest
        // speed step. (At exactly 40 MB/s four streams would leave the writer
        // waiting just a fifth of the time, the threshold itself.)
        const MB: u64 = 1_000_000;
        let sizes = [240, 40, 200, 120, 80, 160, 60, 240, 60].map(|m| m * MB);
        let (rate, cap) = (42 * MB / 10, 8 * MB / 10);
        let alone = |ends: &[u64]| {
            let mut e = ends.to_vec();
            e.sort_unstable();
            e[e.len() - 1] - e[e.len() - 2]
        };
        // Started in queue order and only when the writer waits, the last stream
        // starts when another ends, and runs alone for a long while.
        let waits_only = simulate(&sizes, rate, cap, false);
        assert!(alone(&waits_only) >= 100, "{waits_only:?}");
        // Knowing the remaining bytes, the largest streams go first and the rule
        // starts the tail of the queue early enough that the last two streams end
        // within a second of each other, and the job takes little longer than the
        // drive needs.
        let ends = simulate(&sizes, rate, cap, true);
        assert!(alone(&ends) <= 10, "{ends:?}");
        let last = ends.iter().max().copied().unwrap_or(0);
        assert!(last <= 315, "{ends:?}");
    }

    #[test]
    fn the_largest_waiting_stream_goes_first_once_every_size_is_known() {
        assert_eq!(
            largest_first([Some(5), Some(9), Some(9), Some(1)].into_iter()),
            1
        );
        assert_eq!(largest_first([Some(5), None, Some(9)].into_iter()), 0);
        assert_eq!(largest_first(std::iter::empty()), 0);
    }

    #[test]
    fn the_next_stream_starts_when_the_rest_of_the_work_is_no_more_than_it_takes() {
        // Seven held streams with 100 left each; the last waiting one (134) would
        // end after them if started when one of them ends.
        let b = Backlog {
            held_left: 700,
            next: 134,
            waiting: 134,
            drives: 1,
        };
        assert!(b.next_ends_late(7));
        // A long queue: the drive has plenty to do after this stream.
        let long = Backlog {
            held_left: 200,
            next: 100,
            waiting: 1000,
            drives: 1,
        };
        assert!(!long.next_ends_late(2));
        // The same queue shared by ten drives is this drive's tail.
        assert!(Backlog { drives: 10, ..long }.next_ends_late(2));
        // With the sizes known, the rule raises the target by one a window; a fixed
        // concurrency never moves.
        let t0 = Instant::now();
        let mut r = ConcurrencyRule::new(None, t0);
        assert_eq!(r.target(t0 + JUDGE_WINDOW, 7, || Some(b.clone())), 8);
        assert_eq!(r.target(t0 + JUDGE_WINDOW, 7, || Some(b.clone())), 8);
        let mut f = ConcurrencyRule::new(Some(7), t0);
        assert_eq!(f.target(t0 + JUDGE_WINDOW, 7, || Some(b.clone())), 7);
    }

    #[test]
    fn landed_positions_are_found_until_forgotten() {
        let mut l = Landed::default();
        for (seq, at) in [(10, (1, 100)), (11, (1, 101)), (12, (2, 0))] {
            l.push(seq, at);
        }
        assert_eq!(l.get(12, "x").unwrap(), (2, 0));
        l.forget_before(11);
        assert_eq!(l.get(11, "x").unwrap(), (1, 101));
        assert!(matches!(
            l.get(10, "entry start"),
            Err(Error::PositionLost {
                what: "entry start"
            })
        ));
    }

    #[test]
    fn blocks_that_never_landed_leave_the_others_positions_in_place() {
        // Blocks 3 and 4 were damaged on the stage: block 5 went to tape after 2.
        let mut l = Landed::default();
        for (seq, at) in [(1, (0, 7)), (2, (0, 8)), (5, (0, 9)), (6, (1, 0))] {
            l.push(seq, at);
        }
        assert_eq!(l.get(5, "x").unwrap(), (0, 9));
        assert_eq!(l.get(6, "x").unwrap(), (1, 0));
        assert!(l.get(4, "x").is_err());
        assert!(l.get(7, "x").is_err());
        // Forgetting up to a block that never landed keeps the next one that did.
        l.forget_before(4);
        assert!(l.get(2, "x").is_err());
        assert_eq!(l.get(5, "x").unwrap(), (0, 9));
    }
}
