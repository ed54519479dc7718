//! `tapeloom stage ...`: the disk stages backups spool to before tape.

use super::Context;
use crate::error::OpsResult;
use crate::output::{self, emit, Output};
use crate::size;
use anyhow::Result;
use serde::Serialize;
use std::path::PathBuf;
use tapeloom_engine::escape_controls;
use tapeloom_ops::stages::{self, Added, List, Removed, Status};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// Add a folder (created when missing) as a disk stage of a given size.
    Add(AddArgs),
    /// Every stage: its size, what it holds and what is free.
    List,
    /// Remove a stage. Refused while it holds data not yet on tape; the files of
    /// chunks already on tape are deleted.
    Remove(RemoveArgs),
    /// Per stage, what each job's streams have staged and despooled.
    Status,
    /// Finish the backups whose process died with data on the stages: despool
    /// what they staged and end them (a backup through the stage does this first).
    /// An encrypted job needs its key file.
    Resume {
        #[command(flatten)]
        key: super::key::KeyArg,
    },
}

#[derive(clap::Args)]
pub struct AddArgs {
    /// The folder.
    dir: PathBuf,
    /// How much of it tapeloom may fill (for example 200G).
    #[arg(long, value_parser = size::within(1, size::MAX))]
    size: u64,
}

#[derive(clap::Args)]
pub struct RemoveArgs {
    /// The stage's folder.
    dir: PathBuf,
}

impl Args {
    /// Runs the subcommand and prints its output.
    pub fn run(self, ctx: &Context) -> Result<i32> {
        let mut home = ctx.open_home()?;
        let json = ctx.json;
        match self.cmd {
            Cmd::Add(a) => emit(&stages::add(&home, &a.dir, a.size).ops()?, json),
            Cmd::List => emit(&stages::list(&home).ops()?, json),
            Cmd::Remove(a) => emit(&stages::remove(&mut home, &a.dir).ops()?, json),
            Cmd::Status => emit(&stages::status(&home).ops()?, json),
            Cmd::Resume { key } => {
                key.give(&mut home)?;
                emit(&resume(&home)?, json)
            }
        }
    }
}

/// The jobs `stage resume` finished.
#[derive(Serialize)]
pub struct Resumed {
    jobs: Vec<tapeloom_proto::backup::BackedUp>,
}

impl Resumed {
    /// Whether no job was resumed.
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }
}

impl Output for Resumed {
    fn print(&self) {
        if self.jobs.is_empty() {
            outln!("no backup left data on the stages");
        }
        for j in &self.jobs {
            j.print();
        }
    }
}

/// Finishes every job that left data on the stages.
pub fn resume(home: &tapeloom_engine::Home) -> Result<Resumed> {
    let mut jobs = Vec::new();
    for id in tapeloom_engine::unfinished_staged_jobs(home)? {
        let progress = std::sync::Arc::new(tapeloom_engine::Progress::default());
        let r = tapeloom_engine::resume_job(home, id, progress)?;
        output::path_errors(&format!("tapeloom: warning: job {id}: "), &r.errors);
        jobs.push(tapeloom_ops::docs::backed_up(&r, "on".into()));
    }
    Ok(Resumed { jobs })
}

impl Output for Added {
    fn print(&self) {
        outln!(
            "added stage {} ({})",
            escape_controls(&self.path),
            output::bytes(self.size)
        );
    }
}

impl Output for Removed {
    fn print(&self) {
        outln!(
            "removed stage {} ({} chunk files already on tape deleted)",
            escape_controls(&self.path),
            self.chunk_files_deleted
        );
    }
}

impl Output for List {
    fn print(&self) {
        if self.stages.is_empty() {
            outln!("no stages (tapeloom stage add DIR --size SIZE adds one)");
            return;
        }
        outln!("{:>12} {:>12} {:>12}  path", "size", "used", "free");
        for s in &self.stages {
            outln!(
                "{:>12} {:>12} {:>12}  {}",
                output::bytes(s.size),
                output::bytes(s.used),
                output::bytes(s.free),
                escape_controls(&s.path)
            );
        }
    }
}

impl Output for Status {
    fn print(&self) {
        if self.stages.is_empty() {
            outln!("no stages (tapeloom stage add DIR --size SIZE adds one)");
        }
        for s in &self.stages {
            let st = &s.stage;
            outln!(
                "{}: {} of {} used, {} free",
                escape_controls(&st.path),
                output::bytes(st.used),
                output::bytes(st.size),
                output::bytes(st.free)
            );
            for u in &s.streams {
                let kept = if u.kept_chunks > 0 {
                    format!(
                        ", kept {} in {} chunks",
                        output::bytes(u.kept_bytes),
                        u.kept_chunks
                    )
                } else {
                    String::new()
                };
                outln!(
                    "  job {:>5} stream {:>3}: staged {:>10} in {:>4} chunks, despooled {:>10} in {:>4} chunks{kept}",
                    u.job_id,
                    u.stream,
                    output::bytes(u.staged_bytes),
                    u.staged_chunks,
                    output::bytes(u.despooled_bytes),
                    u.despooled_chunks
                );
            }
        }
    }
}
