//! Volume policy: what is on a cartridge (a label, blank, foreign data), mounting
//! through the changer, labelling (`library label`), loading and unloading.

use crate::error::{MediaError, Result};
use crate::home::Library;
use crate::media::random_uuid;
use tapeloom_device::{DeviceError, ReadOutcome, TapeDrive};

/// An open drive of the library, with the library's drive model if it has one.
pub(crate) type Drive = Box<dyn TapeDrive>;
use tapeloom_format::{VolumeLabel, LABEL_LEN};

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
/// drive. Returns the drive's index and the open drive.
pub fn mount(
    lib: &mut Library,
    barcode: &str,
    prefer: Option<usize>,
) -> Result<(usize, Box<dyn TapeDrive>)> {
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
    // Nothing moves for a cartridge that is not there to be loaded.
    if holder.is_none() && inv.slot_of(barcode).is_none() {
        let barcode = barcode.to_string();
        return Err(match inv.mail_slot_of(&barcode) {
            Some(slot) => MediaError::InMailSlot { barcode, slot },
            None => MediaError::NotInLibrary { barcode },
        }
        .into());
    }
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

/// Whether `barcode` holds nothing at all: the library says so where it knows
/// without loading (a virtual cartridge); otherwise the cartridge is mounted in
/// `drive` and its first block read.
pub fn is_blank(lib: &mut Library, barcode: &str, drive: usize) -> Result<bool> {
    if let Some(bytes) = lib.cartridge_bytes(barcode) {
        return Ok(bytes == 0);
    }
    let (_, mut d) = mount(lib, barcode, Some(drive))?;
    Ok(matches!(read_label(&mut *d)?, Found::Blank))
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

/// Cleans `drive` with a cleaning cartridge (barcode beginning with CLN) of the
/// library, first putting back the cartridge it holds, if any. Returns what the
/// library did, and the cartridge put back.
pub fn clean_drive(
    home: &crate::Home,
    drive: usize,
) -> Result<(tapeloom_device::Cleaned, Option<String>)> {
    let mut lib = home.library()?;
    let inv = lib.inventory()?;
    let held = inv.drives.get(drive).and_then(|d| d.loaded.clone());
    if held.is_some() {
        lib.unload(drive, None)?;
    }
    let done = lib.clean_drive(drive)?;
    Ok((done, held))
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

/// The generation of a new label on a cartridge: one more than the one it had
/// (on tape or in the catalog), 0 for one never labelled.
fn next_generation(found: &Found, known: Option<&tapeloom_catalog::Volume>) -> u32 {
    let catalog = known.map(|v| v.generation);
    let tape = match found {
        Found::Label(l) => Some(l.generation),
        _ => None,
    };
    match tape.max(catalog) {
        Some(g) => g.saturating_add(1),
        None => 0,
    }
}

/// Writes a new tapeloom label on `barcode` for `pool`. A cartridge that holds data
/// tapeloom did not write, or a volume with jobs in the catalog, is written over
/// only with `force` (its jobs are then forgotten). The pool must exist
/// ([`MediaError::UnknownPool`]) and the cartridge must not be assigned to another
/// ([`tapeloom_catalog::CatalogError::CartridgeInPool`]), force or not.
pub fn label(
    home: &crate::Home,
    barcode: &str,
    pool: &str,
    block_size: u32,
    force: bool,
) -> Result<Labelled> {
    if home.catalog.pool(pool)?.is_none() {
        return Err(MediaError::UnknownPool {
            pool: pool.to_string(),
        }
        .into());
    }
    match home.catalog.assigned_pool(barcode)? {
        Some(other) if other != pool => {
            return Err(tapeloom_catalog::CatalogError::CartridgeInPool {
                barcode: barcode.to_string(),
                pool: other,
            }
            .into())
        }
        _ => {}
    }
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
    if let Some(v) = &known {
        jobs_forgotten = cat.forget_volume(v.id)?;
    }
    let generation = next_generation(&found, known.as_ref());
    let l = VolumeLabel {
        uuid: random_uuid(),
        barcode: barcode.to_string(),
        pool: pool.to_string(),
        created: crate::clock::now()?,
        block_size,
        generation,
    };
    drive.rewind()?;
    drive.write_block(&l.encode())?;
    // Without the immediate bit: the label is on tape when this returns.
    drive.write_filemarks(1, false)?;
    let v = cat.add_volume(barcode, l.uuid, &l.pool, l.block_size, l.created.as_nanos())?;
    cat.set_volume_generation(v.id, l.generation)?;
    Ok(Labelled {
        barcode: barcode.to_string(),
        was: was.to_string(),
        jobs_forgotten,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::Home;

    fn home() -> (tempfile::TempDir, Home, Vec<String>) {
        let t = tempfile::tempdir().unwrap();
        let home = Home::open(&t.path().join("home")).unwrap();
        let barcodes = home.library().unwrap().inventory().unwrap().barcodes();
        for name in ["pool", "other"] {
            let p = tapeloom_catalog::Pool {
                name: name.into(),
                ..tapeloom_catalog::Pool::default_pool()
            };
            home.catalog.create_pool(&p, &[]).unwrap();
        }
        (t, home, barcodes)
    }

    #[test]
    fn label_keeps_to_known_pools_and_their_cartridges() {
        let (_t, home, b) = home();
        let e = label(&home, &b[0], "nope", 262_144, true).unwrap_err();
        assert!(
            matches!(e, Error::Media(MediaError::UnknownPool { ref pool }) if pool == "nope"),
            "{e}"
        );
        home.catalog
            .assign_cartridges("pool", &[b[0].clone()])
            .unwrap();
        let e = label(&home, &b[0], "other", 262_144, true).unwrap_err();
        assert!(
            matches!(e, Error::Catalog(tapeloom_catalog::CatalogError::CartridgeInPool { ref pool, .. }) if pool == "pool"),
            "{e}"
        );
        label(&home, &b[0], "pool", 262_144, false).unwrap();
        let v = home.catalog.volume_by_barcode(&b[0]).unwrap().unwrap();
        assert_eq!(v.pool, "pool");
    }

    fn foreign(why: Found) -> String {
        match why {
            Found::Foreign(why) => why,
            Found::Blank => panic!("blank"),
            Found::Label(l) => panic!("a label of {}", l.barcode),
        }
    }

    #[test]
    fn read_label_tells_blank_labelled_and_foreign_cartridges_apart() {
        let (_t, home, b) = home();
        let mut lib = home.library().unwrap();
        let (_, mut d) = mount(&mut lib, &b[0], Some(0)).unwrap();
        assert!(matches!(read_label(&mut *d).unwrap(), Found::Blank));
        d.write_block(&[7u8; 100]).unwrap();
        d.write_filemarks(1, false).unwrap();
        assert!(foreign(read_label(&mut *d).unwrap()).contains("(100 bytes)"));
        drop(d);
        let (_, mut d) = mount(&mut lib, &b[1], Some(0)).unwrap();
        d.write_filemarks(1, false).unwrap();
        assert!(foreign(read_label(&mut *d).unwrap()).contains("filemark"));
        drop(d);
        // A block of a label's length that does not decode as one.
        let (_, mut d) = mount(&mut lib, &b[2], Some(1)).unwrap();
        d.write_block(&vec![0xab; LABEL_LEN]).unwrap();
        d.write_filemarks(1, false).unwrap();
        let why = foreign(read_label(&mut *d).unwrap());
        assert!(why.contains("not a tapeloom label ("), "{why}");
        drop(d);
        drop(lib);
        label(&home, &b[3], "pool", 65536, false).unwrap();
        let mut lib = home.library().unwrap();
        let (_, mut d) = mount(&mut lib, &b[3], None).unwrap();
        match read_label(&mut *d).unwrap() {
            Found::Label(l) => assert_eq!((l.barcode.as_str(), l.pool.as_str()), (&*b[3], "pool")),
            _ => panic!("no label"),
        }
    }

    #[test]
    fn label_writes_over_only_what_tapeloom_knows_unless_forced() {
        let (_t, home, b) = home();
        {
            let mut lib = home.library().unwrap();
            let (_, mut d) = mount(&mut lib, &b[0], None).unwrap();
            d.write_block(&[1u8; 4096]).unwrap();
            d.write_filemarks(1, false).unwrap();
        }
        let e = label(&home, &b[0], "default", 262_144, false).unwrap_err();
        assert!(matches!(e, Error::Media(MediaError::Foreign { .. })), "{e}");
        let l = label(&home, &b[0], "default", 262_144, true).unwrap();
        assert_eq!((l.was.as_str(), l.jobs_forgotten.len()), ("foreign", 0));
        // A volume the catalog knows, with no jobs: labelled again without force.
        let l = label(&home, &b[0], "other", 65_536, false).unwrap();
        assert_eq!(l.was, "tapeloom");
        let v = home.catalog.volume_by_barcode(&b[0]).unwrap().unwrap();
        assert_eq!((v.pool.as_str(), v.block_size), ("other", 65_536));
        // A tapeloom label the catalog does not know (another home wrote it).
        home.connect().unwrap().forget_volume(v.id).unwrap();
        let e = label(&home, &b[0], "default", 262_144, false).unwrap_err();
        match e {
            Error::Media(MediaError::UnknownLabel { barcode, pool }) => {
                assert_eq!((barcode.as_str(), pool.as_str()), (&*b[0], "other"))
            }
            e => panic!("{e}"),
        }
        // A blank cartridge needs no force.
        assert_eq!(
            label(&home, &b[1], "default", 262_144, false).unwrap().was,
            "blank"
        );
    }
}
