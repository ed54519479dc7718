//! `tapeloom server`: a daemon that serves the home's catalog to clients over TLS
//! (HTTP/1.1 and JSON), and writes their backups to its library. What it shares with the clients (TLS, HTTP, the client
//! itself) is in `crate::net`.
//!
//! - `config.rs`: the TOML configuration, flags over it.
//! - `serve.rs`: the listener and one thread per connection.
//! - `api.rs`: tokens, who sees what, the routes. `metrics.rs`: `GET /metrics`.
//! - `backups.rs`: backups clients pack: the queue's protocol, limits, and the
//!   receiving of their streams onto the spool (`spool.rs`); `writer.rs`: the
//!   drives' thread, which takes the jobs from the spool one at a time.
//! - `queue.rs`: what the queue, the status page and `/metrics` show of the jobs.
//! - `token.rs`: `server token add|list|revoke`.
//! - `verifies.rs`: a client's verify, read on the server's drives.
//! - `status.rs`: the status page and `GET /api/status`.
//! - `calendar.rs`: calendar expressions. `schedule.rs`: the `[[schedule]]` jobs
//!   the server runs itself.
//! - `keys.rs`: the `[[encryption_key]]` key files the server holds, unlocked at
//!   its start.
//!
//! The server holds no lock on the home but while a job is on its drives (or a
//! restore reads): it reads the catalog beside the commands that change it
//! (SQLite's WAL), so local commands and token changes go on while it runs.

/// A line of the server's log on stderr: `tapeloom server: ` and the message,
/// escaped for people (`escape_controls`), since the names of jobs, sets and
/// clients in it come from clients.
macro_rules! server_log {
    ($($arg:tt)*) => {
        eprintln!(
            "tapeloom server: {}",
            tapeloom_engine::escape_controls(&format!($($arg)*))
        )
    };
}

mod api;
pub(crate) mod backups;
mod calendar;
mod config;
mod keys;
mod metrics;
mod queue;
pub(crate) mod restores;
mod schedule;
mod serve;
mod spool;
mod status;
mod token;
mod verifies;
mod writer;

use crate::commands::Context;
use crate::net::error::ServerError;
use crate::net::tls;
use anyhow::Result;
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use tapeloom_engine::Home;

/// `--listen`: an address, a colon and a port from 0 to 65535, whose port is
/// checked here; the address is looked up when the server starts.
fn parse_listen(s: &str) -> std::result::Result<String, String> {
    match s
        .rsplit_once(':')
        .map(|(addr, port)| (addr, port.parse::<u16>()))
    {
        Some((addr, Ok(_))) if !addr.is_empty() => Ok(s.to_string()),
        _ => Err(format!(
            "--listen takes ADDR:PORT with a port from 0 to 65535, not '{s}'"
        )),
    }
}

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    /// The address and port to listen on (port 0: any free port, printed at
    /// start). Default: the configuration's `listen`, else 127.0.0.1:8407.
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_listen)]
    listen: Option<String>,
    /// The configuration file (TOML; the README lists its keys).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The server's certificate chain (PEM), with --key. Default: the home's own,
    /// self-signed, made on first start in HOME/server/.
    #[arg(long, value_name = "FILE", requires = "key")]
    cert: Option<PathBuf>,
    /// The certificate's private key (PEM), with --cert.
    #[arg(long, value_name = "FILE", requires = "cert")]
    key: Option<PathBuf>,
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// The tokens clients give the server.
    #[command(subcommand)]
    Token(token::Cmd),
}

/// What the server says when it starts listening: clients need both.
#[derive(serde::Serialize)]
struct Listening {
    /// `https://ADDR:PORT`, the port the one listened on (when 0 was asked).
    url: String,
    /// The certificate's SHA-256, which clients pin.
    fingerprint: String,
}

impl crate::output::Output for Listening {
    fn print(&self) {
        outln!("listening on {}", self.url);
        outln!("certificate fingerprint (SHA-256) {}", self.fingerprint);
    }
}

impl Args {
    /// Runs the server in the foreground, or a subcommand.
    pub fn run(self, ctx: &Context) -> Result<i32> {
        match self.cmd {
            Some(Cmd::Token(c)) => c.run(ctx),
            None => run_server(self, ctx),
        }
    }
}

/// Serves until the process is stopped. On start it prints the address it listens
/// on and its certificate's fingerprint, which clients pin.
fn run_server(a: Args, ctx: &Context) -> Result<i32> {
    let file = match &a.config {
        Some(p) => config::File::read(p)?,
        None => config::File::default(),
    };
    let flags = config::File {
        listen: a.listen,
        cert: a.cert,
        key: a.key,
        ..config::File::default()
    };
    let config = file.resolve(flags)?;
    let keys = keys::Keys::unlock(&config.keys)?;
    let dir = ctx
        .home
        .clone()
        .unwrap_or_else(tapeloom_engine::default_home);
    // Opened once with its lock: made on first use, jobs a dead process left
    // running marked failed. The server then reads it without the lock.
    let site = {
        let home = Home::open(&dir)?;
        let mut lib = home.library()?;
        serve::Site {
            drives: lib.inventory().map_or(1, |i| i.drives.len()),
            lowest_mb_s: lib.lowest_speed_mb_s(),
        }
    };
    let identity = match &config.cert {
        Some((cert, key)) => tls::load(cert, key)?,
        None => tls::home_identity(&dir)?,
    };
    let fingerprint = identity.fingerprint();
    let tls = identity.server_config()?;
    let listener = TcpListener::bind(&config.listen).map_err(|source| ServerError::Io {
        what: format!("listen on {}", config.listen),
        source,
    })?;
    let addr = listener.local_addr().map_err(|source| ServerError::Io {
        what: "read the address listened on".into(),
        source,
    })?;
    let listening = Listening {
        url: format!("https://{addr}"),
        fingerprint,
    };
    crate::output::emit(&listening, ctx.json)?;
    let mut shared = serve::Shared::new(dir, (config.limits, config.queue), tls, &site);
    shared.keys = keys;
    let shared = Arc::new(shared);
    writer::recover(&shared.home, &shared.backups.spool_dir);
    writer::start(shared.clone()).map_err(|source| ServerError::Io {
        what: "start the drives' thread".into(),
        source,
    })?;
    schedule::start(Arc::clone(&shared), config.schedules)?;
    serve::serve(listener, shared);
    Ok(0)
}
