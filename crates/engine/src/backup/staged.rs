//! Backup through the disk stages (disk to disk to tape).
//!
//! Every stream's walker, readers and packer run as for a direct backup, but the
//! packer's blocks go to a spooler thread that writes them to the stages in chunk
//! files ([`crate::stage`]) at the sources' own pace. The drives' writers weave lanes
//! fed by despool threads, which read the finished chunks back (each block's CRC
//! checked), derive what the packer said about each entry from the blocks themselves
//! ([`crate::stage::rows`], so a job can be finished from its chunks alone), and hand
//! the blocks to the writer like a packer would.
//!
//! The [`Feed`] joins the two sides: the chunks each stream has staged, what of them
//! has landed on tape, and the figures the despool start rule needs. A chunk is given
//! back to its stage (marked despooled in the catalog, its file deleted, its space
//! released) only once its blocks are on tape, flushed, and no entry still open needs
//! their positions.

use crate::backup::mux::{Msg, Outlet, Shared};
use crate::backup::pack::{spawn, PackerSetup};
use crate::backup::plan::Pending;
use crate::backup::plan::{BackupOptions, Via};
use crate::error::{io, Error, Result, StageError};
use crate::home::Home;
use crate::media::writer::VolumeWriter;
use crate::stage::rows::StreamRows;
use crate::stage::{ChunkReader, StageSet, StreamSpool, DEFAULT_CHUNK_SIZE};
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tapeloom_catalog::{Catalog, StagedChunk};
use tapeloom_format::{expand_block, PackedBlock, BLOCK_HEADER_LEN};

/// Why a stream that stopped while spooling is not whole in its job.
pub(crate) const STREAM_CUT: &str =
    "the backup stopped while this stream was spooling: what was staged of it is in the job, the rest is not";

/// One stream's side of the feed.
#[derive(Default)]
struct FeedStream {
    /// Finished chunks not yet handed to the despool thread.
    ready: VecDeque<StagedChunk>,
    /// Chunks handed over, not yet given back to their stage.
    handed: VecDeque<StagedChunk>,
    /// The stream's end as its packer sent it: (entries, stored bytes).
    ended: Option<(u64, u64)>,
    /// Payload bytes spooled so far.
    spooled: u64,
    /// Seconds from the job's start until its end was staged.
    spool_seconds: Option<f64>,
    /// The last block landed on tape, and the oldest block still needed then.
    landed: Option<u64>,
    keep_from: u64,
    /// Bytes of this stream's chunks given back after landing.
    despooled: u64,
    /// Payload bytes landed on tape.
    written: u64,
    /// The entry still open at the end of each handed chunk that has one, by chunk
    /// seq: if the chunk must go before that entry ends, the entry is cut.
    open_at_end: HashMap<u64, Vec<u8>>,
}

#[derive(Default)]
struct FeedState {
    streams: HashMap<u16, FeedStream>,
    /// File bytes of finished chunks, and payload bytes landed on tape, in all.
    staged_bytes: u64,
    written_bytes: u64,
    /// Payload bytes spooled, in all.
    spooled: u64,
    /// The first failure of a spooler or despooler: the job stops with it.
    failure: Option<Error>,
    /// Problems with source objects the spoolers were told of: (path, reason).
    errors: Vec<(String, String)>,
}

/// What spoolers and despoolers of one job share.
pub(crate) struct Feed {
    /// The stages' space.
    pub set: StageSet,
    paths: HashMap<i64, PathBuf>,
    state: Mutex<FeedState>,
    cv: Condvar,
    /// Bytes per chunk file.
    pub chunk_bytes: u64,
    /// When spooling began, and when the job did.
    t0: Instant,
    job_t0: Instant,
    /// Set when the job stops: despoolers give up waiting.
    stop: AtomicBool,
    /// How long chunks stay on their stage once on tape (`--keep-staged`); `None`
    /// deletes them at once.
    keep: Option<Duration>,
    /// When the job goes on after its process died: where each stream's despool
    /// resumes, and the paths the catalog has rows for already.
    resume: Option<Resume>,
    /// The drives start despooling as soon as they are given the job: a server
    /// chose the moment already (its clients' streams, received onto the stages).
    pub eager: bool,
}

/// Where a job killed with data on the stages goes on from.
#[derive(Debug, Default)]
pub(crate) struct Resume {
    /// Per stream: the first block still staged and its stream offset.
    pub from: HashMap<u16, (u64, u64)>,
    /// Paths with rows in the catalog: their entries reached tape before.
    pub known: std::collections::HashSet<Vec<u8>>,
    /// Per stream, the extents its blocks landed in before.
    pub on_tape: HashMap<u16, Vec<tapeloom_catalog::Extent>>,
    /// Payload bytes of a full block: stream offsets advance by this much a block.
    pub payload: u64,
}

impl Resume {
    /// Where the block of `stream` at `offset` landed before, if it did.
    fn landed_at(&self, stream: u16, offset: u64) -> Option<(u32, u64)> {
        let p = self.payload.max(1);
        self.on_tape.get(&stream)?.iter().find_map(|e| {
            let i = offset.checked_sub(e.stream_offset)?;
            (i % p == 0 && i / p < e.blocks).then(|| (e.seq, e.first_lbn + i / p))
        })
    }
}

impl Feed {
    pub(crate) fn new(
        set: StageSet,
        (chunk_bytes, keep): (u64, Option<Duration>),
        streams: &[u16],
        job_t0: Instant,
    ) -> Self {
        let paths = set.stages().into_iter().map(|s| (s.id, s.path)).collect();
        let state = FeedState {
            streams: streams
                .iter()
                .map(|&s| (s, FeedStream::default()))
                .collect(),
            ..Default::default()
        };
        Feed {
            set,
            paths,
            state: Mutex::new(state),
            cv: Condvar::new(),
            chunk_bytes,
            t0: Instant::now(),
            job_t0,
            stop: AtomicBool::new(false),
            resume: None,
            keep,
            eager: false,
        }
    }

    /// The feed of a job that goes on after its process died: `chunks`, the chunks
    /// it left spooled, in order, are all there is.
    pub(crate) fn resuming(
        set: StageSet,
        chunks: Vec<StagedChunk>,
        before: Resume,
        job_t0: Instant,
    ) -> Self {
        let mut ids: Vec<u16> = chunks.iter().map(|c| c.stream).collect();
        ids.dedup();
        let mut feed = Feed::new(set, (DEFAULT_CHUNK_SIZE, None), &ids, job_t0);
        let mut resume = before;
        {
            let st = feed.state.get_mut().unwrap_or_else(PoisonError::into_inner);
            for c in chunks {
                resume
                    .from
                    .entry(c.stream)
                    .or_insert((c.first_block, c.stream_offset));
                st.staged_bytes += c.bytes;
                if let Some(s) = st.streams.get_mut(&c.stream) {
                    s.ready.push_back(c);
                    s.ended = Some((0, 0));
                }
            }
        }
        feed.resume = Some(resume);
        feed
    }

    /// The job's streams.
    pub(crate) fn streams(&self) -> usize {
        self.lock().streams.len()
    }

    fn lock(&self) -> MutexGuard<'_, FeedState> {
        // Each change under the lock is whole: a panicking holder leaves it usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn notify(&self) {
        self.cv.notify_all();
    }

    /// Stops the job's spooling and despooling: waits end.
    pub(crate) fn cancel(&self) {
        self.stop.store(true, Ordering::Relaxed);
        self.set.cancel();
        self.notify();
    }

    fn fail(&self, e: Error) {
        let mut st = self.lock();
        if st.failure.is_none() && !matches!(e, Error::Stopped) {
            st.failure = Some(e);
        }
        drop(st);
        self.cancel();
    }

    /// The failure that stopped a spooler or despooler, as text, left in place.
    pub(crate) fn failure_text(&self) -> Option<String> {
        self.lock().failure.as_ref().map(|e| e.to_string())
    }

    /// The failure that stopped a spooler or despooler, once.
    pub(crate) fn take_failure(&self) -> Option<Error> {
        self.lock().failure.take()
    }

    /// The problems with source objects the spoolers were told of.
    pub(crate) fn take_errors(&self) -> Vec<(String, String)> {
        std::mem::take(&mut self.lock().errors)
    }

    fn chunk_done(&self, stream: u16, c: StagedChunk) {
        let mut st = self.lock();
        st.staged_bytes += c.bytes;
        if let Some(s) = st.streams.get_mut(&stream) {
            s.ready.push_back(c);
        }
        drop(st);
        self.notify();
    }

    fn spooled(&self, stream: u16, bytes: u64) {
        let mut st = self.lock();
        st.spooled += bytes;
        if let Some(s) = st.streams.get_mut(&stream) {
            s.spooled += bytes;
        }
    }

    fn stream_end(&self, stream: u16, end: (u64, u64)) {
        let secs = self.job_t0.elapsed().as_secs_f64();
        if let Some(s) = self.lock().streams.get_mut(&stream) {
            s.ended = Some(end);
            s.spool_seconds = Some(secs);
        }
        self.notify();
    }

    /// Waits until the end of `stream` is staged (its last chunk recorded in the
    /// catalog, its file flushed); false when the job stopped first.
    pub(crate) fn wait_stream_end(&self, stream: u16) -> bool {
        let mut st = self.lock();
        loop {
            if st.streams.get(&stream).is_none_or(|s| s.ended.is_some()) {
                return st.streams.contains_key(&stream);
            }
            if self.stop.load(Ordering::Relaxed) {
                return false;
            }
            st = self
                .cv
                .wait_timeout(st, Duration::from_millis(100))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// The next chunk of `stream` to despool, waiting for one; `None` when the
    /// stream has ended (with its end) or the job stopped.
    fn next_chunk(&self, stream: u16) -> std::result::Result<StagedChunk, Option<(u64, u64)>> {
        let mut st = self.lock();
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Err(None);
            }
            let Some(s) = st.streams.get_mut(&stream) else {
                return Err(None);
            };
            if let Some(c) = s.ready.pop_front() {
                s.handed.push_back(c.clone());
                return Ok(c);
            }
            if let Some(end) = s.ended {
                return Err(Some(end));
            }
            st = self
                .cv
                .wait_timeout(st, Duration::from_millis(100))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// After the despooler read chunk `seq` of `stream`: the entry open at its end.
    fn open_after(&self, stream: u16, seq: u64, open: Option<&[u8]>) {
        if let (Some(path), Some(s)) = (open, self.lock().streams.get_mut(&stream)) {
            s.open_at_end.insert(seq, path.to_vec());
        }
    }

    fn path_of(&self, c: &StagedChunk) -> PathBuf {
        self.paths
            .get(&c.stage_id)
            .map(|p| p.join(&c.file))
            .unwrap_or_else(|| PathBuf::from(&c.file))
    }

    /// A block of `stream` landed on tape; `keep_from` is the oldest block of the
    /// stream whose position an entry still needs.
    pub(crate) fn landed(&self, stream: u16, seq: u64, keep_from: u64, payload: u64) {
        let mut st = self.lock();
        st.written_bytes += payload;
        if let Some(s) = st.streams.get_mut(&stream) {
            s.written += payload;
            s.landed = Some(seq);
            s.keep_from = keep_from;
        }
    }

    /// Every block of `stream` that will land has landed: its chunks may all be
    /// given back, those whose last blocks were left out too.
    pub(crate) fn stream_landed(&self, stream: u16) {
        if let Some(s) = self.lock().streams.get_mut(&stream) {
            s.landed = Some(u64::MAX);
            s.keep_from = u64::MAX;
        }
    }

    /// Whether chunks of `streams` could be given back after a flush.
    pub(crate) fn releasable(&self, streams: &[u16], force: bool) -> bool {
        let st = self.lock();
        streams.iter().any(|id| {
            st.streams
                .get(id)
                .and_then(|s| s.handed.front().map(|c| (c, s)))
                .is_some_and(|(c, s)| chunk_released(c, s, force))
        })
    }

    /// Gives back the chunks of `streams` whose blocks are on tape (the caller has
    /// flushed the drive and stored the rows of the entries that ended in them):
    /// marks them despooled in `cat`, deletes their files and frees their space; or,
    /// with a keep time, marks them kept until then and leaves their files and their
    /// space to the stage (see [`StageSet::keep`]).
    pub(crate) fn release(&self, cat: &Catalog, streams: &[u16], force: bool) -> Result<()> {
        let (mut gone, mut cut) = (Vec::new(), Vec::new());
        {
            let mut st = self.lock();
            for id in streams {
                let Some(s) = st.streams.get_mut(id) else {
                    continue;
                };
                while s
                    .handed
                    .front()
                    .is_some_and(|c| chunk_released(c, s, force))
                {
                    if let Some(c) = s.handed.pop_front() {
                        s.despooled += c.bytes;
                        let open = s.open_at_end.remove(&c.seq);
                        if !chunk_released(&c, s, false) {
                            // Forced: the entry open across its end loses its start.
                            cut.extend(open.map(|p| (c.job_id, c.stream, p)));
                        }
                        gone.push(c);
                    }
                }
            }
        }
        // Recorded before the chunks go, so a job that dies next can say so.
        for (job, stream, path) in cut {
            cat.add_stage_cut(job, stream, &path)?;
        }
        for c in gone {
            if let Some(keep) = self.keep {
                let until = crate::clock::system_ns()
                    .saturating_add(i64::try_from(keep.as_nanos()).unwrap_or(i64::MAX));
                cat.mark_chunk_despooled_until(c.job_id, c.stream, c.seq, Some(until))?;
                self.set.keep(StagedChunk {
                    state: tapeloom_catalog::ChunkState::Despooled,
                    keep_until_ns: Some(until),
                    ..c
                });
                continue;
            }
            cat.mark_chunk_despooled(c.job_id, c.stream, c.seq)?;
            let path = self.path_of(&c);
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return io(Err(e), || format!("delete {}", path.display())),
            }
            self.set.release(c.stage_id, c.bytes);
        }
        Ok(())
    }

    /// A stream's payload bytes spooled and the seconds from the job's start until
    /// its end was staged.
    pub(crate) fn spool_figures(&self, stream: u16) -> Option<(u64, f64)> {
        let st = self.lock();
        let s = st.streams.get(&stream)?;
        Some((s.spooled, s.spool_seconds?))
    }

    /// Gives back every chunk whose blocks are on tape (see [`Feed::release`]).
    pub(crate) fn release_all(&self, cat: &Catalog) -> Result<()> {
        let ids: Vec<u16> = self.lock().streams.keys().copied().collect();
        self.release(cat, &ids, true)
    }

    /// Whether every stream has sent its end.
    pub(crate) fn all_spooled(&self) -> bool {
        self.lock().streams.values().all(|s| s.ended.is_some())
    }

    /// Bytes the streams still spooling may hold in chunks not yet finished: a
    /// chunk each, of at most its size or a chunk age of the stream's rate.
    fn unfinished_bytes(&self) -> u64 {
        let st = self.lock();
        let secs = self.t0.elapsed().as_secs_f64().max(1e-3);
        st.streams
            .values()
            .filter(|s| s.ended.is_none())
            .map(|s| {
                let aged = s.spooled as f64 / secs * CHUNK_AGE.as_secs_f64();
                (aged as u64).min(self.chunk_bytes)
            })
            .sum()
    }

    /// Bytes staged and not yet on tape.
    pub(crate) fn backlog(&self) -> u64 {
        let st = self.lock();
        st.staged_bytes.saturating_sub(st.written_bytes)
    }

    /// The space held on the stages now (chunks staged and not yet given back, and
    /// those being written), and the stages' size, in bytes.
    pub(crate) fn stage_use(&self) -> (u64, u64) {
        let stages = self.set.stages();
        let used = stages.iter().map(|s| s.used).sum();
        let size = stages.iter().map(|s| s.limit).sum();
        (used, size)
    }

    /// Payload bytes spooled per second since the job began.
    fn spool_rate(&self) -> f64 {
        let secs = self.t0.elapsed().as_secs_f64().max(1e-3);
        self.lock().spooled as f64 / secs
    }

    /// Payload bytes spooled so far.
    fn spooled_total(&self) -> u64 {
        self.lock().spooled
    }

    /// Whether a drive taking `rate` bytes per second (when known) may start now
    /// and not run dry before the sources end, given `source_bytes` in all (when
    /// known). See [`start_now`].
    pub(crate) fn may_start(&self, rate: Option<f64>, source_bytes: Option<u64>) -> bool {
        if self.eager || self.all_spooled() {
            return true;
        }
        let staged = self.backlog();
        let capacity: u64 = self.set.stages().iter().map(|s| s.limit).sum();
        let left = source_bytes.map(|b| b.saturating_sub(self.spooled_total()));
        start_now(StartFigures {
            staged,
            capacity,
            chunk: self.chunk_bytes,
            drive_rate: rate,
            spool_rate: self.spool_rate(),
            left,
            pressed: self.set.pressed(),
            unfinished: self.unfinished_bytes(),
        })
    }
}

impl Feed {
    /// What the whole-run rule needs of `streams`, given each one's estimated size
    /// (`None` when a stream's size is not known yet, or a source still spooling has
    /// sent nothing to measure its rate by).
    pub(crate) fn run_figures(
        &self,
        streams: &[u16],
        estimate: impl Fn(u16) -> Option<u64>,
    ) -> Option<Vec<RunFigures>> {
        let st = self.lock();
        let secs = self.t0.elapsed().as_secs_f64().max(1e-3);
        streams
            .iter()
            .map(|&id| {
                let s = st.streams.get(&id)?;
                if s.ended.is_some() {
                    return Some(RunFigures {
                        id,
                        unwritten: s.spooled.saturating_sub(s.written) as f64,
                        to_end: 0.0,
                    });
                }
                let total = estimate(id)?.max(s.spooled);
                let rate = s.spooled as f64 / secs;
                if rate <= 0.0 {
                    return None;
                }
                Some(RunFigures {
                    id,
                    unwritten: total.saturating_sub(s.written) as f64,
                    // The despooler sees a stream's bytes a chunk age late at most.
                    to_end: (total - s.spooled) as f64 / rate + CHUNK_AGE.as_secs_f64(),
                })
            })
            .collect()
    }

    /// Whether a drive writing `streams` at `rate` bytes per second may start now
    /// under [`DespoolOrder::Whole`](crate::backup::plan::DespoolOrder): everything
    /// is staged, the stages are pressed or three quarters full, or the streams'
    /// whole runs fit back to back ([`whole_runs_fit`]). Without the figures the rule
    /// needs it falls back to [`Feed::may_start`].
    pub(crate) fn may_start_whole(
        &self,
        streams: &[u16],
        rate: Option<f64>,
        estimate: impl Fn(u16) -> Option<u64>,
        source_bytes: Option<u64>,
    ) -> bool {
        if self.eager || self.all_spooled() {
            return true;
        }
        let staged = self.backlog();
        let capacity: u64 = self.set.stages().iter().map(|s| s.limit).sum();
        if self.set.pressed() || staged >= capacity / 4 * 3 {
            return staged > 0;
        }
        match (rate, self.run_figures(streams, estimate)) {
            (Some(r), Some(f)) if r > 0.0 => whole_runs_fit(f, r),
            _ => self.may_start(rate, source_bytes),
        }
    }
}

/// One stream as the whole-run rule sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RunFigures {
    pub id: u16,
    /// Bytes of the stream not yet on tape, those its source has still to send
    /// included.
    pub unwritten: f64,
    /// Seconds until the despooler has the stream's last byte (0 once it has).
    pub to_end: f64,
}

/// Seconds of margin a run keeps over its source: a drive buffer's worth of rate
/// changes.
const RUN_MARGIN_S: f64 = 1.0;

/// The whole-run rule. A run of one stream written at `rate` from now catches up
/// with its source (the drive runs dry) unless it ends after the source does: its
/// bytes arrive no faster than the run takes them only if `unwritten / rate >=
/// to_end`. Runs written back to back, the streams whose sources end first first
/// (the order that suits every deadline best), fit when for every `k`
///
/// ```text
/// sum(unwritten[..=k]) / rate >= to_end[k] + margin
/// ```
///
/// The drive then streams from the first run to the last, each stream in one run.
pub(crate) fn whole_runs_fit(mut streams: Vec<RunFigures>, rate: f64) -> bool {
    streams.sort_by(|a, b| a.to_end.total_cmp(&b.to_end));
    let mut end = 0.0;
    streams.iter().all(|s| {
        end += s.unwritten / rate;
        s.to_end <= 0.0 || end >= s.to_end + RUN_MARGIN_S
    })
}

/// Whether a stream's oldest handed chunk may go: all its blocks landed and no open
/// entry starts in it; or, when `force`d, all its blocks landed.
///
/// An entry open across a chunk given back is whole on tape once it ends, but a job
/// killed before then cannot be finished from the stage for that entry: its start
/// is gone. Only a stage too full to take the rest of such entries forces it (every
/// stream's staged blocks landed, the spoolers waiting), as the only way on.
fn chunk_released(c: &StagedChunk, s: &FeedStream, force: bool) -> bool {
    let last = c.first_block + c.blocks.saturating_sub(1);
    s.landed.is_some_and(|l| l >= last) && (force || s.keep_from > last)
}

/// What the despool start rule looks at.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StartFigures {
    /// Bytes staged and not yet on tape.
    pub staged: u64,
    /// The stages' size, in all.
    pub capacity: u64,
    /// Bytes per chunk.
    pub chunk: u64,
    /// Bytes per second the drive takes at its top speed, when known.
    pub drive_rate: Option<f64>,
    /// Bytes per second the sources spool.
    pub spool_rate: f64,
    /// Source bytes still to spool, when known.
    pub left: Option<u64>,
    /// A spooler waits for space.
    pub pressed: bool,
    /// Bytes spooled into chunks not yet finished, at most: the despooler cannot see
    /// them yet.
    pub unfinished: u64,
}

/// The despool start rule. A drive writing at rate `R` while the sources add `S`
/// drains the stage at `R - S`; it must not run dry before the sources have sent the
/// `left` bytes still to come, which takes `left / S`. So it starts once
///
/// ```text
/// staged >= (R - S) * left / S
/// ```
///
/// and from then on streams at full speed, finishing about when the sources do. The
/// chunks the streams are still filling (`unfinished`) are added, as the despooler
/// cannot read them before they are finished.
/// When the stages cannot hold that much it starts when they are three quarters
/// full (or a spooler already waits for space): it will run dry once, which nothing
/// but a larger stage avoids. Without a known drive rate or source size (a real
/// drive before it has been measured, sources not yet sized) it starts when the
/// stages are half full.
pub(crate) fn start_now(f: StartFigures) -> bool {
    let full = (f.capacity as f64 * 0.75) as u64;
    if f.pressed || f.staged >= full {
        return f.staged > 0;
    }
    let (Some(r), Some(left)) = (f.drive_rate, f.left) else {
        return f.staged >= f.capacity / 2;
    };
    if f.spool_rate >= r {
        return f.staged >= f.chunk;
    }
    if f.spool_rate <= 0.0 {
        return false;
    }
    let need = (r - f.spool_rate) * left as f64 / f.spool_rate + f.unfinished as f64;
    f.staged as f64 >= need
}

/// Whether this backup goes through the stages, and their space if so.
///
/// `--via stage` needs a stage. `--via auto` takes the stages when the home has one
/// and the sources are known to be slower together than the drive's lowest speed
/// step: each stream limited to a rate (`--limit-rate`), the limits adding up to
/// less than the first drive's lowest step. Without a rate limit or a drive model
/// tapeloom cannot tell, and writes direct.
pub(crate) fn through_stage(
    home: &Home,
    opts: &BackupOptions,
    streams: usize,
    writers: &[VolumeWriter],
) -> Result<Option<StageSet>> {
    let slow = || {
        let lowest = writers
            .first()
            .and_then(|w| w.drive_stats())
            .and_then(|s| s.speed_steps_mb_s.first().copied());
        match (opts.limit_rate, lowest) {
            (Some(rate), Some(step)) => rate * (streams as f64) < step * 1e6,
            _ => false,
        }
    };
    let wanted = match opts.via {
        Via::Direct => false,
        Via::Stage => true,
        Via::Auto => !home.catalog.stages()?.is_empty() && slow(),
    };
    if !wanted {
        return Ok(None);
    }
    let set = match &opts.stages {
        Some(shared) => shared.for_job(),
        None => StageSet::open(&home.catalog)?.0,
    };
    if set.stages().is_empty() {
        return Err(StageError::NoStages.into());
    }
    Ok(Some(set))
}

/// Starts every stream's walker, readers and packer, each with a spooler thread
/// that writes its blocks to the stages; returns their threads.
pub(crate) fn start_spoolers(
    home: &Home,
    setup: &PackerSetup,
    streams: Vec<Pending>,
    (job_id, limit_rate): (i64, Option<f64>),
    feed: &Arc<Feed>,
) -> Result<Vec<JoinHandle<()>>> {
    let mut threads = Vec::new();
    for p in streams {
        let cat = home.connect()?;
        let (tx, rx) = sync_channel::<Msg>(SPOOL_QUEUE);
        let shared = Arc::new(Shared::default());
        let out = Outlet::new(
            tx,
            Arc::clone(&shared),
            Arc::new(AtomicUsize::new(0)),
            crate::backup::generated::rate(&p.abs).or(limit_rate),
        );
        let id = p.id;
        threads.push(spawn(setup, p, out));
        let (feed, ids) = (Arc::clone(feed), (job_id, setup.tag));
        threads.push(std::thread::spawn(move || {
            spool_stream(&feed, &cat, ids, id, rx, &shared)
        }));
    }
    Ok(threads)
}

/// Age at which a spooled chunk is finished whatever its size: a slow stream's data
/// reaches the despooler within about a second, so the drive can start late and the
/// job end soon after its sources.
pub(crate) const CHUNK_AGE: Duration = Duration::from_secs(1);

/// Blocks between a stream's packer and its spooler.
pub(crate) const SPOOL_QUEUE: usize = 16;

/// Spools one stream: takes its packer's messages and writes its blocks to the
/// stages, recording each finished chunk in `cat` (the thread's own connection).
pub(crate) fn spool_stream(
    feed: &Feed,
    cat: &Catalog,
    job: (i64, u64),
    stream: u16,
    rx: Receiver<Msg>,
    shared: &Shared,
) {
    let r = spool_messages(feed, cat, job, stream, rx, shared);
    if let Err(e) = r {
        feed.fail(e);
    }
}

fn spool_messages(
    feed: &Feed,
    cat: &Catalog,
    (job_id, tag): (i64, u64),
    stream: u16,
    rx: Receiver<Msg>,
    shared: &Shared,
) -> Result<()> {
    let mut spool = StreamSpool::new(feed.set.clone(), cat, job_id, tag, stream, feed.chunk_bytes)
        .with_max_age(CHUNK_AGE);
    for m in rx {
        match m {
            Msg::Block { mut block, .. } => {
                feed.spooled(stream, block.header.payload_len as u64);
                if let Some(c) = spool.roll(&block)? {
                    feed.chunk_done(stream, c);
                }
                if let Some(c) = spool.push(&mut block)? {
                    feed.chunk_done(stream, c);
                }
                shared.give(block.buf);
            }
            // Only despoolers send blocks found on tape.
            Msg::OnTape { .. } => {}
            Msg::Error(path, why) => {
                cat.add_error(job_id, &path, &why)?;
                feed.lock().errors.push((crate::display_path(&path), why));
            }
            Msg::End(entries, stored) => {
                if let Some(c) = spool.finish()? {
                    feed.chunk_done(stream, c);
                }
                feed.stream_end(stream, (entries, stored));
                return Ok(());
            }
        }
    }
    // The packer went away without its end: the job is stopping.
    Err(Error::Stopped)
}

/// Despools one stream, named `name`, into a writer's lane: its chunks in order as
/// they are finished, each block checked, with the entries that end in it. A block
/// damaged on the stage is left out, and the entries it cuts into are reported as
/// job errors (docs/STAGE.md 3.3).
pub(crate) fn despool_stream(feed: &Feed, tag: u64, stream: u16, name: &str, mut out: Outlet) {
    if let Err(e) = despool_chunks(feed, tag, (stream, name), &mut out) {
        feed.fail(e);
    }
}

fn despool_chunks(
    feed: &Feed,
    tag: u64,
    (stream, name): (u16, &str),
    out: &mut Outlet,
) -> Result<()> {
    let resume = feed.resume.as_ref();
    let from = resume.and_then(|r| r.from.get(&stream).copied());
    let mut rows = match from {
        Some((seq, offset)) => StreamRows::from_block(stream, seq, offset),
        None => StreamRows::new(stream),
    };
    let mut expanded = Vec::new();
    // Entries sent with their blocks, and whether any were lost.
    let (mut sent, mut sent_bytes, mut any_lost) = (0u64, 0u64, false);
    let end = loop {
        let chunk = match feed.next_chunk(stream) {
            Ok(c) => c,
            Err(Some(end)) => break end,
            Err(None) => return Err(Error::Stopped),
        };
        let path = feed.path_of(&chunk);
        #[cfg(feature = "test-hooks")]
        damage_for_test(stream, chunk.seq, &path)?;
        let reader = ChunkReader::open_expecting(&path, tag, stream)?;
        for b in reader {
            let b = match b {
                Ok(b) => b,
                Err(Error::Stage(StageError::DamagedBlock { seq, from, to, .. })) => {
                    rows.lost_block(seq, from, to)?;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let len = b.header.payload_len as usize;
            let payload: &[u8] = if b.header.compressed {
                // The expanded block is its header, then its payload.
                expand_block(&b.header, &b.block, &mut expanded)?;
                expanded
                    .get(BLOCK_HEADER_LEN..)
                    .ok_or(tapeloom_format::FormatError::Truncated("block"))?
            } else {
                b.block
                    .get(BLOCK_HEADER_LEN..BLOCK_HEADER_LEN + len)
                    .ok_or(tapeloom_format::FormatError::Truncated("block"))?
            };
            let (mut done, keep_from) = rows.block(b.seq, b.header.first_record, payload)?;
            if let Some(r) = resume {
                // Entries that reached tape before the job stopped keep their rows.
                done.retain(|d| !r.known.contains(&d.row.path));
                // A block that reached tape too is not written again: its entries
                // point at it where it is.
                if let Some(at) = r.landed_at(stream, b.header.stream_offset) {
                    sent += done.len() as u64;
                    let m = Msg::OnTape {
                        seq: b.seq,
                        at,
                        done,
                        keep_from,
                    };
                    out.other(m).map_err(|_| Error::Stopped)?;
                    continue;
                }
            }
            sent += done.len() as u64;
            sent_bytes += done
                .iter()
                .filter(|d| d.row.has_data())
                .map(|d| d.row.size)
                .sum::<u64>();
            any_lost |= report_lost(&mut rows, name, out)?;
            // Its CRC was checked as it was read back from the stage.
            let block = PackedBlock::opened(b.block, b.header, b.seq);
            let m = Msg::Block {
                block,
                done,
                keep_from,
            };
            out.block(m, len).map_err(|_| Error::Stopped)?;
        }
        feed.open_after(stream, chunk.seq, rows.open_entry());
    };
    rows.finish();
    any_lost |= report_lost(&mut rows, name, out)?;
    // The stream's own StreamEnd record, which the packer wrote from the same
    // counts, is what the tape holds; entries lost on the stage are not in the job.
    if resume.is_some() && rows.end().is_none() {
        // The file being spooled when the backup stopped is named, so that reading
        // the whole job passes over its records (see restore::plan::left_out).
        if let Some(path) = rows.open_entry() {
            let why = "the backup stopped while this file was spooled; it is not in the job";
            out.other(Msg::Error(path.to_vec(), why.into()))
                .map_err(|_| Error::Stopped)?;
        }
        out.other(Msg::Error(
            format!("<stream {name}>").into_bytes(),
            STREAM_CUT.into(),
        ))
        .map_err(|_| Error::Stopped)?;
    }
    let (entries, stored) = rows.end().unwrap_or(end);
    let (entries, stored) = match (any_lost, resume.is_some()) {
        (_, true) => (sent, sent_bytes),
        (true, false) => (sent, stored),
        (false, false) => (entries, stored),
    };
    out.other(Msg::End(entries, stored))
        .map_err(|_| Error::Stopped)
}

/// Sends the entries of stream `name` lost with damaged blocks as job errors;
/// whether there were any. An entry whose path was lost too is named after the
/// stream and the bytes lost (docs/STAGE.md 3.3).
fn report_lost(rows: &mut StreamRows, name: &str, out: &mut Outlet) -> Result<bool> {
    let lost = rows.take_lost();
    let any = !lost.is_empty();
    for l in lost {
        let (from, to) = (l.from, l.to);
        let (path, why) = match l.path {
            Some(p) => (p, format!("damaged on the disk stage (stream bytes {from}..{to}) before it reached tape; not backed up")),
            None => (
                format!("<stream {name}, bytes {from}..{to}>").into_bytes(),
                "damaged on the disk stage before it reached tape; the entries whose records started in these bytes are not backed up".to_string(),
            ),
        };
        out.other(Msg::Error(path, why))
            .map_err(|_| Error::Stopped)?;
    }
    Ok(any)
}

/// The test hook `TAPELOOM_TEST_DAMAGE_CHUNK=STREAM:CHUNK:OFFSET` (a build with
/// the feature `test-hooks` only) flips the byte at OFFSET of that chunk file of
/// the stream just before it is despooled, as damage on the disk would.
#[cfg(feature = "test-hooks")]
fn damage_for_test(stream: u16, chunk: u64, path: &std::path::Path) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let Ok(spec) = std::env::var("TAPELOOM_TEST_DAMAGE_CHUNK") else {
        return Ok(());
    };
    let mut it = spec.split(':').map(str::parse::<u64>);
    let (Some(Ok(s)), Some(Ok(c)), Some(Ok(at))) = (it.next(), it.next(), it.next()) else {
        return Ok(());
    };
    if (s, c) != (u64::from(stream), chunk) {
        return Ok(());
    }
    let what = || format!("damage {}", path.display());
    let f = io(
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path),
        what,
    )?;
    let mut b = [0u8];
    io(f.read_exact_at(&mut b, at), what)?;
    io(f.write_all_at(&[b[0] ^ 0xff], at), what)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures() -> StartFigures {
        StartFigures {
            staged: 0,
            capacity: 4 << 30,
            chunk: 16 << 20,
            drive_rate: Some(40e6),
            spool_rate: 6e6,
            left: Some(600_000_000),
            pressed: false,
            unfinished: 0,
        }
    }

    #[test]
    fn the_drive_starts_when_the_stage_outlasts_the_sources() {
        // 40 MB/s against 6: the stage drains at 34 MB/s while 600 MB take 100 s to
        // come, so 3.4 GB must be staged first... more than three quarters of 4 GiB.
        let f = figures();
        assert!(!start_now(StartFigures {
            staged: 1 << 30,
            ..f
        }));
        assert!(start_now(StartFigures {
            staged: 3_300_000_000,
            ..f
        }));
        // 60 MB left: 340 MB staged is enough.
        let f = StartFigures {
            left: Some(60_000_000),
            ..f
        };
        assert!(!start_now(StartFigures {
            staged: 300_000_000,
            ..f
        }));
        assert!(start_now(StartFigures {
            staged: 340_000_000,
            ..f
        }));
    }

    #[test]
    fn a_pressed_stage_or_unknown_figures_start_the_drive_early() {
        let f = figures();
        assert!(start_now(StartFigures {
            staged: 1,
            pressed: true,
            ..f
        }));
        let unknown = StartFigures {
            drive_rate: None,
            ..f
        };
        assert!(!start_now(StartFigures {
            staged: 1 << 30,
            ..unknown
        }));
        assert!(start_now(StartFigures {
            staged: 2 << 30,
            ..unknown
        }));
        // Sources as fast as the drive: a chunk is enough.
        let fast = StartFigures {
            spool_rate: 50e6,
            ..f
        };
        assert!(start_now(StartFigures {
            staged: 16 << 20,
            ..fast
        }));
    }

    fn run(id: u16, unwritten: f64, to_end: f64) -> RunFigures {
        RunFigures {
            id,
            unwritten,
            to_end,
        }
    }

    #[test]
    fn whole_runs_fit_once_each_run_ends_after_its_source() {
        // Four 800 MB streams at 8 MB/s, 100 s from their ends, on a 40 MB/s drive:
        // a run takes 20 s, so the first may start 20 s before the sources end.
        let at = |to_end: f64| (1..=4).map(|i| run(i, 800e6, to_end)).collect::<Vec<_>>();
        assert!(!whole_runs_fit(at(100.0), 40e6));
        assert!(!whole_runs_fit(at(20.0), 40e6));
        assert!(whole_runs_fit(at(19.0), 40e6));
        // Streams that have ended never hold the drive back.
        assert!(whole_runs_fit(vec![run(1, 800e6, 0.0)], 40e6));
    }

    #[test]
    fn whole_runs_put_the_stream_that_ends_first_first() {
        // A small stream ending in 5 s goes first, and its run (2.5 s) would end
        // before its source does: the drive would catch up with it, so it waits.
        let f = vec![run(1, 100e6, 5.0), run(2, 1e9, 30.0)];
        assert!(!whole_runs_fit(f, 40e6));
        // With 8 s to go on the large one the two runs fit, small one first.
        let f = vec![run(2, 1e9, 8.0), run(1, 100e6, 0.5)];
        assert!(whole_runs_fit(f, 40e6));
        // Each run's deadline counts: the second stream ends after both runs would.
        let f = vec![run(1, 400e6, 5.0), run(2, 40e6, 12.0)];
        assert!(!whole_runs_fit(f, 40e6));
    }
}
