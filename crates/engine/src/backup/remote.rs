//! What the writing side of a backup packed on another machine records of it
//! ([`super::receive_staged`]): its data key, and its failure. The packing side
//! is `tapeloom_tree::pack::remote`.

use crate::error::{Error, Result};
use crate::home::Home;
use std::time::Instant;
use tapeloom_catalog::JobState;

/// A fresh data key for job `job_id` (tag `tag`) wrapped by `master`, its record
/// kept in the catalog.
pub(super) fn job_crypt(
    home: &Home,
    master: &tapeloom_format::MasterKey,
    (job_id, tag): (i64, u64),
) -> Result<crate::crypt::JobCrypt> {
    let crypt = crate::crypt::JobCrypt::new(master, tag)?;
    let fingerprint = crypt.fingerprint().to_string();
    (home.catalog).set_job_key(job_id, &fingerprint, &crypt.record.encode())?;
    Ok(crypt)
}

/// Marks a job failed, its reason among its errors (what is on tape stays).
pub(super) fn record_failure(home: &Home, job_id: i64, t0: Instant, e: &Error) {
    let ended = crate::clock::now().map_or(0, |t| t.as_nanos());
    let cat = &home.catalog;
    let r = cat.add_error(job_id, b"", &e.to_string()).and_then(|()| {
        cat.finish_job(
            job_id,
            JobState::Failed,
            0,
            0,
            t0.elapsed().as_secs_f64(),
            ended,
        )
    });
    if let Err(c) = r {
        let why = crate::escape_controls(&c.to_string()).into_owned();
        eprintln!("tapeloom: record job {job_id} failed: {why}");
    }
}
