//! Reading sources: a walker that lists objects in a fixed order and readers that fetch
//! their metadata and small files in parallel, handed back in walk order.
//!
//! The walker keeps each directory open while its objects are fetched, so a reader
//! opens a file by its name in that directory (`openat`) instead of looking its whole
//! path up again, and learns its metadata from the open descriptor. Objects travel
//! in batches, one channel message each way per batch; a batch's small files are read
//! into one buffer, which goes back to a pool once the batch is packed.

use crate::pack::scan::{judge, Now, Scan, Verdict};
use nix::unistd::{lseek, Whence};
use rustix::fs::{FileType, Mode, OFlags};
use std::collections::HashMap;
use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io::Read;
use std::ops::Range;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use tapeloom_format::{Entry, EntryType, Facts, Timestamp};

/// Files up to this size are read whole by the reader threads; larger ones are
/// streamed by the packer straight into block buffers.
pub const SMALL_FILE: u64 = 64 * 1024;
/// Objects between the walker and the packer: bounds memory to about
/// `WINDOW * SMALL_FILE`.
const WINDOW: usize = 1024;
/// Objects per batch. Each reader fetches a batch's objects one after another, so
/// `WINDOW / BATCH` batches in flight keep that many reads going at once.
const BATCH: usize = 128;
/// Directories deeper than this are not kept open: their objects are opened by path,
/// so a deep tree cannot exhaust the process's descriptors.
const OPEN_DEPTH: usize = 256;

/// One object to back up, read and ready.
pub struct Item {
    /// Its entry (path relative to the job namespace).
    pub entry: Entry,
    /// (device, inode, link count) for hard-link detection.
    pub ino: (u64, u64, u64),
    /// Where to get the data of a regular file.
    pub content: Content,
}

/// The data of a regular file.
pub enum Content {
    /// Not a regular file.
    None,
    /// Read whole into its batch's buffer (`Batch::data[at]`), with its CRC32C.
    Bytes { at: Range<usize>, crc: u32 },
    /// Open, to be streamed (dense, or by the sparse extents in the entry).
    File(File),
    /// Made by the dataset generator as the packer stores it (a generator source,
    /// `gen:PRESET:SIZE`): the bytes `tapeloom gen` writes to this file, by the
    /// file's number in its tree.
    Generated(Arc<dyn crate::pack::generator::GeneratedTree>, u64),
}

/// What the walker and readers send to the packer, in walk order.
pub enum Fetched {
    /// An object.
    Item(Box<Item>),
    /// An object that could not be backed up: path (as given on the host) and reason.
    Error(Vec<u8>, String),
    /// An object unchanged since the job's base: neither opened nor stored.
    Same(Box<Same>),
}

/// An object unchanged since the job's base.
pub struct Same {
    /// Its path in the job namespace.
    pub path: Vec<u8>,
    /// (device, inode, link count), for hard-link detection.
    pub ino: (u64, u64, u64),
    /// Its entry type in the base.
    pub was: u8,
}

/// Consecutive objects in walk order and the data of their small files. The buffer
/// goes back to the readers' pool when the batch is dropped.
pub struct Batch {
    /// The objects.
    pub items: Vec<Fetched>,
    /// The data the items' `Content::Bytes` point into.
    pub data: Vec<u8>,
    pool: Arc<Pool>,
}

impl Batch {
    /// A batch of objects whose data needs no buffer (a generator source's).
    pub fn of(items: Vec<Fetched>) -> Batch {
        Batch {
            items,
            data: Vec::new(),
            pool: Arc::new(Pool::default()),
        }
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        self.pool.give(std::mem::take(&mut self.data));
    }
}

/// Batch buffers for reuse: their pages are in place and need no zeroing again.
#[derive(Default)]
struct Pool(Mutex<Vec<Vec<u8>>>);

impl Pool {
    fn take(&self) -> Vec<u8> {
        self.0
            .lock()
            .ok()
            .and_then(|mut v| v.pop())
            .unwrap_or_default()
    }
    fn give(&self, buf: Vec<u8>) {
        if let Ok(mut v) = self.0.lock() {
            if v.len() < WINDOW / BATCH + 2 {
                v.push(buf);
            }
        }
    }
}

/// A directory being walked: open (unless too deep) so that its objects are opened
/// by name.
pub struct Folder {
    fd: Option<OwnedFd>,
    /// Its path on the host, as given.
    abs: PathBuf,
    /// Its path in the job's namespace.
    rel: Vec<u8>,
}

impl Folder {
    /// A directory found from the root path `abs`, following a symlink there when
    /// `follow`; `rel` is its name in the job's namespace.
    pub fn open(abs: &Path, rel: Vec<u8>, follow: bool) -> std::io::Result<Folder> {
        let mut flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        if !follow {
            flags |= OFlags::NOFOLLOW;
        }
        let fd = rustix::fs::open(abs, flags, Mode::empty())?;
        Ok(Folder {
            fd: Some(fd),
            abs: abs.to_path_buf(),
            rel,
        })
    }
}

/// An object the walker found: `name` in directory `dir`, and its type as the
/// directory listing gave it.
pub struct Found {
    pub dir: Arc<Folder>,
    pub name: CString,
    pub kind: FileType,
}

impl Found {
    /// Its path on the host.
    pub fn abs(&self) -> PathBuf {
        self.dir.abs.join(OsStr::from_bytes(self.name.to_bytes()))
    }

    /// Its path in the job's namespace.
    fn rel(&self) -> Vec<u8> {
        join_rel(&self.dir.rel, self.name.to_bytes())
    }

    /// Its status, not following a final symlink (no open, no path lookup when the
    /// directory is kept open).
    pub fn stat(&self) -> std::io::Result<rustix::fs::Stat> {
        let st = match &self.dir.fd {
            Some(d) => rustix::fs::statat(
                d,
                self.name.as_c_str(),
                rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
            )?,
            None => rustix::fs::lstat(self.abs())?,
        };
        Ok(st)
    }

    /// Opens it (without following a final symlink when `flags` say so): by name in its
    /// directory, or by path when the directory is not kept open.
    pub fn open(&self, flags: OFlags) -> std::io::Result<File> {
        let fd = match &self.dir.fd {
            Some(d) => rustix::fs::openat(d, self.name.as_c_str(), flags, Mode::empty())?,
            None => rustix::fs::open(self.abs(), flags, Mode::empty())?,
        };
        Ok(File::from(fd))
    }
}

pub fn join_rel(dir: &[u8], name: &[u8]) -> Vec<u8> {
    if dir == b"." {
        return name.to_vec();
    }
    let mut r = Vec::with_capacity(dir.len() + 1 + name.len());
    r.extend_from_slice(dir);
    r.push(b'/');
    r.extend_from_slice(name);
    r
}

/// What the walker reports, in walk order.
pub enum Walked {
    /// An object.
    Found(Found),
    /// A directory whose contents could not be listed: its path, why, and its path
    /// in the job's namespace.
    Unlisted(Vec<u8>, String, Vec<u8>),
}

/// Lists the contents of `dir` depth first: a directory before its contents, names
/// in byte order, symlinks not followed. Directories in `skip` (device, inode) are
/// left out with their contents. Stops with the first error `sink` returns.
pub fn walk_contents<E>(
    dir: &Arc<Folder>,
    skip: &[(u64, u64)],
    sink: &mut impl FnMut(Walked) -> Result<(), E>,
) -> Result<(), E> {
    walk_in(dir, 1, skip, sink)
}

fn walk_in<E>(
    dir: &Arc<Folder>,
    depth: usize,
    skip: &[(u64, u64)],
    sink: &mut impl FnMut(Walked) -> Result<(), E>,
) -> Result<(), E> {
    let kids = match list(dir) {
        Ok(k) => k,
        Err(e) => {
            let why = format!("cannot list directory: {e}");
            return sink(Walked::Unlisted(
                dir.abs.as_os_str().as_bytes().to_vec(),
                why,
                dir.rel.clone(),
            ));
        }
    };
    for (name, kind) in kids {
        let found = Found {
            dir: Arc::clone(dir),
            name,
            kind,
        };
        if kind != FileType::Directory {
            sink(Walked::Found(found))?;
            continue;
        }
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let sub = found.open(flags).and_then(|f| {
            let md = f.metadata()?;
            Ok((OwnedFd::from(f), md.dev(), md.ino()))
        });
        match sub {
            Ok((_, dev, ino)) if skip.contains(&(dev, ino)) => {}
            Ok((fd, _, _)) => {
                let sub = Arc::new(Folder {
                    fd: (depth < OPEN_DEPTH).then_some(fd),
                    abs: found.abs(),
                    rel: found.rel(),
                });
                sink(Walked::Found(found))?;
                walk_in(&sub, depth + 1, skip, sink)?;
            }
            Err(e) => {
                let loopy = matches!(
                    e.raw_os_error(),
                    Some(nix::libc::ENOTDIR) | Some(nix::libc::ELOOP)
                );
                let abs = found.abs();
                let rel = found.rel();
                sink(Walked::Found(found))?;
                // No longer a directory: the object alone is what there is.
                if !loopy {
                    let why = format!("cannot list directory: {e}");
                    sink(Walked::Unlisted(
                        abs.as_os_str().as_bytes().to_vec(),
                        why,
                        rel,
                    ))?;
                }
            }
        }
    }
    Ok(())
}

/// The names in a directory and their types, sorted by name.
fn list(dir: &Folder) -> std::io::Result<Vec<(CString, FileType)>> {
    let reopened;
    let fd = match &dir.fd {
        Some(fd) => fd,
        None => {
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            reopened = rustix::fs::open(&dir.abs, flags, Mode::empty())?;
            &reopened
        }
    };
    let mut kids = Vec::new();
    for d in rustix::fs::Dir::read_from(fd)? {
        let d = d?;
        let name = d.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        let mut kind = d.file_type();
        if kind == FileType::Unknown {
            // The file system does not say in its listing: ask the object.
            if let Ok(st) = rustix::fs::statat(fd, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW) {
                kind = FileType::from_raw_mode(st.st_mode);
            }
        }
        kids.push((name.to_owned(), kind));
    }
    kids.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    Ok(kids)
}

/// What a reader fetches.
enum Job {
    /// A source's root: its path on the host and in the job's namespace.
    Root(PathBuf, Vec<u8>),
    /// An object the walker found.
    Found(Found),
    /// Settled by the walker.
    Done(Fetched),
}

struct Work {
    jobs: Vec<Job>,
    reply: SyncSender<Batch>,
}

/// Starts walking `sources` (each with the namespace prefix its entries get) with
/// `readers` threads, leaving out the directories in `skip` (device, inode): the
/// tapeloom home, so a backup never reads its own tapes. `scan` counts what is read
/// and, for a job with a base, leaves unchanged objects unread. Returns the ordered
/// batches.
pub fn start(
    sources: Vec<(PathBuf, Vec<u8>)>,
    readers: usize,
    skip: Vec<(u64, u64)>,
    scan: Arc<Scan>,
) -> Receiver<Receiver<Batch>> {
    let (order_tx, order_rx) = sync_channel::<Receiver<Batch>>(WINDOW / BATCH);
    let (work_tx, work_rx) = sync_channel::<Work>(WINDOW / BATCH);
    let work_rx = Arc::new(Mutex::new(work_rx));
    let pool = Arc::new(Pool::default());
    for _ in 0..readers.max(1) {
        let rx = Arc::clone(&work_rx);
        let pool = Arc::clone(&pool);
        let scan = Arc::clone(&scan);
        std::thread::spawn(move || {
            let mut names = Names::default();
            loop {
                let w = {
                    let Ok(guard) = rx.lock() else { return };
                    match guard.recv() {
                        Ok(w) => w,
                        Err(_) => return,
                    }
                };
                let batch = fetch_batch(w.jobs, &mut names, &pool, &scan);
                let _ = w.reply.send(batch);
            }
        });
    }
    std::thread::spawn(move || {
        let mut walker = Walker {
            order: order_tx,
            work: work_tx,
            jobs: Vec::with_capacity(BATCH),
            scan,
        };
        for (abs, rel) in sources {
            if walker.root(abs, rel, &skip).is_err() {
                return;
            }
        }
        let _ = walker.flush();
    });
    order_rx
}

struct Walker {
    order: SyncSender<Receiver<Batch>>,
    work: SyncSender<Work>,
    jobs: Vec<Job>,
    scan: Arc<Scan>,
}

/// The packer stopped listening.
struct Gone;

impl Walker {
    fn push(&mut self, job: Job) -> Result<(), Gone> {
        self.jobs.push(job);
        if self.jobs.len() >= BATCH {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), Gone> {
        if self.jobs.is_empty() {
            return Ok(());
        }
        let jobs = std::mem::replace(&mut self.jobs, Vec::with_capacity(BATCH));
        let (tx, rx) = sync_channel(1);
        self.order.send(rx).map_err(|_| Gone)?;
        self.work.send(Work { jobs, reply: tx }).map_err(|_| Gone)
    }

    fn error(&mut self, abs: &Path, why: String) -> Result<(), Gone> {
        let abs = abs.as_os_str().as_bytes().to_vec();
        self.push(Job::Done(Fetched::Error(abs, why)))
    }

    /// A source: the object itself, then (for a directory) its contents.
    fn root(&mut self, abs: PathBuf, rel: Vec<u8>, skip: &[(u64, u64)]) -> Result<(), Gone> {
        let is_dir = match std::fs::symlink_metadata(&abs) {
            Ok(m) if m.is_dir() && skip.contains(&(m.dev(), m.ino())) => return Ok(()),
            Ok(m) => m.is_dir(),
            Err(e) => {
                // A source that cannot be read this time is not taken for deleted.
                self.scan.unlisted(&rel);
                return self.error(&abs, e.to_string());
            }
        };
        self.push(Job::Root(abs.clone(), rel.clone()))?;
        if !is_dir {
            return Ok(());
        }
        let dir = match Folder::open(&abs, rel.clone(), false) {
            Ok(d) => Arc::new(d),
            Err(e) => {
                self.scan.unlisted(&rel);
                return self.error(&abs, format!("cannot list directory: {e}"));
            }
        };
        let scan = Arc::clone(&self.scan);
        walk_contents(&dir, skip, &mut |w| match w {
            Walked::Found(f) => match &scan.only {
                Some(only) if !only.keeps(&f.abs(), f.kind == FileType::Directory) => Ok(()),
                _ => self.push(Job::Found(f)),
            },
            Walked::Unlisted(abs, why, rel) => {
                scan.unlisted(&rel);
                self.push(Job::Done(Fetched::Error(abs, why)))
            }
        })
    }
}

/// Fetches a batch's objects in order, their small files into one buffer.
fn fetch_batch(jobs: Vec<Job>, names: &mut Names, pool: &Arc<Pool>, scan: &Scan) -> Batch {
    let mut data = Data {
        buf: pool.take(),
        used: 0,
        scan,
    };
    let mut items = Vec::with_capacity(jobs.len());
    for job in jobs {
        items.push(match job {
            Job::Root(abs, rel) => fetch_root(&abs, rel, names, &mut data),
            Job::Found(f) => fetch_found(&f, names, &mut data),
            Job::Done(d) => d,
        });
    }
    Batch {
        items,
        data: data.buf,
        pool: Arc::clone(pool),
    }
}

/// A batch's buffer: `buf[..used]` holds small files read so far; `buf` keeps its
/// length (zeroed once) for the next batch that takes it from the pool.
pub struct Data<'s> {
    buf: Vec<u8>,
    used: usize,
    scan: &'s Scan,
}

impl<'s> Data<'s> {
    /// An empty buffer counting into `scan`.
    pub fn new(scan: &'s Scan) -> Self {
        Data {
            buf: Vec::new(),
            used: 0,
            scan,
        }
    }
    /// The bytes read so far.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }
}

#[derive(Default)]
pub struct Names {
    users: HashMap<u32, Vec<u8>>,
    groups: HashMap<u32, Vec<u8>>,
}

impl Names {
    pub fn user(&mut self, uid: u32) -> Vec<u8> {
        self.users
            .entry(uid)
            .or_insert_with(|| {
                nix::unistd::User::from_uid(uid.into())
                    .ok()
                    .flatten()
                    .map(|u| u.name.into_bytes())
                    .unwrap_or_default()
            })
            .clone()
    }
    pub fn group(&mut self, gid: u32) -> Vec<u8> {
        self.groups
            .entry(gid)
            .or_insert_with(|| {
                nix::unistd::Group::from_gid(gid.into())
                    .ok()
                    .flatten()
                    .map(|g| g.name.into_bytes())
                    .unwrap_or_default()
            })
            .clone()
    }
}

fn err(abs: &Path, why: impl std::fmt::Display) -> Fetched {
    Fetched::Error(abs.as_os_str().as_bytes().to_vec(), why.to_string())
}

/// What the file system says of an object, as change detection compares it.
fn now_of_stat(st: &rustix::fs::Stat) -> Now {
    let ft = FileType::from_raw_mode(st.st_mode);
    let kind = match ft {
        FileType::RegularFile => EntryType::Regular,
        FileType::Directory => EntryType::Directory,
        FileType::Symlink => EntryType::Symlink,
        FileType::Fifo => EntryType::Fifo,
        FileType::CharacterDevice => EntryType::CharDevice,
        FileType::BlockDevice => EntryType::BlockDevice,
        _ => EntryType::Socket,
    };
    Now {
        kind,
        size: if kind == EntryType::Regular {
            st.st_size as u64
        } else {
            0
        },
        mtime_ns: Timestamp {
            secs: st.st_mtime,
            nanos: st.st_mtime_nsec as u32,
        }
        .as_nanos(),
        ctime_ns: Timestamp {
            secs: st.st_ctime,
            nanos: st.st_ctime_nsec as u32,
        }
        .as_nanos(),
        ino: st.st_ino,
        mode: st.st_mode & 0o7777,
        uid: st.st_uid,
        gid: st.st_gid,
    }
}

/// Compares an object with the job's base: `None` when the base lacks it (or the job
/// has none), or its status cannot be read (then it is read whole, which reports why).
fn verdict(
    scan: &Scan,
    rel: &[u8],
    st: impl FnOnce() -> std::io::Result<rustix::fs::Stat>,
) -> Option<(Verdict, rustix::fs::Stat, u8)> {
    // Listed: seen, whether or not its status can be read.
    let prev = scan.see(rel)?;
    let st = st().ok()?;
    Some((judge(prev, &now_of_stat(&st)), st, prev.kind))
}

/// What a base comparison decided, as the packer gets it: an unchanged object, or
/// a regular file's metadata alone; `None` when the object is to be read whole.
fn settle(
    scan: &Scan,
    (abs, rel): (impl FnOnce() -> PathBuf, Vec<u8>),
    st: impl FnOnce() -> std::io::Result<rustix::fs::Stat>,
    names: &mut Names,
) -> Option<Fetched> {
    match verdict(scan, &rel, st) {
        Some((Verdict::Unchanged, st, was)) => {
            scan.counts.unchanged.fetch_add(1, Ordering::Relaxed);
            Some(Fetched::Same(Box::new(Same {
                path: rel,
                ino: (st.st_dev, st.st_ino, st.st_nlink),
                was,
            })))
        }
        Some((Verdict::MetaOnly, _, _)) => Some(fetch_meta(&abs(), rel, names)),
        _ => None,
    }
}

/// A regular file's metadata, read by path, for an entry without data (a file
/// that is no longer regular is fetched whole).
pub fn fetch_meta(abs: &Path, rel: Vec<u8>, names: &mut Names) -> Fetched {
    let md = match std::fs::symlink_metadata(abs) {
        Ok(m) => m,
        Err(e) => return err(abs, e),
    };
    if !md.is_file() {
        let mut data = Data::new(&NO_SCAN);
        return fetch(abs, rel, names, &mut data);
    }
    let xattrs = path_xattrs(abs);
    let mut entry = describe(EntryType::Regular, &md, rel, Vec::new(), xattrs, names);
    entry.meta_only = true;
    item(entry, &md, Content::None)
}

/// A scan without a base, that counts nowhere anyone looks.
static NO_SCAN: std::sync::LazyLock<Scan> = std::sync::LazyLock::new(Scan::default);

/// Reads a source's root, unless the job's base has it unchanged.
fn fetch_root(abs: &Path, rel: Vec<u8>, names: &mut Names, data: &mut Data) -> Fetched {
    let scan = data.scan;
    let settled = settle(
        scan,
        (|| abs.to_path_buf(), rel.clone()),
        || Ok(rustix::fs::lstat(abs)?),
        names,
    );
    match settled {
        Some(f) => f,
        None => fetch(abs, rel, names, data),
    }
}

/// Reads one object's metadata (and a small file's data) by its path.
pub fn fetch(abs: &Path, rel: Vec<u8>, names: &mut Names, data: &mut Data) -> Fetched {
    let md = match std::fs::symlink_metadata(abs) {
        Ok(m) => m,
        Err(e) => return err(abs, e),
    };
    let kind = kind_of(md.file_type());
    let link = if kind == EntryType::Symlink {
        match std::fs::read_link(abs) {
            Ok(t) => t.as_os_str().as_bytes().to_vec(),
            Err(e) => return err(abs, e),
        }
    } else {
        Vec::new()
    };
    if kind != EntryType::Regular {
        let xattrs = path_xattrs(abs);
        let entry = describe(kind, &md, rel, link, xattrs, names);
        return item(entry, &md, Content::None);
    }
    // A regular file is opened once and everything else is read through the
    // descriptor: path lookups are most of the cost of a small file.
    match open_regular(abs) {
        Ok(f) => regular(f, &md, rel, names, data).unwrap_or_else(|e| err(abs, e)),
        Err(e) => err(abs, e),
    }
}

/// Fetches an object the walker found. A regular file is opened by name in its
/// directory and described from the descriptor; anything else, or a file that cannot
/// be opened so or is no longer regular, is fetched by its path.
fn fetch_found(f: &Found, names: &mut Names, data: &mut Data) -> Fetched {
    if data.scan.has_base() {
        let scan = data.scan;
        if let Some(done) = settle(scan, (|| f.abs(), f.rel()), || f.stat(), names) {
            return done;
        }
    }
    if f.kind == FileType::RegularFile {
        // Not blocking, should the name have become a pipe since it was listed.
        let flags =
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
        let opened = f.open(flags | OFlags::NOATIME).or_else(|e| {
            // Only the owner (or root) may leave the atime alone.
            if e.raw_os_error() == Some(nix::libc::EPERM) {
                f.open(flags)
            } else {
                Err(e)
            }
        });
        if let Ok(file) = opened {
            if let Ok(md) = file.metadata() {
                if md.is_file() {
                    return regular(file, &md, f.rel(), names, data)
                        .unwrap_or_else(|e| err(&f.abs(), e));
                }
            }
        }
    }
    fetch(&f.abs(), f.rel(), names, data)
}

/// An open regular file described by `md`: its entry and content.
fn regular(
    f: File,
    md: &std::fs::Metadata,
    rel: Vec<u8>,
    names: &mut Names,
    data: &mut Data,
) -> std::io::Result<Fetched> {
    let xattrs = file_xattrs(&f);
    let mut entry = describe(EntryType::Regular, md, rel, Vec::new(), xattrs, names);
    data.scan.counts.opened.fetch_add(1, Ordering::Relaxed);
    let content = read_content(f, md, &mut entry, data)?;
    Ok(item(entry, md, content))
}

fn item(entry: Entry, md: &std::fs::Metadata, content: Content) -> Fetched {
    Fetched::Item(Box::new(Item {
        entry,
        ino: (md.dev(), md.ino(), md.nlink()),
        content,
    }))
}

/// The entry of an object of type `kind` with metadata `md`.
fn describe(
    kind: EntryType,
    md: &std::fs::Metadata,
    rel: Vec<u8>,
    link: Vec<u8>,
    xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    names: &mut Names,
) -> Entry {
    Entry {
        kind,
        mode: md.mode() & 0o7777,
        uid: md.uid(),
        gid: md.gid(),
        size: if kind == EntryType::Regular {
            md.size()
        } else {
            0
        },
        mtime: Timestamp {
            secs: md.mtime(),
            nanos: md.mtime_nsec() as u32,
        },
        atime: Timestamp {
            secs: md.atime(),
            nanos: md.atime_nsec() as u32,
        },
        rdev: if matches!(kind, EntryType::CharDevice | EntryType::BlockDevice) {
            md.rdev()
        } else {
            0
        },
        path: rel,
        link,
        user: names.user(md.uid()),
        group: names.group(md.gid()),
        xattrs,
        sparse: None,
        meta_only: false,
        facts: Some(Facts {
            ctime: Timestamp {
                secs: md.ctime(),
                nanos: md.ctime_nsec() as u32,
            },
            ino: md.ino(),
        }),
    }
}

/// The entry type of a file type.
fn kind_of(ft: std::fs::FileType) -> EntryType {
    if ft.is_file() {
        EntryType::Regular
    } else if ft.is_dir() {
        EntryType::Directory
    } else if ft.is_symlink() {
        EntryType::Symlink
    } else if ft.is_fifo() {
        EntryType::Fifo
    } else if ft.is_char_device() {
        EntryType::CharDevice
    } else if ft.is_block_device() {
        EntryType::BlockDevice
    } else {
        EntryType::Socket
    }
}

/// Opens a regular file for reading without following a symlink, without touching
/// its atime where the file system lets us.
fn open_regular(abs: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NOATIME)
        .open(abs)
        .or_else(|_| {
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(nix::libc::O_NOFOLLOW)
                .open(abs)
        })
}

/// The extended attributes of an open file.
fn file_xattrs(f: &File) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut xattrs = Vec::new();
    if let Ok(list) = xattr::FileExt::list_xattr(f) {
        for name in list {
            if let Ok(Some(v)) = xattr::FileExt::get_xattr(f, &name) {
                xattrs.push((name.as_bytes().to_vec(), v));
            }
        }
    }
    xattrs
}

/// The extended attributes of an object by its path (not following a symlink).
fn path_xattrs(abs: &Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut xattrs = Vec::new();
    if let Ok(list) = xattr::list(abs) {
        for name in list {
            if let Ok(Some(v)) = xattr::get(abs, &name) {
                xattrs.push((name.as_bytes().to_vec(), v));
            }
        }
    }
    xattrs
}

/// A regular file's content: read now when small and dense, else the open file for
/// the packer; `entry` gets the size (and extents) of what will be stored.
fn read_content(
    mut f: File,
    md: &std::fs::Metadata,
    entry: &mut Entry,
    data: &mut Data,
) -> std::io::Result<Content> {
    let size = md.size();
    if md.blocks() * 512 < size {
        entry.sparse = sparse_extents(&f, size);
    }
    if size <= SMALL_FILE && entry.sparse.is_none() {
        let at = read_small(&mut f, size as usize, data)?;
        data.scan.read(at.len());
        // A file that changed size since it was described is stored as read.
        entry.size = at.len() as u64;
        let crc = crc32c::crc32c(&data.buf[at.clone()]);
        data.used = at.end;
        return Ok(Content::Bytes { at, crc });
    }
    // The size of the open file is what gets stored.
    entry.size = f.metadata()?.size();
    if entry
        .sparse
        .as_ref()
        .is_some_and(|ext| ext.last().is_some_and(|&(o, l)| o + l > entry.size))
    {
        entry.sparse = sparse_extents(&f, entry.size);
    }
    Ok(Content::File(f))
}

/// Reads a file described as `size` bytes long into `data` after what it holds: all
/// it has, up to one byte more than `size`, so that a file that grew shows. A read
/// that comes back short of what was asked is at the end of the file, so a file still
/// `size` long takes one read, not a second one that returns nothing.
fn read_small(f: &mut File, size: usize, data: &mut Data) -> std::io::Result<Range<usize>> {
    let (start, want) = (data.used, size + 1);
    if data.buf.len() < start + want {
        data.buf.resize(start + want, 0);
    }
    let buf = &mut data.buf[start..start + want];
    let mut got = 0;
    while got < want {
        match f.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => {
                got += n;
                if got == size {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(start..start + got)
}

/// The data extents of a file with holes, or `None` when it has none after all.
fn sparse_extents(f: &File, size: u64) -> Option<Vec<(u64, u64)>> {
    let fd = f.as_raw_fd();
    let mut ext = Vec::new();
    let mut pos: i64 = 0;
    while (pos as u64) < size {
        let data = match lseek(fd, pos, Whence::SeekData) {
            Ok(d) => d,
            Err(nix::errno::Errno::ENXIO) => break,
            Err(_) => return None,
        };
        let hole = lseek(fd, data, Whence::SeekHole).ok()?;
        let end = (hole as u64).min(size);
        if end > data as u64 {
            ext.push((data as u64, end - data as u64));
        }
        pos = hole;
    }
    let _ = lseek(fd, 0, Whence::SeekSet);
    let stored: u64 = ext.iter().map(|e| e.1).sum();
    (stored < size).then_some(ext)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data() -> Data<'static> {
        Data::new(&NO_SCAN)
    }

    #[test]
    fn small_reads_store_what_the_file_holds_up_to_one_byte_more() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("f");
        std::fs::write(&p, vec![5u8; 1000]).unwrap();
        let mut d = data();
        // As described: all of it.
        let at = read_small(&mut File::open(&p).unwrap(), 1000, &mut d).unwrap();
        assert_eq!(at, 0..1000);
        d.used = at.end;
        // Grew since described: one byte past the old size shows it.
        let at = read_small(&mut File::open(&p).unwrap(), 10, &mut d).unwrap();
        assert_eq!(at, 1000..1011);
        d.used = at.end;
        // Shrank since described: what is left.
        let at = read_small(&mut File::open(&p).unwrap(), 4000, &mut d).unwrap();
        assert_eq!(at, 1011..2011);
        assert!(d.buf[..2011].iter().all(|&b| b == 5));
        // Empty.
        std::fs::write(&p, b"").unwrap();
        let at = read_small(&mut File::open(&p).unwrap(), 0, &mut d).unwrap();
        assert!(at.is_empty());
    }

    /// The objects a walk of `root` fetches: path in the namespace, kind, data.
    fn fetched(root: &Path, skip: Vec<(u64, u64)>) -> Vec<(Vec<u8>, EntryType, Vec<u8>)> {
        let order = start(
            vec![(root.to_path_buf(), b".".to_vec())],
            3,
            skip,
            Arc::default(),
        );
        let mut out = Vec::new();
        for one in order.iter() {
            let mut batch = one.recv().unwrap();
            for f in batch.items.drain(..) {
                let Fetched::Item(item) = f else {
                    panic!("an error")
                };
                let bytes = match &item.content {
                    Content::Bytes { at, crc } => {
                        let b = batch.data[at.clone()].to_vec();
                        assert_eq!(*crc, crc32c::crc32c(&b));
                        assert_eq!(item.entry.size, b.len() as u64);
                        b
                    }
                    Content::File(f) => {
                        let mut b = Vec::new();
                        (&*f).read_to_end(&mut b).unwrap();
                        b
                    }
                    Content::None | Content::Generated(..) => Vec::new(),
                };
                out.push((item.entry.path.clone(), item.entry.kind, bytes));
            }
        }
        out
    }

    #[test]
    fn walk_order_is_depth_first_in_byte_order_with_each_directory_first() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        for d in ["b", "a/z", "a/c", "skipped/x"] {
            std::fs::create_dir_all(r.join(d)).unwrap();
        }
        for (f, n) in [
            ("B", 1),
            ("a/c/f", 2),
            ("a/a", 3),
            ("b/big", 100_000),
            ("a/z/_", 0),
        ] {
            std::fs::write(r.join(f), vec![n as u8; n]).unwrap();
        }
        std::os::unix::fs::symlink("a", r.join("link")).unwrap();
        let m = std::fs::metadata(r.join("skipped")).unwrap();
        let got = fetched(r, vec![(m.dev(), m.ino())]);
        let paths: Vec<&[u8]> = got.iter().map(|g| g.0.as_slice()).collect();
        let want: Vec<&[u8]> = vec![
            b".", b"B", b"a", b"a/a", b"a/c", b"a/c/f", b"a/z", b"a/z/_", b"b", b"b/big", b"link",
        ];
        assert_eq!(paths, want);
        for (p, kind, bytes) in &got {
            let on_disk = r.join(OsStr::from_bytes(p));
            match kind {
                EntryType::Regular => assert_eq!(bytes, &std::fs::read(on_disk).unwrap()),
                EntryType::Directory => assert!(on_disk.is_dir()),
                EntryType::Symlink => assert_eq!(p.as_slice(), b"link"),
                k => panic!("{k:?}"),
            }
        }
    }

    #[test]
    fn a_file_opened_by_name_keeps_its_xattrs() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("f");
        std::fs::write(&p, b"data").unwrap();
        if xattr::set(&p, "user.tapeloom", b"v").is_err() {
            return; // The file system keeps no user xattrs.
        }
        let order = start(
            vec![(t.path().to_path_buf(), b".".to_vec())],
            1,
            vec![],
            Arc::default(),
        );
        let batch = order.recv().unwrap().recv().unwrap();
        let Some(Fetched::Item(item)) = batch.items.get(1) else {
            panic!("no file")
        };
        assert_eq!(item.entry.path, b"f");
        assert_eq!(
            item.entry.xattrs,
            vec![(b"user.tapeloom".to_vec(), b"v".to_vec())]
        );
    }
}
