//! Several servers, one site: a server whose catalog is PostgreSQL shares it
//! with the other servers of the site (the catalog keeps the servers, their
//! heartbeats and the site's queue; `tapeloom_ops::site` is what a server does
//! there). This module runs the site's thread and answers the site's requests.
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

use super::serve::Shared;
use crate::http::Answer;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tapeloom_ops::clients::may_see;
use tapeloom_ops::site::{self as ops_site, Claim, Member, Ticket};
use tapeloom_ops::tokens::Token;
use tapeloom_ops::Conn;
use tapeloom_proto::backup::{State, Waiting};
use tapeloom_proto::site::{SentOn, SiteDoc, SiteServer, SENT_ON};

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
    /// What it registered as, and the cartridges of its library when it started.
    pub member: Member,
    /// How long a silent server is waited for.
    pub timeout: Duration,
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
            member: Member {
                name,
                url,
                fingerprint,
                libraries,
                barcodes,
                timeout_s: timeout.as_secs() as i64,
            },
            timeout,
            claimed: Mutex::new(BTreeMap::new()),
            stopping: AtomicBool::new(false),
        }
    }

    fn claimed(&self) -> MutexGuard<'_, BTreeMap<u64, Instant>> {
        self.claimed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The server stops: it claims nothing more, and the catalog says so.
    pub fn stop(&self, conn: &Conn) {
        self.stopping.store(true, Ordering::Release);
        if let Err(e) = ops_site::leave(conn, &self.member) {
            tracing::warn!("site: leave the site: {e}");
        }
        self.claimed().clear();
    }
}

/// Registers the server and starts its site thread.
pub fn start(shared: &Arc<Shared>, site: &Site) -> Result<(), String> {
    let conn = connect(shared)?;
    let given = ops_site::join(&conn, &site.member).map_err(|e| e.to_string())?;
    tracing::info!(
        server = %site.member.name,
        url = %site.member.url,
        "registered in the site; {given} claims of before the restart went back to the queue"
    );
    let s = Arc::clone(shared);
    std::thread::Builder::new()
        .name("site".into())
        .spawn(move || run(&s))
        .map(|_| ())
        .map_err(|e| format!("start the site's thread: {e}"))
}

fn connect(shared: &Shared) -> Result<Conn, String> {
    Conn::open(&shared.home).map_err(|e| e.to_string())
}

/// The site thread: heartbeats, dead servers, ended tickets, claims.
fn run(shared: &Arc<Shared>) {
    let Some(site) = shared.site.as_ref() else {
        return;
    };
    let mut conn = None;
    let beat_every = (site.timeout / 6).max(Duration::from_millis(250));
    let mut last_beat = Instant::now();
    loop {
        std::thread::sleep(CLAIM_EVERY);
        if site.stopping.load(Ordering::Acquire) {
            return;
        }
        let c = match conn.take() {
            Some(c) => c,
            None => match connect(shared) {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!("site: open the catalog: {e}");
                    continue;
                }
            },
        };
        let beat = last_beat.elapsed() >= beat_every;
        let done = || -> tapeloom_ops::Result<()> {
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
                conn = Some(c);
            }
            Err(e) => tracing::warn!("site: {e}"),
        }
    }
}

/// One heartbeat: the server's, then the dead servers', then the tickets of
/// its jobs that ended.
fn heartbeat(shared: &Shared, site: &Site, conn: &Conn) -> tapeloom_ops::Result<()> {
    let running = |ticket: i64| shared.backups.lock().contains_key(&(ticket as u64));
    let beat = ops_site::heartbeat(conn, &site.member, running)?;
    if beat.registered_again {
        // Taken for dead while it was alive (a pause, a cut network): its
        // running jobs were failed, and its claims given back.
        tracing::warn!(server = %site.member.name, "the site took this server for dead: it registers again");
        site.claimed().clear();
    }
    for r in beat.reaped {
        tracing::warn!(
            server = %r.server,
            "took server {} for dead: {} claimed backups queued again, jobs {:?} failed",
            r.server,
            r.requeued.len(),
            r.failed
        );
    }
    Ok(())
}

/// Claims backups while the server has room: fewer jobs waiting for a drive
/// (claimed, let in, receiving) than free drives, and a writable cartridge of
/// the backup's pool. Claims whose clients did not come go back.
fn claim(shared: &Shared, site: &Site, conn: &Conn) -> tapeloom_ops::Result<()> {
    let stale: Vec<u64> = (site.claimed().iter())
        .filter(|(_, t)| t.elapsed() > CLAIM_KEPT)
        .map(|(k, _)| *k)
        .collect();
    for id in stale {
        // Its client did not come: gone, or it asked and went away. It would
        // never come now, and the backup is over.
        let why = "its client did not come for it within a minute";
        ops_site::drop_claim(conn, &site.member, id as i64, why)?;
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
        let Some(t) = ops_site::claim(conn, &site.member)? else {
            return Ok(());
        };
        tracing::info!(backup = t.id, client = %t.client, "claimed a backup of the site's queue");
        site.claimed().insert(t.id as u64, Instant::now());
    }
}

/// `POST /api/backups` on a site: the backup `doc` (its bytes `body`) is
/// queued, and its client told where it goes.
pub fn begin(
    shared: &Arc<Shared>,
    client: &str,
    (doc, body): (&tapeloom_proto::backup::Begin, &[u8]),
) -> Answer {
    let conn = match connect(shared) {
        Ok(c) => c,
        Err(e) => return Answer::error(503, &format!("the catalog cannot be opened: {e}")),
    };
    match ops_site::enqueue(&conn, client, (&doc.name, doc.pool.as_deref()), body) {
        // Told its number soon: a client that loses this server while its
        // backup waits asks the others for it by that number.
        Ok(id) => wait_claim(shared, &conn, (id, FIRST_ANSWER)),
        Err(e) => Answer::error(503, &format!("the backup cannot be queued: {e}")),
    }
}

/// `POST /api/backups/ID/admit` for a backup this server does not hold: the
/// ticket's answer, none when there is no such ticket of `client`.
pub fn admit(shared: &Arc<Shared>, client: &str, id: &str) -> Option<Answer> {
    shared.site.as_ref()?;
    let id = id.parse::<i64>().ok()?;
    let conn = connect(shared).ok()?;
    ops_site::ticket_of(&conn, client, id).ok()??;
    Some(wait_claim(shared, &conn, (id, super::backups::LONG_POLL)))
}

/// Waits up to `wait` for ticket `id` to be claimed: let in here when
/// this server claimed it, sent on when another did, `202` while nobody has.
fn wait_claim(shared: &Arc<Shared>, conn: &Conn, (id, wait): (i64, Duration)) -> Answer {
    let Some(site) = shared.site.as_ref() else {
        return Answer::error(404, &format!("no backup {id}"));
    };
    let until = Instant::now() + wait;
    loop {
        let claim = match ops_site::claim_of(conn, &site.member, id) {
            Ok(c) => c,
            Err(e) => return Answer::error(503, &format!("the site's queue cannot be read: {e}")),
        };
        match claim {
            Claim::Unknown => return Answer::error(404, &format!("no backup {id}")),
            Claim::Mine(t) => return take(shared, conn, &t),
            Claim::Elsewhere(s) => {
                let why = "another server of the site took the backup";
                return sent_on(conn, site, &s, Some(id as u64), why);
            }
            Claim::Begun => return Answer::error(409, &format!("backup {id} was begun already")),
            Claim::Over(why) => return Answer::error(409, &format!("backup {id} is over: {why}")),
            Claim::Queued => {}
        }
        if shared.draining() {
            return Answer::error(503, "the server is stopping: try again once it runs again");
        }
        if Instant::now() >= until {
            let mut a = Answer::json(&Waiting {
                backup: id as u64,
                state: State::Waiting,
                ahead: ops_site::queued_ahead(conn, id).unwrap_or_default(),
            });
            a.status = 202;
            return a;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Begins ticket `t`, which this server claimed, and lets its job in as a
/// backup asked of this server alone.
fn take(shared: &Arc<Shared>, conn: &Conn, t: &Ticket) -> Answer {
    let Some(site) = shared.site.as_ref() else {
        return Answer::error(404, &format!("no backup {}", t.id));
    };
    let doc = match serde_json::from_slice(&t.doc) {
        Ok(d) => d,
        Err(e) => return Answer::error(500, &format!("backup {} cannot be read: {e}", t.id)),
    };
    match ops_site::begin(conn, &site.member, t.id) {
        Ok(true) => {}
        Ok(false) => return Answer::error(409, &format!("backup {} was begun already", t.id)),
        Err(e) => return Answer::error(503, &format!("the site's queue cannot be written: {e}")),
    }
    site.claimed().remove(&(t.id as u64));
    super::backups::enter(shared, &t.client, doc, t.id as u64)
}

/// Job `backup` (a ticket's number) was let in as job `job` of the catalog.
pub fn job_begun(shared: &Shared, backup: u64, job: i64) {
    if shared.site.is_none() || backup >= OWN_NUMBERS {
        return;
    }
    if let Ok(conn) = connect(shared) {
        if let Err(e) = ops_site::job_begun(&conn, backup as i64, job) {
            tracing::warn!(backup, "site: record the ticket's job: {e}");
        }
    }
}

/// Job `backup` (a ticket's number) ended: failed with `why`, or well.
pub fn ended(shared: &Shared, backup: u64, why: Option<&str>) {
    if shared.site.is_none() || backup >= OWN_NUMBERS {
        return;
    }
    match connect(shared).map(|c| ops_site::ended(&c, backup as i64, why)) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(backup, "site: end the ticket: {e}"),
        Err(e) => tracing::warn!(backup, "site: end the ticket: {e}"),
    }
}

/// The `303` answer naming server `name`; or, when it is not registered, the
/// refusal saying so.
fn sent_on(conn: &Conn, site: &Site, name: &str, backup: Option<u64>, reason: &str) -> Answer {
    match ops_site::server(conn, &site.member, name) {
        Ok(Some(server)) => sent_on_to(server, backup, reason.to_string()),
        Ok(None) => Answer::error(503, &format!("server {name} of the site is not registered")),
        Err(e) => Answer::error(503, &format!("the site cannot be read: {e}")),
    }
}

/// The `303` answer: ask `server` instead, for `reason`.
pub(crate) fn sent_on_to(server: SiteServer, backup: Option<u64>, reason: String) -> Answer {
    let mut a = Answer::json(&SentOn {
        backup,
        server,
        reason,
    });
    a.status = SENT_ON;
    a
}

/// `GET /api/site`: the servers, and the site's queue as `token` may see it.
pub fn doc(shared: &Shared, conn: &Conn, token: &Token) -> Answer {
    match view(shared, conn, token) {
        None => Answer::error(404, "this server is alone: its catalog is not a site's"),
        Some(Ok(d)) => Answer::json(&d),
        Some(Err(e)) => Answer::error(503, &format!("the site cannot be read: {e}")),
    }
}

/// The site as `token` may see it; none when the server is alone.
pub fn view(shared: &Shared, conn: &Conn, token: &Token) -> Option<tapeloom_ops::Result<SiteDoc>> {
    let site = shared.site.as_ref()?;
    Some(ops_site::view(conn, &site.member, |client| {
        may_see(token, Some(client))
    }))
}
