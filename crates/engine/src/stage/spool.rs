//! Writes one stream to the stages as a run of chunks.

use super::{ChunkWriter, Reservation, StageSet, CHUNK_HEADER_LEN};
use crate::error::Result;
use tapeloom_catalog::{Catalog, StagedChunk};
use tapeloom_format::PackedBlock;

/// Spools one stream's blocks to the stages, in chunks of about `chunk_size` bytes.
///
/// Each chunk reserves `chunk_size` bytes on the stage with the most free space
/// (waiting while the stages are full) and rolls over when the next block would not
/// fit. A finished chunk is renamed to its final name and then recorded in the
/// catalog, and what its reservation did not use is given back. The space a recorded
/// chunk takes is given back by whoever despools it.
pub struct StreamSpool<'c> {
    set: StageSet,
    catalog: &'c Catalog,
    job_id: i64,
    job_tag: u64,
    stream: u16,
    chunk_size: u64,
    current: Option<(ChunkWriter, Reservation)>,
    /// When the chunk being written was begun.
    begun: std::time::Instant,
    /// Age at which a chunk is finished whatever its size, so a slow stream's data
    /// reaches the despooler within about that long.
    max_age: std::time::Duration,
    next_seq: u64,
}

impl<'c> StreamSpool<'c> {
    /// A spool for `stream` of job `job_id` (tag `job_tag`), its first chunk being
    /// chunk 0.
    pub fn new(
        set: StageSet,
        catalog: &'c Catalog,
        job_id: i64,
        job_tag: u64,
        stream: u16,
        chunk_size: u64,
    ) -> Self {
        StreamSpool {
            set,
            catalog,
            job_id,
            job_tag,
            stream,
            chunk_size,
            current: None,
            begun: std::time::Instant::now(),
            max_age: std::time::Duration::MAX,
            next_seq: 0,
        }
    }

    /// Finishes each chunk once it is `age` old, whatever its size.
    pub fn with_max_age(mut self, age: std::time::Duration) -> Self {
        self.max_age = age;
        self
    }

    /// Finishes the chunk being written if `block` would not fit in it (or it is old
    /// enough), and returns it: call before [`StreamSpool::push`], so that the
    /// finished chunk can go to the despooler before the push waits for space (the
    /// despooler may need it to free that space).
    pub fn roll(&mut self, block: &PackedBlock) -> Result<Option<StagedChunk>> {
        let need = 4 + block.buf.len() as u64;
        match &self.current {
            Some((w, r)) if w.bytes() + need > r.bytes || self.begun.elapsed() >= self.max_age => {
                self.finish_current()
            }
            _ => Ok(None),
        }
    }

    /// Appends the stream's next block; returns the chunk this completed, if the
    /// block did not fit in the chunk being written.
    pub fn push(&mut self, block: &mut PackedBlock) -> Result<Option<StagedChunk>> {
        let need = 4 + block.buf.len() as u64;
        let mut done = None;
        if let Some((w, r)) = &self.current {
            if w.bytes() + need > r.bytes || self.begun.elapsed() >= self.max_age {
                done = self.finish_current()?;
            }
        }
        if self.current.is_none() {
            let r = self
                .set
                .reserve(self.chunk_size.max(CHUNK_HEADER_LEN as u64 + need))?;
            if let Err(e) = self.set.forget_evicted(self.catalog) {
                self.set.release(r.stage_id, r.bytes);
                return Err(e);
            }
            self.begun = std::time::Instant::now();
            match ChunkWriter::create(
                &r.path,
                self.job_id,
                self.job_tag,
                self.stream,
                self.next_seq,
                block.seq,
            ) {
                Ok(w) => self.current = Some((w, r)),
                Err(e) => {
                    self.set.release(r.stage_id, r.bytes);
                    return Err(e);
                }
            }
        }
        if let Some((w, _)) = &mut self.current {
            w.push(block)?;
        }
        Ok(done)
    }

    /// Completes the chunk being written, if it holds blocks, and records the
    /// stream's last chunk as such: the stream has ended. Returns the chunk.
    pub fn finish(mut self) -> Result<Option<StagedChunk>> {
        let c = self.finish_current()?;
        if let Some(seq) = self.next_seq.checked_sub(1) {
            self.catalog
                .mark_chunk_last(self.job_id, self.stream, seq)?;
        }
        Ok(c)
    }

    fn finish_current(&mut self) -> Result<Option<StagedChunk>> {
        let Some((w, r)) = self.current.take() else {
            return Ok(None);
        };
        if w.blocks() == 0 {
            self.set.release(r.stage_id, r.bytes);
            w.abandon()?;
            return Ok(None);
        }
        let recorded = w
            .finish(r.stage_id)
            .and_then(|c| Ok(self.catalog.add_staged_chunk(&c).map(|()| c)?));
        match recorded {
            Ok(c) => {
                self.set
                    .release(r.stage_id, r.bytes.saturating_sub(c.bytes));
                self.next_seq += 1;
                Ok(Some(c))
            }
            Err(e) => {
                self.set.release(r.stage_id, r.bytes);
                Err(e)
            }
        }
    }
}

impl Drop for StreamSpool<'_> {
    /// A spool dropped unfinished gives its reservation back; its `.part` file stays
    /// for the next check of the stage to remove.
    fn drop(&mut self) {
        if let Some((_, r)) = self.current.take() {
            self.set.release(r.stage_id, r.bytes);
        }
    }
}
