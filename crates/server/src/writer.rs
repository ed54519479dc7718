//! The drives' side of the queue: one thread hands the jobs clients sent to the
//! free drives (`super::drives`), and each job is written from its spools through
//! the engine (`tapeloom_engine::backup_received`) on a thread of its own, each of
//! its streams fed by a thread of its own.
//!
//! Which job goes next, when a drive is free:
//! 1. a job whose every stream is on the spool, oldest first (the drive writes it
//!    at the spool's speed);
//! 2. when a client waits for space on a full spool, the job holding most of it;
//! 3. a job whose client sends at least the start rate (the drives' lowest speed
//!    step, where the library knows it; else any job at once), so a fast client's
//!    blocks go through memory to the drive as they come.
//!
//! A slow client's job thus waits on the spool until it is whole, and the drives
//! serve the others meanwhile: a drive never waits for a slow client.

use super::backups::{self, Job, Outcome};
use super::metrics::ThreadKind;
use super::queue::State;
use super::serve::Shared;
use super::spool::{Item, StreamSpool};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tapeloom_catalog::{JobState, Stream};
use tapeloom_engine::{
    BackupOptions, DriveSet, Home, Inlet, Progress, ReceivedChanges, RemotePlan, RemoteStream,
};
use tapeloom_proto::backup::BackedUp;
use tapeloom_proto::backup::Begin;
use tracing::{error, warn};

/// The file of a job's spool folder that says what the job is.
pub const META: &str = "job.json";

/// What a job's spool folder says of it.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Unwritten {
    /// Its client.
    pub client: String,
    /// Its tag.
    pub tag: u64,
    /// When it was asked for.
    pub asked_ns: i64,
    /// As asked for.
    pub doc: Begin,
}

/// Starts the thread that hands the queue's jobs to the drives: each job due goes
/// to a thread of its own with the free drives it is given, as long as a drive is
/// free. A job whose writing panics fails with the panic's message, is counted in
/// `/metrics`, and its drives go to the next jobs.
pub fn start(shared: Arc<Shared>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("drives".into())
        .spawn(move || loop {
            let Some((backup, drives)) = next_job(&shared) else {
                continue;
            };
            let s = Arc::clone(&shared);
            let given = drives.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("job {backup}"))
                .spawn(move || run_job(&s, backup, &given));
            if let Err(e) = spawned {
                shared.drive_pool.give(&drives);
                backups::ended(&shared, backup, Err(format!("start the job's thread: {e}")));
            }
        })
        .map(|_| ())
}

/// Writes job `backup` on `drives`, which it gives back at its end.
fn run_job(shared: &Shared, backup: u64, drives: &[usize]) {
    let written = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        write(shared, backup, drives)
    }));
    let outcome = written.unwrap_or_else(|panic| {
        shared.metrics.panicked(ThreadKind::DriveWriter);
        let why = format!("the drive's writer panicked: {}", panic_message(&panic));
        error!(backup, "{why}");
        after_panic(shared, backup, &why);
        Err(why)
    });
    // Ended first, so that a job shown writing always holds its drives.
    backups::ended(shared, backup, outcome);
    shared.drive_pool.give(drives);
    shared.backups.changed.notify_all();
}

/// What a panic said.
pub fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    (panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into())
}

/// Fails job `backup` whose writing panicked: its spools closed and removed, and
/// the job recorded failed for `why` unless the engine had begun it (the home's
/// next opening fails a job it left running).
fn after_panic(shared: &Shared, backup: u64, why: &str) {
    let meta = {
        let jobs = shared.backups.lock();
        let Some(job) = jobs.get(&backup) else {
            return;
        };
        for s in job.spools.values() {
            s.close(why);
        }
        Unwritten {
            client: job.client.clone(),
            tag: job.tag,
            asked_ns: job.asked_ns,
            doc: job.doc.clone(),
        }
    };
    let begun = Home::open_catalog_unlocked(&shared.home)
        .and_then(|c| Ok(c.job_by_tag(meta.tag)?))
        .is_ok_and(|j| j.is_some());
    if !begun {
        record_failed(shared, &meta, why);
    }
    let _ = std::fs::remove_dir_all(shared.backups.spool_dir.join(format!("{:016x}", meta.tag)));
}

/// Waits a little for a job to write and a free drive; none when no job is due
/// or no drive is free. The job is marked writing before it is handed over, with
/// the drives it takes: as many as it has streams, less one for each other job
/// that is being received (they will want a drive soon), at least one.
fn next_job(shared: &Shared) -> Option<(u64, Vec<usize>)> {
    reap(shared);
    let b = &shared.backups;
    let free = shared.drive_pool.free();
    let mut jobs = b.lock();
    if free == 0 {
        b.wait(jobs, Instant::now() + Duration::from_millis(250));
        return None;
    }
    let n = match pick(shared, &jobs) {
        Some(n) => n,
        None => {
            jobs = b.wait(jobs, Instant::now() + Duration::from_millis(250))?;
            pick(shared, &jobs)?
        }
    };
    let others = (jobs.iter())
        .filter(|(m, j)| **m != n && j.state == State::Receiving && j.failed.is_none())
        .count();
    let job = jobs.get_mut(&n)?;
    let want = job
        .doc
        .streams
        .len()
        .min(free.saturating_sub(others))
        .max(1);
    let drives = shared.drive_pool.take(want);
    if drives.is_empty() {
        return None;
    }
    job.state = State::Writing;
    Some((n, drives))
}

/// Fails the jobs with a stream whose connection broke off two timeouts ago and
/// was not sent again, and the jobs let in whose client sent nothing for the idle
/// limit while none of them waited for room on the spool (a client that began a
/// job and went away before it sent all its streams would hold its place for
/// ever).
fn reap(shared: &Shared) {
    // A stream whose connection broke off, and whose client did not come back:
    // sooner than the engine's idle limit, so the job's reason names the cut.
    for (n, why) in backups::abandoned(shared, shared.limits.timeout * 2) {
        backups::fail(shared, n, &why);
    }
    let idle = idle_limit(shared);
    if shared.backups.budget.pressed() {
        return;
    }
    let silent: Vec<u64> = (shared.backups.lock().iter())
        .filter(|(_, j)| j.state == State::Receiving && j.failed.is_none() && !j.complete())
        .filter(|(_, j)| j.active.elapsed() > idle)
        .map(|(n, _)| *n)
        .collect();
    for n in silent {
        let why = format!("the client sent nothing for {} s", idle.as_secs());
        backups::fail(shared, n, &why);
    }
}

/// How long a client may send nothing before its job fails: four timeouts.
fn idle_limit(shared: &Shared) -> Duration {
    shared.limits.timeout * 4
}

/// The job the drives take next, if one is due (see the module's rules).
fn pick(shared: &Shared, jobs: &BTreeMap<u64, Job>) -> Option<u64> {
    let ready = || {
        jobs.iter()
            .filter(|(_, j)| j.state == State::Receiving && j.failed.is_none())
    };
    if let Some((n, _)) = ready().find(|(_, j)| j.complete()) {
        return Some(*n);
    }
    if shared.backups.budget.pressed() {
        let most = ready().max_by_key(|(_, j)| j.counters.held_bytes());
        if let Some((n, _)) = most {
            return Some(*n);
        }
    }
    let floor = shared.start_rate_mb_s * 1e6;
    ready()
        .find(|(_, j)| {
            floor <= 0.0
                || j.first_block.is_some_and(|t| {
                    let s = t.elapsed().as_secs_f64();
                    s >= 1.0 && j.counters.received_bytes() as f64 / s >= floor
                })
        })
        .map(|(n, _)| *n)
}

/// Writes job `backup` from its spools on `drives`; its outcome.
fn write(shared: &Shared, backup: u64, drives: &[usize]) -> Outcome {
    let taken = {
        let mut jobs = shared.backups.lock();
        jobs.get_mut(&backup).map(|j| {
            let choice = j.choice.clone();
            let changes = (j.deletions_rx.take())
                .zip(choice)
                .map(|(deletions, choice)| ReceivedChanges { choice, deletions });
            (
                j.client.clone(),
                j.doc.clone(),
                j.tag,
                j.spools.clone(),
                changes,
            )
        })
    };
    let Some((client, doc, tag, spools, Some(changes))) = taken else {
        return Err(format!("backup {backup} is gone"));
    };
    shared.queue.set_state(backup, State::Writing);
    let outcome = run(
        shared,
        (backup, drives),
        (&client, doc, tag, changes),
        &spools,
    );
    let why = match &outcome {
        Ok(_) => "the job ended".to_string(),
        Err(e) => e.clone(),
    };
    for s in spools.values() {
        s.close(&why);
    }
    let dir = shared.backups.spool_dir.join(format!("{tag:016x}"));
    let _ = std::fs::remove_dir_all(dir);
    outcome
}

/// Runs the engine on the job; its outcome.
fn run(
    shared: &Shared,
    (backup, drives): (u64, &[usize]),
    (client, doc, tag, changes): (&str, Begin, u64, ReceivedChanges),
    spools: &HashMap<u16, Arc<StreamSpool>>,
) -> Outcome {
    let home = (shared.drive_pool)
        .enter(&shared.home)
        .map_err(|e| format!("open the home: {e}"))?;
    #[cfg(feature = "test-hooks")]
    if std::env::var("TAPELOOM_TEST_PANIC_JOB").is_ok_and(|n| n == doc.name) {
        panic!(
            "TAPELOOM_TEST_PANIC_JOB: a panic injected into job {}",
            doc.name
        );
    }
    let named = doc.encrypt.clone();
    let (mut opts, plan) = job_of(doc, tag);
    opts.drives = DriveSet::List(drives.to_vec());
    // Encrypted as it is written with the key its client named, else its pool's
    // (the server's own copies).
    opts.encrypt = (shared.keys)
        .for_job(&home.catalog, opts.pool.as_deref(), named.as_deref())
        .map_err(|e| e.to_string())?;
    let idle = idle_limit(shared);
    let progress = Arc::new(Progress::default());
    // On tape with the job, so a catalog rebuilt from the cartridges keeps it.
    opts.client = client.to_string();
    let mut id = None;
    let job = (&plan, &opts);
    let r = tapeloom_engine::backup_received(&home, job, changes, (idle, progress.clone()), |b| {
        id = Some(b.job_id);
        shared.queue.writing(backup, b.job_id, progress.clone());
        if let Err(e) = home.catalog.set_job_client(b.job_id, client) {
            error!(job = b.job_id, "record the job's client: {e}");
        }
        for inlet in b.inlets {
            match spools.get(&inlet.stream) {
                Some(s) => feed(s.clone(), inlet),
                None => inlet.cut("no spool for this stream".into()),
            }
        }
    });
    match (r, id) {
        (Ok(report), _) => {
            shared.metrics.job_errors(report.errors.len());
            serde_json::to_vec(&BackedUp::new(&report, "on".into()))
                .map_err(|e| format!("encode the job's document: {e}"))
        }
        (Err(e), Some(id)) => {
            warn!(job = id, client = %client, "job failed: {e}");
            Err(format!("job {id} failed: {e}"))
        }
        (Err(e), None) => Err(format!("the job did not begin: {e}")),
    }
}

/// Feeds a stream's inlet from its spool on a thread of its own, until the
/// stream's end or the job's.
fn feed(spool: Arc<StreamSpool>, inlet: Inlet) {
    spool.attach();
    let spawned = std::thread::Builder::new()
        .name(format!("feed {}", inlet.stream))
        .spawn(move || loop {
            let fed = match spool.pop(Duration::from_secs(1)) {
                Ok(Some(Item::Block(b))) => inlet.block(b),
                Ok(Some(Item::Note(path, why))) => inlet.error(path, why),
                Ok(Some(Item::Alive)) => inlet.alive(),
                Ok(Some(Item::End)) => {
                    let _ = inlet.end();
                    return;
                }
                Ok(None) => Ok(()),
                Err(closed) => {
                    inlet.cut(closed.0);
                    return;
                }
            };
            if fed.is_err() {
                return;
            }
        });
    if let Err(e) = spawned {
        error!("start a stream's feeder: {e}");
    }
}

/// The engine's options and plan of a client's job.
fn job_of(doc: Begin, tag: u64) -> (BackupOptions, RemotePlan) {
    let opts = BackupOptions {
        name: doc.name.clone(),
        block_size: doc.block_size,
        pool: doc.pool,
        set: doc.set,
        job_tag: Some(tag),
        ..BackupOptions::default()
    };
    let plan = RemotePlan {
        name: doc.name,
        streams: (doc.streams.into_iter())
            .map(|s| RemoteStream {
                name: s.name,
                source: s.source,
                root: s.root,
            })
            .collect(),
    };
    (opts, plan)
}

/// Records a job that never reached a drive as failed for `why`, so its client
/// and the admin see it among the jobs.
pub fn record_failed(shared: &Shared, meta: &Unwritten, why: &str) {
    if let Err(e) = record(&shared.home, meta, why) {
        error!(client = %meta.client, "record failed job {}: {e}", meta.doc.name);
    }
}

fn record(home: &Path, m: &Unwritten, why: &str) -> Result<i64, tapeloom_engine::Error> {
    let cat = Home::open_catalog_unlocked(home)?;
    let streams: Vec<Stream> = (m.doc.streams.iter().enumerate())
        .map(|(i, s)| Stream {
            stream: i as u16 + 1,
            name: s.name.clone(),
            source: s.source.clone().into_bytes(),
        })
        .collect();
    let id = cat.begin_job(
        m.tag,
        &m.doc.name,
        m.asked_ns,
        m.doc.block_size as u32,
        &streams,
    )?;
    cat.set_job_client(id, &m.client)?;
    cat.add_error(id, b"", why)?;
    let now = tapeloom_engine::clock::now().map_or(0, |t| t.as_nanos());
    let secs = (now - m.asked_ns).max(0) as f64 / 1e9;
    cat.finish_job(id, JobState::Failed, 0, 0, secs, now)?;
    warn!(job = id, client = %m.client, "job failed: {why}");
    Ok(id)
}

/// Jobs a server that stopped (killed, or its machine down) left on its spool:
/// each not yet on a drive recorded as failed, the blocks of all deleted. Their
/// clients were told by the broken connection.
pub fn recover(home: &Path, spool_dir: &Path) {
    let Ok(dirs) = std::fs::read_dir(spool_dir) else {
        return;
    };
    for d in dirs.flatten() {
        let meta = std::fs::read(d.path().join(META))
            .ok()
            .and_then(|b| serde_json::from_slice::<Unwritten>(&b).ok());
        // A job already on a drive has its own row (by its tag), which the home's
        // opening found left running and failed: it is not recorded twice.
        let begun = |m: &Unwritten| {
            Home::open_catalog_unlocked(home)
                .and_then(|c| Ok(c.job_by_tag(m.tag)?))
                .is_ok_and(|j| j.is_some())
        };
        if let Some(m) = meta.filter(|m| !begun(m)) {
            let why = "the server stopped while its client sent it; nothing of it was written";
            if let Err(e) = record(home, &m, why) {
                error!(client = %m.client, "record failed job {}: {e}", m.doc.name);
            }
        }
        let _ = std::fs::remove_dir_all(d.path());
    }
}
