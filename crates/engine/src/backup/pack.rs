//! The packer each stream runs on a thread of its own: it turns the objects the
//! readers fetched into records and blocks (hard links found by inode, sparse files
//! stored by extent, a CRC32C per file), compresses blocks when asked, and hands
//! them to its lane of the buffer pool.

use crate::backup::mux::{Done, Msg, Outlet, Stopped};
use crate::backup::plan::Pending;
use crate::backup::source::{Batch, Content, Fetched, Item};
use crate::compress::{CompressionCounters, Compressor};
use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use tapeloom_catalog::FileRow;
use tapeloom_format::{
    Entry, EntryType, FileEnd, FileStatus, Kind, PackedBlock, StreamEnd, StreamPacker,
};

/// Turns a path of the job namespace back into the path on this host, for errors.
pub(crate) struct HostPath {
    pub abs: PathBuf,
    pub root: Vec<u8>,
}

impl HostPath {
    pub(crate) fn of(&self, rel: &[u8]) -> Vec<u8> {
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
pub(crate) struct PackerSetup {
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
}

/// Starts a stream's walker, readers and packer, sending its blocks to `out`.
pub(crate) fn spawn(setup: &PackerSetup, p: Pending, out: Outlet) -> std::thread::JoinHandle<()> {
    let Pending { id, abs, root, .. } = p;
    let comp = setup
        .counters
        .as_ref()
        .and_then(|c| Compressor::new().map(|z| (z, Arc::clone(c))));
    let (tag, block_size, readers) = (setup.tag, (setup.block_size, setup.tail), setup.readers);
    let skip = setup.skip.clone();
    std::thread::spawn(move || {
        let fetched =
            crate::backup::source::start(vec![(abs.clone(), root.clone())], readers, skip);
        let host = HostPath { abs, root };
        pack_stream(id, tag, block_size, fetched, out, &host, comp);
    })
}

pub(crate) fn pack_stream(
    stream: u16,
    tag: u64,
    (block_size, tail): (usize, usize),
    fetched: Receiver<Receiver<Batch>>,
    out: Outlet,
    host: &HostPath,
    comp: Option<(Compressor, Arc<CompressionCounters>)>,
) {
    let mut pk = Packer {
        p: StreamPacker::new(stream, tag, block_size).with_tail(tail),
        stream,
        out,
        comp,
        waiting: Vec::new(),
        open_start: None,
    };
    let mut links: HashMap<(u64, u64), Vec<u8>> = HashMap::new();
    let (mut entries, mut stored) = (0u64, 0u64);
    for one in fetched.iter() {
        let Ok(mut batch) = one.recv() else { break };
        for f in batch.items.drain(..) {
            let r = match f {
                Fetched::Error(p, why) => pk.error(p, why),
                Fetched::Item(item) => {
                    let Item {
                        mut entry,
                        ino,
                        content,
                    } = *item;
                    if entry.kind == EntryType::Socket {
                        // Sockets cannot be restored; like tar, leave them out.
                        continue;
                    }
                    let mut content = content;
                    if entry.kind != EntryType::Directory && ino.2 > 1 {
                        match links.get(&(ino.0, ino.1)) {
                            Some(first) => {
                                entry.kind = EntryType::HardLink;
                                entry.link = first.clone();
                                entry.size = 0;
                                entry.sparse = None;
                                content = Content::None;
                            }
                            None => {
                                links.insert((ino.0, ino.1), entry.path.clone());
                            }
                        }
                    }
                    entries += 1;
                    stored += entry.stored_len();
                    pack_item(&mut pk, entry, content, &batch.data, host)
                }
            };
            if r.is_err() {
                // The writer is gone; it reports why.
                return;
            }
        }
    }
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
    if entry.kind == EntryType::Regular {
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
                                Ok(n) => n,
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
            Content::None => {}
        }
        pk.p.record(Kind::FileEnd, &FileEnd { crc, status }.encode());
        if let Some(why) = problem {
            pk.error(host.of(&entry.path), why)?;
        }
    }
    let end_block = pk.p.current_seq();
    pk.waiting.push(Done {
        row: FileRow {
            path: entry.path,
            stream: pk.stream,
            kind: entry.kind as u8,
            mode: entry.mode,
            uid: entry.uid,
            gid: entry.gid,
            size: entry.size,
            mtime_ns: entry.mtime.as_nanos(),
            start_seq: 0,
            start_lbn: 0,
            start_off,
            end_seq: 0,
            end_lbn: 0,
            crc,
            link: entry.link,
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
