//! Finishing backups whose process died with data on the disk stages.
//!
//! A job killed while it spooled or despooled leaves chunks recorded as spooled in
//! the catalog, rows for the entries that reached tape, and a tape segment without an
//! end. Resuming mounts a cartridge of the pool, begins a new segment of the same job
//! with a continuation record (as a job spanning cartridges does), despools what is
//! left of each stream from its first staged chunk (entries with rows already are
//! not written twice into the catalog), then writes the job's whole index (the rows
//! from before and the new ones) and its end. A stream cut short while spooling
//! ends with what was staged of it, and the job is `partial`, saying so.

use super::index::IndexSpool;
use super::plan::{BackupOptions, DriveSet, Pending, Prior, Via};
use super::staged::{Feed, STREAM_CUT};
use super::weave::JobShared;
use super::{estimate, mount_all, stop_staging, BackupReport, Progress};
use crate::error::Result;
use crate::home::Home;
use crate::media::writer::Tapes;
use crate::stage::StageSet;
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tapeloom_catalog::{ChunkFilter, ChunkState, JobState, StagedChunk};
use tapeloom_format::{JobStart, StreamInfo, Timestamp};

/// Jobs through the stages that ended without finishing: queued (or failed, as
/// an earlier tapeloom marked them), with chunks recorded (spooled ones left to
/// despool, or all on tape and the job's end not).
pub fn unfinished_staged_jobs(home: &Home) -> Result<Vec<i64>> {
    let jobs = home.catalog.jobs_with_chunks()?;
    let mut out = Vec::new();
    for id in jobs {
        match home.catalog.job(id)? {
            Some(j) if matches!(j.status, JobState::Queued | JobState::Failed) => out.push(id),
            _ => {}
        }
    }
    Ok(out)
}

/// Despools what job `job_id` left on the stages and ends it, on the first drive.
pub fn resume_job(home: &Home, job_id: i64, progress: Arc<Progress>) -> Result<BackupReport> {
    resume_job_on(home, job_id, (DriveSet::Count(1), None), progress)
}

/// Despools what job `job_id` left on the stages and ends it, on `drives`; with
/// `stages`, through that set of the stages (a server's, which its running jobs
/// share) rather than one of its own.
pub fn resume_job_on(
    home: &Home,
    job_id: i64,
    on: (DriveSet, Option<&StageSet>),
    progress: Arc<Progress>,
) -> Result<BackupReport> {
    // Why the job stopped (its process did) is no longer so: it runs again.
    home.catalog.set_job_running(job_id)?;
    let r = resume_running(home, job_id, on, progress);
    if let Err(e) = &r {
        // Its data is still on the stages: it waits there to be resumed again.
        let why = format!("its resume stopped: {e}");
        if let Err(e2) = home.catalog.requeue_job(job_id, &why) {
            tracing::warn!(job = job_id, "put the job back to wait on its stage: {e2}");
        }
    }
    r
}

/// [`resume_job_on`] of a job marked running.
fn resume_running(
    home: &Home,
    job_id: i64,
    (drives, stages): (DriveSet, Option<&StageSet>),
    progress: Arc<Progress>,
) -> Result<BackupReport> {
    let t0 = Instant::now();
    let cat = &home.catalog;
    let job = cat
        .job(job_id)?
        .ok_or(crate::error::JobError::NoJob(job_id))?;
    let mut chunks: Vec<StagedChunk> = cat.staged_chunks(&ChunkFilter {
        job: Some(job_id),
        state: Some(ChunkState::Spooled),
        ..ChunkFilter::default()
    })?;
    chunks.sort_by_key(|c| (c.stream, c.seq));
    let names: HashMap<u16, String> = cat
        .streams(job_id)?
        .into_iter()
        .map(|s| (s.stream, s.name))
        .collect();
    let rows = cat.files(job_id, None)?;
    name_what_was_cut(home, job_id, &chunks, &names, &rows)?;
    let prior = prior(home, job_id, &rows)?;
    let extents = cat.extents(job_id)?;
    end_open_segments(home, job_id, &extents)?;
    let mut on_tape: HashMap<u16, Vec<tapeloom_catalog::Extent>> = HashMap::new();
    for e in extents {
        on_tape.entry(e.stream).or_default().push(e);
    }
    // An encrypted job goes on with its own data key (the master key must be given).
    let crypt = crate::crypt::for_job(&home.keys, &job)?;
    let tail = if crypt.is_some() {
        tapeloom_format::CRYPT_TAIL_LEN
    } else {
        0
    };
    let before = super::staged::Resume {
        known: rows.iter().map(|r| r.path.clone()).collect(),
        from: HashMap::new(),
        on_tape,
        payload: (job.block_size as usize).saturating_sub(tapeloom_format::BLOCK_HEADER_LEN + tail)
            as u64,
    };
    let set = match stages {
        Some(s) => s.for_job(),
        None => StageSet::open(cat)?.0,
    };
    let start = job_start(home, &job)?;
    let pending = pending_streams(&chunks, &names);
    let n_streams = pending.len();
    let opts = BackupOptions {
        block_size: job.block_size as usize,
        via: Via::Stage,
        drives,
        ..BackupOptions::default()
    };
    let feed = Arc::new(Feed::resuming(set, chunks, before, t0));
    let mut index = IndexSpool::new();
    index.add(rows)?;
    // The streams go on in the chain of cartridges they were in (one drive's).
    let chain = cat
        .job_volumes(job_id)?
        .iter()
        .max_by_key(|jv| jv.seq)
        .and_then(|jv| jv.chain)
        .unwrap_or(0);
    let tapes = Arc::new(tapes_after(home, &prior, crypt)?);
    let drives = super::plan::resolve_drives(&opts.drives, tapes.drives()?)?;
    let shared = JobShared {
        cpu0: crate::cpu::process_seconds(),
        opts: &opts,
        tag: job.tag,
        job_id,
        skip: Vec::new(),
        pending: Mutex::new(pending),
        progress,
        t0,
        stop: AtomicBool::new(false),
        expected: n_streams.div_ceil(drives.len()).clamp(1, 4),
        software: false,
        counters: Arc::default(),
        estimates: Arc::new(estimate::Estimates::new(n_streams)),
        drives: drives.len(),
        index: Mutex::new(index),
        moved: Mutex::new(Vec::new()),
        feed: Some(feed),
        received: None,
        prior: Some(prior),
        // Its sources were read before it stopped: what the walkers found deleted
        // then is not known now.
        scan: Arc::default(),
        set: set_of(cat, &job)?,
    };
    let mounted = mount_all(
        home,
        &tapes,
        &drives,
        (job_id, &start, Some(chain)),
        &opts,
        n_streams,
    );
    let mut writers = match mounted {
        Ok(w) => w,
        Err(e) => {
            stop_staging(&shared, Vec::new());
            return Err(e);
        }
    };
    super::run_and_finish(home, &shared, &mut writers, Vec::new(), Instant::now())
}

/// Names each stream of job `job_id` among its errors as cut: the job was left
/// failed by a process that stopped before any of its chunks was staged.
pub fn name_unstaged_streams(home: &Home, job_id: i64) -> Result<()> {
    let names: HashMap<u16, String> = (home.catalog.streams(job_id)?.into_iter())
        .map(|s| (s.stream, s.name))
        .collect();
    let rows = home.catalog.files(job_id, None)?;
    name_what_was_cut(home, job_id, &[], &names, &rows)
}

/// The cartridges a resumed job goes on to: after the volumes it wrote before,
/// in the pool they were labelled into, encrypted with `crypt` when it is.
fn tapes_after(home: &Home, prior: &Prior, crypt: Option<crate::crypt::JobCrypt>) -> Result<Tapes> {
    let next_seq = prior.volumes.iter().map(|(s, _)| s + 1).max().unwrap_or(0);
    let mut tapes = Tapes::continuing(home.library()?, next_seq);
    tapes.crypt = crypt;
    if let Some((_, v)) = prior.volumes.first() {
        tapes.pool = home
            .catalog
            .pool(&v.pool)?
            .unwrap_or_else(|| tapeloom_catalog::Pool {
                name: v.pool.clone(),
                ..tapeloom_catalog::Pool::default_pool()
            });
    }
    Ok(tapes)
}

/// The set, level and base a resumed job was begun with.
fn set_of(
    cat: &tapeloom_catalog::Catalog,
    job: &tapeloom_catalog::Job,
) -> Result<crate::backup::changes::SetChoice> {
    Ok(crate::backup::changes::SetChoice {
        set: job.set.clone(),
        level: job.level,
        base: match job.base {
            Some(b) => cat.job(b)?,
            None => None,
        },
        promoted: None,
    })
}

/// Records as the job's errors what it cannot finish from the stages: each stream
/// cut short while spooling with nothing of it left on them (one that still has
/// chunks there is named by its despooler), and each entry whose start a full stage
/// gave back to make room before the entry ended, whose row the job never stored.
fn name_what_was_cut(
    home: &Home,
    job_id: i64,
    spooled: &[StagedChunk],
    names: &HashMap<u16, String>,
    rows: &[tapeloom_catalog::FileRow],
) -> Result<()> {
    let cat = &home.catalog;
    let whole = cat.streams_spooled_whole(job_id)?;
    let said: std::collections::HashSet<Vec<u8>> =
        cat.errors(job_id)?.into_iter().map(|(p, _)| p).collect();
    let mut ids: Vec<&u16> = names.keys().collect();
    ids.sort();
    for id in ids {
        if whole.contains(id) || spooled.iter().any(|c| c.stream == *id) {
            continue;
        }
        let path = format!("<stream {}>", names[id]).into_bytes();
        if !said.contains(&path) {
            cat.add_error(job_id, &path, STREAM_CUT)?;
        }
    }
    let known: std::collections::HashSet<&[u8]> = rows.iter().map(|r| r.path.as_slice()).collect();
    for (_, path) in cat.stage_cuts(job_id)? {
        if !known.contains(path.as_slice()) && !said.contains(&path) {
            cat.add_error(job_id, &path, ENTRY_CUT)?;
        }
    }
    Ok(())
}

/// Why an entry whose start left a full stage before it ended is not in its job.
const ENTRY_CUT: &str = "the stage was full, so the start of this file went to tape before its end was staged, and the backup stopped before it ended: it is not in the job";

/// The job's start record as its continuation records repeat it.
pub(crate) fn job_start(home: &Home, job: &tapeloom_catalog::Job) -> Result<JobStart> {
    let streams = home.catalog.streams(job.id)?;
    let pool = home
        .catalog
        .job_volumes(job.id)?
        .first()
        .map(|v| v.volume.pool.clone())
        .unwrap_or_default();
    let base = match job.base {
        Some(b) => home.catalog.job(b)?.map_or(0, |b| b.tag),
        None => 0,
    };
    Ok(JobStart {
        job_tag: job.tag,
        started: Timestamp::from_nanos(job.started_ns),
        block_size: job.block_size,
        volume_seq: 0,
        name: job.name.clone(),
        host: nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default(),
        streams: streams
            .iter()
            .map(|s| StreamInfo {
                id: s.stream,
                name: s.name.clone(),
                source: s.source.clone(),
            })
            .collect(),
        // A job whose base was forgotten while it waited on the stages cannot name
        // it: its later volumes say nothing of its set (its first one does).
        set: (job.level == tapeloom_format::Level::Full || base != 0).then(|| {
            tapeloom_format::SetInfo {
                set: job.set.clone(),
                level: job.level,
                base,
                pool,
            }
        }),
        client: job.client.clone().unwrap_or_default(),
    })
}

/// The streams with chunks left, in order, for the drives to take.
fn pending_streams(chunks: &[StagedChunk], names: &HashMap<u16, String>) -> VecDeque<Pending> {
    let mut ids: Vec<u16> = chunks.iter().map(|c| c.stream).collect();
    ids.dedup();
    ids.into_iter()
        .map(|id| Pending {
            id,
            name: names.get(&id).cloned().unwrap_or_else(|| id.to_string()),
            abs: PathBuf::new(),
            root: Vec::new(),
        })
        .collect()
}

/// Ends the segments the job's process left open at their last block the catalog
/// knows (in a stored extent): blocks written after it are not the job's, as a
/// reader of the whole job must not take them (they are written again).
fn end_open_segments(home: &Home, job_id: i64, extents: &[tapeloom_catalog::Extent]) -> Result<()> {
    let cat = &home.catalog;
    for jv in cat.job_volumes(job_id)? {
        if jv.last_lbn.is_some() {
            continue;
        }
        let last = extents
            .iter()
            .filter(|e| e.seq == jv.seq && e.blocks > 0)
            .map(|e| e.first_lbn + e.blocks - 1)
            .max()
            .unwrap_or(jv.first_lbn)
            .max(jv.first_lbn);
        cat.end_job_volume(job_id, jv.seq, last)?;
    }
    Ok(())
}

/// What the job had done before it stopped, from the catalog.
fn prior(home: &Home, job_id: i64, rows: &[tapeloom_catalog::FileRow]) -> Result<Prior> {
    let cat = &home.catalog;
    let volumes = cat
        .job_volumes(job_id)?
        .into_iter()
        .map(|jv| (jv.seq, jv.volume))
        .collect();
    let bytes = rows.iter().filter(|r| r.has_data()).map(|r| r.size).sum();
    let errors = cat
        .errors(job_id)?
        .into_iter()
        .map(|(p, why)| (crate::display_path(&p), why))
        .collect();
    Ok(Prior {
        files: rows.len() as u64,
        bytes,
        stored: bytes,
        volumes,
        errors,
    })
}
