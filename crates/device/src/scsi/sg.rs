//! SG_IO on a Linux SCSI generic device (`/dev/sgN`).
//!
//! One `ioctl(SG_IO)` per command on the device opened read-write. SG_IO needs
//! CAP_SYS_RAWIO for most commands (in practice: run as root), and read-write
//! access to the device node.
use super::{CmdOutcome, DataDir, ScsiTransport};
use super::{ScsiError, TransportError};
use crate::{DeviceError, Result};
use std::fs::File;
use std::time::Duration;

/// Size of the sense buffer handed to the kernel (the largest sense SPC allows).
const SENSE_LEN: usize = 252;
/// Longest CDB accepted.
const MAX_CDB_LEN: usize = 16;

/// The SG_IO ioctl request number.
#[cfg(target_os = "linux")]
const SG_IO: libc::Ioctl = 0x2285;
/// No data phase.
const SG_DXFER_NONE: i32 = -1;
/// Data from the host to the device.
const SG_DXFER_TO_DEV: i32 = -2;
/// Data from the device to the host.
const SG_DXFER_FROM_DEV: i32 = -3;
/// `driver_status` value that only says sense data was returned.
const DRIVER_SENSE: u16 = 0x08;

/// The SG version 3 request header (`struct sg_io_hdr` of `<scsi/sg.h>`).
#[repr(C)]
#[allow(non_camel_case_types)]
struct sg_io_hdr {
    /// Always `'S'`.
    interface_id: i32,
    /// One of the `SG_DXFER_*` values.
    dxfer_direction: i32,
    /// CDB length.
    cmd_len: u8,
    /// Size of the sense buffer.
    mx_sb_len: u8,
    /// 0: `dxferp` is a plain buffer.
    iovec_count: u16,
    /// Bytes of data to transfer.
    dxfer_len: u32,
    /// The data buffer.
    dxferp: *mut libc::c_void,
    /// The CDB.
    cmdp: *const u8,
    /// The sense buffer.
    sbp: *mut u8,
    /// Timeout in milliseconds.
    timeout: u32,
    /// SG_FLAG_* bits, 0 here.
    flags: u32,
    /// Unused with SG_IO.
    pack_id: i32,
    /// Unused with SG_IO.
    usr_ptr: *mut libc::c_void,
    /// SCSI status byte (output).
    status: u8,
    /// Status shifted right by one (output, obsolete).
    masked_status: u8,
    /// Messaging status (output, unused by modern transports).
    msg_status: u8,
    /// Bytes of sense written (output).
    sb_len_wr: u8,
    /// Host adapter status, `DID_*` (output).
    host_status: u16,
    /// Driver status, `DRIVER_*` (output).
    driver_status: u16,
    /// `dxfer_len` minus the bytes actually transferred (output).
    resid: i32,
    /// Milliseconds the command took (output).
    duration: u32,
    /// SG_INFO_* bits (output).
    info: u32,
}

/// A SCSI generic device, driven with SG_IO.
pub(crate) struct SgTransport {
    path: String,
    file: File,
}

impl SgTransport {
    /// Opens `path` read-write. Permission errors name what SG_IO needs.
    pub(crate) fn open(path: &str) -> Result<Self> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| open_error(path, e))?;
        Ok(SgTransport {
            path: path.to_string(),
            file,
        })
    }

    fn fail(&self, source: TransportError) -> DeviceError {
        ScsiError::Transport {
            device: self.path.clone(),
            source,
        }
        .into()
    }
}

fn open_error(path: &str, e: std::io::Error) -> DeviceError {
    let hint = match e.kind() {
        std::io::ErrorKind::PermissionDenied => {
            " (SG_IO needs read-write access to the device and root or CAP_SYS_RAWIO)"
        }
        std::io::ErrorKind::NotFound => " (no such device; `lsscsi -g` lists the /dev/sgN nodes)",
        _ => "",
    };
    DeviceError::Io(format!("cannot open {path}{hint}"), e)
}

/// Text for a `host_status` (`DID_*`) value.
pub(crate) fn host_status_text(code: u16) -> &'static str {
    match code {
        0x01 => "DID_NO_CONNECT: the device could not be reached",
        0x02 => "DID_BUS_BUSY: the bus stayed busy",
        0x03 => "DID_TIME_OUT: the command timed out",
        0x04 => "DID_BAD_TARGET: bad target",
        0x05 => "DID_ABORT: the command was aborted",
        0x06 => "DID_PARITY: parity error",
        0x07 => "DID_ERROR: internal error of the host adapter",
        0x08 => "DID_RESET: the bus or device was reset",
        0x09 => "DID_BAD_INTR: unexpected interrupt",
        0x0a => "DID_PASSTHROUGH",
        0x0b => "DID_SOFT_ERROR: the low-level driver asks for a retry",
        0x0c => "DID_IMM_RETRY",
        0x0d => "DID_REQUEUE",
        0x0e => "DID_TRANSPORT_DISRUPTED: the transport was disrupted",
        0x0f => "DID_TRANSPORT_FAILFAST: the transport failed",
        _ => "host adapter error",
    }
}

/// Text for the driver byte (low nibble of `driver_status`).
pub(crate) fn driver_status_text(code: u16) -> &'static str {
    match code & 0x0f {
        0x01 => "DRIVER_BUSY",
        0x02 => "DRIVER_SOFT",
        0x03 => "DRIVER_MEDIA",
        0x04 => "DRIVER_ERROR",
        0x05 => "DRIVER_INVALID",
        0x06 => "DRIVER_TIMEOUT: the command timed out",
        0x07 => "DRIVER_HARD",
        _ => "driver error",
    }
}

#[cfg(target_os = "linux")]
fn sg_io(file: &File, hdr: &mut sg_io_hdr) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: `hdr` is a valid, exclusively borrowed sg_io_hdr laid out as the kernel
    // expects. The pointers in it (CDB, data buffer of `dxfer_len` bytes, sense buffer
    // of `mx_sb_len` bytes) are set up by `execute` from live borrows that outlast
    // this call; SG_IO completes the command before it returns, so the kernel does
    // not touch them afterwards.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), SG_IO, hdr as *mut sg_io_hdr) };
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

#[cfg(not(target_os = "linux"))]
fn sg_io(_file: &File, _hdr: &mut sg_io_hdr) -> std::io::Result<()> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "SG_IO exists on Linux only",
    ))
}

impl ScsiTransport for SgTransport {
    fn execute(&mut self, cdb: &[u8], data: DataDir<'_>, timeout: Duration) -> Result<CmdOutcome> {
        let op = cdb.first().copied().unwrap_or(0);
        if cdb.is_empty() || cdb.len() > MAX_CDB_LEN {
            return Err(self.fail(TransportError::CdbLength {
                len: cdb.len(),
                max: MAX_CDB_LEN,
            }));
        }
        let (direction, ptr, len): (i32, *mut libc::c_void, usize) = match data {
            DataDir::None => (SG_DXFER_NONE, std::ptr::null_mut(), 0),
            DataDir::In(buf) => (SG_DXFER_FROM_DEV, buf.as_mut_ptr().cast(), buf.len()),
            // The kernel only reads a TO_DEV buffer; the pointer is mutable in the
            // header type only.
            DataDir::Out(buf) => (
                SG_DXFER_TO_DEV,
                buf.as_ptr() as *mut libc::c_void,
                buf.len(),
            ),
        };
        let dxfer_len =
            u32::try_from(len).map_err(|_| self.fail(TransportError::DataTooLarge { len }))?;
        let (direction, ptr) = if len == 0 {
            (SG_DXFER_NONE, std::ptr::null_mut())
        } else {
            (direction, ptr)
        };
        let timeout_ms = u32::try_from(timeout.as_millis())
            .unwrap_or(u32::MAX)
            .max(1);
        let mut sense = [0u8; SENSE_LEN];
        let mut hdr = sg_io_hdr {
            interface_id: i32::from(b'S'),
            dxfer_direction: direction,
            cmd_len: cdb.len() as u8,
            mx_sb_len: SENSE_LEN as u8,
            iovec_count: 0,
            dxfer_len,
            dxferp: ptr,
            cmdp: cdb.as_ptr(),
            sbp: sense.as_mut_ptr(),
            timeout: timeout_ms,
            flags: 0,
            pack_id: 0,
            usr_ptr: std::ptr::null_mut(),
            status: 0,
            masked_status: 0,
            msg_status: 0,
            sb_len_wr: 0,
            host_status: 0,
            driver_status: 0,
            resid: 0,
            duration: 0,
            info: 0,
        };
        sg_io(&self.file, &mut hdr).map_err(|e| {
            let hint = match e.raw_os_error() {
                Some(libc::ENOTTY) | Some(libc::EINVAL) => " (is it a /dev/sgN device?)",
                Some(libc::EPERM) | Some(libc::EACCES) => " (SG_IO needs root or CAP_SYS_RAWIO)",
                _ => "",
            };
            DeviceError::Io(
                format!("{}: SG_IO of command {op:02X}h failed{hint}", self.path),
                e,
            )
        })?;
        if hdr.host_status != 0 {
            return Err(self.fail(TransportError::HostStatus {
                op,
                status: hdr.host_status,
            }));
        }
        if hdr.driver_status & 0x0f != 0 && hdr.driver_status & 0x0f != DRIVER_SENSE {
            return Err(self.fail(TransportError::DriverStatus {
                op,
                status: hdr.driver_status,
            }));
        }
        let sense_len = usize::from(hdr.sb_len_wr).min(SENSE_LEN);
        let residual = usize::try_from(hdr.resid).unwrap_or(0).min(len);
        Ok(CmdOutcome {
            status: hdr.status,
            residual,
            sense: sense[..sense_len].to_vec(),
        })
    }

    fn address(&self) -> String {
        self.path.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(all(target_os = "linux", target_pointer_width = "64"))]
    fn header_layout_matches_the_kernel() {
        assert_eq!(std::mem::size_of::<sg_io_hdr>(), 88);
        assert_eq!(std::mem::offset_of!(sg_io_hdr, dxfer_len), 12);
        assert_eq!(std::mem::offset_of!(sg_io_hdr, dxferp), 16);
        assert_eq!(std::mem::offset_of!(sg_io_hdr, timeout), 40);
        assert_eq!(std::mem::offset_of!(sg_io_hdr, status), 64);
        assert_eq!(std::mem::offset_of!(sg_io_hdr, sb_len_wr), 67);
        assert_eq!(std::mem::offset_of!(sg_io_hdr, host_status), 68);
        assert_eq!(std::mem::offset_of!(sg_io_hdr, resid), 72);
        assert_eq!(std::mem::offset_of!(sg_io_hdr, info), 80);
    }

    #[test]
    fn missing_device_is_a_clear_error() {
        let Err(err) = SgTransport::open("/dev/sg-tapeloom-does-not-exist") else {
            panic!("opening a missing device must fail");
        };
        let msg = err.to_string();
        assert!(msg.contains("/dev/sg-tapeloom-does-not-exist"), "{msg}");
        assert!(msg.contains("no such device"), "{msg}");
    }

    #[test]
    fn a_device_that_is_not_sg_gives_an_error() {
        let mut t = SgTransport::open("/dev/null").expect("open /dev/null");
        assert_eq!(t.address(), "/dev/null");
        let mut buf = [0u8; 96];
        let err = t
            .execute(
                &[0x12, 0, 0, 0, 96, 0],
                DataDir::In(&mut buf),
                Duration::from_secs(5),
            )
            .expect_err("SG_IO on /dev/null must fail");
        let msg = err.to_string();
        assert!(msg.contains("/dev/null") && msg.contains("12h"), "{msg}");
        let err = t
            .execute(&[], DataDir::None, Duration::from_secs(5))
            .expect_err("an empty CDB must fail");
        assert!(err.to_string().contains("CDB of 0 bytes"), "{err}");
    }
}
