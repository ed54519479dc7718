//! Volume policy: what is on a cartridge (a label, blank, foreign data), mounting
//! through the changer, labelling (`library label`), loading and unloading.

use crate::error::{MediaError, Result};
use crate::home::Library;
use crate::media::random_uuid;
use tapeloom_device::{DeviceError, ReadOutcome, TapeDrive};

/// An open drive of the library, with the library's drive model if it has one.
pub(crate) type Drive = Box<dyn TapeDrive>;
use tapeloom_format::{Timestamp, VolumeLabel, LABEL_LEN};

/// What is at the beginning of a cartridge.
pub(crate) enum Found {
    /// Nothing: a blank cartridge.
    Blank,
    /// A tapeloom label.
    Label(VolumeLabel),
    /// Something else.
    Foreign(String),
}

/// Reads the label of the cartridge in `drive`.
pub(crate) fn read_label(drive: &mut dyn TapeDrive) -> Result<Found> {
    drive.rewind()?;
    let mut buf = vec![0u8; 64 * 1024];
    Ok(match drive.read_block(&mut buf) {
        Ok(ReadOutcome::EndOfData) => Found::Blank,
        Ok(ReadOutcome::Filemark) => Found::Foreign("it starts with a filemark".into()),
        Ok(ReadOutcome::Block(n)) if n == LABEL_LEN => match VolumeLabel::decode(&buf[..n]) {
            Ok(l) => Found::Label(l),
            Err(e) => Found::Foreign(format!("its first block is not a tapeloom label ({e})")),
        },
        Ok(ReadOutcome::Block(n)) => Found::Foreign(format!(
            "its first block ({n} bytes) is not a tapeloom label"
        )),
        Err(DeviceError::BlockTooLarge { actual }) => Found::Foreign(format!(
            "its first block ({actual} bytes) is not a tapeloom label"
        )),
        Err(e) => return Err(e.into()),
    })
}

/// Puts `barcode` into a drive (moving whatever is in the way), opens it and loads
/// it. Uses `prefer` when given, else the drive already holding it, else an empty
/// drive.
pub(crate) fn mount(
    lib: &mut Library,
    barcode: &str,
    prefer: Option<usize>,
) -> Result<(usize, Drive)> {
    let (i, mut d, moved) = place(lib, barcode, prefer)?;
    if moved {
        d.load()?;
    }
    Ok((i, d))
}

/// The changer's part of [`mount`]: the cartridge in a drive, the drive open. Says
/// whether the cartridge was moved (and so still needs the drive's load, which can
/// take a while and needs no changer).
pub(crate) fn place(
    lib: &mut Library,
    barcode: &str,
    prefer: Option<usize>,
) -> Result<(usize, Drive, bool)> {
    let inv = lib.inventory()?;
    let holder = inv.drive_of(barcode);
    let drive = match (prefer, holder) {
        (Some(p), _) => p,
        (None, Some(h)) => h,
        (None, None) => inv
            .drives
            .iter()
            .find(|d| d.loaded.is_none())
            .map(|d| d.index)
            .unwrap_or(0),
    };
    if drive >= inv.drives.len() {
        return Err(MediaError::NoSuchDrive {
            drive,
            have: inv.drives.len(),
        }
        .into());
    }
    if holder == Some(drive) {
        // In the drive already; a drive that ejected it still needs a load.
        let d = lib.open_tape_drive(drive)?;
        let ready = d.has_medium();
        return Ok((drive, d, !ready));
    }
    if let Some(h) = holder {
        lib.unload(h, None)?;
    }
    if inv.drives[drive].loaded.is_some() {
        lib.unload(drive, None)?;
    }
    let slot = lib
        .inventory()?
        .slot_of(barcode)
        .ok_or_else(|| MediaError::NotInLibrary {
            barcode: barcode.to_string(),
        })?;
    lib.load(slot, drive)?;
    Ok((drive, lib.open_tape_drive(drive)?, true))
}

/// Puts `barcode` back into a slot if it is in a drive.
pub(crate) fn put_back(lib: &mut Library, barcode: &str) -> Result<()> {
    if let Some(d) = lib.inventory()?.drive_of(barcode) {
        lib.unload(d, None)?;
    }
    Ok(())
}

/// Puts `barcode` into a drive (`drive`, else the one holding it, else an empty one)
/// and loads it. Returns the drive.
pub fn load_cartridge(home: &crate::Home, barcode: &str, drive: Option<usize>) -> Result<usize> {
    let mut lib = home.library()?;
    let (d, _) = mount(&mut lib, barcode, drive)?;
    Ok(d)
}

/// Unloads `drive` (else every drive holding a cartridge) and puts the cartridges
/// back into slots. Returns (drive, barcode) of each cartridge moved.
pub fn unload_drives(home: &crate::Home, drive: Option<usize>) -> Result<Vec<(usize, String)>> {
    let mut lib = home.library()?;
    let inv = lib.inventory()?;
    let mut moved = Vec::new();
    for d in &inv.drives {
        if drive.is_some_and(|x| x != d.index) {
            continue;
        }
        if let Some(b) = &d.loaded {
            lib.unload(d.index, None)?;
            moved.push((d.index, b.clone()));
        }
    }
    if let Some(x) = drive {
        if x >= inv.drives.len() {
            return Err(MediaError::NoSuchDrive {
                drive: x,
                have: inv.drives.len(),
            }
            .into());
        }
    }
    Ok(moved)
}

/// What `label` did to a cartridge.
#[derive(Debug, Clone)]
pub struct Labelled {
    /// The cartridge.
    pub barcode: String,
    /// What was on it before: `blank`, `foreign`, or `tapeloom` (a label).
    pub was: String,
    /// Jobs of the catalog that were on it and are forgotten now.
    pub jobs_forgotten: Vec<i64>,
}

/// Writes a new tapeloom label on `barcode` for `pool`. A cartridge that holds data
/// tapeloom did not write, or a volume with jobs in the catalog, is written over
/// only with `force` (its jobs are then forgotten).
pub fn label(
    home: &crate::Home,
    barcode: &str,
    pool: &str,
    block_size: u32,
    force: bool,
) -> Result<Labelled> {
    let mut lib = home.library()?;
    let (_, mut drive) = mount(&mut lib, barcode, None)?;
    let found = read_label(&mut *drive)?;
    let known = home.catalog.volume_by_barcode(barcode)?;
    let jobs = match &known {
        Some(v) => home.catalog.jobs_on_volume(v.id)?,
        None => 0,
    };
    let was = match &found {
        Found::Blank => "blank",
        Found::Label(_) => "tapeloom",
        Found::Foreign(_) => "foreign",
    };
    if !force {
        match (&found, jobs) {
            (Found::Foreign(why), _) => {
                return Err(MediaError::Foreign {
                    barcode: barcode.to_string(),
                    why: why.to_string(),
                }
                .into())
            }
            (_, n) if n > 0 => {
                return Err(MediaError::HoldsJobs {
                    barcode: barcode.to_string(),
                    jobs: n,
                }
                .into())
            }
            (Found::Label(l), _) if known.is_none() => {
                return Err(MediaError::UnknownLabel {
                    barcode: barcode.to_string(),
                    pool: l.pool.clone(),
                }
                .into())
            }
            _ => {}
        }
    }
    if drive.write_protected()? {
        return Err(MediaError::WriteProtected {
            barcode: barcode.to_string(),
        }
        .into());
    }
    let mut jobs_forgotten = Vec::new();
    let mut cat = home.connect()?;
    if let Some(v) = known {
        jobs_forgotten = cat.forget_volume(v.id)?;
    }
    let l = VolumeLabel {
        uuid: random_uuid(),
        barcode: barcode.to_string(),
        pool: pool.to_string(),
        created: Timestamp::now(),
        block_size,
    };
    drive.rewind()?;
    drive.write_block(&l.encode())?;
    // Without the immediate bit: the label is on tape when this returns.
    drive.write_filemarks(1, false)?;
    cat.add_volume(barcode, l.uuid, &l.pool, l.block_size, l.created.as_nanos())?;
    Ok(Labelled {
        barcode: barcode.to_string(),
        was: was.to_string(),
        jobs_forgotten,
    })
}
