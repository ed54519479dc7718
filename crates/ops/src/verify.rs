//! Reading jobs back: a pool's finished jobs not read back lately, each verified
//! on a drive.

use crate::error::Result;
use tapeloom_engine::{Home, VerifyReport};

/// The jobs read back, each with its report, and the jobs left alone as read back
/// lately.
pub type ReadBack = (Vec<(i64, VerifyReport)>, Vec<i64>);

/// Reads back each finished job of `pool` not read back within `older_than`
/// (every one without it), on drive `drive` or any, recording each read-back as
/// `op`. Each job read with its report, and the jobs left alone as read back
/// lately.
pub fn read_back_pool(
    home: &Home,
    pool: &str,
    older_than: Option<std::time::Duration>,
    drive: Option<usize>,
    op: &str,
) -> Result<ReadBack> {
    let now = tapeloom_engine::clock::now()?.as_nanos();
    let (due, skipped) = tapeloom_engine::read_back_due(&home.catalog, pool, older_than, now)?;
    let mut jobs = Vec::new();
    for id in due {
        jobs.push((id, tapeloom_engine::verify_as(home, id, drive, op)?));
    }
    Ok((jobs, skipped))
}
