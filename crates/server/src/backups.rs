//! Backups packed by clients: taken into the queue, received onto the spool, and
//! written by the server's drives.
//!
//! - `POST /api/backups` (a [`Begin`] document): the job joins the queue. Once the
//!   limits let it in (jobs of its client, jobs per drive) the answer is a [`Begun`]
//!   document (the backup's number, the job's tag, its block size); a job still
//!   waiting after [`LONG_POLL`] gets `202` and a [`Waiting`] document, and the
//!   client asks again with `POST /api/backups/ID/admit`.
//! - `POST /api/backups/ID/streams/N`: the stream's blocks as a body of frames
//!   (`tapeloom_proto::frame::Frames`, in a chunked body), each checked as it comes
//!   (`tapeloom_engine::BlockCheck`) and kept on the stream's spool; the answer says
//!   how many were taken, or why the job failed. A client with nothing to send (a
//!   long walk of unchanged files) sends a keepalive frame every `keepalive_ms` of
//!   its [`Begun`]: the socket's deadline, the job's idle limit and the drive's
//!   receiver all take it as a sign of life.
//! - `GET /api/backups/ID/streams/N`: what the spool holds of a stream
//!   ([`StreamState`]). A client whose stream's connection broke off sends the
//!   rest with `POST /api/backups/ID/streams/N?from=HELD`, within two timeouts of
//!   the break (`docs/PROTOCOL.md`).
//! - `GET /api/backups/ID/base`: the tree of the job's base (a [`BaseTree`],
//!   empty for a full), which the client compares its sources with.
//! - `POST /api/backups/ID/deletions`: the base's paths the client's walkers did
//!   not see, sent once every stream ended (a JSON list of `[path, type]`, each
//!   path an array of its bytes); the job's index records them. Only for a job
//!   with a base, once.
//! - `GET /api/backups/ID`: the job's end, waited for up to [`LONG_POLL`]: the
//!   document of `tapeloom backup --json`, the job's failure (`409`), or `202` and a
//!   [`Waiting`] document while it is not over.
//!
//! The job's set, level and base are chosen when it is asked for, from the
//! catalog (`tapeloom_engine::choose_set`), and said in its [`Begun`].
//!
//! The drives take the jobs from the queue, one job on each free drive
//! (`super::writer`). Only
//! the token that began a job may send its streams or ask for its end.

use super::inlet::{Closed, Item, StreamInlet};
use super::queue::Counters;
use super::serve::Shared;
use super::writer;
use crate::bridge::Conn;
use crate::http::Answer;
use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tapeloom_engine::{BaseTree, BlockCheck, Deletions, SetChoice};
use tapeloom_format::Level;
use tapeloom_ops::OpsError;
use tapeloom_proto::backup::{level_named, Begin, Begun, State, StreamState, Waiting};
use tapeloom_proto::frame::{Frame, Framed};

/// Streams a client's job may have: each has a spool whose memory queue holds
/// blocks up to its cap, so the server bounds them (a local backup may have up
/// to the format's 4096).
pub const MAX_STREAMS: usize = 256;

/// The largest deletions document the server reads.
const MAX_DELETIONS_BYTES: u64 = 256 << 20;

/// How long a request waits for a place in the queue or for its job's end before
/// the server answers `202`, and the client asks again.
pub const LONG_POLL: Duration = Duration::from_secs(20);

/// How long a job's outcome waits for its client to ask for it.
const KEEP_OUTCOME: Duration = Duration::from_secs(3600);

/// How a job ended: the backup document, or why it failed.
pub type Outcome = Result<Vec<u8>, String>;

/// A client's job, from its request to its end.
pub struct Job {
    /// The client that began it.
    pub client: String,
    /// As asked for.
    pub doc: Begin,
    /// Its tag.
    pub tag: u64,
    /// When it was asked for (ns since the epoch, the job clock's).
    pub asked_ns: i64,
    /// Where it is.
    pub state: State,
    /// Each stream's way onto the stages, once let in.
    pub spools: HashMap<u16, Arc<StreamInlet>>,
    /// Its job in the catalog and what stops its receiving, once let in.
    pub staging: Option<(i64, tapeloom_engine::ReceiveStop)>,
    /// Where its drives are given to it, until they are.
    pub grant: Option<SyncSender<Vec<usize>>>,
    /// Its thread stopped it where it was, the server stopping.
    pub halted: bool,
    /// Each stream's state across its client's connections.
    sending: HashMap<u16, Sending>,
    /// Streams whose end is on the spool.
    pub ended_streams: usize,
    /// When its first block came.
    pub first_block: Option<Instant>,
    /// When it was let in or its client last sent a frame.
    pub active: Instant,
    /// Its bytes so far.
    pub counters: Arc<Counters>,
    /// Why it failed, once it did.
    pub failed: Option<String>,
    /// Its outcome, once over.
    pub outcome: Option<Outcome>,
    ended: Option<Instant>,
    /// Its set, level and base, chosen when it is let in.
    pub choice: Option<SetChoice>,
    /// Being let in: its base read and its spools made, outside the jobs' lock.
    admitting: bool,
    /// The base's tree (empty for a full).
    base: Arc<BaseTree>,
    /// Where the client's deletions go, until they came.
    deletions_tx: Option<SyncSender<Deletions>>,
    /// Where the engine takes them from, until the job is on a drive.
    pub deletions_rx: Option<Receiver<Deletions>>,
}

impl Job {
    /// Whether every stream's end is on the spool.
    pub fn complete(&self) -> bool {
        self.ended_streams == self.doc.streams.len()
    }
}

/// The jobs clients began, and what receiving them shares.
pub struct Backups {
    jobs: Mutex<BTreeMap<u64, Job>>,
    /// Told whenever a job changes.
    pub changed: Condvar,
}

impl Default for Backups {
    fn default() -> Self {
        Backups {
            jobs: Mutex::new(BTreeMap::new()),
            changed: Condvar::new(),
        }
    }
}

impl Backups {
    /// Whether a client waits for room on the stages.
    pub fn pressed(&self) -> bool {
        (self.lock().values()).any(|j| j.staging.as_ref().is_some_and(|(_, s)| s.pressed()))
    }

    /// The jobs, locked.
    pub fn lock(&self) -> MutexGuard<'_, BTreeMap<u64, Job>> {
        self.jobs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits on `jobs` until told of a change or `until`; false once it passed.
    pub fn wait<'a>(
        &self,
        jobs: MutexGuard<'a, BTreeMap<u64, Job>>,
        until: Instant,
    ) -> Option<MutexGuard<'a, BTreeMap<u64, Job>>> {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        let (g, _) = (self.changed)
            .wait_timeout(jobs, left.min(Duration::from_millis(250)))
            .unwrap_or_else(PoisonError::into_inner);
        Some(g)
    }
}

/// `POST /api/backups` by `client`.
pub fn begin(shared: &Arc<Shared>, client: &str, body: &[u8]) -> Answer {
    forget_old(shared);
    if shared.draining() {
        return stopping();
    }
    let doc: Begin = match serde_json::from_slice(body) {
        Ok(d) => d,
        Err(e) => return Answer::error(400, &format!("not a backup document: {e}")),
    };
    if let Some(a) = refused(shared, &doc) {
        return a;
    }
    if let Err(a) = owned_set(shared, client, &doc) {
        return a;
    }
    if shared.site.is_some() {
        return super::site::begin(shared, client, (&doc, body));
    }
    let backup = shared.queue.add(client, &doc.name, "client");
    enter(shared, client, doc, backup)
}

/// Job `doc` of `client` joins the server's queue as backup `backup` (a number
/// [`super::queue::Queue::add`] gave, or the site's ticket's), and waits for a
/// place.
pub fn enter(shared: &Arc<Shared>, client: &str, doc: Begin, backup: u64) -> Answer {
    if shared.queue.counters(backup).is_none() {
        shared.queue.add_as(backup, client, &doc.name, "client");
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
        counters: shared.queue.counters(backup).unwrap_or_default(),
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
    shared.backups.lock().insert(backup, job);
    shared.backups.changed.notify_all();
    admit_or_wait(shared, backup)
}

/// What the server refuses of a job before it joins the queue.
fn refused(shared: &Shared, doc: &Begin) -> Option<Answer> {
    if doc.streams.is_empty() || doc.streams.len() > MAX_STREAMS {
        let max = MAX_STREAMS;
        return Some(Answer::error(
            400,
            &format!("a backup needs 1 to {max} streams"),
        ));
    }
    if let Err(e) = tapeloom_format::check_block_size(doc.block_size) {
        return Some(Answer::error(400, &e.to_string()));
    }
    // The names of the job and its streams, as the engine will take them.
    if let Err(e) = writer::job_of(doc.clone(), 0).1.check() {
        return Some(Answer::error(400, &e.to_string()));
    }
    if let Some(f) = doc.encrypt.as_deref() {
        if tapeloom_format::Fingerprint::parse(f).is_none() {
            return Some(Answer::error(
                400,
                &format!("encrypt: not a key's fingerprint: {f}"),
            ));
        }
        // The key named is used over the pool's: the pool's need not be held.
        let e = shared.keys.named(f).err()?;
        return Some(Answer::error(409, &e.to_string()));
    }
    let pool = doc.pool.as_deref()?;
    let conn = tapeloom_ops::Conn::open(&shared.home).ok()?;
    // A pool whose key the server holds is encrypted by its drives' writers.
    match shared.keys.for_pool(&conn, Some(pool)) {
        Err(e @ super::keys::PoolKeyError::NotHeld { .. }) => {
            Some(Answer::error(409, &e.to_string()))
        }
        _ => None,
    }
}

/// Refuses a job whose level is none of the three, or whose set holds another
/// client's jobs: a client's sets are its own, so that no client is sent
/// another's tree or chained to its jobs. Cheap: the base is read only when the
/// job is let in ([`choose`]).
fn owned_set(shared: &Shared, client: &str, doc: &Begin) -> Result<(), Answer> {
    if level_named(&doc.level).is_none() {
        let why = format!("no level {}: full, incremental or differential", doc.level);
        return Err(Answer::error(400, &why));
    }
    let set = doc.set.clone().unwrap_or_else(|| doc.name.clone());
    let unread = |e: &dyn std::fmt::Display| {
        tracing::warn!(set = %set, "read the set: {e}");
        Answer::error(503, &format!("set {set} cannot be read"))
    };
    let conn = tapeloom_ops::Conn::open(&shared.home).map_err(|e| unread(&e))?;
    match tapeloom_ops::clients::check_set(&conn, client, &set, doc.pool.as_deref()) {
        Ok(()) => Ok(()),
        Err(e @ OpsError::UnknownPool { .. }) => Err(Answer::error(400, &e.to_string())),
        Err(e @ OpsError::OthersSet { .. }) => Err(Answer::error(409, &e.to_string())),
        Err(e) => Err(unread(&e)),
    }
}

/// The set, level and base of a job let in, and the base's tree.
fn choose(shared: &Shared, doc: &Begin) -> Result<(SetChoice, BaseTree), String> {
    let level = level_named(&doc.level).unwrap_or(Level::Full);
    let set = doc.set.clone().unwrap_or_else(|| doc.name.clone());
    tapeloom_engine::choose_set(&shared.home, &set, level).map_err(|e| {
        tracing::warn!(set = %set, "choose the set's base: {e}");
        format!("the base of set {set} cannot be read")
    })
}

/// The answer to a job asked for while the server stops: 503, and the client
/// may try again once it runs again (`Retry-After`).
fn stopping() -> Answer {
    Answer::error(503, "the server is stopping: try again once it runs again")
}

/// Stops taking jobs: those waiting for a place fail (their clients are
/// answered 503 when they ask again); those let in go on.
pub fn stop_admitting(shared: &Shared) {
    let waiting: Vec<u64> = (shared.backups.lock().iter())
        .filter(|(_, j)| j.state == State::Waiting && j.failed.is_none())
        .map(|(n, _)| *n)
        .collect();
    for n in waiting {
        fail(shared, n, "the server stopped before the job was let in");
    }
}

/// Stops every job let in and not yet ended where it is, for `why`: what it
/// staged stays on the stages (the next start writes it), and a stream still
/// being sent is cut.
pub fn halt_all(shared: &Shared, why: &str) {
    let open: Vec<u64> = (shared.backups.lock().iter())
        .filter(|(_, j)| j.outcome.is_none() && j.failed.is_none())
        .map(|(n, _)| *n)
        .collect();
    for n in open {
        close(shared, n, why);
    }
}

/// Whether every job not ended holds all its streams on the stages.
pub fn all_staged(shared: &Shared) -> bool {
    (shared.backups.lock().values())
        .filter(|j| j.outcome.is_none() && j.failed.is_none())
        .all(|j| j.state != State::Waiting && j.complete())
}

/// Whether every job's thread is over (ended, or stopped by [`halt_all`]).
pub fn all_halted(shared: &Shared) -> bool {
    (shared.backups.lock().values()).all(|j| j.outcome.is_some() || j.halted)
}

/// Whether a job let in or on a drive has not ended yet.
pub fn any_open(shared: &Shared) -> bool {
    (shared.backups.lock().values()).any(|j| j.outcome.is_none())
}

/// A tag no other job has (random, as the engine's own).
pub fn random_tag() -> u64 {
    let mut b = [0u8; 8];
    if getrandom::fill(&mut b).is_err() {
        // No randomness: the time, which is unique enough for one server.
        return tapeloom_engine::clock::system_ns().unsigned_abs();
    }
    u64::from_le_bytes(b)
}

/// Outcomes no client asked for in time are forgotten.
fn forget_old(shared: &Shared) {
    (shared.backups.lock()).retain(|_, j| j.ended.is_none_or(|t| t.elapsed() < KEEP_OUTCOME));
}

/// `POST /api/backups/ID/admit` by `client`: asks again for a place. On a
/// site, a backup this server does not hold is looked for in the site's queue.
pub fn admit(shared: &Arc<Shared>, client: &str, id: &str) -> Answer {
    match mine(shared, client, id) {
        Ok(b) => admit_or_wait(shared, b),
        Err(a) => super::site::admit(shared, client, id).unwrap_or(a),
    }
}

/// The backup `id` if `client` began it, else a 404 as for one that does not
/// exist.
fn mine(shared: &Shared, client: &str, id: &str) -> Result<u64, Answer> {
    let no = || Answer::error(404, &format!("no backup {id}"));
    let b = id.parse::<u64>().map_err(|_| no())?;
    match shared.backups.lock().get(&b) {
        Some(j) if j.client == client => Ok(b),
        _ => Err(no()),
    }
}

/// Waits up to [`LONG_POLL`] for job `backup` to be let in: its [`Begun`], or `202`.
fn admit_or_wait(shared: &Arc<Shared>, backup: u64) -> Answer {
    let until = Instant::now() + LONG_POLL;
    let b = &shared.backups;
    let mut jobs = b.lock();
    loop {
        let Some(job) = jobs.get(&backup) else {
            return Answer::error(404, &format!("no backup {backup}"));
        };
        if job.state == State::Waiting && shared.draining() {
            return stopping();
        }
        if let Some(why) = &job.failed {
            return Answer::error(409, why);
        }
        if job.state != State::Waiting || (!job.admitting && may_enter(shared, &jobs, backup)) {
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
        if let Err(a) = let_in(shared, backup) {
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
        keepalive_ms: Some(keepalive_every(shared).as_millis() as u64),
    };
    let (pool, named) = (job.doc.pool.clone(), job.doc.encrypt.clone());
    drop(jobs);
    begun.encrypt = super::keys::sealed_with(&shared.home, pool.as_deref(), named.as_deref());
    begun.tail = super::keys::tail(begun.encrypt.as_deref());
    Answer::json(&begun)
}

/// How often a client with nothing to send says it is alive: a quarter of the
/// timeout, which a socket may be silent for (and a job for four).
fn keepalive_every(shared: &Shared) -> Duration {
    (shared.limits.timeout / 4).max(Duration::from_millis(100))
}

/// The `202` answer of a job not let in or not over.
fn waiting(jobs: &BTreeMap<u64, Job>, backup: u64) -> Answer {
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
fn may_enter(shared: &Shared, jobs: &BTreeMap<u64, Job>, backup: u64) -> bool {
    let Some(me) = jobs.get(&backup) else {
        return false;
    };
    let Some(client_ok) = places(shared) else {
        return false;
    };
    client_ok(&me.client)
        && !(jobs.range(..backup))
            .any(|(_, j)| j.state == State::Waiting && j.failed.is_none() && client_ok(&j.client))
}

/// Whether the drives' limit leaves a place: then whether a client's limit leaves
/// it one. Every job let in counts, a client's and a schedule's (the queue's
/// entries receiving or writing).
fn places(shared: &Shared) -> Option<impl Fn(&str) -> bool> {
    let q = &shared.queue_limits;
    let inside: Vec<String> = (shared.queue.entries().into_iter())
        .filter(|e| matches!(e.state, State::Receiving | State::Writing))
        .map(|e| e.client)
        .collect();
    if inside.len() >= q.per_drive * shared.drives.max(1) {
        return None;
    }
    let per_client = q.per_client;
    Some(move |c: &str| inside.iter().filter(|i| *i == c).count() < per_client)
}

/// Waits until the limits let in scheduled job `entry` of `client`, then shows it
/// writing: a schedule's job takes a place as a client's does.
pub fn enter_scheduled(shared: &Shared, entry: u64, client: &str) {
    let b = &shared.backups;
    let mut jobs = b.lock();
    loop {
        let older_waits = (jobs.range(..entry))
            .any(|(_, j)| j.state == State::Waiting && j.failed.is_none() && j.client == client);
        if !older_waits && places(shared).is_some_and(|ok| ok(client)) {
            shared.queue.set_state(entry, State::Writing);
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
fn let_in(shared: &Arc<Shared>, backup: u64) -> Result<(), Answer> {
    let b = &shared.backups;
    let meta = {
        let mut jobs = b.lock();
        let Some(job) = jobs.get_mut(&backup).filter(|j| j.state == State::Waiting) else {
            return Ok(());
        };
        job.admitting = true;
        writer::Unwritten {
            client: job.client.clone(),
            tag: job.tag,
            asked_ns: job.asked_ns,
            doc: job.doc.clone(),
        }
    };
    let counters = shared.queue.counters(backup).unwrap_or_default();
    let made = choose(shared, &meta.doc).and_then(|(choice, base)| {
        let started = writer::start_job(shared, backup, meta, choice.clone())?;
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
            fail(shared, backup, &why);
            return Err(Answer::error(503, &why));
        }
    };
    job.spools = (started.inlets.into_iter())
        .map(|i| (i.stream, Arc::new(StreamInlet::new(i, counters.clone()))))
        .collect();
    super::site::job_begun(shared, backup, started.job_id);
    job.staging = Some((started.job_id, started.stop));
    job.grant = Some(started.grant);
    job.choice = Some(choice);
    job.base = Arc::new(base);
    if let Some(why) = job.failed.clone() {
        // Failed while it was let in: its thread gives it up.
        drop(jobs);
        close(shared, backup, &why);
        return Ok(());
    }
    job.state = State::Receiving;
    job.active = Instant::now();
    shared.queue.set_state(backup, State::Receiving);
    drop(jobs);
    b.changed.notify_all();
    Ok(())
}

/// Fails job `backup` for `why`: nothing more is taken of it. A job not yet let
/// in is over at once (recorded failed in the catalog, after the jobs' lock is
/// released); one let in is given up by its own thread (`writer`), which
/// deletes what it staged and records it.
pub fn fail(shared: &Shared, backup: u64, why: &str) {
    let mut jobs = shared.backups.lock();
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
        writer::Unwritten {
            client: job.client.clone(),
            tag: job.tag,
            asked_ns: job.asked_ns,
            doc: job.doc.clone(),
        }
    });
    drop(jobs);
    close(shared, backup, why);
    shared.backups.changed.notify_all();
    if let Some(meta) = unwritten {
        if unbegun {
            writer::record_failed(shared, &meta, why);
        }
        // Its thread deletes what it staged.
        if let Some(b) = begun {
            writer::record_begun_failed(shared, b, why);
        }
        shared.queue.ended(backup, Some(why.to_string()));
        shared.backups.changed.notify_all();
    }
}

/// Stops job `backup`'s receiving and cuts its streams, outside the jobs' lock:
/// the stop first, so that a connection handing a frame over is let go.
pub fn close(shared: &Shared, backup: u64, why: &str) {
    let (spools, stop) = match shared.backups.lock().get(&backup) {
        Some(j) => (
            j.spools.values().cloned().collect::<Vec<_>>(),
            j.staging.as_ref().map(|(_, s)| s.clone()),
        ),
        None => return,
    };
    if let Some(stop) = stop {
        stop.stop();
    }
    for s in spools {
        s.close(why);
    }
}

/// A stream's state across its client's connections.
#[derive(Default)]
struct Sending {
    /// Whether a connection sends it now.
    open: bool,
    /// Blocks and notes the spool holds of it.
    held: u64,
    /// Whether its end came.
    ended: bool,
    /// The check of its next block, kept while no connection sends it.
    check: Option<BlockCheck>,
    /// When and why its last connection broke off, while no other sends it.
    cut: Option<(Instant, String)>,
}

/// `POST /api/backups/ID/streams/N[?from=K]` by `client`: the stream's frames read
/// from `conn` one at a time, each read under `timeout`. A connection that breaks
/// off leaves the stream waiting for its client to send again from the frame the
/// spool holds next (`from`, which `GET` of the same path tells), within two
/// timeouts of the break ([`abandoned`]); any other fault fails the job.
pub fn receive(
    shared: &Shared,
    client: &str,
    (id, stream, from): (&str, &str, Option<&[u8]>),
    conn: &mut Conn,
) -> Answer {
    let backup = match mine(shared, client, id) {
        Ok(b) => b,
        Err(a) => return a,
    };
    let Ok(stream) = stream.parse::<u16>() else {
        return Answer::error(404, &format!("no stream {stream}"));
    };
    let from = match from.map(|f| {
        std::str::from_utf8(f)
            .ok()
            .and_then(|f| f.parse::<u64>().ok())
    }) {
        None => 0,
        Some(Some(f)) => f,
        Some(None) => return Answer::error(400, "from takes a number of frames"),
    };
    let (spool, mut check, size) = match take_stream(shared, backup, stream, from) {
        Ok(t) => t,
        Err(a) => return a,
    };
    let max = size + tapeloom_format::BLOCK_HEADER_LEN;
    let Some(mut frames) = conn.frames(max) else {
        return cut(
            shared,
            (backup, stream),
            (from, check),
            "the body was read already",
        );
    };
    let mut held = from;
    loop {
        let item = match item_of(frames.next(shared.limits.timeout), &mut check) {
            Ok(i) => i,
            Err(Fault::Cut(why)) => return cut(shared, (backup, stream), (held, check), &why),
            Err(Fault::Bad(status, why)) => return refuse(shared, backup, status, &why),
        };
        let (end, alive) = (item == Item::End, item == Item::Alive);
        if let Err(Closed(why)) = spool.push(item) {
            // The job fails with the reason (a no-op when it failed already).
            return refuse(shared, backup, 409, &why);
        }
        if end {
            break;
        }
        if !alive {
            held += 1;
        }
        heard(shared, backup, !alive);
    }
    stream_ended(shared, (backup, stream), held);
    #[derive(serde::Serialize)]
    struct Taken {
        blocks: u64,
    }
    Answer::json(&Taken {
        blocks: check.blocks(),
    })
}

/// `GET /api/backups/ID/streams/N` by `client`: the frames (blocks and notes) the
/// spool holds of the stream, whether a connection sends it now, and whether its
/// end came: a client whose connection broke off sends again from `held`.
pub fn stream_state(shared: &Shared, client: &str, (id, stream): (&str, &str)) -> Answer {
    let backup = match mine(shared, client, id) {
        Ok(b) => b,
        Err(a) => return a,
    };
    let Ok(stream) = stream.parse::<u16>() else {
        return Answer::error(404, &format!("no stream {stream}"));
    };
    let jobs = shared.backups.lock();
    let Some(job) = jobs.get(&backup) else {
        return Answer::error(404, &format!("no backup {backup}"));
    };
    if let Some(why) = &job.failed {
        return Answer::error(409, why);
    }
    if !job.spools.contains_key(&stream) {
        return Answer::error(404, &format!("no stream {stream}"));
    }
    let s = job.sending.get(&stream);
    Answer::json(&StreamState {
        held: s.map_or(0, |s| s.held),
        open: s.is_some_and(|s| s.open),
        ended: s.is_some_and(|s| s.ended),
    })
}

/// Jobs with a stream whose connection broke off longer than `window` ago and
/// that no client sent again: each job, and why it fails.
pub fn abandoned(shared: &Shared, window: Duration) -> Vec<(u64, String)> {
    let jobs = shared.backups.lock();
    let mut out = Vec::new();
    for (n, j) in jobs.iter() {
        if j.failed.is_some() || j.outcome.is_some() {
            continue;
        }
        let cut = (j.sending.iter())
            .filter(|(_, s)| !s.open && !s.ended)
            .find_map(|(k, s)| {
                s.cut
                    .as_ref()
                    .filter(|(at, _)| at.elapsed() > window)
                    .map(|c| (k, c))
            });
        if let Some((stream, (_, why))) = cut {
            let why = format!(
                "stream {stream}'s connection broke off ({why}) and its client did not send it again within {} s",
                window.as_secs()
            );
            out.push((*n, why));
        }
    }
    out
}

/// Why a stream's frames stopped: its connection broke off, or the client sent
/// what the server does not take (the status to answer, and why).
enum Fault {
    Cut(String),
    Bad(u16, String),
}

/// Stream `stream`'s connection broke off with `held` frames on the spool: the
/// stream waits for its client to send again (the job fails if it stays silent
/// past its idle limit).
fn cut(
    shared: &Shared,
    (backup, stream): (u64, u16),
    (held, check): (u64, BlockCheck),
    why: &str,
) -> Answer {
    let mut jobs = shared.backups.lock();
    if let Some(s) = jobs
        .get_mut(&backup)
        .and_then(|j| j.sending.get_mut(&stream))
    {
        s.open = false;
        s.held = held;
        s.check = Some(check);
        s.cut = Some((Instant::now(), why.to_string()));
    }
    drop(jobs);
    tracing::warn!(
        backup,
        stream,
        held,
        "a stream's connection broke off: {why}"
    );
    Answer::error(409, why)
}

/// The item of what came next of a stream, each block checked with `check`; else
/// why it stopped.
fn item_of(
    next: Result<Option<Framed>, tapeloom_proto::frame::FrameError>,
    check: &mut BlockCheck,
) -> Result<Item, Fault> {
    match next {
        // The block came in a buffer of its own: it is taken back, not copied.
        Ok(Some(Framed::Frame(Frame::Block(b)))) => match check.check(Vec::from(b)) {
            Ok(c) => Ok(Item::Block(c)),
            Err(e) => Err(Fault::Bad(409, e.to_string())),
        },
        Ok(Some(Framed::Frame(Frame::Note(n)))) => match Frame::parse_note(&n) {
            Some((path, why)) => Ok(Item::Note(path, why)),
            None => Err(Fault::Bad(
                400,
                "the client's frames: a malformed note".into(),
            )),
        },
        Ok(Some(Framed::KeepAlive)) => Ok(Item::Alive),
        Ok(None) => Ok(Item::End),
        Err(e) => {
            let why = format!("the client's frames: {e}");
            match e {
                tapeloom_proto::frame::FrameError::Io(_) => Err(Fault::Cut(why)),
                _ => Err(Fault::Bad(e.status().unwrap_or(400), why)),
            }
        }
    }
}

/// Fails the job for `why` and answers `status` with it.
fn refuse(shared: &Shared, backup: u64, status: u16, why: &str) -> Answer {
    fail(shared, backup, why);
    Answer::error(status, why)
}

/// The spool, the block check and the block size of stream `stream` of job
/// `backup`, sent by one connection at a time: first from frame 0, then (after a
/// connection broke off) from the frame the spool holds next.
fn take_stream(
    shared: &Shared,
    backup: u64,
    stream: u16,
    from: u64,
) -> Result<(Arc<StreamInlet>, BlockCheck, usize), Answer> {
    let mut jobs = shared.backups.lock();
    let Some(job) = jobs.get_mut(&backup) else {
        return Err(Answer::error(404, &format!("no backup {backup}")));
    };
    if let Some(why) = &job.failed {
        return Err(Answer::error(409, why));
    }
    let (tag, size) = (job.tag, job.doc.block_size);
    let Some(spool) = job.spools.get(&stream).cloned() else {
        drop(jobs);
        let why = format!("stream {stream} of backup {backup} is not awaited");
        return Err(refuse(shared, backup, 409, &why));
    };
    let s = job.sending.entry(stream).or_default();
    let first = s.held == 0 && !s.open && s.check.is_none() && !s.ended;
    if first && from == 0 {
        s.open = true;
        return Ok((spool, BlockCheck::new(tag, stream, size), size));
    }
    if s.open || s.ended || from != s.held || s.check.is_none() {
        // Sent again while it is sent, after its end, or from another frame than
        // the spool holds next: a client this confused would keep its job's place
        // in the queue, waiting, so the job fails.
        let why = format!(
            "stream {stream} of backup {backup} is not awaited from frame {from} (the server holds {})",
            s.held
        );
        drop(jobs);
        return Err(refuse(shared, backup, 409, &why));
    }
    s.open = true;
    s.cut = None;
    let check = s
        .check
        .take()
        .unwrap_or_else(|| BlockCheck::new(tag, stream, size));
    Ok((spool, check, size))
}

/// Job `backup`'s client was heard from: a block or a note came (`data`), or a
/// keepalive, or its base's tree went, which say only that it is alive.
fn heard(shared: &Shared, backup: u64, data: bool) {
    let mut jobs = shared.backups.lock();
    if let Some(j) = jobs.get_mut(&backup) {
        j.active = Instant::now();
        if data && j.first_block.is_none() {
            j.first_block = Some(Instant::now());
            drop(jobs);
            shared.backups.changed.notify_all();
        }
    }
}

/// Stream `stream` of job `backup` is whole on the stages (its last chunk
/// flushed and recorded): logged before its client is answered, so that every
/// stream a client was told the server holds is in the log.
fn stream_ended(shared: &Shared, (backup, stream): (u64, u16), held: u64) {
    let mut job = None;
    if let Some(j) = shared.backups.lock().get_mut(&backup) {
        j.ended_streams += 1;
        let s = j.sending.entry(stream).or_default();
        (s.open, s.ended, s.held) = (false, true, held);
        job = j.staging.as_ref().map(|(id, _)| *id);
    }
    tracing::info!(
        backup,
        job,
        stream,
        frames = held,
        "a stream is whole on the stage"
    );
    shared.backups.changed.notify_all();
}

/// The job's end is over: its outcome kept for its client.
pub fn ended(shared: &Shared, backup: u64, outcome: Outcome) {
    let why = outcome.as_ref().err().cloned();
    if let Some(j) = shared.backups.lock().get_mut(&backup) {
        j.state = if why.is_some() {
            State::Failed
        } else {
            State::Ended
        };
        j.outcome = Some(outcome);
        j.ended = Some(Instant::now());
    }
    super::site::ended(shared, backup, why.as_deref());
    shared.queue.ended(backup, why);
    shared.backups.changed.notify_all();
}

/// `GET /api/backups/ID` by `client`: waits up to [`LONG_POLL`] for the job's end.
pub fn outcome(shared: &Shared, client: &str, id: &str) -> Answer {
    let backup = match mine(shared, client, id) {
        Ok(b) => b,
        Err(a) => return a,
    };
    let until = Instant::now() + LONG_POLL;
    let b = &shared.backups;
    let mut jobs = b.lock();
    loop {
        match jobs.get(&backup).and_then(|j| j.outcome.clone()) {
            Some(Ok(doc)) => return Answer::raw_json(doc),
            Some(Err(why)) => return Answer::error(409, &why),
            None => {}
        }
        match b.wait(jobs, until) {
            Some(g) => jobs = g,
            None => return waiting(&b.lock(), backup),
        }
    }
}

/// `GET /api/backups/ID/base` by `client`: the tree of the job's base, written
/// to `conn` one row at a time (`tapeloom_proto::base`); none once it was, else the
/// refusal. The job is active as long as its tree is sent.
pub fn base(shared: &Shared, client: &str, id: &str, conn: &mut Conn) -> Option<Answer> {
    let backup = match mine(shared, client, id) {
        Ok(b) => b,
        Err(a) => return Some(a),
    };
    let base = shared.backups.lock().get(&backup).map(|j| j.base.clone());
    let Some(base) = base else {
        return Some(Answer::error(404, &format!("no backup {backup}")));
    };
    heard(shared, backup, false);
    let sent = send_base(conn, &base, || heard(shared, backup, false));
    heard(shared, backup, false);
    if let Err(e) = sent {
        tracing::info!(backup, "send the base's tree: {e}");
    }
    None
}

/// Rows of a base sent between two signs that its job is active.
const BASE_ROWS_ACTIVE: usize = 50_000;

/// Writes the answer of `tree`: its head, then its rows as `tapeloom_proto::base`
/// lays them out (chunked: its length is not known before), `alive` called every
/// [`BASE_ROWS_ACTIVE`] rows.
fn send_base(conn: &mut Conn, tree: &BaseTree, alive: impl Fn()) -> std::io::Result<u64> {
    conn.start(200, "application/json")?;
    let mut w = std::io::BufWriter::with_capacity(64 * 1024, conn);
    let rows = tree.rows.iter().enumerate().map(|(i, r)| {
        if i % BASE_ROWS_ACTIVE == BASE_ROWS_ACTIVE - 1 {
            alive();
        }
        wire_row(r)
    });
    tapeloom_proto::base::write_tree(&mut w, rows)
}

/// A row of a base's tree as the wire has it.
fn wire_row(r: &tapeloom_engine::BaseRow) -> tapeloom_proto::base::BaseRow {
    tapeloom_proto::base::BaseRow {
        path: r.path.clone(),
        kind: r.kind,
        size: r.size,
        mtime_ns: r.mtime_ns,
        ctime_ns: r.ctime_ns,
        ino: r.ino,
        mode: r.mode,
        uid: r.uid,
        gid: r.gid,
        link: r.link.clone(),
    }
}

/// `POST /api/backups/ID/deletions` by `client`, its body (`length` bytes, `rest`
/// of them already read) read from `conn`: the base's paths the client did not
/// see, each of which must be in the base.
pub fn deletions(
    shared: &Shared,
    client: &str,
    id: &str,
    (conn, length): (&mut Conn, Option<u64>),
) -> Answer {
    let backup = match mine(shared, client, id) {
        Ok(b) => b,
        Err(a) => return a,
    };
    let max = MAX_DELETIONS_BYTES.max(shared.limits.max_body_bytes);
    let body = match crate::http::read_body(conn, max, length) {
        Ok(b) => b,
        Err(e) => return Answer::error(e.status().unwrap_or(400), &e.to_string()),
    };
    let list: Deletions = match serde_json::from_slice(&body) {
        Ok(l) => l,
        Err(e) => return Answer::error(400, &format!("not a list of deletions: {e}")),
    };
    let mut jobs = shared.backups.lock();
    let Some(job) = jobs.get_mut(&backup) else {
        return Answer::error(404, &format!("no backup {backup}"));
    };
    if job.choice.as_ref().is_none_or(|c| c.base.is_none()) {
        return Answer::error(409, "a full backup has no deletions");
    }
    if job.deletions_tx.is_none() {
        return Answer::error(409, &format!("backup {backup}'s deletions came already"));
    }
    if let Some((p, _)) = list.iter().find(|(p, _)| !job.base.holds(p)) {
        let why = format!("{} is not in the base", tapeloom_engine::display_path(p));
        return Answer::error(400, &why);
    }
    let Some(tx) = job.deletions_tx.take() else {
        return Answer::error(409, &format!("backup {backup}'s deletions came already"));
    };
    let n = list.len();
    if tx.send(list).is_err() {
        return Answer::error(409, &format!("backup {backup} is over"));
    }
    // The client compared with the base already: its tree is not needed again.
    job.base = Arc::default();
    #[derive(serde::Serialize)]
    struct Taken {
        deletions: usize,
    }
    Answer::json(&Taken { deletions: n })
}
