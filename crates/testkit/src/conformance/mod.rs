//! Conformance suites: the checks every implementation of a trait must pass.
//!
//! - [`drive`] (its functions also re-exported here): every [`TapeDrive`](tapeloom_device::TapeDrive),
//!   called with a factory of fresh drives.
//! - [`library`]: every [`TapeLibrary`](tapeloom_device::TapeLibrary) (changer, drives,
//!   refusals), called with a library in its starting state.
//!
//! An implementation that cannot do what one check needs (tgt has no end of
//! medium and no ERASE) passes a list of [`Skip`]s, each naming the check and why;
//! the suite runs everything else, and the [`Outcome`] lists what was skipped for
//! the test to print.

pub mod drive;
pub mod library;

pub use drive::*;

/// One check of a suite, as a list of skips names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Check {
    /// Drive: blocks come back as written.
    WriteReadRoundTrip,
    /// Drive: filemarks and end of data are read outcomes.
    FilemarksAndEndOfData,
    /// Drive: locate and position agree.
    LocateAndPosition,
    /// Drive: a write in the middle ends the data.
    WriteInTheMiddle,
    /// Drive: a block larger than the buffer is an error naming its size.
    ShortBuffer,
    /// Drive: an unloaded cartridge is offline until loaded.
    UnloadAndLoad,
    /// Drive: early warning is a value before the end (and the data is all there).
    EarlyWarning,
    /// Drive: past early warning, a write is refused with end of medium.
    EndOfMedium,
    /// Library: the inventory is consistent and the drives are empty at start.
    Inventory,
    /// Library: a cartridge loads into a drive, which reads it, and goes back.
    LoadAndUnload,
    /// Library: slot to slot, and unload into a chosen slot.
    MoveBetweenSlots,
    /// Library: out through an import/export element and back.
    MailSlots,
    /// Library: loading into a drive that holds a cartridge is refused.
    RefuseOccupiedDrive,
    /// Library: moving into a full slot is refused.
    RefuseFullSlot,
    /// Library: moving out of an empty slot, or unloading an empty drive, is refused.
    RefuseEmptySource,
    /// Library: a drive the library does not have is refused.
    RefuseUnknownDrive,
    /// Library: a barcode the library does not hold is refused.
    RefuseUnknownBarcode,
    /// Library: erasing makes a written cartridge blank.
    Erase,
    /// Library: drive health reads on empty and loaded drives.
    DriveHealth,
}

/// A check an implementation is excused from, and why (for the test's list).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Skip {
    /// The check.
    pub check: Check,
    /// Why the implementation cannot pass it.
    pub why: &'static str,
}

/// What a suite ran and what it skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The checks that ran (and passed: a failed check panics).
    pub ran: Vec<Check>,
    /// The checks skipped, with why.
    pub skipped: Vec<Skip>,
}

impl Outcome {
    fn new(skips: &[Skip]) -> Outcome {
        Outcome {
            ran: Vec::new(),
            skipped: skips.to_vec(),
        }
    }

    /// Whether `check` runs (it is not skipped); records that it ran.
    fn runs(&mut self, check: Check) -> bool {
        if self.skipped.iter().any(|s| s.check == check) {
            return false;
        }
        self.ran.push(check);
        true
    }

    /// Records a check skipped by the suite itself (the implementation lacks what
    /// it needs, such as mail slots).
    fn skip(&mut self, check: Check, why: &'static str) {
        self.ran.retain(|c| *c != check);
        self.skipped.push(Skip { check, why });
    }

    /// The list of skipped checks, one line each, as a test prints it.
    pub fn skipped_list(&self) -> String {
        self.skipped
            .iter()
            .map(|s| format!("skipped {:?}: {}\n", s.check, s.why))
            .collect()
    }
}
