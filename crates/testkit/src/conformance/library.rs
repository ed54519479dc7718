//! The library conformance suite: what every [`TapeLibrary`] must do with its
//! changer and drives, and what it must refuse.
//!
//! [`run_all`] takes a library in its starting state: every drive empty, at least
//! one drive, and at least two cartridges in storage slots, blank and writable.
//! Slots and import/export elements are used by the addresses the inventory gives.
//! Each check leaves the drives empty again. Refusals are matched by variant: a
//! virtual library's [`ChangerError`], or a SCSI changer's MOVE MEDIUM refused
//! with the sense the standard gives for it (ASC/ASCQ 3B/0D destination full,
//! 3B/0E source empty).

use super::{Check, Outcome, Skip};
use tapeloom_device::scsi::sense::ILLEGAL_REQUEST;
use tapeloom_device::{ChangerError, DeviceError, Inventory, ReadOutcome, TapeLibrary};

/// Runs every check but those in `skips`.
pub fn run_all(lib: &mut dyn TapeLibrary, skips: &[Skip]) -> Outcome {
    let mut o = Outcome::new(skips);
    type Run = fn(&mut dyn TapeLibrary);
    let checks: [(Check, Run); 9] = [
        (Check::Inventory, inventory_is_consistent),
        (Check::LoadAndUnload, load_read_and_unload),
        (Check::MoveBetweenSlots, move_between_slots),
        (Check::RefuseOccupiedDrive, refuse_occupied_drive),
        (Check::RefuseFullSlot, refuse_full_slot),
        (Check::RefuseEmptySource, refuse_empty_source),
        (Check::RefuseUnknownDrive, refuse_unknown_drive),
        (Check::RefuseUnknownBarcode, refuse_unknown_barcode),
        (Check::DriveHealth, drive_health),
    ];
    for (check, run) in checks {
        if o.runs(check) {
            run(lib);
            assert_drives_empty(lib, check);
        }
    }
    if o.runs(Check::MailSlots) {
        if inventory(lib).import_export.is_empty() {
            o.skip(
                Check::MailSlots,
                "the library has no import/export elements",
            );
        } else {
            mail_slots(lib);
        }
    }
    if o.runs(Check::Erase) {
        erase_makes_blank(lib);
        assert_drives_empty(lib, Check::Erase);
    }
    o
}

fn inventory(lib: &mut dyn TapeLibrary) -> Inventory {
    lib.inventory().expect("inventory")
}

/// Two cartridges in slots: (barcode, slot) each.
fn two_in_slots(lib: &mut dyn TapeLibrary) -> [(String, usize); 2] {
    let inv = inventory(lib);
    let mut full = inv
        .slots
        .iter()
        .filter_map(|s| Some((s.barcode.clone()?, s.address)));
    let a = full
        .next()
        .expect("the suite needs two cartridges in slots");
    let b = full
        .next()
        .expect("the suite needs two cartridges in slots");
    [a, b]
}

fn assert_drives_empty(lib: &mut dyn TapeLibrary, after: Check) {
    let inv = inventory(lib);
    assert!(
        inv.drives.iter().all(|d| d.loaded.is_none()),
        "{}: a drive is loaded after {after:?}: {inv:?}",
        lib.describe()
    );
}

/// Whether `e` refuses a move because its destination is full.
fn destination_full(e: &DeviceError) -> bool {
    match e {
        DeviceError::Changer(ChangerError::DriveOccupied { .. })
        | DeviceError::Changer(ChangerError::SlotOccupied { .. }) => true,
        DeviceError::Changer(ChangerError::MoveRefused { source, .. }) => {
            source.is_sense(ILLEGAL_REQUEST, 0x3B, 0x0D)
        }
        _ => false,
    }
}

/// Whether `e` refuses a move because its source is empty.
fn source_empty(e: &DeviceError) -> bool {
    match e {
        DeviceError::Changer(ChangerError::SlotEmpty { .. })
        | DeviceError::Changer(ChangerError::DriveEmpty { .. }) => true,
        DeviceError::Changer(ChangerError::MoveRefused { source, .. }) => {
            source.is_sense(ILLEGAL_REQUEST, 0x3B, 0x0E)
        }
        _ => false,
    }
}

/// Barcodes are unique, drives are numbered from 0 and empty, every cartridge is
/// in a slot, and `slot_of`, `drive_of` and `barcodes` agree with the lists.
pub fn inventory_is_consistent(lib: &mut dyn TapeLibrary) {
    let inv = inventory(lib);
    assert!(!inv.drives.is_empty(), "no drives");
    for (i, d) in inv.drives.iter().enumerate() {
        assert_eq!(d.index, i, "drives are numbered in order");
        assert_eq!(d.loaded, None, "drive {i} is loaded at start");
    }
    let in_slots: Vec<&str> = inv
        .slots
        .iter()
        .filter_map(|s| s.barcode.as_deref())
        .collect();
    let mut unique = in_slots.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        in_slots.len(),
        "duplicate barcodes: {in_slots:?}"
    );
    assert_eq!(
        inv.barcodes(),
        unique,
        "barcodes() lists the slots' cartridges"
    );
    for s in &inv.slots {
        if let Some(b) = &s.barcode {
            assert_eq!(inv.slot_of(b), Some(s.address));
            assert_eq!(inv.drive_of(b), None);
        }
    }
    assert_eq!(inventory(lib), inv, "a second inventory gives the same");
}

/// A cartridge loads into each drive, which sees it ready at the beginning of
/// tape, and unloads back to the slot it came from.
pub fn load_read_and_unload(lib: &mut dyn TapeLibrary) {
    let [(b, slot), _] = two_in_slots(lib);
    let drives = inventory(lib).drives.len();
    for drive in 0..drives {
        lib.load(slot, drive).expect("load");
        let inv = inventory(lib);
        assert_eq!(inv.drive_of(&b), Some(drive));
        assert_eq!(inv.drives[drive].from_slot, Some(slot));
        assert_eq!(inv.slot_of(&b), None);
        assert_eq!(inv.barcodes().iter().filter(|x| **x == b).count(), 1);
        let mut d = lib.open_tape_drive(drive).expect("open the drive");
        d.load().expect("load the cartridge in the drive");
        assert!(d.has_medium(), "{}", d.describe());
        assert_eq!(d.position().expect("position"), 0);
        let mut buf = vec![0u8; 64 * 1024];
        assert_eq!(
            d.read_block(&mut buf).expect("read"),
            ReadOutcome::EndOfData
        );
        d.unload().expect("unload the cartridge in the drive");
        drop(d);
        lib.unload(drive, None).expect("unload");
        let inv = inventory(lib);
        assert_eq!(inv.slot_of(&b), Some(slot), "back to the slot it came from");
        assert_eq!(inv.drive_of(&b), None);
    }
}

/// Slot to slot into an empty slot, and unload into a chosen slot.
pub fn move_between_slots(lib: &mut dyn TapeLibrary) {
    let [(a, sa), (b, sb)] = two_in_slots(lib);
    // An empty slot: a's, while a is in drive 0.
    lib.load(sa, 0).expect("load");
    lib.transfer(sb, sa).expect("slot to an empty slot");
    let inv = inventory(lib);
    assert_eq!(inv.slot_of(&b), Some(sa));
    assert!(inv
        .slots
        .iter()
        .any(|s| s.address == sb && s.barcode.is_none()));
    lib.unload(0, Some(sb)).expect("unload into a chosen slot");
    let inv = inventory(lib);
    assert_eq!(inv.slot_of(&a), Some(sb));
    // And back as it was.
    lib.load(sb, 0).expect("load");
    lib.transfer(sa, sb).expect("slot to an empty slot");
    lib.unload(0, Some(sa)).expect("unload into a chosen slot");
    let inv = inventory(lib);
    assert_eq!((inv.slot_of(&a), inv.slot_of(&b)), (Some(sa), Some(sb)));
}

/// Out through an import/export element, out of the library's barcodes, and back.
pub fn mail_slots(lib: &mut dyn TapeLibrary) {
    let [(b, slot), _] = two_in_slots(lib);
    let inv = inventory(lib);
    let mail = inv
        .import_export
        .iter()
        .find(|m| m.barcode.is_none())
        .expect("an empty import/export element")
        .address;
    lib.transfer(slot, mail).expect("slot to mail slot");
    let inv = inventory(lib);
    assert_eq!(inv.mail_slot_of(&b), Some(mail));
    assert_eq!(inv.slot_of(&b), None);
    assert!(
        !inv.barcodes().contains(&b),
        "a mail slot is outside the library"
    );
    lib.transfer(mail, slot).expect("mail slot to slot");
    let inv = inventory(lib);
    assert_eq!(inv.slot_of(&b), Some(slot));
    assert_eq!(inv.mail_slot_of(&b), None);
}

/// Loading into a drive that holds a cartridge is refused, and nothing moves.
pub fn refuse_occupied_drive(lib: &mut dyn TapeLibrary) {
    let [(a, sa), (b, sb)] = two_in_slots(lib);
    lib.load(sa, 0).expect("load");
    let before = inventory(lib);
    let e = lib.load(sb, 0).expect_err("a load into a full drive");
    assert!(destination_full(&e), "{e}");
    let after = inventory(lib);
    assert_eq!(after, before, "nothing moved");
    assert_eq!((after.drive_of(&a), after.slot_of(&b)), (Some(0), Some(sb)));
    lib.unload(0, None).expect("unload");
}

/// Moving into a full slot is refused, slot to slot and drive to slot.
pub fn refuse_full_slot(lib: &mut dyn TapeLibrary) {
    let [(a, sa), (b, sb)] = two_in_slots(lib);
    let before = inventory(lib);
    let e = lib.transfer(sa, sb).expect_err("a move into a full slot");
    assert!(destination_full(&e), "{e}");
    assert_eq!(inventory(lib), before, "nothing moved");
    lib.load(sa, 0).expect("load");
    let e = lib
        .unload(0, Some(sb))
        .expect_err("an unload into a full slot");
    assert!(destination_full(&e), "{e}");
    let inv = inventory(lib);
    assert_eq!((inv.drive_of(&a), inv.slot_of(&b)), (Some(0), Some(sb)));
    lib.unload(0, None).expect("unload");
    assert_eq!(inventory(lib).slot_of(&a), Some(sa));
}

/// Moving out of an empty slot, loading from one, and unloading an empty drive
/// are refused.
pub fn refuse_empty_source(lib: &mut dyn TapeLibrary) {
    let [(a, sa), (b, sb)] = two_in_slots(lib);
    lib.load(sa, 0).expect("load");
    // Slot `sa` is empty now.
    if inventory(lib).drives.len() > 1 {
        let e = lib.load(sa, 1).expect_err("a load from an empty slot");
        assert!(source_empty(&e), "{e}");
        let e = lib
            .unload(1, None)
            .expect_err("an unload of an empty drive");
        assert!(
            matches!(
                e,
                DeviceError::Changer(ChangerError::DriveEmpty { drive: 1 })
            ),
            "{e}"
        );
        // Two empty slots: a move from one to the other.
        lib.load(sb, 1).expect("load");
        let before = inventory(lib);
        let e = lib
            .transfer(sa, sb)
            .expect_err("a move out of an empty slot");
        assert!(source_empty(&e), "{e}");
        assert_eq!(inventory(lib), before, "nothing moved");
        lib.unload(1, None).expect("unload");
    } else {
        // The destination is full too: either refusal will do.
        let e = lib
            .transfer(sa, sb)
            .expect_err("a move out of an empty slot");
        assert!(source_empty(&e) || destination_full(&e), "{e}");
    }
    lib.unload(0, None).expect("unload");
    let e = lib
        .unload(0, None)
        .expect_err("an unload of an empty drive");
    assert!(
        matches!(
            e,
            DeviceError::Changer(ChangerError::DriveEmpty { drive: 0 })
        ),
        "{e}"
    );
    let inv = inventory(lib);
    assert_eq!((inv.slot_of(&a), inv.slot_of(&b)), (Some(sa), Some(sb)));
}

/// A drive the library does not have is refused by name.
pub fn refuse_unknown_drive(lib: &mut dyn TapeLibrary) {
    let [(_, sa), _] = two_in_slots(lib);
    let drives = inventory(lib).drives.len();
    let before = inventory(lib);
    let e = lib
        .load(sa, drives)
        .expect_err("a load into a drive beyond the last");
    assert!(
        matches!(e, DeviceError::Changer(ChangerError::NoSuchDrive { drive, .. }) if drive == drives),
        "{e}"
    );
    assert!(lib.open_tape_drive(drives).is_err());
    assert_eq!(inventory(lib), before, "nothing moved");
}

/// A barcode the library does not hold is refused by name.
pub fn refuse_unknown_barcode(lib: &mut dyn TapeLibrary) {
    let e = lib
        .erase("NOSUCH0L9")
        .expect_err("erasing a cartridge the library does not hold");
    assert!(
        matches!(&e, DeviceError::Changer(ChangerError::NoSuchBarcode { barcode }) if barcode == "NOSUCH0L9"),
        "{e}"
    );
}

/// Drive health can be asked of every drive, empty and loaded.
pub fn drive_health(lib: &mut dyn TapeLibrary) {
    let [(_, sa), _] = two_in_slots(lib);
    let drives = inventory(lib).drives.len();
    for d in 0..drives {
        lib.drive_health(d).expect("health of an empty drive");
    }
    lib.load(sa, 0).expect("load");
    let before = inventory(lib);
    lib.drive_health(0).expect("health of a loaded drive");
    assert_eq!(inventory(lib), before, "nothing moved");
    lib.unload(0, None).expect("unload");
}

/// A written cartridge is blank after `erase`.
pub fn erase_makes_blank(lib: &mut dyn TapeLibrary) {
    let [(b, slot), _] = two_in_slots(lib);
    lib.load(slot, 0).expect("load");
    let mut d = lib.open_tape_drive(0).expect("open the drive");
    d.load().expect("load the cartridge in the drive");
    d.write_block(&[7u8; 4096]).expect("write");
    d.write_filemarks(1, false).expect("filemark");
    d.unload().expect("unload the cartridge in the drive");
    drop(d);
    lib.unload(0, None).expect("unload");
    lib.erase(&b).expect("erase");
    if let Some(n) = lib.cartridge_bytes(&b) {
        assert_eq!(n, 0, "bytes on an erased cartridge");
    }
    let inv = inventory(lib);
    let drive = match inv.drive_of(&b) {
        Some(d) => d,
        None => {
            lib.load(inv.slot_of(&b).expect("in a slot"), 0)
                .expect("load");
            0
        }
    };
    let mut d = lib.open_tape_drive(drive).expect("open the drive");
    d.load().expect("load the cartridge in the drive");
    let mut buf = vec![0u8; 8192];
    assert_eq!(
        d.read_block(&mut buf).expect("read"),
        ReadOutcome::EndOfData
    );
    d.unload().expect("unload the cartridge in the drive");
    drop(d);
    lib.unload(drive, None).expect("unload");
}
