//! Restoring streams from the disk stages. A stream whose chunks are all still on a
//! stage (not yet despooled, or kept after tape by `backup --keep-staged`) is read
//! from its chunk files instead of from tape (docs/STAGE.md 4): each block checked by
//! [`ChunkReader`], then decoded by the same [`Streams`] and placed by the same
//! restorer as the blocks a drive reads.

use crate::error::{Error, Result, StageError};
use crate::restore::BlockSink;
use crate::stage::ChunkReader;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use tapeloom_catalog::{Catalog, ChunkFilter, StagedChunk};
use tapeloom_format::expand_block;
use tapeloom_tree::decode::{Sink, Streams};

/// What reading from the stages took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct StageRead {
    /// Blocks read.
    pub blocks: u64,
    /// Bytes of chunk files read.
    pub bytes: u64,
}

/// The streams among `wanted` of job `job_id` whose every chunk is on a stage, with
/// their chunk files in order. A stream qualifies when its chunks are numbered from
/// 0 without a gap, each one's blocks follow on from the last one's, and each is
/// spooled or kept with its file present.
pub(crate) fn on_stage(
    cat: &Catalog,
    job_id: i64,
    wanted: &BTreeSet<u16>,
) -> Result<BTreeMap<u16, Vec<PathBuf>>> {
    let stages: HashMap<i64, PathBuf> = cat.stages()?.into_iter().map(|s| (s.id, s.path)).collect();
    let mut by_stream: BTreeMap<u16, Vec<StagedChunk>> = BTreeMap::new();
    for c in cat.staged_chunks(&ChunkFilter {
        job: Some(job_id),
        ..Default::default()
    })? {
        if wanted.contains(&c.stream) {
            by_stream.entry(c.stream).or_default().push(c);
        }
    }
    Ok(by_stream
        .into_iter()
        .filter_map(|(stream, chunks)| Some((stream, whole_stream(&stages, &chunks)?)))
        .collect())
}

/// The files of `chunks` (one stream's, by seq), when they hold the whole stream.
fn whole_stream(stages: &HashMap<i64, PathBuf>, chunks: &[StagedChunk]) -> Option<Vec<PathBuf>> {
    let mut next_block = 0;
    let mut files = Vec::with_capacity(chunks.len());
    for (i, c) in chunks.iter().enumerate() {
        if c.seq != i as u64 || c.first_block != next_block || !c.on_stage() {
            return None;
        }
        let path = stages.get(&c.stage_id)?.join(&c.file);
        if !path.is_file() {
            return None;
        }
        next_block = c.first_block + c.blocks;
        files.push(path);
    }
    Some(files)
}

/// Feeds the blocks of each stream in `streams` (job tag `tag`), read from its chunk
/// files in order, to `sink`. A damaged block loses what it holds, as a bad block on
/// tape does: the decoder finds the stream again at the next block where a record
/// starts. A chunk file cut short or holding a block out of place fails the restore.
pub(crate) fn read(
    tag: u64,
    streams: &BTreeMap<u16, Vec<PathBuf>>,
    sink: &mut dyn Sink,
) -> Result<StageRead> {
    let mut read = StageRead::default();
    let mut expanded = Vec::new();
    for (&stream, files) in streams {
        let mut dec = Streams::default();
        for path in files {
            for b in ChunkReader::open_expecting(path, tag, stream)? {
                let b = match b {
                    Ok(b) => b,
                    Err(Error::Stage(StageError::DamagedBlock { .. })) => continue,
                    Err(e) => return Err(e),
                };
                read.blocks += 1;
                read.bytes += 4 + b.block.len() as u64;
                let payload = if b.header.compressed {
                    expand_block(&b.header, &b.block, &mut expanded)?;
                    b.header.payload(&expanded)
                } else {
                    b.header.payload(&b.block)
                };
                // Blocks on a stage have no place on tape: the LBN given is the seq.
                dec.feed(&b.header, payload, (0, b.seq), None, sink)?;
            }
        }
        dec.finish(sink);
    }
    Ok(read)
}

/// Hands the blocks of each stream in `streams` (job tag `tag`), read from its
/// chunk files in order, to `sink` as they are stored (a restore read here,
/// decoded elsewhere). A damaged block is left out, as [`read`] leaves it.
pub(crate) fn hand(
    tag: u64,
    streams: &BTreeMap<u16, Vec<PathBuf>>,
    sink: &mut dyn BlockSink,
) -> Result<StageRead> {
    let mut read = StageRead::default();
    for (&stream, files) in streams {
        for path in files {
            for b in ChunkReader::open_expecting(path, tag, stream)? {
                let b = match b {
                    Ok(b) => b,
                    Err(Error::Stage(StageError::DamagedBlock { .. })) => continue,
                    Err(e) => return Err(e),
                };
                read.blocks += 1;
                read.bytes += 4 + b.block.len() as u64;
                sink.block(&b.block)?;
            }
        }
    }
    Ok(read)
}
