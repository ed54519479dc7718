//! SG_IO on a Linux SCSI generic device.
use super::{CmdOutcome, DataDir, ScsiTransport};
use crate::{DeviceError, Result};
use std::time::Duration;

pub(crate) struct SgTransport {
    url: String,
}

impl SgTransport {
    pub(crate) fn open(url: &str) -> Result<Self> {
        Err(DeviceError::Scsi(format!("{url}: SG_IO is not available yet")))
    }
}

impl ScsiTransport for SgTransport {
    fn execute(&mut self, _cdb: &[u8], _data: DataDir<'_>, _t: Duration) -> Result<CmdOutcome> {
        Err(DeviceError::Scsi("not available".into()))
    }
    fn address(&self) -> String {
        self.url.clone()
    }
}
