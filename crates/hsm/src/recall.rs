//! `hsm recall`: released files come back from tape. The files asked are one
//! batch, read in one restore of many jobs (`restore_files`): each cartridge is
//! mounted once and its files read in the order the drive's model says is
//! fastest (shortest locate time first), whichever jobs they belong to. Each
//! file is restored to a folder of the home first; its size and its data's
//! CRC32C are checked against its record, and only then is the data written
//! into the stub, in place (the same inode: a reader that has it open sees it
//! come). The file is then premigrated. A recall cut at any moment leaves a stub
//! whose record still says released (written data is whole again at the next
//! recall).

use crate::error::{io, Result};
use crate::progress::Progress;
use crate::release::set_times;
use crate::{copy_of, files_under, roots, targets, Facts, Managed, Stamp, State};
use std::collections::{BTreeMap, HashSet};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tapeloom_engine::{Home, Overwrite, ReadOrder, RestoreOptions};
use xattr::FileExt;

/// In what order a recall reads the files of a batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RecallOrder {
    /// One reading of the whole batch, each cartridge's files in the order the
    /// drive's model says is fastest.
    #[default]
    Planned,
    /// One reading of the whole batch, each cartridge's files in block order.
    Block,
    /// One file after another in the order they were asked, each by the drive
    /// that holds its cartridge, else by the drive used least recently: how a
    /// recall served per request goes, for comparison.
    Asked,
}

/// What a recall did.
#[derive(Debug, Clone, Default)]
pub struct Recalled {
    /// Files brought back.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// The jobs read.
    pub jobs: Vec<i64>,
    /// Cartridges mounted, over all the readings.
    pub mounts: u64,
    /// Cartridges the changer moved into a drive.
    pub loads: u64,
    /// Blocks read from tape.
    pub blocks_read: u64,
    /// Readings made (one per batch).
    pub readings: u64,
    /// Cartridges read in another order than the block order.
    pub reordered: u64,
    /// Modeled seconds of the readings, one after another, when the drives have
    /// a timing model.
    pub modeled_seconds: Option<f64>,
    /// Modeled seconds the readings' plans predicted.
    pub planned_seconds: Option<f64>,
    /// Files that did not come back, with why.
    pub failed: Vec<(PathBuf, String)>,
    /// Files that came back.
    pub recalled: Vec<PathBuf>,
    /// Wall-clock seconds.
    pub seconds: f64,
}

/// Recalls the released files under `paths`, read in `order`.
pub fn recall(home: &Home, paths: &[PathBuf], order: RecallOrder) -> Result<Recalled> {
    let t0 = Instant::now();
    let roots = roots(home)?;
    let mut out = Recalled::default();
    let asks = released_under(&targets(&roots, paths)?, &mut out);
    recall_batch(home, asks, order, &mut out)?;
    out.seconds = t0.elapsed().as_secs_f64();
    Ok(out)
}

/// Brings back the data of the released files under `dir`, which need not be
/// in a managed folder: stubs a restore put back (`restore --recall`). Each is
/// found in its job by its record, and recalled as any released file is; the
/// catalog records only the files of managed folders.
pub fn recall_restored(home: &Home, dir: &Path) -> Result<Recalled> {
    let t0 = Instant::now();
    let mut out = Recalled::default();
    let asks = released_under(&[dir.to_path_buf()], &mut out);
    if !asks.is_empty() {
        recall_batch(home, asks, RecallOrder::Planned, &mut out)?;
    }
    out.seconds = t0.elapsed().as_secs_f64();
    Ok(out)
}

/// The released files under `paths`, to recall; the files that could not be
/// looked at go to `out`'s failures.
fn released_under(paths: &[PathBuf], out: &mut Recalled) -> Vec<Ask> {
    let mut skipped = Vec::new();
    let found = files_under(paths, &mut |p, why| skipped.push((p.to_path_buf(), why)));
    out.failed.extend(skipped);
    (found.into_iter())
        .filter(|m| m.state() == State::Released)
        .filter_map(|m| {
            let stamp = m.stamp.clone()?;
            Some(Ask {
                path: m.path,
                stamp,
                writer: None,
            })
        })
        .collect()
}

/// A released file to recall: its path, its record, and the descriptor the data
/// is written through (the daemon's, which raises no events); none: the file
/// is opened by its path.
pub(crate) struct Ask {
    pub path: PathBuf,
    pub stamp: Stamp,
    pub writer: Option<std::fs::File>,
}

/// One reading of a batch: the entries' paths used in it, and each file with its
/// entry's path.
type Pass = (HashSet<Vec<u8>>, Vec<(Ask, Vec<u8>)>);

/// Recalls `asks` as one batch: one reading of all their jobs, in `order`. Files of two jobs at the same path in their jobs (two
/// managed folders) would land in one place: such a batch is read in as many
/// passes as it needs.
pub(crate) fn recall_batch(
    home: &Home,
    asks: Vec<Ask>,
    order: RecallOrder,
    out: &mut Recalled,
) -> Result<()> {
    let mut entries = tapeloom_ops::hsm::Entries::default();
    let mut passes: Vec<Pass> = Vec::new();
    for a in asks {
        let Some(e) = entries.of(home, &a.path, (a.stamp.job, a.stamp.ino))? else {
            let why = format!("job {} has no entry of it", a.stamp.job);
            out.failed.push((a.path, why));
            continue;
        };
        match passes.iter_mut().find(|(used, _)| !used.contains(&e)) {
            Some((used, files)) => {
                used.insert(e.clone());
                files.push((a, e));
            }
            None => passes.push((HashSet::from([e.clone()]), vec![(a, e)])),
        }
    }
    let asked = passes.iter().map(|(_, f)| f.len() as u64).sum();
    let progress = Progress::new(asked);
    let jobs_before = out.jobs.len();
    let read = std::thread::scope(|s| {
        s.spawn(|| progress.sample());
        let read = (passes.into_iter())
            .try_for_each(|(_, files)| recall_pass(home, files, order, (out, &progress)));
        progress.end();
        read
    });
    let samples = progress.samples();
    tapeloom_ops::hsm::keep_recall_samples(home, &out.jobs[jobs_before..], &samples)?;
    read
}

/// Restores `files` (each with its entry's path in its job) to a folder of the
/// home in one reading, then puts each back.
fn recall_pass(
    home: &Home,
    files: Vec<(Ask, Vec<u8>)>,
    order: RecallOrder,
    (out, progress): (&mut Recalled, &Progress),
) -> Result<()> {
    let scratch = io(
        tempfile::Builder::new()
            .prefix("hsm-recall-")
            .tempdir_in(home.dir()),
        "make a recall folder in",
        home.dir(),
    )?;
    let mut by_job: BTreeMap<i64, Vec<Vec<u8>>> = BTreeMap::new();
    for (a, e) in &files {
        by_job.entry(a.stamp.job).or_default().push(e.clone());
    }
    let opts = RestoreOptions {
        to: scratch.path().to_path_buf(),
        overwrite: Overwrite::Always,
        order: match order {
            RecallOrder::Planned => ReadOrder::Planned,
            _ => ReadOrder::Block,
        },
        samples_as: Some("recall".into()),
        ..RestoreOptions::default()
    };
    let read = match order {
        RecallOrder::Asked => {
            let asked: Vec<(i64, Vec<u8>)> = (files.iter())
                .map(|(a, e)| (a.stamp.job, e.clone()))
                .collect();
            tapeloom_engine::restore_files_in_order(home, &asked, &opts)
        }
        _ => tapeloom_engine::restore_files(home, &by_job, &opts),
    };
    let report = match read {
        Ok(r) => r,
        Err(e) => {
            let why = e.to_string();
            progress.failed(files.len() as u64);
            out.failed
                .extend(files.into_iter().map(|(a, _)| (a.path, why.clone())));
            return Ok(());
        }
    };
    for job in by_job.keys() {
        if !out.jobs.contains(job) {
            out.jobs.push(*job);
        }
    }
    out.readings += 1;
    out.mounts += report.mounts;
    out.loads += report.loads;
    out.reordered += report.reordered;
    out.blocks_read += report.blocks_read;
    let add = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
    };
    out.modeled_seconds = add(out.modeled_seconds, report.modeled_seconds);
    out.planned_seconds = add(out.planned_seconds, report.planned_seconds);
    let bad: BTreeMap<Vec<u8>, String> = (report.errors.iter())
        .map(|(p, why)| (p.as_bytes().to_vec(), why.clone()))
        .collect();
    let roots = tapeloom_ops::hsm::roots(home)?;
    for (a, entry) in files {
        if let Some(why) = bad.get(&entry) {
            progress.failed(1);
            out.failed.push((a.path, why.clone()));
            continue;
        }
        let got = scratch.path().join(std::ffi::OsStr::from_bytes(&entry));
        let managed = crate::root_of(&roots, &a.path).is_some();
        let into = (a.path.as_path(), a.writer.as_ref(), managed);
        match put_back(home, &got, into, (&a.stamp, &entry))? {
            None => {
                progress.came_back(a.stamp.size);
                out.files += 1;
                out.bytes += a.stamp.size;
                out.recalled.push(a.path);
            }
            Some(why) => {
                progress.failed(1);
                out.failed.push((a.path, why));
            }
        }
    }
    Ok(())
}

/// Checks the restored copy at `got` against `stamp` and writes it into the
/// stub at `path` (recorded in the catalog when it is `managed`): none when it
/// came back, or why not.
fn put_back(
    home: &Home,
    got: &Path,
    (path, writer, managed): (&Path, Option<&std::fs::File>, bool),
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
    let facts = Facts::of(&io(f.metadata(), "read", path)?);
    let stub = Managed {
        path: path.to_path_buf(),
        facts,
        stamp: Some(stamp.clone()),
    };
    if stub.state() != State::Released {
        return Ok(Some("changed since it was released".into()));
    }
    // Marked first: a recall cut while it writes leaves a file that says so,
    // and is released again rather than taken for changed data.
    let mut marked = stamp.clone();
    marked.recalling = true;
    io(
        f.set_xattr(crate::STAMP_ATTR, &marked.encode()),
        "write the record of",
        path,
    )?;
    io(f.write_all_at(&data, 0), "write the data back into", path)?;
    io(f.sync_all(), "sync", path)?;
    set_times(f, path, crate::now_ns(), stamp.mtime_ns)?;
    let mut back = stamp.clone();
    back.state = State::Premigrated;
    back.recalling = false;
    io(
        f.set_xattr(crate::STAMP_ATTR, &back.encode()),
        "write the record of",
        path,
    )?;
    if managed {
        let after = Facts::of(&io(f.metadata(), "read", path)?);
        tapeloom_ops::hsm::recalled(home, path, &copy_of(&back, entry), after.ctime_ns)?;
    }
    Ok(None)
}
