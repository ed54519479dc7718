//! What the tests of drives, libraries, the catalog and the command line share.
//! Only tests use it: crates take it as a dev-dependency, and no build of the
//! binary contains it.
//!
//! - [`conformance`]: the checks every [`TapeDrive`](tapeloom_device::TapeDrive)
//!   and every [`TapeLibrary`](tapeloom_device::TapeLibrary) must pass.
//! - [`tgt`]: a tgt virtual tape library on loopback, reached over iSCSI, so that
//!   the SCSI drivers are tested against real SCSI devices without hardware.
//! - [`postgres`]: a PostgreSQL server in a temporary folder on loopback, for
//!   the catalog's tests on PostgreSQL.
//! - [`need`]: what a test needs from outside the workspace (a program, a
//!   library, a permission), passed over with a line under a plain `cargo test`
//!   and a failure under `TAPELOOM_TEST_REQUIRE_ALL=1`.
//!
//! Fault injection (a library and drives that fail as a plan says) is not here
//! but in the device crate (`tapeloom_device::faults`): a binary built with the
//! engine's test hooks reads it at run time (`TAPELOOM_FAULTS`).
//!
//! Use it for tests only: `tapeloom-testkit.workspace = true` under
//! `[dev-dependencies]`.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod conformance;
pub mod need;
pub mod postgres;
pub mod tgt;
