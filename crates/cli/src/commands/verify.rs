//! `tapeloom verify JOB`: read every block of a job and check its checksums, on
//! this machine's library or on a server's (`--server`), which answers with the
//! same document. With `--server` and `--key`, the server reads the whole job as
//! for a restore (`GET /api/jobs/ID/restore`, an encrypted job's blocks sealed)
//! and this machine opens and checks each block with the key, which never leaves
//! it ([`tapeloom_engine::BlockVerify`]); nothing is written.

use super::Context;
use crate::net::Remote;
use crate::output::Output;
use anyhow::Result;
use tapeloom_engine::escape_controls;
pub use tapeloom_proto::verify::Verified;
use tapeloom_proto::ServerError;

#[derive(clap::Args)]
pub struct Args {
    /// Job id.
    #[arg(value_parser = super::parse_job_id)]
    job: i64,
    /// Drive to read with.
    #[arg(long, value_parser = super::usize_in(..=super::MAX_INDEX))]
    drive: Option<usize>,
    #[command(flatten)]
    key: super::key::KeyArg,
    #[command(flatten)]
    remote: Remote,
}

pub fn run(a: Args, ctx: &Context) -> Result<Verified> {
    if let Some(server) = a.remote.resolve()? {
        if a.key.given() {
            // The server's restore chooses its drives: none can be named.
            if a.drive.is_some() {
                return Err(ServerError::NotServed("verify --key --drive").into());
            }
            // The key file is read and unlocked before the server is asked.
            return tapeloom_client::verify::keyed(&server, a.job, a.key.keys()?);
        }
        return tapeloom_client::verify::remote(&server, a.job, a.drive);
    }
    let mut home = ctx.open_home()?;
    a.key.give(&mut home)?;
    let r = tapeloom_engine::verify(&home, a.job, a.drive)?;
    Ok(Verified::new(a.job, r))
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
