//! The 64-byte header of every data block (FORMAT.md 4.2).

use crate::codec::{Dec, Enc};
use crate::{FormatError, Result, READ_VERSION, WRITE_VERSION};

/// Magic at the start of every data block.
pub const BLOCK_MAGIC: &[u8; 4] = b"TLBK";
/// Length of the block header.
pub const BLOCK_HEADER_LEN: usize = 64;
/// `first_record` value of a block in which no record starts.
pub const NO_RECORD: u32 = u32::MAX;

/// The header fields of a data block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHeader {
    /// Volume the block was written to.
    pub volume: [u8; 16],
    /// Logical block number where the block was written.
    pub lbn: u64,
    /// Job the block belongs to.
    pub job_tag: u64,
    /// Stream the payload belongs to.
    pub stream: u16,
    /// Number of payload bytes after the header.
    pub payload_len: u32,
    /// Stream offset of the first payload byte.
    pub stream_offset: u64,
    /// Payload offset of the first record starting here, or [`NO_RECORD`].
    pub first_record: u32,
    /// The payload is stored as one zstd frame (format version 2): the block is the
    /// header and the frame, with no padding, and `payload_len` is the length the
    /// frame expands to.
    pub compressed: bool,
    /// The stored payload (the payload, or the zstd frame) is encrypted with
    /// AES-256-GCM (format version 3): it is followed by the nonce and the tag
    /// ([`crate::CRYPT_TAIL_LEN`] bytes), and the block reads only with the job's
    /// data key.
    pub encrypted: bool,
}

/// The stream of a block from its header alone, without checking the block: `None`
/// for bytes that do not begin with a block header. What a store that keeps only
/// the headers of data blocks looks at (stream 0 holds the job's own records).
pub fn block_stream(block: &[u8]) -> Option<u16> {
    if block.len() < BLOCK_HEADER_LEN || &block[..4] != BLOCK_MAGIC {
        return None;
    }
    Some(u16::from_le_bytes([block[40], block[41]]))
}

/// Flag bit of a block whose payload is a zstd frame.
const FLAG_ZSTD: u16 = 1;
/// Flag bit of a block whose stored payload is encrypted.
const FLAG_AES_GCM: u16 = 2;

impl BlockHeader {
    /// Writes the header into `block[..64]` and the CRC over the whole block.
    /// `block` is the full block (header, payload and padding; or header and zstd
    /// frame when compressed).
    pub fn seal(&self, block: &mut [u8]) {
        block[..60].copy_from_slice(&self.encode_fields());
        let crc = block_crc(block);
        block[60..64].copy_from_slice(&crc.to_le_bytes());
    }

    /// Writes the header into `block[..64]` as [`BlockHeader::seal`] does, for a
    /// block whose CRC is right for it as it is: only the header's part of the CRC
    /// is computed again, not the payload's (see [`reseal_crc`]).
    pub fn reseal(&self, block: &mut [u8]) {
        let new = self.encode_fields();
        if block[..60] == new[..] {
            return;
        }
        let stored = u32::from_le_bytes([block[60], block[61], block[62], block[63]]);
        let crc = reseal_crc(stored, &block[..60], &new, block.len() - BLOCK_HEADER_LEN);
        block[..60].copy_from_slice(&new);
        block[60..64].copy_from_slice(&crc.to_le_bytes());
    }

    /// Moves a block whose CRC is right to another place: its header's volume
    /// UUID and LBN become `volume` and `lbn`, the CRC is made right for them,
    /// and nothing else changes. Every other header byte stays as it was written
    /// (the versions included), so an encrypted block keeps its associated data
    /// and its tag holds. How a copy writes the original's blocks. A block shorter
    /// than a header is left as it is.
    pub fn relocate(block: &mut [u8], volume: [u8; 16], lbn: u64) {
        if block.len() < BLOCK_HEADER_LEN {
            return;
        }
        let mut new = [0u8; 60];
        new.copy_from_slice(&block[..60]);
        new[8..24].copy_from_slice(&volume);
        new[24..32].copy_from_slice(&lbn.to_le_bytes());
        let stored = u32::from_le_bytes([block[60], block[61], block[62], block[63]]);
        let crc = reseal_crc(stored, &block[..60], &new, block.len() - BLOCK_HEADER_LEN);
        block[..60].copy_from_slice(&new);
        block[60..64].copy_from_slice(&crc.to_le_bytes());
    }

    /// The read version a block with these flags has.
    fn read_version(&self) -> u8 {
        // Readers of version 1 would take a zstd frame for records, readers of
        // version 2 ciphertext for a payload.
        if self.encrypted {
            3
        } else if self.compressed {
            2
        } else {
            1
        }
    }

    fn flags(&self) -> u16 {
        let mut f = 0;
        if self.compressed {
            f |= FLAG_ZSTD;
        }
        if self.encrypted {
            f |= FLAG_AES_GCM;
        }
        f
    }

    /// Header bytes 0..60, without the CRC.
    fn encode_fields(&self) -> Vec<u8> {
        let mut h = Vec::with_capacity(BLOCK_HEADER_LEN);
        let mut e = Enc(&mut h);
        e.raw(BLOCK_MAGIC);
        e.u8(WRITE_VERSION as u8);
        e.u8(self.read_version());
        e.u16(BLOCK_HEADER_LEN as u16);
        e.raw(&self.volume);
        e.u64(self.lbn);
        e.u64(self.job_tag);
        e.u16(self.stream);
        e.u16(self.flags());
        e.u32(self.payload_len);
        e.u64(self.stream_offset);
        e.u32(self.first_record);
        h
    }

    /// The associated data an encrypted block's tag covers: header bytes 0..8 and
    /// 32..60, every field but where the block landed (volume, LBN) and the CRC, which
    /// are filled in when it is written and may change (a block refused at end of
    /// medium is written again elsewhere; a staged block goes to tape later).
    pub fn associated_data(&self) -> [u8; 36] {
        let h = self.encode_fields();
        let mut a = [0u8; 36];
        a[..8].copy_from_slice(&h[..8]);
        a[8..].copy_from_slice(&h[32..60]);
        a
    }

    /// Decodes and checks a whole block: magic, version, CRC and payload length.
    pub fn open(block: &[u8]) -> Result<Self> {
        if block.len() < BLOCK_HEADER_LEN {
            return Err(FormatError::Truncated("block"));
        }
        if &block[..4] != BLOCK_MAGIC {
            return Err(FormatError::BadMagic("block"));
        }
        let stored = u32::from_le_bytes([block[60], block[61], block[62], block[63]]);
        let computed = block_crc(block);
        if stored != computed {
            return Err(FormatError::BadCrc {
                what: "block",
                stored,
                computed,
            });
        }
        let mut d = Dec::new(&block[4..60], "block header");
        let _write_version = d.u8()?;
        let read_version = d.u8()?;
        if u16::from(read_version) > READ_VERSION {
            return Err(FormatError::UnsupportedVersion {
                what: "block",
                version: read_version.into(),
            });
        }
        let header_len = d.u16()?;
        if header_len as usize != BLOCK_HEADER_LEN {
            return Err(FormatError::HeaderLength(header_len));
        }
        let volume = d.array()?;
        let lbn = d.u64()?;
        let job_tag = d.u64()?;
        let stream = d.u16()?;
        let flags = d.u16()?;
        if flags & !(FLAG_ZSTD | FLAG_AES_GCM) != 0
            || (flags & FLAG_ZSTD != 0 && read_version < 2)
            || (flags & FLAG_AES_GCM != 0 && read_version < 3)
        {
            return Err(FormatError::UnknownBlockFlags(flags));
        }
        let compressed = flags & FLAG_ZSTD != 0;
        let encrypted = flags & FLAG_AES_GCM != 0;
        let tail = if encrypted { crate::CRYPT_TAIL_LEN } else { 0 };
        let payload_len = d.u32()?;
        let stream_offset = d.u64()?;
        let first_record = d.u32()?;
        if compressed && payload_len as usize > crate::MAX_BLOCK_SIZE - BLOCK_HEADER_LEN {
            return Err(FormatError::CompressedPayloadTooLong(payload_len));
        }
        if compressed && block.len() < BLOCK_HEADER_LEN + tail {
            return Err(FormatError::Truncated("block"));
        }
        if !compressed && payload_len as usize + tail > block.len() - BLOCK_HEADER_LEN {
            return Err(FormatError::PayloadTooLong(payload_len));
        }
        if first_record != NO_RECORD && first_record >= payload_len {
            return Err(FormatError::FirstRecordOutside(first_record));
        }
        Ok(BlockHeader {
            volume,
            lbn,
            job_tag,
            stream,
            payload_len,
            stream_offset,
            first_record,
            compressed,
            encrypted,
        })
    }

    /// The payload of a block opened with [`BlockHeader::open`]; for a compressed
    /// block, the zstd frame (which expands to `payload_len` bytes); for an encrypted
    /// one, the ciphertext (without nonce and tag).
    pub fn payload<'a>(&self, block: &'a [u8]) -> &'a [u8] {
        let end = if self.compressed {
            let tail = if self.encrypted {
                crate::CRYPT_TAIL_LEN
            } else {
                0
            };
            block.len().saturating_sub(tail)
        } else {
            BLOCK_HEADER_LEN + self.payload_len as usize
        };
        block.get(BLOCK_HEADER_LEN..end).unwrap_or(&[])
    }
}

/// The length of the block that begins at `bytes[0]`, found from its CRC alone, for a
/// reader that has blocks back to back without their lengths (a virtual cartridge
/// whose index is lost, FORMAT.md 8). The candidates for its end are the places
/// where another block's magic begins and, when `last` (nothing follows `bytes`),
/// the end of `bytes`; the first at which the block's CRC holds is its end, so a
/// block whose payload holds whole blocks of its own is still found whole. None
/// when `bytes` does not begin with a block's magic, or no candidate within the
/// largest block size ([`crate::MAX_BLOCK_SIZE`]) holds: the block is damaged or cut.
pub fn block_len(bytes: &[u8], last: bool) -> Option<usize> {
    let stored = u32::from_le_bytes(bytes.get(60..64)?.try_into().ok()?);
    if bytes.get(..4)? != BLOCK_MAGIC {
        return None;
    }
    let limit = bytes.len().min(crate::MAX_BLOCK_SIZE);
    let mut crc = crc32c::crc32c(&bytes[..60]);
    let mut done = BLOCK_HEADER_LEN;
    let mut from = BLOCK_HEADER_LEN;
    loop {
        let next = bytes
            .get(from..)?
            .windows(BLOCK_MAGIC.len())
            .position(|w| w == BLOCK_MAGIC)
            .map(|p| from + p)
            .filter(|&p| p <= limit);
        let end = match next {
            Some(p) => p,
            None if last && bytes.len() <= crate::MAX_BLOCK_SIZE => bytes.len(),
            None => return None,
        };
        crc = crc32c::crc32c_append(crc, &bytes[done..end]);
        done = end;
        if crc == stored {
            return Some(end);
        }
        if end == bytes.len() {
            return None;
        }
        from = end + 1;
    }
}

/// The CRC of `new` followed by `rest` bytes, given `crc`, the CRC of `old`
/// followed by the same bytes (`old` and `new` of one length).
///
/// A CRC is linear: the CRCs of two messages of one length differ by the CRC
/// of their difference, so the two differ by the CRC of `old` xor `new` moved past
/// `rest` zero bytes, which is a product by x^(8 rest) modulo the polynomial.
/// That costs about a microsecond where the CRC of a 1 MiB payload costs about
/// fifty; zlib's `crc32_combine` works the same way.
fn reseal_crc(crc: u32, old: &[u8], new: &[u8], rest: usize) -> u32 {
    let diff = crc32c::crc32c(old) ^ crc32c::crc32c(new);
    crc ^ gf2_mul(diff, x_pow_8n(rest as u64))
}

/// The CRC-32C polynomial, bit-reflected.
const CRC32C_POLY: u32 = 0x82F6_3B78;

/// The product of `a` and `b`, polynomials of the bit-reflected CRC-32C (x^0 in
/// the top bit), modulo the polynomial.
fn gf2_mul(a: u32, mut b: u32) -> u32 {
    let mut m = 1u32 << 31;
    let mut p = 0;
    while m != 0 {
        if a & m != 0 {
            p ^= b;
            if a & (m - 1) == 0 {
                break;
            }
        }
        m >>= 1;
        b = if b & 1 != 0 {
            (b >> 1) ^ CRC32C_POLY
        } else {
            b >> 1
        };
    }
    p
}

/// x^(8 n) modulo the CRC-32C polynomial: what moves a CRC past n zero bytes.
fn x_pow_8n(mut n: u64) -> u32 {
    // x^(2^k), starting at k = 3 (x^8, one byte).
    let mut square = 1u32 << (31 - 8);
    let mut p = 1u32 << 31;
    while n != 0 {
        if n & 1 != 0 {
            p = gf2_mul(square, p);
        }
        square = gf2_mul(square, square);
        n >>= 1;
    }
    p
}

fn block_crc(block: &[u8]) -> u32 {
    let c = crc32c::crc32c(&block[..60]);
    crc32c::crc32c_append(c, &block[64..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn header() -> impl Strategy<Value = BlockHeader> {
        (
            any::<[u8; 16]>(),
            any::<u64>(),
            any::<u64>(),
            any::<u16>(),
            0u32..4000,
            any::<u64>(),
            any::<u32>(),
            any::<bool>(),
        )
            .prop_map(
                |(volume, lbn, job_tag, stream, payload_len, stream_offset, fr, compressed)| {
                    let encrypted = lbn % 3 == 0;
                    BlockHeader {
                        volume,
                        lbn,
                        job_tag,
                        stream,
                        payload_len,
                        stream_offset,
                        first_record: if payload_len == 0 {
                            NO_RECORD
                        } else {
                            fr % payload_len
                        },
                        compressed,
                        encrypted,
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn round_trip(h in header(), fill in any::<u8>()) {
            let mut b = vec![0u8; 4096];
            for x in &mut b[64..64 + h.payload_len as usize] { *x = fill; }
            h.seal(&mut b);
            let o = BlockHeader::open(&b).unwrap();
            prop_assert_eq!(o, h);
            let tail = if h.encrypted { crate::CRYPT_TAIL_LEN } else { 0 };
            let want = if h.compressed { 4096 - 64 - tail } else { h.payload_len as usize };
            prop_assert_eq!(o.payload(&b).len(), want);
        }

        #[test]
        fn any_flip_is_caught(h in header(), pos in 0usize..4096, bit in 0u8..8) {
            let mut b = vec![0u8; 4096];
            h.seal(&mut b);
            b[pos] ^= 1 << bit;
            prop_assert!(BlockHeader::open(&b).is_err());
        }

        /// A block moved to another volume and LBN has a right CRC, and every
        /// other byte as it was, even the write version of an older writer.
        #[test]
        fn a_relocated_block_has_its_new_place_and_every_other_byte_kept(
            a in header(),
            volume in any::<[u8; 16]>(),
            lbn in any::<u64>(),
            body in proptest::collection::vec(any::<u8>(), 0..5000),
        ) {
            let mut block = vec![0u8; 64];
            block.extend_from_slice(&body);
            a.seal(&mut block);
            // A block of an older writer: write version 3, as on tapes of
            // version 3, whose encrypted blocks bind it in their tag.
            block[4] = 3;
            let crc = block_crc(&block);
            block[60..64].copy_from_slice(&crc.to_le_bytes());
            let before = block.clone();
            BlockHeader::relocate(&mut block, volume, lbn);
            prop_assert_eq!(&block[8..24], &volume[..]);
            prop_assert_eq!(&block[24..32], &lbn.to_le_bytes()[..]);
            prop_assert_eq!(block_crc(&block), u32::from_le_bytes([block[60], block[61], block[62], block[63]]));
            prop_assert_eq!(&block[..8], &before[..8]);
            prop_assert_eq!(&block[32..60], &before[32..60]);
            prop_assert_eq!(&block[64..], &before[64..]);
        }

        /// A block sealed again with other fields gets the CRC a seal would give
        /// it, for any payload and length.
        #[test]
        fn reseal_gives_the_crc_a_seal_gives(
            a in header(),
            b in header(),
            body in proptest::collection::vec(any::<u8>(), 0..5000),
        ) {
            let mut block = vec![0u8; 64];
            block.extend_from_slice(&body);
            a.seal(&mut block);
            let mut sealed = block.clone();
            b.seal(&mut sealed);
            b.reseal(&mut block);
            prop_assert_eq!(&block, &sealed);
        }

        #[test]
        fn never_panics(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = BlockHeader::open(&b);
        }
    }

    fn sealed(lbn: u64, len: usize, payload: &[u8]) -> Vec<u8> {
        let h = BlockHeader {
            volume: [1; 16],
            lbn,
            job_tag: 7,
            stream: 1,
            payload_len: payload.len() as u32,
            stream_offset: 0,
            first_record: NO_RECORD,
            compressed: false,
            encrypted: false,
        };
        let mut b = vec![0u8; len];
        b[64..64 + payload.len()].copy_from_slice(payload);
        h.seal(&mut b);
        b
    }

    #[test]
    fn block_len_finds_each_block_of_a_run_by_its_crc() {
        // The second block's payload holds a whole block of its own, as a backup of a
        // cartridge file would: it is found whole, not cut at the inner block.
        let inner = sealed(9, 4096, b"inner");
        let (a, b, c) = (
            sealed(2, 4096, b"a"),
            sealed(3, 16384, &inner),
            sealed(4, 8192, b"c"),
        );
        let run: Vec<u8> = [&a[..], &b[..], &c[..]].concat();
        assert_eq!(block_len(&run, true), Some(4096));
        assert_eq!(block_len(&run[4096..], true), Some(16384));
        assert_eq!(block_len(&run[4096 + 16384..], true), Some(8192));
        // The last block cut short, or followed by more bytes not known to end: no end.
        assert_eq!(block_len(&run[4096 + 16384..run.len() - 1], true), None);
        assert_eq!(block_len(&run[4096 + 16384..], false), None);
        // A damaged block has no end; bytes that are not a block neither.
        let mut bad = run.clone();
        bad[100] ^= 1;
        assert_eq!(block_len(&bad, true), None);
        assert_eq!(block_len(&run[1..], true), None);
        assert_eq!(block_len(&[], true), None);
    }
}
