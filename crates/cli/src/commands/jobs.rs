//! `tapeloom jobs`: the jobs in the catalog.

use super::Context;
use crate::output::{self, Output};
use anyhow::Result;
use serde::Serialize;

/// Every job, oldest first.
#[derive(Serialize)]
pub struct Jobs {
    jobs: Vec<Job>,
}

/// One job.
#[derive(Serialize)]
struct Job {
    job_id: i64,
    name: String,
    /// Its backup set, its level there, and the job its changes are relative to.
    set: String,
    level: &'static str,
    base_job: Option<i64>,
    status: &'static str,
    started: String,
    ended: Option<String>,
    files: u64,
    bytes: u64,
    seconds: f64,
    block_size: u32,
    volumes: Vec<String>,
    /// The short fingerprint of the key an encrypted job needs.
    key: Option<String>,
}

pub fn run(ctx: &Context) -> Result<Jobs> {
    let home = ctx.open_home()?;
    let mut jobs = Vec::new();
    for j in home.catalog.jobs()? {
        let volumes = home
            .catalog
            .job_volumes(j.id)?
            .into_iter()
            .map(|v| v.volume.barcode)
            .collect();
        jobs.push(Job {
            job_id: j.id,
            name: j.name,
            set: j.set,
            level: j.level.name(),
            base_job: j.base,
            status: j.status.as_str(),
            started: output::time(j.started_ns),
            ended: j.ended_ns.map(output::time),
            files: j.files,
            bytes: j.bytes,
            seconds: j.seconds,
            block_size: j.block_size,
            volumes,
            key: j.key.map(|(f, _)| f.chars().take(16).collect()),
        });
    }
    Ok(Jobs { jobs })
}

impl Output for Jobs {
    fn print(&self) {
        for j in &self.jobs {
            outln!(
                "{:>5}  {:<8} {}  {:>9} files {:>10}  {}  {}{}{}",
                j.job_id,
                j.status,
                j.started,
                j.files,
                output::bytes(j.bytes),
                j.volumes.join(","),
                j.name,
                match (j.level, j.set == j.name) {
                    ("full", true) => String::new(),
                    (level, true) => format!("  ({level})"),
                    (level, false) => format!("  (set {}, {level})", j.set),
                },
                j.key
                    .as_ref()
                    .map_or(String::new(), |k| format!("  (encrypted, key {k})"))
            );
        }
    }
}
