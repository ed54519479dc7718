//! The volume writer: one per drive of a backup. It chooses an appendable volume of
//! the pool or a blank cartridge, labels it, passes by foreign data (a cartridge
//! whose first block is not a known tapeloom label is never written to), writes the
//! job's blocks with rare filemarks, and spans to the next cartridge at early warning.

use crate::error::{Error, MediaError, Result};
use crate::home::Library;
use crate::media::policy::{place, put_back, read_label, Drive, Found};
use crate::media::random_uuid;
use crate::media::shared::Claims;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tapeloom_catalog::{Catalog, Phase, Volume, VolumeState};
use tapeloom_device::{AlertAction, DeviceError, WriteOutcome};
use tapeloom_format::{
    JobStart, Kind, PackedBlock, Pos, StreamPacker, VolumeLabel, CONTINUATION_STREAM,
    CONTROL_STREAM,
};

/// Says on stderr what the writer did about a cartridge or a drive: `tapeloom: `
/// and `message`, escaped for people (`escape_controls`: barcodes and labels come
/// from the library and the tapes).
fn say(message: &str) {
    eprintln!("tapeloom: {}", crate::escape_controls(message));
}

/// What the drives of one job share: the library (its changer moves one cartridge at
/// a time), the cartridges claimed so far, and the job's volume sequence numbers,
/// given out in the order cartridges are mounted.
pub(crate) struct Tapes {
    lib: Mutex<(Library, Vec<String>)>,
    next_seq: AtomicU32,
    /// The pool the job writes to, and its rules.
    pub pool: tapeloom_catalog::Pool,
    /// The job's data key, when it is encrypted.
    pub crypt: Option<crate::crypt::JobCrypt>,
    /// Cartridges never written to (those a move of jobs empties).
    pub avoid: Vec<String>,
    /// A copy is written to move the job (its `CopyStart`s say so).
    pub moving: bool,
}

impl Tapes {
    pub fn new(lib: Library) -> Self {
        Tapes {
            lib: Mutex::new((lib, Vec::new())),
            // 0 is the first drive's first volume, the one with the job start.
            next_seq: AtomicU32::new(1),
            pool: tapeloom_catalog::Pool::default_pool(),
            crypt: None,
            avoid: Vec::new(),
            moving: false,
        }
    }

    /// For a job that goes on after its process died: its volumes so far have
    /// sequence numbers below `next_seq`, so every new one continues.
    pub fn continuing(lib: Library, next_seq: u32) -> Self {
        let t = Tapes::new(lib);
        t.next_seq.store(next_seq, Ordering::SeqCst);
        t
    }

    /// Runs `f` on the library, while no other drive of the job moves a
    /// cartridge.
    pub fn with_library<T>(&self, f: impl FnOnce(&mut Library) -> Result<T>) -> Result<T> {
        let mut g = self.lock()?;
        f(&mut g.0)
    }

    /// Drives of the library.
    pub fn drives(&self) -> Result<usize> {
        let mut g = self.lock()?;
        Ok(g.0.inventory()?.drives.len())
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, (Library, Vec<String>)>> {
        self.lib
            .lock()
            .map_err(|_| MediaError::LibraryPoisoned.into())
    }
}

impl Drop for Tapes {
    /// The job's cartridges are free for the process's other jobs.
    fn drop(&mut self) {
        let lib = self.lib.get_mut().unwrap_or_else(|p| p.into_inner());
        super::shared::release(&lib.1);
    }
}

/// Most cartridges one writer leaves because a write failed on them, before it
/// gives up: a drive that fails on every cartridge is the drive's fault.
const MAX_FAILOVERS: u32 = 8;

/// Blocks a writer writes between two looks at the drive's TapeAlert flags (it
/// looks after every mount and every error too).
const ALERT_EVERY: u64 = 64;

/// Cleanings of one drive in one job before a drive that still asks for one is
/// taken out.
const MAX_CLEANINGS: u32 = 2;

/// Bytes of blocks a writer keeps to write again after a deferred write error, for
/// a drive that does not say how much it buffers (LTO drives buffer up to about
/// 1 GiB of tape data).
const REPLAY_DEFAULT: u64 = 1 << 30;

/// Writes a label and its filemark at the start of the cartridge (over whatever
/// was there). With the immediate bit: the drive keeps streaming into the job's
/// first blocks; the flush at the job's end makes the label durable. A medium
/// error is `Ok(Err(why))`: a cartridge that takes no label takes no job.
pub(crate) fn write_label(
    drive: &mut Drive,
    label: &VolumeLabel,
) -> Result<std::result::Result<(), String>> {
    drive.rewind()?;
    let written = drive
        .write_block(&label.encode())
        .and_then(|_| drive.write_filemarks(1, true));
    match written {
        Ok(_) => Ok(Ok(())),
        Err(e) if e.is_medium_error() => Ok(Err(format!("its label could not be written ({e})"))),
        Err(e) => Err(e.into()),
    }
}

/// What a drive took but may not have put on tape yet, kept until a flush proves it
/// is there.
enum Unconfirmed {
    /// A block, as written, and where it was written.
    Block {
        block: PackedBlock,
        clear: bool,
        at: (u32, u64),
    },
    /// A filemark (it counts among the objects a deferred error says were lost).
    Filemark,
}

/// A block written again on another cartridge after a deferred write error.
pub(crate) use tapeloom_catalog::BlockMove as Moved;

/// Writes a job's blocks to one drive, spanning cartridges as they fill, and
/// leaving a cartridge a write failed on (see `fail_over`).
pub(crate) struct VolumeWriter {
    /// This writer's own catalog connection (each drive writes from its own thread).
    pub cat: Catalog,
    tapes: Arc<Tapes>,
    prefer_drive: Option<usize>,
    drive: Option<Drive>,
    job_id: i64,
    start: JobStart,
    seq: u32,
    volume: Option<Volume>,
    lbn: u64,
    need_switch: bool,
    /// Volumes the job wrote to with this drive: (sequence, volume), in order.
    pub volumes: Vec<(u32, Volume)>,
    ctl: StreamPacker,
    ctl_pos: HashMap<u64, (u32, u64)>,
    /// Blocks written (all streams).
    pub blocks: u64,
    /// Bytes between two filemarks inside a segment (0: none).
    pub segment_bytes: u64,
    /// The chain this writer's volumes join, when it continues one (a job that goes
    /// on after its process died); else its first volume names a new one.
    pub chain: Option<u32>,
    since_filemark: u64,
    /// Cartridges left after a write failed on them.
    failovers: u32,
    /// Blocks written since the drive's TapeAlert flags were last read.
    since_alerts: u64,
    /// Cleanings this writer had done.
    cleanings: u32,
    /// What the drive took since the last flush, oldest first, up to `ring_cap`
    /// bytes of blocks.
    ring: std::collections::VecDeque<Unconfirmed>,
    ring_bytes: u64,
    ring_cap: u64,
    /// A deferred write error reported where it could not be acted on at once (by
    /// a filemark after a block): the objects lost.
    pending_lost: Option<u64>,
    /// Blocks written again after deferred write errors, not yet taken by
    /// [`VolumeWriter::take_moved`].
    moved: Vec<Moved>,
    /// Filemarks written inside segments.
    pub filemarks: u64,
    /// The drive's own compression, set at each mount.
    pub drive_compression: bool,
    /// This writer carries the job's own records (start, index, end).
    first: bool,
    /// What the drive said about each cartridge at the end of its mount: barcode,
    /// TapeAlert flags and volume statistics.
    pub health: Vec<(String, tapeloom_device::DriveHealth)>,
    /// Whether the drive's own compressor ran at the last mount (false: the drive
    /// has none, or it was switched off).
    pub drive_compressed: Option<bool>,
    /// When this drive changed cartridges, found its place on one, or wrote the
    /// index: (drive, phase, from, to).
    pub marks: Vec<crate::sampler::Marked>,
    /// The library's drive the current cartridge is in.
    mounted_in: Option<usize>,
    /// The block being written stays in clear in an encrypted job (the job's first,
    /// with `JobStart` and `JobKey`). In a copy: the block is the copy's own
    /// (its `CopyStart`), sealed here, not one of the original's, relocated.
    clear: bool,
    /// Set when this writer writes a further copy of a job, not the job itself.
    copy: Option<CopyMode>,
    /// The cartridge this writer set aside for the drive to read (a copy with
    /// one drive), which it takes again.
    aside: Option<String>,
    /// The drive's statistics when it last set its cartridge aside.
    aside_stats: Option<tapeloom_device::DriveStats>,
}

/// What a writer of a further copy of a job keeps (docs/COPIES.md): it writes
/// the original's objects, block for block, in copy segments that each begin with
/// a `CopyStart`.
pub(crate) struct CopyMode {
    /// The copy's number.
    copy_no: u32,
    /// The original's `JobKey` body, repeated after each `CopyStart` of an
    /// encrypted job.
    key_body: Option<Vec<u8>>,
    /// The original's (volume sequence, LBN) of the next object written.
    orig: (u32, u64),
    /// The open copy segment: its number and the LBN of its first copied object.
    open: Option<(u32, u64)>,
    /// The next copy segment's number.
    next_seg: u32,
    /// A new copy segment begins before the next object (the original's segment
    /// changed).
    need_piece: bool,
}

/// One of the original's objects, handed to a copy writer.
pub(crate) enum Copied {
    /// A block as read, with its opened header.
    Block(Vec<u8>, tapeloom_format::BlockHeader),
    /// A filemark inside the original's segment.
    Filemark,
}

impl VolumeWriter {
    /// A writer for one drive of the job. The first drive's writer mounts its first
    /// volume and writes the job start record at once; the others mount theirs when
    /// they get their first block, and begin it with a continuation record.
    pub fn begin(
        cat: Catalog,
        tapes: Arc<Tapes>,
        prefer_drive: Option<usize>,
        job_id: i64,
        start: JobStart,
        first: bool,
        drive_compression: bool,
    ) -> Result<Self> {
        let tail = if tapes.crypt.is_some() {
            tapeloom_format::CRYPT_TAIL_LEN
        } else {
            0
        };
        let ctl = StreamPacker::new(CONTROL_STREAM, start.job_tag, start.block_size as usize)
            .with_tail(tail);
        let mut w = VolumeWriter {
            cat,
            tapes,
            prefer_drive,
            drive: None,
            job_id,
            start,
            seq: 0,
            volume: None,
            lbn: 0,
            need_switch: !first,
            volumes: Vec::new(),
            ctl,
            ctl_pos: HashMap::new(),
            blocks: 0,
            segment_bytes: 0,
            chain: None,
            since_filemark: 0,
            failovers: 0,
            since_alerts: 0,
            cleanings: 0,
            ring: Default::default(),
            ring_bytes: 0,
            ring_cap: 0,
            pending_lost: None,
            moved: Vec::new(),
            filemarks: 0,
            drive_compression,
            first,
            health: Vec::new(),
            drive_compressed: None,
            marks: Vec::new(),
            mounted_in: None,
            clear: false,
            copy: None,
            aside: None,
            aside_stats: None,
        };
        if first {
            w.mount_next()?;
            let body = w.start.encode();
            w.ctl.record(Kind::JobStart, &body);
            // The wrapped data key, in the same block, which stays in clear.
            if let Some(c) = &w.tapes.crypt {
                w.ctl.record(Kind::JobKey, &c.record.encode());
            }
            w.ctl.finish_block();
            w.clear = true;
            let r = w.flush_ctl();
            w.clear = false;
            r?;
            // On a drive that buffers, the job's first block is on tape before any
            // data: a deferred write error never has it to write again.
            if w.buffers() {
                w.sync()?;
            }
        }
        Ok(w)
    }

    /// Chooses the next volume: an appendable one of the pool, else a blank cartridge
    /// assigned to the pool, else a blank one assigned to none (it is labelled into
    /// the pool), else the pool's expired volume whose jobs ended first (it is
    /// labelled anew: recycled; never in a WORM pool). Cartridges other drives of the job claimed, cleaning cartridges and
    /// write-protected ones are never candidates.
    fn choose(&self, lib: &mut Library, claimed: &[String], others: &Claims) -> Result<String> {
        let inv = lib.inventory()?;
        let in_library = inv.barcodes();
        let known: HashMap<String, Volume> = self
            .cat
            .volumes()?
            .into_iter()
            .map(|v| (v.barcode.clone(), v))
            .collect();
        let usable = |b: &String| {
            !claimed.contains(b)
                && !self.tapes.avoid.contains(b)
                && !others.taken(b)
                && !tapeloom_device::is_cleaning(b)
                && !lib.is_write_protected(b)
        };
        // Prefer what is already in this drive, then what is in a slot (a load
        // either way), then what sits in another drive.
        let mut order: Vec<&String> = in_library.iter().collect();
        order.sort_by_key(|b| match inv.drive_of(b) {
            Some(d) if self.prefer_drive.is_none_or(|p| p == d) => 0,
            None => 1,
            Some(_) => 2,
        });
        let pool = &self.tapes.pool;
        // A cartridge this writer set aside with room left is taken again.
        if let Some(b) = &self.aside {
            let room = known
                .get(b)
                .is_some_and(|v| v.status == VolumeState::Append);
            if room && in_library.contains(b) {
                return Ok(b.clone());
            }
        }
        for b in &order {
            if let Some(v) = known.get(*b) {
                if v.status == VolumeState::Append
                    && v.pool == pool.name
                    && usable(b)
                    && self.takes_more_jobs(v)?
                {
                    return Ok((*b).clone());
                }
            }
        }
        let mut unassigned = None;
        for b in &order {
            if known.contains_key(*b) || !usable(b) || lib.cartridge_bytes(b).unwrap_or(0) != 0 {
                continue;
            }
            match self.cat.pool_of_barcode(b)? {
                Some(p) if p == pool.name => return Ok((*b).clone()),
                Some(_) => {}
                None => {
                    unassigned.get_or_insert_with(|| (*b).clone());
                }
            }
        }
        if let Some(b) = unassigned {
            return Ok(b);
        }
        // Recycling: the expired volume of the pool whose jobs ended first.
        if !pool.worm {
            for v in self.cat.expired_volumes(&pool.name)? {
                if in_library.contains(&v.barcode) && usable(&v.barcode) {
                    return Ok(v.barcode);
                }
            }
        }
        Err(MediaError::NoneWritable {
            pool: pool.name.clone(),
        }
        .into())
    }

    /// Whether the pool's rules let this job append to a labelled volume of it:
    /// fewer jobs on it than the pool's limit, and none at all when the pool does
    /// not append (a volume then holds only the job that labelled it).
    fn takes_more_jobs(&self, v: &Volume) -> Result<bool> {
        let pool = &self.tapes.pool;
        if pool.append && pool.max_jobs_per_volume.is_none() {
            return Ok(true);
        }
        let mut limit = pool.max_jobs_per_volume.unwrap_or(u64::MAX);
        if !pool.append {
            limit = limit.min(1);
        }
        Ok(self.cat.jobs_on_volume(v.id)? < limit)
    }

    /// Chooses the next cartridge, claims it and puts it into the drive, loaded.
    fn take_cartridge(&mut self) -> Result<(String, Drive)> {
        let tapes = Arc::clone(&self.tapes);
        let mut g = tapes.lock()?;
        let (lib, claimed) = &mut *g;
        // The other jobs of this process choose and move no cartridge until this
        // one is in its drive.
        let mut others = Claims::hold();
        let barcode = self.choose(lib, claimed, &others)?;
        claimed.push(barcode.clone());
        others.take(&barcode);
        self.drive = None;
        let (i, mut drive, moved) = place(lib, &barcode, self.prefer_drive)?;
        drop(others);
        self.mounted_in = Some(i);
        drop(g);
        // Threading the tape happens in the drive, while the changer serves the
        // job's other drives.
        if moved {
            drive.load()?;
        }
        Ok((barcode, drive))
    }

    fn mount_next(&mut self) -> Result<()> {
        loop {
            let t_load = Instant::now();
            let (barcode, mut drive) = self.take_cartridge()?;
            let t_position = Instant::now();
            self.mark(Phase::Load, t_load, t_position);
            // A tab the library could not tell of: nothing, not even a label, is
            // written to it.
            if drive.write_protected()? {
                self.pass_over(drive, &barcode, "it is write protected")?;
                continue;
            }
            let mut fresh = false;
            let volume = match (
                read_label(&mut *drive)?,
                self.cat.volume_by_barcode(&barcode)?,
            ) {
                (Found::Blank, None) => {
                    fresh = true;
                    let label = self.new_label(&barcode, 0)?;
                    if let Err(why) = write_label(&mut drive, &label)? {
                        self.pass_over(drive, &barcode, &why)?;
                        continue;
                    }
                    self.cat.add_volume(
                        &barcode,
                        label.uuid,
                        &label.pool,
                        label.block_size,
                        label.created.as_nanos(),
                    )?
                }
                (Found::Label(l), Some(v))
                    if l.uuid == v.uuid && v.status == VolumeState::Expired =>
                {
                    fresh = true;
                    // Recycling: the last check before its old data is overwritten.
                    self.check_expired(&v)?;
                    let generation = l.generation.max(v.generation).saturating_add(1);
                    let label = self.new_label(&barcode, generation)?;
                    if let Err(why) = write_label(&mut drive, &label)? {
                        self.pass_over(drive, &barcode, &why)?;
                        continue;
                    }
                    say(&format!(
                        "cartridge {barcode}: expired, labelled anew (generation {generation})"
                    ));
                    self.cat
                        .relabel_volume(&v, label.uuid, generation, label.created.as_nanos())?
                }
                (Found::Label(l), Some(v)) if l.uuid == v.uuid => v,
                (Found::Label(_), Some(_)) => {
                    return Err(MediaError::LabelMismatch {
                        barcode: barcode.to_string(),
                    }
                    .into())
                }
                (found, _) => {
                    // Never written over: leave it, note it, and try the next one.
                    let why = match found {
                        Found::Foreign(w) => w,
                        _ => "a tapeloom label the catalog does not know".into(),
                    };
                    let why = format!("it holds data tapeloom did not write ({why})");
                    self.pass_over(drive, &barcode, &why)?;
                    continue;
                }
            };
            let on = drive.set_compression(self.drive_compression)?;
            self.drive_compressed = Some(on && self.drive_compression);
            if !fresh {
                // A labelled cartridge: append after what it holds. (A fresh one is
                // already there, and a locate would stop the tape.)
                drive.space_to_eod()?;
            }
            self.lbn = drive.position()?;
            self.mark(Phase::Position, t_position, Instant::now());
            self.since_filemark = 0;
            if self.copy.is_some() {
                // A copy records its segments as it begins them (`continuation`).
                self.volumes.push((0, volume.clone()));
            } else {
                // Sequence numbers are given out only to volumes the job really
                // uses, so that they have no gaps.
                self.seq = if self.first && self.volumes.is_empty() {
                    0
                } else {
                    self.tapes.next_seq.fetch_add(1, Ordering::SeqCst)
                };
                // This drive's chain is named by its first volume.
                let chain = self
                    .chain
                    .unwrap_or_else(|| self.volumes.first().map_or(self.seq, |v| v.0));
                self.cat
                    .add_job_volume(self.job_id, self.seq, chain, volume.id, self.lbn)?;
                self.volumes.push((self.seq, volume.clone()));
            }
            self.volume = Some(volume);
            // A flag raised at load (a cartridge memory failure, say) is seen before
            // the first block.
            self.since_alerts = ALERT_EVERY;
            self.ring_cap = drive.buffer_bytes().unwrap_or(REPLAY_DEFAULT);
            self.confirm();
            self.drive = Some(drive);
            return Ok(());
        }
    }

    /// A new label for a cartridge of the job's pool.
    fn new_label(&self, barcode: &str, generation: u32) -> Result<VolumeLabel> {
        Ok(VolumeLabel {
            uuid: random_uuid(),
            barcode: barcode.to_string(),
            pool: self.tapes.pool.name.clone(),
            created: crate::clock::now()?,
            block_size: self.start.block_size,
            generation,
        })
    }

    /// Refuses ([`MediaError::NotExpired`]) to label a volume anew unless the
    /// catalog holds it expired, in the job's pool, with no job on it.
    fn check_expired(&self, v: &Volume) -> Result<()> {
        let now = self.cat.volume_by_barcode(&v.barcode)?;
        let expired = now.as_ref().is_some_and(|n| {
            n.id == v.id
                && n.uuid == v.uuid
                && n.status == VolumeState::Expired
                && n.pool == self.tapes.pool.name
        });
        if !expired || self.tapes.pool.worm || self.cat.jobs_on_volume(v.id)? != 0 {
            return Err(MediaError::NotExpired {
                barcode: v.barcode.clone(),
            }
            .into());
        }
        Ok(())
    }

    /// Leaves a cartridge the job will not write to: says why, unloads it and puts
    /// it back.
    fn pass_over(&mut self, mut drive: Drive, barcode: &str, why: &str) -> Result<()> {
        say(&format!("cartridge {barcode}: {why}; not writing to it"));
        drive.unload()?;
        drop(drive);
        put_back(&mut self.tapes.lock()?.0, barcode)
    }

    /// Ends the segment with a filemark (`flush`: one that empties the drive's
    /// buffer, after which the position is checked). False when the drive reported
    /// a deferred write error instead: the lost blocks were written again on the
    /// next cartridge, whose segment is open.
    fn end_segment(&mut self, flush: bool) -> Result<bool> {
        if let Some(n) = self.pending_lost.take() {
            self.replay(n)?;
            return Ok(false);
        }
        let drive = self.drive.as_mut().ok_or(DeviceError::NoMedium)?;
        match drive.write_filemarks(1, !flush) {
            Err(e) => {
                if let Some(n) = e.deferred_write_lost() {
                    self.replay(n)?;
                    return Ok(false);
                }
                return Err(e.into());
            }
            Ok(_) if !flush => self.keep(Unconfirmed::Filemark),
            Ok(_) => {}
        }
        self.close_segment()?;
        self.lbn += 1;
        if flush {
            self.check_position()?;
            self.confirm();
        }
        Ok(true)
    }

    /// Keeps what the drive took until a flush proves it on tape.
    fn keep(&mut self, u: Unconfirmed) {
        if self.ring_cap == 0 {
            return;
        }
        if let Unconfirmed::Block { block, .. } = &u {
            self.ring_bytes += block.buf.len() as u64;
        }
        self.ring.push_back(u);
        while self.ring_bytes > self.ring_cap {
            match self.ring.pop_front() {
                Some(Unconfirmed::Block { block, .. }) => self.ring_bytes -= block.buf.len() as u64,
                Some(Unconfirmed::Filemark) => {}
                None => break,
            }
        }
    }

    /// Everything written so far is on tape.
    fn confirm(&mut self) {
        self.ring.clear();
        self.ring_bytes = 0;
    }

    /// The drive reported that the last `lost` objects it took never reached the
    /// tape (a deferred write error): the cartridge is suspect, its segment ends
    /// before them, and the blocks among them are written again, in order, on the
    /// next cartridge (see [`Moved`]).
    fn replay(&mut self, lost: u64) -> Result<()> {
        let barcode = self.barcode();
        let kept = self.ring.len() as u64;
        if lost > kept || lost > self.lbn || self.failovers >= MAX_FAILOVERS {
            return Err(MediaError::DeferredLost {
                barcode,
                lost,
                kept,
            }
            .into());
        }
        let first_lost = self.lbn - lost;
        let items: Vec<Unconfirmed> = self.ring.drain((kept - lost) as usize..).collect();
        self.confirm();
        say(&format!("cartridge {barcode}: deferred write error: {lost} objects from block {first_lost} did not reach the tape; writing them again on the next cartridge"));
        self.suspect(&format!(
            "deferred write error: {lost} objects from block {first_lost} did not reach the tape"
        ))?;
        // The tape ends where the lost objects began.
        self.lbn = first_lost;
        if let Some(c) = self.copy.as_mut() {
            // The original's objects among the lost are copied again from the
            // first of them, in a new copy segment.
            let copied = (items.iter())
                .filter(|i| !matches!(i, Unconfirmed::Block { clear: true, .. }))
                .count() as u64;
            c.orig.1 = c.orig.1.saturating_sub(copied);
        }
        self.fail_over()?;
        for item in items {
            if self.copy.is_some() {
                match item {
                    Unconfirmed::Filemark => self.raw_filemark()?,
                    // The old segment's own `CopyStart`; the new one has its own.
                    Unconfirmed::Block { clear: true, .. } => {}
                    Unconfirmed::Block { mut block, .. } => {
                        self.write_raw(&mut block)?;
                    }
                }
                continue;
            }
            let Unconfirmed::Block {
                mut block,
                clear,
                at,
            } = item
            else {
                continue;
            };
            if block.header.stream == CONTINUATION_STREAM {
                // The old cartridge's own; the new one has its continuation.
                continue;
            }
            let was = std::mem::replace(&mut self.clear, clear);
            let to = self.write_raw(&mut block);
            self.clear = was;
            let to = to?;
            for p in self.ctl_pos.values_mut().filter(|p| **p == at) {
                *p = to;
            }
            self.moved.push(Moved {
                stream: block.header.stream,
                stream_offset: block.header.stream_offset,
                from: at,
                to,
            });
        }
        Ok(())
    }

    /// A writer of copy `copy_no` of job `job_id` (whose start record is `start`
    /// and whose `JobKey` body is `key_body` when it is encrypted). It mounts its
    /// first cartridge when the first object comes.
    pub fn begin_copy(
        cat: Catalog,
        tapes: Arc<Tapes>,
        prefer_drive: Option<usize>,
        (job_id, start): (i64, JobStart),
        copy_no: u32,
        key_body: Option<Vec<u8>>,
    ) -> Result<Self> {
        let mut w = VolumeWriter::begin(cat, tapes, prefer_drive, job_id, start, false, false)?;
        w.copy = Some(CopyMode {
            copy_no,
            key_body,
            // No piece yet: the first `copy_piece` names one.
            orig: (u32::MAX, u64::MAX),
            open: None,
            next_seg: 0,
            need_piece: true,
        });
        Ok(w)
    }

    /// The original's objects that follow are those of its volume sequence `seq`
    /// from LBN `lbn` on: the open copy segment ends, and the next object begins
    /// a new one.
    pub fn copy_piece(&mut self, seq: u32, lbn: u64) -> Result<()> {
        if self.copy.as_ref().is_some_and(|c| c.orig == (seq, lbn)) {
            // The open segment begins there and holds nothing yet.
            return Ok(());
        }
        let open = self.copy.as_ref().is_some_and(|c| c.open.is_some());
        // A full cartridge's segment ends at the change, before the next object.
        if open && self.drive.is_some() && !self.need_switch {
            while !self.end_segment(true)? {}
        }
        if let Some(c) = self.copy.as_mut() {
            c.orig = (seq, lbn);
            c.need_piece = true;
        }
        Ok(())
    }

    /// Mounts the copy's first cartridge now; its first segment begins with the
    /// first object, so that the drive gets no block before the data flows.
    pub fn mount_first(&mut self) -> Result<()> {
        if self.drive.is_none() && self.need_switch {
            self.need_switch = false;
            self.mount_next()?;
            if let Some(c) = self.copy.as_mut() {
                c.need_piece = true;
            }
        }
        Ok(())
    }

    /// Ends the open segment and puts the cartridge back in its slot, so that the
    /// drive may read; the next object mounts it again and appends.
    pub fn set_aside(&mut self) -> Result<()> {
        if self.drive.is_some() {
            let full = self.need_switch;
            self.aside = (!full).then(|| self.barcode());
            // As the drive saw the segment, before the flush that ends it.
            self.aside_stats = self.drive_stats_now();
            self.leave_cartridge(true)?;
            if full {
                if let Some(v) = &self.volume {
                    self.cat.set_volume_status(v.id, VolumeState::Full)?;
                }
            }
        }
        self.need_switch = true;
        Ok(())
    }

    /// Writes one of the original's objects to the copy, changing cartridges first
    /// when the last one is full.
    pub fn copy_object(&mut self, object: Copied) -> Result<()> {
        if self.need_switch {
            self.switch()?;
        }
        if self.copy.as_ref().is_some_and(|c| c.need_piece) {
            self.copy_start()?;
        }
        match object {
            Copied::Block(buf, header) => {
                let mut b = PackedBlock::opened(buf, header, 0);
                self.write(&mut b)?;
            }
            Copied::Filemark => {
                if let Some(n) = self.pending_lost.take() {
                    self.replay(n)?;
                }
                self.raw_filemark()?;
            }
        }
        Ok(())
    }

    /// Writes one of the original's filemarks (immediate: the tape keeps
    /// streaming).
    fn raw_filemark(&mut self) -> Result<()> {
        let drive = self.drive.as_mut().ok_or(DeviceError::NoMedium)?;
        match drive.write_filemarks(1, true) {
            Ok(_) => {}
            Err(e) => match e.deferred_write_lost() {
                Some(n) => {
                    // Not carried out: it is written after the lost objects.
                    self.replay(n)?;
                    return self.raw_filemark();
                }
                None => return Err(e.into()),
            },
        }
        self.keep(Unconfirmed::Filemark);
        self.lbn += 1;
        self.filemarks += 1;
        if let Some(c) = self.copy.as_mut() {
            c.orig.1 += 1;
        }
        Ok(())
    }

    /// Begins a copy segment where the drive stands: its `CopyStart` (and the
    /// original's `JobKey`) in a block of the copy's own, then the segment's row
    /// in the catalog.
    fn copy_start(&mut self) -> Result<()> {
        let Some(c) = self.copy.as_ref() else {
            return Ok(());
        };
        let mut start = self.start.clone();
        start.volume_seq = c.next_seg;
        let rec = tapeloom_format::CopyStart {
            copy_no: c.copy_no.min(u16::MAX as u32) as u16,
            orig_seq: c.orig.0,
            orig_lbn: c.orig.1,
            moving: self.tapes.moving,
            start,
        };
        let mut p = StreamPacker::new(
            CONTINUATION_STREAM,
            self.start.job_tag,
            self.start.block_size as usize,
        );
        p.record(Kind::CopyStart, &rec.encode());
        if let Some(k) = &c.key_body {
            p.record(Kind::JobKey, k);
        }
        p.finish_block();
        self.clear = true;
        let mut written = Ok(());
        for mut b in p.ready.drain(..) {
            if let Err(e) = self.write_raw(&mut b) {
                written = Err(e);
                break;
            }
        }
        self.clear = false;
        written.map(|_| ())?;
        let volume_id = self.volume.as_ref().map(|v| v.id).unwrap_or_default();
        let Some(c) = self.copy.as_mut() else {
            return Ok(());
        };
        let seg = tapeloom_catalog::CopySegment {
            seq: c.next_seg,
            volume_id,
            first_lbn: self.lbn,
            orig_seq: c.orig.0,
            orig_first_lbn: c.orig.1,
            objects: None,
        };
        c.open = Some((c.next_seg, self.lbn));
        c.next_seg += 1;
        c.need_piece = false;
        let copy_no = c.copy_no;
        Ok(self.cat.add_copy_segment(self.job_id, copy_no, &seg)?)
    }

    /// Closes the open segment in the catalog: it ends before the drive's position.
    fn close_segment(&mut self) -> Result<()> {
        match self.copy.as_mut() {
            None => {
                Ok(self
                    .cat
                    .end_job_volume(self.job_id, self.seq, self.lbn.saturating_sub(1))?)
            }
            Some(c) => {
                let Some((seg, first)) = c.open.take() else {
                    return Ok(());
                };
                let (job, copy_no) = (self.job_id, c.copy_no);
                let objects = self.lbn.saturating_sub(first);
                Ok(self.cat.end_copy_segment(job, copy_no, seg, objects)?)
            }
        }
    }

    /// Whether the drive may hold written blocks that are not on tape yet (and so
    /// report a deferred write error): then the job flushes at the points that
    /// keep its first block and its index from being written again. A drive that
    /// writes through (the virtual drive, the LTO model) is spared those stops.
    pub fn buffers(&self) -> bool {
        self.ring_cap > 0
    }

    /// The blocks written again after deferred write errors since the last call.
    pub fn take_moved(&mut self) -> Vec<Moved> {
        std::mem::take(&mut self.moved)
    }

    /// After a flush, the drive must stand where the blocks it accepted put it: a
    /// drive that reported a write done and dropped it is caught here, before the
    /// job is recorded as whole.
    fn check_position(&mut self) -> Result<()> {
        let Some(d) = self.drive.as_mut() else {
            return Ok(());
        };
        let found = d.position()?;
        if found != self.lbn {
            let barcode = self
                .volume
                .as_ref()
                .map(|v| v.barcode.clone())
                .unwrap_or_default();
            return Err(MediaError::PositionMismatch {
                barcode,
                expected: self.lbn,
                found,
            }
            .into());
        }
        Ok(())
    }

    /// Mounts this writer's first cartridge now, if it has none yet (a drive other
    /// than the first mounts when its first block comes, unless asked here).
    pub fn prepare(&mut self) -> Result<()> {
        if self.drive.is_none() && self.need_switch {
            self.switch()?;
        }
        Ok(())
    }

    fn switch(&mut self) -> Result<()> {
        if self.drive.is_some() {
            if !self.end_segment(true)? {
                // A deferred write error moved the job to a new cartridge already.
                self.need_switch = false;
                return Ok(());
            }
            if let Some(v) = &self.volume {
                self.cat.set_volume_status(v.id, VolumeState::Full)?;
            }
            self.note_health();
            if let Some(d) = self.drive.as_mut() {
                let t = Instant::now();
                d.unload()?;
                let drive = self.mounted_in;
                self.marks.push((drive, Phase::Load, t, Instant::now()));
            }
        }
        self.need_switch = false;
        self.mount_next()?;
        self.continuation()
    }

    /// A write failed on the medium (not deferred: the blocks before it were taken).
    /// The cartridge is suspect; its segment ends at the last block written before
    /// the failed one, and the job goes on on the next cartridge of the pool, from
    /// the failed block, as a job spanning cartridges does.
    fn fail_over(&mut self) -> Result<()> {
        self.close_segment()?;
        if let Some(d) = self.drive.as_mut() {
            // A filemark helps a reader counting them; a failing medium may refuse
            // it, and the catalog has the segment's end already.
            let _ = d.write_filemarks(1, false);
        }
        self.note_health();
        if let Some(d) = self.drive.as_mut() {
            let t = Instant::now();
            d.unload()?;
            let drive = self.mounted_in;
            self.marks.push((drive, Phase::Load, t, Instant::now()));
        }
        self.failovers += 1;
        self.need_switch = false;
        self.mount_next()?;
        self.continuation()
    }

    /// Marks the cartridge suspect: no job writes to it again. `why` is kept in the
    /// catalog's notes of the volume.
    fn suspect(&mut self, why: &str) -> Result<()> {
        if let Some(v) = &self.volume {
            self.cat.set_volume_status(v.id, VolumeState::Suspect)?;
            self.cat.add_volume_note(
                v.id,
                crate::clock::system_ns(),
                &format!("suspect: {why}"),
            )?;
        }
        Ok(())
    }

    /// Reads the drive's TapeAlert flags and does what a critical one asks, as
    /// Proxmox Backup Server does: a cartridge flag leaves the cartridge (suspect)
    /// for the next one, a cleaning flag has the drive cleaned with a cleaning
    /// cartridge of the library before the job goes on on the next cartridge, a
    /// drive flag stops the drive. In each case the segment ends at the last block
    /// written, as at a cartridge change.
    fn heed_alerts(&mut self) -> Result<()> {
        self.since_alerts = 0;
        let Some(flags) = self.drive.as_mut().and_then(|d| d.tape_alerts()) else {
            return Ok(());
        };
        let Some((action, codes)) = flags.action() else {
            return Ok(());
        };
        let names = codes
            .iter()
            .map(|&c| tapeloom_device::alert::describe(c))
            .collect::<Vec<_>>()
            .join(", ");
        let barcode = self.barcode();
        let drive = self.mounted_in.unwrap_or(0);
        match action {
            AlertAction::Cartridge if self.failovers >= MAX_FAILOVERS => {
                Err(MediaError::CartridgeAlert {
                    barcode,
                    flags: names,
                    failovers: self.failovers,
                }
                .into())
            }
            AlertAction::Cartridge => {
                say(&format!("cartridge {barcode}: TapeAlert {names}: marked suspect; the job goes on on the next cartridge"));
                self.suspect(&format!("TapeAlert {names} at block {}", self.lbn))?;
                self.fail_over()
            }
            AlertAction::Clean => self.clean(drive, names),
            AlertAction::Drive => {
                self.leave_cartridge(false)?;
                Err(MediaError::DriveAlert {
                    drive,
                    flags: names,
                }
                .into())
            }
        }
    }

    /// Ends the segment at the last block written and takes the cartridge out of
    /// the drive, back to its slot. `flush`: with a flushing filemark that must
    /// succeed (else one is tried, as a failing drive may refuse it).
    fn leave_cartridge(&mut self, flush: bool) -> Result<()> {
        if flush {
            while !self.end_segment(true)? {}
        } else {
            self.close_segment()?;
            if let Some(d) = self.drive.as_mut() {
                let _ = d.write_filemarks(1, false);
            }
        }
        self.note_health();
        let t = Instant::now();
        if let Some(mut d) = self.drive.take() {
            let unloaded = d.unload();
            drop(d);
            if flush {
                unloaded?;
            }
        }
        self.marks
            .push((self.mounted_in, Phase::Load, t, Instant::now()));
        let barcode = self.barcode();
        let put = put_back(&mut self.tapes.lock()?.0, &barcode);
        if flush {
            put?;
        }
        Ok(())
    }

    /// Cleans the drive the writer uses (a cleaning flag asked for it), then goes
    /// on on the next cartridge.
    fn clean(&mut self, drive: usize, names: String) -> Result<()> {
        if self.cleanings >= MAX_CLEANINGS {
            return Err(MediaError::StillNeedsCleaning {
                drive,
                flags: names,
                cleanings: self.cleanings,
            }
            .into());
        }
        self.cleanings += 1;
        self.leave_cartridge(true)?;
        let t = Instant::now();
        let done = self.tapes.lock()?.0.clean_drive(drive).map_err(|source| {
            MediaError::CleaningFailed {
                drive,
                flags: names.clone(),
                source: Box::new(source),
            }
        })?;
        self.marks
            .push((Some(drive), Phase::Load, t, Instant::now()));
        let left = done
            .uses_left
            .map(|n| format!("; {n} cleanings left on it"))
            .unwrap_or_default();
        say(&format!(
            "drive {drive}: TapeAlert {names}: cleaned with {}{left}",
            done.barcode
        ));
        self.need_switch = false;
        self.mount_next()?;
        self.continuation()
    }

    fn barcode(&self) -> String {
        self.volume
            .as_ref()
            .map(|v| v.barcode.clone())
            .unwrap_or_default()
    }

    /// Begins the segment on a newly mounted cartridge with the job's continuation
    /// record.
    fn continuation(&mut self) -> Result<()> {
        if self.copy.is_some() {
            return self.copy_start();
        }
        let mut cont = self.start.clone();
        cont.volume_seq = self.seq;
        let mut p = StreamPacker::new(
            CONTINUATION_STREAM,
            self.start.job_tag,
            self.start.block_size as usize,
        );
        p.record(Kind::Continuation, &cont.encode());
        if let Some(c) = &self.tapes.crypt {
            p.record(Kind::JobKey, &c.record.encode());
        }
        p.finish_block();
        for mut b in p.ready.drain(..) {
            self.write_raw(&mut b)?;
        }
        Ok(())
    }

    fn write_raw(&mut self, b: &mut PackedBlock) -> Result<(u32, u64)> {
        let uuid = self.volume.as_ref().map(|v| v.uuid).unwrap_or_default();
        if let Some(c) = self.tapes.crypt.as_ref().filter(|_| !self.clear) {
            // Once: a block written again (refused at end of medium) is only sealed
            // again where it lands.
            c.encrypt(b)?;
        }
        let drive = self.drive.as_mut().ok_or(DeviceError::NoMedium)?;
        if self.copy.is_some() && !self.clear {
            // One of the original's blocks: only its place and CRC change.
            tapeloom_format::BlockHeader::relocate(&mut b.buf, uuid, self.lbn);
        } else {
            b.seal(uuid, self.lbn);
        }
        match drive.write_block(&b.buf) {
            Ok(WriteOutcome::Written) => {}
            Ok(WriteOutcome::EarlyWarning) => self.need_switch = true,
            Err(e) if e.is_medium_error() => {
                // The cartridge takes no more writes from any job.
                let flags = drive
                    .tape_alerts()
                    .map(|a| a.names().join(", "))
                    .filter(|f| !f.is_empty())
                    .map(|f| format!("; TapeAlert {f}"))
                    .unwrap_or_default();
                self.suspect(&format!("write error at block {}: {e}{flags}", self.lbn))?;
                return Err(e.into());
            }
            Err(e) => return Err(e.into()),
        }
        self.lbn += 1;
        self.blocks += 1;
        self.since_alerts += 1;
        if let Some(c) = self.copy.as_mut().filter(|_| !self.clear) {
            c.orig.1 += 1;
        }
        let at = (self.seq, self.lbn - 1);
        self.since_filemark += b.buf.len() as u64;
        if self.ring_cap > 0 {
            self.keep(Unconfirmed::Block {
                block: b.clone(),
                clear: self.clear,
                at,
            });
        }
        if self.segment_bytes > 0 && self.since_filemark >= self.segment_bytes && !self.need_switch
        {
            // A filemark with the immediate bit: it does not flush the drive's buffer,
            // so the tape keeps streaming. Restores never count on it.
            let drive = self.drive.as_mut().ok_or(DeviceError::NoMedium)?;
            match drive.write_filemarks(1, true) {
                Ok(_) => {
                    self.keep(Unconfirmed::Filemark);
                    self.lbn += 1;
                    self.filemarks += 1;
                }
                Err(e) => match e.deferred_write_lost() {
                    // The block was taken; what was lost is written again before the
                    // next block.
                    Some(n) => self.pending_lost = Some(n),
                    None => return Err(e.into()),
                },
            }
            self.since_filemark = 0;
        }
        Ok(at)
    }

    /// Writes one block, changing cartridges first when the last one is full.
    /// Returns where it landed: (volume sequence, LBN).
    pub fn write(&mut self, b: &mut PackedBlock) -> Result<(u32, u64)> {
        let mut retried = false;
        loop {
            if self.need_switch {
                self.switch()?;
            }
            if self.since_alerts >= ALERT_EVERY {
                self.heed_alerts()?;
                if self.need_switch {
                    continue;
                }
            }
            if let Some(n) = self.pending_lost.take() {
                self.replay(n)?;
            }
            let r = self.write_raw(b);
            if let Err(Error::Device(e)) = &r {
                if let Some(n) = e.deferred_write_lost() {
                    // Not carried out: the block is written after the lost ones.
                    self.replay(n)?;
                    continue;
                }
            }
            match r {
                Err(Error::Device(DeviceError::EndOfMedium)) if !retried => {
                    retried = true;
                    self.need_switch = true;
                }
                Err(Error::Device(e)) if e.is_medium_error() && self.failovers < MAX_FAILOVERS => {
                    self.fail_over()?;
                }
                r => return r,
            }
        }
    }

    fn flush_ctl(&mut self) -> Result<()> {
        let ready: Vec<PackedBlock> = self.ctl.ready.drain(..).collect();
        for mut b in ready {
            let at = self.write(&mut b)?;
            self.ctl_pos.insert(b.seq, at);
        }
        Ok(())
    }

    /// Appends an index chunk to the control stream; returns where it starts once
    /// its block is written (block seq, offset).
    pub fn index_chunk(&mut self, body: &[u8]) -> Result<(u64, u32)> {
        let at = self.ctl.record(Kind::Index, body);
        self.flush_ctl()?;
        Ok(at)
    }

    /// Where control block `seq` landed.
    pub fn ctl_position(&mut self, at: (u64, u32)) -> Result<Pos> {
        self.ctl.finish_block();
        self.flush_ctl()?;
        let (volume_seq, lbn) = *self.ctl_pos.get(&at.0).ok_or(Error::PositionLost {
            what: "control block",
        })?;
        Ok(Pos {
            volume_seq,
            lbn,
            offset: at.1,
        })
    }

    /// Writes the job end record in a block of its own and ends the segment with a
    /// flushing filemark.
    pub fn end(&mut self, job_end: &[u8]) -> Result<()> {
        self.ctl.finish_block();
        self.ctl.record(Kind::JobEnd, job_end);
        self.ctl.finish_block();
        self.flush_ctl()?;
        self.finish()
    }

    /// Ends the segment of a drive that carried data only: a flushing filemark, as
    /// the job's data must be on tape before the job is called done.
    pub fn finish(&mut self) -> Result<()> {
        if self.drive.is_none() {
            return Ok(());
        }
        while !self.end_segment(true)? {}
        if self.need_switch {
            if let Some(v) = &self.volume {
                self.cat.set_volume_status(v.id, VolumeState::Full)?;
            }
        }
        self.note_health();
        Ok(())
    }

    /// Asks the drive how the mount went (after the flush, before the unload).
    fn note_health(&mut self) {
        if let (Some(d), Some(v)) = (self.drive.as_mut(), &self.volume) {
            self.health.push((v.barcode.clone(), d.health()));
        }
    }

    /// Flushes the drive's buffer to tape (a write of no filemark, without the
    /// immediate bit): every block written so far is durable. A drive with no
    /// cartridge yet has nothing to flush.
    pub fn sync(&mut self) -> Result<()> {
        loop {
            if let Some(n) = self.pending_lost.take() {
                self.replay(n)?;
            }
            let Some(d) = self.drive.as_mut() else {
                return Ok(());
            };
            if let Err(e) = d.write_filemarks(0, false) {
                match e.deferred_write_lost() {
                    Some(n) => {
                        self.replay(n)?;
                        continue;
                    }
                    None => return Err(e.into()),
                }
            }
            self.check_position()?;
            self.confirm();
            // The next write looks at the drive's flags first.
            self.since_alerts = ALERT_EVERY;
            return Ok(());
        }
    }

    /// Host bytes per second the drive takes at its top speed for data like
    /// `sample`, when it knows without measuring.
    pub fn streaming_rate(&mut self, sample: &[u8]) -> Option<f64> {
        self.drive.as_mut().and_then(|d| d.streaming_rate(sample))
    }

    /// The drive's statistics, when it keeps them (with no cartridge now: as
    /// they were when the last one was set aside).
    pub fn drive_stats(&self) -> Option<tapeloom_device::DriveStats> {
        self.drive_stats_now().or_else(|| self.aside_stats.clone())
    }

    fn drive_stats_now(&self) -> Option<tapeloom_device::DriveStats> {
        self.drive.as_ref().and_then(|d| d.stats())
    }

    /// Notes a span of `phase` on the drive the cartridge is in.
    pub fn mark(&mut self, phase: Phase, from: Instant, to: Instant) {
        self.marks.push((self.mounted_in, phase, from, to));
    }

    /// The drive this writer uses, once it has mounted a cartridge.
    pub fn drive_index(&self) -> Option<usize> {
        self.prefer_drive
    }
}
