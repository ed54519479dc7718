//! The backup's walker, for whatever reads sources as a backup reads them (the
//! read-rate assessment of the measuring tools): the regular files under a folder
//! in the order a backup takes them (depth first, a folder before its contents,
//! names in byte order, symlinks not followed), each opened by name in its folder
//! as a backup opens it.

use crate::pack::source::{walk_contents, Folder, Found, Walked};
use rustix::fs::{FileType, OFlags};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A regular file the walker found.
pub struct WalkedFile(Found);

impl WalkedFile {
    /// Its path on the host.
    pub fn path(&self) -> PathBuf {
        self.0.abs()
    }

    /// Opens it for reading, by name in its folder (by path when the walker no
    /// longer keeps the folder open); with `direct`, past the page cache
    /// (`O_DIRECT`).
    pub fn open(&self, direct: bool) -> std::io::Result<File> {
        let mut flags = OFlags::RDONLY | OFlags::CLOEXEC;
        if direct {
            flags |= OFlags::DIRECT;
        }
        self.0.open(flags)
    }
}

/// What the walker reports, in walk order.
pub enum Walk {
    /// A regular file.
    File(WalkedFile),
    /// A folder whose contents could not be listed: its path on the host, and why.
    Unlisted {
        /// Its path, as bytes.
        path: Vec<u8>,
        /// Why it could not be listed.
        why: String,
    },
}

/// Walks the folder `dir` (followed when it is a symlink, unlike every symlink below
/// it) and hands its regular files and the folders it could not list to `sink`, in
/// the order a backup takes them; symlinks, devices, sockets and pipes are left
/// out. Stops with the first error `sink` returns, which is the inner result.
/// The outer error is `dir` itself not opening as a folder.
pub fn walk_files<E>(
    dir: &Path,
    sink: &mut impl FnMut(Walk) -> Result<(), E>,
) -> std::io::Result<Result<(), E>> {
    let root = Arc::new(Folder::open(dir, b".".to_vec(), true)?);
    Ok(walk_contents(&root, &[], &mut |w| match w {
        Walked::Found(f) if f.kind == FileType::RegularFile => sink(Walk::File(WalkedFile(f))),
        Walked::Found(_) => Ok(()),
        Walked::Unlisted(path, why, _) => sink(Walk::Unlisted { path, why }),
    }))
}
