//! The backup data path.
//!
//! Threads: per stream, the walker and readers of [`crate::source`] and a packer that
//! turns objects into records and blocks; and the caller's thread, the writer, which
//! alone talks to the drive and the catalog. The writer interleaves up to
//! `concurrency` streams in extents of consecutive blocks (see [`crate::mux`]),
//! taking the next stream that has data when the current one has none or its extent
//! is full. Buffers come back to the packers for reuse.

use crate::compress::{Compress, CompressionCounters, Compressor};
use crate::error::{io, Error, Result};
use crate::home::Home;
use crate::mux::{Done, Msg, Outlet, Stopped};
use crate::source::{Content, Fetched, Item};
use crate::volumes::{random_uuid, Tapes, VolumeWriter};
use crate::weave::{weave, DriveReport, JobShared, Pending, Woven};
use std::collections::{HashMap, VecDeque};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
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
    /// Blocks in the pool between the packers and the writer.
    pub buffers: usize,
    /// Reader threads per stream fetching metadata and small files.
    pub readers: usize,
    /// Drives to write with.
    pub drives: DriveSet,
    /// Streams interleaved at once; `None` chooses as the job goes.
    pub concurrency: Option<usize>,
    /// Most consecutive blocks of one stream before the writer turns to another.
    pub extent_blocks: usize,
    /// Fill of the pool (0..1) the writer waits for before it starts, and restarts
    /// after running dry.
    pub high_water: f64,
    /// Most bytes per second each stream reads.
    pub limit_rate: Option<f64>,
    /// Stream names given by the user, by source index.
    pub stream_names: Vec<Option<String>>,
    /// Bytes between filemarks inside a job (written with the immediate bit); 0 for
    /// none.
    pub segment_bytes: u64,
    /// Software compression.
    pub compress: Compress,
    /// The drive's own compression.
    pub drive_compression: bool,
}

/// Default filemark spacing: 16 GiB, about 40 seconds of an LTO-9 at full speed.
/// Filemarks written with the immediate bit do not flush the drive, so they cost
/// nothing in speed; restores position by block and never need them. They are there
/// for tools that space by filemark (`mt fsf`), as NERSC's tapemarks every gigabyte
/// were; few and far between, because a drive that gets one without the immediate bit
/// (an older driver) would stop.
pub const DEFAULT_SEGMENT_BYTES: u64 = 16 << 30;

/// Default extent: 64 MiB of one stream. At LTO-9 speed that is a sixth of a second
/// of tape; a restore of one stream skips the others in steps no smaller than this,
/// and a 20 TB job needs about 300,000 extent rows.
pub const DEFAULT_EXTENT_BYTES: u64 = 64 << 20;

impl Default for BackupOptions {
    fn default() -> Self {
        BackupOptions {
            name: String::new(),
            block_size: tapeloom_format::DEFAULT_BLOCK_SIZE,
            buffers: 64,
            readers: 4,
            drives: DriveSet::Count(1),
            concurrency: None,
            extent_blocks: (DEFAULT_EXTENT_BYTES / tapeloom_format::DEFAULT_BLOCK_SIZE as u64)
                as usize,
            high_water: 0.5,
            limit_rate: None,
            stream_names: Vec::new(),
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            compress: Compress::Auto,
            drive_compression: true,
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
    /// The latest sample of each stream and drive (`stream:NAME`, `drive:N`): bytes
    /// so far and, for drives with a model, backhitches so far. Updated every second.
    pub series: Mutex<std::collections::BTreeMap<String, (u64, Option<u64>)>>,
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
    /// Seconds from the moment the first cartridge was mounted and positioned until
    /// the last data block was written: the job less loads, label reads, positioning,
    /// the index and the final flush.
    pub data_seconds: f64,
    /// Barcodes written, in order.
    pub volumes: Vec<String>,
    /// Source objects that could not be backed up: path and reason.
    pub errors: Vec<(String, String)>,
    /// Blocks written, all streams.
    pub blocks: u64,
    /// Per stream: name, data bytes, seconds from the job's start to its end.
    pub streams: Vec<StreamReport>,
    /// Most streams interleaved at once, all drives together.
    pub max_concurrency: usize,
    /// Extents written.
    pub extents: u64,
    /// Filemarks written inside the job's segments.
    pub filemarks: u64,
    /// Per drive: what it wrote, its waits and its statistics.
    pub drives: Vec<DriveReport>,
    /// Whether blocks were compressed in software (zstd).
    pub software_compression: bool,
    /// Data block payload bytes, and the bytes stored for them.
    pub compression_raw_bytes: u64,
    /// Bytes stored for the data block payloads.
    pub compression_stored_bytes: u64,
    /// Blocks stored compressed, and stored as they were.
    pub compressed_blocks: (u64, u64),
}

/// One stream of a finished backup.
#[derive(Debug, Clone)]
pub struct StreamReport {
    /// Stream name.
    pub name: String,
    /// Data bytes.
    pub bytes: u64,
    /// Entries.
    pub files: u64,
    /// Seconds from the job's start until the stream's last block was written.
    pub seconds: f64,
    /// The drive that carried it, when the job chose drives.
    pub drive: Option<usize>,
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
    if let Some(r) = opts.limit_rate.filter(|r| !(r.is_finite() && *r > 0.0)) {
        return Err(Error::Msg(format!(
            "a stream's rate limit must be above 0 bytes per second, not {r}"
        )));
    }
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
    let mut names = stream_names(&abs_sources);
    for (n, given) in names.iter_mut().zip(&opts.stream_names) {
        if let Some(g) = given {
            *n = g.clone();
        }
    }
    for (i, n) in names.iter().enumerate() {
        if n.is_empty() || n.contains('/') || n == "." || n == ".." {
            return Err(Error::Msg(format!(
                "stream name '{n}' is not a valid folder name"
            )));
        }
        if names[..i].contains(n) {
            return Err(Error::Msg(format!("two streams are named '{n}'")));
        }
    }
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
    let lib = home.library()?;
    // The drive's compressor runs at line rate with no host CPU; software compression
    // takes over when a tape drive's own is off. A library without a drive model
    // writes to disk faster than zstd runs on a few cores (see `Compress::Auto`).
    let software = match opts.compress {
        Compress::None => false,
        Compress::Zstd => true,
        Compress::Auto => lib.drives_compress() && !opts.drive_compression,
    };
    let tapes = Arc::new(Tapes::new(lib));
    let counters = Arc::new(CompressionCounters::default());
    let drives = resolve_drives(&opts.drives, tapes.drives()?)?;
    let skip: Vec<(u64, u64)> = std::fs::metadata(home.dir())
        .map(|m| vec![(m.dev(), m.ino())])
        .unwrap_or_default();
    let n_streams = streams.len();
    let pending: VecDeque<Pending> = streams
        .iter()
        .zip(abs_sources.iter().zip(roots))
        .map(|(s, (a, r))| Pending {
            id: s.id,
            name: s.name.clone(),
            abs: a.clone(),
            root: r,
        })
        .collect();
    let job = JobShared {
        opts,
        tag,
        job_id,
        skip,
        pending: Mutex::new(pending),
        progress,
        t0,
        stop: AtomicBool::new(false),
        expected: n_streams.div_ceil(drives.len()).clamp(1, 4),
        software,
        counters: Arc::clone(&counters),
    };
    // One writer per drive, each with its own catalog connection. The first carries
    // the job start; every drive that will get a stream mounts its cartridge now, all
    // at once (a load takes a drive a quarter of a minute, and a drive still loading
    // when the data starts would get no streams).
    let mut conns = Vec::new();
    for _ in &drives {
        conns.push(home.connect()?);
    }
    let used = n_streams.clamp(1, drives.len());
    let begun: Vec<Result<VolumeWriter>> = std::thread::scope(|sc| {
        let hs: Vec<_> = drives
            .iter()
            .zip(conns)
            .enumerate()
            .map(|(i, (d, cat))| {
                let (tapes, start) = (Arc::clone(&tapes), start.clone());
                let compression = opts.drive_compression;
                sc.spawn(move || {
                    let mut w =
                        VolumeWriter::begin(cat, tapes, *d, job_id, start, i == 0, compression)?;
                    if i < used {
                        w.prepare()?;
                    }
                    Ok(w)
                })
            })
            .collect();
        join_all(hs, "mount")
    });
    let mut writers = Vec::new();
    for w in begun {
        let mut w = w?;
        w.segment_bytes = opts.segment_bytes;
        writers.push(w);
    }
    // Data flows from here on: the first cartridge is mounted and positioned.
    let t_data = Instant::now();
    let results: Vec<Result<Woven>> = std::thread::scope(|sc| {
        let handles: Vec<_> = writers
            .iter_mut()
            .map(|w| {
                let job = &job;
                sc.spawn(move || {
                    let r = weave(job, w);
                    if r.is_err() {
                        job.stop.store(true, Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        join_all(handles, "writer")
    });
    let data_seconds = t_data.elapsed().as_secs_f64();
    // The first error is the cause; the others stopped because of it.
    let mut woven = Vec::new();
    let mut first_err = None;
    for r in results {
        match r {
            Ok(x) => woven.push(x),
            Err(e) => {
                let stopped =
                    matches!(&e, Error::Msg(m) if m.starts_with("stopped: another drive"));
                if first_err.is_none() || (!stopped && first_err.as_ref().is_some_and(|(s, _)| *s))
                {
                    first_err = Some((stopped, e));
                }
            }
        }
    }
    if let Some((_, e)) = first_err {
        return Err(e);
    }
    // The other drives end their segments; their data is on tape before the index.
    for w in writers.iter_mut().skip(1) {
        w.finish()?;
    }
    let (mut files, mut bytes, mut entries, mut stored) = (0u64, 0u64, 0u64, 0u64);
    let mut errors = Vec::new();
    let mut per_stream = Vec::new();
    let mut samples = Vec::new();
    let mut drive_reports = Vec::new();
    for x in woven {
        files += x.report.files;
        bytes += x.report.bytes;
        entries += x.entries;
        stored += x.stored;
        errors.extend(x.errors);
        per_stream.extend(x.streams);
        samples.extend(x.samples);
        drive_reports.push(x.report);
    }
    debug_assert_eq!(entries, files);
    let _ = entries;
    let n_extents = cat.extents(job_id)?.len() as u64;
    let mut all_volumes: Vec<(u32, tapeloom_catalog::Volume)> = writers
        .iter()
        .flat_map(|w| w.volumes.iter().cloned())
        .collect();
    all_volumes.sort_by_key(|(seq, _)| *seq);
    let w = &mut writers[0];

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
        volumes: all_volumes.iter().map(|(_, v)| v.uuid).collect(),
    };
    w.end(&job_end.encode())?;
    let status = if errors.is_empty() { "ok" } else { "partial" };
    let seconds = t0.elapsed().as_secs_f64();
    cat.add_samples(job_id, "backup", &samples)?;
    cat.finish_job(job_id, status, files, bytes, seconds, ended.as_nanos())?;
    for (d, w) in drive_reports.iter_mut().zip(&writers) {
        d.blocks = w.blocks;
        d.filemarks = w.filemarks;
        d.volumes = w.volumes.iter().map(|(_, v)| v.barcode.clone()).collect();
        d.drive_stats = w.drive_stats();
        d.health = w.health.clone();
        d.drive_compressed = w.drive_compressed;
        let drive = d.drive.unwrap_or(0);
        for (barcode, h) in &w.health {
            cat.add_drive_health(
                job_id,
                "backup",
                drive as i64,
                barcode,
                &serde_json::to_string(h).map_err(|e| Error::Msg(e.to_string()))?,
            )?;
        }
    }
    per_stream.sort_by_key(|(id, _)| *id);
    Ok(BackupReport {
        job_id,
        status: status.into(),
        files,
        bytes,
        seconds,
        data_seconds,
        volumes: all_volumes.iter().map(|(_, v)| v.barcode.clone()).collect(),
        errors,
        blocks: drive_reports.iter().map(|d| d.blocks).sum(),
        streams: per_stream.into_iter().map(|(_, r)| r).collect(),
        max_concurrency: drive_reports.iter().map(|d| d.max_concurrency).sum(),
        extents: n_extents,
        filemarks: drive_reports.iter().map(|d| d.filemarks).sum(),
        drives: drive_reports,
        software_compression: software,
        compression_raw_bytes: counters.raw.load(Ordering::Relaxed),
        compression_stored_bytes: counters.stored.load(Ordering::Relaxed),
        compressed_blocks: (
            counters.compressed_blocks.load(Ordering::Relaxed),
            counters.raw_blocks.load(Ordering::Relaxed),
        ),
    })
}

/// Waits for one scoped thread per drive; a panic becomes that drive's error.
fn join_all<T>(
    hs: Vec<std::thread::ScopedJoinHandle<'_, Result<T>>>,
    what: &str,
) -> Vec<Result<T>> {
    hs.into_iter()
        .map(|h| {
            h.join()
                .unwrap_or_else(|_| Err(Error::Msg(format!("a drive's {what} panicked"))))
        })
        .collect()
}

/// Which drives a job uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriveSet {
    /// This many drives: one lets the volume policy pick it; more take the first N.
    Count(usize),
    /// Every drive of the library.
    All,
    /// These drives.
    List(Vec<usize>),
}

impl DriveSet {
    /// Parses `N`, `all` or a comma-separated list of drive indexes (`0,2`).
    pub fn parse(s: &str) -> std::result::Result<Self, String> {
        let bad = || format!("--drives takes a number, all, or a list like 0,2; not '{s}'");
        if s == "all" {
            return Ok(DriveSet::All);
        }
        if s.contains(',') {
            let v: Vec<usize> = s
                .split(',')
                .map(|x| x.trim().parse().map_err(|_| bad()))
                .collect::<std::result::Result<_, _>>()?;
            return Ok(DriveSet::List(v));
        }
        match s.parse::<usize>() {
            Ok(n) if n > 0 => Ok(DriveSet::Count(n)),
            _ => Err(bad()),
        }
    }
}

/// The drive of each writer: `None` lets the volume policy choose.
fn resolve_drives(set: &DriveSet, have: usize) -> Result<Vec<Option<usize>>> {
    let v: Vec<Option<usize>> = match set {
        DriveSet::Count(1) => vec![None],
        DriveSet::Count(n) if *n <= have => (0..*n).map(Some).collect(),
        DriveSet::Count(n) => {
            return Err(Error::Msg(format!(
                "the job asks for {n} drives; the library has {have}"
            )))
        }
        DriveSet::All => (0..have).map(Some).collect(),
        DriveSet::List(l) => {
            let mut seen = Vec::new();
            for d in l {
                if *d >= have {
                    return Err(Error::Msg(format!(
                        "the library has no drive {d} (it has {have})"
                    )));
                }
                if seen.contains(d) {
                    return Err(Error::Msg(format!("drive {d} is listed twice")));
                }
                seen.push(*d);
            }
            seen.into_iter().map(Some).collect()
        }
    };
    if v.is_empty() {
        return Err(Error::Msg("the job has no drive to write with".into()));
    }
    Ok(v)
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
pub(crate) struct HostPath {
    pub abs: PathBuf,
    pub root: Vec<u8>,
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

pub(crate) fn pack_stream(
    stream: u16,
    tag: u64,
    block_size: usize,
    fetched: Receiver<Receiver<Fetched>>,
    out: Outlet,
    host: &HostPath,
    comp: Option<(Compressor, Arc<CompressionCounters>)>,
) {
    let mut pk = Packer {
        p: StreamPacker::new(stream, tag, block_size),
        stream,
        out,
        comp,
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
            return;
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
