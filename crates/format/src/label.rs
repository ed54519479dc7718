//! The volume label at logical block 0 (FORMAT.md 4.1).

use crate::codec::{Dec, Enc};
use crate::{FormatError, Result, Timestamp, READ_VERSION};

/// Magic at the start of a volume label.
pub const LABEL_MAGIC: &[u8; 8] = b"TAPELOOM";
/// Length of the label block in bytes.
pub const LABEL_LEN: usize = 1024;
/// The write version of the labels this code writes (4: the generation at offset
/// 112). Their read version stays 1: older readers ignore the generation.
pub const LABEL_WRITE_VERSION: u16 = 4;
/// Offset of the generation in the label (reserved, zero, in labels of write
/// version 3 and older, which therefore read as generation 0).
const GENERATION_AT: usize = 112;

/// What a volume says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeLabel {
    /// Random identity of the volume.
    pub uuid: [u8; 16],
    /// The library barcode (at most 32 ASCII bytes).
    pub barcode: String,
    /// Pool the volume belongs to (at most 32 bytes).
    pub pool: String,
    /// When the label was written.
    pub created: Timestamp,
    /// Block size the volume was labelled with.
    pub block_size: u32,
    /// How many times the cartridge was labelled before (0 for its first label;
    /// each recycling adds one). Labels older than write version 4 read as 0.
    pub generation: u32,
}

fn padded(s: &str, n: usize) -> Vec<u8> {
    let mut v = s.as_bytes()[..s.len().min(n)].to_vec();
    v.resize(n, 0);
    v
}

fn unpad(b: &[u8]) -> Result<String> {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8(b[..end].to_vec()).map_err(|source| FormatError::NotUtf8 {
        what: "volume label",
        source,
    })
}

impl VolumeLabel {
    /// Encodes the label as its 1024-byte block.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(LABEL_LEN);
        let mut e = Enc(&mut v);
        e.raw(LABEL_MAGIC);
        e.u16(LABEL_WRITE_VERSION);
        e.u16(1);
        e.u32(LABEL_LEN as u32);
        e.raw(&self.uuid);
        e.raw(&padded(&self.barcode, 32));
        e.raw(&padded(&self.pool, 32));
        e.i64(self.created.secs);
        e.u32(self.created.nanos);
        e.u32(self.block_size);
        debug_assert_eq!(v.len(), GENERATION_AT);
        v.extend_from_slice(&self.generation.to_le_bytes());
        v.resize(LABEL_LEN - 4, 0);
        let crc = crc32c::crc32c(&v);
        v.extend_from_slice(&crc.to_le_bytes());
        v
    }

    /// Decodes a label block; errors when it is not a tapeloom label.
    pub fn decode(buf: &[u8]) -> Result<Self> {
        if buf.len() < LABEL_LEN {
            return Err(FormatError::Truncated("volume label"));
        }
        if &buf[..8] != LABEL_MAGIC {
            return Err(FormatError::BadMagic("volume label"));
        }
        let stored = u32::from_le_bytes([buf[1020], buf[1021], buf[1022], buf[1023]]);
        let computed = crc32c::crc32c(&buf[..LABEL_LEN - 4]);
        if stored != computed {
            return Err(FormatError::BadCrc {
                what: "volume label",
                stored,
                computed,
            });
        }
        let mut d = Dec::new(&buf[8..LABEL_LEN - 4], "volume label");
        let write_version = d.u16()?;
        let read_version = d.u16()?;
        if read_version > READ_VERSION {
            return Err(FormatError::UnsupportedVersion {
                what: "volume label",
                version: read_version,
            });
        }
        let _len = d.u32()?;
        let uuid = d.array()?;
        let barcode = unpad(d.take(32)?)?;
        let pool = unpad(d.take(32)?)?;
        let secs = d.i64()?;
        let nanos = d.u32()?;
        let block_size = d.u32()?;
        // Reserved (zero) before write version 4.
        let generation = match d.u32()? {
            g if write_version >= 4 => g,
            _ => 0,
        };
        Ok(VolumeLabel {
            uuid,
            barcode,
            pool,
            created: Timestamp { secs, nanos },
            block_size,
            generation,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trip(uuid in any::<[u8;16]>(), barcode in "[A-Z0-9]{0,32}", pool in "[a-z0-9-]{0,32}",
                      secs in any::<i64>(), nanos in 0u32..1_000_000_000, bs in any::<u32>(),
                      generation in any::<u32>()) {
            let l = VolumeLabel { uuid, barcode, pool, created: Timestamp { secs, nanos }, block_size: bs, generation };
            let b = l.encode();
            prop_assert_eq!(b.len(), LABEL_LEN);
            prop_assert_eq!(VolumeLabel::decode(&b).unwrap(), l);
        }

        #[test]
        fn any_flip_is_caught(pos in 0usize..LABEL_LEN, bit in 0u8..8) {
            let l = VolumeLabel { uuid: [7; 16], barcode: "TL0001L9".into(), pool: "default".into(),
                                  created: Timestamp { secs: 1, nanos: 2 }, block_size: 262144, generation: 1 };
            let mut b = l.encode();
            b[pos] ^= 1 << bit;
            prop_assert!(VolumeLabel::decode(&b).is_err());
        }

        #[test]
        fn never_panics(b in proptest::collection::vec(any::<u8>(), 0..1100)) {
            let _ = VolumeLabel::decode(&b);
        }
    }

    fn label(generation: u32) -> VolumeLabel {
        VolumeLabel {
            uuid: [9; 16],
            barcode: "TL0003L9".into(),
            pool: "daily".into(),
            created: Timestamp { secs: 5, nanos: 6 },
            block_size: 262144,
            generation,
        }
    }

    #[test]
    fn a_label_of_generation_3_round_trips_with_write_version_4_and_read_version_1() {
        let b = label(3).encode();
        assert_eq!(&b[8..12], &[4, 0, 1, 0]);
        assert_eq!(&b[112..116], &3u32.to_le_bytes());
        assert_eq!(VolumeLabel::decode(&b).unwrap().generation, 3);
    }

    #[test]
    fn a_label_of_write_version_3_reads_as_generation_0() {
        // As tapeloom wrote it before: write version 3, offset 112 reserved (zero).
        let mut b = label(0).encode();
        b[8] = 3;
        let crc = crc32c::crc32c(&b[..LABEL_LEN - 4]);
        b[LABEL_LEN - 4..].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(VolumeLabel::decode(&b).unwrap(), label(0));
        // Bytes there in an older label are not a generation.
        b[112] = 7;
        let crc = crc32c::crc32c(&b[..LABEL_LEN - 4]);
        b[LABEL_LEN - 4..].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(VolumeLabel::decode(&b).unwrap().generation, 0);
    }
}
