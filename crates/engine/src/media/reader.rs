//! Reading a job's blocks in tape order across its volumes, and decoding its streams.

use crate::error::{Error, JobError, MediaError, Result};
use crate::home::Library;
use crate::media::policy::Drive;
use crate::media::policy::{place, read_label, Found};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tapeloom_catalog::{CopySegment, JobVolume, Phase, Volume};
use tapeloom_device::{DeviceError, ReadOutcome};
use tapeloom_format::{open_block, BlockHeader, DataKey};

/// What the next read found.
pub(crate) enum Got {
    /// A good block of the job; its bytes are in [`JobReader::block`].
    Block {
        seq: u32,
        lbn: u64,
        header: BlockHeader,
    },
    /// A block that failed its checks.
    Bad { seq: u32, lbn: u64, why: String },
    /// The job has no more blocks.
    End,
}

/// A library several readers share: the changer moves one cartridge at a time.
pub(crate) type SharedLibrary = Arc<Mutex<Library>>;

/// Reads the blocks of one job, positioning by logical block. It follows one order
/// of the job's volumes: all of them in sequence, or one drive's chain.
pub(crate) struct JobReader {
    lib: SharedLibrary,
    prefer_drive: Option<usize>,
    vols: Vec<JobVolume>,
    /// The volumes to read, in order (sequence numbers).
    order: Vec<u32>,
    job_tag: u64,
    cur: Option<(u32, Drive)>,
    /// The drive in use, once one was mounted.
    pub drive: Option<usize>,
    /// The order was read to its end.
    ended: bool,
    lbn: u64,
    buf: Vec<u8>,
    len: usize,
    /// A compressed or encrypted block, opened (header and payload).
    expanded: Vec<u8>,
    /// The job's data key, when it is encrypted.
    key: Option<DataKey>,
    /// Encrypted blocks are passed on sealed when there is no key.
    sealed: bool,
    is_expanded: bool,
    /// Blocks read.
    pub blocks_read: u64,
    /// Bytes read from tape.
    pub bytes_read: u64,
    /// Locates done.
    pub locates: u64,
    /// Cartridges mounted.
    pub mounts: u64,
    /// Cartridges the changer moved into a drive (a cartridge found in its drive
    /// is mounted without one).
    pub loads: u64,
    /// Modeled seconds of drives already let go (with a timing model).
    modeled_done: Option<f64>,
    /// Statistics of the last drive let go.
    last_stats: Option<tapeloom_device::DriveStats>,
    /// Modeled seconds no reading plan can avoid: loads, label reads and unloads.
    pub fixed_seconds: f64,
    health: Vec<(String, tapeloom_device::DriveHealth)>,
    /// When the drive changed cartridges or found its place: (drive, phase, from, to).
    pub marks: Vec<crate::sampler::Marked>,
    /// The copy read in place of the job's own cartridges, if any.
    copy: Option<CopyMap>,
    /// The cartridge mounted (the job's own, or the copy's).
    mounted_as: Option<Volume>,
    /// Where the drive stands on the mounted cartridge.
    phys: u64,
    /// The piece being read: the original's first LBN and the cartridge's LBN of
    /// the same object, and the original's LBN where the piece ends (exclusive).
    piece: (u64, u64, u64),
    /// Another copy to read a block from when it is bad here.
    alt: Option<Box<JobReader>>,
    /// The other copies, in the order they are tried, not opened yet.
    alts: Vec<Option<CopyMap>>,
    /// After a block was read from another copy on this reader's drive: where to
    /// mount again and go on.
    resume: Option<(u32, u64)>,
    /// Bad blocks read from another copy instead.
    pub from_other_copy: u64,
    /// Cartridges passed over because they could not be mounted (missing,
    /// blank, carrying another label, failing to load): barcode and why, in the
    /// order met. The next copy was read instead.
    pub passed_over: Vec<(String, String)>,
    /// The drive other copies are read on.
    alt_drive: Option<usize>,
}

/// The position of a reader whose drive stands where the job it reads has no
/// position (it read another job through a copy): past every block, so the next
/// read locates rather than reading through.
const UNKNOWN_LBN: u64 = u64::MAX;

/// Where a further copy of a job holds the job's objects (docs/COPIES.md): its
/// segments and its cartridges.
#[derive(Debug, Clone)]
pub struct CopyMap {
    /// The copy's number.
    pub copy_no: u32,
    segs: Vec<CopySegment>,
    volumes: HashMap<i64, Volume>,
}

impl CopyMap {
    /// Copy `copy_no` of `job`, which must be whole (state ok).
    pub fn load(cat: &tapeloom_catalog::Catalog, job: i64, copy_no: u32) -> Result<CopyMap> {
        Self::load_in(cat, job, copy_no, &[tapeloom_catalog::CopyState::Ok])
    }

    /// Copy `copy_no` of `job` in one of the states `states` (a copy a move
    /// wrote is read back while it is still `writing`).
    pub(crate) fn load_in(
        cat: &tapeloom_catalog::Catalog,
        job: i64,
        copy_no: u32,
        states: &[tapeloom_catalog::CopyState],
    ) -> Result<CopyMap> {
        let whole =
            (cat.copies(job)?.iter()).any(|c| c.copy_no == copy_no && states.contains(&c.state));
        if !whole {
            return Err(crate::error::CopyError::NoCopy { job, copy_no }.into());
        }
        let segs = cat.copy_segments(job, copy_no)?;
        let mut volumes = HashMap::new();
        for v in cat.volumes()? {
            if segs.iter().any(|s| s.volume_id == v.id) {
                volumes.insert(v.id, v);
            }
        }
        Ok(CopyMap {
            copy_no,
            segs,
            volumes,
        })
    }

    /// The copy's segments, in the order written.
    pub fn segments(&self) -> &[CopySegment] {
        &self.segs
    }

    /// The cartridge of catalog id `id`, when the copy has a segment on it.
    pub fn volume(&self, id: i64) -> Option<&Volume> {
        self.volumes.get(&id)
    }

    /// The copy's cartridges, in the order its segments use them.
    pub fn cartridges(&self) -> Vec<&Volume> {
        let mut out: Vec<&Volume> = Vec::new();
        for s in &self.segs {
            if let Some(v) = self.volumes.get(&s.volume_id) {
                if !out.iter().any(|o| o.id == v.id) {
                    out.push(v);
                }
            }
        }
        out
    }

    /// The cartridge holding the original's object at (`seq`, `lbn`), and the
    /// piece it is in: (original's first LBN, cartridge's first LBN, original's
    /// end, exclusive).
    fn find(&self, seq: u32, lbn: u64) -> Option<(&Volume, (u64, u64, u64))> {
        let s = self.segs.iter().find(|s| s.holds(seq, lbn))?;
        self.piece(s)
    }

    /// The first piece of the original's volume `seq` that begins after `lbn`
    /// (a reader asked to stand before the job's first object there stands at it).
    fn find_after(&self, seq: u32, lbn: u64) -> Option<(&Volume, (u64, u64, u64))> {
        let s = (self.segs.iter())
            .filter(|s| s.orig_seq == seq && s.orig_first_lbn > lbn)
            .min_by_key(|s| s.orig_first_lbn)?;
        self.piece(s)
    }

    fn piece(&self, s: &CopySegment) -> Option<(&Volume, (u64, u64, u64))> {
        let end = s.orig_first_lbn.saturating_add(s.objects.unwrap_or(0));
        let v = self.volumes.get(&s.volume_id)?;
        Some((v, (s.orig_first_lbn, s.first_lbn, end)))
    }
}

impl JobReader {
    /// A reader for job `job_id` of the home's catalog, with the job's volumes.
    pub fn open(
        home: &crate::Home,
        job_id: i64,
        prefer_drive: Option<usize>,
    ) -> Result<(Self, Vec<JobVolume>)> {
        let cat = &home.catalog;
        let job = cat.job(job_id)?.ok_or(JobError::NoJob(job_id))?;
        let vols = cat.job_volumes(job_id)?;
        if vols.is_empty() {
            return Err(JobError::NothingOnTape(job_id).into());
        }
        let key = crate::crypt::for_job(&home.keys, &job)?.map(|c| c.data);
        crate::regen::know(job.tag, &cat.streams(job_id)?);
        let reader = JobReader::new(
            Arc::new(Mutex::new(home.library()?)),
            vols.clone(),
            job.tag,
            job.block_size as usize,
            prefer_drive,
        )
        .with_key(key);
        Ok((reader, vols))
    }

    /// A reader of `vols` (all the job's volumes), following them in sequence order
    /// until told to follow a chain ([`JobReader::follow`]).
    pub fn new(
        lib: SharedLibrary,
        vols: Vec<JobVolume>,
        job_tag: u64,
        block_size: usize,
        prefer_drive: Option<usize>,
    ) -> Self {
        let mut order: Vec<u32> = vols.iter().map(|v| v.seq).collect();
        order.sort_unstable();
        JobReader {
            lib,
            prefer_drive,
            vols,
            order,
            job_tag,
            cur: None,
            drive: None,
            ended: false,
            lbn: 0,
            buf: vec![0; block_size.max(tapeloom_format::MAX_BLOCK_SIZE)],
            len: 0,
            expanded: Vec::new(),
            key: None,
            sealed: false,
            is_expanded: false,
            blocks_read: 0,
            bytes_read: 0,
            locates: 0,
            mounts: 0,
            loads: 0,
            modeled_done: None,
            last_stats: None,
            fixed_seconds: 0.0,
            health: Vec::new(),
            marks: Vec::new(),
            copy: None,
            mounted_as: None,
            phys: 0,
            piece: (0, 0, u64::MAX),
            alt: None,
            alts: Vec::new(),
            resume: None,
            from_other_copy: 0,
            passed_over: Vec::new(),
            alt_drive: None,
        }
    }

    /// Reads copy `copy` of the job (`None`: its own cartridges), and a bad block
    /// from the first of `alts` that has it good.
    pub fn with_copies(mut self, copy: Option<CopyMap>, alts: Vec<Option<CopyMap>>) -> Self {
        self.copy = copy;
        self.alts = alts;
        self
    }

    /// Reads a bad block from another copy on drive `d` (else on this reader's).
    pub fn alt_drive(mut self, d: Option<usize>) -> Self {
        self.alt_drive = d;
        self
    }

    /// Reads copy `copy` of the job from now on (after [`JobReader::switch`]),
    /// and a bad block from the first of `alts` that has it good.
    pub fn set_copies(&mut self, copy: Option<CopyMap>, alts: Vec<Option<CopyMap>>) {
        // A copy's positions are the job's own, not the mounted cartridge's: the
        // next read seeks.
        if copy.is_some() && self.cur.is_some() {
            self.lbn = UNKNOWN_LBN;
        }
        (self.copy, self.alts, self.alt) = (copy, alts, None);
        self.piece = (0, 0, u64::MAX);
    }

    /// The barcode of the cartridge mounted, if any.
    pub fn mounted_barcode(&self) -> Option<String> {
        self.cur.as_ref()?;
        self.mounted_as.as_ref().map(|v| v.barcode.clone())
    }

    /// The LBN on the mounted cartridge of the object read last.
    pub fn last_place(&self) -> u64 {
        self.phys.saturating_sub(1)
    }

    /// The copy read (1: the job's own cartridges).
    pub fn copy_no(&self) -> u32 {
        self.copy.as_ref().map_or(1, |c| c.copy_no)
    }

    /// The cartridge LBN of the original's `lbn` in the piece being read.
    fn phys_of(&self, lbn: u64) -> u64 {
        lbn.saturating_add(self.piece.1)
            .saturating_sub(self.piece.0)
    }

    fn modeled_now(&self) -> Option<f64> {
        self.cur
            .as_ref()
            .and_then(|(_, d)| d.stats())
            .map(|s| s.modeled_seconds)
    }

    /// Decrypts the job's encrypted blocks with `key`; without one they read as bad
    /// blocks.
    pub fn with_key(mut self, key: Option<DataKey>) -> Self {
        self.key = key;
        self
    }

    /// Passes an encrypted block on as read, sealed and unopened, when there is no
    /// key (a restore read here and placed by the key's holder, who opens it): its
    /// header is checked, its payload is not ([`JobReader::block`] is then the
    /// block as read).
    pub fn sealed(mut self, sealed: bool) -> Self {
        self.sealed = sealed;
        self
    }

    /// Follows these volumes (sequence numbers, in reading order) from now on: one
    /// chain of the job. The cartridge in the drive stays until the next seek.
    pub fn follow(&mut self, order: Vec<u32>) {
        self.order = order;
    }

    /// Lets the drive go: notes what it said and keeps its modeled time and counters.
    fn retire(&mut self, d: &mut dyn tapeloom_device::TapeDrive, seq: u32) {
        self.note_health(seq, d);
        if let Some(s) = d.stats() {
            *self.modeled_done.get_or_insert(0.0) += s.modeled_seconds;
            self.last_stats = Some(s);
        }
    }

    /// What the drives said about each cartridge read, at the end of its mount (the
    /// cartridge mounted now included).
    pub fn take_health(&mut self) -> Vec<(String, tapeloom_device::DriveHealth)> {
        if let Some((seq, mut d)) = self.cur.take() {
            self.note_health(seq, &mut *d);
            self.cur = Some((seq, d));
        }
        std::mem::take(&mut self.health)
    }

    /// Notes what the drive holding volume `seq` says about it.
    fn note_health(&mut self, seq: u32, d: &mut dyn tapeloom_device::TapeDrive) {
        let h = d.health();
        if let Some(v) = &self.mounted_as {
            self.health.push((v.barcode.clone(), h));
        } else if let Some(v) = self.vols.iter().find(|v| v.seq == seq) {
            self.health.push((v.volume.barcode.clone(), h));
        }
    }

    /// The current drive's statistics (else the last one's), when it keeps them.
    pub fn drive_stats(&self) -> Option<tapeloom_device::DriveStats> {
        match &self.cur {
            Some((_, d)) => d.stats(),
            None => self.last_stats.clone(),
        }
    }

    /// Modeled seconds of all the reading so far, when the drives have a model.
    pub fn modeled_seconds(&self) -> Option<f64> {
        match (self.modeled_done, self.modeled_now()) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        }
    }

    /// What getting from the current position to block `lbn` of the same volume
    /// costs by locate and by reading, when the drive has a model.
    pub fn travel(&self, lbn: u64) -> Option<tapeloom_device::Travel> {
        let (_, d) = self.cur.as_ref()?;
        d.travel_seconds(self.phys, self.phys_of(lbn))
    }

    /// What getting from block `from` to block `to` of the current volume costs
    /// by locate and by reading (infinite backwards), when the drive has a model.
    pub fn travel_between(&self, from: u64, to: u64) -> Option<tapeloom_device::Travel> {
        let (_, d) = self.cur.as_ref()?;
        d.travel_seconds(self.phys_of(from), self.phys_of(to))
    }

    /// The mounted drive's own order for reading `extents` (first and last
    /// block of each) of the current volume, where the drive has one.
    pub fn recommended_order(&mut self, extents: &[(u64, u64)]) -> Option<Vec<usize>> {
        let shifted: Vec<(u64, u64)> = (extents.iter())
            .map(|(a, b)| (self.phys_of(*a), self.phys_of(*b)))
            .collect();
        let (_, d) = self.cur.as_mut()?;
        d.recommended_order(&shifted)
    }

    /// What reading blocks `from..to` of the current volume costs, when the drive has
    /// a model.
    pub fn read_cost(&self, from: u64, to: u64) -> Option<f64> {
        let (_, d) = self.cur.as_ref()?;
        (d.travel_seconds(self.phys_of(from), self.phys_of(to))).map(|t| t.read)
    }

    /// The bytes of the last block as read from tape (still compressed or
    /// encrypted as it was written).
    pub fn raw(&self) -> &[u8] {
        &self.buf[..self.len.min(self.buf.len())]
    }

    /// The bytes of the last good block (expanded, when it was compressed).
    pub fn block(&self) -> &[u8] {
        if self.is_expanded {
            &self.expanded
        } else {
            &self.buf[..self.len]
        }
    }

    fn volume(&self, seq: u32) -> Result<&JobVolume> {
        self.vols
            .iter()
            .find(|v| v.seq == seq)
            .ok_or_else(|| JobError::NoVolume { seq }.into())
    }

    /// Positions at block `lbn` of the job's volume `seq` (on the copy's
    /// cartridge that holds it, when a copy is read).
    pub fn seek(&mut self, seq: u32, mut lbn: u64) -> Result<()> {
        self.ended = false;
        self.resume = None;
        let asked = (seq, lbn);
        let (target, piece) = match &self.copy {
            None => (self.volume(seq)?.volume.clone(), (0, 0, u64::MAX)),
            Some(c) => {
                let found = c.find(seq, lbn).or_else(|| c.find_after(seq, lbn));
                let (v, piece) = found.ok_or(crate::error::CopyError::NotInCopy {
                    copy_no: c.copy_no,
                    seq,
                    lbn,
                })?;
                // Before the copy's first object of the volume: it stands there.
                lbn = lbn.max(piece.0);
                (v.clone(), piece)
            }
        };
        let mounted =
            self.cur.is_some() && self.mounted_as.as_ref().map(|v| v.id) == Some(target.id);
        if !mounted {
            self.unload()?;
            if let Err(e) = self.mount(&target, seq) {
                return self.pass_over(&target.barcode, e, asked);
            }
        }
        if let Some(c) = self.cur.as_mut() {
            c.0 = seq;
        }
        self.piece = piece;
        let phys = self.phys_of(lbn);
        if self.phys != phys {
            if let Some((_, d)) = self.cur.as_mut() {
                let t = Instant::now();
                d.locate(phys)?;
                self.locates += 1;
                self.marks
                    .push((self.drive, Phase::Position, t, Instant::now()));
            }
            self.phys = phys;
        }
        self.lbn = lbn;
        Ok(())
    }

    /// After cartridge `barcode` of the copy read could not be mounted (`e`):
    /// reads the next copy from then on, at (`seq`, `lbn`) of the original,
    /// noting the cartridge passed over and why. When no copy is left, the
    /// error names every cartridge tried.
    fn pass_over(&mut self, barcode: &str, e: Error, (seq, lbn): (u32, u64)) -> Result<()> {
        let poisoned = matches!(e, Error::Media(MediaError::LibraryPoisoned));
        if poisoned || self.alts.is_empty() {
            if self.passed_over.is_empty() || poisoned {
                return Err(e);
            }
            let mut tried = self.passed_over.clone();
            tried.push((barcode.to_string(), e.to_string()));
            return Err(MediaError::NoCopyReadable { tried }.into());
        }
        tracing::warn!(
            cartridge = barcode,
            "passed over: {e}; the next copy is read"
        );
        self.passed_over.push((barcode.to_string(), e.to_string()));
        (self.copy, self.alt) = (self.alts.remove(0), None);
        self.piece = (0, 0, u64::MAX);
        self.lbn = UNKNOWN_LBN;
        self.seek(seq, lbn)
    }

    /// Puts cartridge `v` into a drive and checks its label; the drive then
    /// stands after the label.
    fn mount(&mut self, v: &Volume, seq: u32) -> Result<()> {
        let t_load = Instant::now();
        let prefer = self.prefer_drive.or(self.drive);
        let (i, mut drive, moved) = {
            let mut lib = self.lib.lock().map_err(|_| MediaError::LibraryPoisoned)?;
            place(&mut lib, &v.barcode, prefer)?
        };
        // The load needs no changer: other drives go on meanwhile.
        if moved {
            drive.load()?;
            self.loads += 1;
        }
        self.drive = Some(i);
        let t_label = Instant::now();
        self.marks.push((self.drive, Phase::Load, t_load, t_label));
        let label = match read_label(&mut *drive) {
            // A label the drive cannot read is a bad block like any other: every
            // block read after it still proves its cartridge by the volume UUID
            // in its header.
            Err(crate::error::Error::Device(e)) if e.is_medium_error() => None,
            r => Some(r?),
        };
        self.marks
            .push((self.drive, Phase::Position, t_label, Instant::now()));
        match label {
            None => {}
            Some(Found::Label(l)) if l.uuid == v.uuid => {}
            _ => {
                return Err(MediaError::WrongVolume {
                    barcode: v.barcode.clone(),
                    seq,
                }
                .into())
            }
        }
        self.bytes_read += tapeloom_format::LABEL_LEN as u64;
        self.mounts += 1;
        if let Some(st) = drive.stats() {
            self.fixed_seconds += st.modeled_seconds;
        }
        self.cur = Some((seq, drive));
        self.mounted_as = Some(v.clone());
        self.phys = 1;
        Ok(())
    }

    /// Unloads the cartridge in the drive, if any, keeping its modeled time.
    fn unload(&mut self) -> Result<()> {
        if let Some((old, mut d)) = self.cur.take() {
            let before = d.stats().map(|s| s.modeled_seconds);
            let t = Instant::now();
            d.unload()?;
            self.marks
                .push((self.drive, Phase::Load, t, Instant::now()));
            if let (Some(b), Some(s)) = (before, d.stats()) {
                self.fixed_seconds += s.modeled_seconds - b;
            }
            self.retire(&mut *d, old);
        }
        self.mounted_as = None;
        Ok(())
    }

    /// Reads another job from now on (its volumes, tag and key), following its
    /// volumes in sequence order. A cartridge in the drive that the other job is
    /// on too stays mounted where it stands, now known by that job's sequence
    /// number; any other is unloaded.
    pub fn switch(&mut self, vols: Vec<JobVolume>, tag: u64, key: Option<DataKey>) -> Result<()> {
        // The job read until now through a copy: where the drive stands is no
        // position of the next job's.
        if self.copy.is_some() {
            self.lbn = UNKNOWN_LBN;
        }
        // Another job is read from its own cartridges.
        self.copy = None;
        self.alt = None;
        self.alts.clear();
        self.piece = (0, 0, u64::MAX);
        if self.cur.is_some() {
            let id = self.mounted_as.as_ref().map_or(-1, |v| v.id);
            match vols.iter().find(|v| v.volume.id == id) {
                Some(v) => {
                    if let Some(cur) = self.cur.as_mut() {
                        cur.0 = v.seq;
                    }
                }
                None => self.unload()?,
            }
        }
        let mut order: Vec<u32> = vols.iter().map(|v| v.seq).collect();
        order.sort_unstable();
        (self.vols, self.order, self.job_tag, self.key) = (vols, order, tag, key);
        self.ended = false;
        Ok(())
    }

    /// The catalog id of the cartridge mounted, if any.
    pub fn mounted_volume(&self) -> Option<i64> {
        self.cur.as_ref()?;
        self.mounted_as.as_ref().map(|v| v.id)
    }

    /// Where the drive stands: (volume seq, LBN) of the cartridge mounted, even after
    /// the order was read to its end; `None` before the first seek.
    pub fn mounted(&self) -> Option<(u32, u64)> {
        if self.resume.is_some() {
            return self.resume;
        }
        self.cur.as_ref().map(|c| (c.0, self.lbn))
    }

    /// Reads forward to block `to` of the current volume without returning what it
    /// reads: passing over unwanted data by reading, where that beats a locate.
    pub fn pass(&mut self, to: u64) -> Result<()> {
        if let Some((seq, _)) = self.resume {
            // Its cartridge made way for another copy's: it is mounted again there.
            self.resume = Some((seq, to));
            return Ok(());
        }
        if to >= self.piece.2 {
            // On another piece of the copy: found by seeking.
            if let Some((seq, _)) = self.cur.as_ref() {
                let seq = *seq;
                return self.seek(seq, to);
            }
        }
        while self.lbn < to {
            let Some((_, drive)) = self.cur.as_mut() else {
                return Ok(());
            };
            match drive.read_block(&mut self.buf) {
                Ok(ReadOutcome::Block(n)) => {
                    self.blocks_read += 1;
                    self.bytes_read += n as u64;
                }
                Ok(ReadOutcome::Filemark) | Err(DeviceError::BlockTooLarge { .. }) => {}
                Ok(ReadOutcome::EndOfData) => return Ok(()),
                Err(e) => return Err(e.into()),
            }
            self.lbn += 1;
            self.phys += 1;
        }
        Ok(())
    }

    /// Where the next read happens: (volume seq, LBN); `None` before the first seek
    /// and after the end of the order.
    pub fn at(&self) -> Option<(u32, u64)> {
        // Its cartridge made way for another copy's: it goes on where it was.
        if self.resume.is_some() {
            return self.resume;
        }
        if self.ended {
            return None;
        }
        self.cur.as_ref().map(|c| (c.0, self.lbn))
    }

    /// Moves on to the next volume of the order; false (and the drive let go) after
    /// the last.
    fn next_volume(&mut self) -> Result<bool> {
        let Some((seq, _)) = self.cur.as_ref() else {
            return Ok(false);
        };
        let seq = *seq;
        let next = self
            .order
            .iter()
            .position(|s| *s == seq)
            .and_then(|i| self.order.get(i + 1))
            .and_then(|n| self.vols.iter().find(|v| v.seq == *n));
        match next {
            Some(v) => {
                let (next, first) = (v.seq, v.first_lbn);
                self.seek(next, first)?;
                Ok(true)
            }
            None => {
                // The cartridge stays in the drive, and its time in the totals, until
                // a seek needs another.
                self.ended = true;
                Ok(false)
            }
        }
    }

    /// The block of `n` bytes just read at `at` of the volume `uuid`: a good block
    /// (expanded and opened as it needs), a bad one, or `None` when it is another
    /// job's.
    fn check_block(
        &mut self,
        (seq, lbn): (u32, u64),
        (uuid, phys): ([u8; 16], u64),
        n: usize,
    ) -> Option<Got> {
        let bad = |why: String| Some(Got::Bad { seq, lbn, why });
        match BlockHeader::open(&self.buf[..n]) {
            Ok(h) if h.job_tag != self.job_tag => None,
            Ok(h) if h.lbn != phys || h.volume != uuid => {
                bad(format!("block says it is block {} of another place", h.lbn))
            }
            Ok(header) if header.encrypted && self.key.is_none() && self.sealed => {
                Some(Got::Block { seq, lbn, header })
            }
            Ok(header) if header.compressed || header.encrypted => {
                match open_block(
                    &header,
                    &self.buf[..n],
                    self.key.as_ref(),
                    &mut self.expanded,
                ) {
                    Ok(()) => {
                        self.is_expanded = true;
                        Some(Got::Block { seq, lbn, header })
                    }
                    Err(e) => bad(e.to_string()),
                }
            }
            Ok(header) => Some(Got::Block { seq, lbn, header }),
            Err(e) => bad(e.to_string()),
        }
    }

    /// Reads the next block of the job. A bad block is read from another copy
    /// when one was given and has it good.
    pub fn next(&mut self) -> Result<Got> {
        let got = self.next_here()?;
        let Got::Bad { seq, lbn, why } = got else {
            return Ok(got);
        };
        match self.read_elsewhere(seq, lbn)? {
            true => {
                self.from_other_copy += 1;
                let header = BlockHeader::open(self.raw()).map_err(crate::error::Error::Format)?;
                Ok(Got::Block { seq, lbn, header })
            }
            false => Ok(Got::Bad { seq, lbn, why }),
        }
    }

    /// Reads the original's block at (`seq`, `lbn`) from the other copies, in
    /// turn, into this reader's buffers; false when none has it good. On a
    /// library of one drive, the other copy's cartridge takes the drive for the
    /// read, and this reader mounts its own again at its next read.
    fn read_elsewhere(&mut self, seq: u32, lbn: u64) -> Result<bool> {
        loop {
            if self.alt.is_none() {
                if self.alts.is_empty() {
                    return Ok(false);
                }
                let copy = self.alts.remove(0);
                let other = self.alt_drive.or(self.drive).unwrap_or(0);
                let mut r = JobReader::new(
                    Arc::clone(&self.lib),
                    self.vols.clone(),
                    self.job_tag,
                    self.buf.len(),
                    Some(other),
                )
                .with_copies(copy, Vec::new())
                .sealed(self.sealed);
                r.key = self.key.clone();
                self.alt = Some(Box::new(r));
            }
            let shared = self.alt.as_ref().and_then(|a| a.prefer_drive) == self.drive;
            if shared {
                // One drive: this reader's cartridge makes way.
                if self.cur.is_some() && !self.ended {
                    self.resume = Some((seq, lbn + 1));
                }
                self.unload()?;
            }
            let Some(alt) = self.alt.as_mut() else {
                return Ok(false);
            };
            let read = alt.seek(seq, lbn).and_then(|_| alt.next_here());
            let got = match read {
                Ok(Got::Block { .. }) => {
                    self.buf[..alt.len].copy_from_slice(&alt.buf[..alt.len]);
                    self.len = alt.len;
                    self.is_expanded = alt.is_expanded;
                    if alt.is_expanded {
                        self.expanded.clear();
                        self.expanded.extend_from_slice(&alt.expanded);
                    }
                    true
                }
                // That copy cannot give it: the next one is tried.
                Ok(_) | Err(_) => false,
            };
            self.blocks_read += 1;
            if shared {
                alt.unload()?;
            }
            if got {
                return Ok(true);
            }
            self.alt = None;
        }
    }

    /// Reads the next block of the job from the copy this reader reads.
    fn next_here(&mut self) -> Result<Got> {
        loop {
            if let Some((seq, lbn)) = self.resume.take() {
                self.seek(seq, lbn)?;
            }
            if self.ended {
                return Ok(Got::End);
            }
            let Some((seq, _)) = self.cur.as_ref() else {
                return Ok(Got::End);
            };
            let seq = *seq;
            let v = self.volume(seq)?;
            if v.last_lbn.is_some_and(|last| self.lbn > last) {
                if self.next_volume()? {
                    continue;
                }
                return Ok(Got::End);
            }
            if self.lbn >= self.piece.2 {
                // The copy goes on in its next piece, perhaps on another cartridge.
                self.seek(seq, self.lbn)?;
            }
            let uuid = self.mounted_as.as_ref().map_or([0; 16], |m| m.uuid);
            let (lbn, phys) = (self.lbn, self.phys);
            let Some((_, drive)) = self.cur.as_mut() else {
                return Ok(Got::End);
            };
            match drive.read_block(&mut self.buf) {
                Ok(ReadOutcome::Block(n)) => {
                    self.lbn += 1;
                    self.phys += 1;
                    self.blocks_read += 1;
                    self.bytes_read += n as u64;
                    self.len = n;
                    self.is_expanded = false;
                    match self.check_block((seq, lbn), (uuid, phys), n) {
                        Some(got) => return Ok(got),
                        // Past the end of an incomplete segment: another job's data.
                        None if self.next_volume()? => continue,
                        None => return Ok(Got::End),
                    }
                }
                Ok(ReadOutcome::Filemark) => {
                    self.lbn += 1;
                    self.phys += 1;
                    // A filemark inside the segment (every --segment-size) is passed
                    // over; the one after the segment's last block ends it.
                    let inside = self
                        .volume(seq)?
                        .last_lbn
                        .is_none_or(|last| self.lbn <= last);
                    if inside {
                        continue;
                    }
                    if self.next_volume()? {
                        continue;
                    }
                    return Ok(Got::End);
                }
                Ok(ReadOutcome::EndOfData) => {
                    if self.next_volume()? {
                        continue;
                    }
                    return Ok(Got::End);
                }
                Err(DeviceError::BlockTooLarge { actual }) => {
                    self.lbn += 1;
                    self.phys += 1;
                    self.blocks_read += 1;
                    return Ok(Got::Bad {
                        seq,
                        lbn,
                        why: format!("block of {actual} bytes is larger than any tapeloom block"),
                    });
                }
                Err(e) if e.is_medium_error() => {
                    // The block cannot be read: it is bad, the ones after it may
                    // not be. Drives differ in where they stand after the error, so
                    // the reader places itself after the block.
                    self.lbn += 1;
                    self.phys += 1;
                    self.blocks_read += 1;
                    drive.locate(self.phys)?;
                    return Ok(Got::Bad {
                        seq,
                        lbn,
                        why: e.to_string(),
                    });
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
}
