//! The fault-injecting library over the virtual library: each fault kind, what the
//! wrapper returns, what reached the cartridge, and that an empty plan changes
//! nothing (the drive and library suites pass).

use std::path::Path;
use std::time::{Duration, Instant};
use tapeloom_device::faults::{FaultPlan, FaultyLibrary};
use tapeloom_device::scsi::sense::{HARDWARE_ERROR, ILLEGAL_REQUEST, MEDIUM_ERROR, NOT_READY};
use tapeloom_device::scsi::{ScsiError, TransportError};
use tapeloom_device::{
    AlertAction, Changer, ChangerError, DeviceError, LibraryConfig, ReadOutcome, TapeAlerts,
    TapeDrive, TapeLibrary, VirtualLibrary, WriteOutcome,
};
use tapeloom_testkit::conformance::{self, library, Check, Skip};

fn virtual_library(dir: &Path, capacity: u64) -> VirtualLibrary {
    VirtualLibrary::create(
        dir,
        LibraryConfig {
            drives: 2,
            slots: 4,
            capacity,
            model: None,
            clock: None,
            scale: None,
            cleaning: 0,
            prefix: None,
            mail_slots: 0,
            headers_only: false,
        },
    )
    .unwrap()
}

/// A virtual library of `drives` drives and `slots` data slots, and one cleaning
/// cartridge (CLN001L1) in a slot after them.
fn with_cleaning_cartridge(dir: &Path, drives: usize, slots: usize) -> VirtualLibrary {
    VirtualLibrary::create(
        dir,
        LibraryConfig {
            drives,
            slots,
            capacity: 64 << 20,
            model: None,
            clock: None,
            scale: None,
            cleaning: 1,
            prefix: None,
            mail_slots: 0,
            headers_only: false,
        },
    )
    .unwrap()
}

fn faulty(dir: &Path, spec: &str) -> FaultyLibrary {
    FaultyLibrary::new(
        Box::new(virtual_library(dir, 64 << 20)),
        FaultPlan::parse(spec).unwrap(),
    )
}

/// Loads slot `slot` into `drive` and opens it.
fn mounted(lib: &mut FaultyLibrary, slot: usize, drive: usize) -> Box<dyn TapeDrive> {
    lib.load(slot, drive).unwrap();
    lib.open_tape_drive(drive).unwrap()
}

fn block(i: u64) -> Vec<u8> {
    (0..1000).map(|j| (i * 7 + j) as u8).collect()
}

fn write_blocks(d: &mut dyn TapeDrive, range: std::ops::Range<u64>) {
    for i in range {
        d.write_block(&block(i)).unwrap();
    }
}

/// What the cartridge in `drive` holds, read past the wrapper: each block's first
/// byte, up to end of data.
fn on_cartridge(dir: &Path, drive: usize) -> Vec<u8> {
    let mut d = VirtualLibrary::open(dir)
        .unwrap()
        .open_drive(drive)
        .unwrap();
    d.rewind().unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut firsts = Vec::new();
    loop {
        match d.read_block(&mut buf).unwrap() {
            ReadOutcome::Block(_) => firsts.push(buf[0]),
            ReadOutcome::Filemark => {}
            ReadOutcome::EndOfData => return firsts,
        }
    }
}

fn firsts(lbns: impl IntoIterator<Item = u64>) -> Vec<u8> {
    lbns.into_iter().map(|i| block(i)[0]).collect()
}

/// The sense of a CHECK CONDITION, as (key, ASC, ASCQ).
fn sense_of(e: &DeviceError) -> (u8, u8, u8) {
    let s = match e {
        DeviceError::Scsi(s) => s.sense(),
        DeviceError::Changer(ChangerError::MoveRefused { source, .. }) => source.sense(),
        _ => None,
    };
    let s = s.unwrap_or_else(|| panic!("not a CHECK CONDITION: {e:?}"));
    (s.key, s.asc, s.ascq)
}

#[test]
fn empty_plan_passes_the_drive_suite() {
    // The active path too: a plan with a fault that never fires.
    for spec in ["", "read-error@lbn=999999;move-fail@n=999"] {
        let t = tempfile::tempdir().unwrap();
        let mut n = 0;
        let outcome = conformance::run_all_except(
            &mut |capacity, _ew| {
                n += 1;
                let dir = t.path().join(n.to_string());
                let inner = virtual_library(&dir, capacity.max(4 << 20));
                let mut lib = FaultyLibrary::new(Box::new(inner), FaultPlan::parse(spec).unwrap());
                mounted(&mut lib, 0, 0)
            },
            &[Skip {
                check: Check::EndOfMedium,
                why:
                    "a virtual library's cartridges hold at least 4 MiB, more than the check writes",
            }],
        );
        eprint!("faulty library ({spec:?}):\n{}", outcome.skipped_list());
        assert!(outcome.ran.contains(&Check::EarlyWarning));
    }
}

#[test]
fn empty_plan_passes_the_library_suite() {
    let t = tempfile::tempdir().unwrap();
    let mut lib = faulty(t.path(), "");
    let outcome = library::run_all(&mut lib, &[]);
    eprint!("faulty library:\n{}", outcome.skipped_list());
    assert_eq!(
        outcome.skipped.iter().map(|s| s.check).collect::<Vec<_>>(),
        vec![Check::MailSlots]
    );
    assert!(lib.describe().ends_with("with injected faults"));
}

#[test]
fn a_read_error_at_a_block_is_a_medium_error_once() {
    let t = tempfile::tempdir().unwrap();
    let mut lib = faulty(t.path(), "read-error@lbn=5");
    let mut d = mounted(&mut lib, 0, 0);
    write_blocks(d.as_mut(), 0..10);
    d.rewind().unwrap();
    let mut buf = vec![0u8; 4096];
    for i in 0..10 {
        let r = d.read_block(&mut buf);
        if i == 5 {
            let e = r.unwrap_err();
            assert_eq!(sense_of(&e), (MEDIUM_ERROR, 0x11, 0x00), "{e}");
            assert!(e.to_string().contains("READ failed"), "{e}");
            // The drive stands after the bad block.
            assert_eq!(d.position().unwrap(), 6);
        } else {
            assert_eq!(r.unwrap(), ReadOutcome::Block(1000));
            assert_eq!(buf[0], block(i)[0]);
        }
    }
    // Fired once: the block reads now, also from a drive opened again.
    drop(d);
    let mut d = lib.open_tape_drive(0).unwrap();
    d.locate(5).unwrap();
    assert_eq!(d.read_block(&mut buf).unwrap(), ReadOutcome::Block(1000));
    assert_eq!(lib.faults().fired(), vec![1]);
}

#[test]
fn an_every_read_error_fails_each_read() {
    let t = tempfile::tempdir().unwrap();
    let mut lib = faulty(t.path(), "read-error@lbn=2,every");
    let mut d = mounted(&mut lib, 0, 0);
    write_blocks(d.as_mut(), 0..4);
    let mut buf = vec![0u8; 4096];
    for _ in 0..3 {
        d.locate(2).unwrap();
        assert!(d.read_block(&mut buf).is_err());
    }
    assert_eq!(lib.faults().fired(), vec![3]);
}

#[test]
fn a_write_error_writes_nothing() {
    let t = tempfile::tempdir().unwrap();
    let mut lib = faulty(t.path(), "write-error@lbn=3");
    let mut d = mounted(&mut lib, 0, 0);
    write_blocks(d.as_mut(), 0..3);
    let e = d.write_block(&block(3)).unwrap_err();
    assert_eq!(sense_of(&e), (MEDIUM_ERROR, 0x0C, 0x00), "{e}");
    assert_eq!(on_cartridge(t.path(), 0), firsts(0..3));
    // Once: written again at the same place, it goes.
    d.locate(3).unwrap();
    write_blocks(d.as_mut(), 3..5);
    assert_eq!(on_cartridge(t.path(), 0), firsts(0..5));
}

#[test]
fn a_write_error_after_the_data_leaves_the_block_on_tape() {
    let t = tempfile::tempdir().unwrap();
    let mut lib = faulty(t.path(), "write-error-written@lbn=3");
    let mut d = mounted(&mut lib, 0, 0);
    write_blocks(d.as_mut(), 0..3);
    let e = d.write_block(&block(3)).unwrap_err();
    assert_eq!(sense_of(&e), (MEDIUM_ERROR, 0x0C, 0x00), "{e}");
    assert_eq!(on_cartridge(t.path(), 0), firsts(0..4));
    assert_eq!(d.position().unwrap(), 4);
}

#[test]
fn a_write_reported_done_that_never_reached_the_tape() {
    let t = tempfile::tempdir().unwrap();
    let mut lib = faulty(t.path(), "write-ok-unwritten@lbn=3");
    let mut d = mounted(&mut lib, 0, 0);
    for i in 0..6 {
        assert_eq!(d.write_block(&block(i)).unwrap(), WriteOutcome::Written);
    }
    // Block 3 is missing: the blocks after it stand one place early.
    assert_eq!(on_cartridge(t.path(), 0), firsts([0, 1, 2, 4, 5]));
    assert_eq!(d.position().unwrap(), 5);
}

#[test]
fn a_deferred_write_error_loses_what_the_drive_buffered_and_counts_it() {
    let t = tempfile::tempdir().unwrap();
    // The write error at block 3 comes while the drive is losing what it takes:
    // the loss is what it reports.
    let mut lib = faulty(t.path(), "write-error-deferred@lbn=2;write-error@lbn=3");
    let mut d = mounted(&mut lib, 0, 0);
    assert_eq!(d.buffer_bytes(), Some(64 << 20), "a buffering drive");
    // Blocks 2, 3 and 4 are taken; the third write after them reports the loss and
    // is not carried out.
    write_blocks(d.as_mut(), 0..5);
    assert_eq!(d.position().unwrap(), 5, "the host's position");
    let e = d.write_block(&block(5)).unwrap_err();
    assert_eq!(sense_of(&e), (MEDIUM_ERROR, 0x0C, 0x00), "{e}");
    assert_eq!(e.deferred_write_lost(), Some(3), "{e}");
    assert!(!e.is_medium_error(), "a deferred error is not this block's");
    assert_eq!(
        d.position().unwrap(),
        2,
        "the drive stands where the tape ends"
    );
    assert_eq!(on_cartridge(t.path(), 0), firsts(0..2));
    // Once: the drive writes again.
    write_blocks(d.as_mut(), 2..4);
    assert_eq!(on_cartridge(t.path(), 0), firsts(0..4));
}

#[test]
fn a_deferred_write_error_shows_at_the_next_flush() {
    let t = tempfile::tempdir().unwrap();
    let mut lib = faulty(t.path(), "write-error-deferred@lbn=1");
    let mut d = mounted(&mut lib, 0, 0);
    write_blocks(d.as_mut(), 0..2);
    d.write_filemarks(1, true).unwrap();
    let e = d.write_filemarks(0, false).unwrap_err();
    assert_eq!(
        e.deferred_write_lost(),
        Some(2),
        "the block and the filemark: {e}"
    );
    assert_eq!(on_cartridge(t.path(), 0), firsts(0..1));
    let plain = virtual_library(&t.path().join("plain"), 64 << 20);
    assert_eq!(plain.open_drive(0).unwrap().buffer_bytes(), Some(0));
}

#[test]
fn early_warning_early_by_block_and_by_bytes() {
    let t = tempfile::tempdir().unwrap();
    let mut lib = faulty(t.path(), "ew@lbn=4,drive=0;ew-at=8K@drive=1");
    let mut d = mounted(&mut lib, 0, 0);
    let got: Vec<_> = (0..6).map(|i| d.write_block(&block(i)).unwrap()).collect();
    assert_eq!(got[..4], [WriteOutcome::Written; 4]);
    assert_eq!(got[4..], [WriteOutcome::EarlyWarning; 2]);
    assert_eq!(
        d.write_filemarks(1, false).unwrap(),
        WriteOutcome::EarlyWarning
    );
    // 1,000-byte blocks: the ninth puts the cartridge past 8 KiB.
    let mut d = mounted(&mut lib, 1, 1);
    let got: Vec<_> = (0..10).map(|i| d.write_block(&block(i)).unwrap()).collect();
    assert_eq!(got[..8], [WriteOutcome::Written; 8]);
    assert_eq!(got[8..], [WriteOutcome::EarlyWarning; 2]);
}

#[test]
fn end_of_medium_without_early_warning() {
    let t = tempfile::tempdir().unwrap();
    // 4 MiB cartridges warn from 3 MiB: block 48 of 64 KiB.
    let inner = virtual_library(t.path(), 4 << 20);
    let mut lib = FaultyLibrary::new(
        Box::new(inner),
        FaultPlan::parse("eom-no-ew@lbn=60").unwrap(),
    );
    let mut d = mounted(&mut lib, 0, 0);
    let big = vec![9u8; 64 << 10];
    for i in 0..60 {
        assert_eq!(d.write_block(&big).unwrap(), WriteOutcome::Written, "{i}");
    }
    assert!(matches!(d.write_block(&big), Err(DeviceError::EndOfMedium)));
    assert_eq!(on_cartridge(t.path(), 0).len(), 60);
    // A filemark still fits, as after a real end of medium's early warning.
    d.write_filemarks(1, false).unwrap();
}

#[test]
fn a_stall_waits_and_a_timeout_fails_as_the_transport() {
    let t = tempfile::tempdir().unwrap();
    let mut lib = faulty(t.path(), "stall=300ms@lbn=1;timeout=100ms@lbn=3");
    let mut d = mounted(&mut lib, 0, 0);
    d.write_block(&block(0)).unwrap();
    let start = Instant::now();
    d.write_block(&block(1)).unwrap();
    assert!(start.elapsed() >= Duration::from_millis(300));
    d.write_block(&block(2)).unwrap();
    let start = Instant::now();
    let e = d.write_block(&block(3)).unwrap_err();
    assert!(start.elapsed() >= Duration::from_millis(100));
    match &e {
        DeviceError::Scsi(ScsiError::Transport {
            source: TransportError::HostStatus { op: 0x0A, status },
            ..
        }) => assert_eq!(*status, 0x03),
        other => panic!("expected a timed-out WRITE, got {other:?}"),
    }
    assert_eq!(on_cartridge(t.path(), 0), firsts(0..3));
}

#[test]
fn a_drive_that_goes_offline_stays_offline() {
    let t = tempfile::tempdir().unwrap();
    let mut lib = faulty(t.path(), "offline@lbn=2");
    let mut d = mounted(&mut lib, 0, 0);
    write_blocks(d.as_mut(), 0..2);
    let e = d.write_block(&block(2)).unwrap_err();
    assert_eq!(sense_of(&e), (NOT_READY, 0x04, 0x12), "{e}");
    assert!(!d.has_medium());
    assert_eq!(sense_of(&d.rewind().unwrap_err()), (NOT_READY, 0x04, 0x12));
    let e = lib.open_tape_drive(0).err().expect("drive 0 is offline");
    assert_eq!(sense_of(&e), (NOT_READY, 0x04, 0x12));
    // The other drive works, and the changer still takes the cartridge out.
    let mut other = mounted(&mut lib, 1, 1);
    write_blocks(other.as_mut(), 0..3);
    lib.unload(0, None).unwrap();
}

#[test]
fn a_changer_move_fails_at_the_nth_move_and_nothing_moves() {
    let t = tempfile::tempdir().unwrap();
    let mut lib = faulty(t.path(), "move-fail@n=2");
    lib.load(0, 0).unwrap();
    let before = lib.inventory().unwrap();
    let e = lib.unload(0, None).unwrap_err();
    assert_eq!(sense_of(&e), (HARDWARE_ERROR, 0x15, 0x01), "{e}");
    assert!(e.to_string().contains("MOVE MEDIUM from drive 0"), "{e}");
    assert_eq!(lib.inventory().unwrap(), before);
    lib.unload(0, None).unwrap();
}

#[test]
fn a_slot_listed_full_is_empty_for_every_move() {
    let t = tempfile::tempdir().unwrap();
    let mut lib = faulty(t.path(), "slot-empty=1");
    let inv = lib.inventory().unwrap();
    assert_eq!(inv.slots[1].barcode.as_deref(), Some("TL0002L9"));
    for _ in 0..2 {
        let e = lib.load(1, 0).unwrap_err();
        assert_eq!(sense_of(&e), (ILLEGAL_REQUEST, 0x3B, 0x0E), "{e}");
    }
    let e = lib.transfer(1, 3).expect_err("the slot is empty");
    assert_eq!(sense_of(&e), (ILLEGAL_REQUEST, 0x3B, 0x0E));
    lib.load(0, 0).unwrap();
    assert_eq!(lib.faults().fired(), vec![3]);
}

#[test]
fn faults_limited_to_a_cartridge_or_a_drive() {
    let t = tempfile::tempdir().unwrap();
    let mut lib = faulty(
        t.path(),
        "read-error@lbn=1,barcode=TL0002L9;write-error@lbn=0,drive=1",
    );
    let mut buf = vec![0u8; 4096];
    let mut d = mounted(&mut lib, 0, 0);
    write_blocks(d.as_mut(), 0..3);
    d.locate(1).unwrap();
    assert!(d.read_block(&mut buf).is_ok(), "TL0001L9 has no fault");
    drop(d);
    lib.unload(0, None).unwrap();
    let mut d = mounted(&mut lib, 1, 0);
    write_blocks(d.as_mut(), 0..3);
    d.locate(1).unwrap();
    assert!(d.read_block(&mut buf).is_err(), "TL0002L9 fails at block 1");
    let mut d = mounted(&mut lib, 2, 1);
    assert!(
        d.write_block(&block(0)).is_err(),
        "drive 1 fails at block 0"
    );
}

#[test]
fn alerts_go_with_the_cartridge_or_stay_with_the_drive_until_it_is_cleaned() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("lib");
    let inner = with_cleaning_cartridge(&dir, 2, 3);
    let mut lib = FaultyLibrary::new(
        Box::new(inner),
        FaultPlan::parse("alert=04h@lbn=2,drive=0;alert=14h@lbn=3,drive=1").unwrap(),
    );
    let mut d = mounted(&mut lib, 0, 0);
    write_blocks(d.as_mut(), 0..2);
    assert_eq!(d.tape_alerts(), Some(TapeAlerts::default()));
    write_blocks(d.as_mut(), 2..3);
    let a = d.tape_alerts().unwrap();
    assert_eq!(a.codes(), vec![0x04]);
    assert_eq!(a.action(), Some((AlertAction::Cartridge, vec![0x04])));
    assert!(d
        .health()
        .tape_alerts
        .unwrap()
        .contains(&"04h Media".to_string()));
    drop(d);
    // The media flag goes with TL0001L9: drive 0 with another cartridge is clear.
    lib.unload(0, None).unwrap();
    let mut d = mounted(&mut lib, 1, 0);
    assert_eq!(d.tape_alerts().map(|a| a.codes()), Some(vec![]));
    drop(d);
    lib.unload(0, None).unwrap();
    // Clean now stays with drive 1 until it is cleaned.
    let mut d = mounted(&mut lib, 2, 1);
    write_blocks(d.as_mut(), 0..4);
    assert_eq!(d.tape_alerts().unwrap().codes(), vec![0x14]);
    drop(d);
    let e = lib.clean_drive(1).unwrap_err();
    assert!(
        matches!(
            e,
            DeviceError::Changer(ChangerError::DriveOccupied { drive: 1, .. })
        ),
        "{e}"
    );
    lib.unload(1, None).unwrap();
    let done = lib.clean_drive(1).unwrap();
    assert_eq!(
        (done.barcode.as_str(), done.uses, done.uses_left),
        ("CLN001L1", Some(1), Some(49))
    );
    let inv = lib.inventory().unwrap();
    assert_eq!(
        inv.slot_of("CLN001L1"),
        Some(3),
        "the cleaning cartridge is back"
    );
    let mut d = mounted(&mut lib, 2, 1);
    assert_eq!(d.tape_alerts().unwrap().codes(), Vec::<u16>::new());
}

#[test]
fn a_cleaning_cartridge_is_used_up_after_fifty_cleanings() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("lib");
    let mut lib = with_cleaning_cartridge(&dir, 1, 1);
    for n in 1..=50 {
        assert_eq!(lib.clean_drive(0).unwrap().uses, Some(n));
    }
    let e = lib.clean_drive(0).unwrap_err();
    assert!(
        matches!(
            e,
            DeviceError::Changer(ChangerError::CleaningExpired { uses: 50, .. })
        ),
        "{e}"
    );
    assert!(e.to_string().contains("16h Expired cleaning media"), "{e}");
    // Kept across opens.
    let mut again = VirtualLibrary::open(&dir).unwrap();
    assert!(again.clean_drive(0).is_err());
    let mut none = virtual_library(&t.path().join("other"), 64 << 20);
    let e = none.clean_drive(0).unwrap_err();
    assert!(
        matches!(e, DeviceError::Changer(ChangerError::NoCleaningCartridge)),
        "{e}"
    );
}

/// The blocks of 300 whose reads fail, with `spec`.
fn failed_reads(spec: &str) -> Vec<u64> {
    let t = tempfile::tempdir().unwrap();
    let mut lib = faulty(t.path(), spec);
    let mut d = mounted(&mut lib, 0, 0);
    write_blocks(d.as_mut(), 0..300);
    d.rewind().unwrap();
    let mut buf = vec![0u8; 4096];
    (0..300)
        .filter(|_| d.read_block(&mut buf).is_err())
        .collect()
}

#[test]
fn a_rate_with_a_seed_is_reproducible() {
    let a = failed_reads("read-error-rate=0.1;seed=7");
    assert_eq!(a, failed_reads("read-error-rate=0.1;seed=7"));
    assert_ne!(a, failed_reads("read-error-rate=0.1;seed=8"));
    assert!((10..60).contains(&a.len()), "{} of 300 failed", a.len());
    assert!(failed_reads("read-error-rate=0").is_empty());
    // Moves too: the same seed fails the same moves.
    let moves = |seed: u64| {
        let t = tempfile::tempdir().unwrap();
        let mut lib = faulty(t.path(), &format!("move-fail-rate=0.3;seed={seed}"));
        (0..40)
            .map(|_| lib.transfer(0, 3).and_then(|_| lib.transfer(3, 0)).is_ok())
            .collect::<Vec<_>>()
    };
    assert_eq!(moves(3), moves(3));
    assert!(moves(3).contains(&false));
}
