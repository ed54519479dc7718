//! Reading back a pool's jobs on a schedule: each finished job of the pool not
//! read back within a given time is verified, one after another, each result
//! kept with its job and each cartridge with a bad block marked suspect
//! (`tapeloom_engine::verify_as`).

use crate::Result;
use std::time::Duration;
use tapeloom_engine::Home;

/// What a read-back run did.
pub struct ReadBack {
    /// The jobs read back whole.
    pub ok: usize,
    /// The jobs read back with a bad block or file.
    pub bad: Vec<i64>,
    /// The jobs that could not be read back, and why.
    pub failed: Vec<(i64, tapeloom_engine::Error)>,
    /// The jobs left alone, read back within the time.
    pub left_alone: usize,
}

/// Reads back on `drive` (else as a verify chooses) each finished job of `pool`
/// not read back within `older_than` (every one when none), each recorded as
/// read back by `how`.
pub fn run(
    home: &Home,
    pool: &str,
    older_than: Option<Duration>,
    (drive, how): (Option<usize>, &str),
) -> Result<ReadBack> {
    let now = tapeloom_engine::clock::now()?.as_nanos();
    let (due, recent) = tapeloom_engine::read_back_due(&home.catalog, pool, older_than, now)?;
    let mut done = ReadBack {
        ok: 0,
        bad: Vec::new(),
        failed: Vec::new(),
        left_alone: recent.len(),
    };
    for job in due {
        match tapeloom_engine::verify_as(home, job, drive, how) {
            Ok(r) if r.ok => done.ok += 1,
            Ok(_) => done.bad.push(job),
            Err(e) => done.failed.push((job, e)),
        }
    }
    Ok(done)
}

/// A pool's jobs read back one after another, stopping at the first that cannot
/// be read (`verify --pool`).
pub struct PoolRead {
    /// Each job read, with its report.
    pub read: Vec<(i64, tapeloom_engine::VerifyReport)>,
    /// The jobs left alone, read back within the time asked.
    pub skipped: Vec<i64>,
}

/// Reads back each finished job of `pool` not read back within `older_than`
/// (every one without it), on drive `drive` or any, recording each read-back as
/// `how`; the first job that cannot be read ends it with its error.
pub fn pool_jobs(
    home: &Home,
    pool: &str,
    older_than: Option<Duration>,
    (drive, how): (Option<usize>, &str),
) -> Result<PoolRead> {
    let now = tapeloom_engine::clock::now()?.as_nanos();
    let (due, skipped) = tapeloom_engine::read_back_due(&home.catalog, pool, older_than, now)?;
    let mut read = Vec::new();
    for id in due {
        read.push((id, tapeloom_engine::verify_as(home, id, drive, how)?));
    }
    Ok(PoolRead { read, skipped })
}
