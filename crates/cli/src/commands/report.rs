//! `tapeloom report JOB --out FILE`: a job's per-second samples drawn as plots
//! (`tapeloom_ops::report` makes them).

use super::Context;
use crate::output::Output;
use anyhow::Result;
use std::path::PathBuf;
use tapeloom_proto::report::Drawn;

#[derive(clap::Args)]
pub struct Args {
    /// Job id.
    #[arg(value_parser = super::parse_job_id)]
    job: i64,
    /// Output file: .svg, .png or .html.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Which run of the job: its backup, its last restore, or the last recall
    /// of hierarchical storage that read it.
    #[arg(long, default_value = "backup", value_parser = ["backup", "restore", "recall"])]
    op: String,
}

pub fn run(a: Args, ctx: &Context) -> Result<Drawn> {
    tapeloom_ops::report::draw(&ctx.open_home()?, a.job, &a.op, a.out)
}

impl Output for Drawn {
    fn print(&self) {
        outln!("{}", tapeloom_engine::escape_controls(&self.out));
    }
}
