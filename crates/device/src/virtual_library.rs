//! The virtual tape library: slots, drives and cartridges as files under one folder.
//!
//! `library.json` holds the layout and what is where; `tapes/` holds the cartridges
//! (see [`crate::VirtualTape`]). Cartridges are sparse: one that was never written
//! takes no space.

use crate::{
    io, Changer, ChangerError, Corruption, DriveElement, Inventory, Result, SlotElement,
    VirtualDrive, VirtualTape,
};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The layout of a virtual library.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LibraryConfig {
    /// Number of drives.
    pub drives: usize,
    /// Number of storage slots, all holding a cartridge when the library is made.
    pub slots: usize,
    /// Logical capacity of each cartridge in bytes.
    pub capacity: u64,
    /// LTO generation whose timing the drives have (`lto1` .. `lto10`), if any;
    /// or a list of them separated by commas (`lto5,lto9`), the first drive's
    /// first, the last one's for the drives the list does not reach: a library
    /// whose older drive reads the cartridges of a generation that its newer
    /// one cannot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The model's clock (stored as `virtual` or `real`); virtual when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<crate::lto::Clock>,
    /// Rates and buffers of the model multiplied by this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<f64>,
    /// Cleaning cartridges (`CLN001L1` ...), in slots of their own after the
    /// `slots` data slots.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cleaning: usize,
    /// The first two characters of its cartridges' barcodes (`TL` when absent),
    /// so that the libraries of servers sharing a catalog hold no barcode twice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Import/export elements (mail slots): where cartridges leave the library
    /// and come back (`library export`, `library import`). Empty when made.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub mail_slots: usize,
    /// Its cartridges keep labels, the index and each data block's header, but not
    /// the payload (`library create --payload none`): a library for experiments
    /// at full scale, whose drives write faster than this machine's disk. Nothing
    /// written to it can be restored.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub headers_only: bool,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The model of drive `index` in a library whose model is `model` (one
/// generation, or a list of them separated by commas, the last one's for the
/// drives past its end).
pub fn model_of(model: Option<&str>, index: usize) -> Option<&str> {
    let mut all = model?.split(',');
    let last = model?.rsplit(',').next();
    all.nth(index).or(last)
}

/// Cleanings an LTO universal cleaning cartridge does before it is used up.
pub const CLEANING_USES: u32 = 50;

/// The most drives a virtual library has.
pub const MAX_DRIVES: usize = 256;
/// The most slots a virtual library has (barcodes `TL0001L9` to `TL9999L9`).
pub const MAX_SLOTS: usize = 9999;
/// The most cleaning cartridges a virtual library has (`CLN001L1` to `CLN999L1`).
pub const MAX_CLEANING: usize = 999;
/// The most import/export elements a virtual library has.
pub const MAX_MAIL_SLOTS: usize = 64;
/// The smallest capacity of a virtual library's cartridges.
pub const MIN_CAPACITY: u64 = 4 << 20;

impl LibraryConfig {
    /// The early-warning zone for this capacity: 1/16 of it, at least 1 MiB and at
    /// most 16 GiB, so that a job can always finish its block and filemark.
    pub fn early_warning(&self) -> u64 {
        (self.capacity / 16).clamp(1 << 20, 16 << 30)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Loaded {
    barcode: String,
    from_slot: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct State {
    version: u32,
    config: LibraryConfig,
    slots: Vec<Option<String>>,
    drives: Vec<Option<Loaded>>,
    #[serde(default)]
    write_protected: Vec<String>,
    /// Cleanings each cleaning cartridge has done.
    #[serde(default)]
    cleaning_uses: std::collections::BTreeMap<String, u32>,
    /// The import/export elements, after the storage slots in address order.
    #[serde(default)]
    mail: Vec<Option<String>>,
}

/// A virtual library, open.
pub struct VirtualLibrary {
    dir: PathBuf,
    state: State,
    /// Its folder is on a read-only file system (a snapshot of a home): the
    /// robot's moves are kept in memory for this handle only, and nothing can be
    /// written to a cartridge.
    read_only: bool,
}

/// The barcode of the `i`-th cartridge (from 1) of a virtual library whose
/// barcodes start with `prefix`.
pub fn barcode_with(prefix: &str, i: usize) -> String {
    format!("{prefix}{i:04}L9")
}

/// The first characters of a virtual library's barcodes when its configuration
/// names none.
pub const DEFAULT_PREFIX: &str = "TL";

/// Whether `prefix` may start a virtual library's barcodes: two capital letters
/// or digits, so that the barcode keeps LTO's eight characters.
pub fn valid_prefix(prefix: &str) -> bool {
    prefix.len() == 2
        && prefix
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
        && prefix != "CL"
}

/// The barcode of the `i`-th cleaning cartridge (from 1) of a virtual library.
pub fn cleaning_barcode(i: usize) -> String {
    format!("CLN{i:03}L1")
}

impl VirtualLibrary {
    fn state_path(dir: &Path) -> PathBuf {
        dir.join("library.json")
    }

    fn tapes(dir: &Path) -> PathBuf {
        dir.join("tapes")
    }

    /// Whether a library exists in `dir`.
    pub fn exists(dir: &Path) -> bool {
        Self::state_path(dir).exists()
    }

    /// Makes a new library in `dir`. Refuses when a library there holds data.
    pub fn create(dir: &Path, config: LibraryConfig) -> Result<Self> {
        if !(1..=MAX_DRIVES).contains(&config.drives)
            || !(1..=MAX_SLOTS).contains(&config.slots)
            || config.cleaning > MAX_CLEANING
            || config.mail_slots > MAX_MAIL_SLOTS
        {
            return Err(ChangerError::BadLayout.into());
        }
        if let Some(m) = &config.model {
            if m.split(',').any(|g| crate::lto::generation(g).is_none()) {
                return Err(ChangerError::UnknownModel { model: m.clone() }.into());
            }
        }
        if config.prefix.as_deref().is_some_and(|p| !valid_prefix(p)) {
            return Err(ChangerError::BadLayout.into());
        }
        if config.capacity < MIN_CAPACITY {
            return Err(ChangerError::CapacityTooSmall {
                capacity: config.capacity,
            }
            .into());
        }
        if Self::exists(dir) {
            let old = Self::open(dir)?;
            let used: Vec<String> = old
                .all_barcodes()
                .into_iter()
                .filter(|b| old.cartridge_bytes(b) > 0)
                .collect();
            if !used.is_empty() {
                return Err(ChangerError::HoldsData {
                    dir: dir.to_path_buf(),
                    barcodes: used,
                }
                .into());
            }
            for b in old.all_barcodes() {
                let (d, i) = VirtualTape::paths(&Self::tapes(dir), &b);
                let _ = std::fs::remove_file(d);
                let _ = std::fs::remove_file(i);
                let _ = std::fs::remove_file(VirtualTape::directory_path(&Self::tapes(dir), &b));
            }
        }
        let t = Self::tapes(dir);
        io(
            || format!("create library folder {}", t.display()),
            std::fs::create_dir_all(&t),
        )?;
        let state = State {
            version: 1,
            slots: (1..=config.slots)
                .map(|i| {
                    Some(barcode_with(
                        config.prefix.as_deref().unwrap_or(DEFAULT_PREFIX),
                        i,
                    ))
                })
                .chain((1..=config.cleaning).map(|i| Some(cleaning_barcode(i))))
                .collect(),
            drives: vec![None; config.drives],
            mail: vec![None; config.mail_slots],
            config,
            write_protected: Vec::new(),
            cleaning_uses: Default::default(),
        };
        let lib = VirtualLibrary {
            dir: dir.to_path_buf(),
            state,
            read_only: false,
        };
        lib.save()?;
        Ok(lib)
    }

    /// Opens the library in `dir`.
    pub fn open(dir: &Path) -> Result<Self> {
        let p = Self::state_path(dir);
        let text = io(
            || format!("read library state {}", p.display()),
            std::fs::read_to_string(&p),
        )?;
        let state: State =
            serde_json::from_str(&text).map_err(|source| Corruption::LibraryState {
                path: p.clone(),
                source,
            })?;
        if state.slots.len() != state.config.slots + state.config.cleaning
            || state.drives.len() != state.config.drives
            || state.mail.len() != state.config.mail_slots
        {
            return Err(Corruption::LibraryLayout { path: p }.into());
        }
        let read_only = matches!(
            rustix::fs::access(dir, rustix::fs::Access::WRITE_OK),
            Err(rustix::io::Errno::ROFS)
        );
        Ok(VirtualLibrary {
            dir: dir.to_path_buf(),
            state,
            read_only,
        })
    }

    /// Whether its folder is on a read-only file system: moves are kept in
    /// memory only, and cartridges can only be read.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    fn save(&self) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        let p = Self::state_path(&self.dir);
        let text = serde_json::to_string_pretty(&self.state)
            .map_err(|source| Corruption::Encode { source })?;
        io(
            || format!("write library state {}", p.display()),
            crate::fsio::write_atomic(&p, text.as_bytes()),
        )
    }

    /// The layout.
    pub fn config(&self) -> &LibraryConfig {
        &self.state.config
    }

    /// Every cartridge barcode, sorted: those in the mail slots too.
    pub fn all_barcodes(&self) -> Vec<String> {
        let mut v = self.inventory_now().barcodes();
        v.extend(self.state.mail.iter().flatten().cloned());
        v.sort();
        v
    }

    /// Bytes written on a cartridge.
    pub fn cartridge_bytes(&self, barcode: &str) -> u64 {
        let (d, _) = VirtualTape::paths(&Self::tapes(&self.dir), barcode);
        std::fs::metadata(d).map(|m| m.len()).unwrap_or(0)
    }

    /// Whether a cartridge is write protected.
    pub fn is_write_protected(&self, barcode: &str) -> bool {
        self.state.write_protected.iter().any(|b| b == barcode)
    }

    /// Sets or clears a cartridge's write-protect tab. Takes effect at its next load.
    pub fn set_write_protected(&mut self, barcode: &str, on: bool) -> Result<()> {
        self.state.write_protected.retain(|b| b != barcode);
        if on {
            self.state.write_protected.push(barcode.to_string());
        }
        self.save()
    }

    /// Opens drive `index` with whatever cartridge is in it.
    pub fn open_drive(&self, index: usize) -> Result<VirtualDrive> {
        let slot = self
            .state
            .drives
            .get(index)
            .ok_or(ChangerError::NoSuchDrive {
                drive: index,
                count: None,
            })?;
        let tape = match slot {
            Some(l) => Some(
                VirtualTape::open(
                    &Self::tapes(&self.dir),
                    &l.barcode,
                    self.state.config.capacity,
                    self.state.config.early_warning(),
                    self.is_write_protected(&l.barcode),
                )?
                .headers_only(self.state.config.headers_only),
            ),
            None => None,
        };
        Ok(VirtualDrive::new(format!("{index}"), tape))
    }

    /// Opens drive `index` as its model says: the plain virtual drive, or the virtual
    /// drive with an LTO generation's timing.
    pub fn open_tape_drive(&self, index: usize) -> Result<Box<dyn crate::TapeDrive>> {
        let d = self.open_drive(index)?;
        let c = &self.state.config;
        match model_of(c.model.as_deref(), index) {
            None => Ok(Box::new(d)),
            Some(m) => {
                let m = m.to_string();
                let mut p = crate::lto::generation(&m)
                    .ok_or_else(|| Corruption::UnknownModel { model: m.clone() })?;
                if let Some(f) = c.scale.filter(|f| *f > 0.0 && *f != 1.0) {
                    p = p.scaled(f);
                }
                let clock = c.clock.unwrap_or_default();
                Ok(Box::new(crate::lto::LtoDrive::new(d, p, clock, true)))
            }
        }
    }

    /// Erases a cartridge back to blank (for scratch use by benchmarks).
    pub fn erase_cartridge(&mut self, barcode: &str) -> Result<()> {
        let (d, i) = VirtualTape::paths(&Self::tapes(&self.dir), barcode);
        let pos = VirtualTape::directory_path(&Self::tapes(&self.dir), barcode);
        for p in [d, i, pos] {
            if p.exists() {
                io(|| format!("erase {}", p.display()), std::fs::write(&p, b""))?;
            }
        }
        Ok(())
    }

    fn inventory_now(&self) -> Inventory {
        Inventory {
            drives: self
                .state
                .drives
                .iter()
                .enumerate()
                .map(|(index, l)| DriveElement {
                    index,
                    loaded: l.as_ref().map(|l| l.barcode.clone()),
                    from_slot: l.as_ref().map(|l| l.from_slot),
                })
                .collect(),
            slots: self
                .state
                .slots
                .iter()
                .enumerate()
                .map(|(address, b)| SlotElement {
                    address,
                    barcode: b.clone(),
                })
                .collect(),
            import_export: (self.state.mail.iter().enumerate())
                .map(|(i, b)| SlotElement {
                    address: self.state.slots.len() + i,
                    barcode: b.clone(),
                })
                .collect(),
        }
    }

    /// The element at `address`: a storage slot, or a mail slot after them.
    fn element(&mut self, address: usize) -> Option<&mut Option<String>> {
        let n = self.state.slots.len();
        match address.checked_sub(n) {
            None => self.state.slots.get_mut(address),
            Some(i) => self.state.mail.get_mut(i),
        }
    }
}

impl crate::TapeLibrary for VirtualLibrary {
    fn describe(&self) -> String {
        format!("virtual library {}", self.dir.display())
    }
    fn open_tape_drive(&self, index: usize) -> Result<Box<dyn crate::TapeDrive>> {
        VirtualLibrary::open_tape_drive(self, index)
    }
    fn is_write_protected(&self, barcode: &str) -> bool {
        VirtualLibrary::is_write_protected(self, barcode)
    }
    fn cartridge_bytes(&self, barcode: &str) -> Option<u64> {
        Some(VirtualLibrary::cartridge_bytes(self, barcode))
    }
    fn capacity(&self) -> Option<u64> {
        Some(self.state.config.capacity)
    }
    fn model(&self) -> Option<String> {
        self.state.config.model.clone()
    }
    fn lowest_speed_mb_s(&self) -> Option<f64> {
        let c = &self.state.config;
        let mut p = crate::lto::generation(model_of(c.model.as_deref(), 0)?)?;
        if let Some(f) = c.scale.filter(|f| *f > 0.0 && *f != 1.0) {
            p = p.scaled(f);
        }
        p.speed_steps().first().map(|s| s / 1e6)
    }
    /// The cleaning cartridge does its cleaning as it is loaded (counted in the
    /// library's state), and goes back to its slot.
    fn clean_drive(&mut self, drive: usize) -> Result<crate::Cleaned> {
        let counts = self.state.cleaning_uses.clone();
        let uses = |b: &str| counts.get(b).copied().unwrap_or(0);
        let inv = self.inventory_now();
        let (slot, barcode) = crate::cleaning_slot(&inv, drive, |b| uses(b) < CLEANING_USES)
            .map_err(|e| match e {
                crate::DeviceError::Changer(ChangerError::CleaningExpired { barcode, .. }) => {
                    ChangerError::CleaningExpired {
                        uses: uses(&barcode),
                        barcode,
                    }
                    .into()
                }
                e => e,
            })?;
        Changer::load(self, slot, drive)?;
        let n = uses(&barcode) + 1;
        self.state.cleaning_uses.insert(barcode.clone(), n);
        Changer::unload(self, drive, Some(slot))?;
        Ok(crate::Cleaned {
            drive,
            barcode,
            uses: Some(n),
            uses_left: Some(CLEANING_USES - n),
        })
    }
    fn set_write_protected(&mut self, barcode: &str, on: bool) -> Result<()> {
        if !self.all_barcodes().iter().any(|b| b == barcode) {
            return Err(ChangerError::NoSuchBarcode {
                barcode: barcode.to_string(),
            }
            .into());
        }
        VirtualLibrary::set_write_protected(self, barcode, on)
    }
    fn erase(&mut self, barcode: &str) -> Result<()> {
        if !self.all_barcodes().iter().any(|b| b == barcode) {
            return Err(ChangerError::NoSuchBarcode {
                barcode: barcode.to_string(),
            }
            .into());
        }
        self.erase_cartridge(barcode)
    }
}

impl Changer for VirtualLibrary {
    fn inventory(&mut self) -> Result<Inventory> {
        Ok(self.inventory_now())
    }

    fn load(&mut self, slot: usize, drive: usize) -> Result<()> {
        let n_slots = self.state.slots.len();
        let n_drives = self.state.drives.len();
        let Some(Some(barcode)) = self.state.slots.get(slot).cloned() else {
            return Err(if slot >= n_slots {
                ChangerError::NoSuchSlot { slot, count: None }
            } else {
                ChangerError::SlotEmpty { slot }
            }
            .into());
        };
        match self.state.drives.get(drive) {
            None => {
                return Err(ChangerError::NoSuchDrive {
                    drive,
                    count: Some(n_drives),
                }
                .into())
            }
            Some(Some(l)) => {
                return Err(ChangerError::DriveOccupied {
                    drive,
                    barcode: l.barcode.clone(),
                }
                .into())
            }
            Some(None) => {}
        }
        self.state.slots[slot] = None;
        self.state.drives[drive] = Some(Loaded {
            barcode,
            from_slot: slot,
        });
        self.save()
    }

    fn unload(&mut self, drive: usize, slot: Option<usize>) -> Result<()> {
        let Some(Some(l)) = self.state.drives.get(drive).cloned() else {
            return Err(ChangerError::DriveEmpty { drive }.into());
        };
        let to = slot.unwrap_or(l.from_slot);
        match self.state.slots.get(to) {
            Some(None) => {}
            Some(Some(b)) => {
                return Err(ChangerError::SlotOccupied {
                    slot: to,
                    barcode: b.clone(),
                }
                .into())
            }
            None => {
                return Err(ChangerError::NoSuchSlot {
                    slot: to,
                    count: None,
                }
                .into())
            }
        }
        self.state.slots[to] = Some(l.barcode);
        self.state.drives[drive] = None;
        self.save()
    }

    /// Moves a cartridge between storage slots and mail slots (addresses after
    /// the storage slots).
    fn transfer(&mut self, from: usize, to: usize) -> Result<()> {
        let n = self.state.slots.len() + self.state.mail.len();
        if from >= n || to >= n {
            return Err(ChangerError::NoSuchSlot {
                slot: from.max(to),
                count: Some(n),
            }
            .into());
        }
        let Some(b) = self.element(from).and_then(|e| e.clone()) else {
            return Err(ChangerError::SlotEmpty { slot: from }.into());
        };
        if let Some(Some(o)) = self.element(to).map(|e| e.clone()) {
            return Err(ChangerError::SlotOccupied {
                slot: to,
                barcode: o,
            }
            .into());
        }
        if let Some(e) = self.element(to) {
            *e = Some(b);
        }
        if let Some(e) = self.element(from) {
            *e = None;
        }
        // A cartridge that moved has no home slot but its new one.
        self.save()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TapeDrive;

    #[test]
    fn create_load_unload_and_refuse_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = LibraryConfig {
            drives: 2,
            slots: 4,
            capacity: 64 << 20,
            model: None,
            clock: None,
            scale: None,
            cleaning: 0,
            prefix: None,
            mail_slots: 0,
            headers_only: false,
        };
        let mut lib = VirtualLibrary::create(dir.path(), cfg.clone()).unwrap();
        let inv = lib.inventory().unwrap();
        assert_eq!(
            inv.barcodes(),
            vec!["TL0001L9", "TL0002L9", "TL0003L9", "TL0004L9"]
        );
        lib.load(2, 1).unwrap();
        assert!(lib.load(2, 0).is_err(), "empty slot");
        assert!(lib.load(0, 1).is_err(), "full drive");
        let mut d = lib.open_drive(1).unwrap();
        d.write_block(&[1; 1000]).unwrap();
        drop(d);
        let mut lib = VirtualLibrary::open(dir.path()).unwrap();
        let inv = lib.inventory().unwrap();
        assert_eq!(inv.drive_of("TL0003L9"), Some(1));
        lib.unload(1, None).unwrap();
        assert_eq!(lib.inventory().unwrap().slot_of("TL0003L9"), Some(2));
        assert_eq!(lib.cartridge_bytes("TL0003L9"), 1000);
        assert!(VirtualLibrary::create(dir.path(), cfg).is_err());
    }

    #[test]
    fn empty_library_can_be_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = |slots| LibraryConfig {
            drives: 1,
            slots,
            capacity: 64 << 20,
            model: None,
            clock: None,
            scale: None,
            cleaning: 0,
            prefix: None,
            mail_slots: 0,
            headers_only: false,
        };
        VirtualLibrary::create(dir.path(), cfg(3)).unwrap();
        let lib = VirtualLibrary::create(dir.path(), cfg(5)).unwrap();
        assert_eq!(lib.all_barcodes().len(), 5);
    }

    #[test]
    fn each_drive_takes_its_model_from_the_list_and_the_last_for_the_rest() {
        assert_eq!(model_of(None, 0), None);
        assert_eq!(model_of(Some("lto3"), 5), Some("lto3"));
        assert_eq!(model_of(Some("lto5,lto9"), 0), Some("lto5"));
        assert_eq!(model_of(Some("lto5,lto9"), 1), Some("lto9"));
        assert_eq!(model_of(Some("lto5,lto9"), 3), Some("lto9"));
        let dir = tempfile::tempdir().unwrap();
        let bad = LibraryConfig {
            drives: 2,
            slots: 2,
            capacity: 64 << 20,
            model: Some("lto5,lto99".into()),
            clock: None,
            scale: None,
            cleaning: 0,
            prefix: None,
            mail_slots: 0,
            headers_only: false,
        };
        assert!(VirtualLibrary::create(dir.path(), bad).is_err());
    }

    #[test]
    fn the_model_clock_is_kept_as_its_word() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = LibraryConfig {
            drives: 1,
            slots: 1,
            capacity: 64 << 20,
            model: Some("lto3".into()),
            clock: Some(crate::Clock::Real),
            scale: None,
            cleaning: 0,
            prefix: None,
            mail_slots: 0,
            headers_only: false,
        };
        VirtualLibrary::create(dir.path(), cfg).unwrap();
        let text = std::fs::read_to_string(dir.path().join("library.json")).unwrap();
        assert!(text.contains("\"clock\": \"real\""), "{text}");
        let lib = VirtualLibrary::open(dir.path()).unwrap();
        assert_eq!(lib.config().clock, Some(crate::Clock::Real));
        assert_eq!("virtual".parse::<crate::Clock>(), Ok(crate::Clock::Virtual));
        let e = "wall".parse::<crate::Clock>().unwrap_err();
        assert_eq!(e.to_string(), "unknown clock \"wall\" (virtual or real)");
        std::fs::write(
            dir.path().join("library.json"),
            text.replace("\"real\"", "\"wall\""),
        )
        .unwrap();
        assert!(VirtualLibrary::open(dir.path()).is_err());
    }
}
