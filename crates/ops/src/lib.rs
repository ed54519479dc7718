//! The operations layer: each operation a user can start, with its rules, written
//! once for every front end.
//!
//! A pool's rules are the first of them. A job written into a pool is encrypted
//! with the pool's key unless it names its own, and once it ends it is copied to
//! the pool's copy pool; its retention comes with the pool. The command line,
//! the server (for its clients and its schedules) and the HSM's `migrate` all
//! start a backup here ([`backup::run`], or [`backup::prepare`] and
//! [`backup::copy_due`] around the engine's backup where a front end runs the
//! job on a drive of its own choosing), so that no front end can forget a rule.
//!
//! Front ends differ in where a key comes from: the command line unlocks the
//! pool's key file with a passphrase, a server holds keys unlocked at its start.
//! They say so through [`KeySource`]; the rule that the key must be the pool's
//! (its fingerprint) is kept here.
//!
//! The documents the commands print with `--json` and the server answers with are
//! made here too, from the catalog ([`jobs`], [`ls`], [`report`], [`library`])
//! or from the engine's reports ([`docs`]); their shapes are the protocol's
//! (`tapeloom_proto`).
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod access;
pub mod backup;
pub mod catalog;
pub mod clients;
pub mod copies;
pub mod docs;
mod error;
pub mod exercise;
pub mod history;
pub mod hsm;
pub mod jobs;
mod keys;
pub mod library;
pub mod ls;
pub mod metrics;
pub mod moves;
pub mod pools;
pub mod read_back;
pub mod report;
pub mod s3;
pub mod select;
pub mod site;
pub mod spool;
pub mod stages;
pub mod status_page;
pub mod tokens;

pub use access::{Catalogued, Conn};
pub use error::{OpsError, Result};
pub use keys::{pool_key, KeySource, NoKeys};
