//! The server's answers: who asks (the token), what they may see, and the JSON
//! API (read-only for now) and metrics.
//!
//! - `GET /api/jobs`: the document of `tapeloom jobs --json`.
//! - `GET /api/jobs/ID/files?path=P`: the document of `tapeloom ls ID P --json`.
//! - `GET /metrics`: Prometheus's text format; an admin token only.
//! - `GET /api/jobs/ID/restore`: a job's blocks, streamed (`restores.rs`).
//! - `GET /api/sets/restore?set=NAME`: a set's point-in-time restore's blocks,
//!   streamed (`restores.rs`).
//! - `POST /api/jobs/ID/verify`, `GET /api/verifies/N`: a client's verify, read
//!   on the server's drives (`verifies.rs`).
//! - `GET /`, `GET /status`: the status page, no token needed; `GET /api/status`
//!   and `GET /api/jobs/ID/report.svg`, what it shows (`status.rs`).
//!
//! A client token sees the jobs it ran; another client's job is answered as a job
//! that does not exist (404), whatever is asked of it. An admin token sees all.

use super::metrics::{self, Metrics};
use super::serve::Shared;
use crate::http::Request;
use std::net::SocketAddr;
use std::path::Path;
use tapeloom_engine::{Error, JobError};
pub use tapeloom_ops::clients::may_see;
use tapeloom_ops::tokens::{self, Token};
use tapeloom_ops::{jobs, ls};
use tapeloom_ops::{Conn, OpsError};
use tracing::{error, warn};

/// An answer to write.
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// Its content type.
    pub content_type: &'static str,
    /// Its body.
    pub body: Vec<u8>,
}

const JSON: &str = "application/json";

impl Answer {
    /// A JSON document.
    pub fn json(doc: &impl serde::Serialize) -> Answer {
        match serde_json::to_vec(doc) {
            Ok(body) => Answer {
                status: 200,
                content_type: JSON,
                body,
            },
            Err(e) => Answer::error(500, &format!("encode the answer: {e}")),
        }
    }

    /// A JSON document already encoded.
    pub fn raw_json(body: Vec<u8>) -> Answer {
        Answer {
            status: 200,
            content_type: JSON,
            body,
        }
    }

    /// A refusal: `{"error": "..."}` with the reason on one line.
    pub fn error(status: u16, why: &str) -> Answer {
        #[derive(serde::Serialize)]
        struct Body {
            error: String,
        }
        let doc = Body {
            error: why.replace(['\n', '\r'], " "),
        };
        Answer {
            status,
            content_type: JSON,
            body: serde_json::to_vec(&doc).unwrap_or_default(),
        }
    }
}

/// Why a request's token is refused.
#[derive(Debug, thiserror::Error)]
enum Refusal {
    #[error("no token given (Authorization: Bearer TOKEN)")]
    NoToken,
    #[error("unknown token")]
    Unknown,
    #[error("the token is revoked")]
    Revoked(String),
    #[error("an admin token is needed")]
    NotAdmin(String),
}

impl Refusal {
    /// Who asked, for the log: the token's name, never the token.
    fn who(&self) -> &str {
        match self {
            Refusal::NoToken => "no token",
            Refusal::Unknown => "unknown token",
            Refusal::Revoked(n) | Refusal::NotAdmin(n) => n,
        }
    }

    fn status(&self) -> u16 {
        match self {
            Refusal::NotAdmin(_) => 403,
            _ => 401,
        }
    }
}

/// The token a request carries, checked against the catalog (so a token revoked
/// while the server runs is refused from its next request on).
fn authenticate(req: &Request, conn: &Conn) -> Result<Result<Token, Refusal>, OpsError> {
    let Some(value) = &req.authorization else {
        return Ok(Err(Refusal::NoToken));
    };
    // The scheme's name is case-insensitive (RFC 9110).
    let (scheme, given) = value.split_at(value.len().min(7));
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return Ok(Err(Refusal::Unknown));
    }
    Ok(match tokens::find(conn, given.trim_ascii())? {
        None => Err(Refusal::Unknown),
        Some(t) if t.revoked_ns.is_some() => Err(Refusal::Revoked(t.name)),
        Some(t) => Ok(t),
    })
}

/// The token of `req` from `peer`, or the refusal to answer (logged on stderr).
pub fn client(
    req: &Request,
    conn: &Conn,
    metrics: &Metrics,
    peer: SocketAddr,
) -> Result<Token, Answer> {
    let refuse = |r: Refusal| {
        metrics.refused();
        let who = r.who();
        warn!(peer = %peer, "refused {who}: {} {}: {r}", req.method, req.path);
        Answer::error(r.status(), &r.to_string())
    };
    match authenticate(req, conn) {
        Ok(Ok(t)) => Ok(t),
        Ok(Err(r)) => Err(refuse(r)),
        Err(e) => Err(failed(&e, req, peer)),
    }
}

/// Answers `req` from `peer`; refusals and failures are logged on stderr.
pub fn answer(req: &Request, conn: &Conn, shared: &Shared, peer: SocketAddr) -> Answer {
    if req.method == "GET" && matches!(req.path.as_str(), "/" | "/status") {
        return super::status::page();
    }
    let metrics = &shared.metrics;
    let refuse = |r: Refusal| {
        metrics.refused();
        let who = r.who();
        warn!(peer = %peer, "refused {who}: {} {}: {r}", req.method, req.path);
        Answer::error(r.status(), &r.to_string())
    };
    let token = match authenticate(req, conn) {
        Ok(Ok(t)) => t,
        Ok(Err(r)) => return refuse(r),
        Err(e) => return failed(&e, req, peer),
    };
    if req.method != "GET" {
        return Answer::error(405, &format!("{} is not served", req.method));
    }
    let segments: Vec<&str> = req.path.trim_end_matches('/').split('/').collect();
    let home = shared.home.as_path();
    let result = match segments.as_slice() {
        ["", "api", "jobs"] => list_jobs(home, &token),
        ["", "api", "queue"] => Ok(queue_doc(shared, &token)),
        ["", "api", "site"] => Ok(super::site::doc(shared, conn, &token)),
        ["", "api", "status"] => super::status::answer(shared, conn, &token),
        ["", "api", "jobs", id, "report.svg"] => super::status::report_svg(conn, &token, id),
        ["", "api", "jobs", id, "files"] => list_files((home, conn), &token, id, req.param("path")),
        ["", "api", "sets", "files"] => list_set(home, &token, req),
        ["", "metrics"] if !token.admin => return refuse(Refusal::NotAdmin(token.name)),
        ["", "metrics"] => match metrics.render(conn, home) {
            Ok(text) => Ok(Answer {
                status: 200,
                content_type: metrics::CONTENT_TYPE,
                body: text.into_bytes(),
            }),
            Err(e) => Err(e),
        },
        _ => return Answer::error(404, &format!("no such resource: {}", req.path)),
    };
    result.unwrap_or_else(|e| failed(&e, req, peer))
}

/// An error met while answering: a job or path that is not there is 404; anything
/// else is the server's own failure (500), logged.
fn failed(e: &OpsError, req: &Request, peer: SocketAddr) -> Answer {
    match e.engine() {
        Some(Error::Job(JobError::NoJob(_) | JobError::NoPath { .. })) => {
            Answer::error(404, &e.to_string())
        }
        _ => {
            error!(peer = %peer, "{} {}: {e}", req.method, req.path);
            Answer::error(500, &e.to_string())
        }
    }
}

fn list_jobs(home: &Path, token: &Token) -> Result<Answer, OpsError> {
    let cat = Conn::open(home)?;
    let doc = jobs::list(&cat, |j| may_see(token, j.client.as_deref()))?;
    Ok(Answer::json(&doc))
}

/// `GET /api/sets/files?set=NAME[&at=TIME][&path=P]`: the set's tree at a point in
/// time, when the token may see every job it takes rows from (else 404).
fn list_set(home: &Path, token: &Token, req: &Request) -> Result<Answer, OpsError> {
    let text = |k| {
        req.param(k)
            .map(|v| String::from_utf8_lossy(v).into_owned())
    };
    let Some(set) = text("set").filter(|s| !s.is_empty()) else {
        return Ok(Answer::error(400, "a set's listing needs set=NAME"));
    };
    let path = req.param("path").filter(|p| !p.is_empty());
    let at = text("at");
    let cat = Conn::open(home)?;
    let listing = ls::set_listing(
        &cat,
        (&set, at.as_deref(), path),
        |j| may_see(token, j.client.as_deref()),
        |_| true,
    )?;
    Ok(Answer::json(&listing))
}

fn list_files(
    (home, conn): (&Path, &Conn),
    token: &Token,
    id: &str,
    path: Option<&[u8]>,
) -> Result<Answer, OpsError> {
    let Ok(id) = id.parse::<i64>() else {
        return Ok(Answer::error(404, &format!("no job {id}")));
    };
    // Another client's job is refused as one that does not exist.
    if tapeloom_ops::clients::job(conn, token, id)?.is_none() {
        return Err(Error::Job(JobError::NoJob(id)).into());
    }
    let path = path.filter(|p| !p.is_empty());
    let cat = Conn::open(home)?;
    Ok(Answer::json(&ls::job_listing(&cat, id, path)?))
}

/// `GET /api/queue`: the jobs waiting, receiving and writing, and the last that
/// ended; a client's token sees its own.
fn queue_doc(shared: &Shared, token: &Token) -> Answer {
    #[derive(serde::Serialize)]
    struct Doc {
        waiting: usize,
        drives: usize,
        drives_busy: usize,
        spool_used_bytes: u64,
        spool_bytes: u64,
        queue: Vec<super::queue::Entry>,
        recent: Vec<super::queue::Entry>,
    }
    let mine = |e: &super::queue::Entry| may_see(token, Some(e.client.as_str()));
    let q = &shared.queue;
    let (used, size) =
        (shared.drive_pool.stage_use()).unwrap_or((0, shared.queue_limits.spool_bytes));
    Answer::json(&Doc {
        waiting: q.waiting(),
        drives: shared.drives,
        drives_busy: shared.drive_pool.busy(),
        spool_used_bytes: used,
        spool_bytes: size,
        queue: q.entries().into_iter().filter(mine).collect(),
        recent: q.recent().into_iter().filter(mine).collect(),
    })
}
