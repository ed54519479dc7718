//! Backups packed by clients: taken into the queue, received onto the spool, and
//! written by the server's drives.
//!
//! - `POST /api/backups` (a [`Begin`] document): the job joins the queue. Once the
//!   limits let it in (jobs of its client, jobs per drive) the answer is a `Begun`
//!   document (the backup's number, the job's tag, its block size); a job still
//!   waiting after [`LONG_POLL`] gets `202` and a `Waiting` document, and the
//!   client asks again with `POST /api/backups/ID/admit`.
//! - `POST /api/backups/ID/streams/N`: the stream's blocks as a body of frames
//!   (`tapeloom_proto::frame::Frames`, in a chunked body), each checked as it comes
//!   (`tapeloom_engine::BlockCheck`) and kept on the stream's spool; the answer says
//!   how many were taken, or why the job failed. A client with nothing to send (a
//!   long walk of unchanged files) sends a keepalive frame every `keepalive_ms` of
//!   its `Begun`: the socket's deadline, the job's idle limit and the drive's
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
//!   `Waiting` document while it is not over.
//!
//! The job's set, level and base are chosen when it is asked for, from the
//! catalog (`tapeloom_engine::choose_set`), and said in its `Begun`.
//!
//! The drives take the jobs from the queue, one job on each free drive
//! (`writer.rs`), once `admission.rs` let them in. Only the token that began a
//! job may send its streams or ask for its end. The jobs' state is in
//! `backup_jobs.rs`.

use crate::admission;
use crate::bridge::Conn;
use crate::http::{Answer, LONG_POLL};
use crate::inlet::{Closed, Item, StreamInlet};
use crate::tickets;
use crate::work::Work;
use crate::writer::{self, fail};
use std::sync::Arc;
use std::time::Instant;
use tapeloom_engine::{BaseTree, BlockCheck, Deletions};
use tapeloom_ops::OpsError;
use tapeloom_proto::backup::{level_named, Begin, StreamState};
use tapeloom_proto::frame::{Frame, Framed};

/// Streams a client's job may have: each has a spool whose memory queue holds
/// blocks up to its cap, so the server bounds them (a local backup may have up
/// to the format's 4096).
pub const MAX_STREAMS: usize = 256;

/// The largest deletions document the server reads.
const MAX_DELETIONS_BYTES: u64 = 256 << 20;

/// `POST /api/backups` by `client`.
pub fn begin(work: &Arc<Work>, client: &str, body: &[u8]) -> Answer {
    work.backups.forget_old();
    if work.draining() {
        return admission::stopping();
    }
    let doc: Begin = match serde_json::from_slice(body) {
        Ok(d) => d,
        Err(e) => return Answer::error(400, &format!("not a backup document: {e}")),
    };
    if let Some(a) = refused(work, &doc) {
        return a;
    }
    if let Err(a) = owned_set(work, client, &doc) {
        return a;
    }
    if work.site.is_some() {
        return tickets::begin(work, client, (&doc, body));
    }
    let backup = work.queue.add(client, &doc.name, "client");
    admission::enter(work, client, doc, backup)
}

/// What the server refuses of a job before it joins the queue.
fn refused(work: &Work, doc: &Begin) -> Option<Answer> {
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
        let e = work.keys.named(f).err()?;
        return Some(Answer::error(409, &e.to_string()));
    }
    let pool = doc.pool.as_deref()?;
    let conn = tapeloom_ops::Conn::open(&work.home).ok()?;
    // A pool whose key the server holds is encrypted by its drives' writers.
    match work.keys.for_pool(&conn, Some(pool)) {
        Err(e @ crate::keys::PoolKeyError::NotHeld { .. }) => {
            Some(Answer::error(409, &e.to_string()))
        }
        _ => None,
    }
}

/// Refuses a job whose level is none of the three, or whose set holds another
/// client's jobs: a client's sets are its own, so that no client is sent
/// another's tree or chained to its jobs. Cheap: the base is read only when the
/// job is let in (`admission.rs`).
fn owned_set(work: &Work, client: &str, doc: &Begin) -> Result<(), Answer> {
    if level_named(&doc.level).is_none() {
        let why = format!("no level {}: full, incremental or differential", doc.level);
        return Err(Answer::error(400, &why));
    }
    let set = doc.set.clone().unwrap_or_else(|| doc.name.clone());
    let unread = |e: &dyn std::fmt::Display| {
        tracing::warn!(set = %set, "read the set: {e}");
        Answer::error(503, &format!("set {set} cannot be read"))
    };
    let conn = tapeloom_ops::Conn::open(&work.home).map_err(|e| unread(&e))?;
    match tapeloom_ops::clients::check_set(&conn, client, &set, doc.pool.as_deref()) {
        Ok(()) => Ok(()),
        Err(e @ OpsError::UnknownPool { .. }) => Err(Answer::error(400, &e.to_string())),
        Err(e @ OpsError::OthersSet { .. }) => Err(Answer::error(409, &e.to_string())),
        Err(e) => Err(unread(&e)),
    }
}

/// `POST /api/backups/ID/admit` by `client`: asks again for a place. On a
/// site, a backup this server does not hold is looked for in the site's queue.
pub fn admit(work: &Arc<Work>, client: &str, id: &str) -> Answer {
    match mine(work, client, id) {
        Ok(b) => admission::admit_or_wait(work, b),
        Err(a) => tickets::admit(work, client, id).unwrap_or(a),
    }
}

/// The backup `id` if `client` began it, else a 404 as for one that does not
/// exist.
fn mine(work: &Work, client: &str, id: &str) -> Result<u64, Answer> {
    let no = || Answer::error(404, &format!("no backup {id}"));
    let b = id.parse::<u64>().map_err(|_| no())?;
    match work.backups.lock().get(&b) {
        Some(j) if j.client == client => Ok(b),
        _ => Err(no()),
    }
}

/// `POST /api/backups/ID/streams/N[?from=K]` by `client`: the stream's frames read
/// from `conn` one at a time, each read under `timeout`. A connection that breaks
/// off leaves the stream waiting for its client to send again from the frame the
/// spool holds next (`from`, which `GET` of the same path tells), within two
/// timeouts of the break (`Backups::abandoned`); any other fault fails the job.
pub fn receive(
    work: &Work,
    client: &str,
    (id, stream, from): (&str, &str, Option<&[u8]>),
    conn: &mut Conn,
) -> Answer {
    let backup = match mine(work, client, id) {
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
    let (spool, mut check, size) = match take_stream(work, backup, stream, from) {
        Ok(t) => t,
        Err(a) => return a,
    };
    let max = size + tapeloom_format::BLOCK_HEADER_LEN;
    let Some(mut frames) = conn.frames(max) else {
        return cut(
            work,
            (backup, stream),
            (from, check),
            "the body was read already",
        );
    };
    let mut held = from;
    loop {
        let item = match item_of(frames.next(work.limits.timeout), &mut check) {
            Ok(i) => i,
            Err(Fault::Cut(why)) => return cut(work, (backup, stream), (held, check), &why),
            Err(Fault::Bad(status, why)) => return refuse(work, backup, status, &why),
        };
        let (end, alive) = (item == Item::End, item == Item::Alive);
        if let Err(Closed(why)) = spool.push(item) {
            // The job fails with the reason (a no-op when it failed already).
            return refuse(work, backup, 409, &why);
        }
        if end {
            break;
        }
        if !alive {
            held += 1;
        }
        heard(work, backup, !alive);
    }
    stream_ended(work, (backup, stream), held);
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
pub fn stream_state(work: &Work, client: &str, (id, stream): (&str, &str)) -> Answer {
    let backup = match mine(work, client, id) {
        Ok(b) => b,
        Err(a) => return a,
    };
    let Ok(stream) = stream.parse::<u16>() else {
        return Answer::error(404, &format!("no stream {stream}"));
    };
    let jobs = work.backups.lock();
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
    work: &Work,
    (backup, stream): (u64, u16),
    (held, check): (u64, BlockCheck),
    why: &str,
) -> Answer {
    let mut jobs = work.backups.lock();
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
fn refuse(work: &Work, backup: u64, status: u16, why: &str) -> Answer {
    fail(work, backup, why);
    Answer::error(status, why)
}

/// The spool, the block check and the block size of stream `stream` of job
/// `backup`, sent by one connection at a time: first from frame 0, then (after a
/// connection broke off) from the frame the spool holds next.
fn take_stream(
    work: &Work,
    backup: u64,
    stream: u16,
    from: u64,
) -> Result<(Arc<StreamInlet>, BlockCheck, usize), Answer> {
    let mut jobs = work.backups.lock();
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
        return Err(refuse(work, backup, 409, &why));
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
        return Err(refuse(work, backup, 409, &why));
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
fn heard(work: &Work, backup: u64, data: bool) {
    let mut jobs = work.backups.lock();
    if let Some(j) = jobs.get_mut(&backup) {
        j.active = Instant::now();
        if data && j.first_block.is_none() {
            j.first_block = Some(Instant::now());
            drop(jobs);
            work.backups.changed.notify_all();
        }
    }
}

/// Stream `stream` of job `backup` is whole on the stages (its last chunk
/// flushed and recorded): logged before its client is answered, so that every
/// stream a client was told the server holds is in the log.
fn stream_ended(work: &Work, (backup, stream): (u64, u16), held: u64) {
    let mut job = None;
    if let Some(j) = work.backups.lock().get_mut(&backup) {
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
    work.backups.changed.notify_all();
}

/// `GET /api/backups/ID` by `client`: waits up to [`LONG_POLL`] for the job's end.
pub fn outcome(work: &Work, client: &str, id: &str) -> Answer {
    let backup = match mine(work, client, id) {
        Ok(b) => b,
        Err(a) => return a,
    };
    let until = Instant::now() + LONG_POLL;
    let b = &work.backups;
    let mut jobs = b.lock();
    loop {
        match jobs.get(&backup).and_then(|j| j.outcome.clone()) {
            Some(Ok(doc)) => return Answer::raw_json(doc),
            Some(Err(why)) => return Answer::error(409, &why),
            None => {}
        }
        match b.wait(jobs, until) {
            Some(g) => jobs = g,
            None => return admission::waiting(&b.lock(), backup),
        }
    }
}

/// `GET /api/backups/ID/base` by `client`: the tree of the job's base, written
/// to `conn` one row at a time (`tapeloom_proto::base`); none once it was, else the
/// refusal. The job is active as long as its tree is sent.
pub fn base(work: &Work, client: &str, id: &str, conn: &mut Conn) -> Option<Answer> {
    let backup = match mine(work, client, id) {
        Ok(b) => b,
        Err(a) => return Some(a),
    };
    let base = work.backups.lock().get(&backup).map(|j| j.base.clone());
    let Some(base) = base else {
        return Some(Answer::error(404, &format!("no backup {backup}")));
    };
    heard(work, backup, false);
    let sent = send_base(conn, &base, || heard(work, backup, false));
    heard(work, backup, false);
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
    work: &Work,
    client: &str,
    id: &str,
    (conn, length): (&mut Conn, Option<u64>),
) -> Answer {
    let backup = match mine(work, client, id) {
        Ok(b) => b,
        Err(a) => return a,
    };
    let max = MAX_DELETIONS_BYTES.max(work.limits.max_body_bytes);
    let body = match crate::http::read_body(conn, max, length) {
        Ok(b) => b,
        Err(e) => return Answer::error(e.status().unwrap_or(400), &e.to_string()),
    };
    let list: Deletions = match serde_json::from_slice(&body) {
        Ok(l) => l,
        Err(e) => return Answer::error(400, &format!("not a list of deletions: {e}")),
    };
    let mut jobs = work.backups.lock();
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
