//! Disk stages: folders a backup spools its streams to before they go to tape at the
//! drive's rate (docs/STAGE.md).
//!
//! A stage keeps its data under `DIR/tapeloom-stage/`, one folder per job and stream,
//! in chunk files ([`ChunkWriter`], [`ChunkReader`]) that hold the stream's blocks
//! sealed as for tape. A chunk file is data once it has its final name and is recorded
//! in the catalog; it may be deleted once its blocks are on tape and recorded.
//! [`StageSet`] shares the stages' space between the threads that spool to them, and
//! makes them wait while the stages are full. [`StreamSpool`] writes one stream as a
//! run of chunks. [`StageSet::open`] reports what the stages hold that the catalog
//! does not know, and what the catalog knows that they lost; it deletes the files of
//! chunks kept after tape (`backup --keep-staged`) whose time has run out. Kept
//! chunks count against their stage's space until [`StageSet::reserve`] evicts them,
//! oldest first, rather than wait.

mod admin;
mod check;
mod chunk;
mod read;
pub(crate) mod rows;
mod set;
mod spool;

pub use admin::{add_stage, remove_stage};
pub use check::{check_stage, expire_kept_chunks, StageReport};
pub use chunk::{ChunkWriter, CHUNK_HEADER_LEN, CHUNK_MAGIC, CHUNK_VERSION};
pub use read::{ChunkReader, StagedBlock};
pub use set::{Reservation, StageSet, StageSpace, StageWaits};
pub use spool::StreamSpool;

use std::path::{Path, PathBuf};

/// Chunk size when none is given: chunks roll over at 64 MiB.
pub const DEFAULT_CHUNK_SIZE: u64 = 64 << 20;

/// The folder of a stage that tapeloom keeps its data in.
pub const STAGE_DATA_DIR: &str = "tapeloom-stage";

/// Suffix of a complete chunk file.
pub const CHUNK_SUFFIX: &str = ".tlc";

/// Suffix of a chunk file being written: never data.
pub const PART_SUFFIX: &str = ".tlc.part";

/// The folder under `stage` that holds tapeloom's data.
pub fn data_dir(stage: &Path) -> PathBuf {
    stage.join(STAGE_DATA_DIR)
}

/// A chunk file's name relative to its stage's folder, as the catalog keeps it:
/// `tapeloom-stage/job-00000042/stream-0003/chunk-000007.tlc`.
pub fn chunk_file(job_id: i64, stream: u16, seq: u64) -> String {
    format!("{STAGE_DATA_DIR}/job-{job_id:08}/stream-{stream:04}/chunk-{seq:06}{CHUNK_SUFFIX}")
}

/// Deletes the file `rel` (a chunk file's name as the catalog keeps it) of the stage
/// at `stage`; returns whether there was one. Its folders stay: a spooler may be
/// about to write in them.
pub(crate) fn remove_chunk_file(stage: &Path, rel: &str) -> crate::error::Result<bool> {
    let f = stage.join(rel);
    match std::fs::remove_file(&f) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => crate::error::io(Err(e), || format!("remove {}", f.display())),
    }
}

/// Removes the folders of the chunk file `rel` of the stage at `stage` that are
/// empty, from its stream's up to its job's.
pub(crate) fn prune_chunk_dirs(stage: &Path, rel: &str) {
    let f = stage.join(rel);
    // Folders other files still hold stay.
    let mut d = f.parent();
    while let Some(p) = d.filter(|p| p.starts_with(data_dir(stage))) {
        if std::fs::remove_dir(p).is_err() {
            break;
        }
        d = p.parent();
    }
}

/// Nanoseconds since the epoch, now.
fn now_ns() -> i64 {
    crate::clock::system_ns()
}

#[cfg(test)]
mod tests;
