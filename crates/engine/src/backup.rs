//! The backup data path.
//!
//! Threads: the walker and readers of [`crate::source`], one packer thread that turns
//! objects into records and blocks (one stream per source), and the caller's thread,
//! which alone talks to the drive and the catalog. Blocks travel through a bounded
//! channel (the buffer pool) and their buffers come back for reuse.

use crate::error::{io, Error, Result};
use crate::home::Home;
use crate::source::{self, Content, Fetched, Item};
use crate::volumes::{random_uuid, VolumeWriter};
use std::collections::{HashMap, VecDeque};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::time::Instant;
use tapeloom_catalog::{FileRow, Stream};
use tapeloom_format::{
    check_block_size, Entry, EntryType, FileEnd, FileStatus, IndexEntry, JobEnd, JobStart,
    JobStatus, Kind, PackedBlock, Pos, StreamEnd, StreamInfo, StreamPacker, Timestamp,
};

/// How to run a backup.
#[derive(Debug, Clone)]
pub struct BackupOptions {
    /// Job name; made from the source names when empty.
    pub name: String,
    /// Block size in bytes.
    pub block_size: usize,
    /// Blocks in the pool between packer and writer.
    pub buffers: usize,
    /// Reader threads fetching metadata and small files.
    pub readers: usize,
    /// Drive to use, when the user chose one.
    pub drive: Option<usize>,
}

impl Default for BackupOptions {
    fn default() -> Self {
        BackupOptions {
            name: String::new(),
            block_size: tapeloom_format::DEFAULT_BLOCK_SIZE,
            buffers: 64,
            readers: 4,
            drive: None,
        }
    }
}

/// Live counters, for progress display.
#[derive(Debug, Default)]
pub struct Progress {
    /// Entries written.
    pub files: AtomicU64,
    /// Stored data bytes written.
    pub bytes: AtomicU64,
}

/// What a backup did.
#[derive(Debug, Clone)]
pub struct BackupReport {
    /// Catalog job id.
    pub job_id: i64,
    /// `ok` or `partial`.
    pub status: String,
    /// Entries backed up.
    pub files: u64,
    /// Data bytes stored.
    pub bytes: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Barcodes written, in order.
    pub volumes: Vec<String>,
    /// Source objects that could not be backed up: path and reason.
    pub errors: Vec<(String, String)>,
    /// Blocks written, all streams.
    pub blocks: u64,
}

struct Done {
    row: FileRow,
    start_block: u64,
    end_block: u64,
}

enum Msg {
    Block {
        block: PackedBlock,
        done: Vec<Done>,
        keep_from: u64,
    },
    Error(Vec<u8>, String),
}

/// Names streams after the last component of their source, made unique.
fn stream_names(sources: &[PathBuf]) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    sources
        .iter()
        .map(|s| {
            let base = s
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| "root".into());
            let n = seen.entry(base.clone()).or_insert(0);
            *n += 1;
            if *n == 1 {
                base
            } else {
                format!("{base}-{n}")
            }
        })
        .collect()
}

/// Backs up `sources` to the home's library.
pub fn backup(
    home: &Home,
    sources: &[PathBuf],
    opts: &BackupOptions,
    progress: Arc<Progress>,
) -> Result<BackupReport> {
    let t0 = Instant::now();
    check_block_size(opts.block_size)?;
    if sources.is_empty() {
        return Err(Error::Msg(
            "nothing to back up: give at least one source".into(),
        ));
    }
    let mut abs_sources = Vec::new();
    for s in sources {
        let a = io(std::path::absolute(s), || format!("source {}", s.display()))?;
        io(std::fs::symlink_metadata(&a), || {
            format!("source {}", s.display())
        })?;
        abs_sources.push(a);
    }
    let names = stream_names(&abs_sources);
    let single = abs_sources.len() == 1;
    // The namespace: one source is the root itself; several are top-level folders.
    let roots: Vec<Vec<u8>> = abs_sources
        .iter()
        .zip(&names)
        .map(|(a, n)| {
            let is_dir = std::fs::symlink_metadata(a)
                .map(|m| m.is_dir())
                .unwrap_or(false);
            if single && is_dir {
                b".".to_vec()
            } else if single {
                a.file_name()
                    .map(|f| f.as_bytes().to_vec())
                    .unwrap_or_else(|| n.as_bytes().to_vec())
            } else {
                n.as_bytes().to_vec()
            }
        })
        .collect();
    let job_name = if opts.name.is_empty() {
        names.join(",")
    } else {
        opts.name.clone()
    };
    let tag = u64::from_le_bytes(random_uuid()[..8].try_into().unwrap_or([7; 8]));
    let started = Timestamp::now();
    let streams: Vec<StreamInfo> = abs_sources
        .iter()
        .zip(&names)
        .enumerate()
        .map(|(i, (a, n))| StreamInfo {
            id: (i + 1) as u16,
            name: n.clone(),
            source: a.as_os_str().as_bytes().to_vec(),
        })
        .collect();
    let cat = &home.catalog;
    let job_id = cat.begin_job(
        tag,
        &job_name,
        started.as_nanos(),
        opts.block_size as u32,
        &streams
            .iter()
            .map(|s| Stream {
                stream: s.id,
                name: s.name.clone(),
                source: s.source.clone(),
            })
            .collect::<Vec<_>>(),
    )?;
    let host = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default();
    let start = JobStart {
        job_tag: tag,
        started,
        block_size: opts.block_size as u32,
        volume_seq: 0,
        name: job_name,
        host,
        streams: streams.clone(),
    };
    let mut w = VolumeWriter::begin(cat, home.library()?, opts.drive, job_id, start)?;

    let (tx, rx) = sync_channel::<Msg>(opts.buffers.max(2));
    let (back_tx, back_rx) = sync_channel::<Vec<u8>>(opts.buffers.max(2));
    let block_size = opts.block_size;
    let readers = opts.readers;
    let work: Vec<(u16, PathBuf, Vec<u8>)> = streams
        .iter()
        .zip(abs_sources.iter().zip(roots))
        .map(|(s, (a, r))| (s.id, a.clone(), r))
        .collect();
    let skip: Vec<(u64, u64)> = std::fs::metadata(home.dir())
        .map(|m| vec![(m.dev(), m.ino())])
        .unwrap_or_default();
    let packer = std::thread::spawn(move || -> Result<(u64, u64)> {
        let mut totals = (0, 0);
        for (id, abs, root) in work {
            let fetched = source::start(vec![(abs.clone(), root.clone())], readers, skip.clone());
            let host = HostPath { abs, root };
            let (e, b) = pack_stream(id, tag, block_size, fetched, &tx, &back_rx, &host)?;
            totals.0 += e;
            totals.1 += b;
        }
        Ok(totals)
    });

    let mut errors = Vec::new();
    let mut rows = Vec::new();
    let mut positions: HashMap<u16, (u64, VecDeque<(u32, u64)>)> = HashMap::new();
    let mut files = 0u64;
    let mut bytes = 0u64;
    let write_result = (|| -> Result<()> {
        for msg in rx.iter() {
            match msg {
                Msg::Block {
                    mut block,
                    done,
                    keep_from,
                } => {
                    let at = w.write(&mut block)?;
                    let (base, map) = positions
                        .entry(block.header.stream)
                        .or_insert((block.seq, VecDeque::new()));
                    map.push_back(at);
                    for d in done {
                        let s = map
                            .get((d.start_block - *base) as usize)
                            .copied()
                            .ok_or_else(|| Error::Msg("entry start position lost".into()))?;
                        let e = map
                            .get((d.end_block - *base) as usize)
                            .copied()
                            .ok_or_else(|| Error::Msg("entry end position lost".into()))?;
                        let mut row = d.row;
                        row.start_seq = s.0;
                        row.start_lbn = s.1;
                        row.end_seq = e.0;
                        row.end_lbn = e.1;
                        files += 1;
                        if row.kind == EntryType::Regular as u8 {
                            bytes += row.size;
                            progress.bytes.fetch_add(row.size, Ordering::Relaxed);
                        }
                        progress.files.fetch_add(1, Ordering::Relaxed);
                        rows.push(row);
                    }
                    while *base < keep_from && !map.is_empty() {
                        map.pop_front();
                        *base += 1;
                    }
                    let _ = back_tx.try_send(block.buf);
                    if rows.len() >= 4096 {
                        cat.add_files(job_id, &rows)?;
                        rows.clear();
                    }
                }
                Msg::Error(p, why) => {
                    cat.add_error(job_id, &p, &why)?;
                    errors.push((crate::display_path(&p), why));
                }
            }
        }
        cat.add_files(job_id, &rows)?;
        Ok(())
    })();
    // Stop the packer whatever happened, then report the first failure.
    drop(rx);
    drop(back_tx);
    let packed = packer
        .join()
        .map_err(|_| Error::Msg("the packer thread panicked".into()))?;
    write_result?;
    let (entries, stored) = packed?;
    debug_assert_eq!(entries, files);

    // The index, then the job end record.
    let mut first_at = None;
    let mut after: Option<Vec<u8>> = None;
    loop {
        let page = cat.files_after(job_id, after.as_deref(), 2048)?;
        let chunk: Vec<IndexEntry> = page.iter().map(index_entry).collect::<Result<_>>()?;
        let at = w.index_chunk(&IndexEntry::encode_chunk(&chunk))?;
        first_at.get_or_insert(at);
        match page.last() {
            Some(last) if page.len() == 2048 => after = Some(last.path.clone()),
            _ => break,
        }
    }
    let index_start = match first_at {
        Some(at) => w.ctl_position(at)?,
        None => Pos::default(),
    };
    let status = if errors.is_empty() {
        JobStatus::Ok
    } else {
        JobStatus::Partial
    };
    let ended = Timestamp::now();
    let job_end = JobEnd {
        job_tag: tag,
        ended,
        status,
        entries: files,
        bytes: stored,
        index_start,
        volumes: w.uuids(),
    };
    w.end(&job_end.encode())?;
    let status = if errors.is_empty() { "ok" } else { "partial" };
    let seconds = t0.elapsed().as_secs_f64();
    cat.finish_job(job_id, status, files, bytes, seconds, ended.as_nanos())?;
    Ok(BackupReport {
        job_id,
        status: status.into(),
        files,
        bytes,
        seconds,
        volumes: w.volumes.iter().map(|v| v.barcode.clone()).collect(),
        errors,
        blocks: w.blocks,
    })
}

fn index_entry(r: &FileRow) -> Result<IndexEntry> {
    Ok(IndexEntry {
        stream: r.stream,
        kind: EntryType::from_u8(r.kind)?,
        size: r.size,
        mtime: Timestamp::from_nanos(r.mtime_ns),
        mode: r.mode,
        start: Pos {
            volume_seq: r.start_seq,
            lbn: r.start_lbn,
            offset: r.start_off,
        },
        end: Pos {
            volume_seq: r.end_seq,
            lbn: r.end_lbn,
            offset: 0,
        },
        crc: r.crc,
        path: r.path.clone(),
        link: r.link.clone(),
    })
}

/// Turns a path of the job namespace back into the path on this host, for errors.
struct HostPath {
    abs: PathBuf,
    root: Vec<u8>,
}

impl HostPath {
    fn of(&self, rel: &[u8]) -> Vec<u8> {
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

/// The writer stopped (it failed); the packer just ends.
struct Stopped;

struct Packer<'a> {
    p: StreamPacker,
    stream: u16,
    tx: &'a SyncSender<Msg>,
    back: &'a Receiver<Vec<u8>>,
    waiting: Vec<Done>,
    open_start: Option<u64>,
}

impl Packer<'_> {
    fn drain(&mut self) -> std::result::Result<(), Stopped> {
        if self.p.ready.is_empty() {
            return Ok(());
        }
        while let Ok(b) = self.back.try_recv() {
            self.p.recycle(b);
        }
        let ready: Vec<PackedBlock> = self.p.ready.drain(..).collect();
        for block in ready {
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
            self.tx
                .send(Msg::Block {
                    block,
                    done,
                    keep_from,
                })
                .map_err(|_| Stopped)?;
        }
        Ok(())
    }

    fn error(&mut self, path: Vec<u8>, why: String) -> std::result::Result<(), Stopped> {
        self.tx.send(Msg::Error(path, why)).map_err(|_| Stopped)
    }
}

fn pack_stream(
    stream: u16,
    tag: u64,
    block_size: usize,
    fetched: Receiver<Receiver<Fetched>>,
    tx: &SyncSender<Msg>,
    back: &Receiver<Vec<u8>>,
    host: &HostPath,
) -> Result<(u64, u64)> {
    let mut pk = Packer {
        p: StreamPacker::new(stream, tag, block_size),
        stream,
        tx,
        back,
        waiting: Vec::new(),
        open_start: None,
    };
    let mut links: HashMap<(u64, u64), Vec<u8>> = HashMap::new();
    let (mut entries, mut stored) = (0u64, 0u64);
    for one in fetched.iter() {
        let Ok(f) = one.recv() else { break };
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
                pack_item(&mut pk, entry, content, host)
            }
        };
        if r.is_err() {
            // The writer is gone; it reports why.
            return Ok((entries, stored));
        }
    }
    let se = StreamEnd {
        entries,
        bytes: stored,
    };
    pk.p.record(Kind::StreamEnd, &se.encode());
    pk.p.finish_block();
    let _ = pk.drain();
    Ok((entries, stored))
}

fn pack_item(
    pk: &mut Packer<'_>,
    entry: Entry,
    content: Content,
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
            Content::Bytes(b) => {
                crc = crc32c::crc32c(&b);
                pk.p.write(&b);
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
    fn stream_names_are_unique() {
        let names = stream_names(&[
            PathBuf::from("/a/data"),
            PathBuf::from("/b/data"),
            PathBuf::from("/"),
            PathBuf::from("/c/data"),
        ]);
        assert_eq!(names, vec!["data", "data-2", "root", "data-3"]);
    }

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
