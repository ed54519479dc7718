//! Checking a job's records as a verify does ([`Checker`]), fed by a local
//! verify's reader or by [`BlockVerify`] with the blocks of a whole job read on
//! another machine, and what a verify found ([`VerifyReport`]).

use crate::decode::{Sink, Streams};
use crate::error::Result;
use crate::restore::handed::Opener;
use crate::Expect;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::Instant;
use tapeloom_format::{BlockHeader, DataKey, Entry, Event, FileEnd, FileStatus, Kind};

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
/// a local verify's reader, or by [`BlockVerify`] with blocks read
/// elsewhere.
pub struct Checker {
    open: HashMap<u16, Open>,
    /// Paths of the damaged entries.
    pub affected: BTreeSet<Vec<u8>>,
    /// Entries the job left out ([`crate::restore::plan::left_out`]): not checked.
    pub left_out: HashSet<Vec<u8>>,
    /// What the catalog lists of the job's entries, by path (empty when not
    /// known): an entry met otherwise is damaged.
    pub expected: HashMap<Vec<u8>, Expect>,
    good: u64,
    seen: u64,
}

impl Checker {
    /// A checker that leaves out the entries in `left_out`.
    pub fn new(left_out: HashSet<Vec<u8>>) -> Self {
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
    pub fn report(&self, expected: u64, report: &mut VerifyReport) {
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

/// An entry of a job's listing (`ls JOB`): its path as shown
/// ([`crate::display_path`]) and where its records start, by the barcode of the
/// volume and the logical block.
#[derive(Debug, Clone)]
pub struct Listed {
    /// The entry's path, as shown.
    pub path: String,
    /// The barcode of the volume where it starts.
    pub volume: String,
    /// The logical block where it starts.
    pub block: u64,
}

/// A bad block: by barcode (as the reading side named it), by the volume it says
/// it is on (its place among the volumes seen), or, when its header did not
/// open, by its number among the blocks taken.
enum BadAt {
    Named(String, u64),
    Seen(usize, u64),
    Unplaced(u64),
}

/// A verify fed with the blocks of a whole job read elsewhere ([`read_blocks`] on
/// another machine): each block opened as [`BlockRestore`] opens it (header and
/// CRC checked, an encrypted one's tag), its records decoded and each entry
/// checked as a local verify checks it; nothing is placed. The job's listing
/// stands in for the catalog: the entries expected, and the volumes by barcode.
pub struct BlockVerify {
    checker: Checker,
    streams: Streams,
    /// A block of another job than the opener's is bad.
    opener: Opener,
    listing: Vec<Listed>,
    by_path: HashMap<String, usize>,
    /// The volumes the blocks say they are on, in the order first seen, with
    /// their barcode once an entry found where the listing has it tells it.
    volumes: Vec<([u8; 16], Option<String>)>,
    bad: Vec<BadAt>,
    /// Blocks taken, refused ones included.
    pub blocks: u64,
    /// Bytes of the blocks taken.
    pub bytes: u64,
    t0: Instant,
}

impl BlockVerify {
    /// A verify of the job whose entries `listing` lists.
    pub fn new(listing: Vec<Listed>) -> Self {
        let by_path = (listing.iter().enumerate())
            .map(|(i, e)| (e.path.clone(), i))
            .collect();
        BlockVerify {
            checker: Checker::new(HashSet::new()),
            streams: Streams::default(),
            opener: Opener::default(),
            listing,
            by_path,
            volumes: Vec::new(),
            bad: Vec::new(),
            blocks: 0,
            bytes: 0,
            t0: Instant::now(),
        }
    }

    /// Opens the encrypted blocks of job `tag` with its data `key`
    /// ([`crate::job_data_key`]); blocks of any other job are bad.
    pub fn with_key(mut self, tag: u64, key: DataKey) -> Self {
        self.opener = Opener::keyed(tag, key);
        self
    }

    /// Leaves out the entry at `path`: the job could not store it whole.
    pub fn left_out(&mut self, path: Vec<u8>) {
        self.checker.left_out.insert(path);
    }

    /// Expects the entry at `path` as the catalog lists it: one met otherwise
    /// (another type, another size) is damaged.
    pub fn expect(&mut self, path: Vec<u8>, x: Expect) {
        self.checker.expected.insert(path, x);
    }

    /// Entry `path` was in a block the reading side could not read, for `why`:
    /// damaged, and the block, when `why` names it as a restore's reading does
    /// ("block LBN of BARCODE is bad: ..."), bad.
    pub fn bad(&mut self, path: &[u8], why: &str) {
        // An empty path: the block held no entry.
        if !path.is_empty() {
            self.checker.affected.insert(path.to_vec());
        }
        if let Some((volume, lbn)) = named_block(why) {
            let known = |b: &BadAt| matches!(b, BadAt::Named(v, l) if *v == volume && *l == lbn);
            if !self.bad.iter().any(known) {
                self.bad.push(BadAt::Named(volume, lbn));
            }
        }
    }

    /// Checks and decodes one block. A block that fails its checks is bad, as
    /// one on tape is: the decoder finds its stream again at the next block where
    /// a record starts, and the entry it was in is damaged.
    pub fn block(&mut self, block: &[u8]) -> Result<()> {
        self.blocks += 1;
        self.bytes += block.len() as u64;
        let header = match self.opener.open(block) {
            Ok(h) => h,
            Err(_) => {
                let at = match BlockHeader::open(block) {
                    Ok(h) => BadAt::Seen(self.volume(h.volume), h.lbn),
                    Err(_) => BadAt::Unplaced(self.blocks),
                };
                self.bad.push(at);
                return Ok(());
            }
        };
        let at = (self.volume(header.volume) as u32, header.lbn);
        let payload = self.opener.payload(&header, block);
        let mut sink = Witness {
            checker: &mut self.checker,
            volumes: &mut self.volumes,
            listing: &self.listing,
            by_path: &self.by_path,
        };
        self.streams.feed(&header, payload, at, None, &mut sink)
    }

    /// The place among the volumes seen of volume `uuid`.
    fn volume(&mut self, uuid: [u8; 16]) -> usize {
        match self.volumes.iter().position(|(u, _)| *u == uuid) {
            Some(i) => i,
            None => {
                self.volumes.push((uuid, None));
                self.volumes.len() - 1
            }
        }
    }

    /// Ends the verify once every block is in: what it found, as a local verify
    /// reports it. The blocks checked are those taken and those the reading side
    /// named bad; the bytes, those taken. A bad block on a volume whose barcode
    /// no entry told is named by the volume's UUID (hex), and one whose header
    /// did not open by its number among the blocks taken, on volume `?`.
    pub fn finish(mut self) -> VerifyReport {
        self.streams.finish(&mut self.checker);
        let mut report = VerifyReport::default();
        let mut named = 0;
        for b in std::mem::take(&mut self.bad) {
            let (volume, lbn) = match b {
                BadAt::Named(v, l) => {
                    named += 1;
                    (v, l)
                }
                BadAt::Seen(i, l) => (self.barcode(i), l),
                BadAt::Unplaced(n) => ("?".to_string(), n),
            };
            // The entries that start in it: those it ends or runs through lost
            // their bytes in the decoder.
            for e in self.listing.iter() {
                if e.volume == volume && e.block == lbn {
                    self.checker.affected.insert(e.path.as_bytes().to_vec());
                }
            }
            report.bad_blocks.push((volume, lbn));
        }
        report.blocks_checked = self.blocks + named;
        report.bytes_read_from_tape = self.bytes;
        self.checker.report(self.listing.len() as u64, &mut report);
        report.seconds = self.t0.elapsed().as_secs_f64();
        report
    }

    /// The barcode of the volume seen at place `i`, or its UUID in hex.
    fn barcode(&self, i: usize) -> String {
        match self.volumes.get(i) {
            Some((_, Some(b))) => b.clone(),
            Some((uuid, None)) => hex::encode(uuid),
            None => "?".to_string(),
        }
    }
}

/// The volume and block a restore's reading names in why a block's entries
/// could not be read: "block LBN of BARCODE is bad: ...".
fn named_block(why: &str) -> Option<(String, u64)> {
    let (lbn, rest) = why.strip_prefix("block ")?.split_once(" of ")?;
    let (volume, _) = rest.split_once(" is bad: ")?;
    Some((volume.to_string(), lbn.parse().ok()?))
}

/// The checker of a [`BlockVerify`], which learns on the way the barcode of each
/// volume: an entry found in the block where the listing says it starts tells
/// the barcode of the volume the block is on.
struct Witness<'a> {
    checker: &'a mut Checker,
    volumes: &'a mut [([u8; 16], Option<String>)],
    listing: &'a [Listed],
    by_path: &'a HashMap<String, usize>,
}

impl Witness<'_> {
    fn learn(&mut self, body: &[u8], (volume, lbn): (u32, u64)) {
        let Some((_, barcode @ None)) = self.volumes.get_mut(volume as usize) else {
            return;
        };
        let Ok(e) = Entry::decode(body) else {
            return;
        };
        let listed =
            (self.by_path.get(&crate::display_path(&e.path))).and_then(|&i| self.listing.get(i));
        if let Some(l) = listed.filter(|l| l.block == lbn) {
            *barcode = Some(l.volume.clone());
        }
    }
}

impl Sink for Witness<'_> {
    fn event(&mut self, stream: u16, ev: Event<'_>, at: (u32, u64)) -> Result<()> {
        if let Event::Record {
            kind: Kind::Entry,
            body,
        } = ev
        {
            self.learn(body, at);
        }
        self.checker.event(stream, ev, at)
    }

    fn lost(&mut self, stream: u16, why: &str) {
        self.checker.lost(stream, why);
    }
}

#[cfg(test)]
mod tests {
    use super::named_block;

    #[test]
    fn a_bad_blocks_place_is_read_from_the_reading_sides_words() {
        assert_eq!(
            named_block("block 7 of TL0001L9 is bad: medium error"),
            Some(("TL0001L9".to_string(), 7))
        );
        assert_eq!(named_block("block x of TL0001L9 is bad: y"), None);
        assert_eq!(named_block("the job's data ends here"), None);
    }
}
