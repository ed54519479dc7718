//! Adding and removing stages: the folder on disk and its row in the catalog.

use super::data_dir;
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
        let f = stage.path.join(&c.file);
        match std::fs::remove_file(&f) {
            Ok(()) => deleted += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return io(Err(e), || format!("remove {}", f.display())),
        }
        // Folders other files still hold stay.
        let mut d = f.parent();
        while let Some(p) = d.filter(|p| p.starts_with(data_dir(&stage.path))) {
            if std::fs::remove_dir(p).is_err() {
                break;
            }
            d = p.parent();
        }
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
