//! `tapeloom catalog ...`: the catalog itself.

use super::Context;
use crate::output::{emit, Output};
use anyhow::Result;
use serde::Serialize;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// Read every labelled cartridge and add the jobs the catalog lacks, from the
    /// indexes on tape.
    Rebuild,
}

impl Args {
    /// Runs the subcommand and prints its output.
    pub fn run(self, ctx: &Context) -> Result<i32> {
        match self.cmd {
            Cmd::Rebuild => emit(&rebuild(ctx)?, ctx.json),
        }
    }
}

/// What `catalog rebuild` read and added.
#[derive(Serialize)]
pub struct Rebuilt {
    volumes_scanned: u64,
    volumes_added: u64,
    jobs_added: Vec<i64>,
    jobs_known: u64,
    files_added: u64,
    bad_blocks: u64,
}

fn rebuild(ctx: &Context) -> Result<Rebuilt> {
    let r = tapeloom_engine::rebuild(&ctx.open_home()?)?;
    Ok(Rebuilt {
        volumes_scanned: r.volumes_scanned,
        volumes_added: r.volumes_added,
        jobs_added: r.jobs_added,
        jobs_known: r.jobs_known,
        files_added: r.files_added,
        bad_blocks: r.bad_blocks,
    })
}

impl Output for Rebuilt {
    fn print(&self) {
        println!(
            "read {} cartridges: {} jobs added ({} entries), {} already known, {} volumes added, {} bad blocks",
            self.volumes_scanned,
            self.jobs_added.len(),
            self.files_added,
            self.jobs_known,
            self.volumes_added,
            self.bad_blocks
        );
    }
}
