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

use super::plan::{self, select};
use super::restorer::Restorer;
use super::{finish, read_tape, staged, Out, RestoreOptions, RestoreReport};
use crate::error::{JobError, Result};
use crate::home::Home;
use crate::media::reader::Streams;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Mutex;
use std::time::Instant;
use tapeloom_catalog::FileRow;
use tapeloom_format::{open_block, BlockHeader, DataKey};

/// Takes the blocks a restore reads, in the order the drives read them (the
/// blocks of several drives interleaved, each stream's in order).
pub trait BlockSink: Send {
    /// Before any block: the entries wanted (`None`: all of the job) and those the
    /// job left out (their records may be partly stored).
    fn selection(
        &mut self,
        want: Option<&HashSet<Vec<u8>>>,
        left_out: &HashSet<Vec<u8>>,
    ) -> Result<()>;
    /// One block as stored: header and payload, still compressed as written.
    fn block(&mut self, block: &[u8]) -> Result<()>;
    /// Entries held by a block that could not be read, and why.
    fn bad(&mut self, paths: &[Vec<u8>], why: &str) -> Result<()>;
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
    let cat = &home.catalog;
    let job = cat.job(job_id)?.ok_or(JobError::NoJob(job_id))?;
    let (want, rows) = select(cat, job_id, opts)?;
    let whole = want.is_none();
    sink.selection(want.as_ref(), &plan::left_out(cat, job_id)?)?;
    let names: HashMap<u16, String> = (cat.streams(job_id)?.into_iter())
        .map(|s| (s.stream, s.name))
        .collect();
    let needed: BTreeSet<u16> = match whole {
        true => names.keys().copied().collect(),
        false => rows.iter().map(|r| r.stream).collect(),
    };
    let on_stage = staged::on_stage(cat, job_id, &needed)?;
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
    expanded: Vec<u8>,
    /// The job's tag, from its first block on (from its key, when it is
    /// encrypted): a block of another job is refused.
    tag: Option<u64>,
    /// The job's data key, when it is encrypted.
    key: Option<DataKey>,
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
            expanded: Vec::new(),
            tag: None,
            key: None,
            blocks: 0,
            bytes: 0,
            t0: Instant::now(),
        })
    }

    /// Opens the encrypted blocks of job `tag` with its data `key`
    /// ([`crate::job_data_key`]); blocks of any other job are refused.
    pub fn with_key(mut self, tag: u64, key: DataKey) -> Self {
        self.tag = Some(tag);
        self.key = Some(key);
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

    /// Entry `path` was in a block that could not be read, for `why`.
    pub fn bad(&mut self, path: &[u8], why: &str) {
        if self.restorer.wanted(path) {
            self.restorer.fail(path, why.to_string());
        }
    }

    /// Checks, decodes and places one block. A block that fails its checks is
    /// lost, as a bad block on tape is: the decoder finds its stream again at the
    /// next block where a record starts.
    pub fn block(&mut self, block: &[u8]) -> Result<()> {
        self.blocks += 1;
        self.bytes += block.len() as u64;
        let header = match self.open(block) {
            Ok(h) => h,
            Err(why) => {
                self.refuse(&why);
                return Ok(());
            }
        };
        // An opened block is its header and plain payload, as stored in clear.
        let clear = BlockHeader {
            compressed: false,
            encrypted: false,
            ..header
        };
        let payload = match header.compressed || header.encrypted {
            true => clear.payload(&self.expanded),
            false => header.payload(block),
        };
        let at = (0, header.lbn);
        (self.streams).feed(&header, payload, at, None, &mut self.restorer)
    }

    /// The block's header, checked, its payload opened into `expanded` when it is
    /// encrypted (its tag checked) or compressed; or why the block is refused.
    fn open(&mut self, block: &[u8]) -> std::result::Result<BlockHeader, String> {
        let header = BlockHeader::open(block).map_err(|e| e.to_string())?;
        if header.encrypted && self.key.is_none() {
            return Err("it is encrypted and no key was given".into());
        }
        if *self.tag.get_or_insert(header.job_tag) != header.job_tag {
            return Err("it is another job's".into());
        }
        if header.compressed || header.encrypted {
            open_block(&header, block, self.key.as_ref(), &mut self.expanded)
                .map_err(|e| e.to_string())?;
        }
        Ok(header)
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
