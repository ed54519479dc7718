//! A restore fed with blocks read on another machine: each block checked as a
//! tape reader checks it ([`BlockHeader::open`]), opened with the job's data key
//! when it is sealed, and decoded and placed with the same decoders and restorer
//! as a local restore. Nothing the reading side sends is trusted: a block that
//! fails its checks is lost as a bad block on tape is, and paths are checked by
//! the placer as for tape.

use super::restorer::Restorer;
use super::{RestoreOptions, RestoreReport};
use crate::decode::Streams;
use crate::error::Result;
use crate::Expect;
use std::collections::{HashMap, HashSet};
use std::time::Instant;
use tapeloom_format::{open_block, BlockHeader, DataKey};

/// A restore fed with blocks read elsewhere (the engine's `read_blocks` on another machine):
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
    pub fn finish(mut self, names: &HashMap<u16, String>) -> Result<RestoreReport<()>> {
        self.streams.finish(&mut self.restorer);
        let (mut report, per_stream) = self.restorer.finish();
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
pub(crate) struct Opener {
    tag: Option<u64>,
    key: Option<DataKey>,
    expanded: Vec<u8>,
}

impl Opener {
    /// An opener of the blocks of job `tag`, encrypted with `key`.
    pub(crate) fn keyed(tag: u64, key: DataKey) -> Self {
        Opener {
            tag: Some(tag),
            key: Some(key),
            expanded: Vec::new(),
        }
    }

    /// The block's header, checked, its payload opened when it is encrypted
    /// (its tag checked) or compressed ([`open_handed`]); or why it is refused.
    pub(crate) fn open(&mut self, block: &[u8]) -> std::result::Result<BlockHeader, String> {
        open_handed(
            block,
            (&mut self.tag, self.key.as_ref()),
            &mut self.expanded,
        )
    }

    /// The plain payload of `block`, whose header [`Opener::open`] gave.
    pub(crate) fn payload<'a>(&'a self, header: &BlockHeader, block: &'a [u8]) -> &'a [u8] {
        opened_payload(header, block, &self.expanded)
    }
}

/// Block `block` handed from elsewhere, checked as a tape reader checks it (its
/// header and CRC), its payload opened into `expanded` when it is encrypted (with
/// `key`, its tag checked) or compressed: its header, or why it is refused. The
/// first block sets the job's `tag` when none is known; a block of another job is
/// refused.
pub fn open_handed(
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
pub fn opened_payload<'a>(header: &BlockHeader, block: &'a [u8], expanded: &'a [u8]) -> &'a [u8] {
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
