//! Reads a chunk file's blocks back, each checked before it is returned.

use super::chunk::{block_len_ok, ChunkHeader};
use crate::error::{io, Result, StageError};
use std::fs::File;
use std::io::{BufReader, ErrorKind, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use tapeloom_format::BlockHeader;

/// A block read from a chunk file, its CRC checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagedBlock {
    /// The block's seq within its stream.
    pub seq: u64,
    /// Its header (zero volume, `lbn` = `seq`).
    pub header: BlockHeader,
    /// The whole sealed block, as it goes to tape once sealed again for its volume
    /// and LBN.
    pub block: Vec<u8>,
}

/// Iterates over the blocks of a chunk file.
///
/// Every block is opened with [`BlockHeader::open`] (magic, version, CRC) and must be
/// the stream's next block. A damaged block is [`StageError::DamagedBlock`], naming the
/// stream bytes lost; reading goes on after it. A file cut short is
/// [`StageError::TornTail`], a block length no block has is [`StageError::BlockLength`];
/// after those the iterator ends.
pub struct ChunkReader {
    file: BufReader<File>,
    path: PathBuf,
    head: ChunkHeader,
    /// Blocks returned or reported damaged.
    done: u64,
    /// Stream offset the next block starts at.
    next_offset: u64,
    /// Whether reading cannot go on.
    stopped: bool,
}

/// The outcome of reading one length-prefixed block.
enum Next {
    Block(Vec<u8>),
    Torn,
    BadLength(u32),
}

impl ChunkReader {
    /// Opens a chunk file and checks its header.
    pub fn open(path: &Path) -> Result<Self> {
        let file = io(File::open(path), || format!("open {}", path.display()))?;
        // A small buffer: a block (64 KiB at least) is read past it, straight
        // into its own memory, not copied through it.
        let mut file = BufReader::with_capacity(8 * 1024, file);
        let mut h = [0u8; super::CHUNK_HEADER_LEN];
        let head = match read_full(&mut file, &mut h) {
            Ok(true) => ChunkHeader::decode(&h),
            Ok(false) => Err(crate::ChunkHeaderProblem::Truncated),
            Err(e) => return io(Err(e), || format!("read {}", path.display())),
        }
        .map_err(|problem| StageError::ChunkHeader {
            path: path.to_path_buf(),
            problem,
        })?;
        Ok(ChunkReader {
            file,
            path: path.to_path_buf(),
            head,
            done: 0,
            next_offset: head.first_offset,
            stopped: false,
        })
    }

    /// Opens a chunk file that must hold blocks of job `job_tag`'s `stream`
    /// ([`StageError::WrongChunk`] otherwise).
    pub fn open_expecting(path: &Path, job_tag: u64, stream: u16) -> Result<Self> {
        let r = Self::open(path)?;
        if r.head.job_tag != job_tag || r.head.stream != stream {
            return Err(StageError::WrongChunk {
                path: path.to_path_buf(),
                job_tag,
                stream,
                found_tag: r.head.job_tag,
                found_stream: r.head.stream,
            }
            .into());
        }
        Ok(r)
    }

    /// The job tag its header names.
    pub fn job_tag(&self) -> u64 {
        self.head.job_tag
    }

    /// The stream its header names.
    pub fn stream(&self) -> u16 {
        self.head.stream
    }

    /// The chunk's number within the stream.
    pub fn seq(&self) -> u64 {
        self.head.seq
    }

    /// Stream seq of its first block.
    pub fn first_block(&self) -> u64 {
        self.head.first_block
    }

    /// Number of blocks its header counts.
    pub fn blocks(&self) -> u64 {
        self.head.blocks
    }

    /// Stream offsets it covers: from its first block's payload to after its last.
    pub fn stream_range(&self) -> std::ops::Range<u64> {
        self.head.first_offset..self.head.end_offset
    }

    fn read_next(&mut self) -> std::io::Result<Next> {
        let mut len = [0u8; 4];
        if !read_full(&mut self.file, &mut len)? {
            return Ok(Next::Torn);
        }
        let len = u32::from_le_bytes(len);
        if !block_len_ok(len as usize) {
            return Ok(Next::BadLength(len));
        }
        // Read into memory not zeroed first.
        let mut block = Vec::with_capacity(len as usize);
        (&mut self.file)
            .take(u64::from(len))
            .read_to_end(&mut block)?;
        if block.len() < len as usize {
            return Ok(Next::Torn);
        }
        Ok(Next::Block(block))
    }

    /// Stream offset of the next intact block after a damaged one, or the chunk's
    /// end; leaves the file where it was.
    fn next_intact_offset(&mut self) -> std::io::Result<u64> {
        let here = self.file.stream_position()?;
        let mut to = self.head.end_offset;
        for _ in self.done + 1..self.head.blocks {
            match self.read_next()? {
                Next::Block(b) => {
                    if let Ok(h) = BlockHeader::open(&b) {
                        to = h.stream_offset;
                        break;
                    }
                }
                Next::Torn | Next::BadLength(_) => break,
            }
        }
        self.file.seek(SeekFrom::Start(here))?;
        Ok(to.max(self.next_offset))
    }

    fn step(&mut self) -> Result<StagedBlock> {
        let seq = self.head.first_block + self.done;
        let stream = self.head.stream;
        let path = self.path.clone();
        let what = || format!("read {}", path.display());
        let block = match io(self.read_next(), what)? {
            Next::Block(b) => b,
            Next::Torn => {
                self.stopped = true;
                return Err(StageError::TornTail {
                    path: self.path.clone(),
                    stream,
                    blocks: self.done,
                    expected: self.head.blocks,
                }
                .into());
            }
            Next::BadLength(len) => {
                self.stopped = true;
                let at = io(self.file.stream_position(), what)?.saturating_sub(4);
                return Err(StageError::BlockLength {
                    path: self.path.clone(),
                    len,
                    at,
                }
                .into());
            }
        };
        let header = match BlockHeader::open(&block) {
            Ok(h) => h,
            Err(source) => {
                let from = self.next_offset;
                let to = io(self.next_intact_offset(), what)?;
                self.done += 1;
                self.next_offset = to;
                return Err(StageError::DamagedBlock {
                    path: self.path.clone(),
                    stream,
                    seq,
                    from,
                    to,
                    source,
                }
                .into());
            }
        };
        self.done += 1;
        let end = header
            .stream_offset
            .checked_add(u64::from(header.payload_len));
        let misplaced = if header.job_tag != self.head.job_tag {
            Some("another job")
        } else if header.stream != stream {
            Some("another stream")
        } else if header.lbn != seq {
            Some("another block seq")
        } else if header.volume != [0; 16] {
            Some("sealed for a volume")
        } else if header.stream_offset != self.next_offset {
            Some("another stream offset")
        } else if end.is_none() {
            Some("a payload past the end of any stream")
        } else {
            None
        };
        self.next_offset = end.unwrap_or(u64::MAX);
        if let Some(what) = misplaced {
            return Err(StageError::MisplacedBlock {
                path: self.path.clone(),
                stream,
                seq,
                what,
            }
            .into());
        }
        Ok(StagedBlock { seq, header, block })
    }
}

impl Iterator for ChunkReader {
    type Item = Result<StagedBlock>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.stopped || self.done >= self.head.blocks {
            return None;
        }
        Some(self.step())
    }
}

/// Fills `buf`; `false` when the file ends first.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<bool> {
    match r.read_exact(buf) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(e),
    }
}
