//! Reading a job's blocks in tape order across its volumes, and decoding its streams.

use crate::error::{Error, JobError, MediaError, Result};
use crate::home::Library;
use crate::media::policy::Drive;
use crate::media::policy::{place, read_label, Found};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tapeloom_catalog::{JobVolume, Phase};
use tapeloom_device::{DeviceError, ReadOutcome};
use tapeloom_format::{
    open_block, BlockHeader, DataKey, Event, FormatError, RecordDecoder, CONTINUATION_STREAM,
    NO_RECORD,
};

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
        let key = crate::crypt::JobCrypt::for_job(&home.keys, &job)?.map(|c| c.data);
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
        }
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
        if let Some(v) = self.vols.iter().find(|v| v.seq == seq) {
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
        d.travel_seconds(self.lbn, lbn)
    }

    /// What getting from block `from` to block `to` of the current volume costs
    /// by locate and by reading (infinite backwards), when the drive has a model.
    pub fn travel_between(&self, from: u64, to: u64) -> Option<tapeloom_device::Travel> {
        let (_, d) = self.cur.as_ref()?;
        d.travel_seconds(from, to)
    }

    /// The mounted drive's own order for reading `extents` (first and last
    /// block of each) of the current volume, where the drive has one.
    pub fn recommended_order(&mut self, extents: &[(u64, u64)]) -> Option<Vec<usize>> {
        let (_, d) = self.cur.as_mut()?;
        d.recommended_order(extents)
    }

    /// What reading blocks `from..to` of the current volume costs, when the drive has
    /// a model.
    pub fn read_cost(&self, from: u64, to: u64) -> Option<f64> {
        let (_, d) = self.cur.as_ref()?;
        d.travel_seconds(from, to).map(|t| t.read)
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

    /// Positions at block `lbn` of the job's volume `seq`.
    pub fn seek(&mut self, seq: u32, lbn: u64) -> Result<()> {
        self.ended = false;
        if self.cur.as_ref().map(|c| c.0) != Some(seq) {
            self.unload()?;
            let v = self.volume(seq)?.clone();
            let t_load = Instant::now();
            let prefer = self.prefer_drive.or(self.drive);
            let (i, mut drive, moved) = {
                let mut lib = self.lib.lock().map_err(|_| MediaError::LibraryPoisoned)?;
                place(&mut lib, &v.volume.barcode, prefer)?
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
                Some(Found::Label(l)) if l.uuid == v.volume.uuid => {}
                _ => {
                    return Err(MediaError::WrongVolume {
                        barcode: v.volume.barcode.clone(),
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
            self.lbn = 1;
        }
        if self.lbn != lbn {
            if let Some((_, d)) = self.cur.as_mut() {
                let t = Instant::now();
                d.locate(lbn)?;
                self.locates += 1;
                self.marks
                    .push((self.drive, Phase::Position, t, Instant::now()));
            }
            self.lbn = lbn;
        }
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
        Ok(())
    }

    /// Reads another job from now on (its volumes, tag and key), following its
    /// volumes in sequence order. A cartridge in the drive that the other job is
    /// on too stays mounted where it stands, now known by that job's sequence
    /// number; any other is unloaded.
    pub fn switch(&mut self, vols: Vec<JobVolume>, tag: u64, key: Option<DataKey>) -> Result<()> {
        if let Some((seq, _)) = &self.cur {
            let id = self.volume(*seq)?.volume.id;
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
        let (seq, _) = self.cur.as_ref()?;
        (self.vols.iter())
            .find(|v| v.seq == *seq)
            .map(|v| v.volume.id)
    }

    /// Where the drive stands: (volume seq, LBN) of the cartridge mounted, even after
    /// the order was read to its end; `None` before the first seek.
    pub fn mounted(&self) -> Option<(u32, u64)> {
        self.cur.as_ref().map(|c| (c.0, self.lbn))
    }

    /// Reads forward to block `to` of the current volume without returning what it
    /// reads: passing over unwanted data by reading, where that beats a locate.
    pub fn pass(&mut self, to: u64) -> Result<()> {
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
        }
        Ok(())
    }

    /// Where the next read happens: (volume seq, LBN); `None` before the first seek
    /// and after the end of the order.
    pub fn at(&self) -> Option<(u32, u64)> {
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
    fn check_block(&mut self, (seq, lbn): (u32, u64), uuid: [u8; 16], n: usize) -> Option<Got> {
        let bad = |why: String| Some(Got::Bad { seq, lbn, why });
        match BlockHeader::open(&self.buf[..n]) {
            Ok(h) if h.job_tag != self.job_tag => None,
            Ok(h) if h.lbn != lbn || h.volume != uuid => {
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

    /// Reads the next block of the job.
    pub fn next(&mut self) -> Result<Got> {
        loop {
            if self.ended {
                return Ok(Got::End);
            }
            let Some((seq, _)) = self.cur.as_ref() else {
                return Ok(Got::End);
            };
            let seq = *seq;
            let v = self.volume(seq)?;
            let uuid = v.volume.uuid;
            if v.last_lbn.is_some_and(|last| self.lbn > last) {
                if self.next_volume()? {
                    continue;
                }
                return Ok(Got::End);
            }
            let lbn = self.lbn;
            let Some((_, drive)) = self.cur.as_mut() else {
                return Ok(Got::End);
            };
            match drive.read_block(&mut self.buf) {
                Ok(ReadOutcome::Block(n)) => {
                    self.lbn += 1;
                    self.blocks_read += 1;
                    self.bytes_read += n as u64;
                    self.len = n;
                    self.is_expanded = false;
                    match self.check_block((seq, lbn), uuid, n) {
                        Some(got) => return Ok(got),
                        // Past the end of an incomplete segment: another job's data.
                        None if self.next_volume()? => continue,
                        None => return Ok(Got::End),
                    }
                }
                Ok(ReadOutcome::Filemark) => {
                    self.lbn += 1;
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
                    self.blocks_read += 1;
                    drive.locate(self.lbn)?;
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

/// Receives the decoded records of a job's streams.
pub(crate) trait Sink {
    /// One event of `stream`.
    fn event(&mut self, stream: u16, ev: Event<'_>, at: (u32, u64)) -> Result<()>;
    /// Bytes of `stream` were lost or did not decode: whatever record was open is damaged.
    fn lost(&mut self, stream: u16, why: &str);
}

#[derive(Default)]
struct StreamState {
    dec: RecordDecoder,
    next: Option<u64>,
}

/// Feeds blocks of several interleaved streams to their decoders.
#[derive(Default)]
pub(crate) struct Streams {
    map: HashMap<u16, StreamState>,
}

enum SinkError {
    Fatal(Error),
    Format(FormatError),
}

impl From<FormatError> for SinkError {
    fn from(e: FormatError) -> Self {
        SinkError::Format(e)
    }
}

impl Streams {
    /// Feeds one good block. When the stream's decoder is not in step with this block
    /// (first block seen, or blocks were skipped), decoding begins at `start`, a record
    /// known to start there, or else where the block says its first record starts.
    pub fn feed(
        &mut self,
        h: &BlockHeader,
        payload: &[u8],
        at: (u32, u64),
        start: Option<u32>,
        sink: &mut dyn Sink,
    ) -> Result<()> {
        if h.stream == CONTINUATION_STREAM {
            return Ok(());
        }
        let st = self.map.entry(h.stream).or_default();
        if st.next.is_some_and(|n| h.stream_offset < n) {
            // Bytes already decoded: the copy of a block written again on the next
            // cartridge after a write reported failed had put it on tape too.
            return Ok(());
        }
        let from = if st.next == Some(h.stream_offset) {
            0
        } else {
            if st.next.is_some() && !st.dec.at_boundary() {
                sink.lost(h.stream, "data lost in a bad block");
            }
            st.dec.reset();
            match start {
                Some(s) => s as usize,
                None if h.first_record == NO_RECORD => {
                    st.next = None;
                    return Ok(());
                }
                None => h.first_record as usize,
            }
        };
        // A block that claims to end past 2^64 leaves the next one to resynchronise.
        st.next = h.stream_offset.checked_add(u64::from(h.payload_len));
        let stream = h.stream;
        let r = st
            .dec
            .feed::<SinkError>(payload.get(from..).unwrap_or(&[]), &mut |ev| {
                sink.event(stream, ev, at).map_err(SinkError::Fatal)
            });
        match r {
            Ok(()) => Ok(()),
            Err(SinkError::Fatal(e)) => Err(e),
            Err(SinkError::Format(e)) => {
                // A record that does not decode: drop the stream's state and go on at
                // the next block that starts a record.
                st.dec.reset();
                st.next = None;
                sink.lost(stream, &e.to_string());
                Ok(())
            }
        }
    }

    /// The next blocks come from elsewhere on tape, perhaps from before the last
    /// ones: each stream decodes afresh from the next block it is fed, as after
    /// a gap. A stream left in the middle of an entry loses that entry.
    pub fn jump(&mut self, sink: &mut dyn Sink) {
        for (stream, st) in self.map.iter_mut() {
            if st.next.is_some() && !st.dec.at_boundary() {
                sink.lost(
                    *stream,
                    "the reading moved elsewhere on tape inside this entry",
                );
            }
            st.dec.reset();
            st.next = None;
        }
    }

    /// The streams fed so far.
    pub fn ids(&self) -> impl Iterator<Item = u16> + '_ {
        self.map.keys().copied()
    }

    /// Ends decoding: a stream that stopped mid-record lost its tail.
    pub fn finish(&mut self, sink: &mut dyn Sink) {
        for (stream, st) in self.map.iter_mut() {
            if !st.dec.at_boundary() {
                sink.lost(*stream, "the job's data ends in the middle of this entry");
                st.dec.reset();
            }
        }
    }
}
