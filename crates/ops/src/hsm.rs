//! The catalog's side of hierarchical storage (`docs/HSM.md`): the folders a home
//! manages, and what it records of each managed file whose data went to tape
//! (`hsm_files`). The HSM crate keeps the side of the file system (each file's
//! own record in an extended attribute, punching data out, writing it back,
//! fanotify) and records here what it did.
//!
//! The rules that read the catalog are kept here: a managed folder is neither
//! inside nor around another; a migration goes through the disk stage when the
//! home has one; a file's data may be punched out only once its copy was read
//! back and every further copy its pool asks for is on tape.

use crate::access::Catalogued;
use crate::error::{OpsError, Result};
use std::collections::{HashMap, HashSet};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tapeloom_catalog::{FileRow, JobState, Pool};
pub use tapeloom_catalog::{HsmFile, HsmRoot, RecallSample};
use tapeloom_engine::{BackupOptions, BackupReport, Only, Via};

/// A managed folder's path.
pub fn root_path(r: &HsmRoot) -> PathBuf {
    PathBuf::from(std::ffi::OsStr::from_bytes(&r.path))
}

/// Records `dir` (an absolute path, its links resolved) as a folder this home
/// manages, its files migrating to `pool`, which is made when the catalog does
/// not know it. A folder managed already keeps the time it was added and takes
/// the new pool; a folder inside or around another managed folder is refused.
pub fn manage(at: &impl Catalogued, dir: &Path, pool: &str) -> Result<HsmRoot> {
    let cat = at.ops_catalog();
    let bytes = dir.as_os_str().as_bytes();
    let mut added_ns = None;
    for r in cat.hsm_roots()? {
        let other = root_path(&r);
        if other == dir {
            added_ns = Some(r.added_ns);
        } else if other.starts_with(dir) || dir.starts_with(&other) {
            return Err(OpsError::ManagedOverlap {
                folder: dir.to_path_buf(),
                managed: other,
            });
        }
    }
    if cat.pool(pool)?.is_none() {
        cat.create_pool(&Pool::named(pool), &[])?;
    }
    let added_ns = added_ns.unwrap_or_else(tapeloom_engine::clock::system_ns);
    cat.add_hsm_root(bytes, pool, added_ns)?;
    Ok(HsmRoot {
        path: bytes.to_vec(),
        pool: pool.to_string(),
        added_ns,
    })
}

/// The folders this home manages, by path: none when it manages none.
pub fn roots(at: &impl Catalogued) -> Result<Vec<HsmRoot>> {
    Ok(at.ops_catalog().hsm_roots()?)
}

/// What the catalog records of the managed file at `path`: none when its data
/// never went to tape (or the record was forgotten).
pub fn file(at: &impl Catalogued, path: &Path) -> Result<Option<HsmFile>> {
    Ok(at.ops_catalog().hsm_file(path.as_os_str().as_bytes())?)
}

/// Every managed file the catalog records, by path.
pub fn files(at: &impl Catalogued) -> Result<Vec<HsmFile>> {
    Ok(at.ops_catalog().hsm_files(b"")?)
}

/// The backup a migration of `files` of the managed folder `root` runs: a job
/// named `hsm-migrate` of the folder's pool, in the set `hsm-POOL`, holding only
/// those files, through the disk stage when the home has one, with blocks of
/// `block_size` bytes (a backup's default when none).
pub fn migration(
    at: &impl Catalogued,
    root: &HsmRoot,
    files: impl IntoIterator<Item = PathBuf>,
    block_size: Option<usize>,
) -> Result<BackupOptions> {
    let via = match at.ops_catalog().stages()?.is_empty() {
        true => Via::Direct,
        false => Via::Stage,
    };
    let opts = BackupOptions {
        name: "hsm-migrate".into(),
        pool: Some(root.pool.clone()),
        set: Some(format!("hsm-{}", root.pool)),
        via,
        only: Some(Arc::new(Only::new(files))),
        ..BackupOptions::default()
    };
    Ok(BackupOptions {
        block_size: block_size.unwrap_or(opts.block_size),
        ..opts
    })
}

/// Whether the job of a migration ended so that its files may be marked as on
/// tape: ok, or partial (a file it could not read is not in it, and stays as it
/// was).
pub fn job_ended(report: &BackupReport) -> bool {
    matches!(report.status, JobState::Ok | JobState::Partial)
}

/// The copy pool job `job` of a migration must be copied to, when its pool
/// names one (the pool a failed copy was meant for).
pub fn copy_pool(at: &impl Catalogued, job: i64) -> Result<Option<String>> {
    crate::backup::copy_due(at.ops_catalog(), job)
}

/// A file as a job stored it: what a migration compares the file with before it
/// marks it premigrated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stored {
    /// Its size when it was read.
    pub size: u64,
    /// Its modification time then, in nanoseconds.
    pub mtime_ns: i64,
    /// Its status change time then, in nanoseconds; 0 when the job did not
    /// record it.
    pub ctime_ns: i64,
    /// The CRC32C of its data.
    pub crc: u32,
    /// Whether the job holds its metadata alone (its data was not stored).
    pub meta_only: bool,
}

impl From<&FileRow> for Stored {
    fn from(r: &FileRow) -> Self {
        Stored {
            size: r.size,
            mtime_ns: r.mtime_ns,
            ctime_ns: r.ctime_ns,
            crc: r.crc,
            meta_only: r.meta_only,
        }
    }
}

/// How job `job` stored the entry at `entry` (its path in the job): none when
/// the job holds no such entry (it could not read the file).
pub fn stored(at: &impl Catalogued, job: i64, entry: &[u8]) -> Result<Option<Stored>> {
    Ok(at
        .ops_catalog()
        .file(job, entry)?
        .as_ref()
        .map(Stored::from))
}

/// A managed file's copy on tape, as the file's own record gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapeCopy {
    /// The job the copy is in.
    pub job: i64,
    /// The file's path in that job.
    pub entry: Vec<u8>,
    /// The file's size when it was copied.
    pub size: u64,
    /// Its modification time then, in nanoseconds.
    pub mtime_ns: i64,
    /// The CRC32C of its data.
    pub crc: u32,
}

/// The catalog's record of the file at `path` in `state`, whose copy is `copy`,
/// with its status change time now.
fn record(path: &Path, copy: &TapeCopy, state: &str, ctime_ns: i64, verified: bool) -> HsmFile {
    HsmFile {
        path: path.as_os_str().as_bytes().to_vec(),
        state: state.to_string(),
        job_id: copy.job,
        entry: copy.entry.clone(),
        size: copy.size,
        mtime_ns: copy.mtime_ns,
        ctime_ns,
        crc: copy.crc,
        verified,
        changed_ns: tapeloom_engine::clock::system_ns(),
    }
}

/// Records the file at `path` as premigrated by a migration whose job was read
/// back: its data is on disk and in `copy`. `ctime_ns` is its status change time
/// after its own record was written.
pub fn migrated(at: &impl Catalogued, path: &Path, copy: &TapeCopy, ctime_ns: i64) -> Result<()> {
    let rec = record(path, copy, "premigrated", ctime_ns, true);
    Ok(at.ops_catalog().put_hsm_file(&rec)?)
}

/// Whether a premigrated file may give its disk space back, as the catalog
/// says: [`may_release`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Release {
    /// It may: its copy, recorded with the status change time `ctime_ns` the
    /// file must still have, is whole in every pool its own pool asks for.
    May {
        /// The file's path in its copy's job.
        entry: Vec<u8>,
        /// Its status change time as recorded with its copy.
        ctime_ns: i64,
    },
    /// It is kept, and why.
    Kept(String),
}

/// Whether the file at `path`, whose own record puts its copy in job `job`, may
/// be released: only when the catalog records that copy, the copy was read
/// back, and every further copy its pool asks for is on tape.
pub fn may_release(at: &impl Catalogued, path: &Path, job: i64) -> Result<Release> {
    let cat = at.ops_catalog();
    let rec = cat.hsm_file(path.as_os_str().as_bytes())?;
    let Some(rec) = rec.filter(|r| r.job_id == job) else {
        return Ok(Release::Kept(
            "the catalog has no record of its copy (run hsm reconcile)".into(),
        ));
    };
    if !rec.verified {
        return Ok(Release::Kept("its copy was not read back".into()));
    }
    let missing = crate::copies::missing(cat, job)?;
    if !missing.is_empty() {
        return Ok(Release::Kept(format!(
            "its copy in pool {} is not on tape yet",
            missing.join(", ")
        )));
    }
    Ok(Release::May {
        entry: rec.entry,
        ctime_ns: rec.ctime_ns,
    })
}

/// Records the file at `path` as released: its data is in `copy` only.
/// `ctime_ns` is its status change time once its data was punched out.
pub fn released(at: &impl Catalogued, path: &Path, copy: &TapeCopy, ctime_ns: i64) -> Result<()> {
    let rec = record(path, copy, "released", ctime_ns, true);
    Ok(at.ops_catalog().put_hsm_file(&rec)?)
}

/// Records the file at `path` as recalled: premigrated again, its data written
/// back from `copy`. `ctime_ns` is its status change time once it was.
pub fn recalled(at: &impl Catalogued, path: &Path, copy: &TapeCopy, ctime_ns: i64) -> Result<()> {
    let rec = record(path, copy, "premigrated", ctime_ns, true);
    Ok(at.ops_catalog().put_hsm_file(&rec)?)
}

/// Keeps `samples`, those of one recall, with each job in `jobs` it read,
/// replacing those of an earlier recall (`report JOB --op recall`).
pub fn keep_recall_samples(
    at: &impl Catalogued,
    jobs: &[i64],
    samples: &[RecallSample],
) -> Result<()> {
    for job in jobs {
        at.ops_catalog().set_recall_samples(*job, samples)?;
    }
    Ok(())
}

/// The entries of jobs by the inode number their files had, each job's read
/// from the catalog once: how a file's own record (which names its job and its
/// inode number) finds its path in the job.
#[derive(Default)]
pub struct Entries {
    jobs: HashMap<i64, HashMap<u64, Vec<u8>>>,
}

impl Entries {
    /// The path in job `job` of the file at `path`, whose inode number was `ino`
    /// when it was copied; else, when the job has no entry of that inode, the
    /// path the catalog records of the file at `path` in that job.
    pub fn of(
        &mut self,
        at: &impl Catalogued,
        path: &Path,
        (job, ino): (i64, u64),
    ) -> Result<Option<Vec<u8>>> {
        let cat = at.ops_catalog();
        if let std::collections::hash_map::Entry::Vacant(v) = self.jobs.entry(job) {
            let rows = cat.files(job, None)?;
            let by_ino = (rows.into_iter())
                .filter(|r| r.ino != 0 && r.has_data())
                .map(|r| (r.ino, r.path))
                .collect();
            v.insert(by_ino);
        }
        if let Some(e) = self.jobs.get(&job).and_then(|m| m.get(&ino)) {
            return Ok(Some(e.clone()));
        }
        let rec = cat.hsm_file(path.as_os_str().as_bytes())?;
        Ok(rec.filter(|r| r.job_id == job).map(|r| r.entry))
    }
}

/// How many copies of each job are on tape, each job asked once: what
/// `hsm status` counts the files on tape by.
#[derive(Default)]
pub struct CopiesOnTape {
    seen: HashMap<i64, u32>,
}

impl CopiesOnTape {
    /// How many copies of job `job` are on tape: its own cartridges, and each
    /// whole further copy.
    pub fn of(&mut self, at: &impl Catalogued, job: i64) -> Result<u32> {
        if let Some(n) = self.seen.get(&job) {
            return Ok(*n);
        }
        let n = crate::copies::on_tape(at.ops_catalog(), job)?;
        self.seen.insert(job, n);
        Ok(n)
    }
}

/// Makes the catalog's record of the file at `path` say what the file's own
/// does: it is in `state` (`premigrated`, `released` or `dirty`) with its copy
/// in `copy`, and its status change time is `ctime_ns`. Returns whether the
/// record was missing or said otherwise (of its state, copy, size, time or
/// checksum); only then, and unless `check`, is it written, keeping whether
/// the copy was read back (a record that was missing says it was).
pub fn reconcile_file(
    at: &impl Catalogued,
    path: &Path,
    (copy, state): (&TapeCopy, &str),
    ctime_ns: i64,
    check: bool,
) -> Result<bool> {
    let cat = at.ops_catalog();
    let had = cat.hsm_file(path.as_os_str().as_bytes())?;
    let mut want = record(path, copy, state, ctime_ns, true);
    if agrees(had.as_ref(), &want) {
        return Ok(false);
    }
    if !check {
        want.verified = had.as_ref().is_none_or(|h| h.verified);
        cat.put_hsm_file(&want)?;
    }
    Ok(true)
}

/// Whether the catalog's record `had` says what the file's own does.
fn agrees(had: Option<&HsmFile>, want: &HsmFile) -> bool {
    had.is_some_and(|h| {
        h.state == want.state
            && h.job_id == want.job_id
            && h.entry == want.entry
            && h.size == want.size
            && h.mtime_ns == want.mtime_ns
            && h.crc == want.crc
    })
}

/// The catalog's records of files other than those in `seen` (paths as bytes):
/// files that are gone or resident again. Unless `check`, they are forgotten.
pub fn forget_unseen(
    at: &impl Catalogued,
    seen: &HashSet<Vec<u8>>,
    check: bool,
) -> Result<Vec<PathBuf>> {
    let cat = at.ops_catalog();
    let mut out = Vec::new();
    for f in cat.hsm_files(b"")? {
        if seen.contains(&f.path) {
            continue;
        }
        if !check {
            cat.forget_hsm_file(&f.path)?;
        }
        out.push(PathBuf::from(std::ffi::OsStr::from_bytes(&f.path)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tapeloom_engine::Home;

    fn home() -> (tempfile::TempDir, Home) {
        let t = tempfile::tempdir().unwrap();
        let home = Home::open(&t.path().join("home")).unwrap();
        (t, home)
    }

    fn copy(job: i64) -> TapeCopy {
        TapeCopy {
            job,
            entry: b"d/a".to_vec(),
            size: 10,
            mtime_ns: 5,
            crc: 0xdead_beef,
        }
    }

    #[test]
    fn a_managed_folder_gets_its_pool_and_refuses_folders_inside_or_around_it() {
        let (_t, home) = home();
        assert!(home.catalog.pool("cold").unwrap().is_none());
        let m = manage(&home, Path::new("/srv/m"), "cold").unwrap();
        assert!(home.catalog.pool("cold").unwrap().is_some());
        // Managed again: the new pool, the time it was first added.
        let again = manage(&home, Path::new("/srv/m"), "hsm").unwrap();
        assert_eq!((again.pool.as_str(), again.added_ns), ("hsm", m.added_ns));
        assert_eq!(roots(&home).unwrap(), vec![again]);
        for overlapping in ["/srv/m/sub", "/srv"] {
            let e = manage(&home, Path::new(overlapping), "hsm").unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("{overlapping} overlaps the managed folder /srv/m")
            );
        }
        // A sibling whose name starts alike is another folder.
        manage(&home, Path::new("/srv/mm"), "hsm").unwrap();
        let paths: Vec<PathBuf> = roots(&home).unwrap().iter().map(root_path).collect();
        assert_eq!(paths, [PathBuf::from("/srv/m"), PathBuf::from("/srv/mm")]);
    }

    #[test]
    fn a_file_may_be_released_only_when_its_copy_is_recorded_and_was_read_back() {
        let (_t, home) = home();
        let path = Path::new("/srv/m/d/a");
        let kept = |r: Release| match r {
            Release::Kept(why) => why,
            Release::May { .. } => panic!("released"),
        };
        let why = kept(may_release(&home, path, 7).unwrap());
        assert!(why.contains("no record of its copy"), "{why}");
        migrated(&home, path, &copy(7), 42).unwrap();
        let why = kept(may_release(&home, path, 8).unwrap());
        assert!(why.contains("no record of its copy"), "{why}");
        assert_eq!(
            may_release(&home, path, 7).unwrap(),
            Release::May {
                entry: b"d/a".to_vec(),
                ctime_ns: 42
            }
        );
        let mut rec = file(&home, path).unwrap().unwrap();
        rec.verified = false;
        home.catalog.put_hsm_file(&rec).unwrap();
        let why = kept(may_release(&home, path, 7).unwrap());
        assert_eq!(why, "its copy was not read back");
        released(&home, path, &copy(7), 43).unwrap();
        let rec = file(&home, path).unwrap().unwrap();
        assert_eq!(
            (rec.state.as_str(), rec.ctime_ns, rec.verified),
            ("released", 43, true)
        );
    }

    #[test]
    fn reconcile_writes_only_what_differs_and_forgets_files_not_seen() {
        let (_t, home) = home();
        let (a, b) = (Path::new("/srv/m/a"), Path::new("/srv/m/b"));
        // Missing: told, and written only without check.
        assert!(reconcile_file(&home, a, (&copy(7), "released"), 1, true).unwrap());
        assert!(file(&home, a).unwrap().is_none());
        assert!(reconcile_file(&home, a, (&copy(7), "released"), 1, false).unwrap());
        let rec = file(&home, a).unwrap().unwrap();
        assert_eq!(
            (rec.state.as_str(), rec.job_id, rec.verified),
            ("released", 7, true)
        );
        assert!(!reconcile_file(&home, a, (&copy(7), "released"), 1, false).unwrap());
        // A record that said it was not read back keeps saying so.
        let mut unread = rec.clone();
        unread.verified = false;
        home.catalog.put_hsm_file(&unread).unwrap();
        assert!(reconcile_file(&home, a, (&copy(7), "dirty"), 1, false).unwrap());
        let rec = file(&home, a).unwrap().unwrap();
        assert_eq!((rec.state.as_str(), rec.verified), ("dirty", false));
        migrated(&home, b, &copy(8), 2).unwrap();
        let seen = HashSet::from([a.as_os_str().as_bytes().to_vec()]);
        assert_eq!(forget_unseen(&home, &seen, true).unwrap(), [b]);
        assert!(file(&home, b).unwrap().is_some());
        assert_eq!(forget_unseen(&home, &seen, false).unwrap(), [b]);
        assert!(file(&home, b).unwrap().is_none());
        assert_eq!(files(&home).unwrap().len(), 1);
    }
}
