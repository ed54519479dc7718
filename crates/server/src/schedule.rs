//! The scheduler: the configuration's `[[schedule]]`s, run by the server itself.
//!
//! One thread sleeps until the next time any schedule is due, then starts each
//! due schedule's job on a thread of its own ([`run_scheduled`]): a queue entry of
//! origin `schedule NAME`, a local backup of the schedule's sources (paths on the
//! server's host: clients are command-line processes the server cannot call), and
//! the job recorded for the schedule's client, who sees and restores it.
//!
//! Times come from the engine's clock (`tapeloom_engine::clock`, which a test
//! hook runs faster); a wait on that clock is its length over the clock's speed in
//! real time. A schedule whose last job still runs when its next time comes skips
//! that time. Times missed while the server was down, or while the host slept,
//! are not caught up: the scheduler goes on from the next time to come.

use crate::config::Schedule;
use crate::metrics::ThreadKind;
use crate::work::Work;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tapeloom_engine::clock::{self, BadSpeed};
use tapeloom_engine::{BackupOptions, DriveSet, Home, Progress};
use tracing::{error, info, warn};

/// The longest real sleep between two readings of the clock, so that a change
/// of the system clock is seen within it.
const MAX_SLEEP: Duration = Duration::from_secs(60);

/// How often a scheduled job's thread looks for its job in the catalog.
const WATCH: Duration = Duration::from_millis(100);

/// Why the scheduler could not start, or a scheduled job failed.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    /// A bad `TAPELOOM_CLOCK_SPEED` (a build with test hooks).
    #[error(transparent)]
    Speed(#[from] BadSpeed),
    /// The clock could not be read (a bad `TAPELOOM_NOW`, in a build with test
    /// hooks).
    #[error("read the clock: {0}")]
    Clock(#[source] Box<tapeloom_engine::Error>),
    /// The server was told to stop while the job waited for a drive.
    #[error("the server is stopping; the job did not start")]
    Stopping,
    /// The scheduler's thread did not start.
    #[error("start the scheduler: {0}")]
    Thread(#[source] std::io::Error),
    /// The home could not be opened.
    #[error("open the home: {0}")]
    Home(#[source] Box<tapeloom_ops::OpsError>),
    /// The schedule's pool's rules refused the job (a key the server does not
    /// hold), or the catalog could not be read or the job's client recorded.
    #[error(transparent)]
    Ops(#[from] tapeloom_ops::OpsError),
    /// The backup failed.
    /// The job's thread panicked (a bug of tapeloom's).
    #[error("the job panicked: {message}")]
    Panicked {
        /// What the panic said.
        message: String,
    },
    #[error("{}{source}", job.map_or(String::new(), |j| format!("job {j} failed: ")))]
    Backup {
        /// The job, when it was recorded.
        job: Option<i64>,
        /// The engine's error.
        source: Box<tapeloom_engine::Error>,
    },
}

/// Starts the scheduler's thread, when there are schedules.
pub fn start(work: Arc<Work>, schedules: Vec<Schedule>) -> Result<(), ScheduleError> {
    if schedules.is_empty() {
        return Ok(());
    }
    let speed = clock::speed()?.unwrap_or(1.0);
    let now = now_secs()?;
    std::thread::Builder::new()
        .name("scheduler".into())
        .spawn(move || run(&work, &schedules, speed, now))
        .map_err(ScheduleError::Thread)?;
    Ok(())
}

/// The clock's time in seconds since the epoch.
fn now_secs() -> Result<f64, ScheduleError> {
    let t = clock::now().map_err(|e| ScheduleError::Clock(Box::new(e)))?;
    Ok(t.secs as f64 + f64::from(t.nanos) / 1e9)
}

/// The scheduler's loop: waits for each next time and starts the jobs due then.
fn run(work: &Arc<Work>, schedules: &[Schedule], speed: f64, start: f64) {
    let running = Arc::new(Mutex::new(HashSet::new()));
    let mut after = start.floor() as i64;
    loop {
        let due = (schedules.iter())
            .filter_map(|s| s.calendar.next_after(after))
            .min();
        let Some(due) = due else {
            warn!("no schedule has a time in the next ten years");
            return;
        };
        let now = match wait_until(due, speed) {
            Ok(n) => n,
            Err(e) => {
                error!("the scheduler stops: {e}");
                return;
            }
        };
        for s in schedules {
            if s.calendar.matches(due) {
                launch(work, s, &running);
            }
        }
        // Times that passed while the host slept are not caught up.
        after = due.max(now.floor() as i64);
    }
}

/// Sleeps until the clock shows `due`; the time it then shows.
fn wait_until(due: i64, speed: f64) -> Result<f64, ScheduleError> {
    loop {
        let now = now_secs()?;
        let left = due as f64 - now;
        if left <= 0.0 {
            return Ok(now);
        }
        std::thread::sleep(Duration::from_secs_f64(left / speed).min(MAX_SLEEP));
    }
}

/// Starts schedule `s`'s job on a thread of its own, unless its last one still runs.
fn launch(work: &Arc<Work>, s: &Schedule, running: &Arc<Mutex<HashSet<String>>>) {
    if work.draining() {
        warn!(schedule = %s.name, "the server is stopping; this time is skipped");
        return;
    }
    let lock = || running.lock().unwrap_or_else(PoisonError::into_inner);
    if !lock().insert(s.name.clone()) {
        warn!(schedule = %s.name, "its last job still runs; this time is skipped");
        return;
    }
    let (work, s2, running2) = (Arc::clone(work), s.clone(), Arc::clone(running));
    let spawned = std::thread::Builder::new()
        .name(format!("schedule {}", s.name))
        .spawn(move || {
            let r = match &s2.verify {
                Some(rb) => read_back(&work, &s2.name, rb),
                None => run_scheduled(&work, &s2).map(|_| ()),
            };
            if let Err(e) = r {
                warn!(schedule = %s2.name, "{e}");
            }
            (running2.lock().unwrap_or_else(PoisonError::into_inner)).remove(&s2.name);
        });
    if let Err(e) = spawned {
        lock().remove(&s.name);
        error!(schedule = %s.name, "start its job: {e}");
    }
}

/// A read-back schedule's run on a free drive ([`tapeloom_ops::read_back::run`]):
/// each job of the pool not read back within its time, verified, each result
/// kept with its job (as run `schedule NAME`).
fn read_back(work: &Work, name: &str, rb: &crate::config::ReadBack) -> Result<(), ScheduleError> {
    let home_err = |e| ScheduleError::Home(Box::new(e));
    let Some(drive) = work.drive_pool.wait_for_one(|| work.draining()) else {
        return Err(ScheduleError::Stopping);
    };
    let home = work.drive_pool.enter(&work.home).map_err(home_err)?;
    let how = format!("schedule {name}");
    let at = drive.indexes.first().copied();
    let r = tapeloom_ops::read_back::run(&home, &rb.pool, rb.older_than, (at, &how))?;
    for (job, e) in &r.failed {
        warn!(schedule = %name, job, "read back: {e}");
    }
    info!(schedule = %name, pool = %rb.pool, ok = r.ok, bad = ?r.bad, left_alone = r.left_alone, "read back");
    Ok(())
}

/// Runs one scheduled job from its queue entry to its end; its job id.
pub fn run_scheduled(work: &Work, s: &Schedule) -> Result<i64, ScheduleError> {
    let origin = format!("schedule {}", s.name);
    let entry = work.queue.add(&s.client, &s.name, &origin);
    crate::admission::enter_scheduled(work, entry, &s.client);
    // A panic fails this job only: counted, its queue entry ended, and the
    // schedule runs again at its next time.
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| backup(work, entry, s)))
        .unwrap_or_else(|panic| {
            work.metrics.panicked(ThreadKind::Schedule);
            Err(ScheduleError::Panicked {
                message: crate::writer::panic_message(&panic),
            })
        });
    work.queue
        .ended(entry, r.as_ref().err().map(ToString::to_string));
    // A job that ended whole is copied when its pool names a copy pool, as a
    // client's job is: a queued job of its own, once the drive is free.
    if let Ok(job) = r {
        crate::copies::after_job(work, job, &s.client);
    }
    r
}

/// The backup of a scheduled job; its job recorded for the schedule's client and
/// shown writing in the queue as soon as it is seen.
///
/// It runs on a free drive beside the clients' jobs, through the home and the
/// stages they share (`drives.rs`).
fn backup(work: &Work, entry: u64, s: &Schedule) -> Result<i64, ScheduleError> {
    let home_err = |e| ScheduleError::Home(Box::new(e));
    let Some(drive) = work.drive_pool.wait_for_one(|| work.draining()) else {
        return Err(ScheduleError::Stopping);
    };
    let mut home = work.drive_pool.enter(&work.home).map_err(home_err)?;
    let stages = home.stages.clone();
    backup_in(work, (entry, s), &mut home, (&drive.indexes, stages))
}

/// The backup of a scheduled job in `home`, on `drives` when given (else as a
/// local backup chooses).
fn backup_in(
    work: &Work,
    (entry, s): (u64, &Schedule),
    home: &mut Home,
    (drives, stages): (&[usize], tapeloom_engine::StageSet),
) -> Result<i64, ScheduleError> {
    // The job is known by a tag chosen here (the server also records jobs that
    // failed before a drive, so the next id may be another's).
    let tag = crate::backup_jobs::random_tag();
    let mut opts = BackupOptions {
        name: s.name.clone(),
        set: s.set.clone(),
        level: s.level,
        pool: s.pool.clone(),
        job_tag: Some(tag),
        client: s.client.clone(),
        drives: DriveSet::List(drives.to_vec()),
        stages: Some(stages),
        ..BackupOptions::default()
    };
    // The pool's rules, as for every job: its key, which the server must hold.
    tapeloom_ops::backup::prepare(home, &mut opts, &work.keys)?;
    let progress = Arc::new(Progress::default());
    let watcher = tapeloom_ops::Conn::open(&work.home)?;
    let ended = AtomicBool::new(false);
    let (r, seen) = std::thread::scope(|scope| {
        let (ended, shown) = (&ended, &progress);
        let w = scope.spawn(move || loop {
            let last = ended.load(Ordering::Acquire);
            match claim(work, &watcher, (entry, tag), s, shown) {
                Ok(Some(id)) => return Some(id),
                Ok(None) if last => return None,
                Ok(None) => std::thread::sleep(WATCH),
                Err(e) => {
                    warn!(schedule = %s.name, "{e}");
                    return None;
                }
            }
        });
        let r = tapeloom_engine::backup(home, &s.sources, &opts, Arc::clone(&progress));
        ended.store(true, Ordering::Release);
        (r, w.join().ok().flatten())
    });
    let report = r.map_err(|e| ScheduleError::Backup {
        job: seen,
        source: Box::new(e),
    })?;
    work.metrics.job_errors(report.errors.len());
    if seen != Some(report.job_id) {
        tapeloom_ops::clients::record_for(&*home, report.job_id, &s.client)?;
        work.queue.writing(entry, report.job_id, progress);
    }
    Ok(report.job_id)
}

/// The job of tag `tag` once it is recorded: recorded for the schedule's client
/// and its queue entry `entry` shown writing. None while it is not recorded yet.
fn claim(
    work: &Work,
    conn: &tapeloom_ops::Conn,
    (entry, tag): (u64, u64),
    s: &Schedule,
    progress: &Arc<Progress>,
) -> Result<Option<i64>, ScheduleError> {
    let job = tapeloom_ops::clients::record_by_tag(conn, tag, &s.client)?;
    if let Some(id) = job {
        work.queue.writing(entry, id, Arc::clone(progress));
    }
    Ok(job)
}
