//! `tapeloom queue --server URL`: a server's jobs waiting, receiving from their
//! clients and writing, then the last ones that ended (a client's token sees its
//! own); on a site of several servers, the site's servers and its queue too.

use super::Context;
use crate::net::Remote;
use crate::output::{self, Output};
use anyhow::Result;
use serde::{Deserialize, Serialize};
use tapeloom_engine::escape_controls;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    remote: Remote,
}

/// The server's queue, as `GET /api/queue` gives it.
#[derive(Serialize, Deserialize)]
pub struct Queue {
    /// Jobs not yet on a drive, all clients'.
    waiting: usize,
    /// The server's drives, and those its running jobs hold (absent from a
    /// server older than this client).
    #[serde(default)]
    drives: usize,
    #[serde(default)]
    drives_busy: usize,
    /// Bytes on the server's spool, and its size.
    spool_used_bytes: u64,
    spool_bytes: u64,
    queue: Vec<Entry>,
    recent: Vec<Entry>,
    /// The site's servers and queue, when the server is one of several
    /// (`GET /api/site`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    site: Option<tapeloom_proto::site::SiteDoc>,
}

/// One job of the queue.
#[derive(Serialize, Deserialize)]
struct Entry {
    backup: u64,
    job: Option<i64>,
    client: String,
    name: String,
    origin: String,
    state: String,
    queued_at: u64,
    received_bytes: u64,
    spooled_bytes: u64,
    written_bytes: u64,
    files: u64,
    reason: Option<String>,
}

pub fn run(a: Args, _ctx: &Context) -> Result<Queue> {
    match a.remote.resolve()? {
        Some(server) => {
            let mut q: Queue = server.get_json("/api/queue")?;
            // A server alone answers 404; an older one too.
            q.site = server.get_json("/api/site").ok();
            Ok(q)
        }
        None => Err(tapeloom_proto::ServerError::NoServer("queue").into()),
    }
}

impl Entry {
    /// The entry on one line. Names and clients come from clients: the line is
    /// escaped whole.
    fn line(&self) -> String {
        let line = format!(
            "{:>5}  {:<9} {:>6}  {:<12} {:<20} received {:>10}  spooled {:>10}  written {:>10}  {}{}",
            self.backup,
            self.state,
            self.job.map_or("-".to_string(), |j| j.to_string()),
            self.client,
            self.name,
            output::bytes(self.received_bytes),
            output::bytes(self.spooled_bytes),
            output::bytes(self.written_bytes),
            self.origin,
            self.reason
                .as_ref()
                .map_or(String::new(), |r| format!("  ({r})")),
        );
        escape_controls(&line).into_owned()
    }
}

impl Output for Queue {
    fn print(&self) {
        outln!(
            "{} waiting for a drive; {} of {} drives writing; spool {} of {}",
            self.waiting,
            self.drives_busy,
            self.drives,
            output::bytes(self.spool_used_bytes),
            output::bytes(self.spool_bytes)
        );
        if self.queue.is_empty() {
            outln!("no job waiting or running");
        }
        for e in &self.queue {
            outln!("{}", e.line());
        }
        if !self.recent.is_empty() {
            outln!("recently ended:");
            for e in &self.recent {
                outln!("{}", e.line());
            }
        }
        if let Some(site) = &self.site {
            print_site(site);
        }
    }
}

/// The site's servers and its queue, for people.
fn print_site(site: &tapeloom_proto::site::SiteDoc) {
    outln!("site (answered by {}):", escape_controls(&site.me));
    for s in &site.servers {
        let line = format!(
            "  server {:<12} {:<28} {}",
            s.name,
            s.url,
            if s.alive {
                "up".to_string()
            } else {
                format!("down (silent {} s)", s.silent_s)
            }
        );
        outln!("{}", escape_controls(&line));
    }
    if site.queue.is_empty() {
        outln!("  no backup waits in the site's queue");
    }
    for t in &site.queue {
        let line = format!(
            "  {:>5}  {:<8} {:<12} {:<20} {}{}",
            t.backup,
            t.state,
            t.client,
            t.name,
            t.server.as_deref().unwrap_or("-"),
            t.job.map_or(String::new(), |j| format!("  job {j}")),
        );
        outln!("{}", escape_controls(&line));
    }
}
