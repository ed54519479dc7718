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
use std::sync::atomic::{AtomicU64, Ordering};
use tapeloom_format::{Entry, EntryType};

/// Creates objects under a root and never outside it: tape paths are relative and
/// clean (checked when decoded), and no parent on the way may be a symlink.
pub(crate) struct Placer {
    root: PathBuf,
    known_dirs: HashSet<Vec<u8>>,
    /// Directories this restore created (the root as `""`): nothing was in them, so
    /// their entries need no look for an object in the way.
    fresh_dirs: HashSet<Vec<u8>>,
    /// Folders that were there before the restore, rid of the temporary files a
    /// killed restore left in them ([`Placer::sweep`]).
    swept: HashSet<Vec<u8>>,
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

/// What a regular file's name carries while a restore writes it: the file is
/// `.NAME.tapeloom-` and 16 hex digits in its folder until its data is whole and
/// checked and its metadata set, then it is renamed to NAME. A restore removes
/// such files it finds in a folder it restores into ([`Placer::check`]): the
/// leftovers of a restore killed before it could rename them.
const TEMP_MARK: &[u8] = b".tapeloom-";
/// Hex digits after [`TEMP_MARK`].
const TEMP_DIGITS: usize = 16;
/// Bytes of NAME a temporary name keeps at most, so that it stays within the
/// 255 bytes a name may have.
const TEMP_KEEP: usize = 200;
/// Temporary names tried before a restore gives up on a file.
const TEMP_TRIES: u32 = 16;

/// The temporary name of a file named `name`: `.NAME.tapeloom-XXXXXXXXXXXXXXXX`,
/// the digits this process's id and its `n`th file.
fn temp_name(name: &[u8], n: u64) -> Vec<u8> {
    // Asked once: each asking is a system call.
    static PID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    let keep = &name[..name.len().min(TEMP_KEEP)];
    let pid = *PID.get_or_init(std::process::id);
    let digits = format!("{pid:08x}{:08x}", n as u32);
    [b".", keep, TEMP_MARK, digits.as_bytes()].concat()
}

/// Whether `name` is a restore's temporary name ([`TEMP_MARK`]).
pub(crate) fn is_temp_name(name: &[u8]) -> bool {
    let Some(head) = name.len().checked_sub(TEMP_MARK.len() + TEMP_DIGITS) else {
        return false;
    };
    let (front, tail) = name.split_at(head);
    let digits = &tail[TEMP_MARK.len()..];
    name.len() > TEMP_MARK.len() + TEMP_DIGITS + 1
        && front.starts_with(b".")
        && tail.starts_with(TEMP_MARK)
        && digits
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
}

/// Whether the temporary file `name` is being written by another restore that runs
/// now: its digits begin with the process id of a process that is alive and not
/// this one. (A process id used again by then keeps a leftover, which a later
/// restore removes.)
fn another_restores(name: &[u8]) -> bool {
    let digits = &name[name.len() - TEMP_DIGITS..][..8];
    let pid = std::str::from_utf8(digits)
        .ok()
        .and_then(|d| u32::from_str_radix(d, 16).ok());
    pid.is_some_and(|p| p != std::process::id() && Path::new(&format!("/proc/{p}")).exists())
}

/// A regular file being restored, under its temporary name ([`TEMP_MARK`]) until
/// [`TempFile::place`] renames it; dropped before, it is removed.
pub(crate) struct TempFile {
    file: File,
    temp: PathBuf,
    path: PathBuf,
    placed: bool,
}

impl TempFile {
    /// The open file, to write its data.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Sets the file's metadata (entry `e`'s) through its descriptor, then
    /// renames it to its real name, over a non-directory already there: the name
    /// only ever shows the finished file.
    pub fn place(mut self, e: &Entry, owners: &mut Owners) -> Result<()> {
        finish_file(&self.file, &self.path, e, owners)?;
        match std::fs::rename(&self.temp, &self.path) {
            Err(err) if err.kind() == std::io::ErrorKind::IsADirectory => {
                return Err(in_the_way(e).into())
            }
            r => io(r, || format!("place {}", self.path.display()))?,
        }
        self.placed = true;
        Ok(())
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.placed {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

/// A directory at the name of entry `e`, which is not one.
fn in_the_way(e: &Entry) -> PlaceError {
    PlaceError::DirectoryInTheWay {
        path: show(&e.path),
    }
}

/// Creates regular file `p` for entry `e` under a temporary name in its folder
/// ([`TempFile`]), never following a symlink. Any object at `p` but a directory
/// (in the way, found when the file is placed) is replaced only when the file
/// is placed.
pub(crate) fn create_file(p: &Path, e: &Entry) -> Result<TempFile> {
    static FILES: AtomicU64 = AtomicU64::new(0);
    // The restore folder itself is a directory, never a file; a directory at
    // any other file's name is found when the file is placed.
    let (Some(dir), Some(name)) = (p.parent(), p.file_name()) else {
        return Err(in_the_way(e).into());
    };
    if e.path == b"." {
        return Err(in_the_way(e).into());
    }
    let mut tries = 0;
    let (file, temp) = loop {
        let n = FILES.fetch_add(1, Ordering::Relaxed);
        let temp = dir.join(OsStr::from_bytes(&temp_name(name.as_bytes(), n)));
        let opened = OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .mode(0o600)
            .open(&temp);
        tries += 1;
        match opened {
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists && tries < TEMP_TRIES => {}
            r => break (io(r, || format!("create {}", p.display()))?, temp),
        }
    };
    let t = TempFile {
        file,
        temp,
        path: p.to_path_buf(),
        placed: false,
    };
    if e.sparse.is_some() {
        io(t.file.set_len(e.size), || format!("size {}", p.display()))?;
    }
    Ok(t)
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
fn finish_file(f: &File, p: &Path, e: &Entry, owners: &mut Owners) -> Result<()> {
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
            swept: HashSet::new(),
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
        if rel != b"." {
            if self.fresh_dirs.contains(parent) {
                return Ok(Verdict::Place);
            }
            // The entry goes in a folder that was there before: rid of leftovers
            // before this restore creates anything in it (the root's own entry
            // creates nothing in it).
            self.sweep(parent);
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

    /// Removes from folder `rel`, once, the temporary files ([`TEMP_MARK`]) a
    /// restore killed before it placed them left there: what this restore places
    /// there is then never taken for a file already there, and nothing of a
    /// half-written file stays. Called before this restore creates any file in
    /// the folder (so none of its own is there yet), never for a folder it made
    /// itself.
    fn sweep(&mut self, rel: &[u8]) {
        if !self.swept.insert(rel.to_vec()) {
            return;
        }
        let dir = match rel {
            b"" => self.root.clone(),
            _ => dest(&self.root, rel),
        };
        let Ok(list) = std::fs::read_dir(&dir) else {
            return;
        };
        for e in list.flatten() {
            let name = e.file_name();
            let leftover = is_temp_name(name.as_bytes()) && !another_restores(name.as_bytes());
            if leftover && e.file_type().is_ok_and(|t| t.is_file()) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }

    /// Creates the object of `e`. Returns a regular file's [`TempFile`], which
    /// [`Placer::place`] puts under its name once written.
    pub fn create(&mut self, e: &Entry) -> Result<Option<TempFile>> {
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
                // A fifo has no device number, whatever its entry says.
                let (kind, rdev) = match e.kind {
                    EntryType::Fifo => (SFlag::S_IFIFO, 0),
                    EntryType::CharDevice => (SFlag::S_IFCHR, e.rdev),
                    _ => (SFlag::S_IFBLK, e.rdev),
                };
                sys(
                    nix::sys::stat::mknod(&p, kind, Mode::from_bits_truncate(0o600), rdev as _),
                    || format!("create {}", p.display()),
                )?;
                Ok(None)
            }
            EntryType::Socket => Ok(None),
        }
    }

    /// Sets a regular file's metadata through its descriptor and renames it
    /// into place.
    pub fn place(&mut self, t: TempFile, e: &Entry) -> Result<()> {
        t.place(e, &mut self.owners)
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    fn regular(path: &[u8], size: u64) -> Entry {
        Entry {
            kind: EntryType::Regular,
            mode: 0o640,
            uid: 0,
            gid: 0,
            size,
            mtime: tapeloom_format::Timestamp {
                secs: 1_000,
                nanos: 7,
            },
            atime: tapeloom_format::Timestamp::default(),
            rdev: 0,
            path: path.to_vec(),
            link: Vec::new(),
            user: Vec::new(),
            group: Vec::new(),
            xattrs: Vec::new(),
            sparse: None,
            meta_only: false,
            facts: None,
        }
    }

    #[test]
    fn a_temporary_file_of_a_restore_that_runs_now_is_not_a_leftover() {
        let of = |pid: u32| format!(".f.tapeloom-{pid:08x}00000001").into_bytes();
        // Process 1 always runs; no process has the largest id; this one's own
        // files are never another restore's.
        assert!(another_restores(&of(1)));
        assert!(!another_restores(&of(u32::MAX)));
        assert!(!another_restores(&of(std::process::id())));
    }

    #[test]
    fn temporary_names_are_told_from_others() {
        for name in [&b"f"[..], b".hidden", b"a.tapeloom-x", &[b'n'; 255]] {
            let t = temp_name(name, 0x1234_5678_9abc);
            assert!(t.len() <= 255, "{}", t.len());
            assert!(is_temp_name(&t), "{}", String::from_utf8_lossy(&t));
        }
        for name in [
            &b".f.tapeloom-0123456789abcde"[..],
            b".f.tapeloom-0123456789abcdeF",
            b"f.tapeloom-0123456789abcdef",
            b"..tapeloom-0123456789abcdef",
            b".f.tapeloom-0123456789abcdef0",
            b"plain",
        ] {
            assert!(!is_temp_name(name), "{}", String::from_utf8_lossy(name));
        }
    }

    #[test]
    fn a_file_takes_its_name_only_when_placed() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("f");
        std::fs::write(&p, b"what was there").unwrap();
        let e = regular(b"f", 5);
        let names = |dir: &Path| {
            let mut v: Vec<Vec<u8>> = (std::fs::read_dir(dir).unwrap())
                .map(|e| e.unwrap().file_name().as_bytes().to_vec())
                .collect();
            v.sort();
            v
        };
        // Dropped before it is placed: gone, and what was there stays.
        let f = create_file(&p, &e).unwrap();
        f.file().write_all_at(b"hello", 0).unwrap();
        assert_eq!(names(t.path()).len(), 2);
        drop(f);
        assert_eq!(names(t.path()), [b"f".to_vec()]);
        assert_eq!(std::fs::read(&p).unwrap(), b"what was there");
        // Placed: its name shows it whole, with its metadata.
        let f = create_file(&p, &e).unwrap();
        f.file().write_all_at(b"hello", 0).unwrap();
        f.place(&e, &mut Owners::new()).unwrap();
        assert_eq!(names(t.path()), [b"f".to_vec()]);
        assert_eq!(std::fs::read(&p).unwrap(), b"hello");
        let m = std::fs::metadata(&p).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!(
            (m.mode() & 0o7777, m.mtime(), m.mtime_nsec()),
            (0o640, 1_000, 7)
        );
        // A directory at its name is in the way, and nothing is left.
        let d = t.path().join("d");
        std::fs::create_dir(&d).unwrap();
        let e = regular(b"d", 1);
        let placed = create_file(&d, &e).unwrap().place(&e, &mut Owners::new());
        assert!(
            matches!(
                placed,
                Err(crate::Error::Place(PlaceError::DirectoryInTheWay { .. }))
            ),
            "{placed:?}"
        );
        assert_eq!(names(t.path()), [b"d".to_vec(), b"f".to_vec()]);
        assert!(std::fs::metadata(&d).unwrap().is_dir());
    }

    #[test]
    fn a_folder_there_before_is_rid_of_leftovers_once() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("out");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        // Written by a process that is gone (no process has so large an id).
        let leftover = root.join("sub/.f.tapeloom-ffffff00000000ff");
        std::fs::write(&leftover, b"cut").unwrap();
        let theirs = root.join("sub/.f.tapeloom-mine");
        std::fs::write(&theirs, b"someone's").unwrap();
        let mut placer = Placer::new(&root, Overwrite::Never).unwrap();
        assert_eq!(placer.check(&regular(b"sub/f", 1)).unwrap(), Verdict::Place);
        assert!(!leftover.exists());
        assert!(theirs.exists());
        // Once per folder: what is made there after is not looked at again.
        std::fs::write(&leftover, b"again").unwrap();
        placer.check(&regular(b"sub/g", 1)).unwrap();
        assert!(leftover.exists());
        // A folder the restore made is never looked at: the files it is writing
        // there stay, whatever entry comes after them (the root's own, from a
        // later job of a set).
        let fresh = t.path().join("fresh");
        let mut placer = Placer::new(&fresh, Overwrite::Never).unwrap();
        assert_eq!(placer.check(&regular(b"f", 1)).unwrap(), Verdict::Place);
        let writing = create_file(&fresh.join("f"), &regular(b"f", 1)).unwrap();
        let mut root = regular(b".", 0);
        root.kind = EntryType::Directory;
        assert_eq!(placer.check(&root).unwrap(), Verdict::Place);
        assert_eq!(std::fs::read_dir(&fresh).unwrap().count(), 1);
        writing
            .place(&regular(b"f", 1), &mut Owners::new())
            .unwrap();
        assert!(fresh.join("f").is_file());
    }
}
