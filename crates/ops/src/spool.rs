//! The stages a server's clients' blocks wait on before a drive: the stage a
//! server adds when the home has none, the stages its running jobs share, and
//! what a server that stopped left on them.

use crate::Result;
use std::path::{Path, PathBuf};
use tapeloom_catalog::{JobState, INTERRUPTED};
use tapeloom_engine::{Home, StageSet};

/// Adds folder `dir` (created when missing) as a stage of `size` bytes when the
/// home has no stage; the folder added, none when the home had a stage.
pub fn add_default(home: &Home, dir: &Path, size: u64) -> Result<Option<PathBuf>> {
    if !home.catalog.stages()?.is_empty() {
        return Ok(None);
    }
    let stage = tapeloom_engine::stage::add_stage(&home.catalog, dir, size)?;
    Ok(Some(stage.path))
}

/// The home's stages, which the jobs that hold it share, each checked against
/// the catalog: the files of chunks a dead process left half written are
/// removed, so this is for a home no job of this process runs in yet.
pub fn open(home: &Home) -> Result<StageSet> {
    let (stages, _) = StageSet::open(&home.catalog)?;
    Ok(stages)
}

/// What a server that stopped left on the stages, made ready for the server
/// that starts: the streams of its clients' jobs left failed with nothing staged
/// are named as cut among their errors (they stay failed), and the jobs left
/// with chunks staged are returned, to be resumed.
pub fn recover(home: &Home) -> Result<Vec<i64>> {
    let cat = &home.catalog;
    let staged = cat.jobs_with_chunks()?;
    for j in cat.jobs()? {
        if j.status != JobState::Failed || j.client.is_none() || staged.contains(&j.id) {
            continue;
        }
        let errors = cat.errors(j.id)?;
        if errors.iter().any(|(_, why)| why == INTERRUPTED) {
            tapeloom_engine::name_unstaged_streams(home, j.id)?;
        }
    }
    Ok(tapeloom_engine::unfinished_staged_jobs(home)?)
}
