//! `tapeloom jobs`: the jobs in the catalog, of this machine's home or through a
//! server (`--server`), which answers with the same document.

use super::Context;
use crate::net::client::Remote;
use crate::output::{self, Output};
use anyhow::Result;
use serde::{Deserialize, Serialize};
use tapeloom_catalog::Catalog;
use tapeloom_engine::escape_controls;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    remote: Remote,
}

/// Every job, oldest first.
#[derive(Serialize, Deserialize)]
pub struct Jobs {
    jobs: Vec<Job>,
}

/// One job.
#[derive(Serialize, Deserialize)]
struct Job {
    job_id: i64,
    name: String,
    /// Its backup set, its level there, and the job its changes are relative to.
    set: String,
    level: String,
    base_job: Option<i64>,
    status: String,
    started: String,
    ended: Option<String>,
    files: u64,
    bytes: u64,
    seconds: f64,
    block_size: u32,
    volumes: Vec<String>,
    /// The short fingerprint of the key an encrypted job needs.
    key: Option<String>,
    /// The client (a server token's name) that ran it; none for a job run on the
    /// server's own machine.
    client: Option<String>,
}

pub fn run(a: Args, ctx: &Context) -> Result<Jobs> {
    if let Some(server) = a.remote.resolve()? {
        return Ok(server.get_json("/api/jobs")?);
    }
    let home = ctx.open_home()?;
    Ok(list(&home.catalog, |_| true)?)
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
            started: output::time(j.started_ns),
            ended: j.ended_ns.map(output::time),
            files: j.files,
            bytes: j.bytes,
            seconds: j.seconds,
            block_size: j.block_size,
            volumes,
            key: j.key.map(|(f, _)| f.chars().take(16).collect()),
            client: j.client,
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

impl Output for Jobs {
    fn print(&self) {
        // Names, sets, barcodes and clients come from tapes and clients: the
        // line is escaped whole.
        for j in &self.jobs {
            let line = format!(
                "{:>5}  {:<8} {}  {:>9} files {:>10}  {}  {}{}{}{}",
                j.job_id,
                j.status,
                j.started,
                j.files,
                output::bytes(j.bytes),
                j.volumes.join(","),
                j.name,
                match (j.level.as_str(), j.set == j.name) {
                    ("full", true) => String::new(),
                    (level, true) => format!("  ({level})"),
                    (level, false) => format!("  (set {}, {level})", j.set),
                },
                j.key
                    .as_ref()
                    .map_or(String::new(), |k| format!("  (encrypted, key {k})")),
                j.client
                    .as_ref()
                    .map_or(String::new(), |c| format!("  (client {c})"))
            );
            outln!("{}", escape_controls(&line));
        }
    }
}
