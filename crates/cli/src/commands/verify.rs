//! `tapeloom verify JOB`: read every block of a job and check its checksums, on
//! this machine's library or on a server's (`--server`), which answers with the
//! same document. With `--server` and `--key`, the server reads the whole job as
//! for a restore (`GET /api/jobs/ID/restore`, an encrypted job's blocks sealed)
//! and this machine opens and checks each block with the key, which never leaves
//! it ([`tapeloom_engine::BlockVerify`]); nothing is written.
//!
//! `verify --pool NAME [--older-than D]` reads back every finished job of a pool
//! not read back within D (all of them without it), one after another: each
//! result is kept with its job (`jobs` shows it), and a cartridge with a bad block
//! is marked suspect.

use super::Context;
use crate::error::OpsResult;
use crate::net::Remote;
use crate::output::Output;
use anyhow::Result;
use tapeloom_engine::escape_controls;
pub use tapeloom_proto::verify::Verified;
use tapeloom_proto::ServerError;

#[derive(clap::Args)]
pub struct Args {
    /// Job id.
    #[arg(value_parser = super::parse_job_id, required_unless_present = "pool", conflicts_with = "pool")]
    job: Option<i64>,
    /// Read back every finished job of this pool instead.
    #[arg(long, value_name = "NAME")]
    pool: Option<String>,
    /// With --pool: only jobs not read back within this long (for example 90d).
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse, requires = "pool")]
    older_than: Option<std::time::Duration>,
    /// Drive to read with.
    #[arg(long, value_parser = super::usize_in(..=super::MAX_INDEX))]
    drive: Option<usize>,
    /// Read back this copy of the job (1: its own cartridges, the default; `jobs`
    /// lists its copies). A bad block marks that copy's cartridge suspect.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=65535), conflicts_with = "pool")]
    copy: Option<u32>,
    #[command(flatten)]
    key: super::key::KeyArg,
    #[command(flatten)]
    remote: Remote,
}

/// What a verify found: of one job, or of a pool's jobs.
#[derive(serde::Serialize)]
#[serde(untagged)]
pub enum Outcome {
    One(Verified),
    Pool(PoolVerified),
}

/// A pool's jobs read back.
#[derive(serde::Serialize)]
pub struct PoolVerified {
    pool: String,
    ok: bool,
    jobs: Vec<Verified>,
    /// Jobs read back within `--older-than`, left alone.
    skipped: Vec<i64>,
}

pub fn run(a: Args, ctx: &Context) -> Result<Outcome> {
    match (a.job, a.pool.clone()) {
        (Some(job), _) => Ok(Outcome::One(one(job, a, ctx)?)),
        (None, Some(pool)) => Ok(Outcome::Pool(pool_jobs(&pool, a, ctx)?)),
        (None, None) => Err(clap::Error::raw(
            clap::error::ErrorKind::MissingRequiredArgument,
            "a job id or --pool",
        )
        .into()),
    }
}

/// Reads back the pool's finished jobs not read back within `--older-than`.
fn pool_jobs(pool: &str, a: Args, ctx: &Context) -> Result<PoolVerified> {
    if a.remote.resolve()?.is_some() {
        return Err(ServerError::NotServed("verify --pool").into());
    }
    let mut home = ctx.open_home()?;
    a.key.give(&mut home)?;
    let r =
        tapeloom_ops::read_back::pool_jobs(&home, pool, a.older_than, (a.drive, "verify --pool"))
            .ops()?;
    let skipped = r.skipped;
    let jobs: Vec<Verified> = (r.read.into_iter())
        .map(|(id, r)| tapeloom_ops::docs::verified(id, r))
        .collect();
    Ok(PoolVerified {
        pool: pool.to_string(),
        ok: jobs.iter().all(|v| v.ok),
        jobs,
        skipped,
    })
}

/// Verifies one job.
fn one(job: i64, a: Args, ctx: &Context) -> Result<Verified> {
    if let Some(server) = a.remote.resolve()? {
        if a.copy.is_some() {
            return Err(ServerError::NotServed("verify --copy").into());
        }
        if a.key.given() {
            // The server's restore chooses its drives: none can be named.
            if a.drive.is_some() {
                return Err(ServerError::NotServed("verify --key --drive").into());
            }
            // The key file is read and unlocked before the server is asked.
            return tapeloom_client::verify::keyed(&server, job, a.key.keys()?);
        }
        return tapeloom_client::verify::remote(&server, job, a.drive);
    }
    let mut home = ctx.open_home_to_read()?;
    a.key.give(&mut home)?;
    let r = match a.copy {
        Some(n) => {
            let how = format!("verify --copy {n}");
            tapeloom_engine::verify_copy_as(&home, (job, Some(n)), a.drive, &how)?
        }
        None => tapeloom_engine::verify(&home, job, a.drive)?,
    };
    Ok(tapeloom_ops::docs::verified(job, r))
}

impl Output for Outcome {
    fn print(&self) {
        match self {
            Outcome::One(v) => v.print(),
            Outcome::Pool(p) => {
                for v in &p.jobs {
                    v.print();
                }
                if !p.skipped.is_empty() {
                    outln!(
                        "{} jobs of pool {} read back lately, left alone",
                        p.skipped.len(),
                        escape_controls(&p.pool)
                    );
                }
            }
        }
    }

    fn failure(&self) -> Option<String> {
        match self {
            Outcome::One(v) => v.failure(),
            Outcome::Pool(p) => {
                let bad: Vec<String> = (p.jobs.iter().filter(|v| !v.ok))
                    .map(|v| v.job_id.to_string())
                    .collect();
                (!bad.is_empty()).then(|| {
                    format!(
                        "pool {}: jobs {} failed verification",
                        p.pool,
                        bad.join(", ")
                    )
                })
            }
        }
    }
}

impl Output for Verified {
    fn print(&self) {
        outln!(
            "job {}: {} — {} blocks checked, {} bad, {} files checked, {} damaged",
            self.job_id,
            if self.ok { "ok" } else { "DAMAGED" },
            self.blocks_checked,
            self.bad_blocks.len(),
            self.files_checked,
            self.files_affected.len()
        );
        for b in &self.bad_blocks {
            outln!("bad block {} on {}", b.block, escape_controls(&b.volume));
        }
        for p in &self.files_affected {
            outln!("damaged: {}", escape_controls(p));
        }
    }

    fn failure(&self) -> Option<String> {
        (!self.ok).then(|| format!("job {} failed verification", self.job_id))
    }
}
