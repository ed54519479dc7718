//! Several servers, one site: a server whose catalog is PostgreSQL shares it
//! with the other servers of the site (`tapeloom_catalog`'s `site` module keeps
//! the servers, their heartbeats and the site's queue).
//!
//! - At its start the server registers (its name, the URL clients reach it at,
//!   its fingerprint, its library and the cartridges in it) and gives back the
//!   claims it held before a restart. Its site thread then sends a heartbeat,
//!   takes silent servers for dead, ends the tickets of its jobs that ended, and
//!   claims backups from the site's queue while it has a free drive and a
//!   writable cartridge of the backup's pool.
//! - A backup a client asks for is queued in the catalog (its number is the
//!   ticket's, on every server). The server that was asked waits for a claim:
//!   its own (the job is let in here, as on a server alone) or another's (the
//!   answer is `303` naming that server, and the client asks it with the same
//!   number). A ticket is begun once, by the server that claimed it, so a job
//!   never runs twice.
//! - A restore or a verify goes to the server whose library holds the job's
//!   cartridges: `303` naming it, or, when it is down, a one-line refusal naming
//!   it and the cartridges.
//!
//! Scheduled jobs are the server's own and are not queued in the site.

use super::api::{may_see, Answer};
use super::serve::Shared;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tapeloom_catalog::{Catalog, JobState, ServerRow, Ticket, TicketState, Token};
use tapeloom_proto::backup::{State, Waiting};
use tapeloom_proto::site::{SentOn, SiteDoc, SiteServer, SiteTicket, SENT_ON};

/// The numbers the server gives its own jobs (scheduled ones) start here, far
/// past the site's tickets, so that the two never meet.
pub const OWN_NUMBERS: u64 = 1 << 40;

/// How often the site thread claims.
const CLAIM_EVERY: Duration = Duration::from_millis(200);

/// How long a backup just queued waits for a claim before its client is told
/// its number (`202`).
const FIRST_ANSWER: Duration = Duration::from_secs(2);

/// How long a claim waits for its client before the backup is given up.
const CLAIM_KEPT: Duration = Duration::from_secs(60);

/// The server among the others of its site.
pub struct Site {
    /// Its name (its home's).
    pub name: String,
    /// Where clients reach it.
    pub url: String,
    /// Its certificate's fingerprint.
    pub fingerprint: String,
    /// How long a silent server is waited for.
    pub timeout: Duration,
    /// The cartridges of its library when it started.
    pub(crate) barcodes: Vec<String>,
    /// What its library is, as it registers (a line of JSON).
    libraries: String,
    /// Tickets it claimed whose clients have not come yet, and since when.
    claimed: Mutex<BTreeMap<u64, Instant>>,
    /// Set when the server stops: it claims no more.
    stopping: AtomicBool,
}

impl Site {
    /// The server `name` of a site, reached at `url`, its library of `drives`
    /// drives holding `barcodes`.
    pub fn new(
        name: String,
        (url, fingerprint): (String, String),
        timeout: Duration,
        (drives, barcodes): (usize, Vec<String>),
    ) -> Self {
        let libraries = serde_json::json!({
            "drives": drives,
            "cartridges": barcodes.len(),
        })
        .to_string();
        Site {
            libraries,
            name,
            url,
            fingerprint,
            timeout,
            barcodes,
            claimed: Mutex::new(BTreeMap::new()),
            stopping: AtomicBool::new(false),
        }
    }

    fn claimed(&self) -> MutexGuard<'_, BTreeMap<u64, Instant>> {
        self.claimed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn timeout_s(&self) -> i64 {
        self.timeout.as_secs() as i64
    }

    /// The server stops: it claims nothing more, and the catalog says so.
    pub fn stop(&self, cat: &Catalog) {
        self.stopping.store(true, Ordering::Release);
        let _ = cat.unclaim_all(&self.name);
        let _ = cat.server_stopped(&self.name);
        self.claimed().clear();
    }
}

/// Registers the server and starts its site thread.
pub fn start(shared: &Arc<Shared>, site: &Site) -> Result<(), String> {
    let cat = catalog(shared)?;
    let e = |e: tapeloom_catalog::CatalogError| e.to_string();
    cat.register_server(&site.name, &site.url, &site.fingerprint, &site.libraries)
        .map_err(e)?;
    cat.set_server_cartridges(&site.name, &site.barcodes)
        .map_err(e)?;
    let given = cat.unclaim_all(&site.name).map_err(e)?;
    tracing::info!(
        server = %site.name,
        url = %site.url,
        "registered in the site; {given} claims of before the restart went back to the queue"
    );
    let s = Arc::clone(shared);
    std::thread::Builder::new()
        .name("site".into())
        .spawn(move || run(&s))
        .map(|_| ())
        .map_err(|e| format!("start the site's thread: {e}"))
}

fn catalog(shared: &Shared) -> Result<Catalog, String> {
    tapeloom_engine::Home::open_catalog_unlocked(&shared.home).map_err(|e| e.to_string())
}

/// The site thread: heartbeats, dead servers, ended tickets, claims.
fn run(shared: &Arc<Shared>) {
    let Some(site) = shared.site.as_ref() else {
        return;
    };
    let mut cat = None;
    let beat_every = (site.timeout / 6).max(Duration::from_millis(250));
    let mut last_beat = Instant::now();
    loop {
        std::thread::sleep(CLAIM_EVERY);
        if site.stopping.load(Ordering::Acquire) {
            return;
        }
        let c = match cat.take() {
            Some(c) => c,
            None => match catalog(shared) {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!("site: open the catalog: {e}");
                    continue;
                }
            },
        };
        let beat = last_beat.elapsed() >= beat_every;
        let done = || -> Result<(), tapeloom_catalog::CatalogError> {
            if beat {
                heartbeat(shared, site, &c)?;
            }
            claim(shared, site, &c)
        };
        match done() {
            Ok(()) => {
                if beat {
                    last_beat = Instant::now();
                }
                cat = Some(c);
            }
            Err(e) => tracing::warn!("site: {e}"),
        }
    }
}

/// One heartbeat: the server's, then the dead servers', then the tickets of
/// its jobs that ended, and the site's gauges.
fn heartbeat(shared: &Shared, site: &Site, cat: &Catalog) -> tapeloom_catalog::Result<()> {
    if !cat.heartbeat(&site.name)? {
        // Taken for dead while it was alive (a pause, a cut network): its
        // running jobs were failed, and its claims given back.
        tracing::warn!(server = %site.name, "the site took this server for dead: it registers again");
        site.claimed().clear();
        cat.register_server(&site.name, &site.url, &site.fingerprint, &site.libraries)?;
    }
    for r in cat.reap_dead(&site.name, site.timeout_s())? {
        tracing::warn!(
            server = %r.server,
            "took server {} for dead: {} claimed backups queued again, jobs {:?} failed",
            r.server,
            r.requeued.len(),
            r.failed
        );
    }
    end_tickets(shared, site, cat)
}

/// Ends the tickets this server began whose jobs ended without it seeing them
/// (resumed after a restart, or failed before it).
fn end_tickets(shared: &Shared, site: &Site, cat: &Catalog) -> tapeloom_catalog::Result<()> {
    let staged = cat.jobs_with_chunks()?;
    for t in cat.live_tickets()? {
        if t.state != TicketState::Begun || t.server.as_deref() != Some(site.name.as_str()) {
            continue;
        }
        if shared.backups.lock().contains_key(&(t.id as u64)) {
            continue;
        }
        let Some(job) = t.job_id.map(|j| cat.job(j)).transpose()?.flatten() else {
            // Begun and gone before its job was: it ended with the server.
            cat.end_ticket(t.id, Some("the server stopped before the job began"))?;
            continue;
        };
        let reason = match job.status {
            JobState::Running | JobState::Queued => continue,
            JobState::Failed if staged.contains(&job.id) => continue,
            JobState::Failed => Some("failed"),
            _ => None,
        };
        cat.end_ticket(t.id, reason)?;
    }
    Ok(())
}

/// Claims backups while the server has room: fewer jobs waiting for a drive
/// (claimed, let in, receiving) than free drives, and a writable cartridge of
/// the backup's pool. Claims whose clients did not come go back.
fn claim(shared: &Shared, site: &Site, cat: &Catalog) -> tapeloom_catalog::Result<()> {
    let stale: Vec<u64> = (site.claimed().iter())
        .filter(|(_, t)| t.elapsed() > CLAIM_KEPT)
        .map(|(k, _)| *k)
        .collect();
    for id in stale {
        // Its client did not come: gone, or it asked and went away. It would
        // never come now, and the backup is over.
        cat.drop_claim(
            id as i64,
            &site.name,
            "its client did not come for it within a minute",
        )?;
        site.claimed().remove(&id);
    }
    if shared.draining() {
        return Ok(());
    }
    loop {
        let pending = site.claimed().len()
            + (shared.queue.entries().iter())
                .filter(|e| matches!(e.state, State::Waiting | State::Receiving))
                .count();
        if pending >= shared.drive_pool.free() {
            return Ok(());
        }
        let writable = |pool: Option<&str>| writable(cat, &site.barcodes, pool);
        let Some(t) = cat.claim(&site.name, writable)? else {
            return Ok(());
        };
        tracing::info!(backup = t.id, client = %t.client, "claimed a backup of the site's queue");
        site.claimed().insert(t.id as u64, Instant::now());
    }
}

/// Whether the library holds a cartridge backup of `pool` may be written on:
/// an appendable volume of the pool, or a cartridge the catalog does not know
/// (blank) that no other pool holds. The drives' writer chooses among them
/// when it writes; this only tells whether there is a choice.
fn writable(cat: &Catalog, barcodes: &[String], pool: Option<&str>) -> bool {
    let pool = pool.unwrap_or(tapeloom_catalog::DEFAULT_POOL);
    let Ok(volumes) = cat.volumes() else {
        return false;
    };
    barcodes.iter().any(|b| {
        if tapeloom_device::is_cleaning(b) {
            return false;
        }
        match volumes.iter().find(|v| &v.barcode == b) {
            Some(v) => v.pool == pool && v.status == tapeloom_catalog::VolumeState::Append,
            None => cat
                .pool_of_barcode(b)
                .is_ok_and(|p| p.is_none_or(|p| p == pool)),
        }
    })
}

/// `POST /api/backups` on a site: the backup `doc` (its bytes `body`) is
/// queued, and its client told where it goes.
pub fn begin(
    shared: &Arc<Shared>,
    client: &str,
    (doc, body): (&tapeloom_proto::backup::Begin, &[u8]),
) -> Answer {
    let cat = match catalog(shared) {
        Ok(c) => c,
        Err(e) => return Answer::error(503, &format!("the catalog cannot be opened: {e}")),
    };
    match cat.enqueue(client, &doc.name, doc.pool.as_deref(), body) {
        // Told its number soon: a client that loses this server while its
        // backup waits asks the others for it by that number.
        Ok(id) => wait_claim(shared, &cat, client, (id, FIRST_ANSWER)),
        Err(e) => Answer::error(503, &format!("the backup cannot be queued: {e}")),
    }
}

/// `POST /api/backups/ID/admit` for a backup this server does not hold: the
/// ticket's answer, none when there is no such ticket of `client`.
pub fn admit(shared: &Arc<Shared>, client: &str, id: &str) -> Option<Answer> {
    shared.site.as_ref()?;
    let id = id.parse::<i64>().ok()?;
    let cat = catalog(shared).ok()?;
    let t = cat.ticket(id).ok()??;
    (t.client == client).then(|| wait_claim(shared, &cat, client, (id, super::backups::LONG_POLL)))
}

/// Waits up to `wait` for ticket `id` to be claimed: let in here when
/// this server claimed it, sent on when another did, `202` while nobody has.
fn wait_claim(
    shared: &Arc<Shared>,
    cat: &Catalog,
    client: &str,
    (id, wait): (i64, Duration),
) -> Answer {
    let Some(site) = shared.site.as_ref() else {
        return Answer::error(404, &format!("no backup {id}"));
    };
    let until = Instant::now() + wait;
    loop {
        let t = match cat.ticket(id) {
            Ok(Some(t)) => t,
            Ok(None) => return Answer::error(404, &format!("no backup {id}")),
            Err(e) => return Answer::error(503, &format!("the site's queue cannot be read: {e}")),
        };
        match (t.state, t.server.as_deref()) {
            (TicketState::Claimed, Some(s)) if s == site.name => {
                return take(shared, cat, client, &t)
            }
            (TicketState::Claimed | TicketState::Begun, Some(s)) if s != site.name => {
                return sent_on(
                    cat,
                    site,
                    s,
                    Some(id as u64),
                    "another server of the site took the backup",
                );
            }
            (TicketState::Begun, _) => {
                return Answer::error(409, &format!("backup {id} was begun already"))
            }
            (TicketState::Ended, _) => {
                let why = t.reason.unwrap_or_else(|| "it ended".into());
                return Answer::error(409, &format!("backup {id} is over: {why}"));
            }
            _ => {}
        }
        if shared.draining() {
            return Answer::error(503, "the server is stopping: try again once it runs again");
        }
        if Instant::now() >= until {
            let ahead = (cat.live_tickets().unwrap_or_default().iter())
                .filter(|o| o.id < id && o.state == TicketState::Queued)
                .count();
            let mut a = Answer::json(&Waiting {
                backup: id as u64,
                state: State::Waiting,
                ahead,
            });
            a.status = 202;
            return a;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Begins ticket `t`, which this server claimed, and lets its job in as a
/// backup asked of this server alone.
fn take(shared: &Arc<Shared>, cat: &Catalog, client: &str, t: &Ticket) -> Answer {
    let Some(site) = shared.site.as_ref() else {
        return Answer::error(404, &format!("no backup {}", t.id));
    };
    let doc = match serde_json::from_slice(&t.doc) {
        Ok(d) => d,
        Err(e) => return Answer::error(500, &format!("backup {} cannot be read: {e}", t.id)),
    };
    match cat.begin_ticket(t.id, &site.name) {
        Ok(true) => {}
        Ok(false) => return Answer::error(409, &format!("backup {} was begun already", t.id)),
        Err(e) => return Answer::error(503, &format!("the site's queue cannot be written: {e}")),
    }
    site.claimed().remove(&(t.id as u64));
    super::backups::enter(shared, client, doc, t.id as u64)
}

/// Job `backup` (a ticket's number) was let in as job `job` of the catalog.
pub fn job_begun(shared: &Shared, backup: u64, job: i64) {
    if shared.site.is_none() || backup >= OWN_NUMBERS {
        return;
    }
    if let Ok(cat) = catalog(shared) {
        if let Err(e) = cat.set_ticket_job(backup as i64, job) {
            tracing::warn!(backup, "site: record the ticket's job: {e}");
        }
    }
}

/// Job `backup` (a ticket's number) ended: failed with `why`, or well.
pub fn ended(shared: &Shared, backup: u64, why: Option<&str>) {
    if shared.site.is_none() || backup >= OWN_NUMBERS {
        return;
    }
    match catalog(shared).map(|c| c.end_ticket(backup as i64, why)) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(backup, "site: end the ticket: {e}"),
        Err(e) => tracing::warn!(backup, "site: end the ticket: {e}"),
    }
}

/// The `303` answer naming server `name`; or, when it is down, the refusal
/// saying so.
pub(crate) fn sent_on(
    cat: &Catalog,
    site: &Site,
    name: &str,
    backup: Option<u64>,
    reason: &str,
) -> Answer {
    let servers = cat.servers().unwrap_or_default();
    let Some(s) = servers.iter().find(|s| s.name == name) else {
        return Answer::error(503, &format!("server {name} of the site is not registered"));
    };
    let mut a = Answer::json(&SentOn {
        backup,
        server: shown(s, site.timeout_s()),
        reason: reason.to_string(),
    });
    a.status = SENT_ON;
    a
}

pub(crate) fn shown(s: &ServerRow, timeout_s: i64) -> SiteServer {
    SiteServer {
        name: s.name.clone(),
        url: s.url.clone(),
        fingerprint: s.fingerprint.clone(),
        alive: s.alive(timeout_s),
        silent_s: s.silent_s,
    }
}

/// `GET /api/site`: the servers, and the site's queue as `token` may see it.
pub fn doc(shared: &Shared, cat: &Catalog, token: &Token) -> Answer {
    match view(shared, cat, token) {
        None => Answer::error(404, "this server is alone: its catalog is not a site's"),
        Some(Ok(d)) => Answer::json(&d),
        Some(Err(e)) => Answer::error(503, &format!("the site cannot be read: {e}")),
    }
}

/// The site as `token` may see it; none when the server is alone.
pub fn view(
    shared: &Shared,
    cat: &Catalog,
    token: &Token,
) -> Option<tapeloom_catalog::Result<SiteDoc>> {
    let site = shared.site.as_ref()?;
    let read = || -> tapeloom_catalog::Result<SiteDoc> {
        Ok(SiteDoc {
            me: site.name.clone(),
            servers: (cat.servers()?.iter())
                .map(|s| shown(s, site.timeout_s()))
                .collect(),
            queue: (cat.live_tickets()?.into_iter())
                .filter(|t| may_see(token, Some(t.client.as_str())))
                .map(|t| SiteTicket {
                    backup: t.id as u64,
                    client: t.client,
                    name: t.name,
                    state: t.state.name().to_string(),
                    server: t.server,
                    job: t.job_id,
                })
                .collect(),
        })
    };
    Some(read())
}
