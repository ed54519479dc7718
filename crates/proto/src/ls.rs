//! A job's entries under a path, or a backup set's tree at one of its jobs, as
//! `tapeloom ls` prints them and `GET /api/jobs/ID/files` and `GET /api/sets/NAME/files`
//! answer (`tapeloom_ops::ls` makes them).

use serde::{Deserialize, Serialize};

/// A job's entries under a path. For people each entry is printed as it is read
/// (a job can hold millions), so `entries` is filled only for `--json` (and by
/// the server, which sends them all).
#[derive(Serialize, Deserialize)]
pub struct Listing {
    pub job_id: i64,
    /// The backup set listed as it was at `job_id`, for `--set`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub set: Option<String>,
    pub entries: Vec<Entry>,
}

/// One entry and where its data starts on tape.
#[derive(Serialize, Deserialize)]
pub struct Entry {
    pub path: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub size: u64,
    pub mode: u32,
    pub mtime: String,
    pub mtime_ns: i64,
    pub volume: String,
    pub block: u64,
    pub offset: u32,
    /// Where its data starts in each whole further copy of the job.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub copies: Vec<CopyPlace>,
}

/// Where an entry's data starts in a further copy of its job.
#[derive(Serialize, Deserialize)]
pub struct CopyPlace {
    pub copy_no: u32,
    pub volume: String,
    pub block: u64,
}
