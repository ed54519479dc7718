//! The status page (`GET /`, `/status`) and its document (`GET /api/status`):
//! the library's drives and cartridges, the jobs running with their bytes and
//! rates per drive and per stream, the last jobs, the S3 front end's figures
//! when it is on, and a job's plot (`GET /api/jobs/ID/report.svg`).
//!
//! What earlier requests saw, from which the rates are taken, and the library's
//! last look are in `seen.rs`.

use crate::http::Answer;
use crate::metrics_s3::S3Metrics;
use crate::queue::{Entry, Live, Queue};
use crate::seen::{Drive, LibraryView, Rates, Seen};
use crate::site::Site;
use serde::Serialize;
use std::path::Path;
use std::sync::PoisonError;
use std::time::Instant;
use tapeloom_engine::{Error, JobError, Series};
use tapeloom_ops::clients::may_see;
use tapeloom_ops::tokens::Token;
use tapeloom_ops::{jobs, report};
use tapeloom_ops::{Conn, OpsError};

/// The page: self-contained, it holds no data and asks for none without a token.
const PAGE: &str = include_str!("status.html");

/// Jobs of the catalog the document lists, the last ones.
const LAST_JOBS: usize = 20;

/// The document of `GET /api/status`.
#[derive(Serialize)]
pub struct Status {
    /// The library's drives and cartridges.
    pub library: LibraryView,
    /// The jobs not ended (waiting, receiving, writing), oldest first.
    pub running: Vec<Running>,
    /// The server's jobs that ended since it started, newest first.
    pub recent: Vec<Entry>,
    /// The catalog's last jobs, as `jobs --json` lists them, oldest first.
    pub jobs: tapeloom_proto::jobs::Jobs,
    /// The site's servers and queue, when the server is one of several.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub site: Option<tapeloom_proto::site::SiteDoc>,
    /// The S3 front end's figures, when it is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub s3: Option<S3Status>,
}

/// What the S3 front end holds and did: what waits for tape and for a
/// restore, the restore cache's use, and the requests it answered.
#[derive(Serialize)]
pub struct S3Status {
    /// Objects not yet on tape.
    pub objects_waiting: u64,
    /// Their bytes.
    pub bytes_waiting: u64,
    /// Restores asked that wait: gathering, or for a drive.
    pub restores_waiting: u64,
    /// Restores being read from tape.
    pub restores_running: u64,
    /// Bytes of the restore cache in use.
    pub cache_used_bytes: u64,
    /// The restore cache's limit.
    pub cache_limit_bytes: u64,
    /// S3 requests answered since the server started.
    pub requests_answered: u64,
}

/// The S3 front end's figures, from the catalog and from what `m` counted.
fn s3_status(conn: &Conn, m: &S3Metrics) -> Result<S3Status, OpsError> {
    let f = tapeloom_ops::metrics::s3_figures(conn)?;
    let (restores_waiting, restores_running) = m.restores(f.restores);
    Ok(S3Status {
        objects_waiting: f.objects_waiting,
        bytes_waiting: f.bytes_waiting,
        restores_waiting,
        restores_running,
        cache_used_bytes: f.cache_bytes,
        cache_limit_bytes: m.cache_limit(),
        requests_answered: m.answered_total(),
    })
}

/// A job not ended, with its figures per drive and per stream.
#[derive(Serialize)]
pub struct Running {
    /// The queue's entry.
    #[serde(flatten)]
    pub entry: Entry,
    /// Bytes so far: its drives' latest samples (which move within a large file,
    /// where `written_bytes` moves at each file's end), or `written_bytes` when more.
    pub bytes: u64,
    /// The job's rate over the last seconds, bytes per second.
    pub bytes_per_s: Option<f64>,
    /// Per drive (named by its index): bytes so far and rate.
    pub drives: Vec<Flow>,
    /// Per stream: bytes so far and rate.
    pub streams: Vec<Flow>,
}

/// Bytes so far of a drive or stream, and its rate.
#[derive(Serialize)]
pub struct Flow {
    /// The drive's index, or the stream's name.
    pub name: String,
    /// Bytes so far.
    pub bytes: u64,
    /// Bytes per second over the last seconds; none until two looks apart.
    pub bytes_per_s: Option<f64>,
    /// Its key among the rates.
    #[serde(skip)]
    key: String,
}

/// `GET /` and `GET /status`: the page.
pub fn page() -> Answer {
    Answer {
        status: 200,
        content_type: "text/html; charset=utf-8",
        body: PAGE.as_bytes().to_vec(),
    }
}

/// `GET /api/status`: what `token` may see of the `queue`, of the library of the
/// home at `home` (its last look in `seen`), of its catalog (`conn`), of its
/// `site`, and of the S3 front end (what `s3` counted) when it is on.
pub fn answer(
    (queue, seen, s3): (&Queue, &Seen, Option<&S3Metrics>),
    (home, site): (&Path, Option<&Site>),
    conn: &Conn,
    token: &Token,
) -> Result<Answer, OpsError> {
    let now = Instant::now();
    let running: Vec<Running> = running(queue.live(), &seen.rates, now)
        .into_iter()
        .filter(|r| may_see(token, Some(r.entry.client.as_str())))
        .collect();
    let mut library = seen.library(home, conn, now)?;
    on_drives(&mut library.drives, &running);
    let mine = |e: &Entry| may_see(token, Some(e.client.as_str()));
    let doc = Status {
        library,
        recent: queue.recent().into_iter().filter(mine).collect(),
        jobs: jobs::list(conn, |j| may_see(token, j.client.as_deref()))?.last(LAST_JOBS),
        running,
        site: crate::site::view(site, conn, token).transpose()?,
        s3: s3.map(|m| s3_status(conn, m)).transpose()?,
    };
    Ok(Answer::json(&doc))
}

/// Every job not ended, with its figures and their rates (taken over all jobs, so
/// that what one token sees does not make another's rates forget).
fn running(live: Vec<Live>, rates: &Rates, now: Instant) -> Vec<Running> {
    let mut out: Vec<Running> = live.into_iter().map(flows).collect();
    let owned: Vec<(String, u64)> = (out.iter())
        .flat_map(|r| {
            let job = (r.entry.backup.to_string(), r.bytes);
            let flows = r.drives.iter().chain(&r.streams);
            std::iter::once(job).chain(flows.map(|f| (f.key.clone(), f.bytes)))
        })
        .collect();
    let figures: Vec<(&str, u64)> = owned.iter().map(|(k, b)| (k.as_str(), *b)).collect();
    let rates = rates.observe(now, &figures);
    for r in &mut out {
        r.bytes_per_s = rates.get(&r.entry.backup.to_string()).copied();
        for f in r.drives.iter_mut().chain(&mut r.streams) {
            f.bytes_per_s = rates.get(&f.key).copied();
        }
    }
    out
}

/// A job's entry with its drives' and streams' latest samples.
fn flows(l: Live) -> Running {
    let (mut drives, mut streams) = (Vec::new(), Vec::new());
    if let Some(p) = &l.progress {
        let series = p.series.lock().unwrap_or_else(PoisonError::into_inner);
        for (s, latest) in series.iter() {
            let key = format!("{}/{s}", l.entry.backup);
            let (name, to) = match s {
                Series::Drive(d) => (d.to_string(), &mut drives),
                Series::Stream(n) => (n.clone(), &mut streams),
                Series::Stage => continue,
            };
            to.push(Flow {
                name,
                bytes: latest.bytes,
                bytes_per_s: None,
                key,
            });
        }
    }
    let sampled: u64 = drives.iter().map(|f: &Flow| f.bytes).sum();
    Running {
        bytes: sampled.max(l.entry.written_bytes),
        entry: l.entry,
        bytes_per_s: None,
        drives,
        streams,
    }
}

/// Each drive's running job (one the token may see), its bytes and rate there.
fn on_drives(drives: &mut [Drive], running: &[Running]) {
    for d in drives {
        let name = d.index.to_string();
        let on =
            (running.iter()).find_map(|r| Some((r, r.drives.iter().find(|f| f.name == name)?)));
        d.job = on.and_then(|(r, _)| r.entry.job);
        d.bytes = on.map(|(_, f)| f.bytes);
        d.bytes_per_s = on.and_then(|(_, f)| f.bytes_per_s);
    }
}

/// `GET /api/jobs/ID/report.svg`: the plot of a job's backup, as `report` draws
/// it; another client's job is one that does not exist.
pub fn report_svg(conn: &Conn, token: &Token, id: &str) -> Result<Answer, OpsError> {
    let Ok(id) = id.parse::<i64>() else {
        return Ok(Answer::error(404, &format!("no job {id}")));
    };
    if tapeloom_ops::clients::job(conn, token, id)?.is_none() {
        return Err(Error::Job(JobError::NoJob(id)).into());
    }
    match report::svg(conn, id, "backup") {
        Ok(svg) => Ok(Answer {
            status: 200,
            content_type: "image/svg+xml",
            body: svg.into_bytes(),
        }),
        Err(e) => match e.downcast::<Error>() {
            Ok(e) => Err(e.into()),
            Err(e) => match e.downcast_ref::<report::NoSamples>() {
                Some(no) => Ok(Answer::error(404, &no.to_string())),
                _ => {
                    tracing::error!("draw job {id}: {e:#}");
                    Ok(Answer::error(500, &format!("draw job {id}: {e}")))
                }
            },
        },
    }
}
