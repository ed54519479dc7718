//! The packer each stream runs on a thread of its own: it turns the objects the
//! readers fetched into records and blocks (hard links found by inode, sparse files
//! stored by extent, a CRC32C per file), compresses blocks when asked, and hands
//! them to its lane of the buffer pool.

use crate::pack::compress::{CompressionCounters, Compressor};
use crate::pack::mux::PackedRow;
use crate::pack::mux::{Done, Msg, Outlet, Stopped};
use crate::pack::plan::Pending;
use crate::pack::scan::Scan;
use crate::pack::source::{Batch, Content, Data, Fetched, Item, Names, Same};
use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use tapeloom_format::{
    Entry, EntryType, FileEnd, FileStatus, Kind, PackedBlock, StreamEnd, StreamPacker,
};

/// Turns a path of the job namespace back into the path on this host, for errors.
pub struct HostPath {
    pub abs: PathBuf,
    pub root: Vec<u8>,
}

impl HostPath {
    pub fn of(&self, rel: &[u8]) -> Vec<u8> {
        let abs = self.abs.as_os_str().as_bytes();
        if rel == self.root.as_slice() {
            return abs.to_vec();
        }
        let tail = if self.root == b"." {
            rel
        } else {
            rel.strip_prefix(self.root.as_slice())
                .and_then(|t| t.strip_prefix(b"/"))
                .unwrap_or(rel)
        };
        let mut v = abs.to_vec();
        v.push(b'/');
        v.extend_from_slice(tail);
        v
    }
}

struct Packer {
    p: StreamPacker,
    stream: u16,
    out: Outlet,
    comp: Option<(Compressor, Arc<CompressionCounters>)>,
    waiting: Vec<Done>,
    open_start: Option<u64>,
    scan: Arc<Scan>,
    /// A generated file's chunk, made here before it is copied into blocks.
    scratch: Vec<u8>,
}

impl Packer {
    fn drain(&mut self) -> std::result::Result<(), Stopped> {
        if self.p.ready.is_empty() {
            return Ok(());
        }
        while let Some(b) = self.out.shared().take() {
            self.p.recycle(b);
            if self.p.ready.len() < 2 {
                break;
            }
        }
        let ready: Vec<PackedBlock> = self.p.ready.drain(..).collect();
        for mut block in ready {
            let len = block.header.payload_len as usize;
            if let Some((c, counters)) = self.comp.as_mut() {
                c.block(&mut block, counters);
            }
            let (done, wait): (Vec<Done>, Vec<Done>) = std::mem::take(&mut self.waiting)
                .into_iter()
                .partition(|d| d.end_block <= block.seq);
            self.waiting = wait;
            let keep_from = self
                .waiting
                .iter()
                .map(|d| d.start_block)
                .chain(self.open_start)
                .min()
                .unwrap_or(block.seq + 1);
            self.out.block(
                Msg::Block {
                    block,
                    done,
                    keep_from,
                },
                len,
            )?;
        }
        Ok(())
    }

    fn error(&mut self, path: Vec<u8>, why: String) -> std::result::Result<(), Stopped> {
        self.out.other(Msg::Error(path, why))
    }
}

/// What a stream's packer is started with.
pub struct PackerSetup {
    /// The job's tag.
    pub tag: u64,
    /// Block size in bytes.
    pub block_size: usize,
    /// Bytes each block keeps free after its payload (an encrypted job's nonce and
    /// tag).
    pub tail: usize,
    /// Reader threads.
    pub readers: usize,
    /// Directories left out (device, inode).
    pub skip: Vec<(u64, u64)>,
    /// Where the compressors count, when blocks are compressed in software.
    pub counters: Option<Arc<CompressionCounters>>,
    /// What the job reads of its sources, and its base when it has one.
    pub scan: Arc<Scan>,
}

/// Starts a stream's walker, readers and packer, sending its blocks to `out`.
pub fn spawn(setup: &PackerSetup, p: Pending, out: Outlet) -> std::thread::JoinHandle<()> {
    let Pending { id, abs, root, .. } = p;
    let comp = setup
        .counters
        .as_ref()
        .and_then(|c| Compressor::new().map(|z| (z, Arc::clone(c))));
    let (tag, block_size, readers) = (setup.tag, (setup.block_size, setup.tail), setup.readers);
    let skip = setup.skip.clone();
    let scan = Arc::clone(&setup.scan);
    std::thread::spawn(move || {
        let fetched = match crate::pack::generated::spec(&abs) {
            Some(Ok(tree)) => crate::pack::generated::start(tree, root.clone()),
            // A generator's options were checked when the job was planned.
            Some(Err(_)) | None => crate::pack::source::start(
                vec![(abs.clone(), root.clone())],
                readers,
                skip,
                Arc::clone(&scan),
            ),
        };
        let host = HostPath { abs, root };
        pack_stream(id, tag, block_size, fetched, out, &host, (comp, scan));
    })
}

pub fn pack_stream(
    stream: u16,
    tag: u64,
    (block_size, tail): (usize, usize),
    fetched: Receiver<Receiver<Batch>>,
    out: Outlet,
    host: &HostPath,
    (comp, scan): (Option<(Compressor, Arc<CompressionCounters>)>, Arc<Scan>),
) {
    let mut pk = Packer {
        p: StreamPacker::new(stream, tag, block_size).with_tail(tail),
        stream,
        out,
        comp,
        waiting: Vec::new(),
        open_start: None,
        scan,
        scratch: Vec::new(),
    };
    let mut st = StreamState::default();
    for one in fetched.iter() {
        let Ok(mut batch) = one.recv() else { break };
        for f in batch.items.drain(..) {
            let r = match f {
                Fetched::Error(p, why) => pk.error(p, why),
                Fetched::Item(item) => st.item(&mut pk, *item, &batch.data, host),
                Fetched::Same(same) => st.same(&mut pk, *same, host),
            };
            if r.is_err() {
                // The writer is gone; it reports why.
                return;
            }
        }
    }
    let StreamState {
        entries, stored, ..
    } = st;
    let se = StreamEnd {
        entries,
        bytes: stored,
    };
    pk.p.record(Kind::StreamEnd, &se.encode());
    pk.p.finish_block();
    if pk.drain().is_ok() {
        let _ = pk.out.other(Msg::End(entries, stored));
    }
}

/// What a stream's packer keeps across objects.
#[derive(Default)]
struct StreamState {
    /// The first path seen of each hard-linked inode (device, inode).
    links: HashMap<(u64, u64), Vec<u8>>,
    entries: u64,
    stored: u64,
    /// For fetching again what must be stored whole after all.
    names: Names,
}

impl StreamState {
    /// The first path of `path`'s hard-link set when `path` is a later name of it;
    /// `None` for the first (now recorded) and for an object with one name.
    fn later_name(&mut self, ino: (u64, u64, u64), path: &[u8]) -> Option<Vec<u8>> {
        if ino.2 <= 1 {
            return None;
        }
        match self.links.get(&(ino.0, ino.1)) {
            Some(first) if first.as_slice() != path => Some(first.clone()),
            Some(_) => None,
            None => {
                self.links.insert((ino.0, ino.1), path.to_vec());
                None
            }
        }
    }

    /// An object read: into records.
    fn item(
        &mut self,
        pk: &mut Packer,
        item: Item,
        data: &[u8],
        host: &HostPath,
    ) -> std::result::Result<(), Stopped> {
        let Item {
            mut entry,
            ino,
            mut content,
        } = item;
        if entry.kind == EntryType::Socket {
            // Sockets cannot be restored; like tar, leave them out.
            return Ok(());
        }
        if entry.kind != EntryType::Directory {
            match self.later_name(ino, &entry.path) {
                Some(first) => {
                    entry.kind = EntryType::HardLink;
                    entry.link = first;
                    entry.size = 0;
                    entry.sparse = None;
                    entry.meta_only = false;
                    content = Content::None;
                }
                None if entry.meta_only && self.was_later_name(pk, &entry.path) => {
                    // The first name of its set now, and its data was stored only
                    // under another: stored whole.
                    return self.whole(pk, entry.path, host);
                }
                None => {}
            }
        }
        self.entries += 1;
        self.stored += entry.stored_len();
        if entry.meta_only {
            pk.scan
                .counts
                .meta_only
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        pack_item(pk, entry, content, data, host)
    }

    /// Whether the base had `path` as a later name of a hard-link set.
    fn was_later_name(&self, pk: &Packer, path: &[u8]) -> bool {
        pk.scan
            .prev(path)
            .is_some_and(|p| p.kind == EntryType::HardLink as u8)
    }

    /// An object unchanged since the base: nothing stored, unless its place in a
    /// hard-link set changed (a name of the set was added or removed before it).
    fn same(
        &mut self,
        pk: &mut Packer,
        same: Same,
        host: &HostPath,
    ) -> std::result::Result<(), Stopped> {
        let Same { path, ino, was } = same;
        let hard = EntryType::HardLink as u8;
        if was == EntryType::Directory as u8 || (ino.2 <= 1 && was != hard) {
            return Ok(());
        }
        let Some(prev) = pk.scan.prev(&path) else {
            return self.whole(pk, path, host);
        };
        let kept = match self.later_name(ino, &path) {
            None => prev.kind != hard,
            Some(first) => prev.kind == hard && prev.link == first,
        };
        if kept {
            return Ok(());
        }
        self.whole(pk, path, host)
    }

    /// Fetches `path` again, whole, and stores it.
    fn whole(
        &mut self,
        pk: &mut Packer,
        path: Vec<u8>,
        host: &HostPath,
    ) -> std::result::Result<(), Stopped> {
        let abs = PathBuf::from(std::ffi::OsStr::from_bytes(&host.of(&path)));
        let scan = Arc::clone(&pk.scan);
        let mut data = Data::new(&scan);
        match crate::pack::source::fetch(&abs, path, &mut self.names, &mut data) {
            Fetched::Item(item) => self.item(pk, *item, data.bytes(), host),
            Fetched::Error(p, why) => pk.error(p, why),
            Fetched::Same(_) => Ok(()),
        }
    }
}

/// Packs a generated file's bytes; returns their CRC32C.
fn pack_generated(
    pk: &mut Packer,
    tree: &dyn crate::pack::generator::GeneratedTree,
    number: u64,
    size: u64,
) -> std::result::Result<u32, Stopped> {
    let mut crc = 0u32;
    let mut stopped = None;
    let mut scratch = std::mem::take(&mut pk.scratch);
    let _ = tree.make(number, size, &mut scratch, &mut |mut bytes: &[u8]| {
        crc = crc32c::crc32c_append(crc, bytes);
        pk.scan.read(bytes.len());
        while !bytes.is_empty() {
            let space = pk.p.space();
            let n = space.len().min(bytes.len());
            space[..n].copy_from_slice(&bytes[..n]);
            pk.p.commit(n);
            bytes = &bytes[n..];
            if let Err(s) = pk.drain() {
                stopped = Some(s);
                return std::ops::ControlFlow::Break(());
            }
        }
        std::ops::ControlFlow::Continue(())
    });
    pk.scratch = scratch;
    match stopped {
        Some(s) => Err(s),
        None => Ok(crc),
    }
}

fn pack_item(
    pk: &mut Packer,
    entry: Entry,
    content: Content,
    data: &[u8],
    host: &HostPath,
) -> std::result::Result<(), Stopped> {
    let body = entry.encode();
    let (start_block, start_off) = pk.p.begin_record(Kind::Entry, body.len() as u64);
    pk.open_start = Some(start_block);
    pk.p.write(&body);
    pk.drain()?;
    let mut crc = 0u32;
    if entry.has_data() {
        let stored = entry.stored_len();
        pk.p.begin_record(Kind::Data, stored);
        let mut status = FileStatus::Ok;
        let mut problem = None;
        match content {
            Content::Bytes { at, crc: c } => {
                crc = c;
                pk.p.write(&data[at]);
                pk.drain()?;
            }
            Content::File(f) => {
                let dense = [(0, entry.size)];
                let extents = entry.sparse.as_deref().unwrap_or(&dense);
                for &(off, len) in extents {
                    let mut pos = off;
                    let end = off + len;
                    while pos < end {
                        let space = pk.p.space();
                        let want = space.len().min((end - pos) as usize);
                        let got = if status == FileStatus::Ok {
                            match f.read_at(&mut space[..want], pos) {
                                Ok(0) => {
                                    status = FileStatus::Shrank;
                                    problem = Some("file shrank while it was read; the rest is stored as zeros".to_string());
                                    0
                                }
                                Ok(n) => {
                                    pk.scan.read(n);
                                    n
                                }
                                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                                Err(e) => {
                                    status = FileStatus::ReadError;
                                    problem = Some(format!(
                                        "read failed ({e}); the rest is stored as zeros"
                                    ));
                                    0
                                }
                            }
                        } else {
                            0
                        };
                        let n = if got == 0 {
                            space[..want].fill(0);
                            want
                        } else {
                            got
                        };
                        crc = crc32c::crc32c_append(crc, &space[..n]);
                        pk.p.commit(n);
                        pos += n as u64;
                        pk.drain()?;
                    }
                }
                if status == FileStatus::Ok {
                    if let Ok(m) = f.metadata() {
                        if m.len() > entry.size {
                            status = FileStatus::Grew;
                            problem = Some(
                                "file grew while it was read; the excess is not stored".into(),
                            );
                        }
                    }
                }
            }
            Content::Generated(tree, number) => {
                crc = pack_generated(pk, &*tree, number, entry.size)?
            }
            Content::None => {}
        }
        pk.p.record(Kind::FileEnd, &FileEnd { crc, status }.encode());
        if let Some(why) = problem {
            pk.error(host.of(&entry.path), why)?;
        }
    }
    let end_block = pk.p.current_seq();
    pk.waiting.push(Done {
        row: PackedRow {
            path: entry.path,
            stream: pk.stream,
            kind: entry.kind as u8,
            mode: entry.mode,
            uid: entry.uid,
            gid: entry.gid,
            size: entry.size,
            mtime_ns: entry.mtime.as_nanos(),
            start_off,
            crc,
            link: entry.link,
            ctime_ns: entry.facts.map_or(0, |f| f.ctime.as_nanos()),
            ino: entry.facts.map_or(0, |f| f.ino),
            meta_only: entry.meta_only,
        },
        start_block,
        end_block,
    });
    pk.open_start = None;
    pk.drain()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_paths_come_back() {
        let dir = HostPath {
            abs: PathBuf::from("/srv/x"),
            root: b".".to_vec(),
        };
        assert_eq!(dir.of(b"."), b"/srv/x");
        assert_eq!(dir.of(b"a/b"), b"/srv/x/a/b");
        let multi = HostPath {
            abs: PathBuf::from("/srv/x"),
            root: b"x-2".to_vec(),
        };
        assert_eq!(multi.of(b"x-2/a"), b"/srv/x/a");
        assert_eq!(multi.of(b"x-2"), b"/srv/x");
    }
}
