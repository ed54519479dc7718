//! What the server and its clients share: TLS (the server's certificate, its
//! fingerprint, the client's pinning verifier), HTTP/1.1 requests and answers
//! under limits, and the client of the commands that take `--server`. Nothing here
//! knows the commands; `commands::server` serves them.
//!
//! - `tls.rs`: the certificate (made self-signed on first start), fingerprints,
//!   `Pinned`.
//! - `http.rs`: `Limits`, reading a request under them, writing an answer.
//! - `client.rs`: `--server`, `--token`, `--fingerprint` and the requests.
//! - `error.rs`: `ServerError`.
//! - `restore.rs`: a restore's answer on the wire: `Notice`, `Trailer`.
//! - `base.rs`: a base's tree on the wire, a row a line.

pub mod client;
pub mod http;
pub use tapeloom_proto::{base, error, restore, tls};
