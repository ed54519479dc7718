//! The drive conformance suite: one set of checks that every [`TapeDrive`]
//! implementation must pass. A test of an implementation calls [`run_all`] (or
//! [`run_all_except`]) with a factory that returns a fresh drive with an empty,
//! writable cartridge loaded.
//!
//! The factory gets a capacity and an early-warning zone in bytes; a drive whose
//! cartridge size cannot be chosen may ignore them as long as its cartridge holds at
//! least 1 MiB and reaches early warning within 4 MB (the early-warning check
//! writes 1,000 blocks of 4 KiB).

use super::{Check, Outcome, Skip};
use tapeloom_device::{DeviceError, ReadOutcome, TapeDrive, WriteOutcome};

/// A factory of fresh drives: (capacity, early-warning zone) -> drive.
pub type Factory<'a> = dyn FnMut(u64, u64) -> Box<dyn TapeDrive> + 'a;

fn block(i: u8, len: usize) -> Vec<u8> {
    (0..len).map(|j| i.wrapping_add(j as u8)).collect()
}

/// Runs every check, including early warning and end of medium; none may be
/// skipped.
pub fn run_all(make: &mut Factory<'_>) {
    let outcome = run_all_except(make, &[]);
    assert!(outcome.skipped.is_empty());
}

/// Runs every check but those in `skips`, each of which an implementation is
/// excused from for the reason given (a check skipped is part of a check only
/// where the rest of it can still run: without end of medium, early warning is
/// still checked). Returns what ran and what was skipped, for the test to print.
pub fn run_all_except(make: &mut Factory<'_>, skips: &[Skip]) -> Outcome {
    let mut outcome = Outcome::new(skips);
    type Run = fn(&mut dyn TapeDrive);
    let basic: [(Check, Run); 6] = [
        (Check::WriteReadRoundTrip, write_read_round_trip),
        (Check::FilemarksAndEndOfData, filemarks_and_end_of_data),
        (Check::LocateAndPosition, locate_and_position),
        (Check::WriteInTheMiddle, write_in_the_middle_ends_the_data),
        (Check::ShortBuffer, short_buffer),
        (Check::UnloadAndLoad, unload_and_load),
    ];
    for (check, run) in basic {
        if outcome.runs(check) {
            run(make(1 << 20, 1 << 12).as_mut());
        }
    }
    if outcome.runs(Check::EarlyWarning) {
        let end = outcome.runs(Check::EndOfMedium);
        early_warning_and_end_of_medium(make(64 * 1024, 16 * 1024).as_mut(), end);
    }
    outcome
}

/// Runs the checks that do not need a small cartridge.
pub fn run_basic(make: &mut Factory<'_>) {
    run_all_except(
        make,
        &[Skip {
            check: Check::EarlyWarning,
            why: "run_basic leaves out the small-cartridge checks",
        }],
    );
}

/// An unloaded cartridge is offline until loaded again, then at the beginning.
pub fn unload_and_load(d: &mut dyn TapeDrive) {
    d.rewind().unwrap();
    d.write_block(&block(7, 100)).unwrap();
    d.unload().unwrap();
    assert!(!d.has_medium());
    let mut buf = vec![0u8; 1024];
    assert!(matches!(d.read_block(&mut buf), Err(DeviceError::NoMedium)));
    assert!(matches!(
        d.write_block(&[1; 10]),
        Err(DeviceError::NoMedium)
    ));
    d.load().unwrap();
    assert!(d.has_medium());
    assert_eq!(d.position().unwrap(), 0);
    assert_eq!(d.read_block(&mut buf).unwrap(), ReadOutcome::Block(100));
}

/// Blocks come back as written, in order, with their lengths.
pub fn write_read_round_trip(d: &mut dyn TapeDrive) {
    assert!(d.has_medium(), "{}: no medium", d.describe());
    d.rewind().unwrap();
    assert_eq!(d.position().unwrap(), 0);
    for i in 0..10u8 {
        let w = d.write_block(&block(i, 1000 + i as usize * 10)).unwrap();
        assert_eq!(w, WriteOutcome::Written);
    }
    assert_eq!(d.position().unwrap(), 10);
    d.rewind().unwrap();
    let mut buf = vec![0u8; 4096];
    for i in 0..10u8 {
        let len = 1000 + i as usize * 10;
        assert_eq!(d.read_block(&mut buf).unwrap(), ReadOutcome::Block(len));
        assert_eq!(&buf[..len], &block(i, len)[..]);
    }
    assert_eq!(d.read_block(&mut buf).unwrap(), ReadOutcome::EndOfData);
}

/// Filemarks and end of data are outcomes of a read, and take one LBN each.
pub fn filemarks_and_end_of_data(d: &mut dyn TapeDrive) {
    d.rewind().unwrap();
    d.write_block(&block(1, 512)).unwrap();
    d.write_filemarks(1, true).unwrap();
    d.write_block(&block(2, 512)).unwrap();
    d.write_filemarks(2, false).unwrap();
    assert_eq!(d.position().unwrap(), 5);
    d.rewind().unwrap();
    let mut buf = vec![0u8; 1024];
    assert_eq!(d.read_block(&mut buf).unwrap(), ReadOutcome::Block(512));
    assert_eq!(d.read_block(&mut buf).unwrap(), ReadOutcome::Filemark);
    assert_eq!(d.position().unwrap(), 2);
    assert_eq!(d.read_block(&mut buf).unwrap(), ReadOutcome::Block(512));
    assert_eq!(d.read_block(&mut buf).unwrap(), ReadOutcome::Filemark);
    assert_eq!(d.read_block(&mut buf).unwrap(), ReadOutcome::Filemark);
    assert_eq!(d.read_block(&mut buf).unwrap(), ReadOutcome::EndOfData);
    d.space_to_eod().unwrap();
    assert_eq!(d.position().unwrap(), 5);
}

/// Locate moves to any LBN up to end of data; beyond it is an error.
pub fn locate_and_position(d: &mut dyn TapeDrive) {
    d.rewind().unwrap();
    for i in 0..20u8 {
        d.write_block(&block(i, 300)).unwrap();
    }
    let mut buf = vec![0u8; 1024];
    for lbn in [13u64, 2, 19, 0] {
        d.locate(lbn).unwrap();
        assert_eq!(d.position().unwrap(), lbn);
        assert_eq!(d.read_block(&mut buf).unwrap(), ReadOutcome::Block(300));
        assert_eq!(&buf[..300], &block(lbn as u8, 300)[..]);
        assert_eq!(d.position().unwrap(), lbn + 1);
    }
    d.locate(20).unwrap();
    assert_eq!(d.read_block(&mut buf).unwrap(), ReadOutcome::EndOfData);
    assert!(matches!(
        d.locate(25),
        Err(DeviceError::BeyondEndOfData { .. })
    ));
}

/// A write in the middle of the data is the new end of data, as on tape.
pub fn write_in_the_middle_ends_the_data(d: &mut dyn TapeDrive) {
    d.rewind().unwrap();
    for i in 0..5u8 {
        d.write_block(&block(i, 200)).unwrap();
    }
    d.locate(2).unwrap();
    d.write_block(&block(42, 100)).unwrap();
    d.space_to_eod().unwrap();
    assert_eq!(d.position().unwrap(), 3);
    d.locate(2).unwrap();
    let mut buf = vec![0u8; 1024];
    assert_eq!(d.read_block(&mut buf).unwrap(), ReadOutcome::Block(100));
    assert_eq!(&buf[..100], &block(42, 100)[..]);
    assert_eq!(d.read_block(&mut buf).unwrap(), ReadOutcome::EndOfData);
}

/// A block larger than the buffer is an error that names its size.
pub fn short_buffer(d: &mut dyn TapeDrive) {
    d.rewind().unwrap();
    d.write_block(&block(0, 2000)).unwrap();
    d.rewind().unwrap();
    let mut buf = vec![0u8; 100];
    match d.read_block(&mut buf) {
        Err(DeviceError::BlockTooLarge { actual }) => assert_eq!(actual, 2000),
        other => panic!("expected BlockTooLarge, got {other:?}"),
    }
}

/// Writes report early warning as a value before the end, then (with `end`)
/// refuse at the end. Without `end` the drive may take all 1,000 blocks.
pub fn early_warning_and_end_of_medium(d: &mut dyn TapeDrive, end: bool) {
    d.rewind().unwrap();
    let mut warned_at = None;
    let mut written = 0u64;
    for i in 0..1000u32 {
        match d.write_block(&block(i as u8, 4096)) {
            Ok(WriteOutcome::Written) => {
                assert!(warned_at.is_none(), "Written after early warning")
            }
            Ok(WriteOutcome::EarlyWarning) => {
                warned_at.get_or_insert(i);
            }
            Err(DeviceError::EndOfMedium) => break,
            Err(e) => panic!("unexpected error {e}"),
        }
        written += 1;
    }
    let warned_at = warned_at.expect("no early warning before end of medium") as u64;
    assert!(
        warned_at < written,
        "early warning must come before the end"
    );
    if end {
        assert!(written < 1000, "end of medium never came");
    }
    // Filemarks still fit after early warning, and the data written is all there.
    d.write_filemarks(1, false).unwrap();
    d.rewind().unwrap();
    let mut buf = vec![0u8; 8192];
    for i in 0..written {
        assert_eq!(
            d.read_block(&mut buf).unwrap(),
            ReadOutcome::Block(4096),
            "block {i}"
        );
    }
    assert_eq!(d.read_block(&mut buf).unwrap(), ReadOutcome::Filemark);
}
