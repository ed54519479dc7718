//! The chunk file's header and its writer (STAGE.md 3).

use super::{chunk_file, now_ns, CHUNK_SUFFIX, PART_SUFFIX};
use crate::error::{io, ChunkHeaderProblem, Result, StageError};
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use tapeloom_catalog::{ChunkState, StagedChunk};
use tapeloom_device::fsio::sync_dir;
use tapeloom_format::{BlockHeader, PackedBlock, BLOCK_HEADER_LEN, MAX_BLOCK_SIZE};

/// Magic at the start of every chunk file.
pub const CHUNK_MAGIC: &[u8; 4] = b"TLCH";
/// Layout version this tapeloom writes and reads.
pub const CHUNK_VERSION: u16 = 1;
/// Length of a chunk file's header.
pub const CHUNK_HEADER_LEN: usize = 72;

/// A chunk file's header fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChunkHeader {
    pub job_tag: u64,
    pub stream: u16,
    pub seq: u64,
    pub first_block: u64,
    pub blocks: u64,
    pub first_offset: u64,
    pub end_offset: u64,
}

impl ChunkHeader {
    pub(crate) fn encode(&self) -> [u8; CHUNK_HEADER_LEN] {
        let mut h = [0u8; CHUNK_HEADER_LEN];
        h[0..4].copy_from_slice(CHUNK_MAGIC);
        h[4..6].copy_from_slice(&CHUNK_VERSION.to_le_bytes());
        h[6..8].copy_from_slice(&(CHUNK_HEADER_LEN as u16).to_le_bytes());
        h[8..16].copy_from_slice(&self.job_tag.to_le_bytes());
        h[16..18].copy_from_slice(&self.stream.to_le_bytes());
        // 18..24 reserved, zero.
        h[24..32].copy_from_slice(&self.seq.to_le_bytes());
        h[32..40].copy_from_slice(&self.first_block.to_le_bytes());
        h[40..48].copy_from_slice(&self.blocks.to_le_bytes());
        h[48..56].copy_from_slice(&self.first_offset.to_le_bytes());
        h[56..64].copy_from_slice(&self.end_offset.to_le_bytes());
        // 64..68 reserved, zero.
        let crc = crc32c::crc32c(&h[..68]);
        h[68..72].copy_from_slice(&crc.to_le_bytes());
        h
    }

    pub(crate) fn decode(h: &[u8]) -> std::result::Result<Self, ChunkHeaderProblem> {
        let h: &[u8; CHUNK_HEADER_LEN] = h
            .get(..CHUNK_HEADER_LEN)
            .and_then(|h| h.try_into().ok())
            .ok_or(ChunkHeaderProblem::Truncated)?;
        if &h[0..4] != CHUNK_MAGIC {
            return Err(ChunkHeaderProblem::BadMagic);
        }
        let u16_at = |i: usize| u16::from_le_bytes([h[i], h[i + 1]]);
        let u32_at = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        let u64_at = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&h[i..i + 8]);
            u64::from_le_bytes(b)
        };
        let stored = u32_at(68);
        let computed = crc32c::crc32c(&h[..68]);
        if stored != computed {
            return Err(ChunkHeaderProblem::BadCrc { stored, computed });
        }
        let version = u16_at(4);
        if version != CHUNK_VERSION {
            return Err(ChunkHeaderProblem::Version(version));
        }
        if usize::from(u16_at(6)) != CHUNK_HEADER_LEN
            || h[18..24].iter().chain(&h[64..68]).any(|&b| b != 0)
        {
            return Err(ChunkHeaderProblem::Fields);
        }
        let head = ChunkHeader {
            job_tag: u64_at(8),
            stream: u16_at(16),
            seq: u64_at(24),
            first_block: u64_at(32),
            blocks: u64_at(40),
            first_offset: u64_at(48),
            end_offset: u64_at(56),
        };
        // Block seqs are `first_block + i` for every `i < blocks`: they must not overflow.
        if head.end_offset < head.first_offset
            || head.first_block.checked_add(head.blocks).is_none()
        {
            return Err(ChunkHeaderProblem::Fields);
        }
        Ok(head)
    }
}

/// Whether `len` can be the length of a block.
pub(crate) fn block_len_ok(len: usize) -> bool {
    (BLOCK_HEADER_LEN..=MAX_BLOCK_SIZE).contains(&len)
}

/// Writes at least this long skip the writer's buffer.
const DIRECT_WRITE: usize = 16 * 1024;

/// Writes one chunk file of a stream: the stream's consecutive blocks, sealed as for
/// tape with a zero volume and the block's seq as LBN, each after its length.
///
/// The file is `NAME.tlc.part` until [`ChunkWriter::finish`] has flushed it, renamed
/// it to `NAME.tlc` and flushed its folder; only then may it be recorded in the
/// catalog. Dropped unfinished, the `.part` file stays behind for the next open of the
/// stages to remove.
pub struct ChunkWriter {
    file: BufWriter<File>,
    part: PathBuf,
    path: PathBuf,
    rel: String,
    job_id: i64,
    head: ChunkHeader,
    bytes: u64,
}

impl ChunkWriter {
    /// Starts chunk `seq` of `stream` of a job on the stage at `stage`, its first
    /// block being the stream's block `first_block`.
    pub fn create(
        stage: &Path,
        job_id: i64,
        job_tag: u64,
        stream: u16,
        seq: u64,
        first_block: u64,
    ) -> Result<Self> {
        let rel = chunk_file(job_id, stream, seq);
        let path = stage.join(&rel);
        let part = path.with_extension(&PART_SUFFIX[1..]);
        if let Some(dir) = path.parent() {
            io(std::fs::create_dir_all(dir), || {
                format!("create {}", dir.display())
            })?;
        }
        let file = io(File::create(&part), || format!("create {}", part.display()))?;
        let head = ChunkHeader {
            job_tag,
            stream,
            seq,
            first_block,
            blocks: 0,
            first_offset: 0,
            end_offset: 0,
        };
        let mut w = ChunkWriter {
            file: BufWriter::with_capacity(64 * 1024, file),
            part,
            path,
            rel,
            job_id,
            head,
            bytes: 0,
        };
        // The real header goes in at the end, when the counts are known.
        let placeholder = head.encode();
        w.write(&placeholder)?;
        Ok(w)
    }

    /// Bytes the file holds so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Blocks written so far.
    pub fn blocks(&self) -> u64 {
        self.head.blocks
    }

    /// The stream's block seq the next block must have.
    pub fn next_block(&self) -> u64 {
        self.head.first_block + self.head.blocks
    }

    /// The file being written (`NAME.tlc.part`).
    pub fn part_path(&self) -> &Path {
        &self.part
    }

    /// Seals a packed block (zero volume, its seq as LBN) and appends it. It must be
    /// the stream's next block.
    pub fn push(&mut self, block: &mut PackedBlock) -> Result<()> {
        self.check(&block.header, block.seq)?;
        block.seal([0; 16], block.seq);
        self.append(&block.header, &block.buf)
    }

    /// Appends a block sealed already (zero volume, its seq as LBN), after checking
    /// its CRC. It must be the stream's next block.
    pub fn push_sealed(&mut self, block: &[u8]) -> Result<()> {
        let h = BlockHeader::open(block)?;
        self.check(&h, h.lbn)?;
        if h.volume != [0; 16] {
            return Err(self.misplaced("sealed for a volume"));
        }
        self.append(&h, block)
    }

    fn check(&self, h: &BlockHeader, seq: u64) -> Result<()> {
        let what = if h.job_tag != self.head.job_tag {
            "another job"
        } else if h.stream != self.head.stream {
            "another stream"
        } else if seq != self.next_block() {
            "not the next block"
        } else if self.head.blocks > 0 && h.stream_offset != self.head.end_offset {
            "not the next stream offset"
        } else {
            return Ok(());
        };
        Err(self.misplaced(what))
    }

    fn misplaced(&self, what: &'static str) -> crate::Error {
        StageError::MisplacedBlock {
            path: self.part.clone(),
            stream: self.head.stream,
            seq: self.next_block(),
            what,
        }
        .into()
    }

    fn append(&mut self, h: &BlockHeader, block: &[u8]) -> Result<()> {
        if !block_len_ok(block.len()) {
            return Err(StageError::BlockLength {
                path: self.part.clone(),
                len: block.len() as u32,
                at: self.bytes,
            }
            .into());
        }
        self.write(&(block.len() as u32).to_le_bytes())?;
        self.write(block)?;
        if self.head.blocks == 0 {
            self.head.first_offset = h.stream_offset;
        }
        self.head.blocks += 1;
        self.head.end_offset = h.stream_offset + u64::from(h.payload_len);
        Ok(())
    }

    fn write(&mut self, b: &[u8]) -> Result<()> {
        let written = if b.len() >= DIRECT_WRITE {
            // A block goes to the file as it is, not copied into the buffer first.
            (self.file.flush()).and_then(|()| self.file.get_mut().write_all(b))
        } else {
            self.file.write_all(b)
        };
        io(written, || format!("write {}", self.part.display()))?;
        self.bytes += b.len() as u64;
        Ok(())
    }

    /// Completes the chunk: writes its header, flushes it to disk, gives it its final
    /// name and flushes its folder. Returns its row for the catalog, on stage
    /// `stage_id`; the caller records it.
    pub fn finish(self, stage_id: i64) -> Result<StagedChunk> {
        let ChunkWriter {
            file,
            part,
            path,
            rel,
            job_id,
            head,
            bytes,
        } = self;
        let what = || format!("write {}", part.display());
        let mut file = io(file.into_inner().map_err(|e| e.into_error()), what)?;
        io(file.seek(SeekFrom::Start(0)), what)?;
        io(file.write_all(&head.encode()), what)?;
        io(file.sync_all(), what)?;
        drop(file);
        io(std::fs::rename(&part, &path), || {
            format!("rename {} to {CHUNK_SUFFIX}", part.display())
        })?;
        if let Some(dir) = path.parent() {
            io(sync_dir(dir), || format!("flush {}", dir.display()))?;
        }
        Ok(StagedChunk {
            job_id,
            stream: head.stream,
            seq: head.seq,
            stage_id,
            file: rel,
            first_block: head.first_block,
            blocks: head.blocks,
            stream_offset: head.first_offset,
            bytes,
            state: ChunkState::Spooled,
            created_ns: now_ns(),
            keep_until_ns: None,
        })
    }

    /// Gives up the chunk and removes its `.part` file.
    pub fn abandon(self) -> Result<()> {
        let part = self.part.clone();
        drop(self);
        io(std::fs::remove_file(&part), || {
            format!("remove {}", part.display())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn headers_round_trip(job_tag in any::<u64>(), stream in any::<u16>(), seq in any::<u64>(),
                              first_block in 0u64..1 << 62, blocks in 0u64..1 << 62,
                              first_offset in 0u64..1 << 62, len in 0u64..1 << 62) {
            let h = ChunkHeader { job_tag, stream, seq, first_block, blocks, first_offset,
                                  end_offset: first_offset + len };
            prop_assert_eq!(ChunkHeader::decode(&h.encode()), Ok(h));
        }

        #[test]
        fn block_seqs_that_overflow_are_refused(first_block in 1u64.., extra in 0u64..1 << 20) {
            let blocks = (u64::MAX - first_block).saturating_add(1).saturating_add(extra);
            prop_assume!(first_block.checked_add(blocks).is_none());
            let h = ChunkHeader { job_tag: 9, stream: 2, seq: 1, first_block, blocks,
                                  first_offset: 10, end_offset: 20 };
            prop_assert_eq!(ChunkHeader::decode(&h.encode()), Err(ChunkHeaderProblem::Fields));
        }

        #[test]
        fn any_flip_of_a_header_is_caught(pos in 0usize..CHUNK_HEADER_LEN, bit in 0u8..8) {
            let h = ChunkHeader { job_tag: 9, stream: 2, seq: 1, first_block: 5, blocks: 3,
                                  first_offset: 10, end_offset: 20 };
            let mut b = h.encode();
            b[pos] ^= 1 << bit;
            prop_assert!(ChunkHeader::decode(&b).is_err());
        }

        #[test]
        fn decoding_never_panics(b in proptest::collection::vec(any::<u8>(), 0..100)) {
            let _ = ChunkHeader::decode(&b);
        }
    }

    #[test]
    fn header_problems_are_variants() {
        let h = ChunkHeader {
            job_tag: 1,
            stream: 0,
            seq: 0,
            first_block: 0,
            blocks: 0,
            first_offset: 0,
            end_offset: 0,
        };
        let b = h.encode();
        assert_eq!(
            ChunkHeader::decode(&b[..10]),
            Err(ChunkHeaderProblem::Truncated)
        );
        let mut m = b;
        m[0] = b'X';
        assert_eq!(ChunkHeader::decode(&m), Err(ChunkHeaderProblem::BadMagic));
        let mut v = b;
        v[4] = 9;
        let crc = crc32c::crc32c(&v[..68]);
        v[68..72].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(ChunkHeader::decode(&v), Err(ChunkHeaderProblem::Version(9)));
    }
}
