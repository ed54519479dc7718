//! The volume label at logical block 0 (FORMAT.md 4.1).

use crate::codec::{Dec, Enc};
use crate::{FormatError, Result, Timestamp, READ_VERSION, WRITE_VERSION};

/// Magic at the start of a volume label.
pub const LABEL_MAGIC: &[u8; 8] = b"TAPELOOM";
/// Length of the label block in bytes.
pub const LABEL_LEN: usize = 1024;

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
        e.u16(WRITE_VERSION);
        e.u16(1);
        e.u32(LABEL_LEN as u32);
        e.raw(&self.uuid);
        e.raw(&padded(&self.barcode, 32));
        e.raw(&padded(&self.pool, 32));
        e.i64(self.created.secs);
        e.u32(self.created.nanos);
        e.u32(self.block_size);
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
        let _write_version = d.u16()?;
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
        Ok(VolumeLabel {
            uuid,
            barcode,
            pool,
            created: Timestamp { secs, nanos },
            block_size,
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
                      secs in any::<i64>(), nanos in 0u32..1_000_000_000, bs in any::<u32>()) {
            let l = VolumeLabel { uuid, barcode, pool, created: Timestamp { secs, nanos }, block_size: bs };
            let b = l.encode();
            prop_assert_eq!(b.len(), LABEL_LEN);
            prop_assert_eq!(VolumeLabel::decode(&b).unwrap(), l);
        }

        #[test]
        fn any_flip_is_caught(pos in 0usize..LABEL_LEN, bit in 0u8..8) {
            let l = VolumeLabel { uuid: [7; 16], barcode: "TL0001L9".into(), pool: "default".into(),
                                  created: Timestamp { secs: 1, nanos: 2 }, block_size: 262144 };
            let mut b = l.encode();
            b[pos] ^= 1 << bit;
            prop_assert!(VolumeLabel::decode(&b).is_err());
        }

        #[test]
        fn never_panics(b in proptest::collection::vec(any::<u8>(), 0..1100)) {
            let _ = VolumeLabel::decode(&b);
        }
    }
}
