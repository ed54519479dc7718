//! Each client's job on a thread of its own, from its admission to its end, and
//! the thread that hands the free drives (`super::drives`) to the jobs.
//!
//! A job let in is begun in the catalog at once and its streams are received onto
//! the home's stages (`tapeloom_engine::receive_staged`): what its client sent and
//! the server acknowledged is flushed and recorded there, and a restarted server
//! writes it ([`recover`]). When the job is given drives it writes from the stages
//! as its streams come (`tapeloom_engine::Receiving::write`).
//!
//! Which job gets drives next, when a drive is free:
//! 1. a job whose every stream is staged, oldest first (the drive writes it at
//!    the stage's speed);
//! 2. when a client waits for room on full stages, the job holding most of them;
//! 3. a job whose client sends at least the start rate (the drives' lowest speed
//!    step, where the library knows it; else any job at once), so a fast client's
//!    blocks go to the drive as they come.
//!
//! A slow client's job thus waits on the stages until it is whole, and the drives
//! serve the others meanwhile: a drive never waits for a slow client.

use super::backups::{self, Job, Outcome};
use super::drives::Entered;
use super::metrics::ThreadKind;
use super::queue::State;
use super::serve::Shared;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tapeloom_engine::{
    BackupOptions, DriveSet, Inlet, Progress, ReceiveStop, Receiving, RemotePlan, RemoteStream,
    SetChoice,
};
use tapeloom_ops::clients;
use tapeloom_proto::backup::Begin;
use tracing::{error, warn};

/// A client's job as it asked for it, before it is begun in the catalog.
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

/// Starts the thread that hands the free drives to the jobs due: each job due
/// is given the drives it takes (see [`next_job`]), as long as a drive is free.
pub fn start(shared: Arc<Shared>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("drives".into())
        .spawn(move || loop {
            let Some((backup, drives, grant)) = next_job(&shared) else {
                continue;
            };
            if grant.send(drives.clone()).is_err() {
                // Its thread is gone (it panicked): the drives go to the next job.
                shared.drive_pool.give(&drives);
                backups::ended(&shared, backup, Err("the job's thread is gone".into()));
            }
        })
        .map(|_| ())
}

/// What a job's thread gives the request that let the job in.
pub struct Started {
    /// The job's id in the catalog.
    pub job_id: i64,
    /// Each stream's way in.
    pub inlets: Vec<Inlet>,
    /// What stops its receiving.
    pub stop: ReceiveStop,
    /// Where its drives will be given to it.
    pub grant: SyncSender<Vec<usize>>,
}

/// Starts job `backup`'s thread, which begins the job on the stages and, once
/// its streams may come, answers with their ways in; then waits for its drives
/// and writes it. A job whose thread panics fails with the panic's message, is
/// counted in `/metrics`, and its drives go to the next jobs.
pub fn start_job(
    shared: &Arc<Shared>,
    backup: u64,
    meta: Unwritten,
    choice: SetChoice,
) -> Result<Started, String> {
    let (tx, rx) = sync_channel(1);
    let s = Arc::clone(shared);
    std::thread::Builder::new()
        .name(format!("job {backup}"))
        .spawn(move || job_life(&s, backup, (meta, choice), tx))
        .map_err(|e| format!("start the job's thread: {e}"))?;
    rx.recv()
        .unwrap_or_else(|_| Err("the job's thread ended before it began the job".into()))
}

/// Job `backup` from its admission to its end, under a panic guard.
fn job_life(
    shared: &Shared,
    backup: u64,
    (meta, choice): (Unwritten, SetChoice),
    started: SyncSender<Result<Started, String>>,
) {
    let held = std::cell::RefCell::new(Vec::new());
    let client = meta.client.clone();
    let lived = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        live(shared, backup, (meta, choice), &started, &held)
    }));
    let copy_due = match &lived {
        Ok(Some(Ok(doc))) => ended_whole(doc),
        _ => None,
    };
    let outcome = match lived {
        Ok(None) => None,
        Ok(Some(o)) => Some(o),
        Err(panic) => {
            shared.metrics.panicked(ThreadKind::DriveWriter);
            let why = format!("the drive's writer panicked: {}", panic_message(&panic));
            error!(backup, "{why}");
            let _ = started.try_send(Err(why.clone()));
            after_panic(shared, backup, &why);
            Some(Err(why))
        }
    };
    if let Some(outcome) = outcome {
        // Ended first, so that a job shown writing always holds its drives.
        backups::ended(shared, backup, outcome);
    }
    shared.drive_pool.give(&held.borrow());
    shared.backups.changed.notify_all();
    // A job that ended whole is copied when its pool names a copy pool.
    if let Some(job_id) = copy_due {
        super::copies::after_job(shared, job_id, &client);
    }
}

/// The job a client's job document names, when it ended ok or partial.
fn ended_whole(doc: &[u8]) -> Option<i64> {
    let d = serde_json::from_slice::<serde_json::Value>(doc).ok()?;
    let ok = matches!(d["status"].as_str(), Some("ok" | "partial"));
    d["job_id"].as_i64().filter(|_| ok)
}

/// Begins job `backup` on the stages, tells `started`, waits for drives (put in
/// `held`) and writes the job; its outcome, none when the job failed before it
/// was given drives (`backups::fail` ended it).
fn live(
    shared: &Shared,
    backup: u64,
    (meta, choice): (Unwritten, SetChoice),
    started: &SyncSender<Result<Started, String>>,
    held: &std::cell::RefCell<Vec<usize>>,
) -> Option<Outcome> {
    let home = match shared.drive_pool.enter(&shared.home) {
        Ok(h) => h,
        Err(e) => {
            let _ = started.send(Err(format!("open the home: {e}")));
            return None;
        }
    };
    let mut receiving = match begin(shared, &home, &meta, choice) {
        Ok(r) => r,
        Err(why) => {
            let _ = started.send(Err(why));
            return None;
        }
    };
    let (grant, drives) = sync_channel(1);
    let told = started.send(Ok(Started {
        job_id: receiving.job_id,
        inlets: receiving.take_inlets(),
        stop: receiving.stopper(),
        grant,
    }));
    if told.is_err() {
        let why = "the request that let the job in went away";
        let job_id = receiving.job_id;
        receiving.abandon(&home);
        record_begun_failed(shared, (job_id, meta.asked_ns), why);
        return None;
    }
    let Some(given) = wait_for_drives(shared, backup, &drives) else {
        match failure(shared, backup) {
            // `backups::fail` recorded why.
            Some(_) => receiving.abandon(&home),
            None => {
                // The server stops: the job stays on the stages for its next start.
                if let Some(j) = shared.backups.lock().get_mut(&backup) {
                    j.halted = true;
                }
                drop(receiving);
            }
        }
        return None;
    };
    *held.borrow_mut() = given.clone();
    Some(write(shared, backup, (&home, receiving), &given))
}

/// What a panic said.
pub fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    (panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into())
}

/// Fails job `backup` whose thread panicked for `why`: its receiving stopped,
/// and the job recorded failed (the panic left it running in the catalog, or
/// never began it). What it staged stays for the next start.
fn after_panic(shared: &Shared, backup: u64, why: &str) {
    let (meta, job_id) = {
        let mut jobs = shared.backups.lock();
        let Some(job) = jobs.get_mut(&backup) else {
            return;
        };
        job.failed.get_or_insert_with(|| why.to_string());
        let meta = Unwritten {
            client: job.client.clone(),
            tag: job.tag,
            asked_ns: job.asked_ns,
            doc: job.doc.clone(),
        };
        (meta, job.staging.as_ref().map(|(id, _)| *id))
    };
    backups::close(shared, backup, why);
    let Some(id) = job_id else {
        return record_failed(shared, &meta, why);
    };
    record_begun_failed(shared, (id, meta.asked_ns), why);
}

/// Records job `job_id`, asked for at `asked_ns` and begun in the catalog, as
/// failed for `why`.
pub fn record_begun_failed(shared: &Shared, (job_id, asked_ns): (i64, i64), why: &str) {
    let recorded = tapeloom_ops::Conn::open(&shared.home)
        .and_then(|c| clients::fail_begun(&c, (job_id, asked_ns), why));
    if let Err(e) = recorded {
        error!(job = job_id, "record the job failed: {e}");
    }
    warn!(job = job_id, "job failed: {why}");
}

/// Why job `backup` failed, if it did.
fn failure(shared: &Shared, backup: u64) -> Option<String> {
    (shared.backups.lock().get(&backup)).and_then(|j| j.failed.clone())
}

/// Waits until job `backup` is given drives; none once it failed or the server
/// stops its jobs, unless the drives' thread took its grant already (the drives
/// are on their way: the job takes them, and fails on them).
fn wait_for_drives(shared: &Shared, backup: u64, rx: &Receiver<Vec<usize>>) -> Option<Vec<usize>> {
    loop {
        match rx.recv_timeout(Duration::from_millis(250)) {
            Ok(d) => return Some(d),
            Err(RecvTimeoutError::Timeout) => {
                let jobs = shared.backups.lock();
                let j = jobs.get(&backup)?;
                if j.grant.is_some() && (shared.halting() || j.failed.is_some()) {
                    return None;
                }
            }
            Err(RecvTimeoutError::Disconnected) => return None,
        }
    }
}

/// Records the job in the catalog and starts receiving its streams onto the
/// stages.
fn begin(
    shared: &Shared,
    home: &Entered<'_>,
    meta: &Unwritten,
    choice: SetChoice,
) -> Result<Receiving, String> {
    let named = meta.doc.encrypt.clone();
    let (mut opts, plan) = job_of(meta.doc.clone(), meta.tag);
    // Encrypted as it is written with the key its client named, else its pool's
    // (the server's own copies).
    opts.encrypt = (shared.keys)
        .for_job(&**home, opts.pool.as_deref(), named.as_deref())
        .map_err(|e| e.to_string())?;
    // On tape with the job, so a catalog rebuilt from the cartridges keeps it.
    opts.client = meta.client.clone();
    let idle = idle_limit(shared);
    let r = tapeloom_engine::receive_staged(home, &home.stages, (&plan, &opts), choice, idle)
        .map_err(|e| format!("the job did not begin: {e}"))?;
    if let Err(e) = clients::record_for(&**home, r.job_id, &meta.client) {
        error!(job = r.job_id, "record the job's client: {e}");
    }
    Ok(r)
}

/// Waits a little for a job to write and a free drive; none when no job is due
/// or no drive is free. The job is marked writing before it is handed over, with
/// the drives it takes: as many as it has streams, less one for each other job
/// that is being received (they will want a drive soon), at least one.
fn next_job(shared: &Shared) -> Option<(u64, Vec<usize>, SyncSender<Vec<usize>>)> {
    reap(shared);
    let b = &shared.backups;
    let free = shared.drive_pool.free();
    let mut jobs = b.lock();
    if free == 0 || shared.halting() {
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
    let grant = job.grant.take()?;
    let drives = shared.drive_pool.take(want);
    if drives.is_empty() {
        job.grant = Some(grant);
        return None;
    }
    job.state = State::Writing;
    Some((n, drives, grant))
}

/// Fails the jobs with a stream whose connection broke off two timeouts ago and
/// was not sent again, and the jobs let in whose client sent nothing for the idle
/// limit while none of them waited for room on the stages (a client that began a
/// job and went away before it sent all its streams would hold its place for
/// ever). Each job's bytes held on the stages are counted anew.
fn reap(shared: &Shared) {
    for j in shared.backups.lock().values() {
        if let Some((_, stop)) = j.staging.as_ref().filter(|_| j.outcome.is_none()) {
            j.counters.held_now(stop.held_bytes());
        }
    }
    // A stream whose connection broke off, and whose client did not come back:
    // sooner than the engine's idle limit, so the job's reason names the cut.
    for (n, why) in backups::abandoned(shared, shared.limits.timeout * 2) {
        backups::fail(shared, n, &why);
    }
    let idle = idle_limit(shared);
    if shared.backups.pressed() {
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
    let pressed = (jobs.values()).any(|j| j.staging.as_ref().is_some_and(|(_, s)| s.pressed()));
    if pressed {
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

/// Writes job `backup`, begun in `home` as `receiving`, on `drives`; its
/// outcome. A job its server failed (its client went away, or sent what the
/// server does not take) leaves nothing on the stages; one that failed otherwise
/// (a drive, or the server stopping) leaves what it staged for the next start.
fn write(
    shared: &Shared,
    backup: u64,
    (home, receiving): (&Entered<'_>, Receiving),
    drives: &[usize],
) -> Outcome {
    let job_id = receiving.job_id;
    let deletions = shared
        .backups
        .lock()
        .get_mut(&backup)
        .and_then(|j| j.deletions_rx.take());
    let Some(deletions) = deletions else {
        receiving.abandon(home);
        return Err(format!("backup {backup} is gone"));
    };
    shared.queue.set_state(backup, State::Writing);
    let progress = Arc::new(Progress::default());
    shared.queue.writing(backup, job_id, progress.clone());
    #[cfg(feature = "test-hooks")]
    if std::env::var("TAPELOOM_TEST_PANIC_JOB").is_ok_and(|n| {
        shared
            .backups
            .lock()
            .get(&backup)
            .is_some_and(|j| j.doc.name == n)
    }) {
        panic!("TAPELOOM_TEST_PANIC_JOB: a panic injected into job {backup}");
    }
    let client = (shared.backups.lock().get(&backup)).map_or(String::new(), |j| j.client.clone());
    let r = receiving.write(home, DriveSet::List(drives.to_vec()), deletions, progress);
    if let Some(j) = shared.backups.lock().get(&backup) {
        j.counters.held_now(0);
    }
    match r {
        Ok(report) => {
            shared.metrics.job_errors(report.errors.len());
            serde_json::to_vec(&tapeloom_ops::docs::backed_up(&report, "on".into()))
                .map_err(|e| format!("encode the job's document: {e}"))
        }
        Err(e) => {
            warn!(job = job_id, client = %client, "job failed: {e}");
            if failure(shared, backup).is_some() {
                if let Err(e) = tapeloom_engine::drop_staged_job(home, job_id, &home.stages) {
                    error!(job = job_id, "delete what the job staged: {e}");
                }
            }
            Err(format!("job {job_id} failed: {e}"))
        }
    }
}

/// The engine's options and plan of a client's job.
pub fn job_of(doc: Begin, tag: u64) -> (BackupOptions, RemotePlan) {
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

fn record(home: &Path, m: &Unwritten, why: &str) -> tapeloom_ops::Result<()> {
    let conn = tapeloom_ops::Conn::open(home)?;
    // A job begun already: the engine recorded how it ended.
    if let Some(id) = clients::record_failed(&conn, (&m.client, m.tag, m.asked_ns), &m.doc, why)? {
        warn!(job = id, client = %m.client, "job failed: {why}");
    }
    Ok(())
}

/// Resumes, each on a thread of its own, the jobs `unfinished` that a server
/// which stopped (killed, its machine down, or told to stop) left on the stages:
/// as `stage resume` does, each is written from what it staged on a free drive;
/// a stream whose end was staged is whole, a cut one is named among the job's
/// errors and the job ends partial.
pub fn recover(shared: &Arc<Shared>, unfinished: Vec<i64>) {
    for id in unfinished {
        let s = Arc::clone(shared);
        let spawned = std::thread::Builder::new()
            .name(format!("resume {id}"))
            .spawn(move || resume(&s, id));
        if let Err(e) = spawned {
            error!(job = id, "start the thread resuming the job: {e}");
        }
    }
}

/// Resumes job `id` on a free drive, shown in the queue as it goes.
fn resume(shared: &Shared, id: i64) {
    let Some(drive) = shared.drive_pool.wait_for_one(|| shared.draining()) else {
        return;
    };
    let mut home = match shared.drive_pool.enter(&shared.home) {
        Ok(h) => h,
        Err(e) => return error!(job = id, "open the home to resume the job: {e}"),
    };
    // An encrypted job goes on with its data key, which a key the server holds
    // unwraps.
    home.keys = shared.keys.all().to_vec();
    let Ok(Some((client, name))) = clients::owner(&*home, id) else {
        return;
    };
    let entry = shared.queue.add(&client, &name, "resume");
    shared.queue.set_state(entry, State::Writing);
    let progress = Arc::new(Progress::default());
    shared.queue.writing(entry, id, progress.clone());
    let on = (DriveSet::List(drive.indexes.clone()), Some(&home.stages));
    match tapeloom_engine::resume_job_on(&home, id, on, progress) {
        Ok(r) => {
            tracing::info!(job = id, status = %r.status, "resumed a job the server had left on the stages");
            shared.queue.ended(entry, None);
        }
        Err(e) => {
            warn!(job = id, "resume the job: {e}");
            shared.queue.ended(entry, Some(e.to_string()));
        }
    }
}
