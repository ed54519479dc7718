//! The jobs of a catalog, as `tapeloom jobs` prints them and `GET /api/jobs`
//! answers.

use crate::fmt::time;
use serde::{Deserialize, Serialize};
use tapeloom_catalog::Catalog;

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
}

/// A job's last read-back.
#[derive(Serialize, Deserialize)]
pub struct Verified {
    pub at: String,
    pub ok: bool,
    pub bad_blocks: u64,
    pub how: String,
}

/// The jobs `visible` lets through.
pub fn list(
    cat: &Catalog,
    visible: impl Fn(&tapeloom_catalog::Job) -> bool,
) -> tapeloom_catalog::Result<Jobs> {
    let mut jobs = Vec::new();
    for j in cat.jobs()?.into_iter().filter(|j| visible(j)) {
        let volumes = cat
            .job_volumes(j.id)?
            .into_iter()
            .map(|v| v.volume.barcode)
            .collect();
        jobs.push(Job {
            job_id: j.id,
            name: j.name,
            set: j.set,
            level: j.level.name().to_string(),
            base_job: j.base,
            status: j.status.as_str().to_string(),
            started: time(j.started_ns),
            ended: j.ended_ns.map(time),
            files: j.files,
            bytes: j.bytes,
            seconds: j.seconds,
            block_size: j.block_size,
            volumes,
            key: j.key.map(|(f, _)| f.chars().take(16).collect()),
            client: j.client,
            last_verified: cat.last_verify(j.id)?.map(|v| Verified {
                at: time(v.at_ns),
                ok: v.ok,
                bad_blocks: v.bad_blocks,
                how: v.how,
            }),
        });
    }
    Ok(Jobs { jobs })
}

impl Jobs {
    /// The last `n` jobs, oldest first.
    pub fn last(mut self, n: usize) -> Jobs {
        self.jobs.drain(..self.jobs.len().saturating_sub(n));
        self
    }
}
