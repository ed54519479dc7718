//! What the tests of drives, libraries and the tools built on them share, behind
//! the cargo feature `testkit` (a normal build does not compile it):
//!
//! - [`conformance`]: the checks every [`TapeDrive`](crate::TapeDrive) and every
//!   [`TapeLibrary`](crate::TapeLibrary) must pass.
//! - [`tgt`]: a tgt virtual tape library on loopback, reached over iSCSI, so that
//!   the SCSI drivers are tested against real SCSI devices without hardware.
//!
//! Enable it for tests only: `tapeloom-device = { workspace = true, features =
//! ["testkit"] }` under `[dev-dependencies]`.

pub mod conformance;
pub mod tgt;
