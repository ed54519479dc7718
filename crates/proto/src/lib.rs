//! What tapeloom's server and its clients share, so that both ends read one
//! definition of everything that crosses the network:
//!
//! - `frame`: the frames of a stream's body (blocks, notes, keepalives) and the
//!   escapes of a query.
//! - `backup`, `verify`, `restore`: each operation's documents and notes on the
//!   wire. `base`: a base's tree, a row a line.
//! - `jobs`, `ls`, `report`, `health`, `copy`, `fmt`: the documents the commands
//!   print with `--json` and the server answers with (`tapeloom_ops` makes them
//!   from a catalog and the engine's reports).
//! - `site`: what a server of a site tells its clients of the others.
//! - `body`: HTTP bodies between hyper's tasks and the threads that make or
//!   read them.
//! - `tls`: the server's certificate and its fingerprint, and the client's
//!   pinning verifier. `error`: [`ServerError`], what either end refuses.
//!
//! Every document is a type of this crate, whatever the engine's reports hold,
//! and this crate depends on no tapeloom crate but `tapeloom-format`. Nothing here
//! opens a socket: the server (`tapeloom-server`)
//! and the client (`tapeloom-client`) carry these over their transport.

#![forbid(unsafe_code)]

pub mod backup;
pub mod base;
pub mod body;
pub mod copy;
pub mod duration;
pub mod error;
pub mod feed;
pub mod fmt;
pub mod frame;
pub mod health;
pub mod jobs;
pub mod ls;
pub mod report;
pub mod restore;
pub mod site;
pub mod tls;
pub mod verify;

pub use error::ServerError;
