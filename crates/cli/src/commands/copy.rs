//! `tapeloom copy`: writes a further copy of jobs onto another pool's
//! cartridges, block for block (docs/COPIES.md). Jobs are named by id, by backup
//! set (`--set`), or by the pool they are in (`--pool`, with `--uncopied` for
//! those with no copy yet).

use super::Context;
use crate::error::OpsResult;
use crate::output::{self, Output};
use anyhow::Result;
use serde::Serialize;
use tapeloom_engine::escape_controls;
use tapeloom_ops::select::Selection;

#[derive(clap::Args)]
pub struct Args {
    /// Job ids.
    #[arg(value_parser = super::parse_job_id, required_unless_present_any = ["set", "pool"])]
    jobs: Vec<i64>,
    /// Copy every job of this backup set that ended.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["jobs", "pool"])]
    set: Option<String>,
    /// Copy every job of this pool that ended.
    #[arg(long, value_name = "NAME", conflicts_with = "jobs")]
    pool: Option<String>,
    /// Only jobs that have no copy yet.
    #[arg(long)]
    uncopied: bool,
    /// The pool whose cartridges take the copies.
    #[arg(long, value_name = "POOL")]
    to_pool: String,
    /// Drive that reads the jobs' cartridges.
    #[arg(long, value_parser = super::usize_in(..=super::MAX_INDEX))]
    read_drive: Option<usize>,
    /// Drive that writes the copies (with one drive, the same one: each segment
    /// goes through a spool file on disk).
    #[arg(long, value_parser = super::usize_in(..=super::MAX_INDEX))]
    write_drive: Option<usize>,
}

/// The copies written.
#[derive(Serialize)]
pub struct Copies {
    copies: Vec<tapeloom_proto::copy::Copied>,
    /// Jobs left alone by `--uncopied`: they have a copy.
    skipped: Vec<i64>,
}

/// Copies the jobs named.
pub fn run(a: Args, ctx: &Context) -> Result<Copies> {
    let home = ctx.open_home()?;
    let opts = tapeloom_engine::CopyOptions {
        to_pool: a.to_pool.clone(),
        read_drive: a.read_drive,
        write_drive: a.write_drive,
        queue_bytes: 0,
        moving: None,
    };
    let sel = Selection {
        jobs: a.jobs,
        set: a.set,
        pool: a.pool,
        volume: None,
    };
    let (copies, skipped) =
        tapeloom_ops::copies::copy_jobs(&home, &sel, a.uncopied, &opts).ops()?;
    let copies = copies.iter().map(tapeloom_ops::docs::copied).collect();
    Ok(Copies { copies, skipped })
}

impl Output for Copies {
    fn print(&self) {
        for c in &self.copies {
            outln!(
                "job {}: copy {} in pool {}, {} blocks ({}) on {}, in {:.1} s",
                c.job_id,
                c.copy_no,
                escape_controls(&c.pool),
                c.blocks,
                output::bytes(c.bytes),
                escape_controls(&c.cartridges.join(", ")),
                c.seconds
            );
        }
        if !self.skipped.is_empty() {
            let ids: Vec<String> = self.skipped.iter().map(|j| j.to_string()).collect();
            outln!("jobs with a copy already, left alone: {}", ids.join(", "));
        }
    }
}
