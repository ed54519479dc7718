//! `hsm status`: files and bytes in each state, per managed folder and, when
//! asked, per folder of the tree; and `hsm reconcile`: the catalog made to
//! agree with the files' own records (or, with `--check`, only told how it
//! differs). Neither reads a file's data: a stub is never recalled by them.

use crate::error::Result;
use crate::release::set_times;
use crate::{copy_of, files_under, root_path, roots, targets, Managed, State};
use std::collections::{BTreeMap, HashSet};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use tapeloom_engine::Home;
use tapeloom_ops::hsm::CopiesOnTape;

/// Files and bytes in each state, and bytes on disk.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Files and their bytes (logical size), by state.
    pub by_state: BTreeMap<State, (u64, u64)>,
    /// Bytes the files take on disk.
    pub disk_bytes: u64,
    /// Files on tape (premigrated or released), by how many copies of their
    /// job are on tape: the job's own cartridges and each whole further copy.
    pub by_copies: BTreeMap<u32, u64>,
}

impl Counts {
    fn add(&mut self, m: &Managed, copies: Option<u32>) {
        let e = self.by_state.entry(m.state()).or_default();
        e.0 += 1;
        e.1 += m.facts.size;
        self.disk_bytes += m.facts.blocks * 512;
        if let Some(n) = copies {
            *self.by_copies.entry(n).or_default() += 1;
        }
    }
}

/// How many copies of the job a file on tape is in, each job asked once.
fn copies_of(home: &Home, m: &Managed, seen: &mut CopiesOnTape) -> Result<Option<u32>> {
    if !matches!(m.state(), State::Premigrated | State::Released) {
        return Ok(None);
    }
    let Some(stamp) = &m.stamp else {
        return Ok(None);
    };
    Ok(Some(seen.of(home, stamp.job)?))
}

/// What `hsm status` reports.
#[derive(Debug, Clone, Default)]
pub struct Status {
    /// Each managed folder asked, with its counts.
    pub roots: Vec<(PathBuf, Counts)>,
    /// With `by_folder`, each folder holding files, with the counts of the files
    /// directly in it.
    pub folders: Vec<(PathBuf, Counts)>,
    /// Files that could not be looked at, with why.
    pub skipped: Vec<(PathBuf, String)>,
}

/// Counts the managed files under `paths` (every managed folder when none).
pub fn status(home: &Home, paths: &[PathBuf], by_folder: bool) -> Result<Status> {
    let roots = roots(home)?;
    let mut out = Status::default();
    let mut folders: BTreeMap<PathBuf, Counts> = BTreeMap::new();
    let mut seen = CopiesOnTape::default();
    for top in targets(&roots, paths)? {
        let mut counts = Counts::default();
        for m in files_under(std::slice::from_ref(&top), &mut |p, why| {
            out.skipped.push((p.to_path_buf(), why))
        }) {
            let copies = copies_of(home, &m, &mut seen)?;
            counts.add(&m, copies);
            if by_folder {
                let dir = m.path.parent().unwrap_or(Path::new("/")).to_path_buf();
                folders.entry(dir).or_default().add(&m, copies);
            }
        }
        out.roots.push((top, counts));
    }
    out.folders = folders.into_iter().collect();
    Ok(out)
}

/// What `hsm reconcile` found (and, without `--check`, set right).
#[derive(Debug, Clone, Default)]
pub struct Reconciled {
    /// Files whose catalog record was missing or differed from their own.
    pub recorded: Vec<PathBuf>,
    /// Catalog records of files that are gone or resident.
    pub forgotten: Vec<PathBuf>,
    /// Stubs whose modification time was not yet their copy's (a release cut
    /// before it put the times back).
    pub times: Vec<PathBuf>,
    /// Released files that still held data blocks or said a recall was
    /// writing them (a release cut before its hole was punched, or a recall
    /// cut while it wrote): released again.
    pub punched: Vec<PathBuf>,
    /// Files that could not be looked at, with why.
    pub skipped: Vec<(PathBuf, String)>,
}

impl Reconciled {
    /// Whether the catalog and the files agree.
    pub fn clean(&self) -> bool {
        self.recorded.is_empty()
            && self.forgotten.is_empty()
            && self.times.is_empty()
            && self.punched.is_empty()
    }
}

/// Makes the catalog agree with the managed files' records (`check`: only
/// says where they differ).
pub fn reconcile(home: &Home, check: bool) -> Result<Reconciled> {
    let roots = roots(home)?;
    let mut out = Reconciled::default();
    let mut seen: HashSet<Vec<u8>> = HashSet::new();
    let mut entries = tapeloom_ops::hsm::Entries::default();
    for root in &roots {
        let top = root_path(root);
        let files = files_under(std::slice::from_ref(&top), &mut |p, why| {
            out.skipped.push((p.to_path_buf(), why))
        });
        for m in files {
            let Some(stamp) = &m.stamp else { continue };
            let key = m.path.as_os_str().as_bytes().to_vec();
            seen.insert(key.clone());
            let state = m.state();
            if state == State::Released && m.facts.mtime_ns != stamp.mtime_ns {
                out.times.push(m.path.clone());
                if !check {
                    let f = crate::error::io(std::fs::File::open(&m.path), "open", &m.path)?;
                    set_times(&f, &m.path, m.facts.atime_ns, stamp.mtime_ns)?;
                }
            }
            if state == State::Released && (m.facts.blocks > 0 || stamp.recalling) {
                out.punched.push(m.path.clone());
                if !check {
                    crate::release::release_again(&m.path, stamp)?;
                }
            }
            let Some(entry) = entries.of(home, &m.path, (stamp.job, stamp.ino))? else {
                let why = format!("job {} has no entry of it", stamp.job);
                out.skipped.push((m.path.clone(), why));
                continue;
            };
            let copy = (&copy_of(stamp, &entry), state.as_str());
            if tapeloom_ops::hsm::reconcile_file(home, &m.path, copy, m.facts.ctime_ns, check)? {
                out.recorded.push(m.path.clone());
            }
        }
    }
    out.forgotten = tapeloom_ops::hsm::forget_unseen(home, &seen, check)?;
    Ok(out)
}
