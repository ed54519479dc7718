//! `tapeloom stage ...`: the disk stages backups spool to before tape.

use super::Context;
use crate::output::{self, emit, Output};
use crate::size;
use anyhow::Result;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use tapeloom_catalog::{Catalog, ChunkFilter, ChunkState, Stage, StageUse};
use tapeloom_engine::{escape_controls, stage as engine_stage};

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
            Cmd::Add(a) => {
                let s = engine_stage::add_stage(&home.catalog, &a.dir, a.size)?;
                emit(&Added::from(&s), json)
            }
            Cmd::List => {
                open_stages(&home.catalog)?;
                emit(&list(&home.catalog)?, json)
            }
            Cmd::Remove(a) => {
                let (s, deleted) = engine_stage::remove_stage(&mut home.catalog, &a.dir)?;
                emit(
                    &Removed {
                        path: s.path.display().to_string(),
                        chunk_files_deleted: deleted,
                    },
                    json,
                )
            }
            Cmd::Status => {
                open_stages(&home.catalog)?;
                emit(&status(&home.catalog)?, json)
            }
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

/// Deletes the files of kept chunks whose time ran out before the stages are shown.
/// Only that: a backup may be spooling to them now.
fn open_stages(catalog: &Catalog) -> Result<()> {
    engine_stage::expire_kept_chunks(catalog)?;
    Ok(())
}

/// The stage `stage add` added.
#[derive(Serialize)]
pub struct Added {
    path: String,
    size: u64,
}

impl From<&Stage> for Added {
    fn from(s: &Stage) -> Self {
        Added {
            path: s.path.display().to_string(),
            size: s.size_limit,
        }
    }
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

/// The stage `stage remove` removed.
#[derive(Serialize)]
pub struct Removed {
    path: String,
    chunk_files_deleted: u64,
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

/// One stage's size and use. `used` counts the chunks not yet on tape and those kept
/// on the stage after tape.
#[derive(Serialize)]
struct StageRow {
    path: String,
    size: u64,
    used: u64,
    free: u64,
}

/// Every stage.
#[derive(Serialize)]
pub struct List {
    stages: Vec<StageRow>,
}

fn stage_rows(catalog: &Catalog) -> Result<Vec<(Stage, StageRow)>> {
    let usage = catalog.stage_use()?;
    Ok(catalog
        .stages()?
        .into_iter()
        .map(|s| {
            let used = usage
                .iter()
                .find(|(id, _)| *id == s.id)
                .map_or(0, |(_, u)| u.used());
            let row = StageRow {
                path: s.path.display().to_string(),
                size: s.size_limit,
                used,
                free: s.size_limit.saturating_sub(used),
            };
            (s, row)
        })
        .collect())
}

fn list(catalog: &Catalog) -> Result<List> {
    Ok(List {
        stages: stage_rows(catalog)?.into_iter().map(|(_, r)| r).collect(),
    })
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

/// What one job's stream holds on a stage.
#[derive(Serialize)]
struct StreamUse {
    job_id: i64,
    stream: u16,
    staged_bytes: u64,
    staged_chunks: u64,
    despooled_bytes: u64,
    despooled_chunks: u64,
    /// Of the despooled chunks, those whose files are kept on the stage.
    kept_bytes: u64,
    kept_chunks: u64,
}

/// One stage with what each job's streams hold on it.
#[derive(Serialize)]
struct StageStatus {
    #[serde(flatten)]
    stage: StageRow,
    streams: Vec<StreamUse>,
}

/// Every stage with what it holds.
#[derive(Serialize)]
pub struct Status {
    stages: Vec<StageStatus>,
}

fn status(catalog: &Catalog) -> Result<Status> {
    let mut stages = Vec::new();
    for (s, row) in stage_rows(catalog)? {
        let mut by: BTreeMap<(i64, u16), StageUse> = BTreeMap::new();
        for c in catalog.staged_chunks(&ChunkFilter {
            stage: Some(s.id),
            ..Default::default()
        })? {
            let u = by.entry((c.job_id, c.stream)).or_default();
            match c.state {
                ChunkState::Spooled => {
                    u.spooled_bytes += c.bytes;
                    u.spooled_chunks += 1;
                }
                ChunkState::Despooled => {
                    u.despooled_bytes += c.bytes;
                    u.despooled_chunks += 1;
                }
            }
            if c.is_kept() {
                u.kept_bytes += c.bytes;
                u.kept_chunks += 1;
            }
        }
        let streams = by
            .into_iter()
            .map(|((job_id, stream), u)| StreamUse {
                job_id,
                stream,
                staged_bytes: u.spooled_bytes,
                staged_chunks: u.spooled_chunks,
                despooled_bytes: u.despooled_bytes,
                despooled_chunks: u.despooled_chunks,
                kept_bytes: u.kept_bytes,
                kept_chunks: u.kept_chunks,
            })
            .collect();
        stages.push(StageStatus {
            stage: row,
            streams,
        });
    }
    Ok(Status { stages })
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
