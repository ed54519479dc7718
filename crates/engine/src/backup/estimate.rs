//! How many bytes each stream will send, estimated before its packer gets there, so
//! that a drive with `--concurrency auto` can start streams early enough that they
//! end together (see `ConcurrencyRule` in the weaver).
//!
//! The estimate is a quick walk of each source on a thread of its own, in the order
//! the drives take the streams, adding up the sizes of the regular files. It runs
//! while the job writes and asks only for metadata (one `lstat` per object, which
//! also warms the caches the stream's own walker then reads), so the job starts at
//! once and a stream's size is usually known long before the rule needs it, near the
//! end of the waiting queue. The walker's own running totals come too late for that:
//! they know a stream's size only when its walk, paced by the packer, is over. Sizes
//! are of the data; a sparse file counts its whole length and records add a little,
//! so a stream may send somewhat more or less than its estimate.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Each stream's estimated size in bytes, by stream id (from 1), as the walk finds
/// them.
#[derive(Debug)]
pub(crate) struct Estimates {
    bytes: Vec<AtomicU64>,
}

/// Not known yet.
const UNKNOWN: u64 = u64::MAX;

impl Estimates {
    /// `streams` streams, none known yet.
    pub fn new(streams: usize) -> Self {
        Estimates {
            bytes: (0..streams).map(|_| AtomicU64::new(UNKNOWN)).collect(),
        }
    }

    /// Stream `id`'s estimated size, once its walk is over.
    pub fn get(&self, id: u16) -> Option<u64> {
        let i = usize::from(id).checked_sub(1)?;
        let b = self.bytes.get(i)?.load(Ordering::Relaxed);
        (b != UNKNOWN).then_some(b)
    }

    /// Every stream's size added up, once all are known.
    pub fn total(&self) -> Option<u64> {
        let mut sum = 0u64;
        for b in &self.bytes {
            let b = b.load(Ordering::Relaxed);
            if b == UNKNOWN {
                return None;
            }
            sum = sum.saturating_add(b);
        }
        Some(sum)
    }

    fn set(&self, id: u16, bytes: u64) {
        if let Some(b) = usize::from(id)
            .checked_sub(1)
            .and_then(|i| self.bytes.get(i))
        {
            b.store(bytes.min(UNKNOWN - 1), Ordering::Relaxed);
        }
    }

    /// Walks `sources` (stream id and path, in the order the drives take them) on a
    /// thread of its own, leaving out the directories in `skip` (device, inode) as
    /// the backup's walker does. The walk stops when the job lets go of the
    /// estimates.
    pub fn start(self: &Arc<Self>, sources: Vec<(u16, PathBuf)>, skip: Vec<(u64, u64)>) {
        let me = Arc::downgrade(self);
        std::thread::spawn(move || {
            let wanted = || me.strong_count() > 0;
            for (id, path) in sources {
                let made = crate::backup::generated::bytes(&path);
                let Some(b) = made.or_else(|| tree_bytes(&path, &skip, &wanted)) else {
                    return;
                };
                match me.upgrade() {
                    Some(e) => e.set(id, b),
                    None => return,
                }
            }
        });
    }
}

/// The bytes of the regular files under `path` (itself, if it is one); `None` when
/// they are no longer `wanted`. What cannot be read counts nothing: the backup
/// reports it.
fn tree_bytes(path: &Path, skip: &[(u64, u64)], wanted: &dyn Fn() -> bool) -> Option<u64> {
    let mut total = 0u64;
    let mut dirs = vec![path.to_path_buf()];
    let mut first = true;
    while let Some(d) = dirs.pop() {
        if !wanted() {
            return None;
        }
        let Ok(m) = std::fs::symlink_metadata(&d) else {
            continue;
        };
        if m.is_file() && first {
            return Some(m.len());
        }
        first = false;
        if skip.contains(&(m.dev(), m.ino())) {
            continue;
        }
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => dirs.push(e.path()),
                Ok(t) if t.is_file() => {
                    total = total.saturating_add(e.metadata().map(|m| m.len()).unwrap_or(0));
                }
                _ => {}
            }
        }
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_add_up_regular_files_and_skip_the_home() {
        let t = tempfile::tempdir().unwrap();
        let (a, home) = (t.path().join("a"), t.path().join("a/home"));
        std::fs::create_dir_all(a.join("x/y")).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(a.join("one"), vec![0u8; 1000]).unwrap();
        std::fs::write(a.join("x/y/two"), vec![0u8; 234]).unwrap();
        std::fs::write(home.join("tape"), vec![0u8; 5000]).unwrap();
        std::os::unix::fs::symlink(a.join("one"), a.join("link")).unwrap();
        let m = std::fs::metadata(&home).unwrap();
        let skip = vec![(m.dev(), m.ino())];
        let yes = || true;
        assert_eq!(tree_bytes(&a, &skip, &yes), Some(1234));
        assert_eq!(tree_bytes(&a, &[], &yes), Some(6234));
        assert_eq!(tree_bytes(&a.join("one"), &skip, &yes), Some(1000));
        assert_eq!(tree_bytes(&t.path().join("none"), &skip, &yes), Some(0));
        assert_eq!(tree_bytes(&a, &skip, &|| false), None);

        let e = Arc::new(Estimates::new(2));
        assert_eq!(e.get(1), None);
        e.start(vec![(2, a.join("x")), (1, a.clone())], skip);
        let t0 = std::time::Instant::now();
        while e.get(1).is_none() && t0.elapsed() < std::time::Duration::from_secs(10) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!((e.get(1), e.get(2)), (Some(1234), Some(234)));
        assert_eq!((e.get(0), e.get(3)), (None, None));
    }
}
