//! Blocks written again after a deferred write error (see the volume writer's replay):
//! what points at their lost places is pointed at the new ones.

use crate::error::Result;
use crate::media::writer::{Moved, VolumeWriter};

/// Points the stored rows and extents of job `job_id` at where a writer wrote lost
/// blocks again, and keeps the moves in `all` for the index.
pub(crate) fn follow_moved(
    cat: &tapeloom_catalog::Catalog,
    job_id: i64,
    all: &std::sync::Mutex<Vec<Moved>>,
    moved: &[Moved],
) -> Result<()> {
    if moved.is_empty() {
        return Ok(());
    }
    cat.move_blocks(job_id, moved, tapeloom_format::CONTROL_STREAM)?;
    all.lock()
        .map_err(|_| crate::error::Error::Panicked {
            what: "a drive thread holding the moved blocks",
        })?
        .extend_from_slice(moved);
    Ok(())
}

/// Before the index: flushes the first drive (a deferred write error shows now),
/// follows what every drive wrote again, and returns every move of the job.
pub(crate) fn follow_all(
    cat: &tapeloom_catalog::Catalog,
    job_id: i64,
    all: &std::sync::Mutex<Vec<Moved>>,
    writers: &mut [VolumeWriter],
) -> Result<Vec<Moved>> {
    if let Some(w) = writers.first_mut().filter(|w| w.buffers()) {
        w.sync()?;
    }
    for w in writers.iter_mut() {
        follow_moved(cat, job_id, all, &w.take_moved())?;
    }
    Ok(all
        .lock()
        .map_err(|_| crate::error::Error::Panicked {
            what: "a drive thread holding the moved blocks",
        })?
        .clone())
}
