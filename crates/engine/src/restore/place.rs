//! Putting objects back on the file system, safely under one root, with their metadata.

use crate::error::{io, sys, PlaceError, Result};
use crate::restore::overwrite::{self, Overwrite, Verdict};
use nix::sys::stat::{utimensat, Mode, SFlag, UtimensatFlags};
use nix::sys::time::TimeSpec;
use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use tapeloom_format::{Entry, EntryType};

/// Creates objects under a root and never outside it: tape paths are relative and
/// clean (checked when decoded), and no parent on the way may be a symlink.
pub(crate) struct Placer {
    root: PathBuf,
    known_dirs: HashSet<Vec<u8>>,
    /// Directories this restore created (the root as `""`): nothing was in them, so
    /// their entries need no look for an object in the way.
    fresh_dirs: HashSet<Vec<u8>>,
    owners: Owners,
    overwrite: Overwrite,
}

/// Maps the owner names and numbers on tape to this host's, with a cache; `None`
/// when not running as root (ownership is then left as it is, as tar does).
pub(crate) struct Owners {
    as_root: bool,
    users: HashMap<(Vec<u8>, u32), u32>,
    groups: HashMap<(Vec<u8>, u32), u32>,
}

impl Owners {
    pub fn new() -> Self {
        Owners {
            as_root: nix::unistd::geteuid().is_root(),
            users: HashMap::new(),
            groups: HashMap::new(),
        }
    }

    fn of(&mut self, e: &Entry) -> Option<(u32, u32)> {
        if !self.as_root {
            return None;
        }
        let uid = *self
            .users
            .entry((e.user.clone(), e.uid))
            .or_insert_with(|| uid_of(&e.user, e.uid));
        let gid = *self
            .groups
            .entry((e.group.clone(), e.gid))
            .or_insert_with(|| gid_of(&e.group, e.gid));
        Some((uid, gid))
    }
}

/// Creates regular file `p` for entry `e`, replacing a non-directory in the way, never
/// following a symlink.
pub(crate) fn create_file(p: &Path, e: &Entry) -> Result<File> {
    let open = || {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .mode(0o600)
            .open(p)
    };
    let f = match open() {
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
            clear(p, &e.path)?;
            open()
        }
        r => r,
    };
    let f = io(f, || format!("create {}", p.display()))?;
    if e.sparse.is_some() {
        io(f.set_len(e.size), || format!("size {}", p.display()))?;
    }
    Ok(f)
}

/// Removes what is in the way of a new non-directory at `p`.
fn clear(p: &Path, rel: &[u8]) -> Result<()> {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => Err(PlaceError::DirectoryInTheWay { path: show(rel) }.into()),
        Ok(_) => io(std::fs::remove_file(p), || {
            format!("replace {}", p.display())
        }),
        Err(_) => Ok(()),
    }
}

/// Sets the metadata of a regular file through its open descriptor, which saves the
/// path lookups that dominate small-file restores.
pub(crate) fn finish_file(f: &File, p: &Path, e: &Entry, owners: &mut Owners) -> Result<()> {
    for (name, value) in &e.xattrs {
        let _ = xattr::FileExt::set_xattr(f, OsStr::from_bytes(name), value);
    }
    if let Some((uid, gid)) = owners.of(e) {
        io(std::os::unix::fs::fchown(f, Some(uid), Some(gid)), || {
            format!("chown {}", p.display())
        })?;
    }
    io(
        f.set_permissions(std::fs::Permissions::from_mode(e.mode)),
        || format!("chmod {}", p.display()),
    )?;
    let ts = |t: tapeloom_format::Timestamp| TimeSpec::new(t.secs, t.nanos as _);
    sys(
        nix::sys::stat::futimens(f.as_raw_fd(), &ts(e.atime), &ts(e.mtime)),
        || format!("set times of {}", p.display()),
    )
}

fn dest(root: &Path, rel: &[u8]) -> PathBuf {
    if rel == b"." {
        root.to_path_buf()
    } else {
        root.join(OsStr::from_bytes(rel))
    }
}

fn show(rel: &[u8]) -> String {
    crate::display_path(rel)
}

impl Placer {
    pub fn new(root: &Path, overwrite: Overwrite) -> Result<Self> {
        let mut fresh_dirs = HashSet::new();
        if std::fs::symlink_metadata(root).is_err() {
            fresh_dirs.insert(Vec::new());
        }
        io(std::fs::create_dir_all(root), || {
            format!("create restore folder {}", root.display())
        })?;
        Ok(Placer {
            root: root.to_path_buf(),
            known_dirs: HashSet::new(),
            fresh_dirs,
            owners: Owners::new(),
            overwrite,
        })
    }

    pub fn path_of(&self, rel: &[u8]) -> PathBuf {
        dest(&self.root, rel)
    }

    /// Makes sure every parent of `rel` is a real directory under the root.
    pub fn parents(&mut self, rel: &[u8]) -> Result<()> {
        let Some(cut) = rel.iter().rposition(|&b| b == b'/') else {
            return Ok(());
        };
        let parent = &rel[..cut];
        if self.known_dirs.contains(parent) {
            return Ok(());
        }
        let mut at = 0;
        for comp in parent.split(|&b| b == b'/') {
            let end = at + comp.len();
            let sub = &parent[..end];
            at = end + 1;
            if self.known_dirs.contains(sub) {
                continue;
            }
            let p = dest(&self.root, sub);
            match std::fs::symlink_metadata(&p) {
                Ok(m) if m.file_type().is_dir() => {}
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(PlaceError::SymlinkOnTheWay {
                        path: show(rel),
                        parent: show(sub),
                    }
                    .into())
                }
                Ok(_) => {
                    return Err(PlaceError::NotADirectory {
                        path: show(rel),
                        parent: show(sub),
                    }
                    .into())
                }
                Err(_) => {
                    io(std::fs::create_dir(&p), || {
                        format!("create {}", p.display())
                    })?;
                    self.fresh_dirs.insert(sub.to_vec());
                }
            }
            self.known_dirs.insert(sub.to_vec());
        }
        Ok(())
    }

    /// Whether to place `e` over what is already at its path, by the `--overwrite`
    /// policy. Its parents are made sure of first, so the look never goes through a
    /// symlink.
    pub fn check(&mut self, e: &Entry) -> Result<Verdict> {
        let rel = e.path.as_slice();
        self.parents(rel)?;
        if e.kind == EntryType::HardLink {
            self.parents(&e.link)?;
        }
        let parent = rel
            .iter()
            .rposition(|&b| b == b'/')
            .map_or(&[][..], |cut| &rel[..cut]);
        if rel != b"." && self.fresh_dirs.contains(parent) {
            return Ok(Verdict::Place);
        }
        let p = dest(&self.root, rel);
        let Ok(existing) = std::fs::symlink_metadata(&p) else {
            return Ok(Verdict::Place);
        };
        let target = (e.kind == EntryType::HardLink).then(|| dest(&self.root, &e.link));
        Ok(overwrite::verdict(
            self.overwrite,
            e,
            &p,
            &existing,
            target.as_deref(),
        ))
    }

    /// Creates the object of `e`. Returns the open file of a regular file.
    pub fn create(&mut self, e: &Entry) -> Result<Option<File>> {
        let rel = e.path.as_slice();
        self.parents(rel)?;
        let p = dest(&self.root, rel);
        match e.kind {
            EntryType::Directory => {
                match std::fs::symlink_metadata(&p) {
                    Ok(m) if m.is_dir() => {}
                    Ok(_) => {
                        clear(&p, rel)?;
                        io(std::fs::create_dir(&p), || {
                            format!("create {}", p.display())
                        })?;
                    }
                    Err(_) => {
                        io(std::fs::create_dir(&p), || {
                            format!("create {}", p.display())
                        })?;
                        self.fresh_dirs.insert(rel.to_vec());
                    }
                }
                // Owner-writable until its own metadata is set at the end.
                let _ = std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o700));
                self.known_dirs.insert(rel.to_vec());
                Ok(None)
            }
            EntryType::Regular => create_file(&p, e).map(Some),
            EntryType::Symlink => {
                clear(&p, rel)?;
                io(
                    std::os::unix::fs::symlink(OsStr::from_bytes(&e.link), &p),
                    || format!("create symlink {}", p.display()),
                )?;
                Ok(None)
            }
            EntryType::HardLink => {
                self.parents(&e.link)?;
                let target = dest(&self.root, &e.link);
                match std::fs::symlink_metadata(&target) {
                    Ok(m) if m.is_file() => {}
                    _ => {
                        return Err(PlaceError::LinkTargetMissing {
                            path: show(rel),
                            target: show(&e.link),
                        }
                        .into())
                    }
                }
                clear(&p, rel)?;
                io(std::fs::hard_link(&target, &p), || {
                    format!("link {}", p.display())
                })?;
                Ok(None)
            }
            EntryType::Fifo | EntryType::CharDevice | EntryType::BlockDevice => {
                clear(&p, rel)?;
                let kind = match e.kind {
                    EntryType::Fifo => SFlag::S_IFIFO,
                    EntryType::CharDevice => SFlag::S_IFCHR,
                    _ => SFlag::S_IFBLK,
                };
                sys(
                    nix::sys::stat::mknod(&p, kind, Mode::from_bits_truncate(0o600), e.rdev as _),
                    || format!("create {}", p.display()),
                )?;
                Ok(None)
            }
            EntryType::Socket => Ok(None),
        }
    }

    /// Sets a regular file's metadata through its descriptor.
    pub fn finish_file(&mut self, f: &File, e: &Entry) -> Result<()> {
        let p = dest(&self.root, &e.path);
        finish_file(f, &p, e, &mut self.owners)
    }

    /// Sets `e`'s metadata over an object placed from an older entry of its path:
    /// extended attributes the older entry had and `e` has not are removed first.
    pub fn replace_meta(&mut self, e: &Entry) -> Result<()> {
        let p = dest(&self.root, &e.path);
        if let Ok(names) = xattr::list(&p) {
            for name in names {
                if !e
                    .xattrs
                    .iter()
                    .any(|(n, _)| n.as_slice() == name.as_bytes())
                {
                    let _ = xattr::remove(&p, &name);
                }
            }
        }
        self.finish(e)
    }

    /// Sets owner, mode, extended attributes and times. Directories get theirs after
    /// their contents (the caller defers them).
    pub fn finish(&mut self, e: &Entry) -> Result<()> {
        if e.kind == EntryType::HardLink {
            return Ok(());
        }
        let p = dest(&self.root, &e.path);
        for (name, value) in &e.xattrs {
            // Not every file system takes every namespace; the data matters more.
            let _ = xattr::set(&p, OsStr::from_bytes(name), value);
        }
        if let Some((uid, gid)) = self.owners.of(e) {
            io(std::os::unix::fs::lchown(&p, Some(uid), Some(gid)), || {
                format!("chown {}", p.display())
            })?;
        }
        if e.kind != EntryType::Symlink {
            io(
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(e.mode)),
                || format!("chmod {}", p.display()),
            )?;
        }
        let ts = |t: tapeloom_format::Timestamp| TimeSpec::new(t.secs, t.nanos as _);
        let flags = UtimensatFlags::NoFollowSymlink;
        sys(
            utimensat(None, &p, &ts(e.atime), &ts(e.mtime), flags),
            || format!("set times of {}", p.display()),
        )
    }
}

/// The owner to restore: by name when this host knows the name, else by number, as tar does.
fn uid_of(name: &[u8], uid: u32) -> u32 {
    std::str::from_utf8(name)
        .ok()
        .filter(|n| !n.is_empty())
        .and_then(|n| nix::unistd::User::from_name(n).ok().flatten())
        .map(|u| u.uid.as_raw())
        .unwrap_or(uid)
}

/// The group to restore, by name first like the owner.
fn gid_of(name: &[u8], gid: u32) -> u32 {
    std::str::from_utf8(name)
        .ok()
        .filter(|n| !n.is_empty())
        .and_then(|n| nix::unistd::Group::from_name(n).ok().flatten())
        .map(|g| g.gid.as_raw())
        .unwrap_or(gid)
}
