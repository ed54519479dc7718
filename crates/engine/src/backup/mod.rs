//! The backup data path.
//!
//! Threads: per stream, the walker and readers and a packer of the tree crate
//! (`tapeloom_tree::pack`) that turn objects into records and blocks; per drive,
//! one writer ([`weave`]) which alone talks to its drive and has its own catalog
//! connection. Each writer interleaves the streams it holds in extents of
//! consecutive blocks (see [`mux`]). When every drive is done, the first writes
//! the index ([`index`]) and the job's end.
//!
//! [`plan`] decides what a job does before anything is read; [`report`] holds what
//! it tells when it ends.

pub(crate) mod changes;
pub(crate) mod estimate;
pub(crate) mod index;
mod moved;
pub(crate) mod mux;
pub(crate) mod plan;
pub(crate) mod received;
mod receiving;
pub(crate) mod remote;
pub(crate) mod report;
pub(crate) mod resume;
pub(crate) use resume::job_start;
pub(crate) mod staged;
pub(crate) mod weave;
pub(crate) use tapeloom_tree::pack::{generated, packer as pack};

pub use changes::{choose_set, BaseRow, BaseTree, Scan, ScanFigures, SetChoice};
pub use plan::{
    BackupOptions, DespoolOrder, DriveSet, Interleave, Via, DEFAULT_BUFFERS, DEFAULT_EXTENT_BYTES,
    DEFAULT_HIGH_WATER,
};
pub use received::{BlockCheck, Checked, Closed, Deletions, Inlet};
pub use receiving::{drop_staged_job, receive_staged, ReceiveStop, Receiving};
pub use report::{BackupReport, Despool, DriveReport, Progress, StreamReport};
pub use resume::{name_unstaged_streams, resume_job, resume_job_on, unfinished_staged_jobs};
pub use tapeloom_tree::pack::generated::install_generator;
pub use tapeloom_tree::pack::generator::{GeneratedFile, GeneratedTree, Generator};
pub(crate) use tapeloom_tree::pack::remote::pack_some;
pub use tapeloom_tree::pack::Only;
pub use tapeloom_tree::pack::{pack_streams, Outgoing, Piece, RemotePlan, RemoteStream};
pub use weave::{DRY_SHARE, HIGH_WATER_WAIT, JUDGE_WINDOW};

use crate::error::{Error, Result};
use crate::home::Home;
use crate::media::random_uuid;
use crate::media::writer::{Tapes, VolumeWriter};
use plan::Pending;
use plan::{plan, resolve_drives, Plan};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tapeloom_catalog::{JobState, Phase, Stream};
use tapeloom_format::{check_block_size, JobEnd, JobStart, JobStatus};
use tapeloom_tree::pack::compress::{Compress, CompressionCounters};
use weave::{JobShared, Weaver, Woven};

/// The pool the job writes to (`default` when it names none), with its rules; an
/// unknown one is [`crate::error::MediaError::UnknownPool`].
fn job_pool(home: &Home, opts: &BackupOptions) -> Result<tapeloom_catalog::Pool> {
    let name = opts
        .pool
        .as_deref()
        .unwrap_or(tapeloom_catalog::DEFAULT_POOL);
    home.catalog.pool(name)?.ok_or_else(|| {
        crate::error::MediaError::UnknownPool {
            pool: name.to_string(),
        }
        .into()
    })
}

/// Backs up `sources` to the home's library.
pub fn backup(
    home: &Home,
    sources: &[PathBuf],
    opts: &BackupOptions,
    progress: Arc<Progress>,
) -> Result<BackupReport> {
    let t0 = Instant::now();
    check_block_size(opts.block_size)?;
    let plan = plan(sources, opts)?;
    if opts.via == Via::Stage && home.catalog.stages()?.is_empty() {
        // Refused before the job is recorded: nothing was begun.
        return Err(crate::error::StageError::NoStages.into());
    }
    // An unknown pool is refused before the job is recorded.
    let pool = job_pool(home, opts)?;
    let set_name = opts.set.clone().unwrap_or_else(|| plan.job_name.clone());
    let (set, mut scan) = changes::choose(home, &set_name, opts.level)?;
    scan.only = opts.only.clone();
    let (job_id, start) = begin_job(home, &plan, opts, (&set, &pool.name))?;
    let lib = home.library()?;
    // The drive's compressor runs at line rate with no host CPU; software compression
    // takes over when a tape drive's own is off. A library without a drive model
    // writes to disk faster than zstd runs on a few cores (see `Compress::Auto`).
    let software = match opts.compress {
        Compress::None => false,
        Compress::Zstd => true,
        Compress::Auto => lib.drives_compress() && !opts.drive_compression,
    };
    let mut tapes = Tapes::new(lib);
    tapes.pool = pool;
    if let Some(master) = &opts.encrypt {
        let crypt = crate::crypt::JobCrypt::new(master, start.job_tag)?;
        home.catalog.set_job_key(
            job_id,
            &crypt.fingerprint().to_string(),
            &crypt.record.encode(),
        )?;
        tapes.crypt = Some(crypt);
    }
    let tapes = Arc::new(tapes);
    let drives = resolve_drives(&opts.drives, tapes.drives()?)?;
    let n_streams = plan.names.len();
    let estimates = Arc::new(estimate::Estimates::new(n_streams));
    let job = JobShared {
        cpu0: crate::cpu::process_seconds(),
        opts,
        tag: start.job_tag,
        job_id,
        // The home's own folder is never backed up (its catalog changes as we go).
        skip: std::fs::metadata(home.dir())
            .map(|m| vec![(m.dev(), m.ino())])
            .unwrap_or_default(),
        pending: Mutex::new(Pending::of(&plan)),
        progress,
        t0,
        stop: AtomicBool::new(false),
        expected: n_streams.div_ceil(drives.len()).clamp(1, 4),
        software,
        counters: Arc::new(CompressionCounters::default()),
        estimates: Arc::clone(&estimates),
        drives: drives.len(),
        index: Mutex::new(index::IndexSpool::new()),
        moved: Mutex::new(Vec::new()),
        feed: None,
        received: None,
        prior: None,
        scan: Arc::new(scan),
        set,
    };
    let mut job = job;
    // Only the automatic concurrency asks how large the streams are, and only to
    // choose among streams: a single stream is taken at once whatever its size, so
    // its source is not walked twice. The despooler's start rule needs the sizes.
    if (opts.concurrency.is_none() && n_streams > 1) || opts.via != Via::Direct {
        let sources = job.pending.lock().map_or_else(
            |_| Vec::new(),
            |q| q.iter().map(|p| (p.id, p.abs.clone())).collect(),
        );
        estimates.start(sources, job.skip.clone());
    }
    // Through the stage, the sources spool while the drives load; `--via auto` needs
    // the drive's speed steps to decide, so it starts once they are mounted.
    let mut spoolers = Vec::new();
    if opts.via == Via::Stage {
        spoolers = start_staging(home, &mut job, &plan, &[])?;
    }
    let mounted = mount_all(
        home,
        &tapes,
        &drives,
        (job_id, &start, None),
        opts,
        n_streams,
    );
    let mut writers = match mounted {
        Ok(w) => w,
        Err(e) => {
            stop_staging(&job, spoolers);
            return Err(e);
        }
    };
    // Data flows from here on: the first cartridge is mounted and positioned.
    let t_data = Instant::now();
    if opts.via == Via::Auto {
        spoolers = start_staging(home, &mut job, &plan, &writers)?;
    }
    run_and_finish(home, &job, &mut writers, spoolers, t_data)
}

/// Weaves until every stream is on tape (stopping the spoolers if a drive fails, and
/// waiting for them), ends the other drives' segments, and ends the job.
fn run_and_finish(
    home: &Home,
    job: &JobShared<'_>,
    writers: &mut [VolumeWriter],
    spoolers: Vec<std::thread::JoinHandle<()>>,
    t_data: Instant,
) -> Result<BackupReport> {
    let woven = weave_all(job, writers);
    if woven.is_err() {
        stop_staging(job, Vec::new());
    }
    for h in spoolers {
        let _ = h.join();
    }
    if let Some(e) = job.feed.as_ref().and_then(|f| f.take_failure()) {
        woven?;
        return Err(e);
    }
    if let Some(e) = job.received.as_ref().and_then(|r| r.take_failure()) {
        woven?;
        return Err(e);
    }
    let woven = woven?;
    let data_seconds = t_data.elapsed().as_secs_f64();
    // The other drives end their segments; their data is on tape before the index.
    for w in writers.iter_mut().skip(1) {
        w.finish()?;
    }
    finish(home, job, writers, woven, data_seconds)
}

/// Starts spooling every stream to the stages when the job goes through them
/// ([`staged::through_stage`] decides); returns the spooling threads.
fn start_staging(
    home: &Home,
    job: &mut JobShared<'_>,
    plan: &Plan,
    writers: &[VolumeWriter],
) -> Result<Vec<std::thread::JoinHandle<()>>> {
    let ids: Vec<u16> = plan.streams().iter().map(|s| s.id).collect();
    let Some(set) = staged::through_stage(home, job.opts, ids.len(), writers)? else {
        return Ok(Vec::new());
    };
    // A chunk takes at most a quarter of the largest stage, so that a small stage
    // still holds several and the despooler can free one while another fills.
    let largest = set.stages().iter().map(|s| s.limit).max().unwrap_or(0);
    let floor = (job.opts.block_size + 4 + crate::stage::CHUNK_HEADER_LEN) as u64;
    let chunk = job.opts.chunk_bytes.min(largest / 4).max(floor);
    let feed = Arc::new(staged::Feed::new(
        set,
        (chunk, job.opts.keep_staged),
        &ids,
        job.t0,
    ));
    job.feed = Some(Arc::clone(&feed));
    let streams: Vec<Pending> = job
        .pending
        .lock()
        .map_err(|_| Error::Panicked {
            what: "a drive thread holding the stream queue",
        })?
        .iter()
        .cloned()
        .collect();
    let ids = (job.job_id, job.opts.limit_rate);
    staged::start_spoolers(home, &job.packer_setup(), streams, ids, &feed)
}

/// Stops the job's spooling (when it has any) and waits for its threads.
fn stop_staging(job: &JobShared<'_>, spoolers: Vec<std::thread::JoinHandle<()>>) {
    if let Some(feed) = &job.feed {
        feed.cancel();
    }
    for h in spoolers {
        let _ = h.join();
    }
}

/// Records the job in the catalog and makes its start record.
fn begin_job(
    home: &Home,
    plan: &Plan,
    opts: &BackupOptions,
    (set, pool): (&changes::SetChoice, &str),
) -> Result<(i64, JobStart)> {
    let tag = opts
        .job_tag
        .unwrap_or_else(|| u64::from_le_bytes(random_uuid()[..8].try_into().unwrap_or([7; 8])));
    let started = crate::clock::now()?;
    let streams = plan.streams();
    let job_id = home.catalog.begin_job(
        tag,
        &plan.job_name,
        started.as_nanos(),
        opts.block_size as u32,
        &streams
            .iter()
            .map(|s| Stream {
                stream: s.id,
                name: s.name.clone(),
                source: s.source.clone(),
            })
            .collect::<Vec<_>>(),
    )?;
    let base = set.base.as_ref();
    home.catalog
        .set_job_set(job_id, &set.set, set.level, base.map(|b| b.id))?;
    if !opts.client.is_empty() {
        home.catalog.set_job_client(job_id, &opts.client)?;
    }
    let host = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default();
    let start = JobStart {
        job_tag: tag,
        started,
        block_size: opts.block_size as u32,
        volume_seq: 0,
        name: plan.job_name.clone(),
        host,
        streams,
        set: Some(tapeloom_format::SetInfo {
            set: set.set.clone(),
            level: set.level,
            base: base.map_or(0, |b| b.tag),
            pool: pool.to_string(),
        }),
        client: opts.client.clone(),
    };
    Ok((job_id, start))
}

/// One writer per drive, each with its own catalog connection. The first carries
/// the job start; every drive that will get a stream mounts its cartridge now, all
/// at once (a load takes a drive a quarter of a minute, and a drive still loading
/// when the data starts would get no streams).
fn mount_all(
    home: &Home,
    tapes: &Arc<Tapes>,
    drives: &[Option<usize>],
    (job_id, start, chain): (i64, &JobStart, Option<u32>),
    opts: &BackupOptions,
    n_streams: usize,
) -> Result<Vec<VolumeWriter>> {
    let mut conns = Vec::new();
    for _ in drives {
        conns.push(home.connect()?);
    }
    let used = n_streams.clamp(1, drives.len());
    let begun: Vec<Result<VolumeWriter>> = std::thread::scope(|sc| {
        let hs: Vec<_> = drives
            .iter()
            .zip(conns)
            .enumerate()
            .map(|(i, (d, cat))| {
                let (tapes, start) = (Arc::clone(tapes), start.clone());
                let compression = opts.drive_compression;
                sc.spawn(move || {
                    let mut w = VolumeWriter::begin(
                        cat,
                        tapes,
                        *d,
                        job_id,
                        start,
                        chain.is_none() && i == 0,
                        compression,
                    )?;
                    w.chain = chain;
                    if i < used {
                        w.prepare()?;
                    }
                    Ok(w)
                })
            })
            .collect();
        join_all(hs, "a drive's mount")
    });
    let mut writers = Vec::new();
    for w in begun {
        let mut w = w?;
        w.segment_bytes = opts.segment_bytes;
        writers.push(w);
    }
    Ok(writers)
}

/// Runs every drive's writer on a thread of its own until the streams are done. A
/// drive that fails stops the others; its error is the job's.
fn weave_all(job: &JobShared<'_>, writers: &mut [VolumeWriter]) -> Result<Vec<Woven>> {
    let results: Vec<Result<Woven>> = std::thread::scope(|sc| {
        let handles: Vec<_> = writers
            .iter_mut()
            .enumerate()
            .map(|(slot, w)| {
                sc.spawn(move || {
                    let r = Weaver::new(job, w, slot).run();
                    if r.is_err() {
                        job.stop.store(true, Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        join_all(handles, "a drive's writer")
    });
    let mut woven = Vec::new();
    let mut first_err: Option<Error> = None;
    for r in results {
        match r {
            Ok(x) => woven.push(x),
            // The first error is the cause; the drives it stopped say only that.
            Err(e) => match &first_err {
                None => first_err = Some(e),
                Some(Error::Stopped) if !matches!(e, Error::Stopped) => first_err = Some(e),
                Some(_) => {}
            },
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(woven),
    }
}

/// The job's volumes so far, in sequence order.
fn job_volumes(
    job: &JobShared<'_>,
    writers: &[VolumeWriter],
) -> Vec<(u32, tapeloom_catalog::Volume)> {
    let mut v: Vec<(u32, tapeloom_catalog::Volume)> = writers
        .iter()
        .flat_map(|w| w.volumes.iter().cloned())
        .chain(job.prior.iter().flat_map(|p| p.volumes.iter().cloned()))
        .collect();
    v.sort_by_key(|(seq, _)| *seq);
    v
}

/// Writes the index and the job's end, records the job as done and gathers what
/// every drive did.
fn finish(
    home: &Home,
    job: &JobShared<'_>,
    writers: &mut [VolumeWriter],
    woven: Vec<Woven>,
    data_seconds: f64,
) -> Result<BackupReport> {
    let cat = &home.catalog;
    let job_id = job.job_id;
    let Gathered {
        files,
        bytes,
        stored,
        errors,
        mut per_stream,
        samples,
        mut drive_reports,
    } = gather(job, woven);
    let t_index = Instant::now();
    // The data is on tape before the index that points at it.
    let moved = moved::follow_all(cat, job_id, &job.moved, writers)?;
    let n_extents = cat.extents(job_id)?.len() as u64;
    let (index_start, deleted) = write_index(cat, job, &mut writers[0], &moved)?;
    let all_volumes = job_volumes(job, writers);
    let ended = crate::clock::now()?;
    let job_end = JobEnd {
        job_tag: job.tag,
        ended,
        status: if errors.is_empty() {
            JobStatus::Ok
        } else {
            JobStatus::Partial
        },
        entries: files,
        bytes: stored,
        index_start,
        volumes: all_volumes.iter().map(|(_, v)| v.uuid).collect(),
    };
    writers[0].end(&job_end.encode())?;
    // A deferred write error in the last flush puts the job's end on another
    // cartridge (JobEnd's list, written before, lacks it; FORMAT.md 5.7).
    let all_volumes = job_volumes(job, writers);
    writers[0].mark(Phase::Index, t_index, Instant::now());
    if let Some(feed) = &job.feed {
        // Every block is on tape and flushed, every entry recorded: the stages are
        // free of this job.
        feed.release_all(cat)?;
    }
    let marked = writers.iter().flat_map(|w| w.marks.iter());
    cat.set_marks(job_id, "backup", &crate::sampler::marks(job.t0, marked))?;
    let status = JobState::from(job_end.status);
    let seconds = job.t0.elapsed().as_secs_f64();
    cat.add_samples(job_id, "backup", &samples)?;
    cat.finish_job(job_id, status, files, bytes, seconds, ended.as_nanos())?;
    for (d, w) in drive_reports.iter_mut().zip(writers.iter()) {
        fill_drive_report(d, w);
    }
    crate::media::save_health(
        cat,
        job_id,
        "backup",
        drive_reports
            .iter()
            .map(|d| (d.drive.unwrap_or(0), d.health.as_slice())),
    )?;
    per_stream.sort_by_key(|(id, _)| *id);
    if let Some(feed) = &job.feed {
        for (id, r) in per_stream.iter_mut() {
            r.spool = feed.spool_figures(*id);
        }
    }
    let stage_waits = job.feed.as_ref().map_or((0, 0.0), |f| {
        let w = f.set.waits();
        (w.count, w.total.as_secs_f64())
    });
    let c = &job.counters;
    let cpu_seconds = (crate::cpu::process_seconds())
        .zip(job.cpu0)
        .map(|(now, then)| (now - then).max(0.0));
    Ok(BackupReport {
        job_id,
        cpu_seconds,
        status,
        files,
        bytes,
        seconds,
        data_seconds,
        volumes: all_volumes.iter().map(|(_, v)| v.barcode.clone()).collect(),
        errors,
        blocks: drive_reports.iter().map(|d| d.blocks).sum(),
        streams: per_stream.into_iter().map(|(_, r)| r).collect(),
        max_concurrency: drive_reports.iter().map(|d| d.max_concurrency).sum(),
        extents: n_extents,
        filemarks: drive_reports.iter().map(|d| d.filemarks).sum(),
        drives: drive_reports,
        software_compression: job.software,
        compression_raw_bytes: c.raw.load(Ordering::Relaxed),
        compression_stored_bytes: c.stored.load(Ordering::Relaxed),
        compressed_blocks: (
            c.compressed_blocks.load(Ordering::Relaxed),
            c.raw_blocks.load(Ordering::Relaxed),
        ),
        staged: job.feed.is_some(),
        despool: job.feed.is_some().then_some(job.opts.despool),
        stage_waits,
        set: job.set.clone(),
        unchanged: job.scan.counts.unchanged.load(Ordering::Relaxed),
        meta_only: job.scan.counts.meta_only.load(Ordering::Relaxed),
        deleted,
        source_bytes_read: job.scan.counts.read_bytes.load(Ordering::Relaxed),
        source_files_opened: job.scan.counts.opened.load(Ordering::Relaxed),
    })
}

/// Writes the job's index with the first drive, the paths it found deleted since
/// its base among the entries (and in the catalog, so no restore of this job's
/// tree brings them back); returns where the index starts and how many paths were
/// deleted.
fn write_index(
    cat: &tapeloom_catalog::Catalog,
    job: &JobShared<'_>,
    w: &mut VolumeWriter,
    moved: &[crate::media::writer::Moved],
) -> Result<(tapeloom_format::Pos, u64)> {
    let mut spool = std::mem::replace(
        &mut *job.index.lock().map_err(|_| Error::Panicked {
            what: "a drive thread holding the index",
        })?,
        index::IndexSpool::new(),
    );
    // A job packed elsewhere: its packing side found the deletions.
    let deleted = match &job.received {
        Some(r) if job.set.base.is_some() => r.deletions()?,
        _ => job.scan.deletions(),
    };
    spool.add_deleted(&deleted)?;
    cat.add_deletions(job.job_id, &deleted)?;
    Ok((spool.write(w, moved)?, deleted.len() as u64))
}

/// What every drive's writer did, added up (with what a resumed job had done).
struct Gathered {
    files: u64,
    bytes: u64,
    stored: u64,
    errors: Vec<(String, String)>,
    per_stream: Vec<(u16, StreamReport)>,
    samples: Vec<tapeloom_catalog::Sample>,
    drive_reports: Vec<DriveReport>,
}

fn gather(job: &JobShared<'_>, woven: Vec<Woven>) -> Gathered {
    let (mut files, mut bytes, mut stored, mut entries) = (0u64, 0u64, 0u64, 0u64);
    let mut errors = Vec::new();
    let mut per_stream = Vec::new();
    let mut samples = Vec::new();
    let mut drive_reports = Vec::new();
    if let Some(feed) = &job.feed {
        errors.extend(feed.take_errors());
    }
    for x in woven {
        files += x.report.files;
        bytes += x.report.bytes;
        stored += x.stored;
        entries += x.entries;
        errors.extend(x.errors);
        per_stream.extend(x.streams);
        samples.extend(x.samples);
        drive_reports.push(x.report);
    }
    // Every entry the packers sent was recorded as it landed.
    debug_assert_eq!(entries, files);
    if let Some(p) = &job.prior {
        (files, bytes, stored) = (files + p.files, bytes + p.bytes, stored + p.stored);
        errors.extend(p.errors.iter().cloned());
    }
    Gathered {
        files,
        bytes,
        stored,
        errors,
        per_stream,
        samples,
        drive_reports,
    }
}

/// What the drive's writer knows at the end: blocks, filemarks, cartridges, health.
fn fill_drive_report(d: &mut DriveReport, w: &VolumeWriter) {
    d.blocks = w.blocks;
    d.filemarks = w.filemarks;
    d.volumes = w.volumes.iter().map(|(_, v)| v.barcode.clone()).collect();
    d.drive_stats = w.drive_stats();
    d.health = w.health.clone();
    d.drive_compressed = w.drive_compressed;
}

/// Waits for one scoped thread per drive; a panic becomes that drive's error.
fn join_all<T>(
    hs: Vec<std::thread::ScopedJoinHandle<'_, Result<T>>>,
    what: &'static str,
) -> Vec<Result<T>> {
    hs.into_iter()
        .map(|h| h.join().unwrap_or(Err(Error::Panicked { what })))
        .collect()
}
