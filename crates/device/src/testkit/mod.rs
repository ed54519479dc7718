//! What the tests of drives, libraries and the tools built on them share, behind
//! the cargo feature `testkit` (a normal build does not compile it):
//!
//! - [`conformance`]: the checks every [`TapeDrive`](crate::TapeDrive) and every
//!   [`TapeLibrary`](crate::TapeLibrary) must pass.
//! - [`tgt`]: a tgt virtual tape library on loopback, reached over iSCSI, so that
//!   the SCSI drivers are tested against real SCSI devices without hardware.
//! - [`postgres`]: a PostgreSQL server in a temporary folder on loopback, for
//!   the catalog's tests on PostgreSQL.
//! - [`faults`]: a library and drives that fail as a plan says, for tests and for
//!   experiments (`TAPELOOM_FAULTS`, `docs/FAULTS.md`).
//! - [`need`]: what a test needs from outside the workspace (a program, a
//!   library, a permission), passed over with a line under a plain `cargo test`
//!   and a failure under `TAPELOOM_TEST_REQUIRE_ALL=1`.
//!
//! Enable it for tests only: `tapeloom-device = { workspace = true, features =
//! ["testkit"] }` under `[dev-dependencies]`. The feature `faults` (which
//! `testkit` includes) builds only [`faults`], for the engine's experiment hook.

#[cfg(any(test, feature = "testkit"))]
pub mod conformance;
pub mod faults;
#[cfg(any(test, feature = "testkit"))]
pub mod need;
#[cfg(any(test, feature = "testkit"))]
pub mod postgres;
#[cfg(any(test, feature = "testkit"))]
pub mod tgt;
