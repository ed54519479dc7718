//! `hsm recall`: released files come back from tape. The files asked are one
//! batch: one restore per job, of all the batch's files of that job, so each of
//! its cartridges is mounted once and its files read in block order. Each file
//! is restored to a folder of the home first; its size and its data's CRC32C
//! are checked against its record, and only then is the data written into the
//! stub, in place (the same inode: a reader that has it open sees it come). The
//! file is then premigrated. A recall cut at any moment leaves a stub whose
//! record still says released (written data is whole again at the next recall).

use crate::error::{io, Result};
use crate::release::set_times;
use crate::{files_under, record, roots, targets, Facts, Managed, Stamp, State};
use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tapeloom_engine::{Home, Overwrite, RestoreOptions};
use xattr::FileExt;

/// What a recall did.
#[derive(Debug, Clone, Default)]
pub struct Recalled {
    /// Files brought back.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// The jobs read, one restore each.
    pub jobs: Vec<i64>,
    /// Cartridges mounted, over all the restores.
    pub mounts: u64,
    /// Blocks read from tape.
    pub blocks_read: u64,
    /// Files that did not come back, with why.
    pub failed: Vec<(PathBuf, String)>,
    /// Files that came back.
    pub recalled: Vec<PathBuf>,
    /// Wall-clock seconds.
    pub seconds: f64,
}

/// Recalls the released files under `paths`.
pub fn recall(home: &Home, paths: &[PathBuf]) -> Result<Recalled> {
    let t0 = Instant::now();
    let roots = roots(&home.catalog)?;
    let mut out = Recalled::default();
    let mut skipped = Vec::new();
    let found = files_under(&targets(&roots, paths)?, &mut |p, why| {
        skipped.push((p.to_path_buf(), why))
    });
    out.failed.extend(skipped);
    let asks = (found.into_iter())
        .filter(|m| m.state() == State::Released)
        .filter_map(|m| {
            let stamp = m.stamp.clone()?;
            Some(Ask {
                path: m.path,
                stamp,
                writer: None,
            })
        })
        .collect();
    recall_batch(home, asks, &mut out)?;
    out.seconds = t0.elapsed().as_secs_f64();
    Ok(out)
}

/// A released file to recall: its path, its record, and the descriptor the data
/// is written through (the daemon's, which raises no events); none: the file
/// is opened by its path.
pub(crate) struct Ask {
    pub path: PathBuf,
    pub stamp: Stamp,
    pub writer: Option<std::fs::File>,
}

/// Recalls `asks` as one batch: one restore per job.
pub(crate) fn recall_batch(home: &Home, asks: Vec<Ask>, out: &mut Recalled) -> Result<()> {
    let mut by_job: BTreeMap<i64, Vec<Ask>> = BTreeMap::new();
    for a in asks {
        by_job.entry(a.stamp.job).or_default().push(a);
    }
    for (job, files) in by_job {
        recall_job(home, job, files, out)?;
    }
    Ok(())
}

/// Restores `files` of job `job` to a folder of the home, then puts each back.
fn recall_job(home: &Home, job: i64, files: Vec<Ask>, out: &mut Recalled) -> Result<()> {
    let scratch = io(
        tempfile::Builder::new()
            .prefix("hsm-recall-")
            .tempdir_in(home.dir()),
        "make a recall folder in",
        home.dir(),
    )?;
    let mut entries = crate::Entries::default();
    let mut asked = Vec::new();
    for a in files {
        match entries.of(&home.catalog, &a.path, &a.stamp)? {
            Some(e) => asked.push((a, e)),
            None => out
                .failed
                .push((a.path, format!("job {job} has no entry of it"))),
        }
    }
    let opts = RestoreOptions {
        to: scratch.path().to_path_buf(),
        paths: asked.iter().map(|(_, e)| e.clone()).collect(),
        overwrite: Overwrite::Always,
        ..RestoreOptions::default()
    };
    let report = match tapeloom_engine::restore(home, job, &opts) {
        Ok(r) => r,
        Err(e) => {
            let why = e.to_string();
            out.failed
                .extend(asked.into_iter().map(|(a, _)| (a.path, why.clone())));
            return Ok(());
        }
    };
    out.jobs.push(job);
    out.mounts += report.mounts;
    out.blocks_read += report.blocks_read;
    let bad: BTreeMap<Vec<u8>, String> = (report.errors.iter())
        .map(|(p, why)| (p.as_bytes().to_vec(), why.clone()))
        .collect();
    for (a, entry) in asked {
        if let Some(why) = bad.get(&entry) {
            out.failed.push((a.path, why.clone()));
            continue;
        }
        let got = scratch.path().join(std::ffi::OsStr::from_bytes(&entry));
        let into = (a.path.as_path(), a.writer.as_ref());
        match put_back(home, &got, into, (&a.stamp, &entry))? {
            None => {
                out.files += 1;
                out.bytes += a.stamp.size;
                out.recalled.push(a.path);
            }
            Some(why) => out.failed.push((a.path, why)),
        }
    }
    Ok(())
}

/// Checks the restored copy at `got` against `stamp` and writes it into the
/// stub at `path`: none when it came back, or why not.
fn put_back(
    home: &Home,
    got: &Path,
    (path, writer): (&Path, Option<&std::fs::File>),
    (stamp, entry): (&Stamp, &[u8]),
) -> Result<Option<String>> {
    let Ok(mut src) = std::fs::File::open(got) else {
        return Ok(Some("the restore did not give it back".into()));
    };
    let mut data = Vec::new();
    io(src.read_to_end(&mut data), "read the restored", got)?;
    if data.len() as u64 != stamp.size {
        return Ok(Some(format!(
            "its copy holds {} bytes, not {}",
            data.len(),
            stamp.size
        )));
    }
    if crc32c::crc32c(&data) != stamp.crc {
        return Ok(Some("its copy does not match its checksum".into()));
    }
    let opened;
    let f = match writer {
        Some(w) => w,
        None => {
            // Under a write lease nobody else has the file open; the daemon, when
            // one runs, takes its mark off so that writing it raises no event.
            let Some(f) = crate::open_leased(path)? else {
                return Ok(Some(
                    "it is open (the daemon recalls it for its reader)".into(),
                ));
            };
            opened = f;
            crate::notify::tell(home.dir(), path, false)?;
            &opened
        }
    };
    let cat = &home.catalog;
    let facts = Facts::of(&io(f.metadata(), "read", path)?);
    let stub = Managed {
        path: path.to_path_buf(),
        facts,
        stamp: Some(stamp.clone()),
    };
    if stub.state() != State::Released {
        return Ok(Some("changed since it was released".into()));
    }
    io(f.write_all_at(&data, 0), "write the data back into", path)?;
    io(f.sync_all(), "sync", path)?;
    set_times(f, path, crate::now_ns(), stamp.mtime_ns)?;
    let mut back = stamp.clone();
    back.state = State::Premigrated;
    io(
        f.set_xattr(crate::STAMP_ATTR, &back.encode()),
        "write the record of",
        path,
    )?;
    let after = Facts::of(&io(f.metadata(), "read", path)?);
    cat.put_hsm_file(&record(path, (&back, entry), after.ctime_ns, true))?;
    Ok(None)
}
