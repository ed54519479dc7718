//! A restore in two halves that may run on two machines: [`read_blocks`] does a
//! restore's reading (the same selection, plan, drives and stage reads) and hands
//! each block, as stored, to a [`BlockSink`]; [`BlockRestore`] takes such blocks,
//! checks each with [`BlockHeader::open`] as a tape reader does, and decodes and
//! places them with the same decoders and restorer as a local restore. Nothing
//! the reading side sends is trusted: a block that fails its checks is lost as a
//! bad block on tape is, and paths are checked by the placer as for tape.
//!
//! An encrypted job is read without its key: its blocks are handed on sealed, as
//! stored (the plan comes from the catalog, never from their contents), and the
//! placing side, given the job's data key ([`crate::job_data_key`]), opens each
//! one, its tag checked, before decoding it.

use super::plan::Expect;
use super::plan::{self, select};
use super::restorer::Restorer;
use super::{finish, read_tape, staged, Out, RestoreOptions, RestoreReport};
use crate::error::{JobError, Result};
use crate::home::Home;
use crate::media::reader::{Sink, Streams};
use crate::verify::{Checker, VerifyReport};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Mutex;
use std::time::Instant;
use tapeloom_catalog::FileRow;
use tapeloom_format::{open_block, BlockHeader, DataKey, Entry, Event, Kind};

/// Takes the blocks a restore reads, in the order the drives read them (the
/// blocks of several drives interleaved, each stream's in order).
pub trait BlockSink: Send {
    /// Before any block: the entries wanted (`None`: all of the job), those the
    /// job left out (their records may be partly stored), and what the catalog
    /// lists of each wanted entry, by path (the placing side names those it
    /// never meets, and those it meets otherwise).
    fn selection(
        &mut self,
        want: Option<&HashSet<Vec<u8>>>,
        left_out: &HashSet<Vec<u8>>,
        expected: &HashMap<Vec<u8>, Expect>,
    ) -> Result<()>;
    /// One block as stored: header and payload, still compressed as written.
    fn block(&mut self, block: &[u8]) -> Result<()>;
    /// Entries held by a block that could not be read, and why; from
    /// [`read_blocks`], one empty path for a block that held no entry.
    fn bad(&mut self, paths: &[Vec<u8>], why: &str) -> Result<()>;
}

/// The sink of [`read_blocks`] that tells a bad block holding no entry (of the
/// job's start, index or end) as one holding an entry of empty path: so that
/// the block itself is known to the other side, which a verify there needs.
struct Told<'a>(&'a mut dyn BlockSink);

impl BlockSink for Told<'_> {
    fn selection(
        &mut self,
        want: Option<&HashSet<Vec<u8>>>,
        left_out: &HashSet<Vec<u8>>,
        expected: &HashMap<Vec<u8>, Expect>,
    ) -> Result<()> {
        self.0.selection(want, left_out, expected)
    }

    fn block(&mut self, block: &[u8]) -> Result<()> {
        self.0.block(block)
    }

    fn bad(&mut self, paths: &[Vec<u8>], why: &str) -> Result<()> {
        match paths.is_empty() {
            true => self.0.bad(&[Vec::new()], why),
            false => self.0.bad(paths, why),
        }
    }
}

/// Reads what a restore of job `job_id` with `opts` reads (`opts.to` unused) and
/// hands it to `sink`. Returns the reading's figures: blocks, mounts, locates,
/// chains, drives, stage reads and seconds; nothing is placed. An encrypted job's
/// blocks are handed on sealed (those of a disk stage are in clear, as stored):
/// no key is needed here.
pub fn read_blocks(
    home: &Home,
    job_id: i64,
    opts: &RestoreOptions,
    sink: &mut dyn BlockSink,
) -> Result<RestoreReport> {
    let t0 = Instant::now();
    let mut told = Told(sink);
    let sink: &mut dyn BlockSink = &mut told;
    let cat = &home.catalog;
    let job = cat.job(job_id)?.ok_or(JobError::NoJob(job_id))?;
    let (want, rows) = select(cat, job_id, opts)?;
    let whole = want.is_none();
    let expected = plan::expected(cat, job_id, &rows, whole)?;
    sink.selection(want.as_ref(), &plan::left_out(cat, job_id)?, &expected)?;
    drop(expected);
    let streams = cat.streams(job_id)?;
    crate::regen::know(job.tag, &streams);
    let names: HashMap<u16, String> = streams.into_iter().map(|s| (s.stream, s.name)).collect();
    let needed: BTreeSet<u16> = match whole {
        true => names.keys().copied().collect(),
        false => rows.iter().map(|r| r.stream).collect(),
    };
    // A part of a job read by cartridge (`opts.volumes`) reads no stage: the
    // tape holds each block once, the stage may hold it too.
    let on_stage = match opts.volumes.is_empty() {
        true => staged::on_stage(cat, job_id, &needed)?,
        false => Default::default(),
    };
    let from_stage = staged::hand(job.tag, &on_stage, sink)?;
    let rows: Vec<FileRow> = (rows.into_iter())
        .filter(|r| !on_stage.contains_key(&r.stream))
        .collect();
    let mut report = RestoreReport::default();
    if !needed.iter().all(|s| on_stage.contains_key(s)) {
        let skip: HashSet<u16> = on_stage.keys().copied().collect();
        let facts = (job_id, job.tag, job.block_size as usize, None);
        let sink = Mutex::new(sink);
        let out = Out::Hand(&sink);
        let (reads, chains) =
            read_tape(home, facts, (rows, whole), (&names, &skip), (opts, out, t0))?;
        super::add_drives(&mut report, reads);
        report.chains = chains;
    }
    (report.stream_sources, report.source) = super::sources(&needed, &on_stage, &names);
    (report.job, report.jobs) = (job_id, vec![job_id]);
    report.blocks_read_from_stage = from_stage.blocks;
    report.bytes_read_from_stage = from_stage.bytes;
    report.seconds = t0.elapsed().as_secs_f64();
    Ok(report)
}

/// A restore fed with blocks read elsewhere ([`read_blocks`] on another machine):
/// each block checked, decoded and placed under the restore folder as a local
/// restore places what its drives read.
pub struct BlockRestore {
    restorer: Restorer,
    streams: Streams,
    /// A block of another job than the opener's is refused.
    opener: Opener,
    /// Blocks taken, refused ones included.
    pub blocks: u64,
    /// Bytes of the blocks taken.
    pub bytes: u64,
    t0: Instant,
}

impl BlockRestore {
    /// A restore into `to` over what is there by `opts.overwrite`; with
    /// `opts.paths`, only the entries later named by [`BlockRestore::want`].
    pub fn new(opts: &RestoreOptions) -> Result<Self> {
        let want = (!opts.paths.is_empty()).then(HashSet::new);
        Ok(BlockRestore {
            restorer: Restorer::new(&opts.to, opts.overwrite, want)?,
            streams: Streams::default(),
            opener: Opener::default(),
            blocks: 0,
            bytes: 0,
            t0: Instant::now(),
        })
    }

    /// Opens the encrypted blocks of job `tag` with its data `key`
    /// ([`crate::job_data_key`]); blocks of any other job are refused.
    pub fn with_key(mut self, tag: u64, key: DataKey) -> Self {
        self.opener = Opener::keyed(tag, key);
        self
    }

    /// Wants the entry at `path` (a restore of chosen paths).
    pub fn want(&mut self, path: Vec<u8>) {
        self.restorer
            .want
            .get_or_insert_with(HashSet::new)
            .insert(path);
    }

    /// Leaves out the entry at `path`: the job could not store it whole.
    pub fn left_out(&mut self, path: Vec<u8>) {
        self.restorer.left_out.insert(path);
    }

    /// Expects the entry at `path` as the catalog lists it: one never met is
    /// named at the end, one met otherwise is not placed.
    pub fn expect(&mut self, path: Vec<u8>, x: Expect) {
        let job = self.restorer.job;
        (self.restorer.expected.entry(job).or_default()).insert(path, x);
    }

    /// Entry `path` was in a block that could not be read, for `why`.
    pub fn bad(&mut self, path: &[u8], why: &str) {
        // An empty path: the block held no entry (a local restore says nothing).
        if !path.is_empty() && self.restorer.wanted(path) {
            self.restorer.fail(path, why.to_string());
        }
    }

    /// Checks, decodes and places one block. A block that fails its checks is
    /// lost, as a bad block on tape is: the decoder finds its stream again at the
    /// next block where a record starts.
    pub fn block(&mut self, block: &[u8]) -> Result<()> {
        self.blocks += 1;
        self.bytes += block.len() as u64;
        let header = match self.opener.open(block) {
            Ok(h) => h,
            Err(why) => {
                self.refuse(&why);
                return Ok(());
            }
        };
        let payload = self.opener.payload(&header, block);
        let at = (0, header.lbn);
        (self.streams).feed(&header, payload, at, None, &mut self.restorer)
    }

    fn refuse(&mut self, why: &str) {
        let n = self.blocks;
        (self.restorer).fail(b"?", format!("block {n} received is refused: {why}"));
    }

    /// Ends the restore once every block is in: files still open lost their
    /// tail; the writers' files, then directories' metadata. Returns what was
    /// placed (the reading's figures are the other side's), each stream's bytes
    /// under its name in `names` (its number when it has none there).
    pub fn finish(mut self, names: &HashMap<u16, String>) -> Result<RestoreReport> {
        self.streams.finish(&mut self.restorer);
        let (mut report, per_stream) = finish(Mutex::new(self.restorer), Vec::new())?;
        let mut per: Vec<(u16, u64)> = per_stream.into_iter().collect();
        per.sort();
        let name = |id: u16| names.get(&id).cloned().unwrap_or_else(|| id.to_string());
        report.streams = per.into_iter().map(|(id, b)| (name(id), b)).collect();
        report.seconds = self.t0.elapsed().as_secs_f64();
        Ok(report)
    }
}

/// What opens the blocks of one job handed from elsewhere: the job's tag, from
/// its first block on (from its key, when it is encrypted), its data key when it
/// is encrypted, and room for an opened payload.
#[derive(Default)]
struct Opener {
    tag: Option<u64>,
    key: Option<DataKey>,
    expanded: Vec<u8>,
}

impl Opener {
    /// An opener of the blocks of job `tag`, encrypted with `key`.
    fn keyed(tag: u64, key: DataKey) -> Self {
        Opener {
            tag: Some(tag),
            key: Some(key),
            expanded: Vec::new(),
        }
    }

    /// The block's header, checked, its payload opened when it is encrypted
    /// (its tag checked) or compressed ([`open_handed`]); or why it is refused.
    fn open(&mut self, block: &[u8]) -> std::result::Result<BlockHeader, String> {
        open_handed(
            block,
            (&mut self.tag, self.key.as_ref()),
            &mut self.expanded,
        )
    }

    /// The plain payload of `block`, whose header [`Opener::open`] gave.
    fn payload<'a>(&'a self, header: &BlockHeader, block: &'a [u8]) -> &'a [u8] {
        opened_payload(header, block, &self.expanded)
    }
}

/// Block `block` handed from elsewhere, checked as a tape reader checks it (its
/// header and CRC), its payload opened into `expanded` when it is encrypted (with
/// `key`, its tag checked) or compressed: its header, or why it is refused. The
/// first block sets the job's `tag` when none is known; a block of another job is
/// refused.
pub(crate) fn open_handed(
    block: &[u8],
    (tag, key): (&mut Option<u64>, Option<&DataKey>),
    expanded: &mut Vec<u8>,
) -> std::result::Result<BlockHeader, String> {
    let header = BlockHeader::open(block).map_err(|e| e.to_string())?;
    if header.encrypted && key.is_none() {
        return Err("it is encrypted and no key was given".into());
    }
    if *tag.get_or_insert(header.job_tag) != header.job_tag {
        return Err("it is another job's".into());
    }
    if header.compressed || header.encrypted {
        open_block(&header, block, key, expanded).map_err(|e| e.to_string())?;
    }
    Ok(header)
}

/// The plain payload of a block [`open_handed`] opened: in `expanded` when it was
/// compressed or encrypted, else in the block.
pub(crate) fn opened_payload<'a>(
    header: &BlockHeader,
    block: &'a [u8],
    expanded: &'a [u8],
) -> &'a [u8] {
    // An opened block is its header and plain payload, as stored in clear.
    let clear = BlockHeader {
        compressed: false,
        encrypted: false,
        ..*header
    };
    match header.compressed || header.encrypted {
        true => clear.payload(expanded),
        false => header.payload(block),
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
mod verify_tests {
    use super::*;
    use crate::{backup, verify, BackupOptions, Compress, Progress};
    use std::path::Path;
    use std::sync::Arc;

    /// Hands what a restore reads to a [`BlockVerify`], as a client's frames do.
    struct Feed(BlockVerify);

    impl BlockSink for Feed {
        fn selection(
            &mut self,
            _: Option<&HashSet<Vec<u8>>>,
            left_out: &HashSet<Vec<u8>>,
            expected: &HashMap<Vec<u8>, Expect>,
        ) -> Result<()> {
            left_out.iter().for_each(|p| self.0.left_out(p.clone()));
            (expected.iter()).for_each(|(p, x)| self.0.expect(p.clone(), *x));
            Ok(())
        }

        fn block(&mut self, block: &[u8]) -> Result<()> {
            self.0.block(block)
        }

        fn bad(&mut self, paths: &[Vec<u8>], why: &str) -> Result<()> {
            paths.iter().for_each(|p| self.0.bad(p, why));
            Ok(())
        }
    }

    /// Job `job` read as for a restore and checked by a [`BlockVerify`] fed with
    /// the catalog's listing of it.
    fn handed(home: &Home, job: i64) -> VerifyReport {
        let cat = &home.catalog;
        let vols = cat.job_volumes(job).unwrap();
        let barcode = |seq| vols.iter().find(|v| v.seq == seq).unwrap();
        let listing = (cat.files(job, None).unwrap().into_iter())
            .map(|r| Listed {
                path: crate::display_path(&r.path),
                volume: barcode(r.start_seq).volume.barcode.clone(),
                block: r.start_lbn,
            })
            .collect();
        let mut feed = Feed(BlockVerify::new(listing));
        let read = read_blocks(home, job, &RestoreOptions::default(), &mut feed).unwrap();
        // The bytes read from tape are the reading side's figure.
        let mut r = feed.0.finish();
        r.bytes_read_from_tape = read.bytes_read_from_tape;
        r
    }

    fn same(a: &VerifyReport, b: &VerifyReport) {
        let figures = |r: &VerifyReport| {
            let files = (r.files_checked, r.files_missing, r.files_affected.clone());
            (
                r.ok,
                r.blocks_checked,
                r.bytes_read_from_tape,
                r.bad_blocks.clone(),
                files,
            )
        };
        assert_eq!(figures(a), figures(b), "handed {a:?}\nlocal {b:?}");
    }

    fn write(path: &Path, data: &[u8]) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, data).unwrap();
    }

    #[test]
    fn a_job_handed_on_verifies_as_a_local_verify_does() {
        let t = tempfile::tempdir().unwrap();
        let (s1, s2) = (t.path().join("s1"), t.path().join("s2"));
        for i in 0..40u32 {
            let line = format!("line {i} of a file that compresses\n");
            write(
                &s1.join(format!("d/f{i}")),
                &line.repeat(50 + 40 * i as usize).into_bytes(),
            );
        }
        let noise: Vec<u8> = (0..200_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        write(&s2.join("noise.bin"), &noise);
        let home = Home::open(&t.path().join("home")).unwrap();
        let opts = BackupOptions {
            name: "handed".into(),
            block_size: tapeloom_format::MIN_BLOCK_SIZE,
            compress: Compress::Zstd,
            ..BackupOptions::default()
        };
        let job = backup(&home, &[s1, s2], &opts, Arc::new(Progress::default()))
            .unwrap()
            .job_id;
        let local = verify(&home, job, None).unwrap();
        assert!(local.ok && local.files_checked > 40, "{local:?}");
        same(&handed(&home, job), &local);
        // A byte changed in the middle of the cartridge: the same bad block, the
        // same files damaged.
        let tapes = t.path().join("home/library/tapes");
        let data = (std::fs::read_dir(&tapes).unwrap())
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "data"))
            .max_by_key(|p| std::fs::metadata(p).unwrap().len())
            .unwrap();
        let mut bytes = std::fs::read(&data).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0x40;
        std::fs::write(&data, &bytes).unwrap();
        let local = verify(&home, job, None).unwrap();
        assert!(!local.ok && local.bad_blocks.len() == 1, "{local:?}");
        same(&handed(&home, job), &local);
    }

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
