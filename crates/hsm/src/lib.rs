//! Hierarchical storage: the files of a managed folder migrate to tape, give
//! their disk space back, and come back when they are asked for.
//!
//! A managed file is *resident* (never migrated), *premigrated* (its data on
//! disk and on tape), *released* (a stub of the same size, mode, owner and
//! times, with no data blocks on disk) or *dirty* (changed since its copy went
//! to tape). Its state and its tape copy's address are in an extended attribute
//! of the file ([`Stamp`]) and in the catalog (`hsm_files`).
//!
//! - [`manage`] records a folder whose files migrate to a pool of their own.
//! - [`migrate`] writes chosen files to tape as one job of that pool, reads the
//!   job back, and marks each file that did not change while it was read as
//!   premigrated.
//! - [`release`] punches the data out of premigrated files whose copy was read
//!   back, least recently read first, while nobody has them open and they are
//!   unchanged since their copy.
//! - [`recall`] brings released files back, one restore per job, checking each
//!   file's data against its copy's checksum before writing it into the stub.
//! - [`status`] counts the files and bytes in each state; [`reconcile`] makes
//!   the catalog agree with the files' own records.

#![deny(unsafe_code)]

mod daemon;
mod error;
mod migrate;
mod notify;
mod progress;
mod recall;
mod release;
mod stamp;
mod status;
mod sys;

pub use daemon::{daemon, guardian, running_status, Counters, DaemonOptions, Latency};
pub use daemon::{LATENCY_BOUNDS, STATUS_FILE};
pub use error::{HsmError, Result};
pub use migrate::{migrate, MigrateOptions, Migrated};
pub use recall::{recall, recall_restored, RecallOrder, Recalled};
pub use release::{release, Marks, Released};
pub use stamp::{Stamp, State, STAMP_ATTR};
pub use status::{reconcile, status, Counts, Reconciled, Status};

use error::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use tapeloom_engine::Home;
use tapeloom_ops::hsm::{root_path, HsmRoot, TapeCopy};
use tapeloom_ops::Catalogued;

/// The pool a managed folder's files migrate to unless told otherwise.
pub const DEFAULT_POOL: &str = "hsm";

/// Records `dir` as a folder this home manages, its files migrating to `pool`
/// (made when the catalog does not know it). A folder inside or around another
/// managed folder is refused (`tapeloom_ops::hsm::manage`).
pub fn manage(home: &Home, dir: &Path, pool: &str) -> Result<HsmRoot> {
    let abs = io(std::fs::canonicalize(dir), "find", dir)?;
    if !io(std::fs::metadata(&abs), "read", &abs)?.is_dir() {
        return Err(HsmError::NotAFolder(abs));
    }
    Ok(tapeloom_ops::hsm::manage(home, &abs, pool)?)
}

/// Nanoseconds since the epoch, on the system clock.
pub(crate) fn now_ns() -> i64 {
    tapeloom_engine::clock::system_ns()
}

/// The managed folder `abs` is in, and its path relative to it.
pub(crate) fn root_of<'r>(roots: &'r [HsmRoot], abs: &Path) -> Option<(&'r HsmRoot, PathBuf)> {
    roots.iter().find_map(|r| {
        let rel = abs.strip_prefix(root_path(r)).ok()?;
        Some((r, rel.to_path_buf()))
    })
}

/// The managed folders, refused when there are none.
pub(crate) fn roots(at: &impl Catalogued) -> Result<Vec<HsmRoot>> {
    let roots = tapeloom_ops::hsm::roots(at)?;
    match roots.is_empty() {
        true => Err(HsmError::NothingManaged),
        false => Ok(roots),
    }
}

/// A file as the file system describes it now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Facts {
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub atime_ns: i64,
    /// 512-byte blocks allocated.
    pub blocks: u64,
    /// Its inode number.
    pub ino: u64,
}

impl Facts {
    pub(crate) fn of(md: &std::fs::Metadata) -> Facts {
        let ns = |s: i64, n: i64| s * 1_000_000_000 + n;
        Facts {
            size: md.len(),
            mtime_ns: ns(md.mtime(), md.mtime_nsec()),
            ctime_ns: ns(md.ctime(), md.ctime_nsec()),
            atime_ns: ns(md.atime(), md.atime_nsec()),
            blocks: md.blocks(),
            ino: md.ino(),
        }
    }

    /// The file at `path` now (a symlink not followed).
    pub(crate) fn read(path: &Path) -> Result<Facts> {
        Ok(Facts::of(&io(
            std::fs::symlink_metadata(path),
            "read",
            path,
        )?))
    }
}

/// A managed file: its path, what the file system says of it, and its record.
#[derive(Debug, Clone)]
pub(crate) struct Managed {
    pub path: PathBuf,
    pub facts: Facts,
    pub stamp: Option<Stamp>,
}

impl Managed {
    /// Its state: none recorded is resident; a record whose size or modification
    /// time the file no longer has is dirty.
    pub(crate) fn state(&self) -> State {
        match &self.stamp {
            None => State::Resident,
            // A recall cut while it wrote: what the file holds is not its data.
            Some(s) if s.recalling => State::Released,
            // A release cut after the punch and before the times were put back:
            // a stub still, whose modification time `hsm reconcile` puts back.
            Some(s)
                if s.state == State::Released
                    && self.facts.blocks == 0
                    && self.facts.size == s.size =>
            {
                State::Released
            }
            Some(s) if !s.matches(self.facts.size, self.facts.mtime_ns) => State::Dirty,
            Some(s) => s.state,
        }
    }
}

/// The regular files under each of `paths` (a file itself when it is one), in
/// the order the paths are given and each folder's files in name order,
/// symlinks not followed, each with its record. A file that cannot be read is
/// passed to `skipped` with why.
pub(crate) fn files_under(
    paths: &[PathBuf],
    skipped: &mut dyn FnMut(&Path, String),
) -> Vec<Managed> {
    let mut out = Vec::new();
    // A stack: the paths in the order given, each folder's files in name order.
    let mut todo: Vec<PathBuf> = paths.iter().rev().cloned().collect();
    while let Some(p) = todo.pop() {
        let md = match std::fs::symlink_metadata(&p) {
            Ok(md) => md,
            Err(e) => {
                skipped(&p, e.to_string());
                continue;
            }
        };
        if md.is_dir() {
            match std::fs::read_dir(&p) {
                Ok(rd) => {
                    let mut inside: Vec<PathBuf> =
                        rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
                    inside.sort_by(|a, b| b.cmp(a));
                    todo.extend(inside);
                }
                Err(e) => skipped(&p, e.to_string()),
            }
            continue;
        }
        if !md.is_file() {
            continue;
        }
        match Stamp::read(&p) {
            Ok(stamp) => out.push(Managed {
                facts: Facts::of(&md),
                path: p,
                stamp,
            }),
            Err(e) => skipped(&p, e.to_string()),
        }
    }
    out
}

/// The tape copy a file's record `stamp` names, the file's path in its job
/// being `entry`: what the catalog records of it.
pub(crate) fn copy_of(stamp: &Stamp, entry: &[u8]) -> TapeCopy {
    TapeCopy {
        job: stamp.job,
        entry: entry.to_vec(),
        size: stamp.size,
        mtime_ns: stamp.mtime_ns,
        crc: stamp.crc,
    }
}

/// The absolute form of each of `paths` (each must exist), or every managed
/// folder when none are given; each checked to be in a managed folder.
pub(crate) fn targets(roots: &[HsmRoot], paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    if paths.is_empty() {
        return Ok(roots.iter().map(root_path).collect());
    }
    let mut out = Vec::new();
    for p in paths {
        let abs = absolute(p)?;
        if root_of(roots, &abs).is_none() {
            return Err(HsmError::NotManaged(abs));
        }
        out.push(abs);
    }
    Ok(out)
}

/// `p` made absolute with its folder's real path (the object itself, a symlink
/// perhaps, not followed).
pub(crate) fn absolute(p: &Path) -> Result<PathBuf> {
    let name = p.file_name();
    let parent = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let dir = io(std::fs::canonicalize(&parent), "find", &parent)?;
    Ok(match name {
        Some(n) if n != ".." && n != "." => dir.join(n),
        _ => io(std::fs::canonicalize(p), "find", p)?,
    })
}

/// The file at `path` opened for reading and writing under a write lease
/// ([`sys::write_lease`]): none when another process has it open.
pub(crate) fn open_leased(path: &Path) -> Result<Option<std::fs::File>> {
    let f = io(
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path),
        "open",
        path,
    )?;
    match sys::write_lease(std::os::fd::AsFd::as_fd(&f)) {
        Ok(()) => Ok(Some(f)),
        Err(e) if e.raw_os_error() == Some(nix::libc::EAGAIN) => Ok(None),
        Err(source) => Err(HsmError::Io {
            what: format!("lease {}", path.display()),
            source,
        }),
    }
}
