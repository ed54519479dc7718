//! A client's verify of one of its jobs, read on the server's drives.
//!
//! - `POST /api/jobs/ID/verify` (an optional `commands::verify::Ask` document: the
//!   drive to read with): the token may see the job (else 404, nothing read); an
//!   encrypted job is read with the server's key for it (`keys.rs`), and
//!   refused (409) when it holds none. A thread opens the home with its lock (so
//!   it waits for a job on the drives to end) and runs the engine's verify as `tapeloom verify` does.
//!   The answer, within [`LONG_POLL`], is the document of `tapeloom verify --json`,
//!   the reading's failure (409), or `202` and a `commands::verify::Pending`
//!   document with the verify's number.
//! - `GET /api/verifies/N`: the verify's end, waited for up to [`LONG_POLL`], as
//!   above; only the token that asked for it may ask (else 404).
//!
//! A damaged job is not a failure here: its document says `ok: false`, as a local
//! verify's does, and the client exits as the local command does.

use crate::auth;
use crate::http::{Answer, Request, LONG_POLL};
use crate::metrics::ThreadKind;
use crate::verify_runs::{Outcome, Verifies};
use crate::work::Work;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, PoisonError};
use std::time::Instant;
use tapeloom_ops::tokens::Token;
use tapeloom_ops::Conn;
use tapeloom_proto::verify::{Ask, Pending};

/// Answers the verify routes, the verifies being `runs` and the jobs' state
/// `work` (the home, its keys and site, the counters); none for any other
/// request.
pub fn route(
    (work, runs): (&Arc<Work>, &Arc<Verifies>),
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
    let token = match auth::client(req, cat, &work.metrics, peer) {
        Ok(t) => t,
        Err(a) => return Some(a),
    };
    Some(match begin {
        Ok(id) => start((work, runs), (cat, &token), id, &req.body),
        Err(n) => outcome(runs, &token, n),
    })
}

/// `POST /api/jobs/ID/verify` by `token`.
fn start(
    (work, runs): (&Arc<Work>, &Arc<Verifies>),
    (cat, token): (&Conn, &Token),
    id: &str,
    body: &[u8],
) -> Answer {
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
    if let Some(a) = crate::reads::route_read(work.site.as_ref(), cat, job_id, &[]) {
        return a;
    }
    if let Some((fingerprint, _)) = &job.key {
        if work.keys.by_fingerprint(fingerprint).is_none() {
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
    let number = runs.add(&token.name, job_id);
    let (s, r, home) = (work.clone(), runs.clone(), work.home.clone());
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
            r.end(number, outcome);
        });
    if let Err(e) = spawned {
        runs.end(number, Err(e.to_string()));
        return Answer::error(503, &format!("start a verify's thread: {e}"));
    }
    wait(runs, number)
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
fn outcome(runs: &Verifies, token: &Token, n: &str) -> Answer {
    let no = || Answer::error(404, &format!("no verify {n}"));
    let Ok(number) = n.parse::<u64>() else {
        return no();
    };
    match runs.lock().by_number.get(&number) {
        Some(r) if r.client == token.name => {}
        _ => return no(),
    }
    wait(runs, number)
}

/// Waits up to [`LONG_POLL`] for verify `number`'s end: its answer, or `202`.
fn wait(v: &Verifies, number: u64) -> Answer {
    let until = Instant::now() + LONG_POLL;
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
