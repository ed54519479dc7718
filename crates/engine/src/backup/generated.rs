//! A source that needs no disk: `gen:PRESET:SIZE[:SEED][@RATE]` backs up the
//! tree that `tapeloom gen` would write with those options, made in memory as the
//! packer stores it, no faster than RATE bytes per second when one is given (a
//! source of a disk's speed, for experiments with sources of several speeds). Its names, sizes, times and bytes are the generator's, so a restore
//! of such a job compares with a generated tree, and a backup from it measures the
//! engine and the drives, never this machine's disks.
//!
//! The objects come in the order a walk of the generated tree gives (depth first, a
//! folder before its contents, names in byte order). Each file's bytes are made in
//! the generator's chunks of [`CHUNK`] bytes from the file's own seed, straight into
//! the packer's block buffers.

use crate::backup::source::{join_rel, Batch, Content, Fetched, Item, Names};
use crate::error::Result;
use crate::tools::gen::{size_classes, time, tree, GenFile, GenOptions, Layout, CHUNK, SEED_MIX};
use crate::tools::pattern::Pattern;
use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::time::UNIX_EPOCH;
use tapeloom_format::{Entry, EntryType, Facts, Timestamp};

pub use crate::tools::gen::SOURCE_PREFIX;

/// Objects per batch sent to the packer.
const BATCH: usize = 128;
/// Batches in flight between the generator and the packer.
const IN_FLIGHT: usize = 8;
/// Modes of what the generator makes, as a umask of 022 leaves them.
const FILE_MODE: u32 = 0o644;
const DIR_MODE: u32 = 0o755;

/// The options of source `path` when it names a generator (`gen:...`); `None` for
/// a path on disk.
pub(crate) fn spec(path: &Path) -> Option<Result<GenOptions>> {
    let s = path.to_str()?.strip_prefix(SOURCE_PREFIX)?;
    let (tree, rate) = s.split_once('@').unwrap_or((s, ""));
    if !rate.is_empty() {
        if let Err(e) = rate_of(s, rate) {
            return Some(Err(e));
        }
    }
    Some(GenOptions::of_source(tree))
}

/// The rate a generator source reads at, when it names one (`gen:...@150MB`: a
/// source that reads no faster than 150 MB/s, as a disk of that speed would);
/// `None` for one that reads at memory speed, or a path on disk.
pub(crate) fn rate(path: &Path) -> Option<f64> {
    let s = path.to_str()?.strip_prefix(SOURCE_PREFIX)?;
    let (_, rate) = s.split_once('@')?;
    rate_of(s, rate).ok()
}

fn rate_of(spec: &str, rate: &str) -> Result<f64> {
    match crate::size::parse(rate.trim_end_matches("/s")) {
        Ok(r) if r > 0 => Ok(r as f64),
        _ => Err(crate::error::ToolError::GenSource {
            spec: format!("{SOURCE_PREFIX}{spec}"),
            why: format!("'{rate}' after @ is not a rate above 0 (for example 150MB)"),
        }
        .into()),
    }
}

/// The bytes of the regular files source `path` holds, when it names a generator.
pub(crate) fn bytes(path: &Path) -> Option<u64> {
    let o = spec(path)?.ok()?;
    let sizes = size_classes(o.min, o.max).ok()?;
    let dirs = tree(o.depth, o.breadth).ok()?;
    let capacity = dirs.len() as u64 * u64::from(o.files_per_dir);
    Some(
        Layout::plan(&sizes, capacity, o.total)
            .ok()?
            .counts(&sizes)
            .1,
    )
}

/// Starts making the tree of `opts` under `root` (the stream's root in the job's
/// namespace), as batches in walk order.
pub(crate) fn start(opts: GenOptions, root: Vec<u8>) -> Receiver<Receiver<Batch>> {
    let (order_tx, order_rx) = sync_channel::<Receiver<Batch>>(IN_FLIGHT);
    std::thread::spawn(move || {
        let mut out = Out {
            order: order_tx,
            items: Vec::with_capacity(BATCH),
        };
        // The options were checked when the job was planned.
        if let Ok(t) = Tree::new(&opts) {
            let _ = t.walk(&opts, &root, &mut out).and_then(|()| out.flush());
        }
    });
    order_rx
}

/// The packer stopped listening.
struct Gone;

struct Out {
    order: SyncSender<Receiver<Batch>>,
    items: Vec<Fetched>,
}

impl Out {
    fn push(&mut self, entry: Entry, ino: u64, content: Content) -> std::result::Result<(), Gone> {
        self.items.push(Fetched::Item(Box::new(Item {
            entry,
            ino: (0, ino, 1),
            content,
        })));
        if self.items.len() >= BATCH {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> std::result::Result<(), Gone> {
        if self.items.is_empty() {
            return Ok(());
        }
        let items = std::mem::replace(&mut self.items, Vec::with_capacity(BATCH));
        let (tx, rx) = sync_channel(1);
        self.order.send(rx).map_err(|_| Gone)?;
        tx.send(Batch::of(items)).map_err(|_| Gone)
    }
}

/// The generated tree: its folders (breadth first, as the generator makes them),
/// the files of each, and the folders below each.
struct Tree {
    dirs: Vec<PathBuf>,
    files: Vec<Vec<(u64, u64)>>,
    kids: Vec<Vec<usize>>,
    pattern: Pattern,
    chunk: usize,
    owner: (u32, u32),
    names: Names,
}

/// What one folder holds, in walk order: a file (number, size) or a folder.
enum Child {
    File(u64, u64),
    Dir(usize),
}

impl Tree {
    fn new(o: &GenOptions) -> Result<Tree> {
        let sizes = size_classes(o.min, o.max)?;
        let dirs = tree(o.depth, o.breadth)?;
        let fpd = u64::from(o.files_per_dir);
        let layout = Layout::plan(&sizes, dirs.len() as u64 * fpd, o.total)?;
        let mut files = vec![Vec::new(); dirs.len()];
        for i in 0..layout.files() {
            files[(i / fpd.max(1)) as usize].push((i, sizes[layout.class(i)]));
        }
        let at: HashMap<&Path, usize> = dirs
            .iter()
            .enumerate()
            .map(|(k, d)| (d.as_path(), k))
            .collect();
        let mut kids = vec![Vec::new(); dirs.len()];
        for (k, d) in dirs.iter().enumerate().skip(1) {
            if let Some(&p) = d.parent().and_then(|p| at.get(p)) {
                kids[p].push(k);
            }
        }
        Ok(Tree {
            dirs,
            files,
            kids,
            pattern: if o.ratio > 1.0 {
                Pattern::Ratio(o.ratio)
            } else {
                Pattern::Random
            },
            chunk: CHUNK.min(o.max) as usize,
            owner: (
                nix::unistd::getuid().as_raw(),
                nix::unistd::getgid().as_raw(),
            ),
            names: Names::default(),
        })
    }

    fn walk(mut self, o: &GenOptions, root: &[u8], out: &mut Out) -> std::result::Result<(), Gone> {
        let e = self.entry(EntryType::Directory, root.to_vec(), 0, 0);
        out.push(e, dir_ino(0), Content::None)?;
        self.folder(0, root, o.seed, out)
    }

    /// The contents of folder `k`, whose path in the job's namespace is `rel`.
    fn folder(
        &mut self,
        k: usize,
        rel: &[u8],
        seed: u64,
        out: &mut Out,
    ) -> std::result::Result<(), Gone> {
        let mut children: Vec<(Vec<u8>, Child)> = self.files[k]
            .iter()
            .map(|&(i, size)| {
                (
                    format!("File{size}_{i:06}").into_bytes(),
                    Child::File(i, size),
                )
            })
            .chain(self.kids[k].iter().map(|&d| {
                let name = self.dirs[d].file_name().map(|n| n.as_bytes().to_vec());
                (name.unwrap_or_default(), Child::Dir(d))
            }))
            .collect();
        children.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, child) in children {
            let path = join_rel(rel, &name);
            match child {
                Child::File(i, size) => {
                    let e = self.entry(EntryType::Regular, path, i, size);
                    let g = GenFile {
                        seed: seed ^ i.wrapping_mul(SEED_MIX),
                        pattern: self.pattern,
                        chunk: self.chunk,
                    };
                    out.push(e, i + 1, Content::Generated(g))?;
                }
                Child::Dir(d) => {
                    let e = self.entry(EntryType::Directory, path.clone(), d as u64, 0);
                    out.push(e, dir_ino(d), Content::None)?;
                    self.folder(d, &path, seed, out)?;
                }
            }
        }
        Ok(())
    }

    /// The entry of object `n` (a file's number, or a folder's in creation order).
    fn entry(&mut self, kind: EntryType, path: Vec<u8>, n: u64, size: u64) -> Entry {
        let secs = time(n)
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let t = Timestamp { secs, nanos: 0 };
        let (uid, gid) = self.owner;
        Entry {
            kind,
            mode: if kind == EntryType::Directory {
                DIR_MODE
            } else {
                FILE_MODE
            },
            uid,
            gid,
            size,
            mtime: t,
            atime: t,
            rdev: 0,
            path,
            link: Vec::new(),
            user: self.names.user(uid),
            group: self.names.group(gid),
            xattrs: Vec::new(),
            sparse: None,
            meta_only: false,
            facts: Some(Facts {
                ctime: t,
                ino: if kind == EntryType::Directory {
                    dir_ino(n as usize)
                } else {
                    n + 1
                },
            }),
        }
    }
}

/// Folders get inode numbers above any file's.
fn dir_ino(k: usize) -> u64 {
    (1 << 62) + k as u64
}
