//! The SSC tape drive driver: variable-block reads and writes, filemarks with the
//! immediate bit, positioning by logical block, and the drive's sense turned into
//! the same outcomes the virtual drive gives.
//!
//! Positions are logical object numbers: every block and every filemark counts one,
//! from the beginning of the partition, as in READ POSITION's long form and LOCATE
//! (16). The driver also keeps the position itself, so that a drive without LOCATE
//! or READ POSITION (tgt) is positioned by REWIND and SPACE, and catalog positions
//! mean the same on every drive.

use super::cdb::{self, BlockDescriptor, InquiryData, SpaceCode};
use super::sense::{self, Sense};
use super::ScsiTransport;
use super::{exec, failed, must, open_transport, unit_serial, DataDir, Reply, ScsiError};
use super::{rao, tape_alert, volume_statistics};
use super::{LONG, MEDIUM, SHORT};
use crate::{DeviceError, DriveStats, ReadOutcome, Result, TapeDrive, WriteOutcome};
use std::time::{Duration, Instant};

/// What a drive model is known to get wrong or lack, keyed by INQUIRY vendor and
/// product (see docs/DEVICES.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quirks {
    /// READ POSITION answers, but with zeros: keep the position in the driver.
    pub no_read_position: bool,
    /// LOCATE is not supported: position by REWIND and SPACE.
    pub no_locate: bool,
    /// SPACE(16) is not supported: use SPACE(6).
    pub no_space16: bool,
    /// LOG SENSE is not supported.
    pub no_log_sense: bool,
    /// MODE SELECT with a mode page fails (so compression cannot be switched).
    pub no_mode_select_page: bool,
    /// LOAD/UNLOAD works like START STOP UNIT: byte 4 0x03 loads, 0x02 unloads
    /// (0x01 and 0x00 do nothing).
    pub load_as_start_stop: bool,
}

/// One row of the quirks table.
pub struct QuirkEntry {
    /// INQUIRY vendor identification, exactly (trimmed).
    pub vendor: &'static str,
    /// Start of the INQUIRY product identification.
    pub product_prefix: &'static str,
    /// What the entry says.
    pub quirks: Quirks,
    /// Why, for docs and `devices`.
    pub note: &'static str,
}

/// The quirks table.
pub const QUIRKS: &[QuirkEntry] = &[QuirkEntry {
    vendor: "IET",
    product_prefix: "VIRTUAL-TAPE",
    quirks: Quirks {
        no_read_position: true,
        no_locate: true,
        no_space16: true,
        no_log_sense: true,
        no_mode_select_page: true,
        load_as_start_stop: true,
    },
    note: "tgt's SSC emulation (Linux SCSI target framework)",
}];

/// The row of the quirks table for a device with this INQUIRY data, if any.
pub fn quirk_entry(inq: &InquiryData) -> Option<&'static QuirkEntry> {
    QUIRKS
        .iter()
        .find(|q| q.vendor == inq.vendor && inq.product.starts_with(q.product_prefix))
}

/// The quirks of a drive with this INQUIRY data.
pub fn quirks_for(inq: &InquiryData) -> Quirks {
    quirk_entry(inq).map(|q| q.quirks).unwrap_or_default()
}

/// An open SCSI tape drive.
pub struct ScsiDrive {
    t: Box<dyn ScsiTransport>,
    dev: String,
    /// INQUIRY data.
    pub inquiry: InquiryData,
    /// Unit serial number, where the drive gives one.
    pub serial: Option<String>,
    quirks: Quirks,
    /// LOCATE(16) works (false once the drive refused it).
    can_locate: bool,
    /// READ POSITION gives real positions.
    can_read_position: bool,
    can_space16: bool,
    /// The position as the driver knows it: logical objects from the beginning.
    pos: Option<u64>,
    medium: bool,
    write_protected: bool,
    /// The largest block the drive takes (READ BLOCK LIMITS), where it says.
    max_block: Option<u32>,
    /// Bytes written to the loaded cartridge since it was loaded (for usage()).
    written: u64,
    stats: DriveStats,
    opened: Instant,
    /// The drive's limits of GENERATE RECOMMENDED ACCESS ORDER: not asked yet
    /// (`None`), refused (`Some(None)`: the drive has no such order), or known.
    rao: Option<Option<rao::Limits>>,
}

/// Largest transfer of a READ(6) or WRITE(6).
const MAX_TRANSFER: usize = 0xff_ffff;
/// How long a drive may take to become ready after a load.
const READY_WAIT: Duration = Duration::from_secs(600);

impl ScsiDrive {
    /// Opens the tape drive at `dev` (`/dev/sgN` or an iSCSI URL): INQUIRY, serial
    /// number, quirks, and whether a cartridge is ready. A ready cartridge is set
    /// up for use (block limits, variable-block mode) and its position found: from
    /// READ POSITION, or, on a drive without it, by a REWIND. To look at a drive
    /// without moving its tape, use [`ScsiDrive::open_for_status`].
    pub fn open(dev: &str) -> Result<Self> {
        Self::with_transport(open_transport(dev)?, dev)
    }

    /// [`ScsiDrive::open`] over a transport already open to `dev`.
    pub fn with_transport(t: Box<dyn ScsiTransport>, dev: &str) -> Result<Self> {
        let mut d = Self::identify(t, dev)?;
        let r = exec(&mut *d.t, &cdb::test_unit_ready(), DataDir::None, SHORT)?;
        if r.good() {
            d.medium = true;
            d.after_ready()?;
            d.pos = d.read_position()?;
            if d.pos.is_none() {
                d.rewind()?;
            }
        }
        Ok(d)
    }

    /// Opens the tape drive at `dev` to look at it, sending no command that moves
    /// the tape or changes a setting: TEST UNIT READY, INQUIRY and the serial
    /// number page only. [`TapeDrive::health`] then reads the log pages, and the
    /// INQUIRY data and serial number are there; the cartridge is not set up, so
    /// [`TapeDrive::has_medium`] is false and reads, writes and positioning fail
    /// with [`DeviceError::NoMedium`] until [`TapeDrive::load`]. What `library
    /// status` uses, so a status never moves a tape.
    pub fn open_for_status(dev: &str) -> Result<Self> {
        Self::for_status_with_transport(open_transport(dev)?, dev)
    }

    /// [`ScsiDrive::open_for_status`] over a transport already open to `dev`.
    pub fn for_status_with_transport(t: Box<dyn ScsiTransport>, dev: &str) -> Result<Self> {
        Self::identify(t, dev)
    }

    /// INQUIRY (a tape drive?), serial number and quirks; nothing about the
    /// cartridge.
    fn identify(mut t: Box<dyn ScsiTransport>, dev: &str) -> Result<Self> {
        let _ = exec(&mut *t, &cdb::test_unit_ready(), DataDir::None, SHORT)?;
        let inquiry = super::inquiry(&mut *t, dev)?;
        if inquiry.peripheral_type != 0x01 {
            return Err(ScsiError::WrongDeviceType {
                device: dev.to_string(),
                expected: "tape drive",
                vendor: inquiry.vendor,
                product: inquiry.product,
                peripheral_type: inquiry.peripheral_type,
            }
            .into());
        }
        let serial = unit_serial(&mut *t);
        let quirks = quirks_for(&inquiry);
        Ok(ScsiDrive {
            t,
            dev: dev.to_string(),
            inquiry,
            serial,
            quirks,
            can_locate: !quirks.no_locate,
            can_read_position: !quirks.no_read_position,
            can_space16: !quirks.no_space16,
            pos: None,
            medium: false,
            write_protected: false,
            max_block: None,
            written: 0,
            stats: DriveStats::default(),
            opened: Instant::now(),
            rao: None,
        })
    }

    /// The unit serial number of the drive at `dev`.
    pub fn serial_of(dev: &str) -> Result<String> {
        Self::serial_with_transport(open_transport(dev)?, dev)
    }

    /// [`ScsiDrive::serial_of`] over a transport already open to `dev`.
    pub fn serial_with_transport(mut t: Box<dyn ScsiTransport>, dev: &str) -> Result<String> {
        let _ = exec(&mut *t, &cdb::test_unit_ready(), DataDir::None, SHORT)?;
        unit_serial(&mut *t).ok_or_else(|| {
            ScsiError::NoSerialNumber {
                device: dev.to_string(),
            }
            .into()
        })
    }

    /// The quirks in use.
    pub fn quirks(&self) -> Quirks {
        self.quirks
    }

    /// Rewinds and ejects the cartridge so that a changer can take it.
    pub fn eject(&mut self) -> Result<()> {
        self.unload()
    }

    /// Makes the cartridge blank: REWIND, then a short ERASE (end of data at the
    /// beginning of tape).
    pub fn erase_from_beginning(&mut self) -> Result<()> {
        self.ensure_medium()?;
        self.rewind()?;
        self.must("ERASE", &[0x19, 0, 0, 0, 0, 0], LONG)?;
        self.written = 0;
        Ok(())
    }

    /// TapeAlert flags that are set, where the drive supports the TapeAlert log
    /// page; `None` when it does not.
    pub fn tape_alerts(&mut self) -> Result<Option<Vec<(u16, &'static str)>>> {
        Ok(self
            .log_page(tape_alert::PAGE)?
            .map(|p| tape_alert::flags(&p)))
    }

    /// The cartridge's Volume Statistics log page (17h), where the drive has it.
    pub fn volume_statistics(&mut self) -> Result<Option<crate::VolumeStatistics>> {
        Ok(self
            .log_page(volume_statistics::PAGE)?
            .map(|p| volume_statistics::parse(&p)))
    }

    /// MODE SENSE(6) of `page` (3Fh: all), parsed; `None` when the drive refuses it
    /// or its answer does not parse.
    fn mode_sense(&mut self, page: u8, dbd: bool) -> Result<Option<cdb::ModeData>> {
        let mut buf = vec![0u8; 255];
        let r = exec(
            &mut *self.t,
            &cdb::mode_sense6(page, dbd, 255),
            DataDir::In(&mut buf),
            SHORT,
        )?;
        Ok(if r.good() {
            cdb::parse_mode_sense6(&buf).ok()
        } else {
            None
        })
    }

    fn log_page(&mut self, page: u8) -> Result<Option<Vec<cdb::LogParam>>> {
        if self.quirks.no_log_sense {
            return Ok(None);
        }
        let mut buf = vec![0u8; 4096];
        let r = exec(
            &mut *self.t,
            &cdb::log_sense(page, 4096),
            DataDir::In(&mut buf),
            SHORT,
        )?;
        if !r.good() {
            return Ok(None);
        }
        match cdb::parse_log_page(&buf) {
            Ok((p, params)) if p & 0x3f == page => Ok(Some(params)),
            _ => Ok(None),
        }
    }

    fn err(&self, command: &'static str, r: &Reply) -> DeviceError {
        failed(&self.dev, command, r).into()
    }

    fn must(&mut self, command: &'static str, cdb: &[u8], timeout: Duration) -> Result<Reply> {
        must(&mut *self.t, command, cdb, DataDir::None, timeout)
    }

    /// After a cartridge became ready: block limits, variable-block mode, write
    /// protection.
    fn after_ready(&mut self) -> Result<()> {
        let mut limits = [0u8; 6];
        let r = exec(
            &mut *self.t,
            &cdb::read_block_limits(),
            DataDir::In(&mut limits),
            SHORT,
        )?;
        if r.good() {
            self.max_block = cdb::parse_block_limits(&limits)
                .ok()
                .map(|l| l.max)
                .filter(|m| *m > 0);
        }
        let mode = self.mode_sense(0x3f, false)?;
        self.write_protected = mode.as_ref().is_some_and(|m| m.write_protected);
        let block_len = mode
            .as_ref()
            .and_then(|m| m.descriptor)
            .map(|d| d.block_len);
        if block_len != Some(0) {
            // Variable-length blocks: a block descriptor with length 0.
            let data = cdb::mode_select6_data(
                Some(BlockDescriptor {
                    density: 0,
                    blocks: 0,
                    block_len: 0,
                }),
                1,
                None,
            );
            let r = exec(
                &mut *self.t,
                &cdb::mode_select6(data.len() as u8),
                DataDir::Out(&data),
                SHORT,
            )?;
            if !r.good() && block_len.is_some() {
                return Err(ScsiError::FixedBlockMode {
                    device: self.dev.clone(),
                    block_len: block_len.unwrap_or(0),
                    sense: r.sense,
                }
                .into());
            }
        }
        Ok(())
    }

    /// The position from READ POSITION, where the drive gives real ones.
    fn read_position(&mut self) -> Result<Option<u64>> {
        if !self.can_read_position {
            return Ok(None);
        }
        // The long form first (64-bit positions), then the short one.
        type Parse = fn(&[u8]) -> std::result::Result<cdb::Position, super::ParseError>;
        let forms: [([u8; 10], usize, Parse); 2] = [
            (cdb::read_position_long(), 32, cdb::parse_read_position_long),
            (
                cdb::read_position_short(),
                20,
                cdb::parse_read_position_short,
            ),
        ];
        for (command, len, parse) in forms {
            let mut buf = [0u8; 32];
            let r = exec(&mut *self.t, &command, DataDir::In(&mut buf[..len]), SHORT)?;
            if r.good() {
                if let Ok(p) = parse(&buf[..len]) {
                    return Ok(Some(p.lbn));
                }
            }
        }
        self.can_read_position = false;
        Ok(None)
    }

    fn known_pos(&mut self) -> Result<u64> {
        if let Some(p) = self.pos {
            return Ok(p);
        }
        if let Some(p) = self.read_position()? {
            self.pos = Some(p);
            return Ok(p);
        }
        self.rewind()?;
        Ok(0)
    }

    /// Spaces forward over `n` logical objects (blocks and filemarks alike) from the
    /// known position. Returns whether it got there: false when end of data came
    /// first. The position is then known where the drive gave the residue, and
    /// unknown (`None`) where it did not.
    fn space_objects(&mut self, mut n: u64) -> Result<bool> {
        let mut pos = self.known_pos()?;
        while n > 0 {
            let (count, r) = if self.can_space16 {
                let count = n.min(i64::MAX as u64) as i64;
                let r = exec(
                    &mut *self.t,
                    &cdb::space16(SpaceCode::Blocks, count),
                    DataDir::None,
                    LONG,
                )?;
                if r.key() == Some(sense::ILLEGAL_REQUEST) {
                    self.can_space16 = false;
                    continue;
                }
                (count, r)
            } else {
                let count = n.min(0x7f_ffff) as i64;
                let r = exec(
                    &mut *self.t,
                    &cdb::space6(SpaceCode::Blocks, count as i32),
                    DataDir::None,
                    LONG,
                )?;
                (count, r)
            };
            let passed = match &r.sense {
                None if r.good() => count as u64,
                // Stopped after a filemark; INFORMATION is the blocks not spaced.
                Some(s) if s.filemark => count as u64 - residue(s, count) + 1,
                Some(s) if is_end_of_data(s) => {
                    self.pos = s
                        .information
                        .map(|_| pos + count as u64 - residue(s, count));
                    return Ok(false);
                }
                _ => {
                    self.pos = None;
                    return Err(self.err("SPACE", &r));
                }
            };
            pos += passed;
            n = n.saturating_sub(passed);
            self.pos = Some(pos);
        }
        Ok(true)
    }

    /// Whether logical object `x` is before end of data: rewind and space to it.
    fn before_end(&mut self, x: u64) -> Result<bool> {
        self.rewind()?;
        if x == 0 {
            let mut b = [0u8; 16];
            let blank = matches!(self.read_block(&mut b), Ok(ReadOutcome::EndOfData));
            self.rewind()?;
            return Ok(!blank);
        }
        self.space_objects(x)
    }

    /// Finds end of data on a drive that neither reports positions nor says how far
    /// a SPACE got when it ran into end of data (tgt): a search over positions, each
    /// probed by REWIND and SPACE, O(log n) commands.
    fn count_to_end(&mut self) -> Result<u64> {
        if !self.before_end(0)? {
            return Ok(0);
        }
        // End of data is after `good` and at or before `bad`.
        let (mut good, mut bad) = (0u64, 1u64);
        while self.before_end(bad)? {
            good = bad;
            bad = bad.saturating_mul(2);
        }
        while bad - good > 1 {
            let mid = good + (bad - good) / 2;
            if self.before_end(mid)? {
                good = mid;
            } else {
                bad = mid;
            }
        }
        // Stand at end of data.
        self.rewind()?;
        self.space_objects(bad)?;
        self.pos = Some(bad);
        Ok(bad)
    }

    fn ensure_medium(&self) -> Result<()> {
        if self.medium {
            Ok(())
        } else {
            Err(DeviceError::NoMedium)
        }
    }

    fn load_unload(&mut self, load: bool) -> Result<Reply> {
        let byte4 = match (load, self.quirks.load_as_start_stop) {
            (true, true) => 0x03,
            (false, true) => 0x02,
            (true, false) => 0x01,
            (false, false) => 0x00,
        };
        exec(
            &mut *self.t,
            &cdb::load_unload(byte4, false),
            DataDir::None,
            LONG,
        )
    }

    fn prevent(&mut self, prevent: bool) {
        let _ = exec(
            &mut *self.t,
            &cdb::prevent_allow(prevent),
            DataDir::None,
            SHORT,
        );
    }
}

/// The residue of a command for `count` objects: the INFORMATION field, bounded.
fn residue(s: &Sense, count: i64) -> u64 {
    s.information.unwrap_or(0).clamp(0, count.max(0)) as u64
}

/// End of data: BLANK CHECK (with 00/05, or 00/00 from some targets).
fn is_end_of_data(s: &Sense) -> bool {
    s.key == sense::BLANK_CHECK || (s.asc == 0x00 && s.ascq == 0x05)
}

impl TapeDrive for ScsiDrive {
    fn describe(&self) -> String {
        format!(
            "{} {} {} at {}",
            self.inquiry.vendor, self.inquiry.product, self.inquiry.revision, self.dev
        )
    }

    fn has_medium(&self) -> bool {
        self.medium
    }

    fn load(&mut self) -> Result<()> {
        let start = Instant::now();
        let mut loaded = false;
        loop {
            let r = exec(&mut *self.t, &cdb::test_unit_ready(), DataDir::None, SHORT)?;
            if r.good() {
                break;
            }
            let s = r.sense.clone();
            match s.as_ref().map(|s| (s.key, s.asc, s.ascq)) {
                // Not ready, medium not present: load it (once).
                Some((sense::NOT_READY, 0x3a, _)) if !loaded => {
                    loaded = true;
                    let r = self.load_unload(true)?;
                    if !r.good() && r.key() != Some(sense::NOT_READY) {
                        return Err(self.err("LOAD", &r));
                    }
                }
                Some((sense::NOT_READY, 0x3a, _)) => return Err(DeviceError::NoMedium),
                // Becoming ready, or an operation in progress: wait.
                Some((sense::NOT_READY, 0x04, _)) | Some((sense::NOT_READY, 0x00, _)) => {}
                _ => return Err(self.err("TEST UNIT READY", &r)),
            }
            if start.elapsed() > READY_WAIT {
                return Err(ScsiError::NotReady {
                    device: self.dev.clone(),
                    waited: READY_WAIT,
                }
                .into());
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        self.medium = true;
        self.written = 0;
        self.stats.loads += 1;
        self.after_ready()?;
        self.prevent(true);
        self.rewind()
    }

    fn unload(&mut self) -> Result<()> {
        if !self.medium {
            // Still tell the drive: the cartridge may be in it without our knowing.
            let _ = self.load_unload(false);
            return Ok(());
        }
        self.prevent(false);
        self.must("REWIND", &cdb::rewind(false), LONG)?;
        let r = self.load_unload(false)?;
        if !r.good() && !matches!(r.key(), Some(sense::NOT_READY)) {
            return Err(self.err("UNLOAD", &r));
        }
        self.medium = false;
        self.pos = None;
        self.stats.unloads += 1;
        Ok(())
    }

    fn write_protected(&self) -> Result<bool> {
        self.ensure_medium()?;
        Ok(self.write_protected)
    }

    fn rewind(&mut self) -> Result<()> {
        self.ensure_medium()?;
        self.must("REWIND", &cdb::rewind(false), LONG)?;
        self.pos = Some(0);
        Ok(())
    }

    fn position(&mut self) -> Result<u64> {
        self.ensure_medium()?;
        self.known_pos()
    }

    fn locate(&mut self, lbn: u64) -> Result<()> {
        self.ensure_medium()?;
        if self.pos == Some(lbn) {
            return Ok(());
        }
        self.stats.locates += 1;
        let t0 = Instant::now();
        if self.can_locate {
            let r = exec(
                &mut *self.t,
                &cdb::locate16(lbn, false),
                DataDir::None,
                LONG,
            )?;
            if r.good() {
                self.pos = Some(lbn);
                self.stats.locate_seconds += t0.elapsed().as_secs_f64();
                return Ok(());
            }
            match &r.sense {
                Some(s) if s.key == sense::ILLEGAL_REQUEST && matches!(s.asc, 0x20 | 0x24) => {
                    self.can_locate = false;
                }
                Some(s) if is_end_of_data(s) => {
                    self.pos = self.read_position()?;
                    return Err(DeviceError::BeyondEndOfData { lbn });
                }
                _ => {
                    self.pos = None;
                    return Err(self.err("LOCATE", &r));
                }
            }
        }
        let here = self.known_pos()?;
        if lbn < here {
            self.rewind()?;
        }
        let here = self.known_pos()?;
        let there = self.space_objects(lbn - here)?;
        self.stats.locate_seconds += t0.elapsed().as_secs_f64();
        if !there {
            // A drive that does not say how far it got: end of data may be exactly
            // the block asked for (where the next write appends).
            if self.pos.is_none() && lbn > 0 && self.before_end(lbn - 1)? {
                self.space_objects(1)?;
                self.pos = Some(lbn);
                return Ok(());
            }
            return Err(DeviceError::BeyondEndOfData { lbn });
        }
        Ok(())
    }

    fn space_to_eod(&mut self) -> Result<()> {
        self.ensure_medium()?;
        if self.can_read_position {
            let r = exec(
                &mut *self.t,
                &cdb::space6(SpaceCode::EndOfData, 0),
                DataDir::None,
                LONG,
            )?;
            if !(r.good() || r.sense.as_ref().is_some_and(is_end_of_data)) {
                self.pos = None;
                return Err(self.err("SPACE to end of data", &r));
            }
            self.pos = self.read_position()?;
            if self.pos.is_some() {
                return Ok(());
            }
        }
        // Count the objects on the way, so the position stays known.
        if !self.space_objects(u64::MAX)? && self.pos.is_none() {
            self.count_to_end()?;
        }
        Ok(())
    }

    fn read_block(&mut self, buf: &mut [u8]) -> Result<ReadOutcome> {
        self.ensure_medium()?;
        let len = buf.len().min(MAX_TRANSFER);
        let r = exec(
            &mut *self.t,
            &cdb::read6(len as u32),
            DataDir::In(&mut buf[..len]),
            MEDIUM,
        )?;
        let step = |d: &mut ScsiDrive| {
            if let Some(p) = d.pos.as_mut() {
                *p += 1;
            }
        };
        if r.good() {
            step(self);
            self.stats.host_bytes_read += len as u64;
            return Ok(ReadOutcome::Block(len));
        }
        let Some(s) = r.sense.clone() else {
            return Err(self.err("READ", &r));
        };
        if s.filemark {
            step(self);
            return Ok(ReadOutcome::Filemark);
        }
        if is_end_of_data(&s) {
            return Ok(ReadOutcome::EndOfData);
        }
        if s.ili {
            let info = s.information.unwrap_or(0);
            step(self);
            if info < 0 {
                let actual = (len as i64 - info) as usize;
                return Err(DeviceError::BlockTooLarge { actual });
            }
            let n = (len as i64 - info).clamp(0, len as i64) as usize;
            self.stats.host_bytes_read += n as u64;
            return Ok(ReadOutcome::Block(n));
        }
        if s.key == sense::RECOVERED_ERROR {
            step(self);
            self.stats.host_bytes_read += len as u64;
            return Ok(ReadOutcome::Block(len));
        }
        if s.key == sense::NOT_READY && s.asc == 0x3a {
            self.medium = false;
            return Err(DeviceError::NoMedium);
        }
        self.pos = None;
        Err(self.err("READ", &r))
    }

    fn write_block(&mut self, data: &[u8]) -> Result<WriteOutcome> {
        self.ensure_medium()?;
        if let Some(max) = self.max_block.filter(|m| data.len() > *m as usize) {
            return Err(ScsiError::BlockOverDriveLimit {
                device: self.dev.clone(),
                len: data.len(),
                max,
            }
            .into());
        }
        if data.len() > MAX_TRANSFER {
            return Err(ScsiError::BlockOverTransfer {
                device: self.dev.clone(),
                len: data.len(),
            }
            .into());
        }
        let r = exec(
            &mut *self.t,
            &cdb::write6(data.len() as u32),
            DataDir::Out(data),
            MEDIUM,
        )?;
        let outcome = self.write_outcome("WRITE", &r)?;
        if let Some(p) = self.pos.as_mut() {
            *p += 1;
        }
        self.written += data.len() as u64;
        self.stats.host_bytes += data.len() as u64;
        self.stats.tape_bytes += data.len() as u64;
        Ok(outcome)
    }

    fn write_filemarks(&mut self, count: u32, immediate: bool) -> Result<WriteOutcome> {
        self.ensure_medium()?;
        let r = exec(
            &mut *self.t,
            &cdb::write_filemarks6(count, immediate),
            DataDir::None,
            MEDIUM,
        )?;
        let outcome = self.write_outcome("WRITE FILEMARKS", &r)?;
        if let Some(p) = self.pos.as_mut() {
            *p += u64::from(count);
        }
        self.stats.filemarks += u64::from(count);
        Ok(outcome)
    }

    fn usage(&mut self) -> Result<(u64, u64)> {
        self.ensure_medium()?;
        // Tape capacity log page: remaining and maximum capacity of partition 0, MB.
        if let Some(params) = self.log_page(0x31)? {
            let get = |code: u16| params.iter().find(|p| p.code == code).map(cdb::param_u64);
            if let (Some(rem), Some(max)) = (get(1), get(3)) {
                return Ok((max.saturating_sub(rem) * 1_000_000, max * 1_000_000));
            }
        }
        Ok((self.written, 0))
    }

    fn stats(&self) -> Option<DriveStats> {
        let mut s = self.stats.clone();
        s.modeled_seconds = self.opened.elapsed().as_secs_f64();
        Some(s)
    }

    fn recommended_order(&mut self, extents: &[(u64, u64)]) -> Option<Vec<usize>> {
        if !self.medium || extents.len() < 2 {
            return None;
        }
        let limits = match self.rao {
            Some(known) => known,
            None => {
                // Asked once per drive: a drive that refuses is not asked again.
                let known = rao::limits(&mut *self.t).ok().flatten();
                self.rao = Some(known);
                known
            }
        }?;
        rao::ask(&mut *self.t, limits, extents).ok().flatten()
    }

    fn tape_alerts(&mut self) -> Option<crate::TapeAlerts> {
        let flags = ScsiDrive::tape_alerts(self).ok().flatten()?;
        Some(crate::TapeAlerts::from_codes(
            flags.into_iter().map(|(c, _)| c),
        ))
    }

    fn health(&mut self) -> crate::DriveHealth {
        let tape_alerts = ScsiDrive::tape_alerts(self).ok().flatten().map(|v| {
            v.into_iter()
                .map(|(c, n)| format!("{c:02X}h {n}"))
                .collect()
        });
        // A drive opened for status has not set its cartridge up: ask whether one
        // is ready (TEST UNIT READY moves nothing).
        let ready = self.medium
            || exec(&mut *self.t, &cdb::test_unit_ready(), DataDir::None, SHORT)
                .is_ok_and(|r| r.good());
        let volume_statistics = if ready {
            self.volume_statistics().ok().flatten()
        } else {
            None
        };
        crate::DriveHealth {
            tape_alerts,
            volume_statistics,
        }
    }

    fn set_compression(&mut self, on: bool) -> Result<bool> {
        self.ensure_medium()?;
        if self.quirks.no_mode_select_page {
            return Ok(false);
        }
        let Some(mode) = self.mode_sense(0x0f, true)? else {
            return Ok(false);
        };
        let Some(page) = cdb::find_mode_page(&mode.pages, 0x0f) else {
            return Ok(false);
        };
        let Some(new_page) = cdb::compression_page(page, on) else {
            return Ok(false);
        };
        let data = cdb::mode_select6_data(None, mode.buffered_mode.max(1), Some(&new_page));
        let r = exec(
            &mut *self.t,
            &cdb::mode_select6(data.len() as u8),
            DataDir::Out(&data),
            SHORT,
        )?;
        Ok(r.good())
    }
}

impl Drop for ScsiDrive {
    fn drop(&mut self) {
        // Let the changer take the cartridge whoever opens the drive next.
        if self.medium {
            self.prevent(false);
        }
    }
}

impl ScsiDrive {
    /// How a write or filemark went: early warning is NO SENSE (or RECOVERED ERROR)
    /// with EOM set and the data written; VOLUME OVERFLOW means it was not.
    fn write_outcome(&mut self, command: &'static str, r: &Reply) -> Result<WriteOutcome> {
        if r.good() {
            return Ok(WriteOutcome::Written);
        }
        let Some(s) = &r.sense else {
            return Err(self.err(command, r));
        };
        match s.key {
            sense::NO_SENSE | sense::RECOVERED_ERROR if s.eom => Ok(WriteOutcome::EarlyWarning),
            sense::NO_SENSE | sense::RECOVERED_ERROR => Ok(WriteOutcome::Written),
            sense::VOLUME_OVERFLOW => Err(DeviceError::EndOfMedium),
            sense::DATA_PROTECT => Err(DeviceError::WriteProtected),
            sense::NOT_READY if s.asc == 0x3a => {
                self.medium = false;
                Err(DeviceError::NoMedium)
            }
            _ => {
                self.pos = None;
                Err(self.err(command, r))
            }
        }
    }
}
