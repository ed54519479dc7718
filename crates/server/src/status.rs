//! The status page (`GET /`, `/status`) and its document (`GET /api/status`):
//! the library's drives and cartridges, the jobs running with their bytes and
//! rates per drive and per stream, the last jobs, and a job's plot
//! (`GET /api/jobs/ID/report.svg`).
//!
//! The library is looked at as `library status` does, without the home's lock
//! (a client's backup may hold it): its inventory only, nothing that moves a tape
//! (`tapeloom_ops::library::status`).

use super::queue::{Entry, Live};
use super::serve::Shared;
use crate::http::Answer;
use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};
use tapeloom_engine::{Error, JobError, Series};
use tapeloom_ops::clients::may_see;
use tapeloom_ops::status_page::Cartridge;
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
}

/// The library as its inventory says, or why it could not be looked at.
#[derive(Serialize, Default, Clone)]
pub struct LibraryView {
    /// What it is (`virtual library in ...`, `SCSI library ...`).
    pub description: Option<String>,
    /// Why the library could not be looked at.
    pub error: Option<String>,
    /// Its drives.
    pub drives: Vec<Drive>,
    /// Its cartridges.
    pub cartridges: Vec<Cartridge>,
}

impl From<tapeloom_ops::status_page::Status> for LibraryView {
    fn from(s: tapeloom_ops::status_page::Status) -> Self {
        LibraryView {
            description: s.description,
            error: s.error,
            drives: (s.drives.into_iter())
                .map(|d| Drive {
                    index: d.index,
                    device: d.device,
                    loaded: d.loaded,
                    job: None,
                    bytes: None,
                    bytes_per_s: None,
                })
                .collect(),
            cartridges: s.cartridges,
        }
    }
}

/// A drive, its cartridge, and the running job writing on it.
#[derive(Serialize, Clone)]
pub struct Drive {
    /// Its index.
    pub index: usize,
    /// Its device, for people.
    pub device: String,
    /// The barcode of the cartridge in it.
    pub loaded: Option<String>,
    /// The job writing on it (one the token may see).
    pub job: Option<i64>,
    /// The bytes that job wrote on it so far.
    pub bytes: Option<u64>,
    /// Its rate over the last seconds, bytes per second.
    pub bytes_per_s: Option<f64>,
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

/// Rates are taken over this much of the latest figures.
const WINDOW: Duration = Duration::from_secs(5);
/// A rate needs figures at least this far apart.
const SHORTEST: Duration = Duration::from_millis(500);
/// Figures kept per series, at most (many pages polling at once).
const KEPT: usize = 64;

/// The library is looked at once in this long at most, however many pages ask
/// (a real changer answers each look with a READ ELEMENT STATUS).
const LOOK_EVERY: Duration = Duration::from_secs(2);

/// What earlier requests saw.
#[derive(Default)]
pub struct Seen {
    rates: Rates,
    /// The library's last look, and when.
    library: Mutex<Option<(Instant, LibraryView)>>,
    /// Whether a request looks at the library now.
    looking: AtomicBool,
}

/// The figures seen by earlier looks, from which rates are taken.
#[derive(Default)]
struct Rates(Mutex<HashMap<String, VecDeque<(Instant, u64)>>>);

impl Rates {
    /// Records `figures` (key, bytes so far) seen at `now`, forgets the series not
    /// among them, and gives each the rate since the oldest figure in the window.
    fn observe(&self, now: Instant, figures: &[(&str, u64)]) -> HashMap<String, f64> {
        let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        seen.retain(|k, _| figures.iter().any(|(f, _)| f == k));
        let mut rates = HashMap::new();
        for &(key, bytes) in figures {
            let q = seen.entry(key.to_string()).or_default();
            while q.len() >= KEPT
                || (q.len() > 1 && q.front().is_some_and(|(t, _)| now - *t > WINDOW))
            {
                q.pop_front();
            }
            q.push_back((now, bytes));
            if let Some(&(t0, b0)) = q.front() {
                let dt = now.saturating_duration_since(t0);
                if dt >= SHORTEST {
                    let rate = bytes.saturating_sub(b0) as f64 / dt.as_secs_f64();
                    rates.insert(key.to_string(), rate);
                }
            }
        }
        rates
    }
}

/// `GET /` and `GET /status`: the page.
pub fn page() -> Answer {
    Answer {
        status: 200,
        content_type: "text/html; charset=utf-8",
        body: PAGE.as_bytes().to_vec(),
    }
}

/// `GET /api/status`: what `token` may see.
pub fn answer(shared: &Shared, conn: &Conn, token: &Token) -> Result<Answer, OpsError> {
    let now = Instant::now();
    let running: Vec<Running> = running(shared.queue.live(), &shared.status.rates, now)
        .into_iter()
        .filter(|r| may_see(token, Some(r.entry.client.as_str())))
        .collect();
    let mut library = shared.status.library(&shared.home, conn, now)?;
    on_drives(&mut library.drives, &running);
    let mine = |e: &Entry| may_see(token, Some(e.client.as_str()));
    let doc = Status {
        library,
        recent: shared.queue.recent().into_iter().filter(mine).collect(),
        jobs: jobs::list(conn, |j| may_see(token, j.client.as_deref()))?.last(LAST_JOBS),
        running,
        site: super::site::view(shared, conn, token).transpose()?,
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

impl Seen {
    /// The library's last look, looked at again when older than [`LOOK_EVERY`].
    /// The look (a changer's inventory may take seconds) runs with no lock held;
    /// while one runs, other requests are answered with the last look.
    fn library(&self, home: &Path, conn: &Conn, now: Instant) -> Result<LibraryView, OpsError> {
        {
            let last = self.library.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((at, view)) = &*last {
                let fresh = now.saturating_duration_since(*at) < LOOK_EVERY;
                if fresh || self.looking.swap(true, Ordering::AcqRel) {
                    return Ok(view.clone());
                }
            }
        }
        let view = tapeloom_ops::status_page::status(home, conn).map(LibraryView::from);
        self.looking.store(false, Ordering::Release);
        let view = view?;
        let mut last = self.library.lock().unwrap_or_else(PoisonError::into_inner);
        *last = Some((now, view.clone()));
        Ok(view)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_is_taken_over_the_window_and_forgotten_with_its_series() {
        let r = Rates::default();
        let t0 = Instant::now();
        assert!(r.observe(t0, &[("a", 0)]).is_empty());
        let at = |s: u64| t0 + Duration::from_secs(s);
        let got = r.observe(at(1), &[("a", 1000)]);
        assert_eq!(got.get("a"), Some(&1000.0));
        // Older figures leave the window: the rate is that of the last seconds.
        for s in 2..=10 {
            r.observe(at(s), &[("a", 1000 + (s - 1) * 10)]);
        }
        let got = r.observe(at(11), &[("a", 1100)]);
        let a = got["a"];
        assert!((9.0..=11.0).contains(&a), "{a}");
        // A series not seen is forgotten: seen again, it has no rate yet.
        r.observe(at(12), &[("b", 5)]);
        assert!(r.observe(at(12), &[("a", 2000)]).is_empty());
    }
}
