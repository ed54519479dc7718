//! Reading sources: a walker that lists objects in a fixed order and readers that fetch
//! their metadata and small files in parallel, handed back in walk order.

use nix::unistd::{lseek, Whence};
use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use tapeloom_format::{Entry, EntryType, Timestamp};

/// Files up to this size are read whole by the reader threads; larger ones are
/// streamed by the packer straight into block buffers.
pub const SMALL_FILE: u64 = 64 * 1024;
/// Objects between the walker and the packer: bounds memory to about
/// `WINDOW * SMALL_FILE`.
const WINDOW: usize = 1024;

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
    /// Read whole.
    Bytes(Vec<u8>),
    /// Open, to be streamed (dense, or by the sparse extents in the entry).
    File(File),
}

/// What the walker and readers send to the packer, in walk order.
pub enum Fetched {
    /// An object.
    Item(Box<Item>),
    /// An object that could not be backed up: path (as given on the host) and reason.
    Error(Vec<u8>, String),
}

struct Work {
    abs: PathBuf,
    rel: Vec<u8>,
    reply: SyncSender<Fetched>,
}

/// Starts walking `sources` (each with the namespace prefix its entries get) with
/// `readers` threads, leaving out the directories in `skip` (device, inode): the
/// tapeloom home, so a backup never reads its own tapes. Returns the ordered results.
pub fn start(
    sources: Vec<(PathBuf, Vec<u8>)>,
    readers: usize,
    skip: Vec<(u64, u64)>,
) -> Receiver<Receiver<Fetched>> {
    let (order_tx, order_rx) = sync_channel::<Receiver<Fetched>>(WINDOW);
    let (work_tx, work_rx) = sync_channel::<Work>(WINDOW);
    let work_rx = Arc::new(Mutex::new(work_rx));
    for _ in 0..readers.max(1) {
        let rx = Arc::clone(&work_rx);
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
                let r = fetch(&w.abs, w.rel, &mut names);
                let _ = w.reply.send(r);
            }
        });
    }
    std::thread::spawn(move || {
        let mut walker = Walker {
            order: order_tx,
            work: work_tx,
            skip,
        };
        for (abs, rel) in sources {
            if walker.walk(abs, rel).is_err() {
                return;
            }
        }
    });
    order_rx
}

struct Walker {
    order: SyncSender<Receiver<Fetched>>,
    work: SyncSender<Work>,
    skip: Vec<(u64, u64)>,
}

/// The packer stopped listening.
struct Gone;

impl Walker {
    fn push(&mut self, abs: PathBuf, rel: Vec<u8>) -> Result<(), Gone> {
        let (tx, rx) = sync_channel(1);
        self.order.send(rx).map_err(|_| Gone)?;
        self.work
            .send(Work {
                abs,
                rel,
                reply: tx,
            })
            .map_err(|_| Gone)
    }

    fn error(&mut self, abs: &std::path::Path, why: String) -> Result<(), Gone> {
        let (tx, rx) = sync_channel(1);
        let _ = tx.send(Fetched::Error(abs.as_os_str().as_bytes().to_vec(), why));
        self.order.send(rx).map_err(|_| Gone)
    }

    /// Depth first, a directory before its contents, names in byte order.
    fn walk(&mut self, abs: PathBuf, rel: Vec<u8>) -> Result<(), Gone> {
        let is_dir = match std::fs::symlink_metadata(&abs) {
            Ok(m) if m.is_dir() && self.skip.contains(&(m.dev(), m.ino())) => return Ok(()),
            Ok(m) => m.is_dir(),
            Err(e) => return self.error(&abs, e.to_string()),
        };
        self.push(abs.clone(), rel.clone())?;
        if !is_dir {
            return Ok(());
        }
        let rd = match std::fs::read_dir(&abs) {
            Ok(rd) => rd,
            Err(e) => return self.error(&abs, format!("cannot list directory: {e}")),
        };
        let mut kids = Vec::new();
        for d in rd {
            match d {
                Ok(d) => {
                    let dir = d.file_type().map(|t| t.is_dir()).unwrap_or(false);
                    kids.push((d.file_name(), dir));
                }
                Err(e) => return self.error(&abs, format!("cannot list directory: {e}")),
            }
        }
        kids.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        for (name, dir) in kids {
            let child_abs = abs.join(&name);
            let child_rel = if rel == b"." {
                name.as_bytes().to_vec()
            } else {
                let mut r = rel.clone();
                r.push(b'/');
                r.extend_from_slice(name.as_bytes());
                r
            };
            if dir {
                self.walk(child_abs, child_rel)?;
            } else {
                self.push(child_abs, child_rel)?;
            }
        }
        Ok(())
    }
}

#[derive(Default)]
struct Names {
    users: HashMap<u32, Vec<u8>>,
    groups: HashMap<u32, Vec<u8>>,
}

impl Names {
    fn user(&mut self, uid: u32) -> Vec<u8> {
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
    fn group(&mut self, gid: u32) -> Vec<u8> {
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

fn err(abs: &std::path::Path, why: impl std::fmt::Display) -> Fetched {
    Fetched::Error(abs.as_os_str().as_bytes().to_vec(), why.to_string())
}

/// Reads one object's metadata (and a small file's data).
fn fetch(abs: &std::path::Path, rel: Vec<u8>, names: &mut Names) -> Fetched {
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
    // A regular file is opened once and everything else is read through the
    // descriptor: path lookups are most of the cost of a small file.
    let file = if kind == EntryType::Regular {
        match open_regular(abs) {
            Ok(f) => Some(f),
            Err(e) => return err(abs, e),
        }
    } else {
        None
    };
    let xattrs = read_xattrs(abs, file.as_ref());
    let mut entry = Entry {
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
    };
    let ino = (md.dev(), md.ino(), md.nlink());
    let content = match file {
        None => Content::None,
        Some(f) => match read_content(f, &md, &mut entry) {
            Ok(c) => c,
            Err(e) => return err(abs, e),
        },
    };
    Fetched::Item(Box::new(Item {
        entry,
        ino,
        content,
    }))
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
fn open_regular(abs: &std::path::Path) -> std::io::Result<File> {
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

/// The extended attributes of an object, through its descriptor when it is open.
fn read_xattrs(abs: &std::path::Path, file: Option<&File>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut xattrs = Vec::new();
    let listed = match file {
        Some(f) => xattr::FileExt::list_xattr(f),
        None => xattr::list(abs),
    };
    if let Ok(list) = listed {
        for name in list {
            let v = match file {
                Some(f) => xattr::FileExt::get_xattr(f, &name),
                None => xattr::get(abs, &name),
            };
            if let Ok(Some(v)) = v {
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
) -> std::io::Result<Content> {
    let size = md.size();
    if md.blocks() * 512 < size {
        entry.sparse = sparse_extents(&f, size);
    }
    if size <= SMALL_FILE && entry.sparse.is_none() {
        let mut buf = Vec::with_capacity(size as usize + 1);
        (&mut f).take(size + 1).read_to_end(&mut buf)?;
        // A file that changed size since lstat is stored as read.
        entry.size = buf.len() as u64;
        return Ok(Content::Bytes(buf));
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
