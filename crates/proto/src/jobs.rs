//! The jobs of a catalog, as `tapeloom jobs` prints them and `GET /api/jobs`
//! answers.

use crate::fmt::time;
use serde::{Deserialize, Serialize};
use tapeloom_catalog::{Catalog, JobState};

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

/// The jobs `visible` lets through.
pub fn list(
    cat: &Catalog,
    visible: impl Fn(&tapeloom_catalog::Job) -> bool,
) -> tapeloom_catalog::Result<Jobs> {
    let mut jobs = Vec::new();
    for j in cat.jobs()?.into_iter().filter(|j| visible(j)) {
        let moved_to = cat.moved_to(j.id)?;
        let mut copies = copies(cat, j.id)?;
        let volumes = match copies.iter().position(|c| Some(c.copy_no) == moved_to) {
            Some(i) => copies.remove(i).volumes,
            None => (cat.job_volumes(j.id)?.into_iter())
                .map(|v| v.volume.barcode)
                .collect(),
        };
        let why = match j.status {
            JobState::Failed | JobState::Queued | JobState::Salvaged => {
                Some(cat.job_reasons(j.id)?.join("; "))
            }
            _ => None,
        }
        .filter(|w| !w.is_empty());
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
            copies,
            moved_to,
            why,
        });
    }
    Ok(Jobs { jobs })
}

/// The further copies of job `id`.
fn copies(cat: &Catalog, id: i64) -> tapeloom_catalog::Result<Vec<Copy>> {
    let mut out = Vec::new();
    let copies = cat.copies(id)?;
    if copies.is_empty() {
        return Ok(out);
    }
    let barcodes: std::collections::HashMap<i64, String> = (cat.volumes()?.into_iter())
        .map(|v| (v.id, v.barcode))
        .collect();
    for c in copies {
        let mut volumes: Vec<String> = Vec::new();
        for s in cat.copy_segments(id, c.copy_no)? {
            let b = barcodes.get(&s.volume_id).cloned().unwrap_or_default();
            if !volumes.contains(&b) {
                volumes.push(b);
            }
        }
        out.push(Copy {
            copy_no: c.copy_no,
            pool: c.pool,
            state: c.state.as_str().to_string(),
            created: time(c.created_ns),
            volumes,
        });
    }
    Ok(out)
}

impl Jobs {
    /// The last `n` jobs, oldest first.
    pub fn last(mut self, n: usize) -> Jobs {
        self.jobs.drain(..self.jobs.len().saturating_sub(n));
        self
    }
}
