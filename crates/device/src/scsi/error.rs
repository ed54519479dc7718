//! SCSI errors: a command the device refused (with its decoded sense), a transport
//! that failed, a response that does not parse, and the drivers' own refusals.
//!
//! Drivers decide by variant and by the sense key and ASC/ASCQ of
//! [`ScsiError::Sense`], never by text.

use super::sense::Sense;
use super::sg::{driver_status_text, host_status_text};
use super::{STATUS_CHECK_CONDITION, STATUS_RESERVATION_CONFLICT};
use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

/// A SCSI command or transport failed. Every variant names the device address.
#[derive(Debug, thiserror::Error)]
pub enum ScsiError {
    /// The device ended the command in CHECK CONDITION with this sense.
    #[error("{device}: {command} failed: {sense}")]
    Sense {
        /// The device address.
        device: String,
        /// The command, as the message names it ("READ", "MOVE MEDIUM from element
        /// 4 to element 1").
        command: Cow<'static, str>,
        /// The decoded sense data.
        sense: Sense,
    },
    /// The command ended with a status other than GOOD, or in CHECK CONDITION
    /// without readable sense data.
    #[error("{device}: {command} failed: {}", status_text(*status))]
    Status {
        /// The device address.
        device: String,
        /// The command.
        command: Cow<'static, str>,
        /// The status byte.
        status: u8,
    },
    /// The transport failed: the command may not have reached the device.
    #[error("{device}: {source}")]
    Transport {
        /// The device address.
        device: String,
        /// What failed.
        #[source]
        source: TransportError,
    },
    /// A response too short or inconsistent to use.
    #[error("{device}: {what}: {source}")]
    Malformed {
        /// The device address.
        device: String,
        /// What was being decoded ("INQUIRY", "READ ELEMENT STATUS").
        what: &'static str,
        /// What is wrong with it.
        #[source]
        source: ParseError,
    },
    /// A device of another peripheral type than the one expected.
    #[error("{device} is not a {expected} ({vendor} {product}, peripheral device type {peripheral_type:#04x})")]
    WrongDeviceType {
        /// The device address.
        device: String,
        /// "tape drive" or "media changer".
        expected: &'static str,
        /// INQUIRY vendor (device-provided text).
        vendor: String,
        /// INQUIRY product (device-provided text).
        product: String,
        /// INQUIRY peripheral device type.
        peripheral_type: u8,
    },
    /// The device has no unit serial number.
    #[error("{device} has no serial number")]
    NoSerialNumber {
        /// The device address.
        device: String,
    },
    /// An address that is neither `/dev/sgN` nor an `iscsi://` URL.
    #[error("{address}: not a device address (use /dev/sgN or iscsi://HOST:PORT/TARGET/LUN)")]
    NotAnAddress {
        /// The address given.
        address: String,
    },
    /// A drive in fixed-block mode that refuses variable-length blocks.
    #[error("{device}: the drive is in fixed-block mode ({block_len} bytes) and refuses variable blocks: {}", sense.as_ref().map(|s| s.to_string()).unwrap_or_default())]
    FixedBlockMode {
        /// The device address.
        device: String,
        /// The fixed block length.
        block_len: u32,
        /// The sense of the refused MODE SELECT, where there was one.
        sense: Option<Sense>,
    },
    /// A drive that did not become ready.
    #[error("{device}: the drive did not become ready in {} s", waited.as_secs())]
    NotReady {
        /// The device address.
        device: String,
        /// How long it was waited for.
        waited: Duration,
    },
    /// A block larger than the drive takes (READ BLOCK LIMITS); it was not sent.
    #[error("{device}: a block of {len} bytes is larger than the drive's largest ({max} bytes, READ BLOCK LIMITS); use a smaller --block-size")]
    BlockOverDriveLimit {
        /// The device address.
        device: String,
        /// The block's length.
        len: usize,
        /// The drive's largest block.
        max: u32,
    },
    /// A block larger than WRITE(6) can carry; it was not sent.
    #[error("{device}: a block of {len} bytes is larger than WRITE(6) can carry")]
    BlockOverTransfer {
        /// The device address.
        device: String,
        /// The block's length.
        len: usize,
    },
}

impl ScsiError {
    /// The sense of a CHECK CONDITION, where the error is one.
    pub fn sense(&self) -> Option<&Sense> {
        match self {
            ScsiError::Sense { sense, .. } => Some(sense),
            _ => None,
        }
    }

    /// Whether the device refused with this sense key and ASC/ASCQ.
    pub fn is_sense(&self, key: u8, asc: u8, ascq: u8) -> bool {
        self.sense()
            .is_some_and(|s| s.key == key && s.asc == asc && s.ascq == ascq)
    }
}

/// Text of a status byte in a failure message.
fn status_text(status: u8) -> String {
    match status {
        STATUS_CHECK_CONDITION => "CHECK CONDITION without sense data".to_string(),
        STATUS_RESERVATION_CONFLICT => "reservation conflict".to_string(),
        s => format!("status {s:#04x}"),
    }
}

/// A transport failure: the command may not have reached the device.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// A CDB of a length the transport cannot carry.
    #[error("CDB of {len} bytes (1 to {max} allowed)")]
    CdbLength {
        /// The CDB's length.
        len: usize,
        /// The longest the transport carries.
        max: usize,
    },
    /// A data phase too large for the transport.
    #[error("data phase of {len} bytes is too large")]
    DataTooLarge {
        /// The data phase's length.
        len: usize,
    },
    /// SG_IO returned a host status (the adapter or the bus failed).
    #[error("command {op:02X}h failed: host status {status:#04x} ({})", host_status_text(*status))]
    HostStatus {
        /// Operation code.
        op: u8,
        /// `host_status` (`DID_*`).
        status: u16,
    },
    /// SG_IO returned a driver status.
    #[error("command {op:02X}h failed: driver status {status:#04x} ({})", driver_status_text(*status))]
    DriverStatus {
        /// Operation code.
        op: u8,
        /// `driver_status` (`DRIVER_*`).
        status: u16,
    },
    /// Not an `iscsi://` address tapeloom understands.
    #[error("not an iSCSI address ({problem}; expected iscsi://HOST[:PORT]/TARGET-IQN/LUN)")]
    BadIscsiAddress {
        /// What is wrong with it.
        problem: AddressProblem,
    },
    /// libiscsi could not be loaded.
    #[error("libiscsi is not installed (cannot load libiscsi.so.7 or libiscsi.so): install the package libiscsi7 (Debian/Ubuntu) or libiscsi (Fedora)")]
    LibiscsiMissing {
        /// The loader's error for the last name tried.
        #[source]
        source: Arc<libloading::Error>,
    },
    /// The libiscsi found lacks a function tapeloom needs.
    #[error("the libiscsi found lacks the function {symbol} (libiscsi 1.19 or later is needed)")]
    LibiscsiTooOld {
        /// The function.
        symbol: &'static str,
        /// The loader's error.
        #[source]
        source: Arc<libloading::Error>,
    },
    /// The iSCSI login failed.
    #[error("cannot connect: {reason}")]
    Connect {
        /// Why.
        #[source]
        reason: ConnectFailure,
    },
    /// An iSCSI command failed at the transport level; the session was closed.
    #[error("command {op:02X}h failed: {reason}; the iSCSI session was closed (the next command logs in again)")]
    Session {
        /// Operation code.
        op: u8,
        /// Why.
        #[source]
        reason: SessionFailure,
    },
    /// No iSCSI session could be used.
    #[error("no iSCSI session")]
    NoSession,
    /// libiscsi could not allocate a task.
    #[error("libiscsi could not allocate a task")]
    TaskAllocation,
}

/// What is wrong with an `iscsi://` address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressProblem {
    /// It does not start with `iscsi://`.
    #[error("it does not start with iscsi://")]
    Scheme,
    /// It contains blanks or control characters.
    #[error("it contains blanks or control characters")]
    Blanks,
    /// It is not host, target and LUN separated by `/`.
    #[error("it needs exactly a host, a target name and a LUN separated by /")]
    Parts,
    /// It has a user name or password.
    #[error("user names and passwords are not supported in the address")]
    Credentials,
    /// An IPv6 address without its closing `]`.
    #[error("an IPv6 address lacks its closing ]")]
    UnclosedIpv6,
    /// Text after an IPv6 address that is not a port.
    #[error("unexpected text after the IPv6 address")]
    AfterIpv6,
    /// No host.
    #[error("the host is empty")]
    EmptyHost,
    /// A port that is not 1 to 65535.
    #[error("the port {port:?} is not a number from 1 to 65535")]
    Port {
        /// The port as written.
        port: String,
    },
    /// No target name.
    #[error("the target name is empty")]
    EmptyTarget,
    /// A LUN out of range.
    #[error("the LUN {lun:?} is not a number from 0 to {max}")]
    Lun {
        /// The LUN as written.
        lun: String,
        /// The highest LUN accepted.
        max: u16,
    },
}

/// Why an iSCSI login failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectFailure {
    /// No TCP connection to the portal.
    #[error("{portal}: {source}")]
    Unreachable {
        /// `host:port`.
        portal: String,
        /// The connection's error.
        #[source]
        source: std::io::Error,
    },
    /// A name with a NUL byte, which libiscsi cannot take.
    #[error("{text:?} contains a NUL byte")]
    NulByte {
        /// The name.
        text: String,
    },
    /// libiscsi could not create a context.
    #[error("libiscsi could not create a context")]
    NoContext,
    /// libiscsi refused the target name.
    #[error("target name rejected: {message}")]
    TargetNameRejected {
        /// libiscsi's message (library-provided text).
        message: String,
    },
    /// The portal's name resolves to no address.
    #[error("{portal}: no address")]
    NoAddress {
        /// `host:port`.
        portal: String,
    },
    /// libiscsi refused the login, with its message.
    #[error("{message}")]
    Refused {
        /// libiscsi's message (library-provided text).
        message: String,
    },
    /// No login within the deadline.
    #[error("no login within {} s ({message})", waited.as_secs())]
    Timeout {
        /// The deadline.
        waited: Duration,
        /// libiscsi's last message.
        message: String,
    },
}

/// Why an iSCSI command failed at the transport level.
#[derive(Debug, thiserror::Error)]
pub enum SessionFailure {
    /// No response within the command's timeout.
    #[error("no response within {:.0} s", timeout.as_secs_f64().ceil())]
    Timeout {
        /// The command's timeout.
        timeout: Duration,
    },
    /// libiscsi cancelled the command.
    #[error("the command was cancelled")]
    Cancelled,
    /// Waiting on the session's socket failed.
    #[error("poll failed: {source}")]
    Poll {
        /// The error of poll(2).
        #[source]
        source: std::io::Error,
    },
    /// libiscsi reported a failure, with its message.
    #[error("{message}")]
    Library {
        /// libiscsi's message (library-provided text).
        message: String,
    },
}

/// A response too short or inconsistent to use, from the parsers of the
/// commands' answers (`cdb.rs`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Fewer bytes than the layout needs.
    #[error("{what} of {len} bytes, need {need}")]
    TooShort {
        /// What was being parsed ("INQUIRY data").
        what: &'static str,
        /// Bytes present.
        len: usize,
        /// What the layout needs ("6", "at least 5").
        need: &'static str,
    },
    /// A VPD page other than the one asked for.
    #[error("VPD page {got:02X}h where {expected:02X}h was expected")]
    WrongPage {
        /// The page code received.
        got: u8,
        /// The page code asked for.
        expected: u8,
    },
    /// MODE SENSE data shorter than the block descriptors its header announces.
    #[error("MODE SENSE(6) data of {len} bytes, the header announces {descriptors} bytes of block descriptors")]
    DescriptorsCut {
        /// Bytes present.
        len: usize,
        /// Bytes of block descriptors announced.
        descriptors: usize,
    },
    /// READ POSITION data that says the position is unknown.
    #[error("READ POSITION: {0}")]
    PositionUnknown(PositionFlag),
    /// READ ELEMENT STATUS page with descriptors of length 0.
    #[error("READ ELEMENT STATUS: element type {code} page with {bytes} bytes of descriptors of length 0")]
    ZeroDescriptorLength {
        /// The element type code.
        code: u8,
        /// Bytes of descriptors in the page.
        bytes: usize,
    },
    /// MODE SENSE data of a changer without the Element Address Assignment page.
    #[error("no Element Address Assignment page (1Dh) in the mode data")]
    NoElementAddressPage,
    /// A RECOMMENDED ACCESS ORDER list that cannot be used.
    #[error("RECEIVE RECOMMENDED ACCESS ORDER: {problem}")]
    RaoList {
        /// What is wrong with it.
        problem: &'static str,
    },
}

/// The READ POSITION flag that says the position is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PositionFlag {
    /// LONU of the long form.
    #[error("logical object number unknown (LONU set)")]
    Lonu,
    /// BPU of the short form.
    #[error("block position unknown (BPU set)")]
    Bpu,
}
