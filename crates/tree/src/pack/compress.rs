//! Software compression of data blocks (zstd), with incompressible detection.
//!
//! Each stream's packer compresses its own blocks, so streams compress in parallel and
//! the drive's writer never waits on a compressor. Before compressing a block it
//! compresses a 16 KiB sample of it; data whose sample does not shrink by a tenth
//! (media, archives, encrypted files) is stored as it is, so such data costs a
//! sixteenth of a compression and no more. A block whose frame would not be at least
//! 3 % smaller than its payload is stored as it is too.

use std::sync::atomic::{AtomicU64, Ordering};
use tapeloom_format::{PackedBlock, BLOCK_HEADER_LEN};

/// Software compression of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compress {
    /// Store data as it is.
    None,
    /// zstd, with incompressible detection.
    Zstd,
    /// Whatever gives the best effective rate on the drive in use: the drive's own
    /// compressor when it has one and it is on, zstd when a tape drive's compressor
    /// is off, nothing on a library without a drive model (disk, faster than zstd on a
    /// few cores).
    #[default]
    Auto,
}

impl std::str::FromStr for Compress {
    type Err = crate::error::OptionsError;

    /// Parses `none`, `zstd` or `auto`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => Ok(Compress::None),
            "zstd" => Ok(Compress::Zstd),
            "auto" => Ok(Compress::Auto),
            _ => Err(crate::error::OptionsError::Compress {
                given: s.to_string(),
            }),
        }
    }
}

/// zstd level: level 1 compresses hundreds of MB/s per core, about what a tape drive
/// takes; higher levels gain a few percent of ratio at several times the CPU.
const LEVEL: i32 = 1;
const SAMPLE: usize = 16 * 1024;

/// What software compression did in a job.
#[derive(Debug, Default)]
pub struct CompressionCounters {
    /// Payload bytes offered.
    pub raw: AtomicU64,
    /// Bytes stored for them.
    pub stored: AtomicU64,
    /// Blocks stored compressed.
    pub compressed_blocks: AtomicU64,
    /// Blocks stored as they were (incompressible).
    pub raw_blocks: AtomicU64,
}

/// One stream's compressor.
pub struct Compressor {
    cctx: zstd::bulk::Compressor<'static>,
    out: Vec<u8>,
}

impl Compressor {
    pub fn new() -> Option<Self> {
        Some(Compressor {
            cctx: zstd::bulk::Compressor::new(LEVEL).ok()?,
            out: Vec::new(),
        })
    }

    /// Compresses the block's payload in place when that pays.
    pub fn block(&mut self, b: &mut PackedBlock, counters: &CompressionCounters) {
        let p = b.header.payload_len as usize;
        counters.raw.fetch_add(p as u64, Ordering::Relaxed);
        let stored = self.try_block(b, p).unwrap_or(p);
        counters.stored.fetch_add(stored as u64, Ordering::Relaxed);
        if b.header.compressed {
            counters.compressed_blocks.fetch_add(1, Ordering::Relaxed);
        } else {
            counters.raw_blocks.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn try_block(&mut self, b: &mut PackedBlock, p: usize) -> Option<usize> {
        let payload = b.buf.get(BLOCK_HEADER_LEN..BLOCK_HEADER_LEN + p)?;
        if p > 4 * SAMPLE {
            let at = (p - SAMPLE) / 2;
            self.out.resize(zstd::zstd_safe::compress_bound(SAMPLE), 0);
            let n = self
                .cctx
                .compress_to_buffer(&payload[at..at + SAMPLE], &mut self.out)
                .ok()?;
            if n * 10 > SAMPLE * 9 {
                return None;
            }
        }
        self.out.resize(zstd::zstd_safe::compress_bound(p), 0);
        let n = self.cctx.compress_to_buffer(payload, &mut self.out).ok()?;
        if n * 100 > p * 97 {
            return None;
        }
        b.buf.truncate(BLOCK_HEADER_LEN);
        b.buf.extend_from_slice(&self.out[..n]);
        b.header.compressed = true;
        b.changed();
        Some(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tapeloom_format::{expand_block, BlockHeader, StreamPacker};

    fn packed(data: &[u8]) -> PackedBlock {
        let mut p = StreamPacker::new(1, 7, 256 * 1024);
        p.write(data);
        p.finish_block();
        p.ready.remove(0)
    }

    #[test]
    fn compressible_blocks_shrink_and_expand_back() {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i / 7 % 13) as u8).collect();
        let mut b = packed(&data);
        let c = CompressionCounters::default();
        Compressor::new().unwrap().block(&mut b, &c);
        assert!(b.header.compressed);
        assert!(b.buf.len() < 20_000, "{}", b.buf.len());
        b.seal([1; 16], 5);
        let h = BlockHeader::open(&b.buf).unwrap();
        assert!(h.compressed);
        let mut out = Vec::new();
        expand_block(&h, &b.buf, &mut out).unwrap();
        assert_eq!(h.payload(&out), &data[..]);
        assert_eq!(c.compressed_blocks.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn random_blocks_are_stored_as_they_are() {
        let mut x = 88172645463325252u64;
        let data: Vec<u8> = (0..200_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let mut b = packed(&data);
        let c = CompressionCounters::default();
        Compressor::new().unwrap().block(&mut b, &c);
        assert!(!b.header.compressed);
        assert_eq!(b.buf.len(), 256 * 1024);
        assert_eq!(c.raw_blocks.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn damaged_frames_are_refused() {
        let data = vec![3u8; 100_000];
        let mut b = packed(&data);
        Compressor::new()
            .unwrap()
            .block(&mut b, &CompressionCounters::default());
        let mut out = Vec::new();
        let mut bad = b.buf.clone();
        let last = bad.len() - 3;
        bad[last] ^= 0x55;
        assert!(expand_block(&b.header, &bad, &mut out).is_err());
        let mut short = b.header;
        short.payload_len = 99_999;
        assert!(expand_block(&short, &b.buf, &mut out).is_err());
    }
}
