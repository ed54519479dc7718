//! SCSI tape drives (SSC) and media changers (SMC), over SG_IO or iSCSI.
//!
//! The same command code runs over every transport: a transport executes one CDB
//! and returns status, residual and raw sense; [`sense`] decodes the sense; [`cdb`]
//! builds the commands and parses their responses; [`ssc`] and [`smc`] are the
//! drive and changer drivers on top.

pub mod cdb;
pub mod discovery;
mod error;
mod iscsi;
mod library;
pub mod rao;
pub mod sense;
mod sg;
pub mod smc;
pub mod ssc;
pub mod tape_alert;
pub mod volume_statistics;

pub use error::{
    AddressProblem, ConnectFailure, ParseError, PositionFlag, ScsiError, SessionFailure,
    TransportError,
};
pub use iscsi::load as load_iscsi;
pub use library::{ScsiLibrary, ScsiLibraryConfig, TransportOpener};

use crate::Result;
use std::borrow::Cow;
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
        Err(ScsiError::NotAnAddress {
            address: dev.to_string(),
        }
        .into())
    }
}

/// Timeout of quick commands (inquiry, mode sense, element status).
pub(crate) const SHORT: Duration = Duration::from_secs(60);
/// Timeout of reads, writes and filemarks (a drive may retry a block for minutes).
pub(crate) const MEDIUM: Duration = Duration::from_secs(900);
/// Timeout of commands that move the tape far or the robot: rewind, locate, space,
/// load, unload, move medium, initialize element status.
pub(crate) const LONG: Duration = Duration::from_secs(3600);

/// A command's result as the drivers use it.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    /// The status byte.
    pub status: u8,
    /// Decoded sense, for CHECK CONDITION.
    pub sense: Option<sense::Sense>,
    /// The transport's residual.
    pub residual: usize,
}

impl Reply {
    /// GOOD status.
    pub fn good(&self) -> bool {
        self.status == STATUS_GOOD
    }
    /// The sense key, or `None` when the command did not end in CHECK CONDITION
    /// with readable sense.
    pub fn key(&self) -> Option<u8> {
        self.sense.as_ref().map(|s| s.key)
    }
}

/// Executes `cdb` and decodes the sense. A UNIT ATTENTION (a medium change, a reset)
/// and a BUSY device are retried a few times, since they report what happened
/// before the command, not a failure of it. Transport failures are errors; a CHECK
/// CONDITION is returned for the caller to judge.
pub(crate) fn exec(
    t: &mut dyn ScsiTransport,
    cdb: &[u8],
    mut data: DataDir<'_>,
    timeout: Duration,
) -> Result<Reply> {
    let mut tries = 0;
    loop {
        tries += 1;
        let d = match &mut data {
            DataDir::None => DataDir::None,
            DataDir::In(b) => DataDir::In(b),
            DataDir::Out(b) => DataDir::Out(b),
        };
        let out = t.execute(cdb, d, timeout)?;
        let sense = if out.status == STATUS_CHECK_CONDITION {
            sense::parse(&out.sense)
        } else {
            None
        };
        let retry = match (out.status, &sense) {
            (STATUS_BUSY, _) => true,
            (STATUS_CHECK_CONDITION, Some(s)) => s.key == sense::UNIT_ATTENTION,
            _ => false,
        };
        if retry && tries < 5 {
            if out.status == STATUS_BUSY {
                std::thread::sleep(Duration::from_millis(200));
            }
            continue;
        }
        return Ok(Reply {
            status: out.status,
            sense,
            residual: out.residual,
        });
    }
}

/// The error for a command that failed: names the device, the command and what the
/// device said.
pub(crate) fn failed(dev: &str, command: impl Into<Cow<'static, str>>, r: &Reply) -> ScsiError {
    let (device, command) = (dev.to_string(), command.into());
    match &r.sense {
        Some(s) => ScsiError::Sense {
            device,
            command,
            sense: s.clone(),
        },
        None => ScsiError::Status {
            device,
            command,
            status: r.status,
        },
    }
}

/// Executes a command that must succeed. RECOVERED ERROR counts as success.
pub(crate) fn must(
    t: &mut dyn ScsiTransport,
    command: &'static str,
    cdb: &[u8],
    data: DataDir<'_>,
    timeout: Duration,
) -> Result<Reply> {
    let r = exec(t, cdb, data, timeout)?;
    if r.good() || r.key() == Some(sense::RECOVERED_ERROR) {
        Ok(r)
    } else {
        Err(failed(&t.address(), command, &r).into())
    }
}

/// INQUIRY, standard data (peripheral type, vendor, product, revision).
pub(crate) fn inquiry(t: &mut dyn ScsiTransport, dev: &str) -> Result<cdb::InquiryData> {
    let mut buf = vec![0u8; 96];
    let r = must(
        t,
        "INQUIRY",
        &cdb::inquiry(None, 96),
        DataDir::In(&mut buf),
        SHORT,
    )?;
    let got = buf.len().saturating_sub(r.residual).max(36).min(buf.len());
    cdb::parse_inquiry(&buf[..got]).map_err(|source| {
        ScsiError::Malformed {
            device: dev.to_string(),
            what: "INQUIRY",
            source,
        }
        .into()
    })
}

/// The unit serial number (VPD page 80h), where the device gives a non-empty one.
pub(crate) fn unit_serial(t: &mut dyn ScsiTransport) -> Option<String> {
    let mut buf = vec![0u8; 255];
    let r = exec(
        t,
        &cdb::inquiry(Some(0x80), 255),
        DataDir::In(&mut buf),
        SHORT,
    )
    .ok()?;
    if !r.good() {
        return None;
    }
    cdb::parse_serial_vpd(&buf).ok().filter(|s| !s.is_empty())
}
