//! Verify: read every block of a job, check block CRCs and every file's checksum.

use crate::error::Result;
use crate::home::Home;
use crate::media::reader::CopyMap;
use crate::media::reader::{Got, JobReader, Sink, Streams};
use crate::restore::Expect;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::Instant;
use tapeloom_format::{Entry, Event, FileEnd, FileStatus, Kind};

/// What a verify found.
#[derive(Debug, Clone, Default)]
pub struct VerifyReport {
    /// True when every block and every file checked out.
    pub ok: bool,
    /// Blocks read and checked.
    pub blocks_checked: u64,
    /// Bad blocks: (barcode, logical block).
    pub bad_blocks: Vec<(String, u64)>,
    /// Entries whose checksums matched.
    pub files_checked: u64,
    /// Paths of the entries that are damaged.
    pub files_affected: Vec<String>,
    /// Entries the catalog lists that were not found on tape.
    pub files_missing: u64,
    /// Bytes read from tape.
    pub bytes_read_from_tape: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
}

/// A file whose data is being checked.
struct Open {
    path: Vec<u8>,
    crc: u32,
    /// Bytes of its `Data` record taken so far.
    stored: u64,
    /// Bytes its entry says its `Data` record holds.
    due: u64,
}

/// Checks each entry of the records it is fed: a file's data against the length
/// its entry gives and the checksum of its `FileEnd`, every entry against what
/// the catalog lists of it (when it is known), the others by being there. Fed by
/// a local verify's reader, or by [`crate::BlockVerify`] with blocks read
/// elsewhere.
pub(crate) struct Checker {
    open: HashMap<u16, Open>,
    /// Paths of the damaged entries.
    pub(crate) affected: BTreeSet<Vec<u8>>,
    /// Entries the job left out ([`crate::restore::plan::left_out`]): not checked.
    pub(crate) left_out: HashSet<Vec<u8>>,
    /// What the catalog lists of the job's entries, by path (empty when not
    /// known): an entry met otherwise is damaged.
    pub(crate) expected: HashMap<Vec<u8>, Expect>,
    good: u64,
    seen: u64,
}

impl Checker {
    /// A checker that leaves out the entries in `left_out`.
    pub(crate) fn new(left_out: HashSet<Vec<u8>>) -> Self {
        Checker {
            open: HashMap::new(),
            affected: BTreeSet::new(),
            left_out,
            expected: HashMap::new(),
            good: 0,
            seen: 0,
        }
    }

    /// Puts the entries' figures in `report`, the catalog listing `expected`
    /// entries, and whether all is well.
    pub(crate) fn report(&self, expected: u64, report: &mut VerifyReport) {
        report.files_checked = self.good;
        report.files_missing = expected.saturating_sub(self.seen);
        report.files_affected = (self.affected.iter())
            .map(|p| crate::display_path(p))
            .collect();
        report.ok = report.bad_blocks.is_empty()
            && report.files_affected.is_empty()
            && report.files_missing == 0;
    }
}

impl Sink for Checker {
    fn event(&mut self, stream: u16, ev: Event<'_>, _at: (u32, u64)) -> Result<()> {
        match ev {
            Event::Record {
                kind: Kind::Entry,
                body,
            } => {
                if let Some(o) = self.open.remove(&stream) {
                    self.affected.insert(o.path);
                }
                match Entry::decode(body) {
                    Ok(e) if self.left_out.contains(&e.path) => {}
                    Ok(e) => {
                        self.seen += 1;
                        let listed = self.expected.remove(&e.path);
                        if listed.is_some_and(|x| x.differs(&e).is_some()) {
                            self.affected.insert(e.path.clone());
                        }
                        if e.has_data() {
                            let due = e.stored_len();
                            let (path, crc, stored) = (e.path, 0, 0);
                            let o = Open {
                                path,
                                crc,
                                stored,
                                due,
                            };
                            self.open.insert(stream, o);
                        } else if !self.affected.contains(&e.path) {
                            self.good += 1;
                        }
                    }
                    Err(e) => self.lost(stream, &e.to_string()),
                }
            }
            Event::Data(d) => {
                if let Some(o) = self.open.get_mut(&stream) {
                    o.crc = crc32c::crc32c_append(o.crc, d);
                    o.stored = o.stored.saturating_add(d.len() as u64);
                }
            }
            Event::Record {
                kind: Kind::FileEnd,
                body,
            } => {
                if let Some(o) = self.open.remove(&stream) {
                    match FileEnd::decode(body) {
                        // Data of another length than its entry gives is damaged,
                        // whatever its checksum.
                        _ if o.stored != o.due => {
                            self.affected.insert(o.path);
                        }
                        _ if self.affected.contains(&o.path) => {}
                        Ok(fe) if fe.crc == o.crc && fe.status == FileStatus::Ok => self.good += 1,
                        // Stored as read, with a warning at backup: the tape holds what
                        // the backup saw, and the checksum proves it.
                        Ok(fe) if fe.crc == o.crc => self.good += 1,
                        _ => {
                            self.affected.insert(o.path);
                        }
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn lost(&mut self, stream: u16, _why: &str) {
        if let Some(o) = self.open.remove(&stream) {
            self.affected.insert(o.path);
        }
    }
}

/// Verifies job `job_id`.
pub fn verify(home: &Home, job_id: i64, drive: Option<usize>) -> Result<VerifyReport> {
    verify_as(home, job_id, drive, "verify")
}

/// [`verify`], recorded with the job as run `how` (`verify` by hand, `schedule
/// NAME` on a schedule): the job's last read-back (`jobs` shows it). Each
/// cartridge a bad block was found on is marked suspect, with a note saying
/// which job found how many, so that it is read no more than it must and its jobs
/// are copied elsewhere.
pub fn verify_as(
    home: &Home,
    job_id: i64,
    drive: Option<usize>,
    how: &str,
) -> Result<VerifyReport> {
    verify_copy_as(home, (job_id, None), drive, how)
}

/// [`verify_as`] of copy `copy` of the job (`None` or 1: its own cartridges; a
/// further copy must be whole). A bad block marks the copy's cartridge suspect.
pub fn verify_copy_as(
    home: &Home,
    (job_id, copy): (i64, Option<u32>),
    drive: Option<usize>,
    how: &str,
) -> Result<VerifyReport> {
    let cat = &home.catalog;
    let map = match copy.filter(|n| *n > 1) {
        Some(n) => Some(CopyMap::load(cat, job_id, n)?),
        // A job moved off its own cartridges: the copy that stands in for them.
        None => (cat.moved_to(job_id)?)
            .map(|n| CopyMap::load(cat, job_id, n))
            .transpose()?,
    };
    let report = read_back(home, (job_id, map), drive)?;
    // A home on a read-only file system is read back without a record of it.
    if home.is_read_only() {
        return Ok(report);
    }
    let now = crate::clock::now()?.as_nanos();
    cat.record_verify(&tapeloom_catalog::LastVerify {
        job_id,
        at_ns: now,
        ok: report.ok,
        blocks: report.blocks_checked,
        bad_blocks: report.bad_blocks.len() as u64,
        how: how.to_string(),
    })?;
    let mut bad: BTreeMap<&str, u64> = BTreeMap::new();
    for (barcode, _) in &report.bad_blocks {
        *bad.entry(barcode.as_str()).or_default() += 1;
    }
    for (barcode, n) in bad {
        if let Some(v) = cat.volume_by_barcode(barcode)? {
            cat.set_volume_status(v.id, tapeloom_catalog::VolumeState::Suspect)?;
            let note = format!("verify of job {job_id} found {n} bad blocks on it");
            cat.add_volume_note(v.id, now, &note)?;
        }
    }
    Ok(report)
}

/// The finished jobs of `pool` (by the pool of their first cartridge) to read
/// back at `now_ns`: those not read back within `older_than` (every one without
/// it); and those left alone, read back lately. Job ids, oldest first.
pub fn read_back_due(
    cat: &tapeloom_catalog::Catalog,
    pool: &str,
    older_than: Option<std::time::Duration>,
    now_ns: i64,
) -> Result<(Vec<i64>, Vec<i64>)> {
    let since =
        older_than.map(|d| now_ns.saturating_sub(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)));
    let (mut due, mut recent) = (Vec::new(), Vec::new());
    for j in cat.jobs()? {
        let done = matches!(
            j.status,
            tapeloom_catalog::JobState::Ok | tapeloom_catalog::JobState::Partial
        );
        let vols = cat.job_volumes(j.id)?;
        if !done || vols.first().is_none_or(|v| v.volume.pool != pool) {
            continue;
        }
        let last = cat.last_verify(j.id)?;
        match (since, last) {
            (Some(since), Some(l)) if l.at_ns > since => recent.push(j.id),
            _ => due.push(j.id),
        }
    }
    Ok((due, recent))
}

/// Reads copy `copy_no` of job `job_id` back whole, a copy a move wrote and
/// has not made the job's place yet (state `writing`) included, and checks every
/// block and file. Nothing is recorded: the move decides.
pub(crate) fn read_back_new_copy(
    home: &Home,
    (job_id, copy_no): (i64, u32),
    drive: Option<usize>,
) -> Result<VerifyReport> {
    use tapeloom_catalog::CopyState;
    let states = [CopyState::Writing, CopyState::Ok];
    let map = CopyMap::load_in(&home.catalog, job_id, copy_no, &states)?;
    read_back(home, (job_id, Some(map)), drive)
}

/// Reads job `job_id` back whole, from the copy `copy` maps (else its own
/// cartridges), and checks every block and file.
fn read_back(
    home: &Home,
    (job_id, copy): (i64, Option<CopyMap>),
    drive: Option<usize>,
) -> Result<VerifyReport> {
    let t0 = Instant::now();
    let cat = &home.catalog;
    let (mut reader, vols) = JobReader::open(home, job_id, drive)?;
    let via_copy = copy.is_some();
    if let Some(map) = copy {
        reader.set_copies(Some(map), Vec::new());
    }
    reader.seek(vols[0].seq, vols[0].first_lbn)?;
    let mut streams = Streams::default();
    let mut ck = Checker::new(crate::restore::plan::left_out(cat, job_id)?);
    ck.expected = crate::restore::plan::expected(cat, job_id, &[], true)?;
    let expected = ck.expected.len() as u64;
    let mut report = VerifyReport::default();
    loop {
        match reader.next()? {
            Got::End => break,
            Got::Bad { seq, lbn, .. } => {
                // The cartridge it was read from (a copy's, when a copy is read)
                // and its place there.
                let (barcode, at) = match reader.mounted_barcode() {
                    Some(b) if via_copy => (b, reader.last_place()),
                    _ => (
                        (vols.iter().find(|v| v.seq == seq))
                            .map(|v| v.volume.barcode.clone())
                            .unwrap_or_default(),
                        lbn,
                    ),
                };
                report.bad_blocks.push((barcode, at));
                for p in cat.files_in_block(job_id, seq, lbn)? {
                    ck.affected.insert(p);
                }
            }
            Got::Block { seq, lbn, header } => {
                // The block as read is opened: header and plain payload (an
                // encrypted one's tail is not there to leave off).
                let clear = tapeloom_format::BlockHeader {
                    compressed: false,
                    encrypted: false,
                    ..header
                };
                let block = reader.block();
                streams.feed(&header, clear.payload(block), (seq, lbn), None, &mut ck)?;
            }
        }
    }
    streams.finish(&mut ck);
    report.blocks_checked = reader.blocks_read;
    report.bytes_read_from_tape = reader.bytes_read;
    ck.report(expected, &mut report);
    report.seconds = t0.elapsed().as_secs_f64();
    Ok(report)
}
