//! Further copies of a job (docs/COPIES.md): `tapeloom copy` reads each segment
//! of the job's own cartridges as it lies on tape and writes its objects, block
//! for block, onto cartridges of another pool. No block is decoded: each is
//! checked (its CRC, its job, its place) and only its place changes.
//!
//! With two drives or more, one drive reads while another writes, and a queue of
//! blocks between them keeps the writing drive streaming. With one drive, each
//! segment is read to a spool file first (on the home's first disk stage, else in
//! the home) and then written from it.

use crate::error::{CopyError, JobError, MediaError, Result};
use crate::home::Home;
use crate::media::policy::{place, read_label, Found};
use crate::media::reader::CopyMap;
use crate::media::segment::{read_segment, Object};
use crate::media::writer::{Copied, Tapes, VolumeWriter};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::time::Instant;
use tapeloom_catalog::{CopyState, JobState, JobVolume, VolumeState};

/// How to copy.
#[derive(Debug, Clone, Default)]
pub struct CopyOptions {
    /// The pool whose cartridges take the copy.
    pub to_pool: String,
    /// The drive that reads the job's cartridges (else one is chosen).
    pub read_drive: Option<usize>,
    /// The drive that writes the copy (else another than the reading one).
    pub write_drive: Option<usize>,
    /// Bytes of blocks the queue between the drives holds at most.
    pub queue_bytes: u64,
    /// The copy is written to move the job (`migrate`, `repack`): it may go to
    /// the pool the job is in, never onto these cartridges, and it stays
    /// `writing` (read by no restore) until the move makes it the job's place.
    pub moving: Option<Vec<String>>,
}

/// What a copy wrote.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CopyReport {
    /// The job copied.
    pub job_id: i64,
    /// The copy's number (2 for the first further copy).
    pub copy_no: u32,
    /// The pool it went to.
    pub pool: String,
    /// Blocks copied.
    pub blocks: u64,
    /// Filemarks inside the job's segments, copied.
    pub filemarks: u64,
    /// Bytes of the blocks copied, as stored on tape.
    pub bytes: u64,
    /// Copy segments written.
    pub segments: usize,
    /// Cartridges the copy is on, in order.
    pub cartridges: Vec<String>,
    /// Seconds, wall clock.
    pub seconds: f64,
    /// The drive that read, and the one that wrote.
    pub drives: (usize, usize),
    /// With one drive: the most bytes the spool file held at once.
    pub spool_peak_bytes: Option<u64>,
    /// How the reading drive ran (of its last segment), when it keeps
    /// statistics.
    pub read_drive: Option<DriveFigures>,
    /// How the writing drive ran, when it keeps statistics.
    pub write_drive: Option<DriveFigures>,
}

/// How a drive of a copy ran, from its statistics.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DriveFigures {
    /// Bytes it read (the reading drive) or was given to write (the writing one).
    pub bytes: u64,
    /// Seconds its tape moved with data.
    pub streaming_seconds: f64,
    /// Seconds its tape stood while it was in use.
    pub stopped_seconds: f64,
    /// Times its tape ran dry and backed up, or stopped for a flush.
    pub backhitches: u64,
    /// Of those, the ones while the data flowed (the writing drive: before the
    /// flush at the copy's end).
    pub backhitches_while_data: Option<u64>,
    /// `bytes` over `streaming_seconds`, in MB/s.
    pub mb_per_s: f64,
    /// Its model's top rate, in MB/s, when it has speed steps.
    pub top_mb_per_s: Option<f64>,
}

impl DriveFigures {
    fn new(s: &tapeloom_device::DriveStats, read: bool) -> Self {
        let bytes = if read {
            s.host_bytes_read
        } else {
            s.host_bytes
        };
        let rate = match s.streaming_seconds > 0.0 {
            true => bytes as f64 / s.streaming_seconds / 1e6,
            false => 0.0,
        };
        DriveFigures {
            bytes,
            streaming_seconds: s.streaming_seconds,
            stopped_seconds: s.stopped_seconds,
            backhitches: s.backhitches,
            backhitches_while_data: None,
            mb_per_s: rate,
            top_mb_per_s: s.speed_steps_mb_s.iter().copied().reduce(f64::max),
        }
    }
}

/// The queue's size when none is asked for.
const DEFAULT_QUEUE: u64 = 256 << 20;

/// What the reading drive hands the writing one.
enum Msg {
    /// The objects that follow are the original's from (sequence, LBN) on.
    Piece(u32, u64),
    /// One object.
    Object(Copied),
}

/// Copies job `job_id` onto cartridges of `opts.to_pool`. The copy is recorded
/// as it is written (state `writing`) and becomes `ok` once every block is on
/// tape; a copy that fails is forgotten, and its cartridges keep only dead data.
pub fn copy_job(home: &Home, job_id: i64, opts: &CopyOptions) -> Result<CopyReport> {
    let cat = &home.catalog;
    let job = cat.job(job_id)?.ok_or(JobError::NoJob(job_id))?;
    if !matches!(job.status, JobState::Ok | JobState::Partial) {
        return Err(CopyError::NotEnded {
            job: job_id,
            status: job.status.as_str(),
        }
        .into());
    }
    let vols = read_pieces(cat, job_id)?;
    if vols.is_empty() {
        return Err(JobError::NothingOnTape(job_id).into());
    }
    let pool = cat
        .pool(&opts.to_pool)?
        .ok_or_else(|| MediaError::UnknownPool {
            pool: opts.to_pool.clone(),
        })?;
    let same = vols.iter().find(|(v, _)| v.volume.pool == pool.name);
    if let (Some((v, _)), None) = (same, &opts.moving) {
        return Err(CopyError::SamePool {
            job: job_id,
            pool: pool.name,
            barcode: v.volume.barcode.clone(),
        }
        .into());
    }
    let start = crate::backup::job_start(home, &job)?;
    let key_body = job.key.as_ref().map(|(_, body)| body.clone());
    let mut tapes = Tapes::new(home.library()?);
    tapes.pool = pool.clone();
    if let Some(avoid) = &opts.moving {
        tapes.moving = true;
        tapes.avoid = avoid.clone();
        tapes
            .avoid
            .extend(vols.iter().map(|(v, _)| v.volume.barcode.clone()));
    }
    let tapes = Arc::new(tapes);
    let drives = tapes.drives()?;
    let read_drive = opts.read_drive.unwrap_or(0);
    let write_drive = match opts.write_drive {
        Some(d) => d,
        None if drives > 1 => (0..drives).find(|d| *d != read_drive).unwrap_or(1),
        None => read_drive,
    };
    let now = crate::clock::now()?.as_nanos();
    let copy_no = cat.begin_copy(job_id, &pool.name, now)?;
    let t0 = Instant::now();
    let mut w = VolumeWriter::begin_copy(
        home.connect()?,
        Arc::clone(&tapes),
        Some(write_drive),
        (job_id, start),
        copy_no,
        key_body,
    )?;
    let shape = (job.tag, job.block_size as usize);
    let run = if read_drive == write_drive {
        through_spool(home, &tapes, read_drive, (&vols, shape), &mut w)
    } else {
        let queue = if opts.queue_bytes == 0 {
            DEFAULT_QUEUE
        } else {
            opts.queue_bytes
        };
        let depth = (queue / (job.block_size.max(1) as u64)).clamp(4, 1 << 16) as usize;
        streamed(&tapes, read_drive, (&vols, shape), &mut w, depth).map(|s| (s, None))
    };
    // Backhitches while the data flowed: before the last flush, which stops the
    // tape as every flush does.
    let while_data = w.drive_stats().map(|s| s.backhitches);
    let finished = run.and_then(|r| w.finish().map(|_| r));
    let ((read, read_stats), spool_peak_bytes) = match finished {
        Ok(r) => r,
        Err(e) => {
            // The original is untouched; the half-written copy is dropped.
            let _ = cat.forget_copy(job_id, copy_no);
            return Err(e);
        }
    };
    if opts.moving.is_none() {
        cat.set_copy_state(job_id, copy_no, CopyState::Ok)?;
    }
    let segs = cat.copy_segments(job_id, copy_no)?;
    let mut cartridges: Vec<String> = Vec::new();
    for (_, v) in &w.volumes {
        if !cartridges.contains(&v.barcode) {
            cartridges.push(v.barcode.clone());
        }
    }
    Ok(CopyReport {
        job_id,
        copy_no,
        pool: pool.name,
        blocks: read.blocks,
        filemarks: read.filemarks,
        bytes: read.bytes,
        segments: segs.len(),
        cartridges,
        seconds: t0.elapsed().as_secs_f64(),
        drives: (read_drive, write_drive),
        spool_peak_bytes,
        read_drive: read_stats.as_ref().map(|s| DriveFigures::new(s, true)),
        write_drive: w.drive_stats().map(|s| DriveFigures {
            backhitches_while_data: while_data,
            ..DriveFigures::new(&s, false)
        }),
    })
}

/// What a copy reads: each run of the job's objects as it lies on tape (a
/// segment on its cartridge, from its first LBN to its last), and where the
/// run starts in the job's own positions (volume sequence, LBN).
type Piece = (JobVolume, (u32, u64));

/// The job's shape: what to read, in order, and its (tag, block size).
type Shape<'a> = (&'a [Piece], (u64, usize));

/// What a copy of job `job_id` reads: the job's own segments, in sequence order;
/// or, for a job moved to a copy, that copy's segments, each named by where it
/// starts in the job's own positions.
fn read_pieces(cat: &tapeloom_catalog::Catalog, job_id: i64) -> Result<Vec<Piece>> {
    let mut vols = cat.job_volumes(job_id)?;
    vols.sort_by_key(|v| v.seq);
    let Some(to) = cat.moved_to(job_id)? else {
        return Ok(vols
            .into_iter()
            .map(|v| {
                let from = (v.seq, v.first_lbn);
                (v, from)
            })
            .collect());
    };
    let map = CopyMap::load(cat, job_id, to)?;
    let mut out = Vec::new();
    for s in map.segments() {
        let Some(volume) = map.volume(s.volume_id) else {
            continue;
        };
        let objects = s.objects.unwrap_or(0);
        if objects == 0 {
            continue;
        }
        let v = JobVolume {
            seq: s.seq,
            volume: volume.clone(),
            first_lbn: s.first_lbn,
            last_lbn: Some(s.first_lbn + objects - 1),
            chain: None,
        };
        out.push((v, (s.orig_seq, s.orig_first_lbn)));
    }
    Ok(out)
}

/// What the reading side read, and its drive's statistics.
type Read = (
    crate::media::segment::SegmentRead,
    Option<tapeloom_device::DriveStats>,
);

/// Mounts the cartridge of `v` in `drive`, checks its label, and reads its
/// segment, handing each object to `each`. The drive's statistics after.
fn read_one(
    tapes: &Tapes,
    drive: usize,
    v: &JobVolume,
    shape: (u64, usize),
    each: impl FnMut(u64, Object<'_>) -> Result<()>,
) -> Result<(
    crate::media::segment::SegmentRead,
    Option<tapeloom_device::DriveStats>,
)> {
    let (_, mut d, moved) = tapes.with_library(|lib| place(lib, &v.volume.barcode, Some(drive)))?;
    if moved {
        d.load()?;
    }
    match read_label(&mut *d)? {
        Found::Label(l) if l.uuid == v.volume.uuid => {}
        _ => {
            return Err(MediaError::WrongVolume {
                barcode: v.volume.barcode.clone(),
                seq: v.seq,
            }
            .into())
        }
    }
    let read = read_segment(&mut *d, v, shape, each)?;
    Ok((read, d.stats()))
}

/// Adds what one segment's reading gave to the totals.
fn add(total: &mut crate::media::segment::SegmentRead, r: crate::media::segment::SegmentRead) {
    total.blocks += r.blocks;
    total.filemarks += r.filemarks;
    total.bytes += r.bytes;
}

/// Two drives: a thread reads each segment into a queue of `depth` objects, and
/// the writer takes them as they come.
fn streamed(
    tapes: &Arc<Tapes>,
    read_drive: usize,
    (vols, shape): Shape<'_>,
    w: &mut VolumeWriter,
    depth: usize,
) -> Result<Read> {
    if vols.is_empty() {
        return Err(CopyError::WriterGone.into());
    }
    let (tx, rx): (SyncSender<Msg>, Receiver<Msg>) = sync_channel(depth);
    std::thread::scope(|sc| {
        let reader = sc.spawn(move || -> Result<Read> {
            let mut total = crate::media::segment::SegmentRead::default();
            let mut stats = None;
            for (v, (seq, lbn)) in vols {
                if tx.send(Msg::Piece(*seq, *lbn)).is_err() {
                    return Err(CopyError::WriterGone.into());
                }
                let (r, s) = read_one(tapes, read_drive, v, shape, |_, o| {
                    let m = match o {
                        Object::Block(b, h) => Copied::Block(b.to_vec(), h),
                        Object::Filemark => Copied::Filemark,
                    };
                    tx.send(Msg::Object(m))
                        .map_err(|_| CopyError::WriterGone.into())
                })?;
                add(&mut total, r);
                stats = s;
            }
            Ok((total, stats))
        });
        // The writing drive loads its cartridge while the reading one loads and
        // starts, then waits for half the queue: it streams from then on while
        // the reading drive keeps up.
        let (_, (seq0, lbn0)) = vols[0];
        let mut written = (w.copy_piece(seq0, lbn0)).and_then(|_| w.mount_first());
        let mut early = Vec::new();
        if written.is_ok() {
            for m in rx.iter() {
                early.push(m);
                if early.len() >= depth / 2 {
                    break;
                }
            }
        }
        for m in early.into_iter().chain(rx.iter()) {
            if written.is_err() {
                break;
            }
            let r = match m {
                Msg::Piece(seq, lbn) => w.copy_piece(seq, lbn),
                Msg::Object(o) => w.copy_object(o),
            };
            if let Err(e) = r {
                written = Err(e);
                break;
            }
        }
        // A writer that failed stops the reader at its next send.
        drop(rx);
        let read = reader
            .join()
            .unwrap_or_else(|_| Err(CopyError::ReaderPanicked.into()));
        written?;
        read
    })
}

/// One drive: each segment is read into a spool file (on the home's first disk
/// stage, else in the home), then the
/// cartridge is set aside and the copy's cartridge written from the file. The
/// spool's peak size comes back too.
fn through_spool(
    home: &Home,
    tapes: &Arc<Tapes>,
    drive: usize,
    (vols, shape): Shape<'_>,
    w: &mut VolumeWriter,
) -> Result<(Read, Option<u64>)> {
    // On the home's first disk stage when it has one, else in the home.
    let dir = match home.catalog.stages()?.into_iter().next() {
        Some(stage) => stage.path,
        None => home.dir().to_path_buf(),
    };
    let path = dir.join(format!("copy-spool-{}", std::process::id()));
    let io = |what: &str, source| crate::error::Error::Io {
        what: format!("{what} {}", path.display()),
        source,
    };
    let mut total = crate::media::segment::SegmentRead::default();
    let mut stats = None;
    let mut peak = 0u64;
    let result = (|| -> Result<()> {
        for (v, (seq, lbn)) in vols {
            let mut spool = Spool::create(&path).map_err(|e| io("create", e))?;
            let (r, s) = read_one(tapes, drive, v, shape, |_, o| {
                spool.push(&o).map_err(|e| io("write", e))
            })?;
            add(&mut total, r);
            stats = s;
            peak = peak.max(spool.bytes);
            w.copy_piece(*seq, *lbn)?;
            let mut back = spool.replay().map_err(|e| io("read", e))?;
            while let Some(o) = back.next_object()? {
                w.copy_object(o)?;
            }
            // The drive is the reader's again for the next segment.
            w.set_aside()?;
        }
        Ok(())
    })();
    let _ = std::fs::remove_file(&path);
    result?;
    Ok(((total, stats), Some(peak)))
}

/// A segment's objects on disk, for a copy with one drive: each a kind byte
/// (1 a block, 2 a filemark), then for a block its length (4 bytes, little
/// endian) and its bytes as read.
struct Spool {
    file: std::io::BufWriter<std::fs::File>,
    path: std::path::PathBuf,
    bytes: u64,
}

impl Spool {
    fn create(path: &std::path::Path) -> std::io::Result<Spool> {
        let f = std::fs::File::create(path)?;
        Ok(Spool {
            file: std::io::BufWriter::with_capacity(4 << 20, f),
            path: path.to_path_buf(),
            bytes: 0,
        })
    }

    fn push(&mut self, o: &Object<'_>) -> std::io::Result<()> {
        use std::io::Write;
        match o {
            Object::Block(b, _) => {
                self.file.write_all(&[1])?;
                self.file.write_all(&(b.len() as u32).to_le_bytes())?;
                self.file.write_all(b)?;
                self.bytes += 5 + b.len() as u64;
            }
            Object::Filemark => {
                self.file.write_all(&[2])?;
                self.bytes += 1;
            }
        }
        Ok(())
    }

    /// Reads the objects back, from the first.
    fn replay(self) -> std::io::Result<Unspool> {
        let f = self.file.into_inner().map_err(|e| e.into_error())?;
        f.sync_data()?;
        drop(f);
        let f = std::fs::File::open(&self.path)?;
        Ok(Unspool {
            file: std::io::BufReader::with_capacity(4 << 20, f),
            path: self.path,
        })
    }
}

/// A spool file read back.
struct Unspool {
    file: std::io::BufReader<std::fs::File>,
    path: std::path::PathBuf,
}

impl Unspool {
    /// The next object; `None` at the end. A block is checked again as it is
    /// read back: the disk may have changed it.
    fn next_object(&mut self) -> Result<Option<Copied>> {
        use std::io::Read;
        let io = |source| crate::error::Error::Io {
            what: format!("read {}", self.path.display()),
            source,
        };
        let mut kind = [0u8; 1];
        match self.file.read(&mut kind).map_err(io)? {
            0 => return Ok(None),
            _ if kind[0] == 2 => return Ok(Some(Copied::Filemark)),
            _ => {}
        }
        let mut len = [0u8; 4];
        self.file.read_exact(&mut len).map_err(io)?;
        let n = u32::from_le_bytes(len) as usize;
        if kind[0] != 1 || n > tapeloom_format::MAX_BLOCK_SIZE {
            return Err(CopyError::SpoolDamaged {
                path: self.path.clone(),
            }
            .into());
        }
        let mut buf = vec![0u8; n];
        self.file.read_exact(&mut buf).map_err(io)?;
        let h = tapeloom_format::BlockHeader::open(&buf).map_err(|_| CopyError::SpoolDamaged {
            path: self.path.clone(),
        })?;
        Ok(Some(Copied::Block(buf, h)))
    }
}

/// The copies a read of a job uses: the one it reads, and the others it reads a
/// bad block from, in turn. `None` stands for the job's own cartridges (copy 1).
#[derive(Debug, Clone, Default)]
pub(crate) struct Sources {
    /// The copy read.
    pub first: Option<CopyMap>,
    /// The copies a bad block is read from instead.
    pub others: Vec<Option<CopyMap>>,
    /// The cartridges of the copies before the one read (in copy order) that
    /// were passed over, with why: not in the library, or marked suspect.
    pub passed_over: Vec<(String, String)>,
}

/// How a copy stands for a read: all its cartridges in the library, none
/// suspect, and why each that is not was passed over.
struct Judged {
    reachable: bool,
    sound: bool,
    why: Vec<(String, String)>,
}

/// Chooses the copies of job `job_id` (whose own volumes are `vols`) a read
/// uses: the first copy whose cartridges are all in the library and none
/// suspect, else the first all in the library, else the job's own (whose first
/// missing cartridge the read then names). The others in the library are tried
/// for bad blocks. `forced` reads that copy only.
pub(crate) fn sources(
    cat: &tapeloom_catalog::Catalog,
    inv: &tapeloom_device::Inventory,
    (job_id, vols): (i64, &[JobVolume]),
    forced: Option<u32>,
) -> Result<Sources> {
    // A job moved off its own cartridges is read from the copy that stands in
    // for them.
    let moved = cat.moved_to(job_id)?;
    let own =
        || -> Result<Option<CopyMap>> { moved.map(|n| CopyMap::load(cat, job_id, n)).transpose() };
    match forced {
        Some(1) => {
            return Ok(Sources {
                first: own()?,
                others: Vec::new(),
                passed_over: Vec::new(),
            })
        }
        Some(n) => {
            return Ok(Sources {
                first: Some(CopyMap::load(cat, job_id, n)?),
                others: Vec::new(),
                passed_over: Vec::new(),
            })
        }
        None => {}
    }
    let here = inv.barcodes();
    let judge = |vs: Vec<&tapeloom_catalog::Volume>| {
        let reachable = vs.iter().all(|v| here.contains(&v.barcode));
        let sound = vs.iter().all(|v| v.status != VolumeState::Suspect);
        let why = (vs.iter()).filter_map(|v| match (here.contains(&v.barcode), v.status) {
            (false, _) => Some((v.barcode.clone(), "it is not in the library".to_string())),
            (true, VolumeState::Suspect) => {
                Some((v.barcode.clone(), "it is marked suspect".to_string()))
            }
            _ => None,
        });
        Judged {
            reachable,
            sound,
            why: why.collect(),
        }
    };
    let mut all: Vec<(Option<CopyMap>, Judged)> = match own()? {
        Some(map) => {
            let j = judge(map.cartridges());
            vec![(Some(map), j)]
        }
        None => vec![(None, judge(vols.iter().map(|v| &v.volume).collect()))],
    };
    for c in cat.copies(job_id)? {
        if c.state == CopyState::Ok && Some(c.copy_no) != moved {
            let map = CopyMap::load(cat, job_id, c.copy_no)?;
            let j = judge(map.cartridges());
            all.push((Some(map), j));
        }
    }
    // Reachable and sound first, then reachable, then the rest; copy order within.
    let rank = |j: &Judged| (!j.reachable, !j.sound);
    let best = all.iter().map(|(_, j)| rank(j)).min();
    // The copies before the one read, in copy order, were passed over.
    let chosen = all.iter().position(|(_, j)| Some(rank(j)) == best);
    let passed_over = (all.iter().take(chosen.unwrap_or(0)))
        .flat_map(|(_, j)| j.why.iter().cloned())
        .collect();
    all.sort_by_key(|(_, j)| rank(j));
    let mut it = all.into_iter();
    let first = it.next().and_then(|(m, _)| m);
    let others = it.filter(|(_, j)| j.reachable).map(|(m, _)| m).collect();
    Ok(Sources {
        first,
        others,
        passed_over,
    })
}
