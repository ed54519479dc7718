//! The read-only routes: the JSON API of the catalog and the queue, and the
//! metrics; the dispatcher of the status page's and the site's routes.
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
//! - `GET /api/site`: the site's servers and queue (`site.rs`).
//!
//! A client token sees the jobs it ran; another client's job is answered as a job
//! that does not exist (404), whatever is asked of it. An admin token sees all.

use crate::auth;
use crate::http::{failed, Answer, Request};
use crate::metrics;
use crate::queue::Entry;
use crate::seen::Seen;
use crate::site::Site;
use crate::status;
use crate::work::Work;
use std::net::SocketAddr;
use std::path::Path;
use tapeloom_engine::{Error, JobError};
use tapeloom_ops::clients::may_see;
use tapeloom_ops::tokens::Token;
use tapeloom_ops::{jobs, ls};
use tapeloom_ops::{Conn, OpsError};

/// Answers `req` from `peer` from the jobs' state `work` and what the status
/// page saw (`seen`); refusals and failures are logged on stderr.
pub fn answer(
    req: &Request,
    conn: &Conn,
    (work, seen): (&Work, &Seen),
    peer: SocketAddr,
) -> Answer {
    if req.method == "GET" && matches!(req.path.as_str(), "/" | "/status") {
        return status::page();
    }
    let metrics = &work.metrics;
    let token = match auth::client(req, conn, metrics, peer) {
        Ok(t) => t,
        Err(a) => return a,
    };
    if req.method != "GET" {
        return Answer::error(405, &format!("{} is not served", req.method));
    }
    let segments: Vec<&str> = req.path.trim_end_matches('/').split('/').collect();
    let home = work.home.as_path();
    let result = match segments.as_slice() {
        ["", "api", "jobs"] => list_jobs(home, &token),
        ["", "api", "queue"] => Ok(queue_doc(work, &token)),
        ["", "api", "site"] => Ok(site_doc(work.site.as_ref(), conn, &token)),
        ["", "api", "status"] => {
            let site = work.site.as_ref();
            let s3 = metrics.s3().map(|m| &**m);
            status::answer((&work.queue, seen, s3), (home, site), conn, &token)
        }
        ["", "api", "jobs", id, "report.svg"] => status::report_svg(conn, &token, id),
        ["", "api", "jobs", id, "files"] => list_files((home, conn), &token, id, req.param("path")),
        ["", "api", "sets", "files"] => list_set(home, &token, req),
        ["", "metrics"] if !token.admin => return auth::not_admin(token, req, metrics, peer),
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
fn queue_doc(work: &Work, token: &Token) -> Answer {
    #[derive(serde::Serialize)]
    struct Doc {
        waiting: usize,
        drives: usize,
        drives_busy: usize,
        spool_used_bytes: u64,
        spool_bytes: u64,
        queue: Vec<Entry>,
        recent: Vec<Entry>,
    }
    let mine = |e: &Entry| may_see(token, Some(e.client.as_str()));
    let q = &work.queue;
    let (used, size) = (work.drive_pool.stage_use()).unwrap_or((0, work.queue_limits.spool_bytes));
    Answer::json(&Doc {
        waiting: q.waiting(),
        drives: work.drives,
        drives_busy: work.drive_pool.busy(),
        spool_used_bytes: used,
        spool_bytes: size,
        queue: q.entries().into_iter().filter(mine).collect(),
        recent: q.recent().into_iter().filter(mine).collect(),
    })
}

/// `GET /api/site`: the servers, and the site's queue as `token` may see it.
fn site_doc(site: Option<&Site>, conn: &Conn, token: &Token) -> Answer {
    match crate::site::view(site, conn, token) {
        None => Answer::error(404, "this server is alone: its catalog is not a site's"),
        Some(Ok(d)) => Answer::json(&d),
        Some(Err(e)) => Answer::error(503, &format!("the site cannot be read: {e}")),
    }
}
