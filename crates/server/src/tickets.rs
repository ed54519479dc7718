//! The site's queue of backups, from this server's side (`tapeloom_ops::site`
//! is what a server does there, `site.rs` its place in the site).
//!
//! - The site's thread sends the server's heartbeat, takes silent servers for
//!   dead, ends the tickets of its jobs that ended, and claims backups from the
//!   site's queue while the server has a free drive and a writable cartridge of
//!   the backup's pool.
//! - A backup a client asks for is queued in the catalog (its number is the
//!   ticket's, on every server). The server that was asked waits for a claim:
//!   its own (the job is let in here, as on a server alone) or another's (the
//!   answer is `303` naming that server, and the client asks it with the same
//!   number). A ticket is begun once, by the server that claimed it, so a job
//!   never runs twice.

use crate::admission;
use crate::http::{Answer, LONG_POLL};
use crate::site::Site;
use crate::work::Work;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tapeloom_ops::site::{self as ops_site, Claim, Ticket};
use tapeloom_ops::Conn;
use tapeloom_proto::backup::{State, Waiting};
use tapeloom_proto::site::{SentOn, SiteServer, SENT_ON};

/// How often the site thread claims.
const CLAIM_EVERY: Duration = Duration::from_millis(200);

/// How long a backup just queued waits for a claim before its client is told
/// its number (`202`).
const FIRST_ANSWER: Duration = Duration::from_secs(2);

/// How long a claim waits for its client before the backup is given up.
const CLAIM_KEPT: Duration = Duration::from_secs(60);

/// Registers the server and starts its site thread.
pub fn start(work: &Arc<Work>, site: &Site) -> Result<(), String> {
    let conn = connect(work)?;
    let given = ops_site::join(&conn, &site.member).map_err(|e| e.to_string())?;
    tracing::info!(
        server = %site.member.name,
        url = %site.member.url,
        "registered in the site; {given} claims of before the restart went back to the queue"
    );
    let s = Arc::clone(work);
    std::thread::Builder::new()
        .name("site".into())
        .spawn(move || run(&s))
        .map(|_| ())
        .map_err(|e| format!("start the site's thread: {e}"))
}

fn connect(work: &Work) -> Result<Conn, String> {
    Conn::open(&work.home).map_err(|e| e.to_string())
}

/// The site thread: heartbeats, dead servers, ended tickets, claims.
fn run(work: &Arc<Work>) {
    let Some(site) = work.site.as_ref() else {
        return;
    };
    let mut conn = None;
    let beat_every = (site.timeout / 6).max(Duration::from_millis(250));
    let mut last_beat = Instant::now();
    loop {
        std::thread::sleep(CLAIM_EVERY);
        if site.stopping() {
            return;
        }
        let c = match conn.take() {
            Some(c) => c,
            None => match connect(work) {
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
                heartbeat(work, site, &c)?;
            }
            claim(work, site, &c)
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
fn heartbeat(work: &Work, site: &Site, conn: &Conn) -> tapeloom_ops::Result<()> {
    let running = |ticket: i64| work.backups.lock().contains_key(&(ticket as u64));
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
fn claim(work: &Work, site: &Site, conn: &Conn) -> tapeloom_ops::Result<()> {
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
    if work.draining() {
        return Ok(());
    }
    loop {
        let pending = site.claimed().len()
            + (work.queue.entries().iter())
                .filter(|e| matches!(e.state, State::Waiting | State::Receiving))
                .count();
        if pending >= work.drive_pool.free() {
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
    work: &Arc<Work>,
    client: &str,
    (doc, body): (&tapeloom_proto::backup::Begin, &[u8]),
) -> Answer {
    let conn = match connect(work) {
        Ok(c) => c,
        Err(e) => return Answer::error(503, &format!("the catalog cannot be opened: {e}")),
    };
    match ops_site::enqueue(&conn, client, (&doc.name, doc.pool.as_deref()), body) {
        // Told its number soon: a client that loses this server while its
        // backup waits asks the others for it by that number.
        Ok(id) => wait_claim(work, &conn, (id, FIRST_ANSWER)),
        Err(e) => Answer::error(503, &format!("the backup cannot be queued: {e}")),
    }
}

/// `POST /api/backups/ID/admit` for a backup this server does not hold: the
/// ticket's answer, none when there is no such ticket of `client`.
pub fn admit(work: &Arc<Work>, client: &str, id: &str) -> Option<Answer> {
    work.site.as_ref()?;
    let id = id.parse::<i64>().ok()?;
    let conn = connect(work).ok()?;
    ops_site::ticket_of(&conn, client, id).ok()??;
    Some(wait_claim(work, &conn, (id, LONG_POLL)))
}

/// Waits up to `wait` for ticket `id` to be claimed: let in here when
/// this server claimed it, sent on when another did, `202` while nobody has.
fn wait_claim(work: &Arc<Work>, conn: &Conn, (id, wait): (i64, Duration)) -> Answer {
    let Some(site) = work.site.as_ref() else {
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
            Claim::Mine(t) => return take(work, conn, &t),
            Claim::Elsewhere(s) => {
                let why = "another server of the site took the backup";
                return sent_on(conn, site, &s, Some(id as u64), why);
            }
            Claim::Begun => return Answer::error(409, &format!("backup {id} was begun already")),
            Claim::Over(why) => return Answer::error(409, &format!("backup {id} is over: {why}")),
            Claim::Queued => {}
        }
        if work.draining() {
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
fn take(work: &Arc<Work>, conn: &Conn, t: &Ticket) -> Answer {
    let Some(site) = work.site.as_ref() else {
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
    admission::enter(work, &t.client, doc, t.id as u64)
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
