//! What a stage holds that the catalog does not know, and what it lost.

use super::{data_dir, CHUNK_SUFFIX, PART_SUFFIX, STAGE_DATA_DIR};
use crate::error::{io, Result};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use tapeloom_catalog::{Catalog, ChunkFilter, ChunkState, Stage, StagedChunk};

/// What checking a stage against the catalog found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StageReport {
    /// The stage's catalog id.
    pub stage_id: i64,
    /// The stage's folder.
    pub path: PathBuf,
    /// `.part` files (chunks whose writing never finished), removed.
    pub removed_parts: Vec<PathBuf>,
    /// Chunk files the catalog does not record: not data, left for a person to look
    /// at.
    pub unrecorded: Vec<PathBuf>,
    /// Chunks not yet on tape whose file is missing: their blocks are lost.
    pub lost: Vec<StagedChunk>,
    /// Chunks kept after tape whose time ran out: their files were deleted.
    pub expired: Vec<StagedChunk>,
    /// Chunks kept after tape whose file was missing: no longer kept (their blocks
    /// are on tape).
    pub kept_missing: Vec<StagedChunk>,
}

impl StageReport {
    /// Whether the stage and the catalog agree.
    pub fn is_clean(&self) -> bool {
        self.removed_parts.is_empty() && self.unrecorded.is_empty() && self.lost.is_empty()
    }
}

/// Checks a stage against the catalog: deletes the files of kept chunks whose time
/// ran out, removes the `.part` files under its data folder, and reports the chunk
/// files the catalog does not record and the recorded chunks not yet on tape whose
/// file is gone. A kept chunk whose file is gone is no longer kept.
pub fn check_stage(catalog: &Catalog, stage: &Stage) -> Result<StageReport> {
    let mut chunks = catalog.staged_chunks(&ChunkFilter {
        stage: Some(stage.id),
        ..Default::default()
    })?;
    let expired = expire_kept(catalog, stage, &mut chunks)?;
    let recorded: HashSet<&str> = chunks.iter().map(|c| c.file.as_str()).collect();
    let mut report = StageReport {
        stage_id: stage.id,
        path: stage.path.clone(),
        expired,
        ..Default::default()
    };
    let mut found = HashSet::new();
    for (rel, path) in chunk_files(&data_dir(&stage.path))? {
        if rel.ends_with(PART_SUFFIX) {
            io(std::fs::remove_file(&path), || {
                format!("remove {}", path.display())
            })?;
            report.removed_parts.push(path);
        } else if recorded.contains(rel.as_str()) {
            found.insert(rel);
        } else {
            report.unrecorded.push(path);
        }
    }
    let (missing, _): (Vec<StagedChunk>, _) = chunks
        .into_iter()
        .partition(|c| c.on_stage() && !found.contains(&c.file));
    for c in missing {
        if c.state == ChunkState::Spooled {
            report.lost.push(c);
        } else {
            catalog.drop_kept_chunk(c.job_id, c.stream, c.seq)?;
            report.kept_missing.push(c);
        }
    }
    Ok(report)
}

/// Deletes the files of the kept chunks among `chunks` (the stage's) whose keep time
/// has passed and drops their keep in the catalog (and in `chunks`); returns them.
fn expire_kept(
    catalog: &Catalog,
    stage: &Stage,
    chunks: &mut [StagedChunk],
) -> Result<Vec<StagedChunk>> {
    let now = super::now_ns();
    let mut expired = Vec::new();
    for c in chunks.iter_mut() {
        if c.is_kept() && c.keep_until_ns.is_some_and(|t| t <= now) {
            // The file first: a crash between the two leaves a kept row without its
            // file, which the next check drops.
            super::remove_chunk_file(&stage.path, &c.file)?;
            catalog.drop_kept_chunk(c.job_id, c.stream, c.seq)?;
            c.keep_until_ns = None;
            expired.push(c.clone());
        }
    }
    Ok(expired)
}

/// Deletes the files of every stage's kept chunks whose keep time has passed, and
/// nothing else: safe while a backup spools. Returns the chunks expired.
pub fn expire_kept_chunks(catalog: &Catalog) -> Result<Vec<StagedChunk>> {
    let mut expired = Vec::new();
    for stage in catalog.stages()? {
        let mut chunks = catalog.staged_chunks(&ChunkFilter {
            stage: Some(stage.id),
            state: Some(ChunkState::Despooled),
            ..Default::default()
        })?;
        expired.extend(expire_kept(catalog, &stage, &mut chunks)?);
    }
    Ok(expired)
}

/// The chunk and `.part` files in `job-*/stream-*/` folders under `data`, with their
/// names relative to the stage, in name order.
fn chunk_files(data: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    for job in entries(data, "job-")? {
        for stream in entries(&job, "stream-")? {
            for file in entries(&stream, "chunk-")? {
                let name = file_name(&file);
                if !(name.ends_with(CHUNK_SUFFIX) || name.ends_with(PART_SUFFIX)) {
                    continue;
                }
                let rel = format!(
                    "{STAGE_DATA_DIR}/{}/{}/{name}",
                    file_name(&job),
                    file_name(&stream)
                );
                out.push((rel, file));
            }
        }
    }
    Ok(out)
}

/// The entries of `dir` whose name starts with `prefix`, in name order; none when it
/// does not exist.
fn entries(dir: &Path, prefix: &str) -> Result<Vec<PathBuf>> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return io(Err(e), || format!("list {}", dir.display())),
    };
    let mut v = Vec::new();
    for e in rd {
        let e = io(e, || format!("list {}", dir.display()))?;
        if e.file_name().to_string_lossy().starts_with(prefix) {
            v.push(e.path());
        }
    }
    v.sort();
    Ok(v)
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}
