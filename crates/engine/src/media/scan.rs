//! Reading a cartridge's blocks in order, whatever they hold, for the readers that
//! walk tapes without a catalog's map: `catalog rebuild` and `catalog recover`.

use crate::error::Result;
use tapeloom_device::{DeviceError, ReadOutcome, TapeDrive};
use tapeloom_format::BlockHeader;

/// What the next object on the tape was.
pub(crate) enum Scanned {
    /// A tapeloom block of this cartridge at `lbn`, `len` bytes in the buffer.
    Block {
        lbn: u64,
        header: BlockHeader,
        len: usize,
    },
    /// A block that is not one of this cartridge's, fails its checks, or cannot be
    /// read (a MEDIUM ERROR: the scan goes on after it).
    Bad,
    /// A filemark.
    Filemark,
    /// End of data.
    End,
}

/// Reads a cartridge's blocks in order from `lbn`, checking each header against the
/// cartridge's UUID and the block's place.
pub(crate) struct Scan {
    pub lbn: u64,
    pub uuid: [u8; 16],
}

impl Scan {
    /// Reads the next object into `buf`.
    pub fn next(&mut self, drive: &mut dyn TapeDrive, buf: &mut [u8]) -> Result<Scanned> {
        let this = self.lbn;
        self.lbn += 1;
        let n = match drive.read_block(buf) {
            Ok(ReadOutcome::Block(n)) => n,
            Ok(ReadOutcome::Filemark) => return Ok(Scanned::Filemark),
            Ok(ReadOutcome::EndOfData) => return Ok(Scanned::End),
            Err(DeviceError::BlockTooLarge { .. }) => return Ok(Scanned::Bad),
            Err(e) if e.is_medium_error() => {
                drive.locate(self.lbn)?;
                return Ok(Scanned::Bad);
            }
            Err(e) => return Err(e.into()),
        };
        Ok(match BlockHeader::open(&buf[..n]) {
            Ok(header) if header.volume == self.uuid && header.lbn == this => Scanned::Block {
                lbn: this,
                header,
                len: n,
            },
            _ => Scanned::Bad,
        })
    }
}
