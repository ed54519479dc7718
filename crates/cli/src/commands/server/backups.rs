//! Backups packed by clients and written by the server's drives.
//!
//! - `POST /api/backups` (a [`Begin`] document): the job is recorded for the
//!   token's client and begun on a thread of its own, which holds the home's lock
//!   while it runs; the answer is a [`Begun`] document (job id, tag, block size).
//! - `POST /api/backups/ID/streams/N`: the stream's blocks as a body of frames
//!   (`crate::net::http::Frames`), each handed to the engine, which checks it; the
//!   answer says how many were taken, or why the job failed.
//! - `GET /api/backups/ID`: waits for the job's end; the document of
//!   `tapeloom backup --json`, or the job's failure.
//!
//! Only the token that began a job may send its streams or ask for its end.

use super::api::Answer;
use super::serve::{Shared, Tls};
use crate::commands::backup::BackedUp;
use crate::net::http::{Frame, Frames, HttpError};
use std::collections::HashMap;
use std::sync::mpsc::sync_channel;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use tapeloom_engine::{BackupOptions, Home, Inlet, Progress, RemotePlan, RemoteStream};

/// A job as a client asks for it.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Begin {
    /// The job's name.
    pub name: String,
    /// Its set (default: its name).
    pub set: Option<String>,
    /// The media pool (default: `default`).
    pub pool: Option<String>,
    /// Block size in bytes.
    pub block_size: usize,
    /// Its streams, ids 1, 2, ... in order.
    pub streams: Vec<BeginStream>,
}

/// One stream of a [`Begin`].
#[derive(serde::Serialize, serde::Deserialize)]
pub struct BeginStream {
    /// Its name.
    pub name: String,
    /// The source path on the client.
    pub source: String,
    /// Its root in the job's namespace.
    pub root: String,
}

/// What the client packs its blocks with.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Begun {
    /// The job's id.
    pub job: i64,
    /// Its tag, in every block.
    pub tag: u64,
    /// Its block size.
    pub block_size: usize,
}

/// How a job ended: the backup document, or why it failed.
type Outcome = Result<Vec<u8>, String>;

/// A job begun by a client, until its end is asked for.
struct Running {
    client: String,
    block_size: usize,
    inlets: HashMap<u16, Inlet>,
    outcome: Option<Outcome>,
    /// When the job ended.
    ended: Option<Instant>,
}

/// How long a job's outcome waits for its client to ask for it.
const KEEP_OUTCOME: Duration = Duration::from_secs(3600);

/// The jobs clients began.
#[derive(Default)]
pub struct Backups {
    jobs: Mutex<HashMap<i64, Running>>,
    ended: Condvar,
}

impl Backups {
    fn with<T>(&self, f: impl FnOnce(&mut HashMap<i64, Running>) -> T) -> Option<T> {
        self.jobs.lock().ok().map(|mut j| f(&mut j))
    }
}

/// `POST /api/backups` by `client`.
pub fn begin(shared: &Arc<Shared>, client: &str, body: &[u8]) -> Answer {
    // Outcomes no client asked for in time are forgotten.
    shared
        .backups
        .with(|j| j.retain(|_, r| r.ended.is_none_or(|t| t.elapsed() < KEEP_OUTCOME)));
    let doc: Begin = match serde_json::from_slice(body) {
        Ok(d) => d,
        Err(e) => return Answer::error(400, &format!("not a backup document: {e}")),
    };
    let (tx, rx) = sync_channel::<Result<Begun, String>>(1);
    let entry = shared.queue.add(client, &doc.name, "client");
    let (shared2, client) = (Arc::clone(shared), client.to_string());
    std::thread::spawn(move || run_job(&shared2, (entry, &client), doc, &tx));
    match rx.recv() {
        Ok(Ok(b)) => Answer::json(&b),
        Ok(Err(why)) => Answer::error(409, &why),
        Err(_) => Answer::error(500, "the job's thread ended before the job began"),
    }
}

/// Runs a client's job on this thread: the home locked, the job begun (told on
/// `tx`), written, and its outcome kept for `GET /api/backups/ID`.
fn run_job(
    shared: &Shared,
    (entry, client): (u64, &str),
    doc: Begin,
    tx: &std::sync::mpsc::SyncSender<Result<Begun, String>>,
) {
    let (why, outcome) = match write_job(shared, (entry, client), doc, tx) {
        None => (Some("the job did not begin".to_string()), None),
        Some((id, Ok(doc))) => (None, Some((id, Ok(doc)))),
        Some((id, Err(why))) => (Some(why.clone()), Some((id, Err(why)))),
    };
    shared.queue.ended(entry, why);
    let Some((id, outcome)) = outcome else {
        return;
    };
    shared.backups.with(|j| {
        if let Some(run) = j.get_mut(&id) {
            run.inlets.clear();
            run.outcome = Some(outcome);
            run.ended = Some(Instant::now());
        }
    });
    shared.backups.ended.notify_all();
}

/// Writes a client's job; its id and outcome, none when it did not begin (the
/// reason told on `tx`).
fn write_job(
    shared: &Shared,
    (entry, client): (u64, &str),
    doc: Begin,
    tx: &std::sync::mpsc::SyncSender<Result<Begun, String>>,
) -> Option<(i64, Outcome)> {
    let home = match Home::open(&shared.home) {
        Ok(h) => h,
        Err(e) => {
            let _ = tx.send(Err(format!("open the home: {e}")));
            return None;
        }
    };
    if let Some(pool) = &doc.pool {
        if matches!(home.catalog.pool_key(pool), Ok(Some(_))) {
            let why = format!("pool {pool} encrypts its jobs, which a client cannot send yet");
            let _ = tx.send(Err(why));
            return None;
        }
    }
    let (opts, plan) = job_of(doc);
    let progress = Arc::new(Progress::default());
    let idle = (shared.limits.timeout * 4).max(Duration::from_secs(60));
    let mut job = None;
    let r = tapeloom_engine::backup_received(&home, &plan, &opts, (idle, progress.clone()), |b| {
        job = Some(b.job_id);
        shared.queue.writing(entry, b.job_id, progress.clone());
        if let Err(e) = home.catalog.set_job_client(b.job_id, client) {
            eprintln!("tapeloom server: job {}: record its client: {e}", b.job_id);
        }
        let running = Running {
            client: client.to_string(),
            block_size: b.block_size,
            inlets: b.inlets.into_iter().map(|i| (i.stream, i)).collect(),
            outcome: None,
            ended: None,
        };
        shared.backups.with(|j| j.insert(b.job_id, running));
        let _ = tx.send(Ok(Begun {
            job: b.job_id,
            tag: b.tag,
            block_size: b.block_size,
        }));
    });
    let Some(id) = job else {
        let why = r.err().map_or_else(String::new, |e| e.to_string());
        let _ = tx.send(Err(why));
        return None;
    };
    let outcome = match r {
        Ok(report) => serde_json::to_vec(&BackedUp::new(&report, "on".into()))
            .map_err(|e| format!("encode the job's document: {e}")),
        Err(e) => {
            eprintln!("tapeloom server: job {id} of {client} failed: {e}");
            Err(format!("job {id} failed: {e}"))
        }
    };
    Some((id, outcome))
}

/// The engine's options and plan of a client's job.
fn job_of(doc: Begin) -> (BackupOptions, RemotePlan) {
    let opts = BackupOptions {
        name: doc.name.clone(),
        block_size: doc.block_size,
        pool: doc.pool,
        set: doc.set,
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

/// The job `id` that `client` began, or a 404 as for a job that does not exist.
fn parse_id(id: &str) -> Result<i64, Answer> {
    id.parse::<i64>()
        .map_err(|_| Answer::error(404, &format!("no backup {id}")))
}

/// `POST /api/backups/ID/streams/N` by `client`: the stream's frames read from
/// `conn` one at a time, each read under `timeout`.
pub fn receive(
    shared: &Shared,
    client: &str,
    (id, stream): (&str, &str),
    (conn, rest): (&mut Tls, Vec<u8>),
) -> Answer {
    let timeout = shared.limits.timeout;
    let id = match parse_id(id) {
        Ok(i) => i,
        Err(a) => return a,
    };
    let Ok(stream) = stream.parse::<u16>() else {
        return Answer::error(404, &format!("no stream {stream}"));
    };
    let taken = shared.backups.with(|j| match j.get_mut(&id) {
        Some(r) if r.client == client => match r.inlets.remove(&stream) {
            Some(i) => Ok((i, r.block_size)),
            None => Err(Answer::error(
                409,
                &format!("stream {stream} of backup {id} is not awaited"),
            )),
        },
        _ => Err(Answer::error(404, &format!("no backup {id}"))),
    });
    let (inlet, block_size) = match taken {
        Some(Ok(t)) => t,
        Some(Err(a)) => return a,
        None => return Answer::error(500, "a thread failed holding the backups"),
    };
    let max = block_size + tapeloom_format::BLOCK_HEADER_LEN;
    let mut frames = Frames::new(rest, max);
    let mut blocks = 0u64;
    loop {
        conn.sock.deadline = Instant::now() + timeout;
        match frames.next_frame(conn) {
            Ok(Some(Frame::Block(b))) => {
                if inlet.block(b).is_err() {
                    return failed(shared, id);
                }
                blocks += 1;
            }
            Ok(Some(Frame::Note(n))) => {
                let Some((path, why)) = Frame::parse_note(&n) else {
                    inlet.cut("the client's frames: a malformed note".into());
                    return Answer::error(400, "a malformed note");
                };
                if inlet.error(path, why).is_err() {
                    return failed(shared, id);
                }
            }
            Ok(None) => break,
            Err(e) => {
                inlet.cut(format!("the client's frames: {e}"));
                return match e {
                    HttpError::Io(_) => failed(shared, id),
                    e => Answer::error(e.status().unwrap_or(400), &e.to_string()),
                };
            }
        }
    }
    if inlet.end().is_err() {
        return failed(shared, id);
    }
    #[derive(serde::Serialize)]
    struct Taken {
        blocks: u64,
    }
    Answer::json(&Taken { blocks })
}

/// The answer for a job whose stream was refused: its failure, once it ended.
fn failed(shared: &Shared, id: i64) -> Answer {
    match wait_end(shared, id, false) {
        Some(Err(why)) => Answer::error(409, &why),
        _ => Answer::error(409, &format!("backup {id} stopped")),
    }
}

/// Waits for job `id` to end; its outcome, taken out of the list when `take`.
fn wait_end(shared: &Shared, id: i64, take: bool) -> Option<Outcome> {
    let b = &shared.backups;
    let mut jobs = b.jobs.lock().ok()?;
    loop {
        let run = jobs.get(&id)?;
        if let Some(o) = &run.outcome {
            let o = o.clone();
            if take {
                jobs.remove(&id);
            }
            return Some(o);
        }
        jobs = b.ended.wait(jobs).ok()?;
    }
}

/// `GET /api/backups/ID` by `client`: waits for the job's end.
pub fn outcome(shared: &Shared, client: &str, id: &str) -> Answer {
    let id = match parse_id(id) {
        Ok(i) => i,
        Err(a) => return a,
    };
    let mine = shared
        .backups
        .with(|j| j.get(&id).is_some_and(|r| r.client == client));
    if mine != Some(true) {
        return Answer::error(404, &format!("no backup {id}"));
    }
    match wait_end(shared, id, true) {
        Some(Ok(doc)) => Answer::raw_json(doc),
        Some(Err(why)) => Answer::error(409, &why),
        None => Answer::error(404, &format!("no backup {id}")),
    }
}
