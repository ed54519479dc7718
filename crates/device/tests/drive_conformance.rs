//! The drive conformance suite on the virtual drive, plain and under the LTO
//! model. (It runs here, not in the crate's unit tests, because the test kit is a
//! crate of its own built on this one: its suites take this crate's drives as the
//! test kit sees them.)

use tapeloom_device::lto::generation;
use tapeloom_device::{Clock, LtoDrive, VirtualDrive, VirtualTape};
use tapeloom_testkit::conformance;

#[test]
fn conformance() {
    let dir = tempfile::tempdir().unwrap();
    let n = std::cell::Cell::new(0);
    conformance::run_all(&mut |capacity, ew| {
        n.set(n.get() + 1);
        let d = dir.path().join(n.get().to_string());
        std::fs::create_dir(&d).unwrap();
        let tape = VirtualTape::open(&d, "T1", capacity, ew, false).unwrap();
        Box::new(VirtualDrive::new("t", Some(tape)))
    });
}

#[test]
fn conformance_on_the_virtual_drive() {
    let dir = tempfile::tempdir().unwrap();
    let n = std::cell::Cell::new(0);
    conformance::run_all(&mut |capacity, ew| {
        n.set(n.get() + 1);
        let d = dir.path().join(n.get().to_string());
        std::fs::create_dir(&d).unwrap();
        let tape = VirtualTape::open(&d, "T1", capacity, ew, false).unwrap();
        Box::new(LtoDrive::new(
            VirtualDrive::new("v", Some(tape)),
            generation("lto3").unwrap(),
            Clock::Virtual,
            true,
        ))
    });
}
