//! Several servers, one site: a server whose catalog is PostgreSQL shares it
//! with the other servers of the site (the catalog keeps the servers, their
//! heartbeats and the site's queue; `tapeloom_ops::site` is what a server does
//! there). This module holds the server's place in the site; `tickets.rs` runs
//! the site's thread and answers the backups asked of it.
//!
//! - At its start the server registers (its name, the URL clients reach it at,
//!   its fingerprint, its library and the cartridges in it) and gives back the
//!   claims it held before a restart.
//! - The tickets it claimed wait for their clients here; a ticket's job that
//!   begins or ends is recorded in the site's queue.
//! - A restore or a verify goes to the server whose library holds the job's
//!   cartridges (`reads.rs`): `303` naming it, or, when it is down, a one-line
//!   refusal naming it and the cartridges.
//!
//! Scheduled jobs are the server's own and are not queued in the site.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tapeloom_ops::clients::may_see;
use tapeloom_ops::site::{self as ops_site, Member};
use tapeloom_ops::tokens::Token;
use tapeloom_ops::Conn;
use tapeloom_proto::site::SiteDoc;

/// The numbers the server gives its own jobs (scheduled ones) start here, far
/// past the site's tickets, so that the two never meet.
pub const OWN_NUMBERS: u64 = 1 << 40;

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
                s3_url: None,
            },
            timeout,
            claimed: Mutex::new(BTreeMap::new()),
            stopping: AtomicBool::new(false),
        }
    }

    /// The server serves S3 at `url` too; the other servers of the site send
    /// on to it the S3 requests whose data is on its disk.
    pub fn with_s3(mut self, url: Option<String>) -> Self {
        self.member.s3_url = url;
        self
    }

    /// Tickets it claimed whose clients have not come yet, and since when.
    pub fn claimed(&self) -> MutexGuard<'_, BTreeMap<u64, Instant>> {
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

    /// Whether the server stops, and claims nothing more.
    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// Job `backup` (a ticket's number) was let in as job `job` of the catalog of
    /// the home at `home`.
    pub fn job_begun(&self, home: &Path, backup: u64, job: i64) {
        if backup >= OWN_NUMBERS {
            return;
        }
        if let Ok(conn) = Conn::open(home) {
            if let Err(e) = ops_site::job_begun(&conn, backup as i64, job) {
                tracing::warn!(backup, "site: record the ticket's job: {e}");
            }
        }
    }

    /// Job `backup` (a ticket's number) of the home at `home` ended: failed with
    /// `why`, or well.
    pub fn ended(&self, home: &Path, backup: u64, why: Option<&str>) {
        if backup >= OWN_NUMBERS {
            return;
        }
        match Conn::open(home).map(|c| ops_site::ended(&c, backup as i64, why)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(backup, "site: end the ticket: {e}"),
            Err(e) => tracing::warn!(backup, "site: end the ticket: {e}"),
        }
    }
}

/// The site as `token` may see it; none when the server is alone.
pub fn view(
    site: Option<&Site>,
    conn: &Conn,
    token: &Token,
) -> Option<tapeloom_ops::Result<SiteDoc>> {
    let site = site?;
    Some(ops_site::view(conn, &site.member, |client| {
        may_see(token, Some(client))
    }))
}
