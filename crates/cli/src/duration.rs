//! Durations on the command line: the parser shared with the server's
//! configuration (`tapeloom_proto::duration`).

pub use tapeloom_proto::duration::*;
