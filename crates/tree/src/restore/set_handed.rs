//! A set's point-in-time restore fed with blocks read on another machine: what
//! it takes from each job ([`SetSelection`]), and [`SetBlockRestore`], which
//! checks each block against its job as a tape reader does and places them with
//! the restorer of a local set restore: each file from the job that last wrote
//! its data, metadata-only changes and hard links once every file is placed.

use super::handed::{open_handed, opened_payload};
use super::restorer::{Restorer, SetWant};
use super::{RestoreOptions, RestoreReport};
use crate::decode::Streams;
use crate::error::Result;
use crate::Expect;
use std::collections::{BTreeMap, HashMap};
use std::time::Instant;
use tapeloom_format::DataKey;

/// Why a file of a set's tree cannot be restored: no job of its chain holds its
/// data.
pub const NO_DATA: &str = "no job of its chain holds its data";

/// What a set's restore reads of one job and takes from it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SetJob {
    /// The job's id.
    pub id: i64,
    /// Its tag, which each of its blocks carries.
    pub tag: u64,
    /// Its block size.
    pub block_size: u32,
    /// The body of its `JobKey` record, when it is encrypted.
    pub key: Option<Vec<u8>>,
    /// Entries placed from the job, with their data (hard links among them).
    pub data: Vec<Vec<u8>>,
    /// Metadata-only entries of the job, whose metadata goes over data placed
    /// from an earlier job.
    pub meta: Vec<Vec<u8>>,
    /// What the catalog lists of each entry read from the job (those of `data`
    /// and `meta`), by path: the placing side names those it never meets, and
    /// those it meets otherwise.
    pub rows: Vec<(Vec<u8>, Expect)>,
}

/// What a set's restore takes from each of its jobs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SetSelection {
    /// The job the set's tree stands at.
    pub at: i64,
    /// The jobs read, by id.
    pub jobs: Vec<SetJob>,
    /// Files of the tree whose data no job of the chain holds.
    pub missing: Vec<Vec<u8>>,
}

/// One job of a set's restore fed with blocks read elsewhere.
struct Fed {
    /// Its tag: a block that carries another is refused.
    tag: Option<u64>,
    /// Its data key, when it is encrypted.
    key: Option<DataKey>,
    /// Its streams' decoders.
    streams: Streams,
}

/// A set's restore fed with blocks read elsewhere (the engine's `read_set_blocks` on
/// another machine): each block checked against its job, decoded and placed as
/// a local set restore places what its drives read.
pub struct SetBlockRestore {
    restorer: Restorer,
    jobs: BTreeMap<i64, Fed>,
    /// The job whose blocks and bad entries come now.
    current: Option<i64>,
    expanded: Vec<u8>,
    /// Blocks taken, refused ones included.
    pub blocks: u64,
    /// Bytes of the blocks taken.
    pub bytes: u64,
    t0: Instant,
}

impl SetBlockRestore {
    /// A restore of `selection` into `opts.to` over what is there by
    /// `opts.overwrite`; `keys` hold each encrypted job's tag and data key (from
    /// [`crate::job_data_key`]), by job id. The files no job holds are named as
    /// errors at once.
    pub fn new(
        opts: &RestoreOptions,
        selection: &SetSelection,
        mut keys: HashMap<i64, (u64, DataKey)>,
    ) -> Result<Self> {
        let mut restorer = Restorer::new(&opts.to, opts.overwrite, None)?;
        for p in &selection.missing {
            restorer.fail(p, NO_DATA.into());
        }
        let mut want = SetWant::default();
        let mut jobs = BTreeMap::new();
        for j in &selection.jobs {
            let set = |v: &[Vec<u8>]| v.iter().cloned().collect();
            want.data.insert(j.id, set(&j.data));
            want.meta.insert(j.id, set(&j.meta));
            restorer
                .expected
                .insert(j.id, j.rows.iter().cloned().collect());
            let (tag, key) = match keys.remove(&j.id) {
                Some((tag, key)) => (tag, Some(key)),
                None => (j.tag, None),
            };
            let streams = Streams::default();
            let tag = Some(tag);
            jobs.insert(j.id, Fed { tag, key, streams });
        }
        restorer.set = Some(want);
        Ok(SetBlockRestore {
            restorer,
            jobs,
            current: None,
            expanded: Vec::new(),
            blocks: 0,
            bytes: 0,
            t0: Instant::now(),
        })
    }

    /// The blocks and bad entries that follow are job `job`'s. Those of a job
    /// the selection does not hold are refused.
    pub fn job(&mut self, job: i64) {
        self.current = Some(job);
    }

    /// Entry `path` of the current job was in a block that could not be read,
    /// for `why`.
    pub fn bad(&mut self, path: &[u8], why: &str) {
        let Some(job) = self.current.filter(|j| self.jobs.contains_key(j)) else {
            return;
        };
        self.restorer.job = job;
        if self.restorer.wanted(path) {
            self.restorer.fail(path, why.to_string());
        }
    }

    /// Checks, decodes and places one block of the current job. A block that
    /// fails its checks is lost, as a bad block on tape is: the decoder finds its
    /// stream again at the next block where a record starts.
    pub fn block(&mut self, block: &[u8]) -> Result<()> {
        self.blocks += 1;
        self.bytes += block.len() as u64;
        let job = (self.current).and_then(|id| self.jobs.get_mut(&id).map(|fed| (id, fed)));
        let Some((id, fed)) = job else {
            self.refuse("it is of no job of the set");
            return Ok(());
        };
        let key = (&mut fed.tag, fed.key.as_ref());
        let header = match open_handed(block, key, &mut self.expanded) {
            Ok(h) => h,
            Err(why) => {
                self.refuse(&why);
                return Ok(());
            }
        };
        let payload = opened_payload(&header, block, &self.expanded);
        self.restorer.job = id;
        (fed.streams).feed(&header, payload, (0, header.lbn), None, &mut self.restorer)
    }

    fn refuse(&mut self, why: &str) {
        let n = self.blocks;
        (self.restorer).fail(b"?", format!("block {n} received is refused: {why}"));
    }

    /// Ends the restore once every block is in: files still open lost their
    /// tail; the writers' files, then the hard links and newer metadata, then
    /// directories' metadata. Returns what was placed (the reading's figures are
    /// the other side's).
    pub fn finish(mut self) -> Result<RestoreReport<()>> {
        for (&id, fed) in self.jobs.iter_mut() {
            self.restorer.job = id;
            fed.streams.finish(&mut self.restorer);
        }
        let (mut report, _) = self.restorer.finish();
        report.seconds = self.t0.elapsed().as_secs_f64();
        Ok(report)
    }
}
