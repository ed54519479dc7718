//! The disk stages backups spool to before tape: adding and removing one, and
//! what each holds. A stage's kept chunks whose time ran out are deleted before
//! the stages are shown.

use crate::Result;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use tapeloom_catalog::{Catalog, ChunkFilter, ChunkState, Stage, StageUse};
use tapeloom_engine::{stage as engine_stage, Home};

/// Adds folder `dir` (created when missing) as a stage of `size` bytes.
pub fn add(home: &Home, dir: &Path, size: u64) -> Result<Added> {
    let s = engine_stage::add_stage(&home.catalog, dir, size)?;
    Ok(Added::from(&s))
}

/// Removes the stage in `dir`; refused while it holds data not yet on tape.
pub fn remove(home: &mut Home, dir: &Path) -> Result<Removed> {
    let (s, deleted) = engine_stage::remove_stage(&mut home.catalog, dir)?;
    Ok(Removed {
        path: s.path.display().to_string(),
        chunk_files_deleted: deleted,
    })
}

/// Every stage with its size and use.
pub fn list(home: &Home) -> Result<List> {
    open_stages(&home.catalog)?;
    list_of(&home.catalog)
}

/// Every stage with what each job's streams hold on it.
pub fn status(home: &Home) -> Result<Status> {
    open_stages(&home.catalog)?;
    status_of(&home.catalog)
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
    /// The stage's folder.
    pub path: String,
    /// How much of it tapeloom may fill, in bytes.
    pub size: u64,
}

impl From<&Stage> for Added {
    fn from(s: &Stage) -> Self {
        Added {
            path: s.path.display().to_string(),
            size: s.size_limit,
        }
    }
}

/// The stage `stage remove` removed.
#[derive(Serialize)]
pub struct Removed {
    /// The stage's folder.
    pub path: String,
    /// How many files of chunks already on tape were deleted.
    pub chunk_files_deleted: u64,
}

/// One stage's size and use. `used` counts the chunks not yet on tape and those kept
/// on the stage after tape.
#[derive(Serialize)]
pub struct StageRow {
    /// The stage's folder.
    pub path: String,
    /// How much of it tapeloom may fill, in bytes.
    pub size: u64,
    /// The bytes of its chunks not yet on tape and of those kept after tape.
    pub used: u64,
    /// What is left of its size.
    pub free: u64,
}

/// Every stage.
#[derive(Serialize)]
pub struct List {
    /// Every stage, in the order they were added.
    pub stages: Vec<StageRow>,
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

fn list_of(catalog: &Catalog) -> Result<List> {
    Ok(List {
        stages: stage_rows(catalog)?.into_iter().map(|(_, r)| r).collect(),
    })
}

/// What one job's stream holds on a stage.
#[derive(Serialize)]
pub struct StreamUse {
    /// The job.
    pub job_id: i64,
    /// The job's stream.
    pub stream: u16,
    /// Bytes staged and not yet on tape.
    pub staged_bytes: u64,
    /// Chunks staged and not yet on tape.
    pub staged_chunks: u64,
    /// Bytes already written to tape.
    pub despooled_bytes: u64,
    /// Chunks already written to tape.
    pub despooled_chunks: u64,
    /// Of the despooled chunks, those whose files are kept on the stage.
    pub kept_bytes: u64,
    /// Of the despooled chunks, how many are kept on the stage.
    pub kept_chunks: u64,
}

/// One stage with what each job's streams hold on it.
#[derive(Serialize)]
pub struct StageStatus {
    #[serde(flatten)]
    /// The stage's size and use.
    pub stage: StageRow,
    /// What each job's streams hold on it.
    pub streams: Vec<StreamUse>,
}

/// Every stage with what it holds.
#[derive(Serialize)]
pub struct Status {
    /// Every stage.
    pub stages: Vec<StageStatus>,
}

fn status_of(catalog: &Catalog) -> Result<Status> {
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
