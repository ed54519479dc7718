//! `hsm migrate`: chosen files of a managed folder go to tape as one job of the
//! folder's pool (through the disk stage when the home has one) with the pool's
//! rules (its key, its copy pool: `tapeloom_ops::backup`), the job is read back,
//! and each file that did not change while it was read is marked premigrated:
//! its data is on disk and on tape, in every copy its pool asks for.

use crate::error::{HsmError, Result};
use crate::{
    copy_of, files_under, root_of, root_path, roots, targets, Facts, Managed, Stamp, State,
};
use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tapeloom_engine::{Home, Progress};
use tapeloom_ops::hsm::HsmRoot;
use tapeloom_ops::KeySource;

/// Which files a migration takes.
#[derive(Debug, Clone, Default)]
pub struct MigrateOptions {
    /// Only files last modified at least this long ago.
    pub older_than: Option<Duration>,
    /// Only files of at least this many bytes.
    pub min_size: u64,
    /// Block size of the jobs written; a backup's default when none.
    pub block_size: Option<usize>,
}

/// What a migration did.
#[derive(Debug, Clone, Default)]
pub struct Migrated {
    /// The jobs written, one per managed folder that had files to migrate.
    pub jobs: Vec<i64>,
    /// Files now premigrated.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Files changed while they were read: left as they were (resident or dirty).
    pub changed: Vec<PathBuf>,
    /// Files that could not be read or looked at, with why.
    pub skipped: Vec<(PathBuf, String)>,
}

/// Migrates the resident and dirty files under `paths` (every managed folder
/// when none) that `opts` chooses.
pub fn migrate(
    home: &mut Home,
    paths: &[PathBuf],
    opts: &MigrateOptions,
    keys: &dyn KeySource,
) -> Result<Migrated> {
    let roots = roots(home)?;
    let mut out = Migrated::default();
    let found = {
        let mut skipped = |p: &std::path::Path, why: String| {
            out.skipped.push((p.to_path_buf(), why));
        };
        files_under(&targets(&roots, paths)?, &mut skipped)
    };
    let now = crate::now_ns();
    let mut by_root: BTreeMap<usize, Vec<Managed>> = BTreeMap::new();
    for m in found {
        let wanted = matches!(m.state(), State::Resident | State::Dirty)
            && m.facts.size >= opts.min_size
            && (opts.older_than).is_none_or(|d| now - m.facts.mtime_ns >= d.as_nanos() as i64);
        if !wanted {
            continue;
        }
        if let Some((r, _)) = root_of(&roots, &m.path) {
            let i = roots.iter().position(|x| x.path == r.path).unwrap_or(0);
            by_root.entry(i).or_default().push(m);
        }
    }
    for (i, files) in by_root {
        migrate_root(home, (&roots[i], opts.block_size), (files, keys), &mut out)?;
    }
    Ok(out)
}

/// Writes `files` of managed folder `root` as one job, reads it back, and marks
/// each unchanged file premigrated.
fn migrate_root(
    home: &mut Home,
    (root, block_size): (&HsmRoot, Option<usize>),
    (files, keys): (Vec<Managed>, &dyn KeySource),
    out: &mut Migrated,
) -> Result<()> {
    let dir = root_path(root);
    let paths = files.iter().map(|m| m.path.clone());
    let opts = tapeloom_ops::hsm::migration(home, root, paths, block_size)?;
    let done = tapeloom_ops::backup::run(
        home,
        std::slice::from_ref(&dir),
        opts,
        keys,
        Arc::new(Progress::default()),
    )?;
    let report = done.report;
    let job = report.job_id;
    out.jobs.push(job);
    if !tapeloom_ops::hsm::job_ended(&report) {
        return Err(HsmError::JobFailed {
            job,
            status: report.status.as_str().to_string(),
        });
    }
    if !tapeloom_engine::verify(home, job, None)?.ok {
        return Err(HsmError::NotVerified { job });
    }
    // A file is on tape only once every copy its pool asks for is.
    if let Some(Err(e)) = done.copy {
        let pool = tapeloom_ops::hsm::copy_pool(home, job)?;
        return Err(HsmError::NotCopied {
            job,
            pool: pool.unwrap_or_default(),
            source: Box::new(e),
        });
    }
    for m in files {
        let Ok(rel) = m.path.strip_prefix(&dir) else {
            continue;
        };
        let entry = rel.as_os_str().as_bytes().to_vec();
        let Some(row) = tapeloom_ops::hsm::stored(home, job, &entry)? else {
            // Not stored: the job could not read it (its error is in the job).
            continue;
        };
        let now = Facts::read(&m.path)?;
        // The file as it was read: unchanged since, or it is left as it was.
        let same = now.size == row.size
            && now.mtime_ns == row.mtime_ns
            && (row.ctime_ns == 0 || now.ctime_ns == row.ctime_ns);
        if !same || row.meta_only {
            out.changed.push(m.path);
            continue;
        }
        let stamp = Stamp {
            state: State::Premigrated,
            job,
            size: row.size,
            mtime_ns: row.mtime_ns,
            crc: row.crc,
            ino: now.ino,
            recalling: false,
        };
        stamp.write(&m.path)?;
        // Setting the record changed the file's ctime: the catalog keeps the new one.
        let after = Facts::read(&m.path)?;
        tapeloom_ops::hsm::migrated(home, &m.path, &copy_of(&stamp, &entry), after.ctime_ns)?;
        out.files += 1;
        out.bytes += row.size;
    }
    Ok(())
}
