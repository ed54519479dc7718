//! [`FaultyDrive`]: a drive that fails at the blocks a plan names.

use super::{chance, ready, sense_error, text_key, FaultKind, Faults, Raised};
use crate::scsi::sense;
use crate::scsi::{ScsiError, TransportError};
use crate::{
    DeviceError, DriveHealth, DriveStats, ReadOutcome, Result, TapeAlerts, TapeDrive, Travel,
    WriteOutcome,
};
use std::time::Duration;

/// Host status DID_TIME_OUT: the command's time ran out (SG_IO).
const DID_TIME_OUT: u16 = 0x03;

/// NOT READY 04/12, "logical unit not ready, offline".
pub(super) fn not_ready(device: &str, command: &str) -> DeviceError {
    sense_error(device, command.to_string(), sense::NOT_READY, 0x04, 0x12).into()
}

/// What a command does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Read,
    Write,
    Filemarks,
}

impl Op {
    fn command(self) -> &'static str {
        match self {
            Op::Read => "READ",
            Op::Write => "WRITE",
            Op::Filemarks => "WRITE FILEMARKS",
        }
    }

    /// The operation code of the 6-byte command.
    fn code(self) -> u8 {
        match self {
            Op::Read => 0x08,
            Op::Write => 0x0A,
            Op::Filemarks => 0x10,
        }
    }
}

/// What the faults do to one command.
#[derive(Debug, Default)]
struct Verdict {
    stall: Duration,
    timeout: Option<Duration>,
    offline: bool,
    /// Fail without carrying it out (a write), or after reading past the block.
    medium_error: bool,
    /// Write the block, then fail.
    error_after: bool,
    /// Report success, write nothing.
    unwritten: bool,
    /// Begin losing buffered writes (a deferred error to come).
    deferred: bool,
    end_of_medium: bool,
    early_warning: bool,
    early_warning_bytes: Option<u64>,
    hide_early_warning: bool,
    /// TapeAlert flags raised by this command.
    raise: Vec<u16>,
}

/// A drive of a [`super::FaultyLibrary`]. It keeps its own count of the position
/// (asking the drive only when it lost it) so faults at a block cost no command.
pub struct FaultyDrive {
    inner: Box<dyn TapeDrive>,
    index: usize,
    barcode: Option<String>,
    device: String,
    /// `None` for a drive no fault applies to: every call goes straight through.
    faults: Option<Faults>,
    pos: Option<u64>,
    offline: bool,
    /// Writes taken into the buffer and lost, since a deferred write error began.
    swallow: Option<Swallow>,
}

/// A deferred write error on its way: what the drive took and will not write.
#[derive(Debug, Clone, Copy)]
struct Swallow {
    /// Where the tape ends: the first object lost.
    from: u64,
    /// Writes taken since.
    writes: u32,
}

/// Writes a drive takes after a deferred write error began before it reports it.
const DEFERRED_AFTER: u32 = 3;

impl FaultyDrive {
    /// Drive `index` of a library, holding `barcode`.
    pub(super) fn new(
        inner: Box<dyn TapeDrive>,
        index: usize,
        barcode: Option<String>,
        faults: Faults,
    ) -> FaultyDrive {
        FaultyDrive {
            device: inner.describe(),
            inner,
            index,
            barcode,
            faults: Some(faults),
            pos: None,
            offline: false,
            swallow: None,
        }
    }

    /// A drive of a plan without drive faults.
    pub(super) fn passing(inner: Box<dyn TapeDrive>) -> FaultyDrive {
        FaultyDrive {
            device: String::new(),
            inner,
            index: 0,
            barcode: None,
            faults: None,
            pos: None,
            offline: false,
            swallow: None,
        }
    }

    /// At a command that needs the buffer on tape (a flush, a move, a read), or the
    /// [`DEFERRED_AFTER`]th write: the deferred error, for the objects lost. The
    /// command is not carried out; the drive stands where the tape ends.
    fn deferred_error(&mut self, command: &str) -> Result<()> {
        let Some(sw) = self.swallow.take() else {
            return Ok(());
        };
        let host = self.pos.unwrap_or(sw.from);
        self.pos = Some(sw.from);
        let mut e = sense_error(
            &self.device,
            command.to_string(),
            sense::MEDIUM_ERROR,
            0x0C,
            0x00,
        );
        if let ScsiError::Sense { sense, .. } = &mut e {
            sense.deferred = true;
            sense.information = Some(host.saturating_sub(sw.from) as i64);
        }
        Err(e.into())
    }

    /// Whether the plan makes this drive one with its own access order and no
    /// timing model ([`FaultKind::RaoReversed`]).
    fn rao_reversed(&self) -> bool {
        let Some(faults) = &self.faults else {
            return false;
        };
        let s = faults.lock();
        (s.plan.faults.iter()).any(|f| {
            f.kind == FaultKind::RaoReversed
                && f.drive.is_none_or(|d| d == self.index)
                && (f.barcode.as_ref()).is_none_or(|b| Some(b) == self.barcode.as_ref())
        })
    }

    fn online(&self, command: &str) -> Result<()> {
        if self.offline {
            return Err(not_ready(&self.device, command));
        }
        Ok(())
    }

    fn lbn(&mut self) -> Result<u64> {
        match self.pos {
            Some(p) => Ok(p),
            None => {
                let p = self.inner.position()?;
                self.pos = Some(p);
                Ok(p)
            }
        }
    }

    /// What the plan does to `op` at `lbn`; events that fire are counted.
    fn verdict(&self, op: Op, lbn: u64) -> Verdict {
        let mut v = Verdict::default();
        let Some(faults) = &self.faults else {
            return v;
        };
        let mut s = faults.lock();
        let seed = s.plan.seed;
        let place = self.barcode.as_deref().map_or(self.index as u64, text_key);
        for i in 0..s.plan.faults.len() {
            let f = &s.plan.faults[i];
            if f.kind.is_changer()
                || f.drive.is_some_and(|d| d != self.index)
                || f.barcode
                    .as_ref()
                    .is_some_and(|b| Some(b) != self.barcode.as_ref())
            {
                continue;
            }
            let at = f.lbn == Some(lbn);
            let past = f.lbn.is_some_and(|l| lbn >= l);
            let write = op == Op::Write;
            let fires = match f.kind {
                FaultKind::ReadError => op == Op::Read && at,
                FaultKind::ReadErrorRate(p) => op == Op::Read && chance(seed, i, &[place, lbn]) < p,
                FaultKind::WriteError | FaultKind::WriteErrorWritten => write && at,
                FaultKind::WriteOkUnwritten => write && at,
                FaultKind::WriteErrorDeferred => write && at && self.swallow.is_none(),
                FaultKind::WriteErrorRate(p) => write && chance(seed, i, &[place, lbn]) < p,
                FaultKind::EarlyWarningAt => op != Op::Read && past,
                FaultKind::EarlyWarningBytes(_) => op != Op::Read,
                FaultKind::EndOfMediumNoWarning => op != Op::Read,
                FaultKind::Stall(_) | FaultKind::Timeout(_) | FaultKind::Offline => at,
                FaultKind::Alert(_) => op != Op::Read && past,
                FaultKind::MoveFail | FaultKind::MoveFailRate(_) | FaultKind::SlotEmpty(_) => false,
                FaultKind::RaoReversed => false,
            };
            if !fires || !ready(&s, i) {
                continue;
            }
            match f.kind {
                FaultKind::ReadError | FaultKind::ReadErrorRate(_) => v.medium_error = true,
                FaultKind::WriteError | FaultKind::WriteErrorRate(_) => v.medium_error = true,
                FaultKind::WriteErrorWritten => v.error_after = true,
                FaultKind::WriteOkUnwritten => v.unwritten = true,
                FaultKind::WriteErrorDeferred => v.deferred = true,
                FaultKind::EarlyWarningAt => v.early_warning = true,
                FaultKind::EarlyWarningBytes(b) => v.early_warning_bytes = Some(b),
                FaultKind::EndOfMediumNoWarning => {
                    v.hide_early_warning = true;
                    v.end_of_medium |= write && past;
                }
                FaultKind::Stall(d) => v.stall += d,
                FaultKind::Timeout(d) => v.timeout = Some(d),
                FaultKind::Offline => v.offline = true,
                FaultKind::Alert(code) => v.raise.push(code),
                FaultKind::MoveFail | FaultKind::MoveFailRate(_) | FaultKind::SlotEmpty(_) => {}
                FaultKind::RaoReversed => {}
            }
            let counts = match f.kind {
                FaultKind::EarlyWarningBytes(_) => false,
                FaultKind::EndOfMediumNoWarning => write && past,
                _ => true,
            };
            if counts {
                s.fired[i] += 1;
            }
        }
        v
    }

    /// The faults that come before a command is carried out: a stall, the drive
    /// going offline, a timeout. `Ok` means carry it out.
    fn before(&mut self, op: Op, v: &Verdict) -> Result<()> {
        if let (Some(f), false) = (&self.faults, v.raise.is_empty()) {
            let mut s = f.lock();
            for &code in &v.raise {
                // A cartridge flag goes with the cartridge; the others stay with
                // the drive.
                let barcode = match crate::alert::action_of(code) {
                    Some(crate::AlertAction::Cartridge) => self.barcode.clone(),
                    _ => None,
                };
                let r = Raised {
                    drive: self.index,
                    barcode,
                    code,
                };
                if !s.raised.contains(&r) {
                    s.raised.push(r);
                }
            }
        }
        if !v.stall.is_zero() {
            std::thread::sleep(v.stall);
        }
        if v.offline {
            self.offline = true;
            if let Some(f) = &self.faults {
                f.lock().offline.push(self.index);
            }
            return Err(not_ready(&self.device, op.command()));
        }
        if let Some(wait) = v.timeout {
            std::thread::sleep(wait);
            // Where the tape stands after a command that timed out is not known.
            self.pos = None;
            return Err(ScsiError::Transport {
                device: self.device.clone(),
                source: TransportError::HostStatus {
                    op: op.code(),
                    status: DID_TIME_OUT,
                },
            }
            .into());
        }
        Ok(())
    }

    fn medium_error(&self, op: Op) -> DeviceError {
        let (asc, ascq) = match op {
            Op::Read => (0x11, 0x00),
            Op::Write | Op::Filemarks => (0x0C, 0x00),
        };
        sense_error(
            &self.device,
            op.command().to_string(),
            sense::MEDIUM_ERROR,
            asc,
            ascq,
        )
        .into()
    }

    /// The write outcome as the faults change it.
    fn outcome(&mut self, got: WriteOutcome, v: &Verdict) -> Result<WriteOutcome> {
        let mut warn = got == WriteOutcome::EarlyWarning || v.early_warning;
        if let Some(bytes) = v.early_warning_bytes {
            warn |= self.inner.usage()?.0 >= bytes;
        }
        if v.hide_early_warning {
            warn = false;
        }
        Ok(if warn {
            WriteOutcome::EarlyWarning
        } else {
            WriteOutcome::Written
        })
    }

    /// Keeps the position count after a command that moved `by` objects.
    /// The flags the plan raised on this drive and the cartridge in it.
    fn raised(&self) -> TapeAlerts {
        let Some(f) = &self.faults else {
            return TapeAlerts::default();
        };
        let s = f.lock();
        TapeAlerts::from_codes(
            s.raised
                .iter()
                .filter(|r| r.drive == self.index)
                .filter(|r| r.barcode.is_none() || r.barcode == self.barcode)
                .map(|r| r.code),
        )
    }

    fn moved<T>(&mut self, r: &Result<T>, from: u64, by: u64) {
        self.pos = match r {
            Ok(_) => Some(from + by),
            Err(_) => None,
        };
    }
}

impl TapeDrive for FaultyDrive {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn has_medium(&self) -> bool {
        !self.offline && self.inner.has_medium()
    }

    fn load(&mut self) -> Result<()> {
        self.online("LOAD")?;
        let r = self.inner.load();
        self.pos = r.as_ref().ok().map(|_| 0);
        r
    }

    fn unload(&mut self) -> Result<()> {
        self.online("UNLOAD")?;
        self.deferred_error("UNLOAD")?;
        self.pos = None;
        self.inner.unload()
    }

    fn write_protected(&self) -> Result<bool> {
        self.online("MODE SENSE")?;
        self.inner.write_protected()
    }

    fn rewind(&mut self) -> Result<()> {
        self.online("REWIND")?;
        self.deferred_error("REWIND")?;
        let r = self.inner.rewind();
        self.pos = r.as_ref().ok().map(|_| 0);
        r
    }

    fn position(&mut self) -> Result<u64> {
        self.online("READ POSITION")?;
        if let (Some(_), Some(p)) = (self.swallow, self.pos) {
            // Where the host stands: what it sent, lost or not.
            return Ok(p);
        }
        let r = self.inner.position();
        self.pos = r.as_ref().ok().copied();
        r
    }

    fn locate(&mut self, lbn: u64) -> Result<()> {
        self.online("LOCATE")?;
        self.deferred_error("LOCATE")?;
        let r = self.inner.locate(lbn);
        self.pos = r.as_ref().ok().map(|_| lbn);
        r
    }

    fn space_to_eod(&mut self) -> Result<()> {
        self.online("SPACE")?;
        self.deferred_error("SPACE")?;
        self.pos = None;
        self.inner.space_to_eod()
    }

    fn read_block(&mut self, buf: &mut [u8]) -> Result<ReadOutcome> {
        if self.faults.is_none() {
            return self.inner.read_block(buf);
        }
        self.online(Op::Read.command())?;
        self.deferred_error(Op::Read.command())?;
        let lbn = self.lbn()?;
        let v = self.verdict(Op::Read, lbn);
        self.before(Op::Read, &v)?;
        let r = self.inner.read_block(buf);
        let by = match r {
            Ok(ReadOutcome::EndOfData) => 0,
            _ => 1,
        };
        self.moved(&r, lbn, by);
        match r {
            // The drive gave up on the block and stands after it.
            Ok(ReadOutcome::Block(_)) if v.medium_error => Err(self.medium_error(Op::Read)),
            r => r,
        }
    }

    fn write_block(&mut self, data: &[u8]) -> Result<WriteOutcome> {
        if self.faults.is_none() {
            return self.inner.write_block(data);
        }
        self.online(Op::Write.command())?;
        let lbn = self.lbn()?;
        let v = self.verdict(Op::Write, lbn);
        self.before(Op::Write, &v)?;
        if v.deferred && self.swallow.is_none() {
            self.swallow = Some(Swallow {
                from: lbn,
                writes: 0,
            });
        }
        if let Some(sw) = self.swallow.as_mut() {
            // A drive with a deferred error on its way takes writes into its buffer
            // until it reports the loss; no other fault of the block shows first.
            if sw.writes >= DEFERRED_AFTER {
                self.deferred_error(Op::Write.command())?;
            }
            if let Some(sw) = self.swallow.as_mut() {
                sw.writes += 1;
            }
            self.pos = Some(lbn + 1);
            return self.outcome(WriteOutcome::Written, &v);
        }
        if v.end_of_medium {
            return Err(DeviceError::EndOfMedium);
        }
        if v.medium_error {
            // Nothing was written; where the tape stands is not known.
            self.pos = None;
            return Err(self.medium_error(Op::Write));
        }
        if v.unwritten {
            // The drive said it wrote the block; the next one takes its place.
            return self.outcome(WriteOutcome::Written, &v);
        }
        let r = self.inner.write_block(data);
        self.moved(&r, lbn, 1);
        let got = r?;
        if v.error_after {
            return Err(self.medium_error(Op::Write));
        }
        self.outcome(got, &v)
    }

    fn write_filemarks(&mut self, count: u32, immediate: bool) -> Result<WriteOutcome> {
        if self.faults.is_none() {
            return self.inner.write_filemarks(count, immediate);
        }
        self.online(Op::Filemarks.command())?;
        let lbn = self.lbn()?;
        let v = self.verdict(Op::Filemarks, lbn);
        self.before(Op::Filemarks, &v)?;
        if self.swallow.is_some() {
            if !immediate {
                self.deferred_error(Op::Filemarks.command())?;
            }
            self.pos = Some(lbn + u64::from(count));
            return Ok(WriteOutcome::Written);
        }
        let r = self.inner.write_filemarks(count, immediate);
        self.moved(&r, lbn, u64::from(count));
        self.outcome(r?, &v)
    }

    fn usage(&mut self) -> Result<(u64, u64)> {
        self.online("LOG SENSE")?;
        self.inner.usage()
    }

    fn stats(&self) -> Option<DriveStats> {
        self.inner.stats()
    }

    fn streaming_rate(&mut self, sample: &[u8]) -> Option<f64> {
        self.inner.streaming_rate(sample)
    }

    fn set_compression(&mut self, on: bool) -> Result<bool> {
        self.online("MODE SELECT")?;
        self.inner.set_compression(on)
    }

    fn block_offset(&self, lbn: u64) -> Option<u64> {
        self.inner.block_offset(lbn)
    }

    fn tape_offset(&self, lbn: u64) -> Option<f64> {
        self.inner.tape_offset(lbn)
    }

    fn note_tape_offset(&mut self, lbn: u64, offset: f64) {
        self.inner.note_tape_offset(lbn, offset);
    }

    fn travel_seconds(&self, from: u64, to: u64) -> Option<Travel> {
        match self.rao_reversed() {
            true => None,
            false => self.inner.travel_seconds(from, to),
        }
    }

    fn recommended_order(&mut self, extents: &[(u64, u64)]) -> Option<Vec<usize>> {
        match self.rao_reversed() {
            true => Some((0..extents.len()).rev().collect()),
            false => self.inner.recommended_order(extents),
        }
    }

    fn health(&mut self) -> DriveHealth {
        if self.offline {
            return DriveHealth::default();
        }
        let mut h = self.inner.health();
        let raised = self.raised();
        if !raised.is_empty() {
            let names = h.tape_alerts.get_or_insert_with(Vec::new);
            for n in raised.names() {
                if !names.contains(&n) {
                    names.push(n);
                }
            }
        }
        h
    }

    /// A drive that may report deferred write errors buffers at least 64 MiB.
    fn buffer_bytes(&self) -> Option<u64> {
        let deferred = self
            .faults
            .as_ref()
            .is_some_and(|f| f.lock().plan.has_deferred_errors());
        match self.inner.buffer_bytes() {
            Some(b) if deferred => Some(b.max(64 << 20)),
            None if deferred => Some(64 << 20),
            b => b,
        }
    }

    fn tape_alerts(&mut self) -> Option<TapeAlerts> {
        if self.offline {
            return None;
        }
        let inner = self.inner.tape_alerts();
        let raised = self.raised();
        match inner {
            None if raised.is_empty() => None,
            inner => Some(TapeAlerts(inner.unwrap_or_default().0 | raised.0)),
        }
    }
}
