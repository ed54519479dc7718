//! `tapeloom verify JOB`: read every block of a job and check its checksums.

use super::Context;
use crate::output::Output;
use anyhow::Result;
use serde::Serialize;

#[derive(clap::Args)]
pub struct Args {
    /// Job id.
    job: i64,
    /// Drive to read with.
    #[arg(long)]
    drive: Option<usize>,
    #[command(flatten)]
    key: super::key::KeyArg,
}

/// What the reading found.
#[derive(Serialize)]
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
#[derive(Serialize)]
struct BadBlock {
    volume: String,
    block: u64,
}

pub fn run(a: Args, ctx: &Context) -> Result<Verified> {
    let mut home = ctx.open_home()?;
    a.key.give(&mut home)?;
    let r = tapeloom_engine::verify(&home, a.job, a.drive)?;
    Ok(Verified {
        job_id: a.job,
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
    })
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
