//! One library used by several jobs of one process at once (the server runs a job
//! on each free drive).
//!
//! A virtual library keeps where each cartridge is in memory and saves it after
//! each move, so two handles on it in one process would each save a stale view and
//! lose the other's moves. [`SharedLibrary`] is one handle that every job of the
//! process uses in turn: each command goes to the one library under its lock, as
//! a real robot takes one command at a time.
//!
//! Which cartridges the process's writers hold is kept here too ([`Claims`]): a
//! writer chooses a cartridge, claims it and moves it into its drive while it
//! holds the claims, so two jobs never choose the same cartridge and never move
//! one the other is placing.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tapeloom_device::{Changer, Cleaned, DriveHealth, Inventory, TapeDrive, TapeLibrary};

/// An open library (the home's `Library`).
type Library = Box<dyn TapeLibrary>;

/// A library handle shared by the jobs of one process. Cloning gives another
/// handle on the same library.
#[derive(Clone)]
pub struct SharedLibrary {
    lib: Arc<Mutex<Library>>,
}

impl SharedLibrary {
    /// Shares `lib`.
    pub fn new(lib: Library) -> Self {
        SharedLibrary {
            lib: Arc::new(Mutex::new(lib)),
        }
    }

    /// The library, for one command. A job whose thread panicked while it held
    /// the lock left the library as the last command left it: a move is one
    /// command, so the state is whole.
    fn lock(&self) -> MutexGuard<'_, Library> {
        self.lib.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Changer for SharedLibrary {
    fn inventory(&mut self) -> tapeloom_device::Result<Inventory> {
        self.lock().inventory()
    }
    fn load(&mut self, slot: usize, drive: usize) -> tapeloom_device::Result<()> {
        self.lock().load(slot, drive)
    }
    fn unload(&mut self, drive: usize, slot: Option<usize>) -> tapeloom_device::Result<()> {
        self.lock().unload(drive, slot)
    }
    fn transfer(&mut self, from: usize, to: usize) -> tapeloom_device::Result<()> {
        self.lock().transfer(from, to)
    }
}

impl TapeLibrary for SharedLibrary {
    fn describe(&self) -> String {
        self.lock().describe()
    }
    fn open_tape_drive(&self, index: usize) -> tapeloom_device::Result<Box<dyn TapeDrive>> {
        self.lock().open_tape_drive(index)
    }
    fn is_write_protected(&self, barcode: &str) -> bool {
        self.lock().is_write_protected(barcode)
    }
    fn cartridge_bytes(&self, barcode: &str) -> Option<u64> {
        self.lock().cartridge_bytes(barcode)
    }
    fn capacity(&self) -> Option<u64> {
        self.lock().capacity()
    }
    fn model(&self) -> Option<String> {
        self.lock().model()
    }
    fn lowest_speed_mb_s(&self) -> Option<f64> {
        self.lock().lowest_speed_mb_s()
    }
    fn drives_compress(&self) -> bool {
        self.lock().drives_compress()
    }
    fn drive_device(&self, index: usize) -> String {
        self.lock().drive_device(index)
    }
    fn rescan(&mut self) -> tapeloom_device::Result<()> {
        self.lock().rescan()
    }
    fn drive_health(&self, index: usize) -> tapeloom_device::Result<DriveHealth> {
        self.lock().drive_health(index)
    }
    fn clean_drive(&mut self, drive: usize) -> tapeloom_device::Result<Cleaned> {
        self.lock().clean_drive(drive)
    }
    fn set_write_protected(&mut self, barcode: &str, on: bool) -> tapeloom_device::Result<()> {
        self.lock().set_write_protected(barcode, on)
    }
    fn erase(&mut self, barcode: &str) -> tapeloom_device::Result<()> {
        self.lock().erase(barcode)
    }
}

/// The cartridges the writers of this process hold, each from its choice until
/// its job lets it go.
static CLAIMS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// The writers' claims, held: while a writer holds them no other writer of the
/// process chooses or moves a cartridge.
pub(crate) struct Claims(MutexGuard<'static, Vec<String>>);

impl Claims {
    /// Waits for the claims.
    pub fn hold() -> Self {
        Claims(CLAIMS.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Whether a writer of this process holds `barcode`.
    pub fn taken(&self, barcode: &str) -> bool {
        self.0.iter().any(|b| b == barcode)
    }

    /// Claims `barcode`.
    pub fn take(&mut self, barcode: &str) {
        self.0.push(barcode.to_string());
    }
}

/// Lets go of `barcodes`, which a job's writers claimed: other jobs may choose
/// them again.
pub(crate) fn release(barcodes: &[String]) {
    let mut held = CLAIMS.lock().unwrap_or_else(PoisonError::into_inner);
    for b in barcodes {
        if let Some(i) = held.iter().position(|h| h == b) {
            held.swap_remove(i);
        }
    }
}
