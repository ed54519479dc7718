//! iSCSI through libiscsi, loaded at run time.
use super::{CmdOutcome, DataDir, ScsiTransport};
use crate::{DeviceError, Result};
use std::time::Duration;

pub(crate) struct IscsiTransport {
    url: String,
}

impl IscsiTransport {
    pub(crate) fn open(url: &str) -> Result<Self> {
        Err(DeviceError::Scsi(format!("{url}: iSCSI is not available yet")))
    }
}

impl ScsiTransport for IscsiTransport {
    fn execute(&mut self, _cdb: &[u8], _data: DataDir<'_>, _t: Duration) -> Result<CmdOutcome> {
        Err(DeviceError::Scsi("not available".into()))
    }
    fn address(&self) -> String {
        self.url.clone()
    }
}
