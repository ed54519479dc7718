//! What a job's sources read, and for an incremental or differential job what
//! changed since its base.
//!
//! The base is the set's tree at the base job, from the catalog: for every path its
//! type, size, mtime, ctime, inode, mode and owner. A reader asks the file system
//! for an object's status (one `statat`, no open) and compares:
//!
//! - same type and inode, same size and mtime (data), same ctime, mode and owner:
//!   **unchanged**, and the object is neither opened nor read;
//! - a regular file with the same data facts and anything else changed (a chmod,
//!   a chown, an extended attribute; all of these move the ctime): **metadata
//!   only**, its entry without data;
//! - anything else, and a path the base lacks: **changed**, backed up whole.
//!
//! Every path the walkers list is seen; a base path not seen, and not under a
//! directory that could not be listed, is **deleted**.

use crate::error::{Error, Result};
use crate::home::Home;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use tapeloom_catalog::{Catalog, Job};
use tapeloom_format::{EntryType, Level};
pub use tapeloom_tree::{BaseRow, BaseTree};

/// The set, level and base a job runs with.
#[derive(Debug, Clone)]
pub struct SetChoice {
    /// The set.
    pub set: String,
    /// The level it runs at.
    pub level: Level,
    /// The job its changes are relative to (none for a full).
    pub base: Option<Job>,
    /// Why it runs at a level other than the one asked for.
    pub promoted: Option<String>,
}

/// Chooses the level and base of a job of set `set` that asked for `asked`, and
/// reads the base's tree: an incremental is relative to the set's last job that
/// ended, a differential to its last full; without one, or when the base's chain
/// is no longer whole in the catalog, the job is a full and says why.
pub(crate) fn choose(home: &Home, set: &str, asked: Level) -> Result<(SetChoice, Scan)> {
    choose_in(&home.catalog, &|| home.connect(), set, asked)
}

/// [`choose`] with the catalog `cat`, `connect` making another connection to it.
fn choose_in(
    cat: &Catalog,
    connect: &dyn Fn() -> Result<Catalog>,
    set: &str,
    asked: Level,
) -> Result<(SetChoice, Scan)> {
    let full = |why: String| SetChoice {
        set: set.to_string(),
        level: Level::Full,
        base: None,
        promoted: Some(why),
    };
    if asked == Level::Full {
        let c = SetChoice {
            promoted: None,
            ..full(String::new())
        };
        return Ok((c, Scan::default()));
    }
    let base = cat.last_in_set(set, asked == Level::Differential)?;
    let Some(base) = base else {
        let why = format!(
            "set {set} has no full backup that ended, so this {} runs as a full",
            asked.name()
        );
        return Ok((full(why), Scan::default()));
    };
    match Scan::against_in(cat, connect, base.id) {
        Ok(scan) => {
            let c = SetChoice {
                set: set.to_string(),
                level: asked,
                base: Some(base),
                promoted: None,
            };
            Ok((c, scan))
        }
        Err(crate::error::Error::Catalog(tapeloom_catalog::CatalogError::BrokenChain {
            job,
            base: gone,
        })) => {
            let why = format!(
                "set {set}'s job {job} is relative to job {gone}, which is no longer in the catalog, so this {} runs as a full",
                asked.name()
            );
            Ok((full(why), Scan::default()))
        }
        Err(e) => Err(e),
    }
}

/// What the base knew of a path.
pub(crate) type Prev = tapeloom_catalog::FileFacts;

/// What the file system says of an object now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Now {
    pub kind: EntryType,
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub ino: u64,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

/// How an object compares with its base.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Unchanged,
    MetaOnly,
    Changed,
}

/// Compares an object with what its base knew.
pub(crate) fn judge(p: &Prev, n: &Now) -> Verdict {
    let hard = EntryType::HardLink as u8;
    let regular = n.kind == EntryType::Regular;
    let same_kind = p.kind == n.kind as u8 || (regular && p.kind == hard);
    // Rows of jobs written before change facts were kept know neither.
    if !same_kind || p.ino == 0 || p.ctime_ns == 0 || p.ino != n.ino {
        return Verdict::Changed;
    }
    let data_same = match n.kind {
        EntryType::Regular => n.mtime_ns == p.mtime_ns && (p.kind == hard || n.size == p.size),
        // A symlink's target and a device's number change only with a new inode
        // or a new ctime.
        EntryType::Symlink | EntryType::CharDevice | EntryType::BlockDevice => {
            n.ctime_ns == p.ctime_ns
        }
        _ => n.mtime_ns == p.mtime_ns,
    };
    if !data_same {
        return Verdict::Changed;
    }
    let meta_same =
        n.ctime_ns == p.ctime_ns && n.mode == p.mode && n.uid == p.uid && n.gid == p.gid;
    match (meta_same, regular) {
        (true, _) => Verdict::Unchanged,
        (false, true) => Verdict::MetaOnly,
        (false, false) => Verdict::Changed,
    }
}

/// The base's paths in `range`: the chain `ids` merged in order, each job's
/// deletions taken away before its rows are laid on.
fn shard(
    cat: &Catalog,
    ids: &[i64],
    range: (Option<&[u8]>, Option<&[u8]>),
    rows: u64,
) -> Result<Shard> {
    let mut map = Shard::with_capacity(usize::try_from(rows).unwrap_or(0).min(1 << 26));
    let within = |p: &[u8]| range.0.is_none_or(|f| p >= f) && range.1.is_none_or(|t| p < t);
    for &id in ids {
        for (p, _) in cat.deletions(id)? {
            if within(&p) {
                map.remove(&p);
            }
        }
        cat.for_each_facts(id, range, |path, prev| {
            map.insert(path, (prev, AtomicBool::new(false)));
        })?;
    }
    Ok(map)
}

/// Counts of a job's reading of its sources.
#[derive(Debug, Default)]
pub(crate) struct ScanCounts {
    /// Bytes read from source files.
    pub read_bytes: AtomicU64,
    /// Regular files opened to be read.
    pub opened: AtomicU64,
    /// Objects unchanged since the base, neither opened nor stored.
    pub unchanged: AtomicU64,
    /// Regular files stored as metadata alone.
    pub meta_only: AtomicU64,
}

/// What a base knew of the paths in one range, and whether a walker saw each.
type Shard = HashMap<Vec<u8>, (Prev, AtomicBool)>;

/// Rows of a base below this many are read by one thread; above, by two, each a
/// half of the paths.
const SPLIT_ROWS: u64 = 20_000;

/// A job's reading of its sources: counts, and for a job with a base what the base
/// knew and which paths the walkers saw.
#[derive(Debug, Default)]
pub struct Scan {
    /// The base's paths by range: each shard with the first path it holds (none
    /// for the first), in path order.
    base: Option<Vec<(Option<Vec<u8>>, Shard)>>,
    unlisted: Mutex<Vec<Vec<u8>>>,
    pub(crate) counts: ScanCounts,
    /// Only these objects are stored, when a backup stores only some.
    pub(crate) only: Option<std::sync::Arc<super::only::Only>>,
}

/// What a job's reading of its sources came to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanFigures {
    /// Objects unchanged since the base, neither opened nor stored.
    pub unchanged: u64,
    /// Regular files stored as metadata alone.
    pub meta_only: u64,
    /// Regular files opened to be read.
    pub opened: u64,
    /// Bytes read from source files.
    pub read_bytes: u64,
}

/// Chooses the level and base of a job of set `set` that asked for `level`, in the
/// catalog of home `dir` (read without the home's lock), and reads the base's tree
/// (empty for a full): see [`choose`].
pub fn choose_set(dir: &std::path::Path, set: &str, level: Level) -> Result<(SetChoice, BaseTree)> {
    let cat = Home::open_catalog_unlocked(dir)?;
    let (choice, scan) = choose_in(&cat, &|| Home::open_catalog_unlocked(dir), set, level)?;
    Ok((choice, scan.tree()))
}

impl Scan {
    /// A scan that compares with `tree`, a base's tree as [`choose_set`] read it.
    pub fn from_tree(tree: BaseTree) -> Scan {
        let mut all = Shard::with_capacity(tree.rows.len());
        for r in tree.rows {
            let prev = Prev {
                kind: r.kind,
                size: r.size,
                mtime_ns: r.mtime_ns,
                ctime_ns: r.ctime_ns,
                ino: r.ino,
                mode: r.mode,
                uid: r.uid,
                gid: r.gid,
                link: r.link,
            };
            all.insert(r.path, (prev, AtomicBool::new(false)));
        }
        Scan {
            base: Some(vec![(None, all)]),
            ..Scan::default()
        }
    }

    /// The base's tree, in path order (empty without a base).
    fn tree(&self) -> BaseTree {
        let mut rows: Vec<BaseRow> = (self.base.iter().flatten())
            .flat_map(|(_, s)| s.iter())
            .map(|(path, (p, _))| BaseRow {
                path: path.clone(),
                kind: p.kind,
                size: p.size,
                mtime_ns: p.mtime_ns,
                ctime_ns: p.ctime_ns,
                ino: p.ino,
                mode: p.mode,
                uid: p.uid,
                gid: p.gid,
                link: p.link.clone(),
            })
            .collect();
        rows.sort_by(|a, b| a.path.cmp(&b.path));
        BaseTree { rows }
    }

    /// What the job's reading of its sources came to so far.
    pub fn figures(&self) -> ScanFigures {
        let c = &self.counts;
        ScanFigures {
            unchanged: c.unchanged.load(Ordering::Relaxed),
            meta_only: c.meta_only.load(Ordering::Relaxed),
            opened: c.opened.load(Ordering::Relaxed),
            read_bytes: c.read_bytes.load(Ordering::Relaxed),
        }
    }

    /// A scan that compares with the set's tree at job `base`: its chain's rows
    /// laid on in order, each job's deletions taken away first (as
    /// `Catalog::tree_at` merges them, keeping only what comparing needs). A large
    /// base is read by two threads at once, each half of the paths on a
    /// connection of its own.
    fn against_in(cat: &Catalog, connect: &dyn Fn() -> Result<Catalog>, base: i64) -> Result<Scan> {
        let chain = cat.chain(base)?;
        let ids: Vec<i64> = chain.iter().map(|j| j.id).collect();
        let rows: u64 = chain.iter().map(|j| j.files).sum();
        let biggest = chain.iter().max_by_key(|j| j.files).map_or(base, |j| j.id);
        let mid = match rows >= SPLIT_ROWS {
            true => cat.nth_path(
                biggest,
                chain.iter().map(|j| j.files).max().unwrap_or(0) / 2,
            )?,
            false => None,
        };
        let Some(mid) = mid else {
            let all = shard(cat, &ids, (None, None), rows)?;
            return Ok(Scan {
                base: Some(vec![(None, all)]),
                ..Scan::default()
            });
        };
        let other = connect()?;
        let (lo, hi) = std::thread::scope(|s| {
            let (ids, mid) = (&ids, &mid);
            let hi = s.spawn(move || shard(&other, ids, (Some(mid), None), rows / 2));
            let lo = shard(cat, ids, (None, Some(mid)), rows / 2);
            let hi = hi.join().unwrap_or(Err(Error::Panicked {
                what: "a reader of the base",
            }));
            (lo, hi)
        });
        Ok(Scan {
            base: Some(vec![(None, lo?), (Some(mid), hi?)]),
            ..Scan::default()
        })
    }

    /// The shard holding `path`.
    fn shard_of(&self, path: &[u8]) -> Option<&Shard> {
        let shards = self.base.as_ref()?;
        shards
            .iter()
            .rev()
            .find(|(from, _)| from.as_deref().is_none_or(|f| path >= f))
            .map(|(_, s)| s)
    }

    /// Whether the job has a base.
    pub(crate) fn has_base(&self) -> bool {
        self.base.is_some()
    }

    /// What the base knew of `path`.
    pub(crate) fn prev(&self, path: &[u8]) -> Option<&Prev> {
        self.shard_of(path)?.get(path).map(|(p, _)| p)
    }

    /// A walker listed `path`: marked seen; what the base knew of it.
    pub(crate) fn see(&self, path: &[u8]) -> Option<&Prev> {
        let (prev, seen) = self.shard_of(path)?.get(path)?;
        seen.store(true, Ordering::Relaxed);
        Some(prev)
    }

    /// The directory `path` (or a source root) could not be listed: what the base
    /// had under it is not taken for deleted.
    pub(crate) fn unlisted(&self, path: &[u8]) {
        if self.base.is_some() {
            if let Ok(mut u) = self.unlisted.lock() {
                u.push(path.to_vec());
            }
        }
    }

    /// Adds `n` bytes read from a source file.
    pub(crate) fn read(&self, n: usize) {
        self.counts
            .read_bytes
            .fetch_add(n as u64, Ordering::Relaxed);
    }

    /// The base's paths the walkers did not see (with their entry types), in path
    /// order; none without a base.
    pub fn deletions(&self) -> Vec<(Vec<u8>, u8)> {
        let Some(base) = &self.base else {
            return Vec::new();
        };
        let unlisted = match self.unlisted.lock() {
            Ok(u) => u.clone(),
            Err(p) => p.into_inner().clone(),
        };
        let under = |p: &[u8], dir: &[u8]| {
            dir == b"." || p == dir || (p.starts_with(dir) && p.get(dir.len()) == Some(&b'/'))
        };
        let mut out: Vec<(Vec<u8>, u8)> = base
            .iter()
            .flat_map(|(_, s)| s.iter())
            .filter(|(_, (_, seen))| !seen.load(Ordering::Relaxed))
            .filter(|(p, _)| !unlisted.iter().any(|d| under(p, d)))
            .map(|(p, (prev, _))| (p.clone(), prev.kind))
            .collect();
        out.sort();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prev() -> Prev {
        Prev {
            kind: 1,
            size: 10,
            mtime_ns: 100,
            ctime_ns: 200,
            ino: 7,
            mode: 0o644,
            uid: 1,
            gid: 1,
            link: Vec::new(),
        }
    }
    fn now() -> Now {
        Now {
            kind: EntryType::Regular,
            size: 10,
            mtime_ns: 100,
            ctime_ns: 200,
            ino: 7,
            mode: 0o644,
            uid: 1,
            gid: 1,
        }
    }

    #[test]
    fn verdicts() {
        assert_eq!(judge(&prev(), &now()), Verdict::Unchanged);
        let chmod = Now {
            mode: 0o600,
            ctime_ns: 300,
            ..now()
        };
        assert_eq!(judge(&prev(), &chmod), Verdict::MetaOnly);
        let xattr = Now {
            ctime_ns: 300,
            ..now()
        };
        assert_eq!(judge(&prev(), &xattr), Verdict::MetaOnly);
        let written = Now {
            mtime_ns: 150,
            ctime_ns: 300,
            ..now()
        };
        assert_eq!(judge(&prev(), &written), Verdict::Changed);
        let grown = Now { size: 11, ..now() };
        assert_eq!(judge(&prev(), &grown), Verdict::Changed);
        let replaced = Now { ino: 8, ..now() };
        assert_eq!(judge(&prev(), &replaced), Verdict::Changed);
        let dir = Now {
            kind: EntryType::Directory,
            ..now()
        };
        assert_eq!(judge(&prev(), &dir), Verdict::Changed);
        // A row without change facts (an older job) cannot be judged unchanged.
        let old = Prev {
            ctime_ns: 0,
            ino: 0,
            ..prev()
        };
        assert_eq!(judge(&old, &now()), Verdict::Changed);
        // A hard link's row keeps no size.
        let link = Prev {
            kind: EntryType::HardLink as u8,
            size: 0,
            ..prev()
        };
        assert_eq!(judge(&link, &now()), Verdict::Unchanged);
        // A directory whose mode changed is stored again, whole (it has no data).
        let d = Prev { kind: 2, ..prev() };
        let d_now = Now {
            kind: EntryType::Directory,
            mode: 0o700,
            ctime_ns: 300,
            ..now()
        };
        assert_eq!(judge(&d, &d_now), Verdict::Changed);
    }

    #[test]
    fn unseen_paths_are_deleted_unless_under_an_unlisted_directory() {
        let mut base = HashMap::new();
        for p in ["a", "a/x", "b", "b/y", "c", "bb"] {
            base.insert(p.as_bytes().to_vec(), (prev(), AtomicBool::new(false)));
        }
        let s = Scan {
            base: Some(vec![(None, base)]),
            ..Scan::default()
        };
        s.see(b"a");
        s.see(b"bb");
        s.unlisted(b"b");
        let d: Vec<Vec<u8>> = s.deletions().into_iter().map(|(p, _)| p).collect();
        assert_eq!(d, vec![b"a/x".to_vec(), b"c".to_vec()]);
    }

    #[test]
    fn a_base_tree_rebuilds_the_scan_it_came_from() {
        let mut base = HashMap::new();
        for (p, ino) in [("b", 2), ("a", 1), ("a/x", 3)] {
            let facts = Prev { ino, ..prev() };
            base.insert(p.as_bytes().to_vec(), (facts, AtomicBool::new(false)));
        }
        let s = Scan {
            base: Some(vec![(None, base)]),
            ..Scan::default()
        };
        let tree = s.tree();
        let paths: Vec<&[u8]> = tree.rows.iter().map(|r| r.path.as_slice()).collect();
        assert_eq!(paths, [&b"a"[..], b"a/x", b"b"]);
        assert!(tree.holds(b"a/x") && !tree.holds(b"c"));
        // The tree as the client builds it from the rows the server sent.
        let back = Scan::from_tree(BaseTree {
            rows: tree.rows.clone(),
        });
        assert_eq!(back.prev(b"a/x").map(|p| p.ino), Some(3));
        assert_eq!(back.see(b"b"), s.prev(b"b"));
        let d: Vec<Vec<u8>> = back.deletions().into_iter().map(|(p, _)| p).collect();
        assert_eq!(d, vec![b"a".to_vec(), b"a/x".to_vec()]);
        // A full's scan has no base, and no deletions.
        assert!(Scan::default().tree().rows.is_empty());
    }
}
