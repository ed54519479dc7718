//! What a restore does with an object already at a restored path (`--overwrite`).
//!
//! "Identical" is decided from metadata alone, so a restore into a tree that already
//! holds the job reads no file back: a regular file is identical when its size and
//! its mtime, to the nanosecond, are the backed-up ones (restored files get their
//! mtime from tape, and an edit changes it); a symlink when it points where the
//! backed-up one did; a hard link when it is the same inode as its target; a fifo or
//! a device node when it is one of the same kind (and device number). An existing
//! directory is never in the way of a directory: the restore merges into it.

use std::fs::Metadata;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
use tapeloom_format::{Entry, EntryType};

/// When an object already at a restored path is replaced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Overwrite {
    /// Always: the backed-up object replaces it, identical or not.
    Always,
    /// When the backup's mtime is later than the existing object's.
    IfNewer,
    /// When it is not identical (size, mtime, type, link target).
    IfChanged,
    /// Never: an object that differs is kept and reported.
    #[default]
    Never,
}

/// Why an existing object was kept instead of the backed-up one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// It differs from the backed-up object (`--overwrite never`).
    Differs,
    /// It differs and is as new as the backed-up object or newer (`--overwrite if-newer`).
    NotOlder,
}

impl Kept {
    /// A short name for reports: `differs`, `not-older`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kept::Differs => "differs",
            Kept::NotOlder => "not-older",
        }
    }
}

/// What to do with one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Nothing is there, or the policy says replace it: place the entry.
    Place,
    /// What is there is identical: leave it, and count the entry restored.
    Same,
    /// Keep what is there, for this reason.
    Keep(Kept),
}

/// The verdict for entry `e` over `existing`, the metadata (not followed) of what is
/// at its path; `link_target` is the path of a hard link's target.
pub(crate) fn verdict(
    policy: Overwrite,
    e: &Entry,
    at: &Path,
    existing: &Metadata,
    link_target: Option<&Path>,
) -> Verdict {
    if e.kind == EntryType::Directory && existing.is_dir() {
        return Verdict::Place;
    }
    let same = identical(e, at, existing, link_target);
    match policy {
        Overwrite::Always => Verdict::Place,
        _ if same => Verdict::Same,
        Overwrite::IfChanged => Verdict::Place,
        Overwrite::Never => Verdict::Keep(Kept::Differs),
        Overwrite::IfNewer => {
            let theirs = (existing.mtime(), existing.mtime_nsec());
            if (e.mtime.secs, i64::from(e.mtime.nanos)) > theirs {
                Verdict::Place
            } else {
                Verdict::Keep(Kept::NotOlder)
            }
        }
    }
}

fn identical(e: &Entry, at: &Path, m: &Metadata, link_target: Option<&Path>) -> bool {
    let t = m.file_type();
    match e.kind {
        EntryType::Regular => {
            t.is_file()
                && m.len() == e.size
                && m.mtime() == e.mtime.secs
                && m.mtime_nsec() == i64::from(e.mtime.nanos)
        }
        EntryType::Symlink => {
            t.is_symlink()
                && std::fs::read_link(at)
                    .is_ok_and(|l| l.as_os_str().as_encoded_bytes() == e.link.as_slice())
        }
        EntryType::HardLink => link_target
            .and_then(|p| std::fs::symlink_metadata(p).ok())
            .is_some_and(|tm| !t.is_dir() && tm.dev() == m.dev() && tm.ino() == m.ino()),
        EntryType::Fifo => t.is_fifo(),
        EntryType::CharDevice => t.is_char_device() && m.rdev() == e.rdev,
        EntryType::BlockDevice => t.is_block_device() && m.rdev() == e.rdev,
        EntryType::Directory => t.is_dir(),
        EntryType::Socket => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tapeloom_format::Timestamp;

    fn entry(kind: EntryType, size: u64, mtime: Timestamp, link: &[u8]) -> Entry {
        Entry {
            kind,
            mode: 0o644,
            uid: 0,
            gid: 0,
            size,
            mtime,
            atime: mtime,
            rdev: 0,
            path: b"f".to_vec(),
            link: link.to_vec(),
            user: Vec::new(),
            group: Vec::new(),
            xattrs: Vec::new(),
            sparse: None,
            meta_only: false,
            facts: None,
        }
    }

    fn file_entry(size: u64, secs: i64, nanos: u32) -> Entry {
        entry(EntryType::Regular, size, Timestamp { secs, nanos }, b"")
    }

    #[test]
    fn each_policy_over_a_regular_file() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("f");
        std::fs::write(&p, b"12345").unwrap();
        let when = nix::sys::time::TimeSpec::new(1_000, 5);
        nix::sys::stat::utimensat(
            None,
            &p,
            &when,
            &when,
            nix::sys::stat::UtimensatFlags::NoFollowSymlink,
        )
        .unwrap();
        let m = std::fs::symlink_metadata(&p).unwrap();
        let v = |policy, e: &Entry| verdict(policy, e, &p, &m, None);
        let same = file_entry(5, 1_000, 5);
        let newer = file_entry(5, 1_000, 6);
        let older = file_entry(4, 999, 0);
        assert_eq!(v(Overwrite::Never, &same), Verdict::Same);
        assert_eq!(v(Overwrite::IfNewer, &same), Verdict::Same);
        assert_eq!(v(Overwrite::IfChanged, &same), Verdict::Same);
        assert_eq!(v(Overwrite::Always, &same), Verdict::Place);
        assert_eq!(v(Overwrite::Never, &newer), Verdict::Keep(Kept::Differs));
        assert_eq!(v(Overwrite::IfNewer, &newer), Verdict::Place);
        assert_eq!(v(Overwrite::IfNewer, &older), Verdict::Keep(Kept::NotOlder));
        assert_eq!(v(Overwrite::IfChanged, &older), Verdict::Place);
    }

    #[test]
    fn a_symlink_is_identical_by_its_target() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("l");
        std::os::unix::fs::symlink("there", &p).unwrap();
        let m = std::fs::symlink_metadata(&p).unwrap();
        let mut e = entry(EntryType::Symlink, 5, Timestamp::default(), b"there");
        assert_eq!(verdict(Overwrite::Never, &e, &p, &m, None), Verdict::Same);
        e.link = b"elsewhere".to_vec();
        let kept = Verdict::Keep(Kept::Differs);
        assert_eq!(verdict(Overwrite::Never, &e, &p, &m, None), kept);
    }
}
