//! SCSI tape drives (SSC) and media changers (SMC), over SG_IO or iSCSI.
//!
//! The same command code runs over every transport: a transport executes one CDB
//! and returns status, residual and raw sense; [`sense`] decodes the sense; [`cdb`]
//! builds the commands and parses their responses; [`ssc`] and [`smc`] are the
//! drive and changer drivers on top.

pub mod cdb;
mod iscsi;
pub mod sense;
mod sg;
pub mod smc;
pub mod ssc;
pub mod tgt;

use crate::{DeviceError, Result};
use std::time::Duration;

/// The data phase of one command.
pub enum DataDir<'a> {
    /// No data.
    None,
    /// Data from the device into this buffer (its length is the allocation length).
    In(&'a mut [u8]),
    /// Data from this buffer to the device.
    Out(&'a [u8]),
}

/// SCSI status GOOD.
pub const STATUS_GOOD: u8 = 0x00;
/// SCSI status CHECK CONDITION: sense data says why.
pub const STATUS_CHECK_CONDITION: u8 = 0x02;
/// SCSI status BUSY.
pub const STATUS_BUSY: u8 = 0x08;
/// SCSI status RESERVATION CONFLICT.
pub const STATUS_RESERVATION_CONFLICT: u8 = 0x18;

/// What a transport reports of one command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CmdOutcome {
    /// The SCSI status byte.
    pub status: u8,
    /// Bytes of the data phase that were not transferred, as the transport reports
    /// them (some targets get this wrong; tape reads use the sense INFORMATION field).
    pub residual: usize,
    /// Raw sense data, empty when there is none.
    pub sense: Vec<u8>,
}

/// Something that executes SCSI commands on one device (one logical unit).
/// A transport is used from one thread at a time; open one per thread.
pub trait ScsiTransport: Send {
    /// Executes one CDB. Errors are transport failures (the command may not have
    /// reached the device); a command the device refused is an `Ok` with its status
    /// and sense.
    fn execute(&mut self, cdb: &[u8], data: DataDir<'_>, timeout: Duration) -> Result<CmdOutcome>;
    /// The device address this transport talks to (`/dev/sg3`, `iscsi://...`).
    fn address(&self) -> String;
}

/// Opens a transport to `dev`: `/dev/sgN` (SG_IO) or `iscsi://HOST[:PORT]/TARGET/LUN`
/// (libiscsi, loaded at run time).
pub fn open_transport(dev: &str) -> Result<Box<dyn ScsiTransport>> {
    if dev.starts_with("iscsi://") {
        Ok(Box::new(iscsi::IscsiTransport::open(dev)?))
    } else if dev.starts_with('/') {
        Ok(Box::new(sg::SgTransport::open(dev)?))
    } else {
        Err(DeviceError::Scsi(format!(
            "{dev}: not a device address (use /dev/sgN or iscsi://HOST:PORT/TARGET/LUN)"
        )))
    }
}
