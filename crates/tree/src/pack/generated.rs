//! A source that needs no disk: `gen:PRESET:SIZE[:SEED][@RATE]` backs up the
//! tree that `tapeloom gen` would write with those options, made in memory as the
//! packer stores it, no faster than RATE bytes per second when one is given (a
//! source of a disk's speed, for experiments with sources of several speeds). Its
//! names, sizes, times and bytes are the generator's, so a restore of such a job
//! compares with a generated tree, and a backup from it measures the engine and the
//! drives, never this machine's disks.
//!
//! The dataset generator belongs to the measuring tools (`tapeloom-tools`), a crate
//! above the engine. The engine reaches it through the [`Generator`] trait it
//! defines here: the process installs one at its start ([`install_generator`]; the
//! binary installs the tools' generator), and a source's text asks it for a
//! [`GeneratedTree`]: its folders, the names, sizes and times of its files, and
//! each file's bytes. Without a generator installed, a generator source is refused
//! as one that cannot be read.
//!
//! This module turns such a tree into the objects a walk of it on disk would give,
//! in the same order (depth first, a folder before its contents, names in byte
//! order), with the modes and owner a umask of 022 and this user leave them. Each
//! file's bytes are made by the generator straight into the packer's block buffers.

use crate::error::{OptionsError, Result};
use crate::pack::generator::{GeneratedFile, GeneratedTree, Generator};
use crate::pack::source::{join_rel, Batch, Content, Fetched, Item, Names};
use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};
use tapeloom_format::{Entry, EntryType, Facts, Timestamp};

/// What a generator source's text starts with.
pub const SOURCE_PREFIX: &str = "gen:";

static GENERATOR: OnceLock<Arc<dyn Generator>> = OnceLock::new();

/// Installs the process's generator of generator sources; the first one installed
/// stays.
pub fn install_generator(g: Arc<dyn Generator>) {
    let _ = GENERATOR.set(g);
}

/// Objects per batch sent to the packer.
const BATCH: usize = 128;
/// Batches in flight between the generator and the packer.
const IN_FLIGHT: usize = 8;
/// Modes of what the generator makes, as a umask of 022 leaves them.
const FILE_MODE: u32 = 0o644;
const DIR_MODE: u32 = 0o755;

/// Whether source `path` names a generator (`gen:...`), readable or not.
pub fn is_generated(path: &Path) -> bool {
    path.to_str().is_some_and(|s| s.starts_with(SOURCE_PREFIX))
}

/// The tree of source `path` when it names a generator (`gen:...`); `None` for a
/// path on disk.
pub fn spec(path: &Path) -> Option<Result<Arc<dyn GeneratedTree>>> {
    let s = path.to_str()?.strip_prefix(SOURCE_PREFIX)?;
    let (tree, rate) = s.split_once('@').unwrap_or((s, ""));
    if !rate.is_empty() {
        if let Err(e) = rate_of(s, rate) {
            return Some(Err(e));
        }
    }
    let made = match GENERATOR.get() {
        Some(g) => g.tree(tree),
        None => Err("no dataset generator is installed in this process".to_string()),
    };
    Some(made.map_err(|why| {
        OptionsError::GenSource {
            spec: format!("{SOURCE_PREFIX}{s}"),
            why,
        }
        .into()
    }))
}

/// The rate a generator source reads at, when it names one (`gen:...@150MB`: a
/// source that reads no faster than 150 MB/s, as a disk of that speed would);
/// `None` for one that reads at memory speed, or a path on disk.
pub fn rate(path: &Path) -> Option<f64> {
    let s = path.to_str()?.strip_prefix(SOURCE_PREFIX)?;
    let (_, rate) = s.split_once('@')?;
    rate_of(s, rate).ok()
}

fn rate_of(spec: &str, rate: &str) -> Result<f64> {
    match crate::size::parse(rate.trim_end_matches("/s")) {
        Ok(r) if r > 0 => Ok(r as f64),
        _ => Err(OptionsError::GenSource {
            spec: format!("{SOURCE_PREFIX}{spec}"),
            why: format!("'{rate}' after @ is not a rate above 0 (for example 150MB)"),
        }
        .into()),
    }
}

/// The bytes of the regular files source `path` holds, when it names a generator.
pub fn bytes(path: &Path) -> Option<u64> {
    Some(spec(path)?.ok()?.bytes())
}

/// Starts making `tree` under `root` (the stream's root in the job's namespace), as
/// batches in walk order.
pub fn start(tree: Arc<dyn GeneratedTree>, root: Vec<u8>) -> Receiver<Receiver<Batch>> {
    let (order_tx, order_rx) = sync_channel::<Receiver<Batch>>(IN_FLIGHT);
    std::thread::spawn(move || {
        let mut out = Out {
            order: order_tx,
            items: Vec::with_capacity(BATCH),
        };
        let t = Tree::new(tree);
        let _ = t.walk(&root, &mut out).and_then(|()| out.flush());
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

/// The generated tree: its folders (each after its parent, as the generator
/// makes them) and the folders below each.
struct Tree {
    made: Arc<dyn GeneratedTree>,
    dirs: Vec<PathBuf>,
    kids: Vec<Vec<usize>>,
    owner: (u32, u32),
    names: Names,
}

/// What one folder holds, in walk order: a file or a folder.
enum Child {
    File(GeneratedFile),
    Dir(usize),
}

impl Tree {
    fn new(made: Arc<dyn GeneratedTree>) -> Tree {
        let dirs = made.folders();
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
        Tree {
            made,
            dirs,
            kids,
            owner: (
                nix::unistd::getuid().as_raw(),
                nix::unistd::getgid().as_raw(),
            ),
            names: Names::default(),
        }
    }

    fn walk(mut self, root: &[u8], out: &mut Out) -> std::result::Result<(), Gone> {
        let t = self.made.folder_time(0);
        let e = self.entry(EntryType::Directory, root.to_vec(), dir_ino(0), 0, t);
        out.push(e, dir_ino(0), Content::None)?;
        self.folder(0, root, out)
    }

    /// The contents of folder `k`, whose path in the job's namespace is `rel`.
    fn folder(&mut self, k: usize, rel: &[u8], out: &mut Out) -> std::result::Result<(), Gone> {
        let mut children: Vec<(Vec<u8>, Child)> = self
            .made
            .files_in(k)
            .into_iter()
            .map(|f| (f.name.clone().into_bytes(), Child::File(f)))
            .chain(self.kids[k].iter().map(|&d| {
                let name = self.dirs[d].file_name().map(|n| n.as_bytes().to_vec());
                (name.unwrap_or_default(), Child::Dir(d))
            }))
            .collect();
        children.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, child) in children {
            let path = join_rel(rel, &name);
            match child {
                Child::File(f) => {
                    let ino = f.number + 1;
                    let e = self.entry(EntryType::Regular, path, ino, f.size, f.mtime);
                    let content = Content::Generated(Arc::clone(&self.made), f.number);
                    out.push(e, ino, content)?;
                }
                Child::Dir(d) => {
                    let t = self.made.folder_time(d);
                    let e = self.entry(EntryType::Directory, path.clone(), dir_ino(d), 0, t);
                    out.push(e, dir_ino(d), Content::None)?;
                    self.folder(d, &path, out)?;
                }
            }
        }
        Ok(())
    }

    /// The entry of an object with inode number `ino`.
    fn entry(
        &mut self,
        kind: EntryType,
        path: Vec<u8>,
        ino: u64,
        size: u64,
        mtime: SystemTime,
    ) -> Entry {
        let secs = mtime
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
            facts: Some(Facts { ctime: t, ino }),
        }
    }
}

/// Folders get inode numbers above any file's.
fn dir_ino(k: usize) -> u64 {
    (1 << 62) + k as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ops::ControlFlow;
    use std::time::Duration;

    /// A tree of three folders: the root holds files `b` and `a10`, folder `m`
    /// holds folder `m/k` and file `c`; folder `m/k` is empty. Each file's bytes
    /// are its number, repeated.
    struct Small;

    impl GeneratedTree for Small {
        fn folders(&self) -> Vec<PathBuf> {
            vec![PathBuf::new(), PathBuf::from("m"), PathBuf::from("m/k")]
        }
        fn folder_time(&self, index: usize) -> SystemTime {
            UNIX_EPOCH + Duration::from_secs(100 + index as u64)
        }
        fn files_in(&self, index: usize) -> Vec<GeneratedFile> {
            let file = |number: u64, name: &str| GeneratedFile {
                number,
                name: name.to_string(),
                size: 3 + number,
                mtime: UNIX_EPOCH + Duration::from_secs(200 + number),
            };
            match index {
                0 => vec![file(0, "b"), file(1, "a10")],
                1 => vec![file(2, "c")],
                _ => Vec::new(),
            }
        }
        fn bytes(&self) -> u64 {
            3 + 4 + 5
        }
        fn make(
            &self,
            number: u64,
            size: u64,
            _scratch: &mut Vec<u8>,
            put: &mut dyn FnMut(&[u8]) -> ControlFlow<()>,
        ) -> ControlFlow<()> {
            put(&vec![number as u8; size as usize])
        }
    }

    #[test]
    fn a_generated_tree_comes_in_walk_order_with_its_times_and_numbers() {
        let order = start(Arc::new(Small), b"src".to_vec());
        let mut got = Vec::new();
        for batch in order {
            let mut batch = batch.recv().unwrap();
            for f in std::mem::take(&mut batch.items) {
                let Fetched::Item(item) = f else {
                    panic!("a generated tree has no errors");
                };
                let e = &item.entry;
                let number = match &item.content {
                    Content::Generated(_, n) => Some(*n),
                    _ => None,
                };
                got.push((
                    String::from_utf8(e.path.clone()).unwrap(),
                    e.kind == EntryType::Directory,
                    e.mtime.secs,
                    e.size,
                    number,
                    e.facts.as_ref().map(|f| f.ino),
                ));
            }
        }
        let dir = |k: u64| Some((1 << 62) + k);
        assert_eq!(
            got,
            [
                ("src".to_string(), true, 100, 0, None, dir(0)),
                ("src/a10".to_string(), false, 201, 4, Some(1), Some(2)),
                ("src/b".to_string(), false, 200, 3, Some(0), Some(1)),
                ("src/m".to_string(), true, 101, 0, None, dir(1)),
                ("src/m/c".to_string(), false, 202, 5, Some(2), Some(3)),
                ("src/m/k".to_string(), true, 102, 0, None, dir(2)),
            ]
        );
    }

    #[test]
    fn a_generator_source_without_a_generator_or_with_a_bad_rate_is_refused() {
        let e = spec(Path::new("gen:hp-typical:1G@0MB"))
            .unwrap()
            .err()
            .unwrap();
        assert!(e.to_string().contains("'0MB' after @"), "{e}");
        assert_eq!(rate(Path::new("gen:hp-typical:1G@150MB")), Some(150e6));
        assert!(spec(Path::new("/srv/data")).is_none());
        assert!(is_generated(Path::new("gen:anything")));
        // The engine's own tests install no generator.
        let e = spec(Path::new("gen:hp-typical:1G")).unwrap().err().unwrap();
        assert!(e.to_string().contains("no dataset generator"), "{e}");
    }
}
