//! Several servers on one catalog: the servers of the site with their
//! heartbeats, the cartridges each one's library holds, and the site's queue of
//! backups.
//!
//! A backup a client asks any server for is queued here (a [`Ticket`]). A server
//! with a free drive claims the oldest ticket it can write ([`Catalog::claim`]):
//! on PostgreSQL with `SELECT ... FOR UPDATE SKIP LOCKED`, so that two servers
//! claiming at once never take the same ticket; on SQLite the write transaction
//! holds the whole file. The claiming server begins the ticket when its client
//! comes ([`Catalog::begin_ticket`]): a ticket is begun once, so a job never runs
//! twice.
//!
//! A server that stops sending its heartbeat is taken for dead by the first
//! other server that notices ([`Catalog::reap_dead`]): its claimed tickets go
//! back to the queue, and the jobs it was writing are failed, to be resumed from
//! its stage when it comes back.
//!
//! Times here are the database's clock, in Unix seconds, so that the servers'
//! clocks need not agree.

use crate::db::{params, OptionalExtension, Row};
use crate::error::{Doing, Result};
use crate::{write_tx, Catalog, JobState, INTERRUPTED};

/// The database's clock in Unix seconds, as SQL.
const NOW_S: (&str, &str) = (
    "CAST(strftime('%s', 'now') AS INTEGER)",
    "CAST(EXTRACT(EPOCH FROM now()) AS BIGINT)",
);

/// A server of the site, as it registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerRow {
    /// Its name (its home's name).
    pub name: String,
    /// Where its clients reach it (`https://HOST:PORT`).
    pub url: String,
    /// Its certificate's SHA-256, which clients pin.
    pub fingerprint: String,
    /// What its library is (a line of JSON the server writes).
    pub libraries: String,
    /// When it started (Unix seconds).
    pub started_s: i64,
    /// Its last heartbeat (Unix seconds).
    pub heartbeat_s: i64,
    /// Seconds since its last heartbeat, by the database's clock.
    pub silent_s: i64,
    /// `up`, `dead` (taken for dead by another server) or `stopped` (it said so).
    pub state: String,
    /// Where it serves S3 (`https://HOST:PORT` or `http://HOST:PORT`), when it
    /// does.
    pub s3_url: Option<String>,
}

impl ServerRow {
    /// Whether the server is up: it says so and was heard within `timeout_s`.
    pub fn alive(&self, timeout_s: i64) -> bool {
        self.state == "up" && self.silent_s < timeout_s
    }
}

/// Where a ticket of the site's queue is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TicketState {
    /// Waiting for a server.
    Queued,
    /// A server took it and waits for its client.
    Claimed,
    /// Its job runs (or ran) on its server.
    Begun,
    /// Its job ended.
    Ended,
}

impl TicketState {
    /// Its name, as the catalog and the server's documents say it.
    pub fn name(self) -> &'static str {
        match self {
            TicketState::Queued => "queued",
            TicketState::Claimed => "claimed",
            TicketState::Begun => "begun",
            TicketState::Ended => "ended",
        }
    }

    fn parse(s: &str) -> crate::db::Result<Self> {
        Ok(match s {
            "queued" => TicketState::Queued,
            "claimed" => TicketState::Claimed,
            "begun" => TicketState::Begun,
            "ended" => TicketState::Ended,
            other => {
                return Err(crate::db::DbError::conversion(
                    5,
                    format!("unknown ticket state {other:?}"),
                ))
            }
        })
    }
}

/// A backup in the site's queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ticket {
    /// Its number, the site's (the backup's number on every server).
    pub id: i64,
    /// The client that asked (its token's name).
    pub client: String,
    /// The job's name.
    pub name: String,
    /// The pool it writes to, when it names one.
    pub pool: Option<String>,
    /// The request, as the client sent it (JSON).
    pub doc: Vec<u8>,
    /// Where it is.
    pub state: TicketState,
    /// The server that claimed it.
    pub server: Option<String>,
    /// When it was asked for (Unix seconds).
    pub asked_s: i64,
    /// Its job in the catalog, once begun.
    pub job_id: Option<i64>,
    /// Why it failed, when it did.
    pub reason: Option<String>,
}

const TICKET_COLS: &str = "id, client, name, pool, doc, state, server, asked_s, job_id, reason";

fn ticket_row(r: &Row) -> crate::db::Result<Ticket> {
    Ok(Ticket {
        id: r.get(0)?,
        client: r.get(1)?,
        name: r.get(2)?,
        pool: r.get(3)?,
        doc: r.get(4)?,
        state: TicketState::parse(&r.get::<String>(5)?)?,
        server: r.get(6)?,
        asked_s: r.get(7)?,
        job_id: r.get(8)?,
        reason: r.get(9)?,
    })
}

/// What taking one dead server for dead did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reaped {
    /// The server.
    pub server: String,
    /// Its tickets claimed and not begun, queued again.
    pub requeued: Vec<i64>,
    /// Its running jobs, failed.
    pub failed: Vec<i64>,
}

/// The reason a dead server's running jobs are failed with, naming it.
pub fn dead_server_reason(server: &str, silent_s: i64) -> String {
    format!("server {server} stopped answering (no heartbeat for {silent_s} s); its stage keeps what it acknowledged, and it resumes the job when it comes back")
}

impl Catalog {
    /// Records server `name` as up: where it listens, its fingerprint and its
    /// library, its heartbeat now.
    pub fn register_server(
        &self,
        name: &str,
        url: &str,
        fingerprint: &str,
        libraries: &str,
    ) -> Result<()> {
        let now = self.conn.pick(NOW_S.0, NOW_S.1);
        self.conn
            .execute(
                &format!(
                    "INSERT INTO servers (name, url, fingerprint, libraries, started_s, heartbeat_s, state) \
                     VALUES (?1, ?2, ?3, ?4, {now}, {now}, 'up') \
                     ON CONFLICT (name) DO UPDATE SET url = excluded.url, \
                     fingerprint = excluded.fingerprint, libraries = excluded.libraries, \
                     started_s = excluded.started_s, heartbeat_s = excluded.heartbeat_s, state = 'up'"
                ),
                params![name, url, fingerprint, libraries],
            )
            .doing("register the server")?;
        Ok(())
    }

    /// Records where server `name` serves S3: `url`, or nowhere.
    pub fn set_server_s3_url(&self, name: &str, url: Option<&str>) -> Result<()> {
        (self.conn.execute(
            "UPDATE servers SET s3_url = ?2 WHERE name = ?1",
            params![name, url],
        ))
        .doing("record where the server serves S3")?;
        Ok(())
    }

    /// Server `name` is alive: its heartbeat is now. False when another server
    /// took it for dead meanwhile (it must register again).
    pub fn heartbeat(&self, name: &str) -> Result<bool> {
        let now = self.conn.pick(NOW_S.0, NOW_S.1);
        let n = self
            .conn
            .execute(
                &format!("UPDATE servers SET heartbeat_s = {now} WHERE name = ?1 AND state = 'up'"),
                params![name],
            )
            .doing("record the server's heartbeat")?;
        Ok(n == 1)
    }

    /// Server `name` stopped on its own.
    pub fn server_stopped(&self, name: &str) -> Result<()> {
        self.conn
            .execute(
                "UPDATE servers SET state = 'stopped' WHERE name = ?1",
                params![name],
            )
            .doing("record the server's stop")?;
        Ok(())
    }

    /// The servers of the site, by name.
    pub fn servers(&self) -> Result<Vec<ServerRow>> {
        let now = self.conn.pick(NOW_S.0, NOW_S.1);
        let rows = self
            .conn
            .query_all(
                &format!(
                    "SELECT name, url, fingerprint, libraries, started_s, heartbeat_s, state, \
                     {now} - heartbeat_s, s3_url FROM servers ORDER BY name"
                ),
                &[],
            )
            .doing("list the servers")?;
        let read = |r: &Row| -> crate::db::Result<ServerRow> {
            Ok(ServerRow {
                name: r.get(0)?,
                url: r.get(1)?,
                fingerprint: r.get(2)?,
                libraries: r.get(3)?,
                started_s: r.get(4)?,
                heartbeat_s: r.get(5)?,
                state: r.get(6)?,
                silent_s: r.get(7)?,
                s3_url: r.get(8)?,
            })
        };
        rows.iter()
            .map(read)
            .collect::<crate::db::Result<_>>()
            .doing("list the servers")
    }

    /// Records that server `name`'s library holds exactly `barcodes`.
    pub fn set_server_cartridges(&self, name: &str, barcodes: &[String]) -> Result<()> {
        let run = || -> crate::db::Result<()> {
            let tx = write_tx(&self.conn)?;
            tx.execute(
                "DELETE FROM server_cartridges WHERE server = ?1",
                params![name],
            )?;
            for b in barcodes {
                tx.execute(
                    "INSERT INTO server_cartridges (barcode, server) VALUES (?1, ?2) \
                     ON CONFLICT DO NOTHING",
                    params![b, name],
                )?;
            }
            tx.commit()
        };
        run().doing("record the server's cartridges")
    }

    /// The servers whose libraries hold cartridge `barcode`, by name.
    pub fn servers_of_cartridge(&self, barcode: &str) -> Result<Vec<String>> {
        let rows = self
            .conn
            .query_all(
                "SELECT server FROM server_cartridges WHERE barcode = ?1 ORDER BY server",
                &[&barcode],
            )
            .doing("find the cartridge's server")?;
        rows.iter()
            .map(|r| r.get(0))
            .collect::<crate::db::Result<_>>()
            .doing("find the cartridge's server")
    }

    /// Queues a backup `client` asked for; the ticket's number.
    pub fn enqueue(&self, client: &str, name: &str, pool: Option<&str>, doc: &[u8]) -> Result<i64> {
        let now = self.conn.pick(NOW_S.0, NOW_S.1);
        self.conn
            .query_row(
                &format!(
                    "INSERT INTO site_queue (client, name, pool, doc, state, asked_s) \
                     VALUES (?1, ?2, ?3, ?4, 'queued', {now}) RETURNING id"
                ),
                params![client, name, pool, doc],
                |r| r.get(0),
            )
            .doing("queue the backup")
    }

    /// Claims for `server` the oldest queued ticket whose pool `writable` says it
    /// can write (`None` is the default pool); the ticket claimed, if any.
    pub fn claim(
        &self,
        server: &str,
        writable: impl Fn(Option<&str>) -> bool,
    ) -> Result<Option<Ticket>> {
        let run = || -> crate::db::Result<Option<Ticket>> {
            let tx = write_tx(&self.conn)?;
            let rows = tx.query_all(
                &format!(
                    "SELECT {TICKET_COLS} FROM site_queue WHERE state = 'queued' ORDER BY id LIMIT 16{}",
                    tx.pick("", " FOR UPDATE SKIP LOCKED")
                ),
                &[],
            )?;
            let mut chosen = None;
            for r in &rows {
                let t = ticket_row(r)?;
                if writable(t.pool.as_deref()) {
                    chosen = Some(t);
                    break;
                }
            }
            let Some(mut t) = chosen else {
                tx.commit()?;
                return Ok(None);
            };
            let now = tx.pick(NOW_S.0, NOW_S.1);
            tx.execute(
                &format!(
                    "UPDATE site_queue SET state = 'claimed', server = ?2, claimed_s = {now} \
                     WHERE id = ?1"
                ),
                params![t.id, server],
            )?;
            tx.commit()?;
            t.state = TicketState::Claimed;
            t.server = Some(server.to_string());
            Ok(Some(t))
        };
        run().doing("claim a backup of the site's queue")
    }

    /// Ticket `id`, if there is one.
    pub fn ticket(&self, id: i64) -> Result<Option<Ticket>> {
        self.conn
            .query_row(
                &format!("SELECT {TICKET_COLS} FROM site_queue WHERE id = ?1"),
                params![id],
                ticket_row,
            )
            .optional()
            .doing("read a ticket of the site's queue")
    }

    /// The tickets not ended, oldest first.
    pub fn live_tickets(&self) -> Result<Vec<Ticket>> {
        let rows = self
            .conn
            .query_all(
                &format!("SELECT {TICKET_COLS} FROM site_queue WHERE state <> 'ended' ORDER BY id"),
                &[],
            )
            .doing("list the site's queue")?;
        rows.iter()
            .map(ticket_row)
            .collect::<crate::db::Result<_>>()
            .doing("list the site's queue")
    }

    /// Begins ticket `id` on `server`, which claimed it: true once; false when it
    /// is not claimed by `server` (begun already, queued again, or another's).
    pub fn begin_ticket(&self, id: i64, server: &str) -> Result<bool> {
        let n = self
            .conn
            .execute(
                "UPDATE site_queue SET state = 'begun' \
                 WHERE id = ?1 AND server = ?2 AND state = 'claimed'",
                params![id, server],
            )
            .doing("begin a ticket of the site's queue")?;
        Ok(n == 1)
    }

    /// Ticket `id`'s job is `job` in the catalog.
    pub fn set_ticket_job(&self, id: i64, job: i64) -> Result<()> {
        self.conn
            .execute(
                "UPDATE site_queue SET job_id = ?2 WHERE id = ?1",
                params![id, job],
            )
            .doing("record a ticket's job")?;
        Ok(())
    }

    /// Ticket `id` ended: well, or failed with `reason`.
    pub fn end_ticket(&self, id: i64, reason: Option<&str>) -> Result<()> {
        self.conn
            .execute(
                "UPDATE site_queue SET state = 'ended', reason = ?2 WHERE id = ?1",
                params![id, reason],
            )
            .doing("end a ticket of the site's queue")?;
        Ok(())
    }

    /// Gives back to the queue `server`'s tickets claimed and not begun (it
    /// started again and holds none of them).
    pub fn unclaim_all(&self, server: &str) -> Result<u64> {
        self.conn
            .execute(
                "UPDATE site_queue SET state = 'queued', server = NULL, claimed_s = NULL \
                 WHERE server = ?1 AND state = 'claimed'",
                params![server],
            )
            .map(|n| n as u64)
            .doing("give back the server's claims")
    }

    /// Ends ticket `id` for `reason` when `server` claimed it and did not begin
    /// it (its client did not come).
    pub fn drop_claim(&self, id: i64, server: &str, reason: &str) -> Result<()> {
        self.conn
            .execute(
                "UPDATE site_queue SET state = 'ended', reason = ?3 \
                 WHERE id = ?1 AND server = ?2 AND state = 'claimed'",
                params![id, server, reason],
            )
            .doing("give up a claim")?;
        Ok(())
    }

    /// Tickets of the site's queue in each state not ended.
    pub fn queue_counts(&self) -> Result<Vec<(TicketState, u64)>> {
        let rows = self
            .conn
            .query_all(
                "SELECT state, COUNT(*) FROM site_queue WHERE state <> 'ended' GROUP BY state",
                &[],
            )
            .doing("count the site's queue")?;
        let read = |r: &Row| -> crate::db::Result<(TicketState, u64)> {
            Ok((
                TicketState::parse(&r.get::<String>(0)?)?,
                r.get::<i64>(1)? as u64,
            ))
        };
        rows.iter()
            .map(read)
            .collect::<crate::db::Result<_>>()
            .doing("count the site's queue")
    }

    /// Takes for dead every server other than `me` that says it is up and was
    /// not heard for `timeout_s` seconds: its claimed tickets go back to the
    /// queue, its running jobs are failed with the reason (their stage chunks
    /// stay, for it to resume), and it is marked `dead`. One server does this for
    /// each dead one: the row is locked while it does.
    pub fn reap_dead(&self, me: &str, timeout_s: i64) -> Result<Vec<Reaped>> {
        let run = || -> crate::db::Result<Vec<Reaped>> {
            let tx = write_tx(&self.conn)?;
            let now = tx.pick(NOW_S.0, NOW_S.1);
            let dead = tx.query_all(
                &format!(
                    "SELECT name, {now} - heartbeat_s FROM servers \
                     WHERE state = 'up' AND name <> ?1 AND heartbeat_s < {now} - ?2{}",
                    tx.pick("", " FOR UPDATE SKIP LOCKED")
                ),
                params![me, timeout_s],
            )?;
            let mut out = Vec::new();
            for r in &dead {
                let server: String = r.get(0)?;
                let silent: i64 = r.get(1)?;
                let ids = |sql: &str| -> crate::db::Result<Vec<i64>> {
                    tx.query_all(sql, params![server])?
                        .iter()
                        .map(|r| r.get(0))
                        .collect()
                };
                let requeued = ids(
                    "SELECT id FROM site_queue WHERE server = ?1 AND state = 'claimed' ORDER BY id",
                )?;
                tx.execute(
                    "UPDATE site_queue SET state = 'queued', server = NULL, claimed_s = NULL \
                     WHERE server = ?1 AND state = 'claimed'",
                    params![server],
                )?;
                let failed = tx
                    .query_all(
                        "SELECT id FROM jobs WHERE host = ?1 AND status = ?2 ORDER BY id",
                        params![server, JobState::Running],
                    )?
                    .iter()
                    .map(|r| r.get(0))
                    .collect::<crate::db::Result<Vec<i64>>>()?;
                let why = dead_server_reason(&server, silent);
                for &job in &failed {
                    for reason in [INTERRUPTED, why.as_str()] {
                        tx.execute(
                            "INSERT INTO job_errors (job_id, path, reason) VALUES (?1, ?2, ?3)",
                            params![job, b"".as_slice(), reason],
                        )?;
                    }
                    tx.execute(
                        "UPDATE jobs SET status = ?2 WHERE id = ?1 AND status = ?3",
                        params![job, JobState::Failed, JobState::Running],
                    )?;
                }
                tx.execute(
                    "UPDATE servers SET state = 'dead' WHERE name = ?1",
                    params![server],
                )?;
                out.push(Reaped {
                    server,
                    requeued,
                    failed,
                });
            }
            tx.commit()?;
            Ok(out)
        };
        run().doing("take silent servers for dead")
    }
}

#[cfg(test)]
mod tests {
    use crate::tests::{both, scratch};
    use crate::{JobState, TicketState};

    both! {
        fn a_ticket_is_claimed_by_one_server_and_begun_once() {
            let (_d, c) = scratch();
            let t = c.enqueue("c1", "home", None, b"{}").unwrap();
            let u = c.enqueue("c2", "etc", Some("weekly"), b"{}").unwrap();
            assert!(u > t);
            // Server b writes only the default pool: it takes t; a then takes u.
            let got = c.claim("b", |p| p.is_none()).unwrap().unwrap();
            assert_eq!((got.id, got.state), (t, TicketState::Claimed));
            assert!(c.claim("b", |p| p.is_none()).unwrap().is_none());
            let got = c.claim("a", |_| true).unwrap().unwrap();
            assert_eq!((got.id, got.server.as_deref()), (u, Some("a")));
            assert!(!c.begin_ticket(t, "a").unwrap(), "a did not claim t");
            assert!(c.begin_ticket(t, "b").unwrap());
            assert!(!c.begin_ticket(t, "b").unwrap(), "a ticket is begun once");
            c.set_ticket_job(t, 7).unwrap();
            let live = c.live_tickets().unwrap();
            assert_eq!(live.len(), 2);
            assert_eq!((live[0].state, live[0].job_id), (TicketState::Begun, Some(7)));
            c.end_ticket(t, None).unwrap();
            assert_eq!(c.live_tickets().unwrap().len(), 1);
            assert_eq!(c.queue_counts().unwrap(), vec![(TicketState::Claimed, 1)]);
            // A claim whose client did not come ends with why; only its claimer
            // can drop it.
            c.drop_claim(u, "b", "not mine").unwrap();
            assert_eq!(c.ticket(u).unwrap().unwrap().state, TicketState::Claimed);
            c.drop_claim(u, "a", "its client did not come").unwrap();
            let dropped = c.ticket(u).unwrap().unwrap();
            assert_eq!(dropped.state, TicketState::Ended);
            assert_eq!(dropped.reason.as_deref(), Some("its client did not come"));
        }
    }

    both! {
        fn a_server_that_stops_says_so() {
            let (_d, c) = scratch();
            c.register_server("a", "https://a:1", "ab", "{}").unwrap();
            assert_eq!(c.servers().unwrap()[0].state, "up");
            c.server_stopped("a").unwrap();
            assert_eq!(c.servers().unwrap()[0].state, "stopped");
        }
    }

    both! {
        fn a_silent_server_is_taken_for_dead_once() {
            let (_d, mut c) = scratch();
            c.register_server("a", "https://127.0.0.1:1", "aa", "{}").unwrap();
            c.register_server("b", "https://127.0.0.1:2", "bb", "{}").unwrap();
            c.set_server_cartridges("a", &["TA0001L9".into()]).unwrap();
            assert_eq!(c.servers_of_cartridge("TA0001L9").unwrap(), vec!["a"]);
            let queued = c.enqueue("c1", "x", None, b"{}").unwrap();
            let begun = c.enqueue("c2", "y", None, b"{}").unwrap();
            c.claim("a", |_| true).unwrap();
            c.claim("a", |_| true).unwrap();
            assert!(c.begin_ticket(begun, "a").unwrap());
            c.set_host("a");
            let job = c.begin_job(1, "y", 1, 4096, &[]).unwrap();
            c.set_host("b");
            let mine = c.begin_job(2, "z", 1, 4096, &[]).unwrap();
            // Heard within the timeout: nobody is dead.
            assert!(c.reap_dead("b", 60).unwrap().is_empty());
            // A timeout of -1 takes everyone silent for 0 s or more.
            let reaped = c.reap_dead("b", -1).unwrap();
            assert_eq!(reaped.len(), 1);
            assert_eq!(reaped[0].server, "a");
            assert_eq!(reaped[0].requeued, vec![queued]);
            assert_eq!(reaped[0].failed, vec![job]);
            assert_eq!(c.job(job).unwrap().unwrap().status, JobState::Failed);
            assert_eq!(c.job(mine).unwrap().unwrap().status, JobState::Running);
            let errors = c.errors(job).unwrap();
            assert!(errors.iter().any(|(_, w)| w.contains("server a stopped")));
            assert_eq!(c.ticket(queued).unwrap().unwrap().state, TicketState::Queued);
            assert!(!c.heartbeat("a").unwrap(), "a dead server registers again");
            assert!(c.reap_dead("b", -1).unwrap().is_empty(), "once");
            let s = c.servers().unwrap();
            assert_eq!((s[0].state.as_str(), s[1].state.as_str()), ("dead", "up"));
            // Each host recovers its own interrupted jobs only.
            assert_eq!(c.recover_interrupted().unwrap(), vec![mine]);
        }
    }

    both! {
        fn each_host_sees_its_own_stages_and_staged_jobs() {
            let (_d, mut c) = scratch();
            c.set_host("a");
            let a = c.add_stage(std::path::Path::new("/s"), 100, 1).unwrap();
            c.set_host("b");
            let b = c.add_stage(std::path::Path::new("/s"), 100, 1);
            assert_eq!(c.stages().unwrap(), b.into_iter().collect::<Vec<_>>());
            c.set_host("a");
            assert_eq!(c.stages().unwrap(), vec![a]);
        }
    }
}
