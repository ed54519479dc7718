//! Adding and removing stages: the folder on disk and its row in the catalog.

use crate::error::{io, Result, StageError};
use std::path::{Path, PathBuf};
use tapeloom_catalog::{Catalog, ChunkFilter, Stage};

/// Adds `dir` as a stage of `size` bytes, creating the folder when missing. The
/// catalog keeps its absolute path, symbolic links resolved.
pub fn add_stage(catalog: &Catalog, dir: &Path, size: u64) -> Result<Stage> {
    if size == 0 {
        return Err(StageError::ZeroSize.into());
    }
    if dir.exists() && !dir.is_dir() {
        return Err(StageError::NotADirectory {
            path: dir.to_path_buf(),
        }
        .into());
    }
    io(std::fs::create_dir_all(dir), || {
        format!("create {}", dir.display())
    })?;
    let path = io(dir.canonicalize(), || format!("resolve {}", dir.display()))?;
    Ok(catalog.add_stage(&path, size, super::now_ns())?)
}

/// Removes the stage at `dir`: forgets it, then deletes the files of its chunks (all
/// on tape, or the catalog refuses) and the folders they leave empty. Returns the
/// stage removed and the number of chunk files deleted.
pub fn remove_stage(catalog: &mut Catalog, dir: &Path) -> Result<(Stage, u64)> {
    let path = resolve(dir)?;
    let stage = catalog
        .stage_by_path(&path)?
        .ok_or_else(|| StageError::NoSuchStage { path: path.clone() })?;
    let chunks = catalog.staged_chunks(&ChunkFilter {
        stage: Some(stage.id),
        ..Default::default()
    })?;
    catalog.remove_stage(stage.id)?;
    let mut deleted = 0;
    for c in &chunks {
        if super::remove_chunk_file(&stage.path, &c.file)? {
            deleted += 1;
        }
        super::prune_chunk_dirs(&stage.path, &c.file);
    }
    Ok((stage, deleted))
}

/// `dir` as the catalog would keep it: resolved when it exists, else made absolute.
fn resolve(dir: &Path) -> Result<PathBuf> {
    match dir.canonicalize() {
        Ok(p) => Ok(p),
        Err(_) => io(std::path::absolute(dir), || {
            format!("resolve {}", dir.display())
        }),
    }
}
