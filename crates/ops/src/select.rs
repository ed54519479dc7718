//! Which jobs a command names: by id, by backup set, by pool, by a cartridge
//! their place is on. Jobs named by set or pool are those that ended (ok or
//! partial).

use crate::error::{OpsError, Result};
use tapeloom_catalog::{Catalog, CopyState, JobState};

/// The jobs a command names; each way adds to the ids given.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Jobs named by id.
    pub jobs: Vec<i64>,
    /// Every job of this backup set that ended (it replaces the ids).
    pub set: Option<String>,
    /// Every job of this pool that ended (the pool of its first cartridge).
    pub pool: Option<String>,
    /// Every job whose place (its own cartridges, or the copy it was moved to)
    /// is on this cartridge.
    pub volume: Option<String>,
}

fn ended(s: JobState) -> bool {
    matches!(s, JobState::Ok | JobState::Partial)
}

/// The ids of the jobs `sel` names, in the order named.
pub(crate) fn jobs(cat: &Catalog, sel: &Selection) -> Result<Vec<i64>> {
    let mut jobs: Vec<i64> = sel.jobs.clone();
    if let Some(set) = &sel.set {
        jobs = (cat.jobs()?.into_iter())
            .filter(|j| &j.set == set && ended(j.status))
            .map(|j| j.id)
            .collect();
    }
    if let Some(b) = &sel.volume {
        let v = (cat.volume_by_barcode(b)?).ok_or_else(|| OpsError::NoCartridge(b.clone()))?;
        for p in cat.places_on_volume(v.id)? {
            let primary = p.copy_no == 1 || cat.moved_to(p.job_id)? == Some(p.copy_no);
            if primary && !jobs.contains(&p.job_id) {
                jobs.push(p.job_id);
            }
        }
    }
    if let Some(pool) = &sel.pool {
        for j in cat.jobs()?.into_iter().filter(|j| ended(j.status)) {
            let vols = cat.job_volumes(j.id)?;
            if vols.first().is_some_and(|v| &v.volume.pool == pool) {
                jobs.push(j.id);
            }
        }
    }
    Ok(jobs)
}

/// Of `jobs`, those with no whole further copy yet, and those with one.
pub(crate) fn uncopied(cat: &Catalog, jobs: Vec<i64>) -> Result<(Vec<i64>, Vec<i64>)> {
    let (mut todo, mut skipped) = (Vec::new(), Vec::new());
    for id in jobs {
        // The copy a moved job is read from is its place, not a further copy.
        let moved = cat.moved_to(id)?;
        let copied =
            (cat.copies(id)?.iter()).any(|c| c.state == CopyState::Ok && Some(c.copy_no) != moved);
        if copied {
            skipped.push(id);
        } else {
            todo.push(id);
        }
    }
    Ok((todo, skipped))
}

/// The backup set of job `job`; none when the catalog has no such job.
pub fn set_of(home: &tapeloom_engine::Home, job: i64) -> Result<Option<String>> {
    Ok(home.catalog.job(job)?.map(|j| j.set))
}
