//! The copies a pool asks for (`pool create NAME --copy-to POOL`) of the jobs
//! the server writes, for its clients and its schedules. Once a client's job ends (ok or partial),
//! its thread queues a copy of it: an entry of the server's queue (named `copy
//! of job N`, from `copy after job N`), which waits for a free drive (and takes
//! a second when one is free, so that one drive reads while the other writes),
//! then for the home, and runs the engine's copy as `tapeloom copy` does. Its
//! end is the queue entry's: a copy that fails is said there and in the log,
//! and the job itself stays whole.

use crate::queue::State;
use crate::work::Work;
use tracing::{info, warn};

/// Copies job `job_id` (written for `client`) to its pool's copy pool, when the
/// pool has one, as a queued job of its own.
pub fn after_job(work: &Work, job_id: i64, client: &str) {
    let to_pool = match copy_pool(work, job_id) {
        Ok(Some(p)) => p,
        Ok(None) => return,
        Err(e) => {
            warn!(job = job_id, "find the job's copy pool: {e}");
            return;
        }
    };
    let name = format!("copy of job {job_id}");
    let entry = work
        .queue
        .add(client, &name, &format!("copy after job {job_id}"));
    let r = run(work, (entry, job_id), &to_pool);
    match &r {
        Ok(c) => info!(
            job = job_id,
            copy = c.copy_no,
            pool = %to_pool,
            blocks = c.blocks,
            "copied"
        ),
        Err(e) => warn!(job = job_id, pool = %to_pool, "copy: {e}"),
    }
    work.queue.ended(entry, r.err());
}

/// The pool job `job_id` must be copied to, if any (`tapeloom_ops::clients::copy_due`).
fn copy_pool(work: &Work, job_id: i64) -> tapeloom_ops::Result<Option<String>> {
    let conn = tapeloom_ops::Conn::open(&work.home)?;
    tapeloom_ops::clients::copy_due(&conn, job_id)
}

/// Waits for drives and the home, and copies the job.
fn run(
    work: &Work,
    (entry, job_id): (u64, i64),
    to_pool: &str,
) -> Result<tapeloom_engine::CopyReport, String> {
    let Some(read) = work.drive_pool.wait_for_one(|| work.draining()) else {
        return Err("the server stops: the copy was not made".into());
    };
    // A second drive when one is free: the copy streams from one to the other.
    let write = work.drive_pool.take(1);
    let home = work
        .drive_pool
        .enter(&work.home)
        .map_err(|e| format!("open the home: {e}"))?;
    work.queue.set_state(entry, State::Writing);
    let read_drive = read.indexes.first().copied();
    let drives = (read_drive, write.first().copied().or(read_drive));
    let r = tapeloom_ops::backup::copy(&home, job_id, to_pool, drives).map_err(|e| e.to_string());
    drop(home);
    work.drive_pool.give(&write);
    r
}
