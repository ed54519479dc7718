//! The copies a job's pool asks for, and whether they are on tape.

use crate::backup::job_pool;
use crate::error::Result;
use tapeloom_catalog::{Catalog, CopyState};

/// The copy pools job `job`'s pool asks for that hold no whole copy of it yet:
/// empty when every copy the pool asks for is on tape. A disk copy may be given
/// up (an HSM release) only then.
pub fn missing(cat: &Catalog, job: i64) -> Result<Vec<String>> {
    let Some(to_pool) = cat.pool_copy(&job_pool(cat, job)?)? else {
        return Ok(Vec::new());
    };
    let copies = cat.copies(job)?;
    let whole = (copies.iter()).any(|c| c.pool == to_pool && c.state == CopyState::Ok);
    Ok(match whole {
        true => Vec::new(),
        false => vec![to_pool],
    })
}

/// How many copies of job `job` are on tape: its own cartridges, and each whole
/// further copy.
pub fn on_tape(cat: &Catalog, job: i64) -> Result<u32> {
    let copies = cat.copies(job)?;
    Ok(1 + copies.iter().filter(|c| c.state == CopyState::Ok).count() as u32)
}
