//! A drive that keeps no data: positions, filemarks and capacity only. The LTO
//! model can sit on it when a benchmark has no use for the bytes.

use crate::{DeviceError, ReadOutcome, Result, TapeDrive, WriteOutcome};

/// A drive whose cartridge remembers only how much was written.
pub struct NullDrive {
    /// Logical objects: `true` for a filemark.
    objects: Vec<bool>,
    pos: usize,
    bytes: u64,
    capacity: u64,
    early_warning: u64,
    online: bool,
}

impl NullDrive {
    /// A drive with an empty cartridge of `capacity` bytes.
    pub fn new(capacity: u64, early_warning: u64) -> Self {
        NullDrive {
            objects: Vec::new(),
            pos: 0,
            bytes: 0,
            capacity,
            early_warning,
            online: true,
        }
    }

    fn check(&self) -> Result<()> {
        if self.online {
            Ok(())
        } else {
            Err(DeviceError::NoMedium)
        }
    }

    fn append(&mut self, filemark: bool) {
        self.objects.truncate(self.pos);
        self.objects.push(filemark);
        self.pos = self.objects.len();
    }

    fn outcome(&self) -> WriteOutcome {
        if self.bytes >= self.capacity.saturating_sub(self.early_warning) {
            WriteOutcome::EarlyWarning
        } else {
            WriteOutcome::Written
        }
    }
}

impl TapeDrive for NullDrive {
    /// Nothing is kept, so nothing is lost later either.
    fn buffer_bytes(&self) -> Option<u64> {
        Some(0)
    }

    fn describe(&self) -> String {
        "null drive".into()
    }
    fn has_medium(&self) -> bool {
        self.online
    }
    fn load(&mut self) -> Result<()> {
        self.online = true;
        self.pos = 0;
        Ok(())
    }
    fn unload(&mut self) -> Result<()> {
        self.check()?;
        self.online = false;
        self.pos = 0;
        Ok(())
    }
    fn write_protected(&self) -> Result<bool> {
        self.check()?;
        Ok(false)
    }
    fn rewind(&mut self) -> Result<()> {
        self.check()?;
        self.pos = 0;
        Ok(())
    }
    fn position(&mut self) -> Result<u64> {
        self.check()?;
        Ok(self.pos as u64)
    }
    fn locate(&mut self, lbn: u64) -> Result<()> {
        self.check()?;
        if lbn > self.objects.len() as u64 {
            self.pos = self.objects.len();
            return Err(DeviceError::BeyondEndOfData { lbn });
        }
        self.pos = lbn as usize;
        Ok(())
    }
    fn space_to_eod(&mut self) -> Result<()> {
        self.check()?;
        self.pos = self.objects.len();
        Ok(())
    }
    fn read_block(&mut self, _buf: &mut [u8]) -> Result<ReadOutcome> {
        self.check()?;
        Err(DeviceError::NoDataKept)
    }
    fn write_block(&mut self, data: &[u8]) -> Result<WriteOutcome> {
        self.check()?;
        if self.bytes + data.len() as u64 > self.capacity {
            return Err(DeviceError::EndOfMedium);
        }
        self.bytes += data.len() as u64;
        self.append(false);
        Ok(self.outcome())
    }
    fn write_filemarks(&mut self, count: u32, _immediate: bool) -> Result<WriteOutcome> {
        self.check()?;
        for _ in 0..count {
            self.append(true);
        }
        Ok(self.outcome())
    }
    fn usage(&mut self) -> Result<(u64, u64)> {
        Ok((self.bytes, self.capacity))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The drive conformance suite reads every block it wrote back (even its early
    /// warning and loading checks do), so a drive that keeps no data cannot run
    /// it; this is what the drive promises instead: positions, filemarks by count,
    /// early warning and the end of the medium, and a clear error on a read.
    #[test]
    fn positions_capacity_and_reads_that_fail_with_no_data_kept() {
        let mut d = NullDrive::new(10_000, 2_000);
        assert_eq!(d.write_block(&[1; 4000]).unwrap(), WriteOutcome::Written);
        assert_eq!(
            d.write_block(&[1; 4000]).unwrap(),
            WriteOutcome::EarlyWarning
        );
        assert_eq!(
            d.write_filemarks(1, false).unwrap(),
            WriteOutcome::EarlyWarning
        );
        assert!(matches!(
            d.write_block(&[1; 4000]),
            Err(DeviceError::EndOfMedium)
        ));
        assert_eq!(d.position().unwrap(), 3);
        d.locate(1).unwrap();
        assert_eq!(d.position().unwrap(), 1);
        d.space_to_eod().unwrap();
        assert_eq!(d.position().unwrap(), 3);
        d.rewind().unwrap();
        let mut buf = [0u8; 100];
        assert!(matches!(
            d.read_block(&mut buf),
            Err(DeviceError::NoDataKept)
        ));
    }
}
