//! Cuts a stream's records into fixed-size blocks (FORMAT.md 4.2 and 5).

use crate::{BlockHeader, Kind, RecordHeader, BLOCK_HEADER_LEN, NO_RECORD};

/// A full block of one stream, ready to be sealed and written. The header's volume
/// and LBN are filled in by whoever writes it, since only the writer knows where it lands.
#[derive(Debug, Clone)]
pub struct PackedBlock {
    /// The whole block: header space, payload, zero padding.
    pub buf: Vec<u8>,
    /// Header fields known at packing time.
    pub header: BlockHeader,
    /// Number of this block within its stream, from 0.
    pub seq: u64,
    /// Whether the CRC in `buf` is right for `buf` as it is: the block was sealed
    /// or opened, and its bytes not changed since ([`PackedBlock::changed`]).
    crc_right: bool,
}

impl PackedBlock {
    /// A block not sealed yet.
    pub fn new(buf: Vec<u8>, header: BlockHeader, seq: u64) -> Self {
        PackedBlock {
            buf,
            header,
            seq,
            crc_right: false,
        }
    }

    /// A block opened with [`BlockHeader::open`] (its CRC checked), `header` what
    /// it gave.
    pub fn opened(buf: Vec<u8>, header: BlockHeader, seq: u64) -> Self {
        PackedBlock {
            buf,
            header,
            seq,
            crc_right: true,
        }
    }

    /// Says that `buf` was changed after the block was sealed or opened (its
    /// payload compressed, encrypted or expanded): the next seal computes the
    /// whole CRC.
    pub fn changed(&mut self) {
        self.crc_right = false;
    }

    /// Fills in where the block lands and seals it (header and CRC). A block
    /// sealed or opened before, its bytes not changed since, has only the header's
    /// part of its CRC computed again.
    pub fn seal(&mut self, volume: [u8; 16], lbn: u64) {
        self.header.volume = volume;
        self.header.lbn = lbn;
        if self.crc_right && self.buf.len() >= BLOCK_HEADER_LEN {
            self.header.reseal(&mut self.buf);
        } else {
            self.header.seal(&mut self.buf);
        }
        self.crc_right = true;
    }
}

/// Packs one stream's records into blocks.
///
/// Records are written with [`StreamPacker::begin_record`] followed by exactly the
/// announced number of body bytes, through [`StreamPacker::write`] or the zero-copy pair
/// [`StreamPacker::space`] / [`StreamPacker::commit`]. Full blocks collect in
/// [`StreamPacker::ready`] for the caller to drain.
pub struct StreamPacker {
    stream: u16,
    job_tag: u64,
    block_size: usize,
    tail: usize,
    buf: Vec<u8>,
    len: usize,
    first_record: u32,
    block_offset: u64,
    seq: u64,
    spare: Vec<Vec<u8>>,
    /// Blocks that are full, in stream order.
    pub ready: Vec<PackedBlock>,
}

impl StreamPacker {
    /// A packer for `stream` of job `job_tag` with blocks of `block_size` bytes.
    pub fn new(stream: u16, job_tag: u64, block_size: usize) -> Self {
        StreamPacker {
            stream,
            job_tag,
            block_size,
            tail: 0,
            buf: vec![0; block_size],
            len: 0,
            first_record: NO_RECORD,
            block_offset: 0,
            seq: 0,
            spare: Vec::new(),
            ready: Vec::new(),
        }
    }

    /// Keeps `tail` bytes of every block free after the payload: room for an
    /// encrypted block's nonce and tag ([`crate::CRYPT_TAIL_LEN`]).
    pub fn with_tail(mut self, tail: usize) -> Self {
        self.tail = tail;
        self
    }

    /// Gives a written block's buffer back for reuse.
    pub fn recycle(&mut self, mut buf: Vec<u8>) {
        // A compressed block's buffer was cut short; its capacity is still whole.
        if buf.capacity() >= self.block_size && self.spare.len() < 4 {
            buf.resize(self.block_size, 0);
            buf[..BLOCK_HEADER_LEN].fill(0);
            self.spare.push(buf);
        }
    }

    fn capacity(&self) -> usize {
        self.block_size - BLOCK_HEADER_LEN - self.tail
    }

    /// Stream offset of the next byte.
    pub fn offset(&self) -> u64 {
        self.block_offset + self.len as u64
    }

    /// Starts a record and returns where it starts: (block seq, payload offset).
    pub fn begin_record(&mut self, kind: Kind, len: u64) -> (u64, u32) {
        if self.len == self.capacity() {
            self.emit();
        }
        let at = (self.seq, self.len as u32);
        if self.first_record == NO_RECORD {
            self.first_record = self.len as u32;
        }
        self.write(&RecordHeader { kind, len }.encode());
        at
    }

    /// Writes a whole record and returns where it starts.
    pub fn record(&mut self, kind: Kind, body: &[u8]) -> (u64, u32) {
        let at = self.begin_record(kind, body.len() as u64);
        self.write(body);
        at
    }

    /// Appends body bytes.
    pub fn write(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            let space = self.space();
            let n = space.len().min(data.len());
            space[..n].copy_from_slice(&data[..n]);
            self.commit(n);
            data = &data[n..];
        }
    }

    /// The free payload space of the current block (never empty).
    pub fn space(&mut self) -> &mut [u8] {
        if self.len == self.capacity() {
            self.emit();
        }
        let start = BLOCK_HEADER_LEN + self.len;
        let end = BLOCK_HEADER_LEN + self.capacity();
        &mut self.buf[start..end]
    }

    /// Marks `n` bytes of [`StreamPacker::space`] as written.
    pub fn commit(&mut self, n: usize) {
        debug_assert!(self.len + n <= self.capacity());
        self.len += n;
    }

    /// Ends the current block early so that the next record starts a new block.
    pub fn finish_block(&mut self) {
        if self.len > 0 {
            self.emit();
        }
    }

    /// Block seq of the block currently being filled.
    pub fn current_seq(&self) -> u64 {
        self.seq
    }

    /// Bytes in the block currently being filled.
    pub fn pending_len(&self) -> usize {
        self.len
    }

    fn emit(&mut self) {
        let fresh = self.spare.pop().unwrap_or_else(|| vec![0; self.block_size]);
        let mut buf = std::mem::replace(&mut self.buf, fresh);
        buf[BLOCK_HEADER_LEN + self.len..].fill(0);
        let header = BlockHeader {
            volume: [0; 16],
            lbn: 0,
            job_tag: self.job_tag,
            stream: self.stream,
            payload_len: self.len as u32,
            stream_offset: self.block_offset,
            first_record: self.first_record,
            compressed: false,
            encrypted: false,
        };
        self.ready.push(PackedBlock::new(buf, header, self.seq));
        self.block_offset += self.len as u64;
        self.len = 0;
        self.first_record = NO_RECORD;
        self.seq += 1;
    }
}
