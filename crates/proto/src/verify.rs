//! A verify on the wire: what a client asks of a server's verify ([`Ask`]), the
//! answer while it reads ([`Pending`]), and what it found ([`Verified`]), which
//! `tapeloom verify --json` prints for a local verify too.

use serde::{Deserialize, Serialize};

/// What a client asks of a server's verify (`POST /api/jobs/ID/verify`).
#[derive(Serialize, Deserialize, Default)]
pub struct Ask {
    /// The server's drive to read with.
    pub drive: Option<usize>,
}

/// What the reading found.
#[derive(Serialize, Deserialize)]
pub struct Verified {
    pub job_id: i64,
    pub ok: bool,
    pub blocks_checked: u64,
    pub bad_blocks: Vec<BadBlock>,
    pub files_checked: u64,
    pub files_affected: Vec<String>,
    pub files_missing: u64,
    pub bytes_read_from_tape: u64,
    pub seconds: f64,
}

/// A block whose checksum failed, by cartridge and logical block.
#[derive(Serialize, Deserialize)]
pub struct BadBlock {
    pub volume: String,
    pub block: u64,
}

/// A server's verify not over yet: ask `GET /api/verifies/{verify}`.
#[derive(Serialize, Deserialize)]
pub struct Pending {
    /// The verify's number on the server.
    pub verify: u64,
    /// The job it reads.
    pub job_id: i64,
}
