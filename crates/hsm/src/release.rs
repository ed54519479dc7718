//! `hsm release`: premigrated files give their disk space back. A file is
//! released only when its tape copy was read back, every further copy its pool
//! asks for is on tape (`tapeloom_ops::copies`), nobody has it open (a write
//! lease, [`crate::sys`]), and its size, modification time and status change
//! time are those recorded with its copy, checked under the lease right before
//! the hole is punched. Its record says released before the hole is punched, so
//! a release cut at any moment leaves either the data or a record of where it
//! is on tape; the file keeps its size, mode, owner and times.
//!
//! With watermarks, the least recently read files of each file system go first,
//! until it is under the low mark.

use crate::error::{io, HsmError, Result};
use crate::{copy_of, files_under, roots, targets, Facts, Managed, State};
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use tapeloom_engine::Home;
use tapeloom_ops::hsm::Release;
use xattr::FileExt;

/// Watermarks: release while a file system is fuller than `high` percent, until
/// it is under `low` percent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Marks {
    /// The fill (percent) above which files are released.
    pub high: f64,
    /// The fill (percent) releasing stops under.
    pub low: f64,
}

impl Marks {
    /// Marks from 1 to 100 percent, low under high.
    pub fn new(high: f64, low: f64) -> Result<Marks> {
        let ok = (1.0..=100.0).contains(&high) && (1.0..=100.0).contains(&low) && low < high;
        match ok {
            true => Ok(Marks { high, low }),
            false => Err(HsmError::BadMarks),
        }
    }
}

/// What a release did.
#[derive(Debug, Clone, Default)]
pub struct Released {
    /// Files released.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Files left as they were, with why (open, changed, copy not read back).
    pub kept: Vec<(PathBuf, String)>,
    /// Each file system's fill (percent) before and after, with watermarks.
    pub fill: Vec<(PathBuf, f64, f64)>,
}

/// Releases the premigrated files under `paths` (every managed folder when
/// none); with `marks`, only while their file system is above the high mark,
/// least recently read first, until it is under the low mark.
pub fn release(home: &Home, paths: &[PathBuf], marks: Option<Marks>) -> Result<Released> {
    let roots = roots(home)?;
    let mut out = Released::default();
    let tops = targets(&roots, paths)?;
    let mut skipped = Vec::new();
    let mut found = files_under(&tops, &mut |p, why| skipped.push((p.to_path_buf(), why)));
    out.kept.extend(skipped);
    found.retain(|m| m.state() == State::Premigrated);
    let Some(marks) = marks else {
        for m in found {
            release_counted(home, &m, &mut out)?;
        }
        return Ok(out);
    };
    // Least recently read first.
    found.sort_by_key(|m| m.facts.atime_ns);
    for top in &tops {
        let before = fill(top)?;
        if before <= marks.high {
            out.fill.push((top.clone(), before, before));
            continue;
        }
        let mut now = before;
        for m in found.iter().filter(|m| m.path.starts_with(top)) {
            if now < marks.low {
                break;
            }
            release_counted(home, m, &mut out)?;
            now = fill(top)?;
        }
        out.fill.push((top.clone(), before, now));
    }
    Ok(out)
}

/// Releases `m`, counting it in `out` or saying why it was kept.
fn release_counted(home: &Home, m: &Managed, out: &mut Released) -> Result<()> {
    match release_one(home, m)? {
        None => {
            out.files += 1;
            out.bytes += m.facts.size;
        }
        Some(why) => out.kept.push((m.path.clone(), why)),
    }
    Ok(())
}

/// The fill of the file system `path` is on, in percent, as `df` gives it.
fn fill(path: &Path) -> Result<f64> {
    let st = io(
        rustix::fs::statvfs(path).map_err(Into::into),
        "measure the file system of",
        path,
    )?;
    let used = st.f_blocks.saturating_sub(st.f_bfree) as f64;
    let total = used + st.f_bavail as f64;
    Ok(match total > 0.0 {
        true => 100.0 * used / total,
        false => 0.0,
    })
}

/// Releases one premigrated file: none when it was, or why it was kept.
fn release_one(home: &Home, m: &Managed) -> Result<Option<String>> {
    let Some(stamp) = &m.stamp else {
        return Ok(Some("not on tape".into()));
    };
    let (entry, ctime_ns) = match tapeloom_ops::hsm::may_release(home, &m.path, stamp.job)? {
        Release::May { entry, ctime_ns } => (entry, ctime_ns),
        Release::Kept(why) => return Ok(Some(why)),
    };
    let path = &m.path;
    let Some(f) = crate::open_leased(path)? else {
        return Ok(Some("it is open".into()));
    };
    let done = punch(home, &f, path, (stamp, &entry, ctime_ns));
    let _ = crate::sys::unlease(f.as_fd());
    done
}

/// Under the lease: checks the file is as its copy was, says released, punches
/// its data out and puts its times back.
fn punch(
    home: &Home,
    f: &std::fs::File,
    path: &Path,
    (stamp, entry, ctime_ns): (&crate::Stamp, &[u8], i64),
) -> Result<Option<String>> {
    let facts = Facts::of(&io(f.metadata(), "read", path)?);
    if !stamp.matches(facts.size, facts.mtime_ns) || facts.ctime_ns != ctime_ns {
        return Ok(Some("changed since its copy".into()));
    }
    let mut released = stamp.clone();
    released.state = State::Released;
    io(
        f.set_xattr(crate::STAMP_ATTR, &released.encode()),
        "write the record of",
        path,
    )?;
    let flags = rustix::fs::FallocateFlags::PUNCH_HOLE | rustix::fs::FallocateFlags::KEEP_SIZE;
    if facts.size > 0 {
        // Up to the end of the last block: a hole ending inside a block leaves
        // that block allocated (zeroed), and the file would keep it.
        let block = io(f.metadata(), "read", path)?.blksize().max(512);
        let span = facts.size.div_ceil(block) * block;
        io(
            rustix::fs::fallocate(f, flags, 0, span).map_err(Into::into),
            "punch the data out of",
            path,
        )?;
    }
    set_times(f, path, facts.atime_ns, facts.mtime_ns)?;
    io(f.sync_all(), "sync", path)?;
    let after = Facts::of(&io(f.metadata(), "read", path)?);
    tapeloom_ops::hsm::released(home, path, &copy_of(&released, entry), after.ctime_ns)?;
    // While the lease is held nobody can open the file: the daemon, when one
    // runs, marks it before anyone can read the stub.
    crate::notify::tell(home.dir(), path, true)?;
    Ok(None)
}

/// Releases again a file whose own record says released but that holds data
/// blocks or says a recall was writing it: a release cut before its hole, or a
/// recall cut while it wrote. Its copy on tape is whole (the record says
/// released only once it is verified), so nothing is lost: the data is punched
/// out, the modification time put back to its copy's, and the record says
/// released. Left alone while it is open (the daemon may be recalling it).
pub(crate) fn release_again(path: &Path, stamp: &crate::Stamp) -> Result<()> {
    let Some(f) = crate::open_leased(path)? else {
        return Ok(());
    };
    let md = io(f.metadata(), "read", path)?;
    let facts = Facts::of(&md);
    if md.len() > 0 {
        let flags = rustix::fs::FallocateFlags::PUNCH_HOLE | rustix::fs::FallocateFlags::KEEP_SIZE;
        let span = md.len().div_ceil(md.blksize().max(512)) * md.blksize().max(512);
        io(
            rustix::fs::fallocate(&f, flags, 0, span).map_err(Into::into),
            "punch the data out of",
            path,
        )?;
    }
    set_times(&f, path, facts.atime_ns, stamp.mtime_ns)?;
    let mut released = stamp.clone();
    (released.state, released.recalling) = (State::Released, false);
    io(
        f.set_xattr(crate::STAMP_ATTR, &released.encode()),
        "write the record of",
        path,
    )?;
    io(f.sync_all(), "sync", path)?;
    let _ = crate::sys::unlease(f.as_fd());
    Ok(())
}

/// Sets a file's access and modification times (nanoseconds since the epoch).
pub(crate) fn set_times(
    f: &std::fs::File,
    path: &Path,
    atime_ns: i64,
    mtime_ns: i64,
) -> Result<()> {
    let ts = |ns: i64| rustix::fs::Timespec {
        tv_sec: ns.div_euclid(1_000_000_000),
        tv_nsec: ns.rem_euclid(1_000_000_000) as _,
    };
    let times = rustix::fs::Timestamps {
        last_access: ts(atime_ns),
        last_modification: ts(mtime_ns),
    };
    io(
        rustix::fs::futimens(f, &times).map_err(Into::into),
        "set the times of",
        path,
    )
}
