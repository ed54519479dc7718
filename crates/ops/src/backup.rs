//! A backup and the rules of the pool it writes to.
//!
//! [`run`] is the whole operation: the pool's key ([`prepare`]), the engine's
//! backup, and the copy the pool asks for ([`copy_due`], then the engine's copy).
//! A server runs the copy as a queued job of its own, on drives it waits for;
//! it calls [`prepare`] and [`copy_due`] around its own run of the engine.

use crate::error::Result;
use crate::keys::{pool_key, KeySource};
use std::path::PathBuf;
use std::sync::Arc;
use tapeloom_catalog::{Catalog, JobState, DEFAULT_POOL};
use tapeloom_engine::{BackupOptions, BackupReport, CopyOptions, CopyReport, Home, Progress};

/// What a backup did, with the copy its pool asked for.
#[derive(Debug)]
pub struct BackedUp {
    /// The job as the engine wrote it.
    pub report: BackupReport,
    /// The copy the pool asks for: none when it asks for none (or the job did not
    /// end ok or partial); else the copy made, or why it could not be.
    pub copy: Option<std::result::Result<CopyReport, tapeloom_engine::Error>>,
}

/// Applies the pool's rules to a backup before it starts: a job that names no key
/// of its own (`opts.encrypt`) is encrypted with its pool's key, from `keys`. The
/// home then holds that key too, so that a job left on the stages with it goes on.
pub fn prepare(home: &mut Home, opts: &mut BackupOptions, keys: &dyn KeySource) -> Result<()> {
    if opts.encrypt.is_none() {
        opts.encrypt = pool_key(&home.catalog, opts.pool.as_deref(), keys)?;
    }
    home.keys.extend(opts.encrypt.clone());
    Ok(())
}

/// The pool job `job` is in: the pool of its first cartridge; the default pool
/// for a job on no cartridge yet.
pub fn job_pool(cat: &Catalog, job: i64) -> Result<String> {
    let vols = cat.job_volumes(job)?;
    Ok(match vols.first() {
        Some(v) => v.volume.pool.clone(),
        None => DEFAULT_POOL.to_string(),
    })
}

/// The pool job `job` must now be copied to: its pool's copy pool, when the job
/// ended (ok or partial) and its pool names one.
pub fn copy_due(cat: &Catalog, job: i64) -> Result<Option<String>> {
    let ended = cat.job(job)?.map(|j| j.status);
    if !matches!(ended, Some(JobState::Ok | JobState::Partial)) {
        return Ok(None);
    }
    Ok(cat.pool_copy(&job_pool(cat, job)?)?)
}

/// Copies job `job` to `to_pool` on the drives `read` and `write` (else as the
/// engine chooses), as a pool's copy rule asks.
pub fn copy(
    home: &Home,
    job: i64,
    to_pool: &str,
    (read, write): (Option<usize>, Option<usize>),
) -> std::result::Result<CopyReport, tapeloom_engine::Error> {
    let opts = CopyOptions {
        to_pool: to_pool.to_string(),
        read_drive: read,
        write_drive: write,
        ..Default::default()
    };
    tapeloom_engine::copy_job(home, job, &opts)
}

/// A backup of `sources` with its pool's rules: encrypted with the pool's key
/// unless `opts` names a key, and copied to the pool's copy pool once it ends.
/// A copy that fails leaves the job whole; [`BackedUp::copy`] says why.
pub fn run(
    home: &mut Home,
    sources: &[PathBuf],
    mut opts: BackupOptions,
    keys: &dyn KeySource,
    progress: Arc<Progress>,
) -> Result<BackedUp> {
    prepare(home, &mut opts, keys)?;
    let report = tapeloom_engine::backup(home, sources, &opts, progress)?;
    let copy = match copy_due(&home.catalog, report.job_id)? {
        Some(to_pool) => Some(copy(home, report.job_id, &to_pool, (None, None))),
        None => None,
    };
    Ok(BackedUp { report, copy })
}
