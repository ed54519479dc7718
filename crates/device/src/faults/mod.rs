//! Fault injection: [`FaultyLibrary`] wraps any [`TapeLibrary`] and hands out
//! [`FaultyDrive`]s wrapping the drives it opens; both fail as a [`FaultPlan`]
//! says (`docs/FAULTS.md` has the spec grammar).
//!
//! Failures are the errors a SCSI drive or changer gives: a medium error is
//! [`ScsiError::Sense`] with MEDIUM ERROR and the standard ASC/ASCQ, an offline
//! drive NOT READY, a command whose time ran out a transport failure with host
//! status DID_TIME_OUT, a refused move [`ChangerError::MoveRefused`] with its
//! sense; early warning and end of medium are the [`WriteOutcome`] and
//! [`DeviceError::EndOfMedium`] every drive returns. The code above sees what a
//! real library would send it.
//!
//! What has fired is kept in [`Faults`], shared by every library wrapped with it
//! and every drive those open, so a fault that fires once fires once however often
//! drives and libraries are opened. Rates are decided by a hash of the seed, the
//! fault and the place (cartridge or drive, block, or move number), not by a
//! stream of draws, so the same seed fails the same blocks whatever the order in
//! which threads reach them.
//!
//! This is the one part of what tests share that stays in the device crate, behind
//! its cargo feature `faults`; the rest is the test kit, the crate
//! `tapeloom-testkit`, which only tests use. Fault injection is not only for tests:
//! a binary built with the engine's test hooks wraps its library in a
//! [`FaultyLibrary`] at run time when `TAPELOOM_FAULTS` names a plan, so the
//! engine, a library crate of the product, depends on it, and the engine must not
//! depend on the test kit (a PostgreSQL server and tgt for tests). The faults wrap
//! the drives and the changer, so they belong beside them.

mod drive;
mod plan;

pub use drive::FaultyDrive;
pub use plan::{Fault, FaultKind, FaultPlan, FaultSpecError, SpecProblem};

use crate::scsi::sense::{self, Sense};
use crate::scsi::ScsiError;
use crate::{Changer, ChangerError, DriveHealth, Inventory, Result, TapeDrive, TapeLibrary};
use std::sync::{Arc, Mutex, MutexGuard};

/// A plan and what of it has fired, shared by the libraries wrapped with it.
#[derive(Clone)]
pub struct Faults(Arc<Mutex<State>>);

struct State {
    plan: FaultPlan,
    /// Per fault of the plan: how many times it fired.
    fired: Vec<u64>,
    /// Changer moves asked for so far.
    moves: u64,
    /// Drives that went offline.
    offline: Vec<usize>,
    /// TapeAlert flags the plan raised.
    raised: Vec<Raised>,
}

/// A TapeAlert flag an `alert` fault raised: on a drive, and for a cartridge flag
/// with the cartridge it was raised on.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Raised {
    drive: usize,
    barcode: Option<String>,
    code: u16,
}

impl Faults {
    /// Nothing fired yet.
    pub fn new(plan: FaultPlan) -> Faults {
        let fired = vec![0; plan.faults.len()];
        Faults(Arc::new(Mutex::new(State {
            plan,
            fired,
            moves: 0,
            offline: Vec::new(),
            raised: Vec::new(),
        })))
    }

    /// Wraps `inner` with these faults.
    pub fn wrap(&self, inner: Box<dyn TapeLibrary>) -> FaultyLibrary {
        FaultyLibrary {
            inner: Mutex::new(inner),
            faults: self.clone(),
        }
    }

    /// The plan.
    pub fn plan(&self) -> FaultPlan {
        self.lock().plan.clone()
    }

    /// How many times each fault of the plan fired, in the plan's order.
    pub fn fired(&self) -> Vec<u64> {
        self.lock().fired.clone()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere leaves the counts as they were: still usable.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Whether fault `f` may fire now: an event that fires once fires only the first
/// time.
fn ready(s: &State, i: usize) -> bool {
    let f = &s.plan.faults[i];
    !f.kind.is_event() || f.every || s.fired[i] == 0
}

/// A number in [0, 1) decided by the seed, the fault and the place.
fn chance(seed: u64, fault: usize, place: &[u64]) -> f64 {
    let mut h = splitmix(seed ^ 0x5EED);
    for k in std::iter::once(fault as u64).chain(place.iter().copied()) {
        h = splitmix(h ^ k);
    }
    (h >> 11) as f64 / (1u64 << 53) as f64
}

fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// FNV-1a of a barcode, as a place for [`chance`].
fn text_key(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A CHECK CONDITION with this sense, as a SCSI device reports it.
fn sense_error(device: &str, command: String, key: u8, asc: u8, ascq: u8) -> ScsiError {
    ScsiError::Sense {
        device: device.to_string(),
        command: command.into(),
        sense: Sense {
            deferred: false,
            key,
            asc,
            ascq,
            filemark: false,
            eom: false,
            ili: false,
            information: None,
        },
    }
}

/// A library whose changer and drives fail as a plan says. With an empty plan it
/// behaves as the library it wraps.
pub struct FaultyLibrary {
    inner: Mutex<Box<dyn TapeLibrary>>,
    faults: Faults,
}

/// One changer move, as the faults see it.
struct Move {
    command: String,
    from: usize,
    to: usize,
    /// The slot a cartridge leaves (a load or a transfer).
    from_slot: Option<usize>,
    drive: Option<usize>,
}

impl FaultyLibrary {
    /// Wraps `inner` with a plan of its own.
    pub fn new(inner: Box<dyn TapeLibrary>, plan: FaultPlan) -> FaultyLibrary {
        Faults::new(plan).wrap(inner)
    }

    /// The faults, with what has fired.
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    fn inner(&self) -> MutexGuard<'_, Box<dyn TapeLibrary>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Fails `m` when a changer fault says so; counts it as a move either way.
    fn check_move(&mut self, m: Move) -> Result<()> {
        let wants_barcode = {
            let s = self.faults.lock();
            s.plan
                .faults
                .iter()
                .any(|f| f.kind.is_changer() && f.barcode.is_some())
        };
        let barcode = if wants_barcode {
            let inv = self.inner().inventory()?;
            match (m.from_slot, m.drive) {
                (Some(s), _) => inv.slots.get(s).and_then(|e| e.barcode.clone()),
                (None, Some(d)) => inv.drives.get(d).and_then(|e| e.loaded.clone()),
                (None, None) => None,
            }
        } else {
            None
        };
        let device = self.inner().describe();
        let mut s = self.faults.lock();
        s.moves += 1;
        let n = s.moves;
        for i in 0..s.plan.faults.len() {
            let f = &s.plan.faults[i];
            if !f.kind.is_changer()
                || f.drive.is_some_and(|d| Some(d) != m.drive)
                || f.barcode
                    .as_ref()
                    .is_some_and(|b| Some(b) != barcode.as_ref())
                || !ready(&s, i)
            {
                continue;
            }
            let sense = match f.kind {
                FaultKind::SlotEmpty(slot) if m.from_slot == Some(slot) => {
                    (sense::ILLEGAL_REQUEST, 0x3B, 0x0E)
                }
                FaultKind::MoveFail if f.n.is_none_or(|want| want == n) => {
                    (sense::HARDWARE_ERROR, 0x15, 0x01)
                }
                FaultKind::MoveFailRate(p) if chance(s.plan.seed, i, &[n]) < p => {
                    (sense::HARDWARE_ERROR, 0x15, 0x01)
                }
                _ => continue,
            };
            s.fired[i] += 1;
            let (key, asc, ascq) = sense;
            return Err(ChangerError::MoveRefused {
                from: m.from as u16,
                to: m.to as u16,
                source: sense_error(&device, m.command, key, asc, ascq),
            }
            .into());
        }
        Ok(())
    }
}

impl Changer for FaultyLibrary {
    fn inventory(&mut self) -> Result<Inventory> {
        self.inner
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .inventory()
    }

    fn load(&mut self, slot: usize, drive: usize) -> Result<()> {
        self.check_move(Move {
            command: format!("MOVE MEDIUM from slot {slot} to drive {drive}"),
            from: slot,
            to: drive,
            from_slot: Some(slot),
            drive: Some(drive),
        })?;
        self.inner().load(slot, drive)
    }

    fn unload(&mut self, drive: usize, slot: Option<usize>) -> Result<()> {
        let to = slot
            .map(|s| format!("slot {s}"))
            .unwrap_or("its slot".into());
        self.check_move(Move {
            command: format!("MOVE MEDIUM from drive {drive} to {to}"),
            from: drive,
            to: slot.unwrap_or(usize::from(u16::MAX)),
            from_slot: None,
            drive: Some(drive),
        })?;
        self.inner().unload(drive, slot)
    }

    fn transfer(&mut self, from: usize, to: usize) -> Result<()> {
        self.check_move(Move {
            command: format!("MOVE MEDIUM from slot {from} to slot {to}"),
            from,
            to,
            from_slot: Some(from),
            drive: None,
        })?;
        self.inner().transfer(from, to)
    }
}

impl TapeLibrary for FaultyLibrary {
    fn describe(&self) -> String {
        format!("{} with injected faults", self.inner().describe())
    }

    fn open_tape_drive(&self, index: usize) -> Result<Box<dyn TapeDrive>> {
        let (offline, drive_faults) = {
            let s = self.faults.lock();
            (s.offline.contains(&index), s.plan.has_drive_faults())
        };
        let mut lib = self.inner();
        if offline {
            let device = lib.drive_device(index);
            return Err(drive::not_ready(&device, "TEST UNIT READY"));
        }
        let inner = lib.open_tape_drive(index)?;
        if !drive_faults {
            return Ok(Box::new(FaultyDrive::passing(inner)));
        }
        let barcode = lib
            .inventory()?
            .drives
            .get(index)
            .and_then(|d| d.loaded.clone());
        Ok(Box::new(FaultyDrive::new(
            inner,
            index,
            barcode,
            self.faults.clone(),
        )))
    }

    /// The wrapped library cleans; then the cleaning flags raised on the drive are
    /// cleared, as a drive clears them once cleaned.
    fn clean_drive(&mut self, drive: usize) -> Result<crate::Cleaned> {
        let done = self.inner().clean_drive(drive)?;
        self.faults.lock().raised.retain(|r| {
            r.drive != drive || crate::alert::action_of(r.code) != Some(crate::AlertAction::Clean)
        });
        Ok(done)
    }

    fn is_write_protected(&self, barcode: &str) -> bool {
        self.inner().is_write_protected(barcode)
    }
    fn cartridge_bytes(&self, barcode: &str) -> Option<u64> {
        self.inner().cartridge_bytes(barcode)
    }
    fn capacity(&self) -> Option<u64> {
        self.inner().capacity()
    }
    fn model(&self) -> Option<String> {
        self.inner().model()
    }
    fn lowest_speed_mb_s(&self) -> Option<f64> {
        self.inner().lowest_speed_mb_s()
    }
    fn drives_compress(&self) -> bool {
        self.inner().drives_compress()
    }
    fn drive_device(&self, index: usize) -> String {
        self.inner().drive_device(index)
    }
    fn rescan(&mut self) -> Result<()> {
        self.inner().rescan()
    }
    fn drive_health(&self, index: usize) -> Result<DriveHealth> {
        self.inner().drive_health(index)
    }
    fn set_write_protected(&mut self, barcode: &str, on: bool) -> Result<()> {
        self.inner().set_write_protected(barcode, on)
    }
    fn erase(&mut self, barcode: &str) -> Result<()> {
        self.inner().erase(barcode)
    }
}
