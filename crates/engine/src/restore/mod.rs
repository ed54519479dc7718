//! Restore: whole jobs, or chosen paths, reading only the blocks that hold them.
//!
//! [`plan`] chooses the wanted entries and the runs of blocks that hold them;
//! [`chains`] groups the job's volumes into the chains its drives wrote and gives
//! each chain to a drive, so a job written by several drives is read by as many at
//! once. On each drive a job reader (`crate::media::reader`) reads the runs of its
//! chains, passing over the gaps by locate or read-through, whichever the drive
//! model says is cheaper; the restorer of the tree crate
//! (`tapeloom_tree::restore::restorer`), which all drives share, places what they
//! decode. A stream wholly on a disk stage is
//! read from its chunk files instead ([`staged`]), before the drives start, by the
//! same decoding and placing; when every stream wanted is, no cartridge is mounted.
//!
//! A backup set restored as it was at one of its jobs ([`pit`]) reads every job its
//! tree needs with the same readers and restorer, on a plan [`merge`] makes: each
//! cartridge mounted once and read forward, across the jobs on it. Its reading
//! and its placing may also run on two machines ([`set_handoff`]), as a one-job
//! restore's may ([`handoff`]).

pub(crate) mod cartridge;
pub(crate) mod chains;
pub(crate) mod handoff;
pub(crate) mod merge;
pub(crate) mod order;
pub(crate) mod pit;
pub(crate) mod plan;
pub(crate) mod set_handoff;
pub(crate) mod staged;

pub use handoff::{read_blocks, BlockSink};
pub use pit::{
    restore_files, restore_files_in_order, restore_set, set_job, set_jobs_read, set_tree,
};
pub use plan::normalize;
pub use plan::Expect;
pub use set_handoff::{read_set_blocks, SetBlockSink};
pub use tapeloom_tree::restore::{
    BlockRestore, Kept, Overwrite, ReadOrder, RestoreOptions, SetBlockRestore, SetJob,
    SetSelection, SkipBy, Source,
};
pub use tapeloom_tree::verify::{BlockVerify, Listed};

use crate::error::{Error, JobError, MediaError, OptionsError, Result};
use crate::home::Home;
use crate::media::reader::{Got, JobReader, SharedLibrary};
use crate::sampler::{Marked, Sampler};
use chains::{assign, Chain};
use plan::{plan_runs, select, Hints, Run};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tapeloom_catalog::{Catalog, FileRow, JobVolume, Sample};
use tapeloom_device::{DriveHealth, DriveStats};
use tapeloom_tree::decode::Streams;
use tapeloom_tree::restore::restorer::Restorer;

/// What a restore did, with what each drive read.
pub type RestoreReport = tapeloom_tree::restore::RestoreReport<DriveRead>;

/// What one drive of a restore read.
#[derive(Debug, Clone, Default)]
pub struct DriveRead {
    /// The drive (library index).
    pub drive: usize,
    /// The chains it read, by the sequence number of their first volume.
    pub chains: Vec<u32>,
    /// Blocks read from tape.
    pub blocks_read: u64,
    /// Bytes read from tape.
    pub bytes_read_from_tape: u64,
    /// Locates done.
    pub locates: u64,
    /// Cartridges mounted.
    pub mounts: u64,
    /// Cartridges the changer moved into it.
    pub loads: u64,
    /// Gaps passed by reading through.
    pub read_through: u64,
    /// Cartridges whose runs it read in another order than the block order.
    pub reordered: u64,
    /// Modeled seconds of its work, when it has a timing model.
    pub modeled_seconds: Option<f64>,
    /// Modeled seconds its reading plan predicted, loads and unloads included,
    /// when it planned with a timing model.
    pub planned_seconds: Option<f64>,
    /// Modeled seconds until its first wanted block was under the head (mounts,
    /// label and the travel to where the wanted data starts).
    pub first_block_seconds: Option<f64>,
    /// The model's lower bound for its reads (see [`RestoreReport::bound_seconds`]).
    pub bound_seconds: Option<f64>,
    /// Its statistics (of its last cartridge), when it keeps them.
    pub stats: Option<DriveStats>,
    /// What it said about each cartridge at the end of its mount.
    pub health: Vec<(String, DriveHealth)>,
    /// The copy it read (1: the job's own cartridges).
    pub copy_no: u32,
    /// Bad blocks it read from another copy instead.
    pub from_other_copy: u64,
    /// Cartridges it passed over, barcode and why ([`RestoreReport::passed_over`]).
    pub passed_over: Vec<(String, String)>,
}

/// What one drive's reader brings back: its figures, samples and marks.
pub(crate) type Read = (DriveRead, Vec<Sample>, Vec<Marked>);

/// Restores job `job_id` (or the chosen paths of it) under `opts.to`: the streams
/// wholly on a disk stage from their chunk files, the others from tape.
pub fn restore(home: &Home, job_id: i64, opts: &RestoreOptions) -> Result<RestoreReport> {
    let t0 = Instant::now();
    let cat = &home.catalog;
    let job = cat.job(job_id)?.ok_or(JobError::NoJob(job_id))?;
    // Refused before anything is read, even when the job's blocks are on a stage.
    let key = crate::crypt::for_job(&home.keys, &job)?.map(|c| c.data);
    let (want, rows) = select(cat, job_id, opts)?;
    let whole = want.is_none();
    let streams = cat.streams(job_id)?;
    crate::regen::know(job.tag, &streams);
    let names: HashMap<u16, String> = streams.into_iter().map(|s| (s.stream, s.name)).collect();
    let needed: BTreeSet<u16> = if whole {
        names.keys().copied().collect()
    } else {
        rows.iter().map(|r| r.stream).collect()
    };
    let on_stage = staged::on_stage(cat, job_id, &needed)?;
    let mut restorer = Restorer::new(&opts.to, opts.overwrite, want)?;
    restorer.left_out = plan::left_out(cat, job_id)?;
    restorer.job = job_id;
    (restorer.expected).insert(job_id, plan::expected(cat, job_id, &rows, whole)?);
    let rows: Vec<FileRow> = rows
        .into_iter()
        .filter(|r| !on_stage.contains_key(&r.stream))
        .collect();
    let from_stage = staged::read(job.tag, &on_stage, &mut restorer)?;
    let rs = Mutex::new(restorer);
    let (reads, chains) = if needed.iter().all(|s| on_stage.contains_key(s)) {
        (Vec::new(), 0)
    } else {
        let skip: HashSet<u16> = on_stage.keys().copied().collect();
        let job = (job_id, job.tag, job.block_size as usize, key);
        let out = Out::Place(&rs);
        read_tape(home, job, (rows, whole), (&names, &skip), (opts, out, t0))?
    };
    let (mut report, per_stream) = finish(rs, reads)?;
    report.chains = chains;
    (report.job, report.jobs) = (job_id, vec![job_id]);
    let name = |id: &u16| names.get(id).cloned().unwrap_or_default();
    let mut per: Vec<(u16, u64)> = per_stream.into_iter().collect();
    per.sort();
    report.streams = per.iter().map(|(id, b)| (name(id), *b)).collect();
    (report.stream_sources, report.source) = sources(&needed, &on_stage, &names);
    report.blocks_read_from_stage = from_stage.blocks;
    report.bytes_read_from_stage = from_stage.bytes;
    report.seconds = t0.elapsed().as_secs_f64();
    Ok(report)
}

/// Where each stream of `needed` is read (by name, in stream order), and where
/// the restore reads: the stages, tape, or both.
pub(crate) fn sources<T>(
    needed: &BTreeSet<u16>,
    on_stage: &std::collections::BTreeMap<u16, T>,
    names: &HashMap<u16, String>,
) -> (Vec<(String, Source)>, Source) {
    let name = |id: &u16| names.get(id).cloned().unwrap_or_default();
    let each = (needed.iter())
        .map(|id| match on_stage.contains_key(id) {
            true => (name(id), Source::Stage),
            false => (name(id), Source::Tape),
        })
        .collect();
    let all = match (on_stage.len(), needed.len() - on_stage.len()) {
        (0, _) => Source::Tape,
        (_, 0) => Source::Stage,
        _ => Source::StageAndTape,
    };
    (each, all)
}

/// Ends a restore once the drives are done: the writers' files, then a set's hard
/// links and newer metadata, then directories' metadata; adds what the drives read.
/// Returns the report and the data bytes restored per stream.
pub(crate) fn finish(
    rs: Mutex<Restorer>,
    reads: Vec<DriveRead>,
) -> Result<(RestoreReport, HashMap<u16, u64>)> {
    let rs = rs.into_inner().map_err(|_| Error::Panicked {
        what: "a drive's reader",
    })?;
    let (placed, per_stream) = rs.finish();
    let mut report = placed.with_drives(Vec::new());
    add_drives(&mut report, reads);
    Ok((report, per_stream))
}

/// Adds what the drives read to the report.
pub(crate) fn add_drives(report: &mut RestoreReport, mut reads: Vec<DriveRead>) {
    reads.sort_by_key(|d| d.drive);
    for d in &reads {
        report.blocks_read += d.blocks_read;
        report.bytes_read_from_tape += d.bytes_read_from_tape;
        report.locates += d.locates;
        report.mounts += d.mounts;
        report.loads += d.loads;
        report.read_through += d.read_through;
        report.reordered += d.reordered;
        report.from_other_copy += d.from_other_copy;
        report.passed_over.extend(d.passed_over.iter().cloned());
        report.copy_no = report.copy_no.max(d.copy_no);
    }
    // The drives read at once: the restore takes as long as the slowest.
    let longest = |f: fn(&DriveRead) -> Option<f64>| reads.iter().filter_map(f).reduce(f64::max);
    report.modeled_seconds = longest(|d| d.modeled_seconds);
    report.bound_seconds = longest(|d| d.bound_seconds);
    report.planned_seconds = longest(|d| d.planned_seconds);
    report.first_block_seconds = reads
        .iter()
        .filter_map(|d| d.first_block_seconds)
        .reduce(f64::min);
    report.drives = reads;
}

/// What a tape read needs to know of the job: its id, tag and block size.
pub(crate) type JobFacts = (i64, u64, usize, Option<tapeloom_format::DataKey>);

/// Reads from tape what a restore wants of the streams not in `skip` (`rows` as
/// [`select`] gives them, less the streams on a stage; `whole` for the whole job),
/// on as many drives as the job has chains and the options allow; stores the
/// drives' samples, marks and health. Returns what each drive read, and the
/// number of chains of the job.
pub(crate) fn read_tape(
    home: &Home,
    (job_id, tag, block_size, key): JobFacts,
    (rows, whole): (Vec<FileRow>, bool),
    (names, skip): (&HashMap<u16, String>, &HashSet<u16>),
    (opts, out, t0): (&RestoreOptions, Out<'_>, Instant),
) -> Result<(Vec<DriveRead>, usize)> {
    let cat = &home.catalog;
    let vols = cat.job_volumes(job_id)?;
    if vols.is_empty() {
        return Err(JobError::NothingOnTape(job_id).into());
    }
    let extents = cat.extents(job_id)?;
    let chains = chains::chains(&vols, &extents);
    let (work, hints) = plan_chains(&chains, rows, whole, &extents);
    let work = only_on(job_id, work, &opts.volumes);

    let mut lib = home.library()?;
    let inv = lib.inventory()?;
    let mut drives = which_drives(opts, inv.drives.len())?;
    let sources = crate::copy::sources(cat, &inv, (job_id, &vols), opts.copy)?;
    if sources.first.is_some() {
        // A copy's cartridges may hold several of the job's chains: one drive
        // reads them.
        drives.truncate(1);
    }
    let held: HashMap<usize, String> = inv
        .drives
        .iter()
        .filter_map(|d| d.loaded.clone().map(|b| (d.index, b)))
        .collect();
    let todo: Vec<Chain> = work.iter().map(|(c, _)| c.clone()).collect();
    let plan = assign(&todo, &drives, &held);
    // A bad block is read from another copy on a drive the restore leaves free,
    // else on the reading drive itself.
    let alt_drive = (0..inv.drives.len()).find(|d| !plan.iter().any(|(p, _)| p == d));
    let lib: SharedLibrary = Arc::new(Mutex::new(lib));
    let stop = AtomicBool::new(false);
    let ctx = [JobCtx {
        id: job_id,
        tag,
        vols: vols.clone(),
        key,
        hints,
        sources,
        alt_drive,
    }];
    let shared = Shared {
        jobs: &ctx,
        block_size,
        opts,
        names,
        skip,
        out,
        lib: &lib,
        stop: &stop,
        t0,
    };
    // Each drive looks up the files of a bad block through a connection of its own.
    let mut tasks = Vec::new();
    for (drive, list) in plan {
        let mine: Vec<&(Chain, Vec<Run>)> = list.iter().map(|&i| &work[i]).collect();
        tasks.push((drive, mine, home.connect()?));
    }
    let (mut reads, samples, marked) = read_all(&shared, tasks, |s, d, w, c| s.read(d, w, c))?;
    // The cartridges of the copies passed over before the read, said first.
    if let Some(first) = reads.first_mut() {
        let before = ctx[0].sources.passed_over.iter().cloned();
        first.passed_over.splice(0..0, before);
    }
    // A home on a read-only file system keeps no figures of the read.
    if home.is_read_only() {
        return Ok((reads, chains.len()));
    }
    let op = opts.op();
    cat.clear_samples(job_id, op)?;
    cat.add_samples(job_id, op, &samples)?;
    cat.set_marks(job_id, op, &crate::sampler::marks(t0, &marked))?;
    crate::media::save_health(
        cat,
        job_id,
        op,
        reads.iter().map(|d| (d.drive, d.health.as_slice())),
    )?;
    Ok((reads, chains.len()))
}

/// The runs of `work` cut to the cartridges `volumes` (all when empty), each
/// chain keeping its volumes' order; chains left with nothing are dropped.
fn only_on(job: i64, work: Vec<(Chain, Vec<Run>)>, volumes: &[String]) -> Vec<(Chain, Vec<Run>)> {
    if volumes.is_empty() {
        return work;
    }
    let mut kept: Vec<(Chain, Vec<Run>)> = Vec::new();
    for (chain_id, vol, step) in merge::split(job, &work) {
        if !volumes.contains(&vol.volume.barcode) {
            continue;
        }
        match kept.iter_mut().find(|(c, _)| c.id == chain_id) {
            Some((_, runs)) => runs.push(step.run),
            None => {
                let chain = (work.iter())
                    .find(|(c, _)| c.id == chain_id)
                    .map(|(c, _)| c.clone());
                if let Some(c) = chain {
                    kept.push((c, vec![step.run]));
                }
            }
        }
    }
    kept
}

/// The drives to read with: `--drive`, else the first `--drives`, else all.
pub(crate) fn which_drives(opts: &RestoreOptions, have: usize) -> Result<Vec<usize>> {
    Ok(match (opts.drive, opts.drives) {
        (Some(d), _) if d >= have => return Err(MediaError::NoSuchDrive { drive: d, have }.into()),
        (Some(d), _) => vec![d],
        (None, Some(0)) => return Err(OptionsError::TooManyDrives { asked: 0, have }.into()),
        (None, Some(n)) if n > have => {
            return Err(OptionsError::TooManyDrives { asked: n, have }.into())
        }
        (None, n) => (0..n.unwrap_or(have)).collect(),
    })
}

/// A drive's task: its index, its work (a job's chains with their runs, or a set's
/// cartridges), its catalog connection.
pub(crate) type Task<W> = (usize, W, Catalog);

/// What the drives of a restore read: their figures, samples and marks.
pub(crate) type Reads = (Vec<DriveRead>, Vec<Sample>, Vec<Marked>);

/// Runs every drive's task on a thread of its own with `work`; a drive that fails
/// stops the others. Returns what the drives read, their samples and marks, or the
/// first cause of a failure.
pub(crate) fn read_all<W: Send>(
    shared: &Shared<'_>,
    tasks: Vec<Task<W>>,
    work: impl Fn(&Shared<'_>, usize, &W, &Catalog) -> Result<Read> + Sync,
) -> Result<Reads> {
    let results: Vec<Result<Read>> = std::thread::scope(|s| {
        let handles: Vec<_> = tasks
            .into_iter()
            .map(|(drive, mine, conn)| {
                let (shared, work) = (&shared, &work);
                s.spawn(move || {
                    let r = work(shared, drive, &mine, &conn);
                    if r.is_err() {
                        shared.stop.store(true, Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or(Err(Error::Panicked {
                    what: "a drive's reader",
                }))
            })
            .collect()
    });
    let mut reads = Vec::new();
    let mut samples = Vec::new();
    let mut marked = Vec::new();
    let mut failed = None;
    for r in results {
        match r {
            Ok((d, s, m)) => {
                reads.push(d);
                samples.extend(s);
                marked.extend(m);
            }
            // The first cause, not the drives that stopped because of it.
            Err(Error::Stopped) => {}
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    Ok((reads, samples, marked))
}

/// The runs to read in each chain, chains with nothing wanted left out; and where
/// wanted entries start.
pub(crate) fn plan_chains(
    chains: &[Chain],
    rows: Vec<FileRow>,
    whole: bool,
    extents: &[tapeloom_catalog::Extent],
) -> (Vec<(Chain, Vec<Run>)>, Hints) {
    let chain_of: HashMap<u32, u32> = chains
        .iter()
        .flat_map(|c| c.vols.iter().map(move |v| (v.seq, c.id)))
        .collect();
    let mut rows_of: HashMap<u32, Vec<FileRow>> = HashMap::new();
    for r in rows {
        let c = chain_of.get(&r.start_seq).copied().unwrap_or(r.start_seq);
        rows_of.entry(c).or_default().push(r);
    }
    let mut hints = Hints::new();
    let mut work = Vec::new();
    for c in chains {
        let mut rows = rows_of.remove(&c.id).unwrap_or_default();
        if !whole && rows.is_empty() {
            continue;
        }
        let ext: Vec<tapeloom_catalog::Extent> = extents
            .iter()
            .filter(|e| chain_of.get(&e.seq) == Some(&c.id))
            .cloned()
            .collect();
        let (runs, h) = plan_runs(&c.vols, &mut rows, whole, &ext);
        hints.extend(h);
        work.push((c.clone(), runs));
    }
    (work, hints)
}

/// What a drive needs to know of a job it reads.
pub(crate) struct JobCtx {
    pub id: i64,
    pub tag: u64,
    pub vols: Vec<JobVolume>,
    /// The job's data key, when it is encrypted.
    pub key: Option<tapeloom_format::DataKey>,
    /// Where wanted entries start.
    pub hints: Hints,
    /// The copy read, and those a bad block is read from.
    pub sources: crate::copy::Sources,
    /// The drive a bad block is read from another copy on, when not the reading
    /// one.
    pub alt_drive: Option<usize>,
}

/// Where the drives of a restore hand what they read: to the restorer that places
/// it here, or, block by block as read from tape, to a sink that takes them
/// elsewhere.
pub(crate) enum Out<'a> {
    Place(&'a Mutex<Restorer>),
    Hand(&'a dyn Handed),
}

/// A [`BlockSink`] (or a [`SetBlockSink`]) the drives share (behind a lock):
/// each block and bad block with the job it is of.
pub(crate) trait Handed: Sync {
    fn block(&self, job: i64, block: &[u8]) -> Result<()>;
    fn bad(&self, job: i64, paths: &[Vec<u8>], why: &str) -> Result<()>;
}

impl Handed for Mutex<&mut dyn BlockSink> {
    fn block(&self, _job: i64, block: &[u8]) -> Result<()> {
        lock(self)?.block(block)
    }

    fn bad(&self, _job: i64, paths: &[Vec<u8>], why: &str) -> Result<()> {
        lock(self)?.bad(paths, why)
    }
}

impl Handed for Mutex<&mut dyn SetBlockSink> {
    fn block(&self, job: i64, block: &[u8]) -> Result<()> {
        lock(self)?.block(job, block)
    }

    fn bad(&self, job: i64, paths: &[Vec<u8>], why: &str) -> Result<()> {
        lock(self)?.bad(job, paths, why)
    }
}

/// What the drives of one restore share.
pub(crate) struct Shared<'a> {
    /// The jobs read: one, or those a set's tree needs.
    pub jobs: &'a [JobCtx],
    /// The largest block of those jobs.
    pub block_size: usize,
    pub opts: &'a RestoreOptions,
    /// Stream names, for the samples (a one-job restore's only).
    pub names: &'a HashMap<u16, String>,
    /// Streams read from a disk stage: their blocks on tape are passed over.
    pub skip: &'a HashSet<u16>,
    /// Where the blocks read go.
    pub out: Out<'a>,
    pub lib: &'a SharedLibrary,
    /// Set when a drive failed: the others stop too.
    pub stop: &'a AtomicBool,
    pub t0: Instant,
}

impl Shared<'_> {
    /// One drive's part: its chains one after another, each run in turn.
    fn read(&self, drive: usize, chains: &Vec<&(Chain, Vec<Run>)>, cat: &Catalog) -> Result<Read> {
        let job = &self.jobs[0];
        let mut reader = self.reader(job, drive);
        let mut read = Reading::new(cat, self, drive);
        let mut streams = Streams::default();
        let whole = (chains.iter()).any(|(_, runs)| runs.iter().any(|r| r.end.0 == u32::MAX));
        if self.plans() && !whole {
            // Each cartridge's runs in the order planned for it.
            let work: Vec<(Chain, Vec<Run>)> = chains.iter().map(|w| (*w).clone()).collect();
            let steps: Vec<merge::Step> = (merge::split(job.id, &work).into_iter())
                .map(|(_, _, step)| step)
                .collect();
            let mut decoders = HashMap::from([(job.id, streams)]);
            let mut current = job.id;
            for cart in steps.chunk_by(|a, b| a.seq == b.seq) {
                let cart: Vec<&merge::Step> = cart.iter().collect();
                let at = (&mut reader, &mut current, &mut decoders);
                cartridge::read(self, &mut read, at, &cart)?;
            }
            streams = decoders.remove(&job.id).unwrap_or_default();
        } else {
            for (chain, runs) in chains {
                reader.follow(chain.order());
                for run in runs {
                    read.run(&mut reader, job, run, &mut streams)?;
                }
            }
        }
        if let Some(rs) = self.placing() {
            let mut rs = lock(rs)?;
            (rs.job, rs.lane) = (job.id, read.lane);
            streams.finish(&mut *rs);
            read.sample(&reader, &streams, Some(&rs.per_stream));
        }
        let chains = chains.iter().map(|(c, _)| c.id).collect();
        Ok(read.done(reader, chains))
    }

    /// A reader of job `job` on drive `drive`.
    pub(crate) fn reader(&self, job: &JobCtx, drive: usize) -> JobReader {
        JobReader::new(
            Arc::clone(self.lib),
            job.vols.clone(),
            job.tag,
            self.block_size,
            Some(drive),
        )
        .with_key(job.key.clone())
        .sealed(matches!(self.out, Out::Hand(_)))
        .with_copies(job.sources.first.clone(), job.sources.others.clone())
        .alt_drive(job.alt_drive)
    }

    /// Whether each cartridge's runs are read in a planned order: when asked, and
    /// when the blocks are decoded here (a decoder elsewhere takes blocks in
    /// block order).
    pub(crate) fn plans(&self) -> bool {
        self.opts.order == ReadOrder::Planned && self.placing().is_some()
    }

    /// The restorer the drives feed, when the blocks are placed here.
    pub(crate) fn placing(&self) -> Option<&Mutex<Restorer>> {
        match self.out {
            Out::Place(rs) => Some(rs),
            Out::Hand(_) => None,
        }
    }

    /// Hands the entries `paths` of a bad block on: failed where placed here, told
    /// to the sink otherwise.
    fn bad(&self, job: i64, paths: &[Vec<u8>], why: &str) -> Result<()> {
        match self.out {
            Out::Place(rs) => {
                let mut rs = lock(rs)?;
                rs.job = job;
                for p in paths {
                    if rs.wanted(p) {
                        rs.fail(p, why.to_string());
                    }
                }
                Ok(())
            }
            Out::Hand(sink) => sink.bad(job, paths, why),
        }
    }
}

/// Locks what the drives share; a drive that panicked holding it fails the others.
pub(crate) fn lock<T: ?Sized>(m: &Mutex<T>) -> Result<std::sync::MutexGuard<'_, T>> {
    m.lock().map_err(|_| Error::Panicked {
        what: "a drive's reader",
    })
}

/// One drive's reading: the runs in turn, the model's bound for the same reads,
/// and the samples.
pub(crate) struct Reading<'a, 'b> {
    cat: &'a Catalog,
    shared: &'a Shared<'b>,
    drive: usize,
    sampler: Sampler,
    /// The model's lower bound for the reads so far: wanted blocks at full speed,
    /// each gap passed the cheaper way.
    bound: f64,
    /// Modeled seconds when the first run's start was reached.
    first_block: Option<f64>,
    /// Whether the drive answered for its travel times.
    modeled: bool,
    /// Gaps passed by reading through.
    read_through: u64,
    /// Modeled seconds the reading plans of its cartridges predicted, when any
    /// was made with a timing model.
    pub(crate) planned: Option<f64>,
    /// Cartridges read in another order than the block order.
    pub(crate) reordered: u64,
    /// The restorer's lane for what this drive decodes: its own, so that two
    /// drives reading parts of one stream at once keep their entries apart.
    pub(crate) lane: usize,
}

impl<'a, 'b> Reading<'a, 'b> {
    pub(crate) fn new(cat: &'a Catalog, shared: &'a Shared<'b>, drive: usize) -> Self {
        Reading {
            cat,
            shared,
            drive,
            sampler: Sampler::new(shared.t0),
            bound: 0.0,
            first_block: None,
            modeled: false,
            read_through: 0,
            planned: None,
            reordered: 0,
            lane: drive,
        }
    }

    /// What the drive read, once its reading is done, with its samples and marks.
    pub(crate) fn done(self, mut reader: JobReader, chains: Vec<u32>) -> Read {
        let drive = self.drive;
        let modeled_seconds = reader.modeled_seconds();
        let out = DriveRead {
            drive,
            chains,
            blocks_read: reader.blocks_read,
            bytes_read_from_tape: reader.bytes_read,
            locates: reader.locates,
            mounts: reader.mounts,
            loads: reader.loads,
            read_through: self.read_through,
            reordered: self.reordered,
            modeled_seconds,
            planned_seconds: self.planned.map(|p| p + reader.fixed_seconds),
            first_block_seconds: self.first_block,
            bound_seconds: (self.modeled || modeled_seconds.is_some())
                .then_some(self.bound + reader.fixed_seconds),
            stats: reader.drive_stats(),
            health: reader.take_health(),
            copy_no: reader.copy_no(),
            from_other_copy: reader.from_other_copy,
            passed_over: reader.passed_over.clone(),
        };
        (out, self.sampler.out, reader.marks)
    }

    /// Reads one run: positions at its start (reading through a short or cheap gap),
    /// then feeds its blocks to the decoders.
    pub(crate) fn run(
        &mut self,
        reader: &mut JobReader,
        job: &JobCtx,
        run: &Run,
        streams: &mut Streams,
    ) -> Result<()> {
        if self.position(reader, run)? {
            self.read_through += 1;
        }
        if self.first_block.is_none() {
            self.first_block = reader.modeled_seconds();
        }
        while let Some(at) = reader.at() {
            if at > run.end {
                break;
            }
            if self.shared.stop.load(Ordering::Relaxed) {
                return Err(Error::Stopped);
            }
            if self.sampler.due() {
                match self.shared.placing() {
                    Some(rs) => {
                        let rs = lock(rs)?;
                        self.sample(reader, streams, Some(&rs.per_stream));
                    }
                    None => self.sample(reader, streams, None),
                }
            }
            if let Some(c) = reader.read_cost(at.1, at.1 + 1) {
                self.bound += c;
            }
            match reader.next()? {
                Got::End => break,
                Got::Bad { seq, lbn, why } => {
                    let barcode = job
                        .vols
                        .iter()
                        .find(|v| v.seq == seq)
                        .map(|v| v.volume.barcode.as_str())
                        .unwrap_or("?");
                    let paths = self.cat.files_in_block(job.id, seq, lbn)?;
                    let why = format!("block {lbn} of {barcode} is bad: {why}");
                    self.shared.bad(job.id, &paths, &why)?;
                }
                Got::Block { header, .. } if self.shared.skip.contains(&header.stream) => {}
                Got::Block { seq, lbn, header } => match self.shared.out {
                    Out::Hand(sink) => sink.block(job.id, reader.raw())?,
                    Out::Place(rs) => {
                        // The block as read is opened: header and plain payload
                        // (an encrypted one's tail is not there to leave off).
                        let clear = tapeloom_format::BlockHeader {
                            compressed: false,
                            encrypted: false,
                            ..header
                        };
                        let payload = clear.payload(reader.block());
                        let hint = job.hints.get(&(seq, lbn, header.stream)).copied();
                        let mut rs = lock(rs)?;
                        (rs.job, rs.lane) = (job.id, self.lane);
                        streams.feed(&header, payload, (seq, lbn), hint, &mut *rs)?;
                    }
                },
            }
        }
        Ok(())
    }

    /// Brings the reader to the start of `run`: mounts its volume, and between two
    /// runs locates or reads through as `--skip-by` and the model say. True when it
    /// read through.
    fn position(&mut self, reader: &mut JobReader, run: &Run) -> Result<bool> {
        if reader.mounted().is_none_or(|(seq, _)| seq != run.start.0) {
            // Mount the volume: the reader stands after its label.
            reader.seek(run.start.0, 1)?;
        }
        let mut passed = false;
        if let Some((seq, lbn)) = reader.mounted() {
            if seq == run.start.0 && lbn != run.start.1 {
                let travel = reader.travel(run.start.1);
                if let Some(t) = travel {
                    self.bound += t.read.min(t.locate);
                    self.modeled = true;
                }
                // A run before the head is reached by locate alone.
                let read = lbn < run.start.1
                    && match self.shared.opts.skip_by {
                        SkipBy::Read => true,
                        SkipBy::Locate => false,
                        SkipBy::Auto => travel.is_some_and(|t| t.read <= t.locate),
                    };
                if read {
                    reader.pass(run.start.1)?;
                }
                passed = read;
            }
        }
        if reader.at() != Some(run.start) {
            reader.seek(run.start.0, run.start.1)?;
        }
        Ok(passed)
    }

    /// Samples the drive and the streams it restored so far (`per_stream`, their
    /// data bytes restored, when they are placed here).
    pub(crate) fn sample(
        &mut self,
        reader: &JobReader,
        streams: &Streams,
        per_stream: Option<&HashMap<u16, u64>>,
    ) {
        let t = self.sampler.round();
        let stats = reader.drive_stats();
        self.sampler
            .drive(t, self.drive, reader.bytes_read, 0.0, stats.as_ref(), None);
        for id in streams.ids() {
            // A set's jobs share stream numbers: their streams are not sampled.
            let b = per_stream.and_then(|p| p.get(&id));
            let (Some(&b), Some(name)) = (b, self.shared.names.get(&id)) else {
                continue;
            };
            self.sampler.stream(t, name, b, 0.0, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tapeloom_catalog::Extent;

    fn vol(seq: u32, chain: u32) -> JobVolume {
        // Blocks 2 to 100.
        super::chains::tests::vol(seq, Some(chain), 99)
    }

    fn row(stream: u16, start: (u32, u64), end: (u32, u64)) -> FileRow {
        FileRow {
            path: format!("s{stream}/{}-{}", start.0, start.1).into_bytes(),
            stream,
            kind: 1,
            mode: 0,
            uid: 0,
            gid: 0,
            size: 0,
            mtime_ns: 0,
            start_seq: start.0,
            start_lbn: start.1,
            start_off: 0,
            end_seq: end.0,
            end_lbn: end.1,
            crc: 0,
            link: vec![],
            ..FileRow::default()
        }
    }

    fn ext(stream: u16, seq: u32, first_lbn: u64, blocks: u64) -> Extent {
        Extent {
            stream,
            seq,
            first_lbn,
            blocks,
            stream_offset: 0,
        }
    }

    type Span = ((u32, u64), (u32, u64));

    fn spans(work: &[(Chain, Vec<Run>)]) -> Vec<(u32, Vec<Span>)> {
        work.iter()
            .map(|(c, runs)| (c.id, runs.iter().map(|r| (r.start, r.end)).collect()))
            .collect()
    }

    #[test]
    fn each_chain_gets_the_runs_of_its_own_volumes() {
        // Drive A wrote volumes 0 and 2 (stream 1), drive B volume 1 (stream 2).
        let vols = [vol(0, 0), vol(1, 1), vol(2, 0)];
        let extents = [ext(1, 0, 2, 99), ext(2, 1, 2, 99), ext(1, 2, 2, 50)];
        let chains = chains::chains(&vols, &extents);
        // The whole job: one run per chain, from its first volume on.
        let (whole, _) = plan_chains(&chains, vec![], true, &extents);
        assert_eq!(
            spans(&whole),
            vec![
                (0, vec![((0, 2), (u32::MAX, u64::MAX))]),
                (1, vec![((1, 2), (u32::MAX, u64::MAX))])
            ]
        );
        // A file of stream 1 spans volumes 0 to 2, one of stream 2 lies on volume 1
        // in between: in sequence order the two would merge into one run across
        // volume 1; by chain they stay apart.
        let rows = vec![row(1, (0, 90), (2, 10)), row(2, (1, 40), (1, 42))];
        let (runs, hints) = plan_chains(&chains, rows, false, &extents);
        assert_eq!(
            spans(&runs),
            vec![
                (0, vec![((0, 90), (0, 100)), ((2, 2), (2, 10))]),
                (1, vec![((1, 40), (1, 42))])
            ]
        );
        assert_eq!(hints.get(&(1, 40, 2)), Some(&0));
        // Only stream 2 wanted: chain 0 has nothing to read and is left out.
        let (only, _) = plan_chains(&chains, vec![row(2, (1, 5), (1, 6))], false, &extents);
        assert_eq!(spans(&only), vec![(1, vec![((1, 5), (1, 6))])]);
    }
}
