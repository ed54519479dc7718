//! The jobs of a catalog, as `tapeloom jobs` prints them and `GET /api/jobs`
//! answers (`tapeloom_ops::jobs` makes them).

use serde::{Deserialize, Serialize};

/// Every job, oldest first.
#[derive(Serialize, Deserialize)]
pub struct Jobs {
    pub jobs: Vec<Job>,
}

/// One job.
#[derive(Serialize, Deserialize)]
pub struct Job {
    pub job_id: i64,
    pub name: String,
    /// Its backup set, its level there, and the job its changes are relative to.
    pub set: String,
    pub level: String,
    pub base_job: Option<i64>,
    pub status: String,
    pub started: String,
    pub ended: Option<String>,
    pub files: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub block_size: u32,
    pub volumes: Vec<String>,
    /// The short fingerprint of the key an encrypted job needs.
    pub key: Option<String>,
    /// The client (a server token's name) that ran it; none for a job run on the
    /// server's own machine.
    pub client: Option<String>,
    /// When it was last read back and checked, what that found, and how it was
    /// run; none when it never was.
    #[serde(default)]
    pub last_verified: Option<Verified>,
    /// Its further copies (`tapeloom copy`): the job's own cartridges are copy
    /// 1 and are `volumes`.
    #[serde(default)]
    pub copies: Vec<Copy>,
    /// The copy that stands in for the job's own cartridges since it was moved
    /// (`migrate`, `repack`); `volumes` are then that copy's cartridges.
    #[serde(default)]
    pub moved_to: Option<u32>,
    /// Why a failed job failed, what a queued one waits for, or why a salvaged
    /// one was; none for any other.
    #[serde(default)]
    pub why: Option<String>,
}

/// A further copy of a job.
#[derive(Serialize, Deserialize)]
pub struct Copy {
    pub copy_no: u32,
    pub pool: String,
    /// writing, ok or retired.
    pub state: String,
    pub created: String,
    /// Its cartridges, in the order its segments use them.
    pub volumes: Vec<String>,
}

/// A job's last read-back.
#[derive(Serialize, Deserialize)]
pub struct Verified {
    pub at: String,
    pub ok: bool,
    pub bad_blocks: u64,
    pub how: String,
}

impl Jobs {
    /// The last `n` jobs, oldest first.
    pub fn last(mut self, n: usize) -> Jobs {
        self.jobs.drain(..self.jobs.len().saturating_sub(n));
        self
    }
}
