//! Rebuilding the catalog from tapes alone (FORMAT.md 7).
//!
//! Every labelled cartridge in the library is read from end to end. Each segment is
//! tied to its job by the job tag in its blocks and ordered by the volume sequence of
//! its `JobStart` or `Continuation` record. Stream 0 of each job, put back together
//! across its volumes, holds the index (every entry and where it is) and `JobEnd`.
//! Data streams are decoded only for a job without `JobEnd` (killed before it wrote
//! its index): [`crate::recover`] finds its entries there.
//!
//! Which drive wrote a segment is not on tape, but each stream is written by one
//! drive, and stream 0 by the first: segments that hold a common stream are recorded
//! as one chain (`restore::chains::group`). A drive's segments that share no stream
//! become chains of their own, which a restore reads as well (each holds whole
//! streams).
//!
//! A job's `JobStart` names its backup set, level and base job (by tag; version 4).
//! Jobs are added oldest first, each one's base before it, and bases are resolved
//! to catalog ids once every job is in, so the catalog's chains (`Catalog::tree_at`)
//! are those the backups made. Index entries marked deleted become the job's
//! deletions, never file rows. A job from an older writer is its own set, a full.
//! The client a job was run for (a server token's name, after the set fields) is
//! recorded as the job's client, so the clients see their jobs again.
//!
//! A job whose start cannot be used is reported, then salvaged from its blocks
//! alone (FORMAT.md 7.2): its block size, streams and segment order come from the
//! blocks, and its files from its index or, when stream 0 cannot be read past the
//! start, from its data streams ([`crate::recover`]). It is `salvaged`.

use crate::crypt::JobCrypt;
use crate::error::{MediaError, Result};
use crate::home::Home;
use crate::media::policy::{mount, read_label, Found};
use crate::media::scan::{Scan, Scanned};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use tapeloom_catalog::{Catalog, CopyState, FileRow, JobState, Stream, Volume};
use tapeloom_format::{
    open_block, BlockHeader, DataKey, Event, FormatError, IndexEntry, JobEnd, JobKey, JobStart,
    Kind, MasterKey, RecordDecoder, RecordHeader, SetInfo, CONTINUATION_STREAM, CONTROL_STREAM,
    MAX_BLOCK_SIZE, MAX_START_LEN, MIN_BLOCK_SIZE, RECORD_HEADER_LEN,
};

/// What a rebuild found and added.
#[derive(Debug, Clone, Default)]
pub struct RebuildReport {
    /// Cartridges read.
    pub volumes_scanned: u64,
    /// Volumes the catalog did not know.
    pub volumes_added: u64,
    /// Jobs added to the catalog.
    pub jobs_added: Vec<i64>,
    /// Jobs found on tape that the catalog already had.
    pub jobs_known: u64,
    /// Jobs without an index whose entries were recovered from their data streams
    /// ([`crate::recover`]).
    pub jobs_recovered: Vec<i64>,
    /// Entries added.
    pub files_added: u64,
    /// Blocks that failed their checks.
    pub bad_blocks: u64,
    /// Jobs whose start could not be used (reported in `unusable`), added from
    /// their blocks alone as `salvaged` jobs: see [`salvage`].
    pub jobs_salvaged: Vec<i64>,
    /// Jobs relative to a base found on no cartridge read: their chains are broken.
    pub bases_missing: Vec<i64>,
    /// Blocks that begin a record the rebuild could not use, each with what it was:
    /// a job start it could not read (the job is salvaged, or missing when no data
    /// block of it was found) or a record of a job's control stream (the job's
    /// index is incomplete).
    pub unusable: Vec<Unusable>,
    /// Further copies of jobs added: (job, copy number).
    pub copies_added: Vec<(i64, u32)>,
    /// Jobs found only in copies (moved by `migrate` or `repack`), and the copy
    /// each is read from.
    pub jobs_moved: Vec<(i64, u32)>,
}

/// A block that begins a record a rebuild could not use.
#[derive(Debug, Clone)]
pub struct Unusable {
    /// The cartridge.
    pub barcode: String,
    /// The block's logical block number.
    pub block: u64,
    /// What the record was and why it could not be used.
    pub what: String,
}

struct Segment {
    volume: Volume,
    seq: Option<u32>,
    first_lbn: u64,
    last_lbn: u64,
    start: Option<JobStart>,
    /// An encrypted job's `JobKey` record, from the segment's first block.
    job_key: Option<JobKey>,
    /// The segment's start, gathered from the blocks it spans.
    head: Head,
    /// Stream 0 payloads: (stream offset, block, bytes).
    control: Vec<(u64, u64, Vec<u8>)>,
    /// The streams with blocks in the segment (stream 0 included).
    streams: BTreeSet<u16>,
    /// Where each data block landed, in tape order: (stream, stream offset, block).
    landed: Vec<(u16, u64, u64)>,
    /// A segment of a further copy of the job: its `CopyStart`. Such a segment
    /// is recorded as the copy's, not as one of the job's own.
    copy: Option<tapeloom_format::CopyStart>,
    /// The longest block of the job in the segment: its block size, for a job
    /// whose start cannot say (blocks of stream 0 are never compressed).
    longest: usize,
}

/// A segment's first records as they are gathered: its `JobStart` (stream 0) or
/// `Continuation` (stream 65535), then an encrypted job's `JobKey`, in clear blocks
/// of their stream from stream offset 0 on. A record may span blocks (FORMAT.md 5):
/// a job of many streams has a stream table larger than a block.
#[derive(Default)]
struct Head {
    /// The stream they are in, once a block of it at offset 0 is met.
    stream: Option<u16>,
    bytes: Vec<u8>,
    /// The block they begin in.
    lbn: u64,
    /// Read, or found unusable.
    done: bool,
    /// Blocks the records were gathered from.
    blocks: u64,
    /// Why the start could not be used, once found so.
    unusable: Option<String>,
}

/// What a segment's gathered first records are so far.
enum Gathered {
    /// More bytes of the stream are needed.
    More,
    /// The start, and the job key when the job is encrypted; with the
    /// `CopyStart` when the segment is a further copy's.
    Start(
        Box<JobStart>,
        Option<JobKey>,
        Option<Box<tapeloom_format::CopyStart>>,
    ),
    /// Not a start that can be used, and why.
    Unusable(String),
}

impl Head {
    /// Reads the records gathered so far; `more` says whether further bytes of the
    /// stream may still come.
    fn read(&self, more: bool) -> Gathered {
        let mut kind = match self.stream {
            Some(CONTINUATION_STREAM) => Kind::Continuation,
            _ => Kind::JobStart,
        };
        let unusable = |what: String| Gathered::Unusable(what);
        let cut = |kind: Kind, what: &str| match more {
            true => Gathered::More,
            false => unusable(format!("a {kind:?} record cut short in its {what}")),
        };
        let h = match record_at(&self.bytes, 0) {
            None => return cut(kind, "header"),
            Some(Ok(h)) => h,
            Some(Err(e)) => {
                let stream = self.stream.unwrap_or_default();
                return unusable(format!("a block of stream {stream} that begins with {e}"));
            }
        };
        if kind == Kind::Continuation && h.kind == Kind::CopyStart {
            kind = Kind::CopyStart;
        }
        if h.kind != kind {
            return unusable(format!(
                "a {:?} record where a {kind:?} record begins",
                h.kind
            ));
        }
        if h.len > MAX_START_LEN {
            let max = MAX_START_LEN;
            return unusable(format!("a {kind:?} record of {} bytes, over {max}", h.len));
        }
        let end = RECORD_HEADER_LEN + h.len as usize;
        let Some(body) = self.bytes.get(RECORD_HEADER_LEN..end) else {
            return cut(kind, "body");
        };
        let (start, copy) = match kind {
            Kind::CopyStart => match tapeloom_format::CopyStart::decode(body) {
                Ok(c) => (c.start.clone(), Some(Box::new(c))),
                Err(e) => return unusable(format!("a {kind:?} record that does not decode: {e}")),
            },
            _ => match JobStart::decode(body) {
                Ok(s) => (s, None),
                Err(e) => return unusable(format!("a {kind:?} record that does not decode: {e}")),
            },
        };
        if let Err(e) = tapeloom_format::check_block_size(start.block_size as usize) {
            return unusable(format!("a {kind:?} record whose {e}"));
        }
        // The record after it: the job's key in an encrypted job.
        let key = match record_at(&self.bytes, end) {
            None if more => return Gathered::More,
            Some(Ok(k)) if k.kind == Kind::JobKey => {
                let at = end + RECORD_HEADER_LEN;
                match self.bytes.get(at..at.saturating_add(k.len as usize)) {
                    Some(body) => match JobKey::decode(body) {
                        Ok(k) => Some(k),
                        Err(e) => return unusable(format!("a JobKey record: {e}")),
                    },
                    None if more => return Gathered::More,
                    None => return unusable("a JobKey record cut short".into()),
                }
            }
            _ => None,
        };
        Gathered::Start(Box::new(start), key, copy)
    }
}

/// The record header at `at` in `bytes`, when all its bytes are there.
fn record_at(bytes: &[u8], at: usize) -> Option<tapeloom_format::Result<RecordHeader>> {
    let head: [u8; RECORD_HEADER_LEN] = bytes.get(at..at + RECORD_HEADER_LEN)?.try_into().ok()?;
    Some(RecordHeader::decode(&head))
}

impl Segment {
    /// Gathers the segment's start (`JobStart` or `Continuation`, and an encrypted
    /// job's `JobKey`) from its block `h` at `lbn`, which may hold all of it, a part,
    /// or none; the job's data key is unwrapped the first time its `JobKey` is met.
    fn gather(
        &mut self,
        (h, lbn, payload): (&BlockHeader, u64, &[u8]),
        keys: &mut Keys<'_>,
        report: &mut RebuildReport,
    ) -> Result<()> {
        if self.head.done {
            return Ok(());
        }
        match self.head.stream {
            None if h.stream_offset == 0
                && !h.encrypted
                && (h.stream == CONTROL_STREAM || h.stream == CONTINUATION_STREAM) =>
            {
                self.head.stream = Some(h.stream);
                self.head.lbn = lbn;
            }
            Some(s) if s == h.stream => {}
            _ => return Ok(()),
        }
        let follows = h.stream_offset == self.head.bytes.len() as u64 && !h.encrypted;
        if follows {
            self.head.bytes.extend_from_slice(payload);
            self.head.blocks += 1;
        }
        self.settle(follows, h.job_tag, keys, report)
    }

    /// Takes the start when its records are whole, or reports it unusable; `more`
    /// says whether further blocks of its stream may still add to it.
    fn settle(
        &mut self,
        more: bool,
        tag: u64,
        keys: &mut Keys<'_>,
        report: &mut RebuildReport,
    ) -> Result<()> {
        if self.head.done || self.head.stream.is_none() {
            return Ok(());
        }
        match self.head.read(more) {
            Gathered::More => return Ok(()),
            Gathered::Unusable(what) => {
                report.unusable.push(Unusable {
                    barcode: self.volume.barcode.clone(),
                    block: self.head.lbn,
                    what: what.clone(),
                });
                self.head.unusable = Some(what);
            }
            Gathered::Start(s, key, copy) => {
                match copy {
                    // The copy's own segment number is no volume of the job's.
                    Some(copy) => self.copy = Some(*copy),
                    None => {
                        self.seq = Some(s.volume_seq);
                        self.start = Some(*s);
                    }
                }
                // A job found only in a copy (moved) is read through it.
                if let Some(k) = &key {
                    if !keys.jobs.contains_key(&tag) {
                        let job = format!("with tag {tag:016x}");
                        let c = JobCrypt::unwrap(keys.masters, &job, k.clone())?;
                        keys.jobs.insert(tag, c.data);
                    }
                }
                self.job_key = key;
            }
        }
        self.head.done = true;
        self.head.bytes = Vec::new();
        Ok(())
    }
}

/// Segments found on tape, by job tag.
type Segments = BTreeMap<u64, Vec<Segment>>;

/// What a rebuild reads encrypted jobs with: the master keys given, and the data
/// keys of the jobs found so far, by tag.
struct Keys<'a> {
    masters: &'a [MasterKey],
    jobs: HashMap<u64, DataKey>,
}

/// Reads every labelled cartridge and adds the jobs the catalog does not have.
pub fn rebuild(home: &Home) -> Result<RebuildReport> {
    let cat = &home.catalog;
    let mut lib = home.library()?;
    let mut report = RebuildReport::default();
    let mut jobs: Segments = BTreeMap::new();
    let mut buf = vec![0u8; MAX_BLOCK_SIZE];
    let mut keys = Keys {
        masters: &home.keys,
        jobs: HashMap::new(),
    };
    for barcode in lib.inventory()?.barcodes() {
        let (_, mut drive) = mount(&mut lib, &barcode, None)?;
        let label = match read_label(&mut *drive)? {
            Found::Label(l) => l,
            _ => continue,
        };
        report.volumes_scanned += 1;
        let volume = match cat.volume_by_barcode(&barcode)? {
            Some(v) if v.uuid == label.uuid => v,
            Some(_) => {
                return Err(MediaError::RebuildMismatch {
                    barcode: barcode.clone(),
                }
                .into())
            }
            None => {
                report.volumes_added += 1;
                let v = cat.add_volume(
                    &barcode,
                    label.uuid,
                    &label.pool,
                    label.block_size,
                    label.created.as_nanos(),
                )?;
                cat.set_volume_generation(v.id, label.generation)?;
                tapeloom_catalog::Volume {
                    generation: label.generation,
                    ..v
                }
            }
        };
        scan(
            &mut *drive,
            &volume,
            label.uuid,
            &mut buf,
            (&mut jobs, &mut keys),
            &mut report,
        )?;
        drive.unload()?;
        drop(drive);
    }

    let mut copies: Segments = BTreeMap::new();
    let mut moved: Vec<(u64, u16)> = Vec::new();
    for (tag, segs) in jobs.iter_mut() {
        let (copy, mut own): (Vec<Segment>, Vec<Segment>) = std::mem::take(segs)
            .into_iter()
            .partition(|s| s.copy.is_some());
        if own.is_empty() {
            if let Some((copy_no, stands_in)) = promoted(&copy) {
                own = stands_in;
                moved.push((*tag, copy_no));
            }
        }
        *segs = own;
        if !copy.is_empty() {
            copies.insert(*tag, copy);
        }
    }
    jobs.retain(|_, segs| !segs.is_empty());
    add_jobs(home, &mut lib, jobs, &mut report)?;
    add_copies(cat, copies, &mut report)?;
    for (tag, copy_no) in moved {
        let Some(job) = cat.job_by_tag(tag)? else {
            continue;
        };
        let whole = (cat.copies(job.id)?.iter())
            .any(|c| c.copy_no == u32::from(copy_no) && c.state == CopyState::Ok);
        if whole && cat.moved_to(job.id)?.is_none() {
            let now = crate::clock::now()?.as_nanos();
            cat.record_move(job.id, u32::from(copy_no), now)?;
            report.jobs_moved.push((job.id, u32::from(copy_no)));
        }
    }
    Ok(report)
}

/// A job found on tape only in further copies (moved by `migrate` or `repack`,
/// its own cartridges labelled anew): the copy that stands in for its own
/// cartridges (the highest-numbered written to move it, else the highest), and
/// the job's own segments as that copy holds them, in the job's own positions.
/// Each such segment is on the cartridge that holds its first object, as the
/// catalog records a moved job's segments.
fn promoted(copies: &[Segment]) -> Option<(u16, Vec<Segment>)> {
    let numbers = || copies.iter().filter_map(|s| s.copy.as_ref());
    let pick = (numbers().filter(|c| c.moving).map(|c| c.copy_no).max())
        .or_else(|| numbers().map(|c| c.copy_no).max())?;
    let mut by_seq: BTreeMap<u32, Segment> = BTreeMap::new();
    for s in copies {
        let Some(c) = s.copy.as_ref().filter(|c| c.copy_no == pick) else {
            continue;
        };
        // The copy's LBN of its first copied object, and how a copy LBN maps.
        let base = s.first_lbn + s.head.blocks;
        let to = |lbn: u64| c.orig_lbn.saturating_add(lbn.saturating_sub(base));
        let (first, last) = (c.orig_lbn, to(s.last_lbn));
        let e = by_seq.entry(c.orig_seq).or_insert_with(|| Segment {
            volume: s.volume.clone(),
            seq: Some(c.orig_seq),
            first_lbn: first,
            last_lbn: last,
            start: Some(tapeloom_format::JobStart {
                volume_seq: c.orig_seq,
                ..c.start.clone()
            }),
            job_key: s.job_key.clone(),
            head: Head {
                done: true,
                ..Head::default()
            },
            control: Vec::new(),
            streams: BTreeSet::new(),
            landed: Vec::new(),
            copy: None,
            longest: s.longest,
        });
        if first < e.first_lbn {
            e.first_lbn = first;
            e.volume = s.volume.clone();
        }
        e.last_lbn = e.last_lbn.max(last);
        (e.control).extend(s.control.iter().map(|(o, l, p)| (*o, to(*l), p.clone())));
        (e.landed).extend(s.landed.iter().map(|(st, o, l)| (*st, *o, to(*l))));
        e.streams.extend(s.streams.iter().copied());
    }
    let mut out: Vec<Segment> = by_seq.into_values().collect();
    for e in &mut out {
        e.control.sort_by_key(|c| c.1);
        e.landed.sort_by_key(|l| l.2);
    }
    Some((pick, out))
}

/// Whether the copy's segments `cs` hold every object of the job's own segment
/// `v`, from its first to its last.
fn covered(v: &tapeloom_catalog::JobVolume, cs: &[tapeloom_catalog::CopySegment]) -> bool {
    let last = v.last_lbn.unwrap_or(v.first_lbn);
    let mut pieces: Vec<&tapeloom_catalog::CopySegment> =
        cs.iter().filter(|c| c.orig_seq == v.seq).collect();
    pieces.sort_by_key(|c| c.orig_first_lbn);
    let mut next = v.first_lbn;
    for c in pieces {
        if c.orig_first_lbn <= next {
            next = next.max(c.orig_first_lbn.saturating_add(c.objects.unwrap_or(0)));
        }
    }
    next > last
}

/// Records the further copies found on tape of the jobs the catalog has (and
/// that it does not know yet): a copy whose segments hold every object of the
/// job's own segments is whole (`ok`); one cut short (its writing stopped) is
/// recorded `retired`, so that no restore reads it.
fn add_copies(cat: &Catalog, copies: Segments, report: &mut RebuildReport) -> Result<()> {
    for (tag, segs) in copies {
        let Some(job) = cat.job_by_tag(tag)? else {
            for s in &segs {
                report.unusable.push(Unusable {
                    barcode: s.volume.barcode.clone(),
                    block: s.first_lbn,
                    what: format!(
                        "a segment of a copy of job {tag:016x}, whose own cartridges were not read"
                    ),
                });
            }
            continue;
        };
        let own = cat.job_volumes(job.id)?;
        let mut by_copy: BTreeMap<u16, Vec<tapeloom_catalog::CopySegment>> = BTreeMap::new();
        let mut pools: HashMap<u16, String> = HashMap::new();
        for s in &segs {
            let Some(c) = &s.copy else { continue };
            let first_lbn = s.first_lbn + s.head.blocks;
            by_copy
                .entry(c.copy_no)
                .or_default()
                .push(tapeloom_catalog::CopySegment {
                    seq: c.start.volume_seq,
                    volume_id: s.volume.id,
                    first_lbn,
                    orig_seq: c.orig_seq,
                    orig_first_lbn: c.orig_lbn,
                    objects: Some((s.last_lbn + 1).saturating_sub(first_lbn)),
                });
            pools
                .entry(c.copy_no)
                .or_insert_with(|| s.volume.pool.clone());
        }
        for (copy_no, mut cs) in by_copy {
            let copy_no = u32::from(copy_no);
            if cat.has_copy(job.id, copy_no)? {
                continue;
            }
            cs.sort_by_key(|c| c.seq);
            let whole = own.iter().all(|v| covered(v, &cs));
            let state = match whole {
                true => CopyState::Ok,
                false => CopyState::Retired,
            };
            let pool = pools.get(&(copy_no as u16)).cloned().unwrap_or_default();
            let now = crate::clock::now()?.as_nanos();
            cat.record_copy(job.id, copy_no, &pool, state, now)?;
            for c in &cs {
                cat.add_copy_segment(job.id, copy_no, c)?;
            }
            report.copies_added.push((job.id, copy_no));
        }
    }
    Ok(())
}

/// Adds the jobs found on tape that the catalog lacks, oldest first (a job's base
/// before it), then records each one's place in its set.
fn add_jobs(
    home: &Home,
    lib: &mut crate::home::Library,
    jobs: Segments,
    report: &mut RebuildReport,
) -> Result<()> {
    let cat = &home.catalog;
    let mut sets = Vec::new();
    for (tag, segs) in base_first(jobs) {
        let existing = match cat.job_by_tag(tag)? {
            Some(j) if unfinished_rebuild(cat, &j)? => Some(j.id),
            Some(_) => {
                report.jobs_known += 1;
                continue;
            }
            None => None,
        };
        if segs.iter().all(|s| s.start.is_none()) {
            salvage(home, lib, (tag, segs), existing, report)?;
            continue;
        }
        let Some(added) = add_job(cat, tag, segs, existing, report)? else {
            continue;
        };
        if let Some(set) = added.set {
            sets.push((added.id, set));
        }
        if added.unended {
            let r = crate::recover::recover_with(cat, lib, &home.keys, added.id)?;
            report.files_added += r.files_added;
            report.jobs_recovered.push(added.id);
        }
    }
    // Bases are resolved once every job is in: a base is found by its tag, whether
    // this rebuild added it or the catalog had it.
    for (id, set) in sets {
        let base = match set.base {
            0 => None,
            tag => match cat.job_by_tag(tag)? {
                Some(b) => Some(b.id),
                None => {
                    report.bases_missing.push(id);
                    Some(MISSING_BASE)
                }
            },
        };
        cat.set_job_set(id, &set.set, set.level, base)?;
    }
    Ok(())
}

/// The base recorded for a job whose base is on no cartridge read: no job has this
/// id, so the job's chain is broken, as when its base was forgotten, and a backup
/// of its set runs as a full rather than trust a partial tree.
const MISSING_BASE: i64 = 0;

/// The jobs in the order they are added: by start time, but each job's base (named
/// by tag in its `JobStart`) before it whatever the times say, so that bases keep
/// smaller ids than the jobs relative to them.
fn base_first(jobs: Segments) -> Vec<(u64, Vec<Segment>)> {
    let start = |segs: &[Segment]| segs.iter().find_map(|s| s.start.clone());
    let mut order: Vec<(i64, u64, u64)> = jobs
        .iter()
        .map(|(tag, segs)| {
            let st = start(segs);
            let started = st
                .as_ref()
                .map(|j| j.started.as_nanos())
                .unwrap_or_default();
            let base = st.and_then(|j| j.set).map_or(0, |s| s.base);
            (started, *tag, base)
        })
        .collect();
    order.sort();
    let base_of: HashMap<u64, u64> = order.iter().map(|&(_, t, b)| (t, b)).collect();
    let mut jobs = jobs;
    let mut out = Vec::with_capacity(order.len());
    for (_, tag, _) in order {
        // The chain of bases not yet placed, newest first; placed oldest first.
        let mut chain = vec![tag];
        let mut at = tag;
        while let Some(&b) = base_of.get(&at) {
            if b == 0 || !jobs.contains_key(&b) || chain.contains(&b) {
                break;
            }
            chain.push(b);
            at = b;
        }
        for t in chain.into_iter().rev() {
            if let Some(segs) = jobs.remove(&t) {
                out.push((t, segs));
            }
        }
    }
    out
}

/// Reads a labelled cartridge from its first data block to the end of data, and
/// gathers each job's segment on it: where it starts and ends, its start or
/// continuation record, and its control stream.
fn scan(
    drive: &mut dyn tapeloom_device::TapeDrive,
    volume: &Volume,
    uuid: [u8; 16],
    buf: &mut [u8],
    (jobs, keys): (&mut Segments, &mut Keys<'_>),
    report: &mut RebuildReport,
) -> Result<()> {
    let mut opened = Vec::new();
    drive.locate(2)?;
    let mut scan = Scan { lbn: 2, uuid };
    let mut open: Option<(u64, Segment)> = None;
    loop {
        let (this, h, n) = match scan.next(drive, buf)? {
            Scanned::Block { lbn, header, len } => (lbn, header, len),
            // A filemark may lie inside a segment (every --segment-size): the
            // segment goes on while the blocks after it carry the same job tag.
            Scanned::Filemark => continue,
            Scanned::End => break,
            Scanned::Bad => {
                report.bad_blocks += 1;
                continue;
            }
        };
        // A copy segment's `CopyStart` begins a segment, even right after another
        // segment of the same job (two copies of it on one cartridge).
        let copy_head = h.stream == CONTINUATION_STREAM
            && h.stream_offset == 0
            && !h.encrypted
            && matches!(record_at(h.payload(&buf[..n]), 0), Some(Ok(r)) if r.kind == Kind::CopyStart);
        if open
            .as_ref()
            .is_some_and(|(tag, _)| *tag != h.job_tag || copy_head)
        {
            // An incomplete segment (no filemark) followed by the next job.
            if let Some((tag, mut seg)) = open.take() {
                seg.settle(false, tag, keys, report)?;
                jobs.entry(tag).or_default().push(seg);
            }
        }
        let (_, seg) = open.get_or_insert_with(|| {
            (
                h.job_tag,
                Segment {
                    volume: volume.clone(),
                    seq: None,
                    first_lbn: this,
                    last_lbn: this,
                    start: None,
                    job_key: None,
                    head: Head::default(),
                    control: Vec::new(),
                    streams: BTreeSet::new(),
                    landed: Vec::new(),
                    copy: None,
                    longest: 0,
                },
            )
        });
        seg.last_lbn = this;
        seg.longest = seg.longest.max(n);
        let payload = h.payload(&buf[..n]);
        seg.gather((&h, this, payload), keys, report)?;
        if h.stream != CONTROL_STREAM && h.stream != CONTINUATION_STREAM {
            seg.landed.push((h.stream, h.stream_offset, this));
        }
        let payload = if h.encrypted {
            // Only stream 0 is needed here; a block whose tag fails is bad.
            if h.stream != CONTROL_STREAM {
                &[][..]
            } else {
                match open_block(&h, &buf[..n], keys.jobs.get(&h.job_tag), &mut opened) {
                    Ok(()) => h.payload(&opened),
                    Err(_) => {
                        report.bad_blocks += 1;
                        continue;
                    }
                }
            }
        } else {
            payload
        };
        if h.stream != CONTINUATION_STREAM {
            seg.streams.insert(h.stream);
        }
        if h.stream == CONTROL_STREAM {
            seg.control.push((h.stream_offset, this, payload.to_vec()));
        }
    }
    if let Some((tag, mut seg)) = open.take() {
        seg.settle(false, tag, keys, report)?;
        jobs.entry(tag).or_default().push(seg);
    }
    Ok(())
}

/// Whether a job the catalog has is one a rebuild stopped adding (its process died
/// before the job's end was recorded): `failed`, with no chunks left on a stage for
/// `stage resume` to finish. A rebuild fills it in.
fn unfinished_rebuild(cat: &Catalog, j: &tapeloom_catalog::Job) -> Result<bool> {
    if j.status != JobState::Failed {
        return Ok(false);
    }
    let staged = cat.staged_chunks(&tapeloom_catalog::ChunkFilter {
        job: Some(j.id),
        state: Some(tapeloom_catalog::ChunkState::Spooled),
        ..Default::default()
    })?;
    Ok(staged.is_empty())
}

/// A job a rebuild added.
struct Added {
    id: i64,
    /// Its set, level and base tag, from its `JobStart` (none from writers before
    /// version 4: the job is then its own set, a full).
    set: Option<SetInfo>,
    /// It has no `JobEnd`: its entries are to be recovered from its data streams.
    unended: bool,
}

/// Adds one job found on tape to the catalog, from its segments, index and end (or
/// fills in `existing`, the same job recorded in part).
fn add_job(
    cat: &Catalog,
    tag: u64,
    mut segs: Vec<Segment>,
    existing: Option<i64>,
    report: &mut RebuildReport,
) -> Result<Option<Added>> {
    let Some(start) = segs.iter().find_map(|s| s.start.clone()) else {
        // Its start is unusable (reported where it was met) or on no cartridge read.
        if let Some(s) = segs.iter().find(|s| !s.head.done) {
            report.unusable.push(Unusable {
                barcode: s.volume.barcode.clone(),
                block: s.first_lbn,
                what: format!("blocks of job {tag:016x}, whose start is on no cartridge read"),
            });
        }
        return Ok(None);
    };
    segs.retain(|s| s.seq.is_some());
    segs.sort_by_key(|s| s.seq);
    let (index, end) = decode_control(&segs, report);
    let streams: Vec<Stream> = start
        .streams
        .iter()
        .map(|s| Stream {
            stream: s.id,
            name: s.name.clone(),
            source: s.source.clone(),
        })
        .collect();
    let id = match existing {
        Some(id) => id,
        None => cat.begin_job(
            tag,
            &start.name,
            start.started.as_nanos(),
            start.block_size,
            &streams,
        )?,
    };
    if let Some(k) = segs.iter().find_map(|s| s.job_key.as_ref()) {
        cat.set_job_key(id, &k.fingerprint.to_string(), &k.encode())?;
    }
    if !start.client.is_empty() {
        cat.set_job_client(id, &start.client)?;
    }
    add_segments(cat, id, &segs, existing.is_some())?;
    add_extents(cat, id, &segs)?;
    let (added, all) = add_index(cat, id, index, existing.is_some())?;
    let bytes: u64 = all
        .iter()
        .filter(|r| r.has_data())
        .fold(0u64, |a, r| a.saturating_add(r.size));
    let (status, ended) = match &end {
        Some(e) => (JobState::from(e.status), e.ended),
        None => (JobState::Failed, start.started),
    };
    // Both times come from tape: any two, however far apart, give a duration.
    let seconds = ended
        .as_nanos()
        .saturating_sub(start.started.as_nanos())
        .max(0) as f64
        / 1e9;
    cat.finish_job(
        id,
        status,
        all.len() as u64,
        bytes,
        seconds,
        ended.as_nanos(),
    )?;
    report.files_added += added;
    report.jobs_added.push(id);
    Ok(Some(Added {
        id,
        set: start.set,
        unended: end.is_none(),
    }))
}

/// Records the extents of a job's data streams, formed as the writer forms them
/// from where its blocks landed (a job without an end gets its own from
/// `recover`).
fn add_extents(cat: &Catalog, id: i64, segs: &[Segment]) -> Result<()> {
    let mut extents = crate::backup::mux::Extents::default();
    for s in segs {
        let seq = s.seq.unwrap_or_default();
        for &(stream, offset, lbn) in &s.landed {
            extents.landed(stream, offset, seq, lbn);
        }
    }
    extents.finish();
    cat.replace_extents(id, &extents.closed)?;
    Ok(())
}

/// Adds a job whose start could not be used (or is on no cartridge read) from
/// its blocks alone, as Bacula's `bextract` reads files without the job's
/// records; the job is `salvaged`. What its start would have said is taken from
/// the blocks: the block size is that of its longest block (blocks of stream 0
/// are never compressed), its streams are those its blocks name, each named by
/// its number, and its segments are ordered by their first stream 0 block, then
/// by the stream offsets they begin at. When stream 0 still holds the job's
/// index and `JobEnd` (the start's own bytes were damaged, not the records
/// after it), the index gives the files; else they are read from the data
/// streams, as `catalog recover` reads them. The start was reported where it
/// was met; a job with no data block is not added.
fn salvage(
    home: &Home,
    lib: &mut crate::home::Library,
    (tag, mut segs): (u64, Vec<Segment>),
    existing: Option<i64>,
    report: &mut RebuildReport,
) -> Result<()> {
    let cat = &home.catalog;
    let met = segs.iter().find_map(|s| {
        let what = s.head.unusable.as_ref()?;
        Some(format!("{} block {}: {what}", s.volume.barcode, s.head.lbn))
    });
    let met = match met {
        Some(m) => m,
        None => {
            let s = segs.iter().find(|s| !s.head.done);
            let Some(s) = s else { return Ok(()) };
            report.unusable.push(Unusable {
                barcode: s.volume.barcode.clone(),
                block: s.first_lbn,
                what: format!("blocks of job {tag:016x}, whose start is on no cartridge read"),
            });
            format!(
                "{} block {}: on no cartridge read",
                s.volume.barcode, s.first_lbn
            )
        }
    };
    if segs.iter().all(|s| s.landed.is_empty()) {
        return Ok(());
    }
    segs.sort_by_cached_key(|s| {
        let first = s.landed.iter().map(|l| l.1).min().unwrap_or(u64::MAX);
        let opens = s.head.stream == Some(CONTROL_STREAM);
        (!opens, first, s.volume.barcode.clone(), s.first_lbn)
    });
    for (seq, s) in (0u32..).zip(segs.iter_mut()) {
        s.seq = Some(seq);
    }
    let longest = segs.iter().map(|s| s.longest).max().unwrap_or(0);
    let block_size = longest
        .next_multiple_of(4096)
        .clamp(MIN_BLOCK_SIZE, MAX_BLOCK_SIZE);
    let ids: BTreeSet<u16> = (segs.iter())
        .flat_map(|s| s.landed.iter().map(|l| l.0))
        .collect();
    let streams: Vec<Stream> = (ids.into_iter())
        .map(|id| Stream {
            stream: id,
            name: id.to_string(),
            source: Vec::new(),
        })
        .collect();
    // The damaged start is at the head of stream 0: what it does to the
    // decoder was reported already.
    let (index, end) = decode_control(&segs, &mut RebuildReport::default());
    let now = crate::clock::now()?.as_nanos();
    let ended = end.as_ref().map_or(now, |e| e.ended.as_nanos());
    let id = match existing {
        Some(id) => id,
        None => {
            let name = format!("salvaged {tag:016x}");
            cat.begin_job(tag, &name, ended, block_size as u32, &streams)?
        }
    };
    add_segments(cat, id, &segs, existing.is_some())?;
    add_extents(cat, id, &segs)?;
    let how = match end {
        Some(_) => "from its index",
        None => "from its data streams",
    };
    let why = format!(
        "its start record could not be used ({met}); its files were salvaged {how}, \
         its blocks read as {block_size} bytes long"
    );
    if end.is_some() {
        let (added, all) = add_index(cat, id, index, existing.is_some())?;
        let bytes =
            (all.iter().filter(|r| r.has_data())).fold(0u64, |a, r| a.saturating_add(r.size));
        cat.finish_job(id, JobState::Salvaged, all.len() as u64, bytes, 0.0, ended)?;
        if !cat.job_reasons(id)?.contains(&why) {
            cat.add_error(id, b"", &why)?;
        }
        report.files_added += added;
    } else {
        cat.finish_job(id, JobState::Failed, 0, 0, 0.0, ended)?;
        let salvaged = (JobState::Salvaged, (&b""[..], why.as_str()));
        let r = crate::recover::read_entries(cat, lib, &home.keys, id, salvaged)?;
        report.files_added += r.files_added;
    }
    report.jobs_salvaged.push(id);
    Ok(())
}

/// Records a job's segments, each in the chain inferred from the streams it holds.
fn add_segments(cat: &Catalog, id: i64, segs: &[Segment], existing: bool) -> Result<()> {
    let chains = crate::restore::chains::group(
        segs.iter().filter_map(|s| s.seq),
        segs.iter()
            .filter_map(|s| s.seq.map(|q| (q, &s.streams)))
            .flat_map(|(q, st)| st.iter().map(move |&x| (q, x))),
    );
    for s in segs {
        let seq = s.seq.unwrap_or_default();
        let chain = chains.get(&seq).copied().unwrap_or(seq);
        match cat.add_job_volume(id, seq, chain, s.volume.id, s.first_lbn) {
            Err(tapeloom_catalog::CatalogError::SegmentExists { .. }) if existing => {}
            r => r?,
        }
        cat.end_job_volume(id, seq, s.last_lbn)?;
    }
    Ok(())
}

/// Records a job's index: a row per entry on tape (those the catalog lacks, when it
/// has the job in part), and the paths the job found deleted, which have no record
/// on tape and no row. Returns the number of rows added and all the job's rows.
fn add_index(
    cat: &Catalog,
    id: i64,
    index: Vec<IndexEntry>,
    existing: bool,
) -> Result<(u64, Vec<FileRow>)> {
    let have: HashSet<Vec<u8>> = match existing {
        true => cat.files(id, None)?.into_iter().map(|r| r.path).collect(),
        false => HashSet::new(),
    };
    let (deleted, entries): (Vec<IndexEntry>, Vec<IndexEntry>) =
        index.into_iter().partition(|e| e.deleted);
    let gone: Vec<(Vec<u8>, u8)> = deleted
        .into_iter()
        .map(|e| (e.path, e.kind as u8))
        .collect();
    cat.add_deletions(id, &gone)?;
    let rows: Vec<FileRow> = entries
        .iter()
        .map(file_row)
        .filter(|r| !have.contains(&r.path))
        .collect();
    for chunk in rows.chunks(4096) {
        cat.add_files(id, chunk)?;
    }
    let added = rows.len() as u64;
    let all = match existing {
        true => cat.files(id, None)?,
        false => rows,
    };
    Ok((added, all))
}

/// A catalog row from an index entry on tape (owners are not in the index).
fn file_row(e: &IndexEntry) -> FileRow {
    FileRow {
        path: e.path.clone(),
        stream: e.stream,
        kind: e.kind as u8,
        mode: e.mode,
        uid: e.facts.map_or(0, |f| f.uid),
        gid: e.facts.map_or(0, |f| f.gid),
        size: e.size,
        mtime_ns: e.mtime.as_nanos(),
        start_seq: e.start.volume_seq,
        start_lbn: e.start.lbn,
        start_off: e.start.offset,
        end_seq: e.end.volume_seq,
        end_lbn: e.end.lbn,
        crc: e.crc,
        link: e.link.clone(),
        ctime_ns: e.facts.map_or(0, |f| f.ctime.as_nanos()),
        ino: e.facts.map_or(0, |f| f.ino),
        meta_only: e.meta_only,
    }
}

/// Decodes a job's stream 0 across its segments: the index entries and `JobEnd`.
/// A record that does not decode ends the index there, and is reported with the
/// block it was read from.
fn decode_control(
    segs: &[Segment],
    report: &mut RebuildReport,
) -> (Vec<IndexEntry>, Option<JobEnd>) {
    let mut dec = RecordDecoder::new();
    let mut index = Vec::new();
    let mut end = None;
    let mut next = 0u64;
    'outer: for s in segs {
        for (off, lbn, payload) in &s.control {
            if *off != next {
                // A gap (bad block): the index cannot be trusted past it.
                break 'outer;
            }
            next = off + payload.len() as u64;
            let r = dec.feed::<FormatError>(payload, &mut |ev| {
                if let Event::Record { kind, body } = ev {
                    match kind {
                        Kind::Index => index.extend(IndexEntry::decode_chunk(body)?),
                        Kind::JobEnd => end = Some(JobEnd::decode(body)?),
                        _ => {}
                    }
                }
                Ok(())
            });
            if let Err(e) = r {
                report.unusable.push(Unusable {
                    barcode: s.volume.barcode.clone(),
                    block: *lbn,
                    what: format!("a record of the job's control stream: {e}"),
                });
                break 'outer;
            }
        }
    }
    (index, end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tapeloom_format::{Level, Timestamp};

    /// A job's one segment, started at `secs`, relative to `base` (0: a full).
    fn job(secs: i64, base: u64) -> Vec<Segment> {
        let set = SetInfo {
            set: "s".into(),
            level: if base == 0 {
                Level::Full
            } else {
                Level::Incremental
            },
            base,
            pool: "default".into(),
        };
        let start = JobStart {
            job_tag: 0,
            started: Timestamp { secs, nanos: 0 },
            block_size: 65536,
            volume_seq: 0,
            name: "s".into(),
            host: String::new(),
            streams: Vec::new(),
            set: Some(set),
            client: String::new(),
        };
        let volume = Volume {
            id: 1,
            barcode: "TL0001L9".into(),
            uuid: [0; 16],
            pool: "default".into(),
            block_size: 65536,
            status: tapeloom_catalog::VolumeState::Append,
            generation: 0,
        };
        vec![Segment {
            volume,
            seq: Some(0),
            first_lbn: 2,
            last_lbn: 2,
            start: Some(start),
            job_key: None,
            head: Head::default(),
            control: Vec::new(),
            streams: BTreeSet::new(),
            landed: Vec::new(),
            copy: None,
            longest: 65536,
        }]
    }

    #[test]
    fn bases_come_before_the_jobs_relative_to_them_whatever_the_clock_said() {
        // Job 30 is relative to 20, which is relative to 10; 20's clock ran behind
        // (it says it started first) and 10's ahead. Job 40 stands alone.
        let jobs: Segments = [
            (10, job(300, 0)),
            (20, job(100, 10)),
            (30, job(400, 20)),
            (40, job(200, 0)),
        ]
        .into_iter()
        .collect();
        let order: Vec<u64> = base_first(jobs).into_iter().map(|(t, _)| t).collect();
        assert_eq!(order, vec![10, 20, 40, 30]);
        // A base that is not among the jobs, and a loop of bases, end the walk.
        let jobs: Segments = [(1, job(5, 99)), (2, job(1, 3)), (3, job(2, 2))]
            .into_iter()
            .collect();
        let order: Vec<u64> = base_first(jobs).into_iter().map(|(t, _)| t).collect();
        assert_eq!(order, vec![3, 2, 1]);
    }
}
