//! SCSI sense data (SPC-4): the fixed format (response codes 70h and 71h) and
//! the descriptor format (72h and 73h), decoded into the sense key, the additional
//! sense code and qualifier, the stream flags a tape drive reports (filemark, end of
//! medium, incorrect length) and the INFORMATION field.
//!
//! Sense data comes from the device and is never trusted: short or inconsistent
//! buffers decode as far as they go, and nothing here panics on any input.

use std::fmt;

/// Sense key NO SENSE: nothing to report, or only the stream flags (filemark, end of
/// medium, incorrect length) are of interest.
pub const NO_SENSE: u8 = 0x0;
/// Sense key RECOVERED ERROR: the command completed after the device recovered.
pub const RECOVERED_ERROR: u8 = 0x1;
/// Sense key NOT READY: the logical unit cannot be accessed (no medium, loading).
pub const NOT_READY: u8 = 0x2;
/// Sense key MEDIUM ERROR: an unrecovered error on the medium.
pub const MEDIUM_ERROR: u8 = 0x3;
/// Sense key HARDWARE ERROR: the device failed.
pub const HARDWARE_ERROR: u8 = 0x4;
/// Sense key ILLEGAL REQUEST: the CDB or its parameters are not acceptable.
pub const ILLEGAL_REQUEST: u8 = 0x5;
/// Sense key UNIT ATTENTION: reset, medium change, mode change and the like.
pub const UNIT_ATTENTION: u8 = 0x6;
/// Sense key DATA PROTECT: the medium refuses the access (write protected).
pub const DATA_PROTECT: u8 = 0x7;
/// Sense key BLANK CHECK: end of data, or blank medium, was met on a read or space.
pub const BLANK_CHECK: u8 = 0x8;
/// Sense key ABORTED COMMAND: the device aborted the command; a retry may work.
pub const ABORTED_COMMAND: u8 = 0xB;
/// Sense key VOLUME OVERFLOW: the physical end of the partition was reached with data
/// still in the buffer.
pub const VOLUME_OVERFLOW: u8 = 0xD;
/// Sense key MISCOMPARE: source data did not match data read from the medium.
pub const MISCOMPARE: u8 = 0xE;

/// Decoded sense data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sense {
    /// A deferred error (response code 71h or 73h): it belongs to an earlier command,
    /// typically a buffered write, not to the command that returned it.
    pub deferred: bool,
    /// The sense key (low four bits), one of the constants of this module.
    pub key: u8,
    /// Additional sense code; 0 when the sense data is too short to hold it.
    pub asc: u8,
    /// Additional sense code qualifier; 0 when the sense data is too short to hold it.
    pub ascq: u8,
    /// FILEMARK: the command met a filemark. Fixed format: byte 2 bit 7; descriptor
    /// format: the stream commands descriptor (type 04h).
    pub filemark: bool,
    /// EOM: end of medium or end of partition (early warning on writes, beginning of
    /// partition on backward moves). Fixed format: byte 2 bit 6; descriptor format:
    /// the stream commands descriptor.
    pub eom: bool,
    /// ILI: the block length did not match the requested length. Fixed format: byte 2
    /// bit 5; descriptor format: the stream commands descriptor.
    pub ili: bool,
    /// The INFORMATION field when the device marked it valid. Fixed format: bytes 3 to
    /// 6 read as a signed 32-bit number (on a variable-length read the residue is
    /// negative when the block on tape was longer than requested). Descriptor format:
    /// the 64-bit field of the information descriptor (type 00h) read as a signed
    /// number.
    pub information: Option<i64>,
}

/// Decodes sense data. Returns `None` for an empty buffer or a response code other
/// than 70h to 73h (vendor-specific or not sense data at all).
///
/// Short sense is accepted: fields the buffer does not hold read as zero (a fixed
/// sense of three bytes gives the key and flags, with ASC/ASCQ 00/00). The additional
/// sense length in byte 7 is not relied on; the buffer length bounds the decoding.
pub fn parse(raw: &[u8]) -> Option<Sense> {
    let first = *raw.first()?;
    match first & 0x7F {
        0x70 => Some(parse_fixed(raw, false)),
        0x71 => Some(parse_fixed(raw, true)),
        0x72 => Some(parse_descriptor(raw, false)),
        0x73 => Some(parse_descriptor(raw, true)),
        _ => None,
    }
}

fn byte_at(raw: &[u8], i: usize) -> u8 {
    raw.get(i).copied().unwrap_or(0)
}

fn parse_fixed(raw: &[u8], deferred: bool) -> Sense {
    let valid = byte_at(raw, 0) & 0x80 != 0;
    let flags = byte_at(raw, 2);
    let information = match raw.get(3..7) {
        Some(&[a, b, c, d]) if valid => Some(i64::from(i32::from_be_bytes([a, b, c, d]))),
        _ => None,
    };
    Sense {
        deferred,
        key: flags & 0x0F,
        asc: byte_at(raw, 12),
        ascq: byte_at(raw, 13),
        filemark: flags & 0x80 != 0,
        eom: flags & 0x40 != 0,
        ili: flags & 0x20 != 0,
        information,
    }
}

fn parse_descriptor(raw: &[u8], deferred: bool) -> Sense {
    let mut sense = Sense {
        deferred,
        key: byte_at(raw, 1) & 0x0F,
        asc: byte_at(raw, 2),
        ascq: byte_at(raw, 3),
        filemark: false,
        eom: false,
        ili: false,
        information: None,
    };
    // Sense data descriptors: type, additional length, then that many bytes.
    let mut at = 8;
    while let Some(&[dtype, dlen]) = raw.get(at..at + 2) {
        let end = at + 2 + usize::from(dlen);
        let Some(desc) = raw.get(at..end) else { break };
        match dtype {
            // Information descriptor: VALID in byte 2 bit 7, the field in bytes 4..12.
            0x00 => {
                if let Some(field) = desc.get(4..12) {
                    let mut v = [0u8; 8];
                    v.copy_from_slice(field);
                    if byte_at(desc, 2) & 0x80 != 0 {
                        sense.information = Some(i64::from_be_bytes(v));
                    }
                }
            }
            // Stream commands descriptor: FILEMARK, EOM and ILI in byte 3.
            0x04 => {
                if let Some(&flags) = desc.get(3) {
                    sense.filemark = flags & 0x80 != 0;
                    sense.eom = flags & 0x40 != 0;
                    sense.ili = flags & 0x20 != 0;
                }
            }
            _ => {}
        }
        at = end;
    }
    sense
}

impl Sense {
    /// The name of the sense key as the SPC standards spell it ("MEDIUM ERROR"; 0Ch,
    /// obsolete since SPC-3, is "EQUAL"; 0Fh, from SPC-5, is "COMPLETED").
    pub fn key_name(&self) -> &'static str {
        match self.key {
            0x0 => "NO SENSE",
            0x1 => "RECOVERED ERROR",
            0x2 => "NOT READY",
            0x3 => "MEDIUM ERROR",
            0x4 => "HARDWARE ERROR",
            0x5 => "ILLEGAL REQUEST",
            0x6 => "UNIT ATTENTION",
            0x7 => "DATA PROTECT",
            0x8 => "BLANK CHECK",
            0x9 => "VENDOR SPECIFIC",
            0xA => "COPY ABORTED",
            0xB => "ABORTED COMMAND",
            0xC => "EQUAL",
            0xD => "VOLUME OVERFLOW",
            0xE => "MISCOMPARE",
            0xF => "COMPLETED",
            _ => "INVALID SENSE KEY",
        }
    }

    /// The text of the ASC/ASCQ pair, for the codes a tape drive or a media changer
    /// reports (SPC-4, SSC-4 and SMC-3 names, in lower case). Codes 80h and above in
    /// either byte give "vendor specific"; other unknown pairs give `None`.
    pub fn asc_text(&self) -> Option<&'static str> {
        asc_ascq_text(self.asc, self.ascq)
    }
}

/// The standard texts of ASC/ASCQ pairs (SPC-4, SSC-4 and SMC-3 names, in lower
/// case), sorted by ASC and ASCQ for a binary search.
static ASC_ASCQ_TEXT: &[(u8, u8, &str)] = &[
    (0x00, 0x00, "no additional sense information"),
    (0x00, 0x01, "filemark detected"),
    (0x00, 0x02, "end-of-partition/medium detected"),
    (0x00, 0x03, "setmark detected"),
    (0x00, 0x04, "beginning-of-partition/medium detected"),
    (0x00, 0x05, "end-of-data detected"),
    (0x00, 0x06, "i/o process terminated"),
    (0x00, 0x07, "programmable early warning detected"),
    (0x00, 0x16, "operation in progress"),
    (0x00, 0x17, "cleaning requested"),
    (0x00, 0x18, "erase operation in progress"),
    (0x00, 0x19, "locate operation in progress"),
    (0x00, 0x1A, "rewind operation in progress"),
    (0x00, 0x1B, "set capacity operation in progress"),
    (0x00, 0x1C, "verify operation in progress"),
    (0x03, 0x00, "peripheral device write fault"),
    (0x03, 0x01, "no write current"),
    (0x03, 0x02, "excessive write errors"),
    (0x04, 0x00, "logical unit not ready, cause not reportable"),
    (0x04, 0x01, "logical unit is in process of becoming ready"),
    (
        0x04,
        0x02,
        "logical unit not ready, initializing command required",
    ),
    (
        0x04,
        0x03,
        "logical unit not ready, manual intervention required",
    ),
    (0x04, 0x04, "logical unit not ready, format in progress"),
    (0x04, 0x07, "logical unit not ready, operation in progress"),
    (0x04, 0x09, "logical unit not ready, self-test in progress"),
    (
        0x04,
        0x10,
        "logical unit not ready, auxiliary memory not accessible",
    ),
    (0x04, 0x12, "logical unit not ready, offline"),
    (0x04, 0x15, "logical unit not ready, robotics disabled"),
    (0x04, 0x16, "logical unit not ready, configuration required"),
    (0x04, 0x17, "logical unit not ready, calibration required"),
    (0x04, 0x18, "logical unit not ready, a door is open"),
    (0x05, 0x00, "logical unit does not respond to selection"),
    (0x08, 0x00, "logical unit communication failure"),
    (0x08, 0x01, "logical unit communication time-out"),
    (0x08, 0x02, "logical unit communication parity error"),
    (0x09, 0x00, "track following error"),
    (0x0A, 0x00, "error log overflow"),
    (0x0B, 0x00, "warning"),
    (0x0B, 0x01, "warning - specified temperature exceeded"),
    (0x0B, 0x02, "warning - enclosure degraded"),
    (0x0C, 0x00, "write error"),
    (0x0C, 0x04, "compression check miscompare error"),
    (0x0C, 0x05, "data expansion occurred during compression"),
    (0x0C, 0x06, "block not compressible"),
    (0x0C, 0x07, "write error - recovery needed"),
    (0x0C, 0x08, "write error - recovery failed"),
    (0x0C, 0x09, "write error - loss of streaming"),
    (0x0C, 0x0A, "write error - padding blocks added"),
    (0x0C, 0x0B, "auxiliary memory write error"),
    (0x11, 0x00, "unrecovered read error"),
    (0x11, 0x01, "read retries exhausted"),
    (0x11, 0x02, "error too long to correct"),
    (0x11, 0x03, "multiple read errors"),
    (0x11, 0x08, "incomplete block read"),
    (0x11, 0x09, "no gap found"),
    (0x11, 0x0A, "miscorrected error"),
    (0x11, 0x0D, "de-compression crc error"),
    (0x11, 0x0E, "cannot decompress using declared algorithm"),
    (0x11, 0x11, "read error - loss of streaming"),
    (0x11, 0x12, "auxiliary memory read error"),
    (0x14, 0x00, "recorded entity not found"),
    (0x14, 0x01, "record not found"),
    (0x14, 0x02, "filemark or setmark not found"),
    (0x14, 0x03, "end-of-data not found"),
    (0x14, 0x04, "block sequence error"),
    (0x14, 0x07, "locate operation failure"),
    (0x15, 0x00, "random positioning error"),
    (0x15, 0x01, "mechanical positioning error"),
    (0x15, 0x02, "positioning error detected by read of medium"),
    (
        0x17,
        0x00,
        "recovered data with no error correction applied",
    ),
    (0x17, 0x01, "recovered data with retries"),
    (0x18, 0x00, "recovered data with error correction applied"),
    (0x1A, 0x00, "parameter list length error"),
    (0x1B, 0x00, "synchronous data transfer error"),
    (0x20, 0x00, "invalid command operation code"),
    (0x21, 0x01, "invalid element address"),
    (0x24, 0x00, "invalid field in cdb"),
    (0x25, 0x00, "logical unit not supported"),
    (0x26, 0x00, "invalid field in parameter list"),
    (0x26, 0x01, "parameter not supported"),
    (0x26, 0x02, "parameter value invalid"),
    (0x26, 0x03, "threshold parameters not supported"),
    (0x27, 0x00, "write protected"),
    (0x27, 0x01, "hardware write protected"),
    (0x27, 0x02, "logical unit software write protected"),
    (0x27, 0x03, "associated write protect"),
    (0x27, 0x04, "persistent write protect"),
    (0x27, 0x05, "permanent write protect"),
    (
        0x28,
        0x00,
        "not ready to ready change, medium may have changed",
    ),
    (0x28, 0x01, "import or export element accessed"),
    (0x29, 0x00, "power on, reset, or bus device reset occurred"),
    (0x29, 0x01, "power on occurred"),
    (0x29, 0x02, "scsi bus reset occurred"),
    (0x29, 0x03, "bus device reset function occurred"),
    (0x29, 0x04, "device internal reset"),
    (0x29, 0x07, "i_t nexus loss occurred"),
    (0x2A, 0x00, "parameters changed"),
    (0x2A, 0x01, "mode parameters changed"),
    (0x2A, 0x02, "log parameters changed"),
    (0x2A, 0x03, "reservations preempted"),
    (0x2A, 0x04, "reservations released"),
    (0x2A, 0x05, "registrations preempted"),
    (0x2C, 0x00, "command sequence error"),
    (0x2F, 0x00, "commands cleared by another initiator"),
    (0x30, 0x00, "incompatible medium installed"),
    (0x30, 0x01, "cannot read medium - unknown format"),
    (0x30, 0x02, "cannot read medium - incompatible format"),
    (0x30, 0x03, "cleaning cartridge installed"),
    (0x30, 0x04, "cannot write medium - unknown format"),
    (0x30, 0x05, "cannot write medium - incompatible format"),
    (0x30, 0x06, "cannot format medium - incompatible medium"),
    (0x30, 0x07, "cleaning failure"),
    (0x30, 0x0A, "cleaning request rejected"),
    (0x30, 0x0B, "cleaning tape expired"),
    (0x30, 0x0C, "worm medium - overwrite attempted"),
    (0x30, 0x0D, "worm medium - integrity check"),
    (0x31, 0x00, "medium format corrupted"),
    (0x31, 0x01, "format command failed"),
    (0x33, 0x00, "tape length error"),
    (0x37, 0x00, "rounded parameter"),
    (0x39, 0x00, "saving parameters not supported"),
    (0x3A, 0x00, "medium not present"),
    (0x3A, 0x01, "medium not present - tray closed"),
    (0x3A, 0x02, "medium not present - tray open"),
    (0x3A, 0x03, "medium not present - loadable"),
    (
        0x3A,
        0x04,
        "medium not present - medium auxiliary memory accessible",
    ),
    (0x3B, 0x00, "sequential positioning error"),
    (0x3B, 0x01, "tape position error at beginning-of-medium"),
    (0x3B, 0x02, "tape position error at end-of-medium"),
    (0x3B, 0x08, "reposition error"),
    (0x3B, 0x09, "read past end of medium"),
    (0x3B, 0x0A, "read past beginning of medium"),
    (0x3B, 0x0B, "position past end of medium"),
    (0x3B, 0x0C, "position past beginning of medium"),
    (0x3B, 0x0D, "medium destination element full"),
    (0x3B, 0x0E, "medium source element empty"),
    (0x3B, 0x0F, "end of medium reached"),
    (0x3B, 0x11, "medium magazine not accessible"),
    (0x3B, 0x12, "medium magazine removed"),
    (0x3B, 0x13, "medium magazine inserted"),
    (0x3B, 0x14, "medium magazine locked"),
    (0x3B, 0x15, "medium magazine unlocked"),
    (0x3B, 0x16, "mechanical positioning or changer error"),
    (0x3B, 0x18, "element disabled"),
    (0x3B, 0x19, "element enabled"),
    (0x3B, 0x1A, "data transfer device removed"),
    (0x3B, 0x1B, "data transfer device inserted"),
    (0x3E, 0x00, "logical unit has not self-configured yet"),
    (0x3E, 0x01, "logical unit failure"),
    (0x3E, 0x02, "timeout on logical unit"),
    (0x3F, 0x00, "target operating conditions have changed"),
    (0x3F, 0x01, "microcode has been changed"),
    (0x3F, 0x02, "changed operating definition"),
    (0x3F, 0x03, "inquiry data has changed"),
    (0x3F, 0x0E, "reported luns data has changed"),
    (0x3F, 0x10, "medium loadable"),
    (0x3F, 0x11, "medium auxiliary memory accessible"),
    (0x43, 0x00, "message error"),
    (0x44, 0x00, "internal target failure"),
    (0x45, 0x00, "select or reselect failure"),
    (0x47, 0x00, "scsi parity error"),
    (0x48, 0x00, "initiator detected error message received"),
    (0x49, 0x00, "invalid message error"),
    (0x4A, 0x00, "command phase error"),
    (0x4B, 0x00, "data phase error"),
    (0x4E, 0x00, "overlapped commands attempted"),
    (0x50, 0x00, "write append error"),
    (0x50, 0x01, "write append position error"),
    (0x50, 0x02, "position error related to timing"),
    (0x51, 0x00, "erase failure"),
    (0x52, 0x00, "cartridge fault"),
    (0x53, 0x00, "media load or eject failed"),
    (0x53, 0x01, "unload tape failure"),
    (0x53, 0x02, "medium removal prevented"),
    (
        0x53,
        0x03,
        "medium removal prevented by data transfer element",
    ),
    (0x53, 0x04, "medium thread or unthread failure"),
    (0x53, 0x05, "volume identifier invalid"),
    (0x53, 0x06, "volume identifier missing"),
    (0x53, 0x07, "duplicate volume identifier"),
    (0x53, 0x08, "element status unknown"),
    (0x55, 0x06, "auxiliary memory out of space"),
    (0x5A, 0x00, "operator request or state change input"),
    (0x5A, 0x01, "operator medium removal request"),
    (0x5A, 0x02, "operator selected write protect"),
    (0x5A, 0x03, "operator selected write permit"),
    (0x5B, 0x00, "log exception"),
    (0x5B, 0x01, "threshold condition met"),
    (0x5B, 0x02, "log counter at maximum"),
    (0x5B, 0x03, "log list codes exhausted"),
    (0x5D, 0x00, "failure prediction threshold exceeded"),
    (0x5D, 0xFF, "failure prediction threshold exceeded (false)"),
    (0x5E, 0x00, "low power condition on"),
    (0x74, 0x00, "security error"),
    (0x74, 0x01, "unable to decrypt data"),
    (0x74, 0x02, "unencrypted data encountered while decrypting"),
    (0x74, 0x03, "incorrect data encryption key"),
];

/// The standard text of an ASC/ASCQ pair, as [`Sense::asc_text`] gives it.
pub fn asc_ascq_text(asc: u8, ascq: u8) -> Option<&'static str> {
    match ASC_ASCQ_TEXT.binary_search_by_key(&(asc, ascq), |&(a, q, _)| (a, q)) {
        Ok(i) => Some(ASC_ASCQ_TEXT[i].2),
        Err(_) if asc >= 0x80 || ascq >= 0x80 => Some("vendor specific"),
        Err(_) => None,
    }
}

impl fmt::Display for Sense {
    /// `MEDIUM ERROR (3), ASC/ASCQ 11/00 unrecovered read error`, then
    /// `, deferred error`, `, filemark`, `, end of medium` and `, incorrect length`
    /// as they apply. The key number is hexadecimal.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({:X}), ASC/ASCQ {:02X}/{:02X}",
            self.key_name(),
            self.key,
            self.asc,
            self.ascq
        )?;
        if let Some(text) = self.asc_text() {
            write!(f, " {text}")?;
        }
        if self.deferred {
            f.write_str(", deferred error")?;
        }
        if self.filemark {
            f.write_str(", filemark")?;
        }
        if self.eom {
            f.write_str(", end of medium")?;
        }
        if self.ili {
            f.write_str(", incorrect length")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An 18-byte fixed-format sense (SPC-4) with the given byte 0, byte 2,
    /// INFORMATION and ASC/ASCQ; additional sense length 0Ah.
    fn fixed(b0: u8, b2: u8, info: [u8; 4], asc: u8, ascq: u8) -> Vec<u8> {
        let mut s = vec![0u8; 18];
        s[0] = b0;
        s[2] = b2;
        s[3..7].copy_from_slice(&info);
        s[7] = 0x0A;
        s[12] = asc;
        s[13] = ascq;
        s
    }

    #[test]
    fn fixed_medium_error_unrecovered_read() {
        let s = parse(&fixed(0x70, 0x03, [0; 4], 0x11, 0x00)).unwrap();
        assert!(!s.deferred);
        assert_eq!(s.key, MEDIUM_ERROR);
        assert_eq!((s.asc, s.ascq), (0x11, 0x00));
        assert!(!s.filemark && !s.eom && !s.ili);
        assert_eq!(s.information, None, "VALID is clear");
        assert_eq!(s.key_name(), "MEDIUM ERROR");
        assert_eq!(s.asc_text(), Some("unrecovered read error"));
        assert_eq!(
            s.to_string(),
            "MEDIUM ERROR (3), ASC/ASCQ 11/00 unrecovered read error"
        );
    }

    #[test]
    fn fixed_filemark_on_variable_read() {
        // SSC-4: a READ that meets a filemark returns CHECK CONDITION, NO SENSE,
        // FILEMARK set, ASC/ASCQ 00/01, INFORMATION = requested length (here 65536).
        let s = parse(&fixed(0xF0, 0x80, [0x00, 0x01, 0x00, 0x00], 0x00, 0x01)).unwrap();
        assert_eq!(s.key, NO_SENSE);
        assert!(s.filemark);
        assert!(!s.ili);
        assert_eq!(s.information, Some(65536));
        assert_eq!(s.asc_text(), Some("filemark detected"));
        assert_eq!(
            s.to_string(),
            "NO SENSE (0), ASC/ASCQ 00/01 filemark detected, filemark"
        );
    }

    #[test]
    fn fixed_ili_negative_residue_is_sign_extended() {
        // Asked for 32768 bytes, the block on tape has 65536: residue 32768 - 65536.
        let s = parse(&fixed(0xF0, 0x20, [0xFF, 0xFF, 0x80, 0x00], 0x00, 0x00)).unwrap();
        assert!(s.ili);
        assert_eq!(s.information, Some(-32768));
        // Asked for 65536, the block has 4096: positive residue.
        let s = parse(&fixed(0xF0, 0x20, [0x00, 0x00, 0xF0, 0x00], 0x00, 0x00)).unwrap();
        assert_eq!(s.information, Some(61440));
        assert!(s.to_string().ends_with(", incorrect length"));
    }

    #[test]
    fn fixed_early_warning_and_blank_check() {
        // A WRITE in the early-warning zone: NO SENSE, EOM, 00/02.
        let s = parse(&fixed(0x70, 0x40, [0; 4], 0x00, 0x02)).unwrap();
        assert_eq!(s.key, NO_SENSE);
        assert!(s.eom && !s.filemark);
        assert_eq!(s.asc_text(), Some("end-of-partition/medium detected"));
        // A READ at end of data: BLANK CHECK, 00/05.
        let s = parse(&fixed(0xF0, 0x08, [0, 0, 0, 1], 0x00, 0x05)).unwrap();
        assert_eq!(s.key, BLANK_CHECK);
        assert_eq!(s.information, Some(1));
        assert_eq!(s.asc_text(), Some("end-of-data detected"));
        // A WRITE past the end of the medium: VOLUME OVERFLOW with EOM.
        let s = parse(&fixed(0x70, 0x4D, [0; 4], 0x00, 0x02)).unwrap();
        assert_eq!(s.key, VOLUME_OVERFLOW);
        assert!(s.eom);
    }

    #[test]
    fn fixed_deferred_write_error() {
        let s = parse(&fixed(0x71, 0x03, [0; 4], 0x0C, 0x00)).unwrap();
        assert!(s.deferred);
        assert_eq!(s.key, MEDIUM_ERROR);
        assert_eq!(s.asc_text(), Some("write error"));
        assert_eq!(
            s.to_string(),
            "MEDIUM ERROR (3), ASC/ASCQ 0C/00 write error, deferred error"
        );
    }

    #[test]
    fn fixed_not_ready_unit_attention_data_protect() {
        let s = parse(&fixed(0x70, 0x02, [0; 4], 0x3A, 0x00)).unwrap();
        assert_eq!(s.key, NOT_READY);
        assert_eq!(s.asc_text(), Some("medium not present"));
        let s = parse(&fixed(0x70, 0x02, [0; 4], 0x04, 0x01)).unwrap();
        assert_eq!(
            s.asc_text(),
            Some("logical unit is in process of becoming ready")
        );
        let s = parse(&fixed(0x70, 0x06, [0; 4], 0x28, 0x00)).unwrap();
        assert_eq!(s.key, UNIT_ATTENTION);
        assert_eq!(
            s.asc_text(),
            Some("not ready to ready change, medium may have changed")
        );
        let s = parse(&fixed(0x70, 0x07, [0; 4], 0x27, 0x00)).unwrap();
        assert_eq!(s.key, DATA_PROTECT);
        assert_eq!(s.key_name(), "DATA PROTECT");
        assert_eq!(s.asc_text(), Some("write protected"));
        // A changer refusing a move: ILLEGAL REQUEST, 3B/0E.
        let s = parse(&fixed(0x70, 0x05, [0; 4], 0x3B, 0x0E)).unwrap();
        assert_eq!(s.key, ILLEGAL_REQUEST);
        assert_eq!(
            s.to_string(),
            "ILLEGAL REQUEST (5), ASC/ASCQ 3B/0E medium source element empty"
        );
        let s = parse(&fixed(0x70, 0x0B, [0; 4], 0x44, 0x00)).unwrap();
        assert_eq!(
            s.to_string(),
            "ABORTED COMMAND (B), ASC/ASCQ 44/00 internal target failure"
        );
    }

    #[test]
    fn truncated_fixed_sense() {
        // Three bytes: key and flags only.
        let s = parse(&[0x70, 0x00, 0x86]).unwrap();
        assert_eq!(s.key, UNIT_ATTENTION);
        assert!(s.filemark);
        assert_eq!((s.asc, s.ascq), (0, 0));
        assert_eq!(s.information, None);
        // VALID set but the INFORMATION field cut short.
        let s = parse(&[0xF0, 0x00, 0x20, 0xFF, 0xFF]).unwrap();
        assert!(s.ili);
        assert_eq!(s.information, None);
        // Thirteen bytes: ASC present, ASCQ missing; the additional length says 0.
        let mut v = fixed(0x70, 0x02, [0; 4], 0x3A, 0x02);
        v[7] = 0;
        v.truncate(13);
        let s = parse(&v).unwrap();
        assert_eq!((s.key, s.asc, s.ascq), (NOT_READY, 0x3A, 0x00));
        // One byte.
        let s = parse(&[0x71]).unwrap();
        assert!(s.deferred);
        assert_eq!(s.key, NO_SENSE);
    }

    #[test]
    fn not_sense_data() {
        assert_eq!(parse(&[]), None);
        assert_eq!(parse(&[0x7F, 0, 5]), None, "vendor-specific response code");
        assert_eq!(parse(&[0x00; 18]), None);
        assert_eq!(parse(&[0x74, 0, 5]), None);
    }

    #[test]
    fn descriptor_format_with_information_and_stream_descriptors() {
        // SPC-4 descriptor format: header, information descriptor (00h, length 0Ah, VALID),
        // stream commands descriptor (04h, length 02h) with FILEMARK and ILI.
        let raw = [
            0x72, 0x03, 0x11, 0x01, 0x00, 0x00, 0x00, 0x10, // header, 16 bytes follow
            0x00, 0x0A, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x12, 0x34, // info
            0x04, 0x02, 0x00, 0xA0, // stream commands
        ];
        let s = parse(&raw).unwrap();
        assert!(!s.deferred);
        assert_eq!(s.key, MEDIUM_ERROR);
        assert_eq!((s.asc, s.ascq), (0x11, 0x01));
        assert_eq!(s.information, Some(0x1234));
        assert!(s.filemark && s.ili && !s.eom);
        assert_eq!(s.asc_text(), Some("read retries exhausted"));
    }

    #[test]
    fn descriptor_format_negative_information_and_deferred() {
        let raw = [
            0x73, 0x0D, 0x00, 0x02, 0x00, 0x00, 0x00, 0x10, //
            0x04, 0x02, 0x00, 0x40, // stream commands first: EOM
            0x00, 0x0A, 0x80, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE,
        ];
        let s = parse(&raw).unwrap();
        assert!(s.deferred);
        assert_eq!(s.key, VOLUME_OVERFLOW);
        assert!(s.eom && !s.filemark && !s.ili);
        assert_eq!(s.information, Some(-2));
        assert_eq!(
            s.to_string(),
            "VOLUME OVERFLOW (D), ASC/ASCQ 00/02 end-of-partition/medium detected, \
             deferred error, end of medium"
        );
    }

    #[test]
    fn descriptor_format_invalid_or_truncated_descriptors() {
        // Information descriptor without VALID: no information.
        let raw = [
            0x72, 0x05, 0x24, 0x00, 0, 0, 0, 0x0C, //
            0x00, 0x0A, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 9,
        ];
        let s = parse(&raw).unwrap();
        assert_eq!(s.information, None);
        assert_eq!(s.asc_text(), Some("invalid field in cdb"));
        // The same descriptor cut off: ignored, no panic.
        let s = parse(&raw[..15]).unwrap();
        assert_eq!((s.key, s.asc), (ILLEGAL_REQUEST, 0x24));
        // Header only, and shorter than a header.
        let s = parse(&[0x72, 0x06, 0x29, 0x00]).unwrap();
        assert_eq!(
            s.asc_text(),
            Some("power on, reset, or bus device reset occurred")
        );
        let s = parse(&[0x72, 0x02]).unwrap();
        assert_eq!((s.key, s.asc, s.ascq), (NOT_READY, 0, 0));
        // Unknown descriptors are skipped, a zero-filled tail is harmless.
        let mut raw = vec![0x72, 0x00, 0x00, 0x00, 0, 0, 0, 0x20];
        raw.extend_from_slice(&[0x02, 0x06, 0x80, 0, 0, 0, 0, 0]); // sense key specific
        raw.extend_from_slice(&[0x04, 0x02, 0x00, 0x80]); // filemark
        raw.extend_from_slice(&[0u8; 14]);
        let s = parse(&raw).unwrap();
        assert!(s.filemark);
        assert_eq!(s.information, None);
    }

    #[test]
    fn asc_table_and_vendor_codes() {
        let t = |asc, ascq| asc_ascq_text(asc, ascq);
        assert_eq!(
            t(0x00, 0x04),
            Some("beginning-of-partition/medium detected")
        );
        assert_eq!(t(0x00, 0x16), Some("operation in progress"));
        assert_eq!(
            t(0x04, 0x03),
            Some("logical unit not ready, manual intervention required")
        );
        assert_eq!(t(0x14, 0x03), Some("end-of-data not found"));
        assert_eq!(t(0x15, 0x01), Some("mechanical positioning error"));
        assert_eq!(t(0x1A, 0x00), Some("parameter list length error"));
        assert_eq!(t(0x20, 0x00), Some("invalid command operation code"));
        assert_eq!(t(0x2A, 0x01), Some("mode parameters changed"));
        assert_eq!(t(0x30, 0x03), Some("cleaning cartridge installed"));
        assert_eq!(
            t(0x30, 0x05),
            Some("cannot write medium - incompatible format")
        );
        assert_eq!(t(0x3B, 0x0D), Some("medium destination element full"));
        assert_eq!(t(0x3B, 0x12), Some("medium magazine removed"));
        assert_eq!(t(0x3F, 0x01), Some("microcode has been changed"));
        assert_eq!(t(0x50, 0x00), Some("write append error"));
        assert_eq!(t(0x53, 0x02), Some("medium removal prevented"));
        assert_eq!(t(0x5D, 0x00), Some("failure prediction threshold exceeded"));
        assert_eq!(t(0x83, 0x02), Some("vendor specific"));
        assert_eq!(t(0x3B, 0x90), Some("vendor specific"));
        assert_eq!(t(0x62, 0x00), None);
        assert_eq!(t(0x00, 0x7E), None);
        // Display without a known text.
        let s = parse(&fixed(0x70, 0x04, [0; 4], 0x62, 0x00)).unwrap();
        assert_eq!(s.to_string(), "HARDWARE ERROR (4), ASC/ASCQ 62/00");
    }

    #[test]
    fn asc_table_is_sorted_without_duplicates() {
        assert!(ASC_ASCQ_TEXT
            .windows(2)
            .all(|w| (w[0].0, w[0].1) < (w[1].0, w[1].1)));
        assert!(ASC_ASCQ_TEXT.iter().all(|&(a, q, t)| {
            asc_ascq_text(a, q) == Some(t) && !t.is_empty() && t == t.to_lowercase()
        }));
    }

    #[test]
    fn every_key_has_a_name() {
        let names: Vec<&str> = (0u8..16)
            .map(|key| {
                Sense {
                    key,
                    ..parse(&[0x70]).unwrap()
                }
                .key_name()
            })
            .collect();
        assert_eq!(names[RECOVERED_ERROR as usize], "RECOVERED ERROR");
        assert_eq!(names[HARDWARE_ERROR as usize], "HARDWARE ERROR");
        assert_eq!(names[BLANK_CHECK as usize], "BLANK CHECK");
        assert_eq!(names[ABORTED_COMMAND as usize], "ABORTED COMMAND");
        assert_eq!(names[MISCOMPARE as usize], "MISCOMPARE");
        assert!(names
            .iter()
            .all(|n| !n.is_empty() && *n == n.to_uppercase()));
    }

    #[test]
    fn garbage_never_panics() {
        // Every prefix of the vectors above, and pseudo-random bytes behind each valid
        // response code.
        let samples: Vec<Vec<u8>> = vec![
            fixed(0xF0, 0xE3, [0x80, 0, 0, 0], 0x11, 0x00),
            vec![
                0x72, 0x03, 0x11, 0x01, 0, 0, 0, 0x10, 0x00, 0x0A, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x12,
                0x34, 0x04, 0x02, 0x00, 0xA0,
            ],
        ];
        for v in &samples {
            for n in 0..=v.len() {
                let _ = parse(&v[..n]).map(|s| s.to_string());
            }
        }
        let mut x: u32 = 0x1234_5678;
        for round in 0..2000 {
            let len = round % 40;
            let mut v: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            if let Some(b) = v.first_mut() {
                *b = 0x70 | (*b & 0x83);
            }
            if let Some(s) = parse(&v) {
                assert!(s.key <= 0x0F);
                let _ = s.to_string();
            }
        }
    }
}
