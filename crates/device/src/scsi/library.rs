//! A library of SCSI devices: one media changer and its tape drives, each reached
//! over SG_IO or iSCSI.

use super::cdb::Element;
use super::smc::ScsiChanger;
use super::ssc::ScsiDrive;
use super::{open_transport, ScsiTransport};
use crate::{Changer, ChangerError, DriveElement, Inventory, Result, SlotElement, TapeDrive};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The devices of a SCSI library, as recorded in a tapeloom home.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ScsiLibraryConfig {
    /// The media changer: `/dev/sgN` or `iscsi://HOST:PORT/TARGET/LUN`.
    pub changer: String,
    /// The tape drives, in the order of the changer's data transfer elements (drive
    /// 0 is the element with the lowest address), unless the changer names its
    /// drives by serial number, in which case the order given here is kept and each
    /// drive is matched to its element.
    pub drives: Vec<String>,
}

/// Opens a transport to a device address. The library opens its changer and
/// drives through one, [`open_transport`] unless [`ScsiLibrary::open_with`] is
/// given another (a test's wrapper that records or injects faults).
pub type TransportOpener = Arc<dyn Fn(&str) -> Result<Box<dyn ScsiTransport>> + Send + Sync>;

/// A SCSI library, open: the changer is open; drives are opened on demand.
pub struct ScsiLibrary {
    cfg: ScsiLibraryConfig,
    opener: TransportOpener,
    changer: ScsiChanger,
    /// Data transfer element address of each drive of `cfg.drives`.
    drive_elements: Vec<u16>,
}

impl ScsiLibrary {
    /// Opens the changer and maps its drive elements to the configured drives.
    /// Sends no command that moves a tape or the robot.
    pub fn open(cfg: &ScsiLibraryConfig) -> Result<Self> {
        Self::open_with(cfg, Arc::new(open_transport))
    }

    /// [`ScsiLibrary::open`], with the changer and every drive reached through
    /// transports that `opener` opens.
    pub fn open_with(cfg: &ScsiLibraryConfig, opener: TransportOpener) -> Result<Self> {
        if cfg.drives.is_empty() {
            return Err(ChangerError::NoDrives.into());
        }
        let mut changer = ScsiChanger::with_transport(opener(&cfg.changer)?, &cfg.changer)?;
        let status = changer.status()?;
        let mut elements: Vec<(u16, Option<String>)> = status
            .drives
            .iter()
            .map(|e| (e.address, e.device_id.clone()))
            .collect();
        elements.sort_by_key(|e| e.0);
        if elements.len() < cfg.drives.len() {
            return Err(ChangerError::TooFewDriveElements {
                changer: cfg.changer.clone(),
                elements: elements.len(),
                drives: cfg.drives.len(),
            }
            .into());
        }
        // Match by serial number where the changer reports identifiers, else by order.
        let mut drive_elements = Vec::new();
        let by_id = elements.iter().any(|e| e.1.is_some());
        for (i, dev) in cfg.drives.iter().enumerate() {
            let mut addr = elements[i].0;
            if by_id {
                let serial = opener(dev).and_then(|t| ScsiDrive::serial_with_transport(t, dev));
                if let Ok(serial) = serial {
                    if let Some(e) = elements.iter().find(|e| {
                        e.1.as_deref()
                            .is_some_and(|id| id.trim_end().ends_with(serial.trim()))
                    }) {
                        addr = e.0;
                    }
                }
            }
            drive_elements.push(addr);
        }
        Ok(ScsiLibrary {
            cfg: cfg.clone(),
            opener,
            changer,
            drive_elements,
        })
    }

    /// The configuration this library was opened with.
    pub fn config(&self) -> &ScsiLibraryConfig {
        &self.cfg
    }

    /// The changer.
    pub fn changer(&mut self) -> &mut ScsiChanger {
        &mut self.changer
    }

    /// The data transfer element address of drive `index`.
    pub fn drive_element(&self, index: usize) -> Result<u16> {
        self.drive_elements.get(index).copied().ok_or_else(|| {
            ChangerError::NoSuchDrive {
                drive: index,
                count: Some(self.drive_elements.len()),
            }
            .into()
        })
    }

    /// Moves a cartridge between two element addresses (slots, drives, import/export).
    pub fn move_medium(&mut self, from: u16, to: u16) -> Result<()> {
        self.changer.move_medium(from, to)
    }
}

/// The barcode of the cartridge an element holds (empty when it has no label).
fn held(e: &Element) -> Option<String> {
    e.full.then(|| e.barcode.clone().unwrap_or_default())
}

impl Changer for ScsiLibrary {
    fn inventory(&mut self) -> Result<Inventory> {
        let st = self.changer.status()?;
        let mut drives = Vec::new();
        for (index, addr) in self.drive_elements.iter().enumerate() {
            let e = st.drives.iter().find(|e| e.address == *addr);
            drives.push(DriveElement {
                index,
                loaded: e.and_then(held),
                from_slot: e.and_then(|e| e.source).map(usize::from),
            });
        }
        let slots = |v: &[Element]| -> Vec<SlotElement> {
            v.iter()
                .map(|e| SlotElement {
                    address: usize::from(e.address),
                    barcode: held(e),
                })
                .collect()
        };
        Ok(Inventory {
            drives,
            slots: slots(&st.storage),
            import_export: slots(&st.import_export),
        })
    }

    fn load(&mut self, slot: usize, drive: usize) -> Result<()> {
        let to = self.drive_element(drive)?;
        let from = self.slot_address(slot)?;
        self.changer.move_medium(from, to)
    }

    fn transfer(&mut self, from: usize, to: usize) -> Result<()> {
        let (from, to) = (self.slot_address(from)?, self.slot_address(to)?);
        self.changer.move_medium(from, to)
    }

    fn unload(&mut self, drive: usize, slot: Option<usize>) -> Result<()> {
        let from = self.drive_element(drive)?;
        let st = self.changer.status()?;
        let e = st
            .drives
            .iter()
            .find(|e| e.address == from)
            .ok_or(ChangerError::DriveNotInChanger { drive })?;
        if !e.full {
            return Err(ChangerError::DriveEmpty { drive }.into());
        }
        let to = match slot {
            Some(s) => self.slot_address(s)?,
            None => match e
                .source
                .filter(|s| st.storage.iter().any(|x| x.address == *s && !x.full))
            {
                Some(s) => s,
                None => st
                    .storage
                    .iter()
                    .find(|x| !x.full)
                    .map(|x| x.address)
                    .ok_or(ChangerError::NoEmptySlot)?,
            },
        };
        // The drive ejects the cartridge (rewinding it) before the robot takes it.
        let mut d = self.open_drive(drive)?;
        d.eject()?;
        drop(d);
        self.changer.move_medium(from, to)
    }
}

impl ScsiLibrary {
    /// The address of drive `index`.
    fn drive_address(&self, index: usize) -> Result<&str> {
        self.cfg
            .drives
            .get(index)
            .map(String::as_str)
            .ok_or_else(|| {
                ChangerError::NoSuchDrive {
                    drive: index,
                    count: Some(self.cfg.drives.len()),
                }
                .into()
            })
    }

    /// Opens drive `index` for use (see [`ScsiDrive::open`]).
    fn open_drive(&self, index: usize) -> Result<ScsiDrive> {
        let dev = self.drive_address(index)?;
        ScsiDrive::with_transport((self.opener)(dev)?, dev)
    }

    fn slot_address(&self, slot: usize) -> Result<u16> {
        u16::try_from(slot).map_err(|_| ChangerError::NotAnElementAddress { slot }.into())
    }
}

impl crate::TapeLibrary for ScsiLibrary {
    fn drive_device(&self, index: usize) -> String {
        self.cfg.drives.get(index).cloned().unwrap_or_default()
    }

    fn rescan(&mut self) -> Result<()> {
        self.changer.initialize()
    }

    fn drive_health(&self, index: usize) -> Result<crate::DriveHealth> {
        let dev = self.drive_address(index)?;
        let mut d = ScsiDrive::for_status_with_transport((self.opener)(dev)?, dev)?;
        Ok(crate::TapeDrive::health(&mut d))
    }

    fn describe(&self) -> String {
        format!(
            "SCSI library {} with {} drives",
            self.cfg.changer,
            self.cfg.drives.len()
        )
    }

    fn open_tape_drive(&self, index: usize) -> Result<Box<dyn TapeDrive>> {
        Ok(Box::new(self.open_drive(index)?))
    }

    fn drives_compress(&self) -> bool {
        true
    }

    fn erase(&mut self, barcode: &str) -> Result<()> {
        let inv = self.inventory()?;
        let drive = match inv.drive_of(barcode) {
            Some(d) => d,
            None => {
                let slot = inv
                    .slot_of(barcode)
                    .ok_or_else(|| ChangerError::NoSuchBarcode {
                        barcode: barcode.to_string(),
                    })?;
                let d = inv
                    .drives
                    .iter()
                    .find(|d| d.loaded.is_none())
                    .map(|d| d.index)
                    .ok_or(ChangerError::NoEmptyDrive)?;
                self.load(slot, d)?;
                d
            }
        };
        let mut d = self.open_drive(drive)?;
        d.load()?;
        d.erase_from_beginning()
    }
}
