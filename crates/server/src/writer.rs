//! Each client's job on a thread of its own, from its admission to its end, and
//! the thread that hands the free drives (`drives.rs`) to the jobs.
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
//!
//! A job's failure ([`fail`]) and its end ([`ended`]) are told here, whoever
//! finds them (a request, the job's thread, the drives' thread): to the jobs'
//! state, the catalog, the queue and the site.

use crate::backup_jobs::{Job, Outcome, Unwritten};
use crate::drives::Entered;
use crate::metrics::ThreadKind;
use crate::queue::State;
use crate::work::Work;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::sync::PoisonError;
use std::time::{Duration, Instant};
use tapeloom_engine::{
    BackupOptions, DriveSet, Inlet, Progress, ReceiveStop, Receiving, RemotePlan, RemoteStream,
    SetChoice,
};
use tapeloom_ops::clients;
use tapeloom_proto::backup::Begin;
use tracing::{error, warn};

/// Starts the thread that hands the free drives to the jobs due: each job due
/// is given the drives it takes (see [`next_job`]), as long as a drive is free.
pub fn start(work: Arc<Work>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("drives".into())
        .spawn(move || loop {
            let Some((backup, drives, grant)) = next_job(&work) else {
                continue;
            };
            if grant.send(drives.clone()).is_err() {
                // Its thread is gone (it panicked): the drives go to the next job.
                work.drive_pool.give(&drives);
                ended(&work, backup, Err("the job's thread is gone".into()));
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
    work: &Arc<Work>,
    backup: u64,
    meta: Unwritten,
    choice: SetChoice,
) -> Result<Started, String> {
    let (tx, rx) = sync_channel(1);
    let s = Arc::clone(work);
    std::thread::Builder::new()
        .name(format!("job {backup}"))
        .spawn(move || job_life(&s, backup, (meta, choice), tx))
        .map_err(|e| format!("start the job's thread: {e}"))?;
    rx.recv()
        .unwrap_or_else(|_| Err("the job's thread ended before it began the job".into()))
}

/// Job `backup` from its admission to its end, under a panic guard.
fn job_life(
    work: &Work,
    backup: u64,
    (meta, choice): (Unwritten, SetChoice),
    started: SyncSender<Result<Started, String>>,
) {
    let held = std::cell::RefCell::new(Vec::new());
    let client = meta.client.clone();
    let lived = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        live(work, backup, (meta, choice), &started, &held)
    }));
    let copy_due = match &lived {
        Ok(Some(Ok(doc))) => ended_whole(doc),
        _ => None,
    };
    let outcome = match lived {
        Ok(None) => None,
        Ok(Some(o)) => Some(o),
        Err(panic) => {
            work.metrics.panicked(ThreadKind::DriveWriter);
            let why = format!("the drive's writer panicked: {}", panic_message(&panic));
            error!(backup, "{why}");
            let _ = started.try_send(Err(why.clone()));
            after_panic(work, backup, &why);
            Some(Err(why))
        }
    };
    if let Some(outcome) = outcome {
        // Ended first, so that a job shown writing always holds its drives.
        ended(work, backup, outcome);
    }
    work.drive_pool.give(&held.borrow());
    work.backups.changed.notify_all();
    // A job that ended whole is copied when its pool names a copy pool.
    if let Some(job_id) = copy_due {
        crate::copies::after_job(work, job_id, &client);
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
/// was given drives ([`fail`] ended it).
fn live(
    work: &Work,
    backup: u64,
    (meta, choice): (Unwritten, SetChoice),
    started: &SyncSender<Result<Started, String>>,
    held: &std::cell::RefCell<Vec<usize>>,
) -> Option<Outcome> {
    let home = match work.drive_pool.enter(&work.home) {
        Ok(h) => h,
        Err(e) => {
            let _ = started.send(Err(format!("open the home: {e}")));
            return None;
        }
    };
    let mut receiving = match begin(work, &home, &meta, choice) {
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
        record_begun_failed(work, (job_id, meta.asked_ns), why);
        return None;
    }
    let Some(given) = wait_for_drives(work, backup, &drives) else {
        match failure(work, backup) {
            // `fail` recorded why.
            Some(_) => receiving.abandon(&home),
            None => {
                // The server stops: the job stays on the stages for its next start.
                if let Some(j) = work.backups.lock().get_mut(&backup) {
                    j.halted = true;
                }
                drop(receiving);
            }
        }
        return None;
    };
    *held.borrow_mut() = given.clone();
    Some(write(work, backup, (&home, receiving), &given))
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
fn after_panic(work: &Work, backup: u64, why: &str) {
    let (meta, job_id) = {
        let mut jobs = work.backups.lock();
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
    work.backups.close(backup, why);
    let Some(id) = job_id else {
        return record_failed(work, &meta, why);
    };
    record_begun_failed(work, (id, meta.asked_ns), why);
}

/// Records job `job_id`, asked for at `asked_ns` and begun in the catalog, as
/// failed for `why`.
pub fn record_begun_failed(work: &Work, (job_id, asked_ns): (i64, i64), why: &str) {
    let recorded = tapeloom_ops::Conn::open(&work.home)
        .and_then(|c| clients::fail_begun(&c, (job_id, asked_ns), why));
    if let Err(e) = recorded {
        error!(job = job_id, "record the job failed: {e}");
    }
    warn!(job = job_id, "job failed: {why}");
}

/// Fails job `backup` for `why`: nothing more is taken of it. A job not yet let
/// in is over at once (recorded failed in the catalog, after the jobs' lock is
/// released); one let in is given up by its own thread (`writer`), which
/// deletes what it staged and records it.
pub fn fail(work: &Work, backup: u64, why: &str) {
    let mut jobs = work.backups.lock();
    let Some(job) = jobs.get_mut(&backup) else {
        return;
    };
    if job.failed.is_some() || job.outcome.is_some() {
        return;
    }
    job.failed = Some(why.to_string());
    let begun = job.staging.as_ref().map(|(id, _)| (*id, job.asked_ns));
    let unbegun = begun.is_none() && !job.admitting;
    let unwritten = (job.state != State::Writing).then(|| {
        job.outcome = Some(Err(why.to_string()));
        job.state = State::Failed;
        job.ended = Some(Instant::now());
        Unwritten {
            client: job.client.clone(),
            tag: job.tag,
            asked_ns: job.asked_ns,
            doc: job.doc.clone(),
        }
    });
    drop(jobs);
    work.backups.close(backup, why);
    work.backups.changed.notify_all();
    if let Some(meta) = unwritten {
        if unbegun {
            record_failed(work, &meta, why);
        }
        // Its thread deletes what it staged.
        if let Some(b) = begun {
            record_begun_failed(work, b, why);
        }
        work.queue.ended(backup, Some(why.to_string()));
        work.backups.changed.notify_all();
    }
}

/// The job's end is over: its outcome kept for its client.
pub fn ended(work: &Work, backup: u64, outcome: Outcome) {
    let why = outcome.as_ref().err().cloned();
    if let Some(j) = work.backups.lock().get_mut(&backup) {
        j.state = if why.is_some() {
            State::Failed
        } else {
            State::Ended
        };
        j.outcome = Some(outcome);
        j.ended = Some(Instant::now());
    }
    if let Some(site) = &work.site {
        site.ended(&work.home, backup, why.as_deref());
    }
    work.queue.ended(backup, why);
    work.backups.changed.notify_all();
}

/// Why job `backup` failed, if it did.
fn failure(work: &Work, backup: u64) -> Option<String> {
    (work.backups.lock().get(&backup)).and_then(|j| j.failed.clone())
}

/// Waits until job `backup` is given drives; none once it failed or the server
/// stops its jobs, unless the drives' thread took its grant already (the drives
/// are on their way: the job takes them, and fails on them).
fn wait_for_drives(work: &Work, backup: u64, rx: &Receiver<Vec<usize>>) -> Option<Vec<usize>> {
    loop {
        match rx.recv_timeout(Duration::from_millis(250)) {
            Ok(d) => return Some(d),
            Err(RecvTimeoutError::Timeout) => {
                let jobs = work.backups.lock();
                let j = jobs.get(&backup)?;
                if j.grant.is_some() && (work.halting() || j.failed.is_some()) {
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
    work: &Work,
    home: &Entered<'_>,
    meta: &Unwritten,
    choice: SetChoice,
) -> Result<Receiving, String> {
    let named = meta.doc.encrypt.clone();
    let (mut opts, plan) = job_of(meta.doc.clone(), meta.tag);
    // Encrypted as it is written with the key its client named, else its pool's
    // (the server's own copies).
    opts.encrypt = (work.keys)
        .for_job(&**home, opts.pool.as_deref(), named.as_deref())
        .map_err(|e| e.to_string())?;
    // On tape with the job, so a catalog rebuilt from the cartridges keeps it.
    opts.client = meta.client.clone();
    let idle = idle_limit(work);
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
fn next_job(work: &Work) -> Option<(u64, Vec<usize>, SyncSender<Vec<usize>>)> {
    reap(work);
    let b = &work.backups;
    let free = work.drive_pool.free();
    let mut jobs = b.lock();
    if free == 0 || work.halting() {
        b.wait(jobs, Instant::now() + Duration::from_millis(250));
        return None;
    }
    let n = match pick(work, &jobs) {
        Some(n) => n,
        None => {
            jobs = b.wait(jobs, Instant::now() + Duration::from_millis(250))?;
            pick(work, &jobs)?
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
    let drives = work.drive_pool.take(want);
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
fn reap(work: &Work) {
    for j in work.backups.lock().values() {
        if let Some((_, stop)) = j.staging.as_ref().filter(|_| j.outcome.is_none()) {
            j.counters.held_now(stop.held_bytes());
        }
    }
    // A stream whose connection broke off, and whose client did not come back:
    // sooner than the engine's idle limit, so the job's reason names the cut.
    for (n, why) in work.backups.abandoned(work.limits.timeout * 2) {
        fail(work, n, &why);
    }
    let idle = idle_limit(work);
    if work.backups.pressed() {
        return;
    }
    let silent: Vec<u64> = (work.backups.lock().iter())
        .filter(|(_, j)| j.state == State::Receiving && j.failed.is_none() && !j.complete())
        .filter(|(_, j)| j.active.elapsed() > idle)
        .map(|(n, _)| *n)
        .collect();
    for n in silent {
        let why = format!("the client sent nothing for {} s", idle.as_secs());
        fail(work, n, &why);
    }
}

/// How long a client may send nothing before its job fails: four timeouts.
fn idle_limit(work: &Work) -> Duration {
    work.limits.timeout * 4
}

/// The job the drives take next, if one is due (see the module's rules).
fn pick(work: &Work, jobs: &BTreeMap<u64, Job>) -> Option<u64> {
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
    let floor = work.start_rate_mb_s * 1e6;
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
    work: &Work,
    backup: u64,
    (home, receiving): (&Entered<'_>, Receiving),
    drives: &[usize],
) -> Outcome {
    let job_id = receiving.job_id;
    let deletions = work
        .backups
        .lock()
        .get_mut(&backup)
        .and_then(|j| j.deletions_rx.take());
    let Some(deletions) = deletions else {
        receiving.abandon(home);
        return Err(format!("backup {backup} is gone"));
    };
    work.queue.set_state(backup, State::Writing);
    let progress = Arc::new(Progress::default());
    work.queue.writing(backup, job_id, progress.clone());
    #[cfg(feature = "test-hooks")]
    if std::env::var("TAPELOOM_TEST_PANIC_JOB").is_ok_and(|n| {
        work.backups
            .lock()
            .get(&backup)
            .is_some_and(|j| j.doc.name == n)
    }) {
        panic!("TAPELOOM_TEST_PANIC_JOB: a panic injected into job {backup}");
    }
    let client = (work.backups.lock().get(&backup)).map_or(String::new(), |j| j.client.clone());
    let r = receiving.write(home, DriveSet::List(drives.to_vec()), deletions, progress);
    if let Some(j) = work.backups.lock().get(&backup) {
        j.counters.held_now(0);
    }
    match r {
        Ok(report) => {
            work.metrics.job_errors(report.errors.len());
            serde_json::to_vec(&tapeloom_ops::docs::backed_up(&report, "on".into()))
                .map_err(|e| format!("encode the job's document: {e}"))
        }
        Err(e) => {
            warn!(job = job_id, client = %client, "job failed: {e}");
            if failure(work, backup).is_some() {
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
pub fn record_failed(work: &Work, meta: &Unwritten, why: &str) {
    if let Err(e) = record(&work.home, meta, why) {
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
pub fn recover(work: &Arc<Work>, unfinished: Vec<i64>) {
    (work.resuming.lock().unwrap_or_else(PoisonError::into_inner)).extend(&unfinished);
    for id in unfinished {
        let s = Arc::clone(work);
        let spawned = std::thread::Builder::new()
            .name(format!("resume {id}"))
            .spawn(move || resume(&s, id));
        if let Err(e) = spawned {
            error!(job = id, "start the thread resuming the job: {e}");
            (work.resuming.lock().unwrap_or_else(PoisonError::into_inner)).remove(&id);
        }
    }
}

/// Resumes job `id` on a free drive, shown in the queue as it goes.
fn resume(work: &Work, id: i64) {
    /// Takes the job off the list of those resuming however its resume ends.
    struct Ended<'a>(&'a Work, i64);
    impl Drop for Ended<'_> {
        fn drop(&mut self) {
            (self
                .0
                .resuming
                .lock()
                .unwrap_or_else(PoisonError::into_inner))
            .remove(&self.1);
        }
    }
    let _ended = Ended(work, id);
    resume_on_a_drive(work, id);
}

/// [`resume`]'s work: job `id` resumed on a free drive.
fn resume_on_a_drive(work: &Work, id: i64) {
    let Some(drive) = work.drive_pool.wait_for_one(|| work.draining()) else {
        return;
    };
    let mut home = match work.drive_pool.enter(&work.home) {
        Ok(h) => h,
        Err(e) => return error!(job = id, "open the home to resume the job: {e}"),
    };
    // An encrypted job goes on with its data key, which a key the server holds
    // unwraps.
    home.keys = work.keys.all().to_vec();
    let Ok(Some((client, name))) = clients::owner(&*home, id) else {
        return;
    };
    let entry = work.queue.add(&client, &name, "resume");
    work.queue.set_state(entry, State::Writing);
    let progress = Arc::new(Progress::default());
    work.queue.writing(entry, id, progress.clone());
    let on = (DriveSet::List(drive.indexes.clone()), Some(&home.stages));
    match tapeloom_engine::resume_job_on(&home, id, on, progress) {
        Ok(r) => {
            tracing::info!(job = id, status = %r.status, "resumed a job the server had left on the stages");
            work.queue.ended(entry, None);
        }
        Err(e) => {
            warn!(job = id, "resume the job: {e}");
            work.queue.ended(entry, Some(e.to_string()));
        }
    }
}
