//! Verify: read every block of a job, check block CRCs and every file's checksum.

use crate::error::Result;
use crate::home::Home;
use crate::media::reader::{Got, JobReader, Sink, Streams};
use std::collections::{BTreeSet, HashMap, HashSet};
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

/// Checks each entry of the records it is fed: a file's data against the
/// checksum of its `FileEnd`, the others by being there. Fed by a local verify's
/// reader, or by [`crate::BlockVerify`] with blocks read elsewhere.
pub(crate) struct Checker {
    open: HashMap<u16, (Vec<u8>, u32)>,
    /// Paths of the damaged entries.
    pub(crate) affected: BTreeSet<Vec<u8>>,
    /// Entries the job left out ([`crate::restore::plan::left_out`]): not checked.
    pub(crate) left_out: HashSet<Vec<u8>>,
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
                if let Some((p, _)) = self.open.remove(&stream) {
                    self.affected.insert(p);
                }
                match Entry::decode(body) {
                    Ok(e) if self.left_out.contains(&e.path) => {}
                    Ok(e) => {
                        self.seen += 1;
                        if e.has_data() {
                            self.open.insert(stream, (e.path, 0));
                        } else {
                            self.good += 1;
                        }
                    }
                    Err(e) => self.lost(stream, &e.to_string()),
                }
            }
            Event::Data(d) => {
                if let Some(o) = self.open.get_mut(&stream) {
                    o.1 = crc32c::crc32c_append(o.1, d);
                }
            }
            Event::Record {
                kind: Kind::FileEnd,
                body,
            } => {
                if let Some((p, crc)) = self.open.remove(&stream) {
                    match FileEnd::decode(body) {
                        Ok(fe) if fe.crc == crc && fe.status == FileStatus::Ok => self.good += 1,
                        // Stored as read, with a warning at backup: the tape holds what
                        // the backup saw, and the checksum proves it.
                        Ok(fe) if fe.crc == crc => self.good += 1,
                        _ => {
                            self.affected.insert(p);
                        }
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn lost(&mut self, stream: u16, _why: &str) {
        if let Some((p, _)) = self.open.remove(&stream) {
            self.affected.insert(p);
        }
    }
}

/// Verifies job `job_id`.
pub fn verify(home: &Home, job_id: i64, drive: Option<usize>) -> Result<VerifyReport> {
    let t0 = Instant::now();
    let cat = &home.catalog;
    let (mut reader, vols) = JobReader::open(home, job_id, drive)?;
    reader.seek(vols[0].seq, vols[0].first_lbn)?;
    let mut streams = Streams::default();
    let mut ck = Checker::new(crate::restore::plan::left_out(cat, job_id)?);
    let mut report = VerifyReport::default();
    loop {
        match reader.next()? {
            Got::End => break,
            Got::Bad { seq, lbn, .. } => {
                let barcode = vols
                    .iter()
                    .find(|v| v.seq == seq)
                    .map(|v| v.volume.barcode.clone())
                    .unwrap_or_default();
                report.bad_blocks.push((barcode, lbn));
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
    let expected = cat.files(job_id, None)?.len() as u64;
    report.blocks_checked = reader.blocks_read;
    report.bytes_read_from_tape = reader.bytes_read;
    ck.report(expected, &mut report);
    report.seconds = t0.elapsed().as_secs_f64();
    Ok(report)
}
