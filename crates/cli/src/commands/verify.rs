//! `tapeloom verify JOB`: read every block of a job and check its checksums, on
//! this machine's library or on a server's (`--server`), which answers with the
//! same document.

use super::Context;
use crate::net::client::{Remote, Server};
use crate::net::error::ServerError;
use crate::output::Output;
use anyhow::Result;
use serde::{Deserialize, Serialize};

#[derive(clap::Args)]
pub struct Args {
    /// Job id.
    job: i64,
    /// Drive to read with.
    #[arg(long)]
    drive: Option<usize>,
    #[command(flatten)]
    key: super::key::KeyArg,
    #[command(flatten)]
    remote: Remote,
}

/// What a client asks of a server's verify (`POST /api/jobs/ID/verify`).
#[derive(Serialize, Deserialize, Default)]
pub struct Ask {
    /// The server's drive to read with.
    pub drive: Option<usize>,
}

/// What the reading found.
#[derive(Serialize, Deserialize)]
pub struct Verified {
    job_id: i64,
    ok: bool,
    blocks_checked: u64,
    bad_blocks: Vec<BadBlock>,
    files_checked: u64,
    files_affected: Vec<String>,
    files_missing: u64,
    bytes_read_from_tape: u64,
    seconds: f64,
}

/// A block whose checksum failed, by cartridge and logical block.
#[derive(Serialize, Deserialize)]
struct BadBlock {
    volume: String,
    block: u64,
}

pub fn run(a: Args, ctx: &Context) -> Result<Verified> {
    if let Some(server) = a.remote.resolve()? {
        if a.key.given() {
            return Err(ServerError::NotServed("verify --key").into());
        }
        return Ok(remote(&server, a.job, a.drive)?);
    }
    let mut home = ctx.open_home()?;
    a.key.give(&mut home)?;
    let r = tapeloom_engine::verify(&home, a.job, a.drive)?;
    Ok(Verified::new(a.job, r))
}

/// Verifies job `job` on `server`'s drives: the server answers at once or, for a
/// long reading, with the number of its verify, asked again until it is over.
fn remote(server: &Server, job: i64, drive: Option<usize>) -> Result<Verified, ServerError> {
    let (status, body) = server.post_raw(&format!("/api/jobs/{job}/verify"), &Ask { drive })?;
    let (status, body) = match status {
        202 => {
            let w: Pending =
                serde_json::from_slice(&body).map_err(|e| ServerError::BadAnswer(e.to_string()))?;
            super::remote_backup::until_over(
                server,
                &format!("/api/verifies/{}", w.verify),
                |s, p| s.get(p),
            )?
        }
        _ => (status, body),
    };
    if status != 200 {
        return Err(crate::net::client::refusal(status, &body));
    }
    serde_json::from_slice(&body).map_err(|e| ServerError::BadAnswer(e.to_string()))
}

/// A server's verify not over yet: ask `GET /api/verifies/{verify}`.
#[derive(Serialize, Deserialize)]
pub struct Pending {
    /// The verify's number on the server.
    pub verify: u64,
    /// The job it reads.
    pub job_id: i64,
}

impl Verified {
    /// The document of what the engine's verify of `job_id` found.
    pub fn new(job_id: i64, r: tapeloom_engine::VerifyReport) -> Self {
        Verified {
            job_id,
            ok: r.ok,
            blocks_checked: r.blocks_checked,
            bad_blocks: r
                .bad_blocks
                .into_iter()
                .map(|(volume, block)| BadBlock { volume, block })
                .collect(),
            files_checked: r.files_checked,
            files_affected: r.files_affected,
            files_missing: r.files_missing,
            bytes_read_from_tape: r.bytes_read_from_tape,
            seconds: r.seconds,
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
            outln!("bad block {} on {}", b.block, b.volume);
        }
        for p in &self.files_affected {
            outln!("damaged: {p}");
        }
    }

    fn failure(&self) -> Option<String> {
        (!self.ok).then(|| format!("job {} failed verification", self.job_id))
    }
}
