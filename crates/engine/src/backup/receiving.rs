//! A backup whose streams a server receives onto the stages before any drive is
//! free (docs/SERVER.md, "The stage").
//!
//! [`receive_staged`] records the job and starts, for each stream, a receiver
//! (every block checked as [`super::received`] checks it) that hands its blocks to
//! a spooler writing them to the stages in chunk files, each flushed and recorded
//! in the catalog once finished. A stream's [`Inlet::end`] answers only once its
//! last chunk is recorded, so what the server acknowledged survives a kill -9 or a
//! power cut: the next start resumes the job from its chunks
//! ([`super::resume_job`]). [`Receiving::write`] then writes the job on the drives
//! the server gives it, despooling as a staged local backup does, from the first
//! chunk on; the stream's receiving goes on meanwhile.

use super::changes::SetChoice;
use super::mux::{Msg, Outlet, Shared};
use super::plan::{BackupOptions, DespoolOrder, DriveSet, Plan};
use super::received::{self, Deletions, Inlet, Received};
use super::remote::{job_crypt, record_failure};
use super::staged::{spool_stream, Feed, SPOOL_QUEUE};
use super::weave::JobShared;
use super::{begin_job, job_pool, mount_all, run_and_finish, stop_staging};
use super::{BackupReport, Progress};
use crate::crypt::JobCrypt;
use crate::error::{Error, Result};
use crate::home::Home;
use crate::media::writer::Tapes;
use crate::stage::StageSet;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tapeloom_catalog::{ChunkFilter, ChunkState};
use tapeloom_format::{check_block_size, JobStart, CRYPT_TAIL_LEN};
use tapeloom_tree::pack::plan::Pending;
use tapeloom_tree::pack::RemotePlan;

/// A job being received onto the stages, not yet written.
pub struct Receiving {
    /// The job's id in the catalog.
    pub job_id: i64,
    /// Its tag, which every block carries.
    pub tag: u64,
    inlets: Vec<Inlet>,
    feed: Arc<Feed>,
    received: Arc<Received>,
    threads: Vec<JoinHandle<()>>,
    plan: Plan,
    opts: BackupOptions,
    pool: tapeloom_catalog::Pool,
    set: SetChoice,
    start: JobStart,
    crypt: Option<JobCrypt>,
    t0: Instant,
}

/// Stops a job being received or written, from another thread: its spoolers and
/// despoolers give up, and the job fails with what it staged kept on the stages.
#[derive(Clone)]
pub struct ReceiveStop(Arc<Feed>);

impl ReceiveStop {
    /// Stops the job.
    pub fn stop(&self) {
        self.0.cancel();
    }

    /// Payload bytes the job staged that are not yet on tape.
    pub fn held_bytes(&self) -> u64 {
        self.0.backlog()
    }

    /// Whether a stream (of any job on the same stages) waits for room on them.
    pub fn pressed(&self) -> bool {
        self.0.set.pressed()
    }
}

/// Deletes what job `job_id` staged on `stages` (its files, and its chunks
/// marked given back in the catalog): a job its server gave up.
pub fn drop_staged_job(home: &Home, job_id: i64, stages: &StageSet) -> Result<()> {
    drop_staged(home, job_id, stages)
}

/// Records a job packed elsewhere at the set, level and base of `choice`, and
/// starts receiving its streams onto `stages` (the server's, shared by its jobs).
/// A stream silent for `idle` is cut. Each stream's way in is taken with
/// [`Receiving::take_inlets`].
pub fn receive_staged(
    home: &Home,
    stages: &StageSet,
    (plan, opts): (&RemotePlan, &BackupOptions),
    choice: SetChoice,
    idle: Duration,
) -> Result<Receiving> {
    let t0 = Instant::now();
    check_block_size(opts.block_size)?;
    let plan = plan.checked()?;
    let pool = job_pool(home, opts)?;
    let (job_id, start) = begin_job(home, &plan, opts, (&choice, &pool.name))?;
    let crypt = match &opts.encrypt {
        Some(master) => {
            let c = job_crypt(home, master, (job_id, start.job_tag));
            Some(c.inspect_err(|e| record_failure(home, job_id, t0, e))?)
        }
        None => None,
    };
    let ids: Vec<u16> = plan.streams().iter().map(|s| s.id).collect();
    let set = stages.for_job();
    // A chunk takes at most a quarter of the largest stage, as for a local job.
    let largest = set.stages().iter().map(|s| s.limit).max().unwrap_or(0);
    let floor = (opts.block_size + 4 + crate::stage::CHUNK_HEADER_LEN) as u64;
    let chunk = opts.chunk_bytes.min(largest / 4).max(floor);
    let mut feed = Feed::new(set, (chunk, None), &ids, t0);
    feed.eager = true;
    let feed = Arc::new(feed);
    let (received, inlets) = Received::onto(&ids, idle, Some(&feed));
    let tail = if crypt.is_some() { CRYPT_TAIL_LEN } else { 0 };
    let mut threads = Vec::new();
    for &id in &ids {
        let started = spool_received(
            home,
            (&received, &feed),
            (job_id, start.job_tag, opts.block_size),
            (id, tail),
        );
        match started {
            Ok(t) => threads.extend(t),
            Err(e) => {
                feed.cancel();
                record_failure(home, job_id, t0, &e);
                return Err(e);
            }
        }
    }
    Ok(Receiving {
        job_id,
        tag: start.job_tag,
        inlets,
        feed,
        received,
        threads,
        plan,
        opts: opts.clone(),
        pool,
        set: choice,
        start,
        crypt,
        t0,
    })
}

/// Starts stream `id`'s receiver and the spooler it feeds; their threads.
fn spool_received(
    home: &Home,
    (received, feed): (&Arc<Received>, &Arc<Feed>),
    (job_id, tag, block_size): (i64, u64, usize),
    (id, tail): (u16, usize),
) -> Result<[JoinHandle<()>; 2]> {
    let cat = home.connect()?;
    let (tx, rx) = sync_channel::<Msg>(SPOOL_QUEUE);
    let shared = Arc::new(Shared::default());
    let out = Outlet::new(tx, Arc::clone(&shared), Arc::new(AtomicUsize::new(0)), None);
    let receiver = received::spawn(received, (tag, block_size, tail), id, out);
    let feed = Arc::clone(feed);
    let spooler = std::thread::Builder::new()
        .name(format!("spool {id}"))
        .spawn(move || spool_stream(&feed, &cat, (job_id, tag), id, rx, &shared))
        .map_err(|source| Error::Io {
            what: "start a stream's spooler".into(),
            source,
        })?;
    Ok([receiver, spooler])
}

impl Receiving {
    /// Each stream's way in, in stream order (once; none after).
    pub fn take_inlets(&mut self) -> Vec<Inlet> {
        std::mem::take(&mut self.inlets)
    }

    /// What stops the job from another thread.
    pub fn stopper(&self) -> ReceiveStop {
        ReceiveStop(Arc::clone(&self.feed))
    }

    /// Writes the job on `drives` as its streams come, then ends it; `deletions`
    /// brings the paths the client found deleted since the base (for a job with
    /// one). A job that fails is recorded failed; what it staged stays for
    /// [`super::resume_job`] unless the job is dropped with [`Receiving::abandon`].
    pub fn write(
        self,
        home: &Home,
        drives: DriveSet,
        deletions: Receiver<Deletions>,
        progress: Arc<Progress>,
    ) -> Result<BackupReport> {
        let (job_id, t0) = (self.job_id, self.t0);
        let r = self.write_on(home, (drives, deletions, progress));
        if let Err(e) = &r {
            record_failure(home, job_id, t0, e);
        }
        r
    }

    fn write_on(
        self,
        home: &Home,
        (drives, deletions, progress): (DriveSet, Receiver<Deletions>, Arc<Progress>),
    ) -> Result<BackupReport> {
        let mut tapes = Tapes::new(home.library()?);
        tapes.pool = self.pool.clone();
        tapes.crypt = self.crypt;
        let tapes = Arc::new(tapes);
        let drives = super::plan::resolve_drives(&drives, tapes.drives()?)?;
        let n_streams = self.plan.names.len();
        let opts = &BackupOptions {
            // Every stream is held by a drive from the start, as it is received.
            concurrency: Some(n_streams.div_ceil(drives.len()).max(1)),
            despool: DespoolOrder::Early,
            ..self.opts.clone()
        };
        self.received.expect_deletions(deletions);
        let job = JobShared {
            cpu0: crate::cpu::process_seconds(),
            opts,
            tag: self.tag,
            job_id: self.job_id,
            skip: Vec::new(),
            pending: Mutex::new(Pending::of(&self.plan)),
            progress,
            t0: self.t0,
            stop: AtomicBool::new(false),
            expected: n_streams.div_ceil(drives.len()).clamp(1, 4),
            software: false,
            counters: Arc::default(),
            estimates: Arc::new(super::estimate::Estimates::new(n_streams)),
            drives: drives.len(),
            index: Mutex::new(super::index::IndexSpool::new()),
            moved: Mutex::new(Vec::new()),
            feed: Some(Arc::clone(&self.feed)),
            received: Some(Arc::clone(&self.received)),
            prior: None,
            // The packing side compared with the base; this side saw no source.
            scan: Arc::default(),
            set: self.set,
        };
        let mounted = mount_all(
            home,
            &tapes,
            &drives,
            (self.job_id, &self.start, None),
            opts,
            n_streams,
        );
        let mut writers = match mounted {
            Ok(w) => w,
            Err(e) => {
                stop_staging(&job, self.threads);
                return Err(e);
            }
        };
        run_and_finish(home, &job, &mut writers, self.threads, Instant::now())
    }

    /// Gives the job up before it was written: its receiving stops and what it
    /// staged is deleted. Its caller records why it failed.
    pub fn abandon(self, home: &Home) {
        self.feed.cancel();
        // The receivers stop once their inlets are cut or dropped.
        drop(self.inlets);
        for t in self.threads {
            let _ = t.join();
        }
        if let Err(e) = drop_staged(home, self.job_id, &self.feed.set) {
            let why = crate::escape_controls(&e.to_string()).into_owned();
            eprintln!("tapeloom: delete what job {} staged: {why}", self.job_id);
        }
    }
}

/// Deletes the chunks job `job_id` staged (files and rows), giving their space
/// back to `set`.
fn drop_staged(home: &Home, job_id: i64, set: &StageSet) -> Result<()> {
    let chunks = home.catalog.staged_chunks(&ChunkFilter {
        job: Some(job_id),
        state: Some(ChunkState::Spooled),
        ..ChunkFilter::default()
    })?;
    let paths: std::collections::HashMap<i64, std::path::PathBuf> =
        set.stages().into_iter().map(|s| (s.id, s.path)).collect();
    for c in chunks {
        if let Some(p) = paths.get(&c.stage_id) {
            crate::stage::remove_chunk_file(p, &c.file)?;
            crate::stage::prune_chunk_dirs(p, &c.file);
        }
        home.catalog
            .mark_chunk_despooled(c.job_id, c.stream, c.seq)?;
        set.release(c.stage_id, c.bytes);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backup::changes::choose_set;
    use std::path::{Path, PathBuf};
    use tapeloom_catalog::JobState;
    use tapeloom_format::Level;
    use tapeloom_tree::pack::{pack_streams, Piece};

    const TAG: u64 = 77;
    const BLOCK: usize = 64 << 10;

    /// A home with a stage of 1 GiB, the set of its stages, and a source of two
    /// files, one of several blocks.
    fn setup(t: &Path) -> (Home, StageSet, PathBuf) {
        let home = Home::open(&t.join("home")).unwrap();
        crate::stage::add_stage(&home.catalog, &t.join("stage"), 1 << 30).unwrap();
        let (stages, _) = StageSet::open(&home.catalog).unwrap();
        let src = t.join("src");
        std::fs::create_dir_all(&src).unwrap();
        let big: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(src.join("big"), big).unwrap();
        std::fs::write(src.join("small"), b"small").unwrap();
        (home, stages, src)
    }

    /// Begins the job of `src` on `stages`, and hands each stream's blocks in, as
    /// a client packs them; each stream's end too when `end`.
    fn receive(home: &Home, stages: &StageSet, src: &Path, end: bool) -> Receiving {
        let opts = BackupOptions {
            block_size: BLOCK,
            job_tag: Some(TAG),
            ..BackupOptions::default()
        };
        let plan = RemotePlan::of_sources(&[src.to_path_buf()], &opts.pack()).unwrap();
        let (choice, _) = choose_set(home.dir(), &plan.name, Level::Full).unwrap();
        let idle = Duration::from_secs(30);
        let mut r = receive_staged(home, stages, (&plan, &opts), choice, idle).unwrap();
        let packed = pack_streams(
            &[src.to_path_buf()],
            &opts.pack(),
            (TAG, BLOCK, 0),
            Arc::default(),
        );
        for (inlet, stream) in r.take_inlets().into_iter().zip(packed.unwrap()) {
            for piece in stream {
                match piece {
                    Piece::Block(b) => inlet.block(b).unwrap(),
                    Piece::Error(p, why) => inlet.error(p, why).unwrap(),
                    Piece::Idle => {}
                }
            }
            if end {
                inlet.end().unwrap();
            } else {
                inlet.cut("the test stops here".into());
            }
        }
        r
    }

    fn spooled(home: &Home, job: i64) -> Vec<tapeloom_catalog::StagedChunk> {
        let filter = ChunkFilter {
            job: Some(job),
            state: Some(ChunkState::Spooled),
            ..ChunkFilter::default()
        };
        home.catalog.staged_chunks(&filter).unwrap()
    }

    #[test]
    fn a_streams_end_is_answered_once_recorded_and_the_job_is_written_from_the_stage() {
        let t = tempfile::tempdir().unwrap();
        let (home, stages, src) = setup(t.path());
        let r = receive(&home, &stages, &src, true);
        // The end was answered: the stream's chunks are on the stage, whole and
        // recorded, before any drive was given.
        let job = r.job_id;
        assert_eq!(home.catalog.streams_spooled_whole(job).unwrap(), vec![1]);
        let chunks = spooled(&home, job);
        assert!(!chunks.is_empty());
        let (_tx, rx) = sync_channel(1);
        let report = r.write(&home, DriveSet::Count(1), rx, Arc::default());
        let report = report.unwrap();
        assert_eq!(report.status, JobState::Ok, "{:?}", report.errors);
        assert!(report.staged);
        assert_eq!(report.bytes, 300_005);
        // On tape: the stage holds nothing of the job any more.
        assert!(spooled(&home, job).is_empty());
        let used: u64 = stages.stages().iter().map(|s| s.used).sum();
        assert_eq!(used, 0);
    }

    #[test]
    fn a_job_given_up_leaves_nothing_on_the_stage() {
        let t = tempfile::tempdir().unwrap();
        let (home, stages, src) = setup(t.path());
        let r = receive(&home, &stages, &src, true);
        let job = r.job_id;
        let files: Vec<PathBuf> = (spooled(&home, job).iter())
            .map(|c| stages.stages()[0].path.join(&c.file))
            .collect();
        assert!(files.iter().all(|f| f.exists()));
        r.abandon(&home);
        assert!(spooled(&home, job).is_empty());
        assert!(files.iter().all(|f| !f.exists()));
        let used: u64 = stages.stages().iter().map(|s| s.used).sum();
        assert_eq!(used, 0);
    }

    #[test]
    fn a_stream_cut_before_its_end_says_why() {
        let t = tempfile::tempdir().unwrap();
        let (home, stages, src) = setup(t.path());
        let mut r = receive(&home, &stages, &src, false);
        // The job fails with the cut's reason.
        assert!(r.take_inlets().is_empty());
        let (_tx, rx) = sync_channel(1);
        let e = r
            .write(&home, DriveSet::Count(1), rx, Arc::default())
            .unwrap_err();
        assert!(e.to_string().contains("the test stops here"), "{e}");
    }
}
