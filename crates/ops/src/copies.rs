//! The copies a job's pool asks for, and whether they are on tape.

use crate::backup::job_pool;
use crate::error::Result;
use crate::select::{self, Selection};
use tapeloom_catalog::{Catalog, CopyState};
use tapeloom_engine::{CopyOptions, CopyReport, Home};

/// Copies each job `sel` names with `opts`, one after another; with `uncopied`,
/// only those with no whole further copy yet. The copies written, and the jobs
/// `uncopied` left alone.
pub fn copy_jobs(
    home: &Home,
    sel: &Selection,
    uncopied: bool,
    opts: &CopyOptions,
) -> Result<(Vec<CopyReport>, Vec<i64>)> {
    let jobs = select::jobs(&home.catalog, sel)?;
    let (jobs, skipped) = match uncopied {
        true => select::uncopied(&home.catalog, jobs)?,
        false => (jobs, Vec::new()),
    };
    let mut copies = Vec::new();
    for id in jobs {
        copies.push(tapeloom_engine::copy_job(home, id, opts)?);
    }
    Ok((copies, skipped))
}

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
