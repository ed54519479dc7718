//! Expiry: which volumes' jobs all outlived their pool's retention, so that the
//! volumes may be recycled (`tapeloom expire`).
//!
//! The rule is per job first: a job expires once it ended (it is not running) and
//! its pool's retention has passed since its end ([`job_expiry`]). A volume expires
//! when every job with a segment on it has expired, its pool keeps jobs for a
//! limited time and is not WORM. A job spanning cartridges is forgotten only when
//! all its cartridges expire, so a volume holding such a job waits for the others.
//! A chain is kept whole: an incremental or differential job needs its base to be
//! restored, so a job expires no earlier than every job that depends on it, and
//! theirs in turn ([`keep_chains`]); a failed job depends on nothing.

use crate::error::Result;
use crate::home::Home;
use std::collections::{BTreeMap, HashMap};
use tapeloom_catalog::{Job, JobState, Pool, Volume, VolumeState};

/// A volume that expires (or expired, without a dry run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiredVolume {
    /// Its barcode.
    pub barcode: String,
    /// Its pool.
    pub pool: String,
    /// The jobs on it, forgotten with it.
    pub jobs: Vec<i64>,
    /// When it expired: the latest time one of its jobs expired, nanoseconds since
    /// the epoch.
    pub expired_ns: i64,
    /// The latest end of its jobs (recycling takes the oldest first).
    pub jobs_ended_ns: i64,
}

/// What `expire` found, and did unless it was a dry run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpireReport {
    /// The time expiry was judged at, nanoseconds since the epoch.
    pub now_ns: i64,
    /// Nothing was changed.
    pub dry_run: bool,
    /// The volumes that expire, by barcode.
    pub volumes: Vec<ExpiredVolume>,
    /// The jobs forgotten (or that would be), by id.
    pub jobs: Vec<i64>,
}

/// Finds the volumes that have expired at [`crate::clock::now`] and, unless
/// `dry_run`, marks them expired and forgets their jobs.
pub fn expire(home: &Home, dry_run: bool) -> Result<ExpireReport> {
    let now_ns = crate::clock::now()?.as_nanos();
    let Schedule {
        volumes,
        jobs,
        on_volume,
        at,
        ..
    } = schedule(&home.catalog)?;
    let found: BTreeMap<i64, i64> = at
        .iter()
        .filter(|(_, t)| **t <= now_ns)
        .map(|(v, t)| (*v, *t))
        .collect();
    let mut out: Vec<ExpiredVolume> = found
        .iter()
        .map(|(v, at)| {
            let on = &on_volume[v];
            let ended = on.iter().filter_map(|j| jobs.get(j).map(job_end)).max();
            ExpiredVolume {
                barcode: volumes[v].barcode.clone(),
                pool: volumes[v].pool.clone(),
                jobs: on.clone(),
                expired_ns: *at,
                jobs_ended_ns: ended.unwrap_or(0),
            }
        })
        .collect();
    out.sort_by(|a, b| a.barcode.cmp(&b.barcode));
    let mut forgotten: Vec<i64> = out.iter().flat_map(|v| v.jobs.clone()).collect();
    forgotten.sort_unstable();
    forgotten.dedup();
    if !dry_run && !found.is_empty() {
        let marks: Vec<(i64, i64)> = found
            .keys()
            .map(|v| {
                let e = out.iter().find(|o| o.barcode == volumes[v].barcode);
                (*v, e.map_or(0, |e| e.jobs_ended_ns))
            })
            .collect();
        home.connect()?.expire_volumes(&marks)?;
    }
    Ok(ExpireReport {
        now_ns,
        dry_run,
        volumes: out,
        jobs: forgotten,
    })
}

/// A volume that never expires, in the times of [`spread_latest`].
const NEVER: i64 = i64::MAX;

/// Gives every volume in `at` (volume id to when it would expire, [`NEVER`] for
/// never) the latest time of the volumes it shares a job with, and theirs in turn:
/// a job spanning volumes keeps them all until all of them expire.
fn spread_latest(
    at: &mut BTreeMap<i64, i64>,
    on_volume: &BTreeMap<i64, Vec<i64>>,
    volumes_of: &HashMap<i64, Vec<i64>>,
) {
    loop {
        let mut changed = false;
        for (v, jobs) in on_volume {
            let latest = jobs
                .iter()
                .flat_map(|j| volumes_of.get(j).into_iter().flatten())
                .map(|w| at.get(w).copied().unwrap_or(NEVER))
                .max();
            if let (Some(latest), Some(mine)) = (latest, at.get_mut(v)) {
                if latest > *mine {
                    *mine = latest;
                    changed = true;
                }
            }
        }
        if !changed {
            return;
        }
    }
}

/// When each volume of the catalog that holds jobs expires (nanoseconds since the
/// epoch), by barcode; a volume missing from the map never does.
pub fn expiries(home: &Home) -> Result<HashMap<String, i64>> {
    let Schedule { volumes, at, .. } = schedule(&home.catalog)?;
    Ok(at
        .into_iter()
        .filter(|(_, t)| *t != NEVER)
        .filter_map(|(v, t)| Some((volumes.get(&v)?.barcode.clone(), t)))
        .collect())
}

/// The catalog's volumes and jobs, which jobs are on which volumes, and when each
/// volume that holds jobs expires ([`NEVER`] for never).
struct Schedule {
    volumes: HashMap<i64, Volume>,
    jobs: HashMap<i64, Job>,
    on_volume: BTreeMap<i64, Vec<i64>>,
    at: BTreeMap<i64, i64>,
    /// When each job expires, its chain kept whole ([`NEVER`] for never).
    job_at: BTreeMap<i64, i64>,
}

/// The jobs past their pool's retention at `now_ns`, each chain kept whole
/// (a job expires no earlier than the jobs that depend on it), whether or not
/// their cartridges expired. A repack forgets those on the cartridges it empties.
pub(crate) fn expired_jobs(
    cat: &tapeloom_catalog::Catalog,
    now_ns: i64,
) -> Result<std::collections::BTreeSet<i64>> {
    let s = schedule(cat)?;
    Ok((s.job_at.into_iter())
        .filter(|(_, t)| *t != NEVER && *t <= now_ns)
        .map(|(j, _)| j)
        .collect())
}

fn schedule(cat: &tapeloom_catalog::Catalog) -> Result<Schedule> {
    let pools: HashMap<String, Pool> = cat
        .pools()?
        .into_iter()
        .map(|p| (p.name.clone(), p))
        .collect();
    let volumes: HashMap<i64, Volume> = cat.volumes()?.into_iter().map(|v| (v.id, v)).collect();
    let jobs: HashMap<i64, Job> = cat.jobs()?.into_iter().map(|j| (j.id, j)).collect();
    let mut on_volume: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    let mut volumes_of: HashMap<i64, Vec<i64>> = HashMap::new();
    for (v, j) in cat.volume_jobs()? {
        on_volume.entry(v).or_default().push(j);
        volumes_of.entry(j).or_default().push(v);
    }
    // A cartridge holding a further copy of a job is kept while that job is.
    for v in volumes.keys() {
        for (j, _) in cat.copy_on_volume(*v)? {
            let on = on_volume.entry(*v).or_default();
            if !on.contains(&j) {
                on.push(j);
            }
        }
    }
    // Each job's expiry: the latest of its volumes' pools' (a job writes to one
    // pool; a pool that keeps jobs forever keeps it forever).
    let own = |j: i64| -> Option<i64> {
        let job = jobs.get(&j)?;
        let mut at = None;
        for v in volumes_of.get(&j)? {
            let pool = pools.get(&volumes.get(v)?.pool)?;
            at = at.max(Some(job_expiry(job, pool)?));
        }
        at
    };
    let mut job_at: BTreeMap<i64, i64> = jobs
        .keys()
        .map(|j| (*j, own(*j).unwrap_or(NEVER)))
        .collect();
    // A job that holds an S3 object still live is kept: the object's only copy
    // may be on it. Once every object of it is deleted, its pool's retention
    // counts as for every job.
    for j in cat.s3_live_jobs()? {
        job_at.insert(j, NEVER);
    }
    keep_chains(&mut job_at, &jobs);
    let expiry = |j: i64| -> Option<i64> { job_at.get(&j).copied().filter(|t| *t != NEVER) };
    // When each volume expires: when its last job does, and a job spanning
    // volumes keeps them all until all of them expire.
    let mut at: BTreeMap<i64, i64> = BTreeMap::new();
    for (v, on) in &on_volume {
        let Some(vol) = volumes.get(v) else { continue };
        let never = matches!(vol.status, VolumeState::Expired | VolumeState::Suspect);
        let all: Option<Vec<i64>> = on.iter().map(|j| expiry(*j)).collect();
        let when = all.and_then(|a| a.into_iter().max()).filter(|_| !never);
        at.insert(*v, when.unwrap_or(NEVER));
    }
    spread_latest(&mut at, &on_volume, &volumes_of);
    Ok(Schedule {
        volumes,
        jobs,
        on_volume,
        at,
        job_at,
    })
}

/// Gives every job in `at` (job id to when it expires, [`NEVER`] for never) the
/// latest time of the jobs that depend on it (its incrementals and differentials,
/// and theirs in turn), so a chain is kept whole. Bases are older jobs: going
/// from the newest down, a job's time is final before its base takes it.
fn keep_chains(at: &mut BTreeMap<i64, i64>, jobs: &HashMap<i64, Job>) {
    let ids: Vec<i64> = at.keys().rev().copied().collect();
    for id in ids {
        let Some(job) = jobs.get(&id) else { continue };
        let Some(base) = job.base.filter(|b| *b < id) else {
            continue;
        };
        if job.status == JobState::Failed {
            continue;
        }
        let mine = at.get(&id).copied().unwrap_or(NEVER);
        if let Some(b) = at.get_mut(&base) {
            *b = (*b).max(mine);
        }
    }
}

/// When a job ended: its end, or its start for a job that failed without one.
fn job_end(job: &Job) -> i64 {
    job.ended_ns.unwrap_or(job.started_ns)
}

/// When a job of `pool` expires, nanoseconds since the epoch; `None` while it runs
/// and when the pool keeps jobs forever or is WORM.
pub fn job_expiry(job: &Job, pool: &Pool) -> Option<i64> {
    if matches!(job.status, JobState::Running | JobState::Queued) || pool.worm {
        return None;
    }
    let keep = i64::try_from(pool.retention_s?)
        .ok()?
        .saturating_mul(1_000_000_000);
    // Expired only once *more* than the retention has passed since its end.
    Some(job_end(job).saturating_add(keep).saturating_add(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(status: JobState, ended_ns: Option<i64>) -> Job {
        Job {
            id: 1,
            tag: 1,
            name: "j".into(),
            started_ns: 10,
            ended_ns,
            status,
            files: 0,
            bytes: 0,
            seconds: 0.0,
            block_size: 262144,
            key: None,
            set: "j".into(),
            level: tapeloom_format::Level::Full,
            base: None,
            client: None,
        }
    }

    #[test]
    fn a_chain_is_kept_as_long_as_its_last_job() {
        let mut jobs = HashMap::new();
        let mut at = BTreeMap::new();
        // 1 full, 2 incremental on 1, 3 incremental on 2, 4 failed on 3, 5 full.
        for (id, base, status, t) in [
            (1, None, JobState::Ok, 10),
            (2, Some(1), JobState::Ok, 20),
            (3, Some(2), JobState::Partial, 30),
            (4, Some(3), JobState::Failed, NEVER),
            (5, None, JobState::Ok, 5),
        ] {
            let mut j = job(status, Some(t));
            j.id = id;
            j.base = base;
            jobs.insert(id, j);
            at.insert(id, t);
        }
        keep_chains(&mut at, &jobs);
        assert_eq!(
            at.values().copied().collect::<Vec<_>>(),
            vec![30, 30, 30, NEVER, 5]
        );
        // A running incremental keeps its chain for now.
        jobs.get_mut(&4).unwrap().status = JobState::Running;
        let mut at2: BTreeMap<i64, i64> = [(1, 10), (2, 20), (3, 30), (4, NEVER), (5, 5)].into();
        keep_chains(&mut at2, &jobs);
        assert_eq!(at2[&1], NEVER);
    }

    #[test]
    fn a_job_expires_after_its_pools_retention_unless_running_kept_or_worm() {
        let day = Pool {
            name: "daily".into(),
            retention_s: Some(86_400),
            ..Pool::default_pool()
        };
        let ok = job(JobState::Ok, Some(1_000));
        assert_eq!(job_expiry(&ok, &day), Some(1_000 + 86_400_000_000_000 + 1));
        // A failed job without an end counts from its start.
        assert_eq!(
            job_expiry(&job(JobState::Failed, None), &day),
            Some(10 + 86_400_000_000_000 + 1)
        );
        assert_eq!(job_expiry(&job(JobState::Running, None), &day), None);
        assert_eq!(job_expiry(&ok, &Pool::default_pool()), None);
        let worm = Pool {
            worm: true,
            ..day.clone()
        };
        assert_eq!(job_expiry(&ok, &worm), None);
    }

    #[test]
    fn a_job_spanning_volumes_keeps_them_all_until_all_expire() {
        // Volume 1 holds jobs 10 and 11; job 11 spans to volume 2, which holds
        // job 12 too; job 13 alone is on volume 3; job 14 spans volumes 4 and 5.
        let on_volume: BTreeMap<i64, Vec<i64>> = [
            (1, vec![10, 11]),
            (2, vec![11, 12]),
            (3, vec![13]),
            (4, vec![14]),
            (5, vec![14]),
        ]
        .into();
        let mut volumes_of: HashMap<i64, Vec<i64>> = HashMap::new();
        for (v, jobs) in &on_volume {
            for j in jobs {
                volumes_of.entry(*j).or_default().push(*v);
            }
        }
        // Job 12 has not expired: volume 2 stays, so job 11 stays, so volume 1.
        let expired = |at: &[(i64, i64)]| {
            let mut at: BTreeMap<i64, i64> = at.iter().copied().collect();
            spread_latest(&mut at, &on_volume, &volumes_of);
            at.into_iter()
                .filter(|(_, t)| *t <= 0)
                .map(|(v, _)| v)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            expired(&[(1, 0), (2, NEVER), (3, 0), (4, 0), (5, 0)]),
            [3, 4, 5]
        );
        // Volume 5 not expiring keeps volume 4 too.
        assert_eq!(
            expired(&[(1, NEVER), (2, NEVER), (3, 0), (4, 0), (5, NEVER)]),
            [3]
        );
    }
}
