//! What a job's reading of its sources came to, and for an incremental or
//! differential job what changed since its base.
//!
//! The base is the set's tree at the base job (read from the catalog by the
//! engine, or sent by a server): for every path its type, size, mtime, ctime,
//! inode, mode and owner. A reader asks the file system for an object's status
//! (one `statat`, no open) and compares:
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

use crate::{BaseRow, BaseTree};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use tapeloom_format::EntryType;

/// What the base knew of a path: what comparing an object with it needs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Prev {
    /// Entry type code.
    pub kind: u8,
    /// Logical size.
    pub size: u64,
    /// Modification time in nanoseconds.
    pub mtime_ns: i64,
    /// Status change time in nanoseconds (0 when not known).
    pub ctime_ns: i64,
    /// Inode number (0 when not known).
    pub ino: u64,
    /// Permission bits.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// A hard link's target (empty for every other type).
    pub link: Vec<u8>,
}

/// What the file system says of an object now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
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
pub enum Verdict {
    Unchanged,
    MetaOnly,
    Changed,
}

/// Compares an object with what its base knew.
pub fn judge(p: &Prev, n: &Now) -> Verdict {
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

/// Counts of a job's reading of its sources.
#[derive(Debug, Default)]
pub struct ScanCounts {
    /// Bytes read from source files.
    pub read_bytes: AtomicU64,
    /// Regular files opened to be read.
    pub opened: AtomicU64,
    /// Objects unchanged since the base, neither opened nor stored.
    pub unchanged: AtomicU64,
    /// Regular files stored as metadata alone.
    pub meta_only: AtomicU64,
}

/// What a base knew of each path of one range of paths.
pub type BaseRange = HashMap<Vec<u8>, Prev>;

/// What a base knew of the paths in one range, and whether a walker saw each.
type Shard = HashMap<Vec<u8>, (Prev, AtomicBool)>;

/// A job's reading of its sources: counts, and for a job with a base what the base
/// knew and which paths the walkers saw.
#[derive(Debug, Default)]
pub struct Scan {
    /// The base's paths by range: each shard with the first path it holds (none
    /// for the first), in path order.
    base: Option<Vec<(Option<Vec<u8>>, Shard)>>,
    unlisted: Mutex<Vec<Vec<u8>>>,
    pub counts: ScanCounts,
    /// Only these objects are stored, when a backup stores only some.
    pub only: Option<std::sync::Arc<super::only::Only>>,
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

impl Scan {
    /// A scan that compares with `tree`, a base's tree as the engine's
    /// `choose_set` read it.
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
    pub fn tree(&self) -> BaseTree {
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

    /// A scan that compares with a base read in ranges of paths: each range with
    /// the first path it holds (none for the first), in path order, and what the
    /// base knew of each of its paths.
    pub fn from_ranges(ranges: Vec<(Option<Vec<u8>>, BaseRange)>) -> Scan {
        let shards = (ranges.into_iter())
            .map(|(from, paths)| {
                let shard = (paths.into_iter())
                    .map(|(p, prev)| (p, (prev, AtomicBool::new(false))))
                    .collect();
                (from, shard)
            })
            .collect();
        Scan {
            base: Some(shards),
            ..Scan::default()
        }
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
    pub fn has_base(&self) -> bool {
        self.base.is_some()
    }

    /// What the base knew of `path`.
    pub fn prev(&self, path: &[u8]) -> Option<&Prev> {
        self.shard_of(path)?.get(path).map(|(p, _)| p)
    }

    /// A walker listed `path`: marked seen; what the base knew of it.
    pub fn see(&self, path: &[u8]) -> Option<&Prev> {
        let (prev, seen) = self.shard_of(path)?.get(path)?;
        seen.store(true, Ordering::Relaxed);
        Some(prev)
    }

    /// The directory `path` (or a source root) could not be listed: what the base
    /// had under it is not taken for deleted.
    pub fn unlisted(&self, path: &[u8]) {
        if self.base.is_some() {
            if let Ok(mut u) = self.unlisted.lock() {
                u.push(path.to_vec());
            }
        }
    }

    /// Adds `n` bytes read from a source file.
    pub fn read(&self, n: usize) {
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
