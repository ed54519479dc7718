//! A client's verify of one of its jobs, read on the server's drives.
//!
//! - `POST /api/jobs/ID/verify` (an optional `commands::verify::Ask` document: the
//!   drive to read with): the token may see the job (else 404, nothing read); an
//!   encrypted job is read with the server's key for it (`super::keys`), and
//!   refused (409) when it holds none. A thread opens the home with its lock (so it waits for a job on
//!   the drives to end) and runs the engine's verify as `tapeloom verify` does.
//!   The answer, within [`LONG_POLL`], is the document of `tapeloom verify --json`,
//!   the reading's failure (409), or `202` and a `commands::verify::Pending`
//!   document with the verify's number.
//! - `GET /api/verifies/N`: the verify's end, waited for up to [`LONG_POLL`], as
//!   above; only the token that asked for it may ask (else 404).
//!
//! A damaged job is not a failure here: its document says `ok: false`, as a local
//! verify's does, and the client exits as the local command does.

use super::backups::LONG_POLL;
use super::metrics::ThreadKind;
use super::serve::Shared;
use crate::auth;
use crate::http::Answer;
use crate::http::Request;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tapeloom_ops::tokens::Token;
use tapeloom_ops::Conn;
use tapeloom_proto::verify::{Ask, Pending};

/// How long a verify's outcome waits for its client to ask for it.
const KEEP_OUTCOME: Duration = Duration::from_secs(3600);

/// The verifies clients asked for, by number.
#[derive(Default)]
pub struct Verifies {
    runs: Mutex<Runs>,
    changed: Condvar,
}

#[derive(Default)]
struct Runs {
    /// The last number given.
    last: u64,
    by_number: BTreeMap<u64, Run>,
}

/// One verify.
struct Run {
    /// The name of the token that asked.
    client: String,
    job: i64,
    outcome: Option<Outcome>,
    ended: Option<Instant>,
}

/// A verify's end: the document of `tapeloom verify --json`, or why the job could
/// not be read (answered 409).
type Outcome = Result<Vec<u8>, String>;

impl Verifies {
    fn lock(&self) -> MutexGuard<'_, Runs> {
        self.runs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new verify of `job` for `client`: its number.
    fn add(&self, client: &str, job: i64) -> u64 {
        let mut runs = self.lock();
        (runs.by_number).retain(|_, r| r.ended.is_none_or(|t| t.elapsed() < KEEP_OUTCOME));
        runs.last += 1;
        let number = runs.last;
        let run = Run {
            client: client.to_string(),
            job,
            outcome: None,
            ended: None,
        };
        runs.by_number.insert(number, run);
        number
    }

    fn end(&self, number: u64, outcome: Outcome) {
        if let Some(r) = self.lock().by_number.get_mut(&number) {
            r.outcome = Some(outcome);
            r.ended = Some(Instant::now());
        }
        self.changed.notify_all();
    }
}

/// Answers the verify routes; none for any other request.
pub fn route(
    shared: &Arc<Shared>,
    req: &Request,
    cat: &Conn,
    peer: SocketAddr,
    segments: &[&str],
) -> Option<Answer> {
    let begin = match (req.method.as_str(), segments) {
        ("POST", ["", "api", "jobs", id, "verify"]) => Ok(*id),
        ("GET", ["", "api", "verifies", n]) => Err(*n),
        _ => return None,
    };
    let token = match auth::client(req, cat, &shared.metrics, peer) {
        Ok(t) => t,
        Err(a) => return Some(a),
    };
    Some(match begin {
        Ok(id) => start(shared, (cat, &token), id, &req.body),
        Err(n) => outcome(shared, &token, n),
    })
}

/// `POST /api/jobs/ID/verify` by `token`.
fn start(shared: &Arc<Shared>, (cat, token): (&Conn, &Token), id: &str, body: &[u8]) -> Answer {
    let no = || Answer::error(404, &format!("no job {id}"));
    let Ok(job_id) = id.parse::<i64>() else {
        return no();
    };
    // Another client's job is refused as one that does not exist.
    let job = match tapeloom_ops::clients::job(cat, token, job_id) {
        Ok(Some(j)) => j,
        Ok(None) => return no(),
        Err(e) => return Answer::error(500, &e.to_string()),
    };
    if let Some(a) = super::reads::route_read(shared, cat, job_id, &[]) {
        return a;
    }
    if let Some((fingerprint, _)) = &job.key {
        if shared.keys.by_fingerprint(fingerprint).is_none() {
            let short: String = fingerprint.chars().take(16).collect();
            let why = format!(
                "job {job_id} is encrypted with key {short}, which this server does not hold: \
                 verify it on the server's machine with --key, or give the server an \
                 [[encryption_key]] for it"
            );
            return Answer::error(409, &why);
        }
    }
    let ask: Ask = match body {
        [] => Ask::default(),
        b => match serde_json::from_slice(b) {
            Ok(a) => a,
            Err(e) => return Answer::error(400, &format!("not a verify document: {e}")),
        },
    };
    let number = shared.verifies.add(&token.name, job_id);
    let (s, home) = (shared.clone(), shared.home.clone());
    let spawned = std::thread::Builder::new()
        .name("verify".into())
        .spawn(move || {
            let keys = s.keys.all().to_vec();
            let outcome = std::panic::catch_unwind(|| run(&home, (job_id, keys), ask.drive))
                .unwrap_or_else(|_| {
                    s.metrics.panicked(ThreadKind::Verify);
                    Err(format!("the verify of job {job_id} failed"))
                });
            if let Err(why) = &outcome {
                tracing::warn!(job = job_id, "verify failed: {why}");
            }
            s.verifies.end(number, outcome);
        });
    if let Err(e) = spawned {
        shared.verifies.end(number, Err(e.to_string()));
        return Answer::error(503, &format!("start a verify's thread: {e}"));
    }
    wait(shared, number)
}

/// Verifies job `job` of the home at `home` on `drive` (any when none), with the
/// home's lock and the server's `keys`, as `tapeloom verify --key` does.
fn run(
    home: &Path,
    (job, keys): (i64, Vec<tapeloom_format::MasterKey>),
    drive: Option<usize>,
) -> Outcome {
    let mut home = tapeloom_engine::Home::open(home).map_err(|e| e.to_string())?;
    home.keys = keys;
    let r = tapeloom_engine::verify(&home, job, drive).map_err(|e| e.to_string())?;
    serde_json::to_vec(&tapeloom_ops::docs::verified(job, r)).map_err(|e| e.to_string())
}

/// `GET /api/verifies/N` by `token`.
fn outcome(shared: &Shared, token: &Token, n: &str) -> Answer {
    let no = || Answer::error(404, &format!("no verify {n}"));
    let Ok(number) = n.parse::<u64>() else {
        return no();
    };
    match shared.verifies.lock().by_number.get(&number) {
        Some(r) if r.client == token.name => {}
        _ => return no(),
    }
    wait(shared, number)
}

/// Waits up to [`LONG_POLL`] for verify `number`'s end: its answer, or `202`.
fn wait(shared: &Shared, number: u64) -> Answer {
    let until = Instant::now() + LONG_POLL;
    let v = &shared.verifies;
    let mut runs = v.lock();
    loop {
        let Some(run) = runs.by_number.get(&number) else {
            return Answer::error(404, &format!("no verify {number}"));
        };
        match &run.outcome {
            Some(Ok(doc)) => return Answer::raw_json(doc.clone()),
            Some(Err(why)) => return Answer::error(409, why),
            None => {}
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let mut a = Answer::json(&Pending {
                verify: number,
                job_id: run.job,
            });
            a.status = 202;
            return a;
        }
        (runs, _) = (v.changed)
            .wait_timeout(runs, left)
            .unwrap_or_else(PoisonError::into_inner);
    }
}
