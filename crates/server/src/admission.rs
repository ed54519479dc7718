//! A backup's way into the server's queue: it waits for a place (its client's
//! jobs and the drives' jobs under their limits, no older job passed), for
//! [`LONG_POLL`] at most per request, and is let in: its set, level and base
//! chosen (`tapeloom_engine::choose_set`), its job begun on the stages by its
//! own thread (`writer::start_job`), and its streams awaited. A scheduled job
//! takes a place as a client's does ([`enter_scheduled`]).

use crate::backup_jobs::{random_tag, Job, Unwritten};
use crate::http::{Answer, LONG_POLL};
use crate::inlet::StreamInlet;
use crate::work::Work;
use crate::writer::{self, fail};
use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc::sync_channel;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tapeloom_engine::{BaseTree, SetChoice};
use tapeloom_format::Level;
use tapeloom_proto::backup::{level_named, Begin, Begun, State, Waiting};

/// Job `doc` of `client` joins the server's queue as backup `backup` (a number
/// [`crate::queue::Queue::add`] gave, or the site's ticket's), and waits for a
/// place.
pub fn enter(work: &Arc<Work>, client: &str, doc: Begin, backup: u64) -> Answer {
    if work.queue.counters(backup).is_none() {
        work.queue.add_as(backup, client, &doc.name, "client");
    }
    let (deletions_tx, deletions_rx) = sync_channel(1);
    let job = Job {
        client: client.to_string(),
        tag: random_tag(),
        asked_ns: tapeloom_engine::clock::now().map_or(0, |t| t.as_nanos()),
        state: State::Waiting,
        spools: HashMap::new(),
        staging: None,
        grant: None,
        halted: false,
        sending: HashMap::new(),
        ended_streams: 0,
        first_block: None,
        active: Instant::now(),
        counters: work.queue.counters(backup).unwrap_or_default(),
        failed: None,
        outcome: None,
        ended: None,
        doc,
        choice: None,
        admitting: false,
        base: Arc::default(),
        deletions_tx: Some(deletions_tx),
        deletions_rx: Some(deletions_rx),
    };
    work.backups.lock().insert(backup, job);
    work.backups.changed.notify_all();
    admit_or_wait(work, backup)
}

/// The answer to a job asked for while the server stops: 503, and the client
/// may try again once it runs again (`Retry-After`).
pub fn stopping() -> Answer {
    Answer::error(503, "the server is stopping: try again once it runs again")
}

/// Stops taking jobs: those waiting for a place fail (their clients are
/// answered 503 when they ask again); those let in go on.
pub fn stop_admitting(work: &Work) {
    let waiting: Vec<u64> = (work.backups.lock().iter())
        .filter(|(_, j)| j.state == State::Waiting && j.failed.is_none())
        .map(|(n, _)| *n)
        .collect();
    for n in waiting {
        fail(work, n, "the server stopped before the job was let in");
    }
}

/// Waits up to [`LONG_POLL`] for job `backup` to be let in: its `Begun`, or `202`.
pub fn admit_or_wait(work: &Arc<Work>, backup: u64) -> Answer {
    let until = Instant::now() + LONG_POLL;
    let b = &work.backups;
    let mut jobs = b.lock();
    loop {
        let Some(job) = jobs.get(&backup) else {
            return Answer::error(404, &format!("no backup {backup}"));
        };
        if job.state == State::Waiting && work.draining() {
            return stopping();
        }
        if let Some(why) = &job.failed {
            return Answer::error(409, why);
        }
        if job.state != State::Waiting || (!job.admitting && may_enter(work, &jobs, backup)) {
            break;
        }
        match b.wait(jobs, until) {
            Some(g) => jobs = g,
            None => return waiting(&b.lock(), backup),
        }
    }
    let waiting = jobs.get(&backup).is_some_and(|j| j.state == State::Waiting);
    if waiting {
        drop(jobs);
        if let Err(a) = let_in(work, backup) {
            return a;
        }
        jobs = b.lock();
    }
    let Some(job) = jobs.get(&backup) else {
        return Answer::error(404, &format!("no backup {backup}"));
    };
    if let Some(why) = &job.failed {
        return Answer::error(409, why);
    }
    let Some(c) = &job.choice else {
        return Answer::error(409, &format!("backup {backup} was not let in"));
    };
    let mut begun = Begun {
        backup,
        tag: job.tag,
        block_size: job.doc.block_size,
        level: Some(c.level.name().to_string()),
        base_job: c.base.as_ref().map(|b| b.id),
        promoted: c.promoted.clone(),
        tail: 0,
        encrypt: None,
        keepalive_ms: Some(keepalive_every(work).as_millis() as u64),
    };
    let (pool, named) = (job.doc.pool.clone(), job.doc.encrypt.clone());
    drop(jobs);
    begun.encrypt = crate::keys::sealed_with(&work.home, pool.as_deref(), named.as_deref());
    begun.tail = crate::keys::tail(begun.encrypt.as_deref());
    Answer::json(&begun)
}

/// How often a client with nothing to send says it is alive: a quarter of the
/// timeout, which a socket may be silent for (and a job for four).
fn keepalive_every(work: &Work) -> Duration {
    (work.limits.timeout / 4).max(Duration::from_millis(100))
}

/// The `202` answer of a job not let in or not over.
pub fn waiting(jobs: &BTreeMap<u64, Job>, backup: u64) -> Answer {
    let state = jobs.get(&backup).map_or(State::Waiting, |j| j.state);
    let ahead = (jobs.range(..backup))
        .filter(|(_, j)| j.outcome.is_none() && j.state != State::Writing)
        .count();
    let mut a = Answer::json(&Waiting {
        backup,
        state,
        ahead,
    });
    a.status = 202;
    a
}

/// Whether job `backup`, waiting, may be let in now: its client's jobs and the
/// drives' are under their limits, and no older waiting job that may is passed.
fn may_enter(work: &Work, jobs: &BTreeMap<u64, Job>, backup: u64) -> bool {
    let Some(me) = jobs.get(&backup) else {
        return false;
    };
    let Some(client_ok) = places(work) else {
        return false;
    };
    client_ok(&me.client)
        && !(jobs.range(..backup))
            .any(|(_, j)| j.state == State::Waiting && j.failed.is_none() && client_ok(&j.client))
}

/// Whether the drives' limit leaves a place: then whether a client's limit leaves
/// it one. Every job let in counts, a client's and a schedule's (the queue's
/// entries receiving or writing).
fn places(work: &Work) -> Option<impl Fn(&str) -> bool> {
    let q = &work.queue_limits;
    let inside: Vec<String> = (work.queue.entries().into_iter())
        .filter(|e| matches!(e.state, State::Receiving | State::Writing))
        .map(|e| e.client)
        .collect();
    if inside.len() >= q.per_drive * work.drives.max(1) {
        return None;
    }
    let per_client = q.per_client;
    Some(move |c: &str| inside.iter().filter(|i| *i == c).count() < per_client)
}

/// Waits until the limits let in scheduled job `entry` of `client`, then shows it
/// writing: a schedule's job takes a place as a client's does.
pub fn enter_scheduled(work: &Work, entry: u64, client: &str) {
    let b = &work.backups;
    let mut jobs = b.lock();
    loop {
        let older_waits = (jobs.range(..entry))
            .any(|(_, j)| j.state == State::Waiting && j.failed.is_none() && j.client == client);
        if !older_waits && places(work).is_some_and(|ok| ok(client)) {
            work.queue.set_state(entry, State::Writing);
            drop(jobs);
            b.changed.notify_all();
            return;
        }
        let until = Instant::now() + Duration::from_millis(250);
        jobs = b.wait(jobs, until).unwrap_or_else(|| b.lock());
    }
}

/// Lets job `backup` in: its base read and its job begun on the stages with the
/// jobs' lock released (the catalog and the file system are not worked under a
/// lock every request takes), then the job shown receiving.
fn let_in(work: &Arc<Work>, backup: u64) -> Result<(), Answer> {
    let b = &work.backups;
    let meta = {
        let mut jobs = b.lock();
        let Some(job) = jobs.get_mut(&backup).filter(|j| j.state == State::Waiting) else {
            return Ok(());
        };
        job.admitting = true;
        Unwritten {
            client: job.client.clone(),
            tag: job.tag,
            asked_ns: job.asked_ns,
            doc: job.doc.clone(),
        }
    };
    let counters = work.queue.counters(backup).unwrap_or_default();
    let made = choose(work, &meta.doc).and_then(|(choice, base)| {
        let started = writer::start_job(work, backup, meta, choice.clone())?;
        Ok((choice, base, started))
    });
    let mut jobs = b.lock();
    let Some(job) = jobs.get_mut(&backup) else {
        return Err(Answer::error(404, &format!("no backup {backup}")));
    };
    job.admitting = false;
    let (choice, base, started) = match made {
        Ok(m) => m,
        Err(why) => {
            drop(jobs);
            fail(work, backup, &why);
            return Err(Answer::error(503, &why));
        }
    };
    job.spools = (started.inlets.into_iter())
        .map(|i| (i.stream, Arc::new(StreamInlet::new(i, counters.clone()))))
        .collect();
    if let Some(site) = &work.site {
        site.job_begun(&work.home, backup, started.job_id);
    }
    job.staging = Some((started.job_id, started.stop));
    job.grant = Some(started.grant);
    job.choice = Some(choice);
    job.base = Arc::new(base);
    if let Some(why) = job.failed.clone() {
        // Failed while it was let in: its thread gives it up.
        drop(jobs);
        b.close(backup, &why);
        return Ok(());
    }
    job.state = State::Receiving;
    job.active = Instant::now();
    work.queue.set_state(backup, State::Receiving);
    drop(jobs);
    b.changed.notify_all();
    Ok(())
}

/// The set, level and base of a job let in, and the base's tree.
fn choose(work: &Work, doc: &Begin) -> Result<(SetChoice, BaseTree), String> {
    let level = level_named(&doc.level).unwrap_or(Level::Full);
    let set = doc.set.clone().unwrap_or_else(|| doc.name.clone());
    tapeloom_engine::choose_set(&work.home, &set, level).map_err(|e| {
        tracing::warn!(set = %set, "choose the set's base: {e}");
        format!("the base of set {set} cannot be read")
    })
}
