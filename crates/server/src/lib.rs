//! tapeloom's server: a daemon that serves a home's catalog to clients over TLS
//! (HTTP/1.1 and JSON), and writes their backups on its library's drives. What
//! it shares with its clients (the documents, the frames, TLS pinning) is in
//! `tapeloom-proto`; the command line (`tapeloom server`) only parses flags and
//! prints what [`Server::start`] says.
//!
//! - `config.rs`: the TOML configuration, flags over it.
//! - `serve.rs`: the listener (hyper on tokio, a task per connection, each request
//!   answered on the blocking pool through `bridge.rs`) and the dispatcher, which
//!   gives each route the parts of the server's state it uses; `http.rs` reads a
//!   request under the limits and holds the answer, `auth.rs` checks its token.
//! - The routes: `api.rs` (the catalog's JSON, the queue, `/metrics`, and the
//!   dispatch of the status page's and the site's), `backups.rs` (backups
//!   clients pack: the queue's protocol, limits, and the receiving of their
//!   streams onto the stages), `restores.rs` and `verifies.rs` (a client's
//!   restore or verify, read on the server's drives, or sent on by `reads.rs`
//!   to the server of its site that holds the cartridges), `status.rs` (the
//!   status page and `GET /api/status`).
//! - The state the routes and the threads share, each in a module that imports
//!   no route: `work.rs` (what the jobs share), `backup_jobs.rs` (the backups
//!   clients began), `queue.rs` (what the queue, the status page and `/metrics`
//!   show of the jobs), `drives.rs` (which drives jobs hold, and the home they
//!   share), `verify_runs.rs`, `seen.rs` (what the status page saw), `site.rs`
//!   (the server's place in its site), `keys.rs` (the `[[encryption_key]]` key
//!   files the server holds, unlocked at its start) and `metrics.rs` (the
//!   counters and gauges of `GET /metrics`, `prometheus-client`, bumped where
//!   their events happen; `metrics_hsm.rs` and `metrics_s3.rs` hold those of
//!   the managed folders and of the S3 front end).
//! - The jobs: `admission.rs` lets a backup into the queue; `writer.rs` is the
//!   drives' thread, which hands the jobs to the free drives, one job on each,
//!   and each job's thread; `copies.rs` the copies a pool asks for;
//!   `tickets.rs` the site's thread and the backups asked of a site.
//! - `calendar.rs`: calendar expressions. `schedule.rs`: the `[[schedule]]` jobs
//!   the server runs itself.
//!
//! A route imports the state modules and `http.rs`, never the dispatcher, and
//! the state modules import no route: there is no import cycle among the
//! modules (`tests/module_imports.rs`).
//!
//! The server holds no lock on the home but while a job is on its drives (or a
//! restore reads): it reads the catalog beside the commands that change it
//! (SQLite's WAL), so local commands and token changes go on while it runs.
//!
//! It logs through `tracing`: events with a level and fields (`peer`, `job`,
//! `client`, `schedule`). Their messages and fields carry the names of jobs, sets
//! and clients as clients sent them; whoever prints them escapes them for people
//! (the command line's subscriber does, with `escape_controls`).

#![forbid(unsafe_code)]

mod admission;
mod api;
mod auth;
mod backup_jobs;
mod backups;
mod bridge;
mod calendar;
pub mod config;
mod copies;
mod drives;
mod http;
mod inlet;
mod keys;
mod metrics;
mod metrics_hsm;
mod metrics_s3;
mod queue;
mod reads;
mod restores;
mod s3_tape;
mod schedule;
mod seen;
mod serve;
mod site;
mod status;
mod tickets;
mod verifies;
mod verify_runs;
mod work;
mod writer;

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tapeloom_engine::Home;
use tapeloom_proto::{tls, ServerError};

pub use tapeloom_ops::tokens::{hash as token_hash, PREFIX as TOKEN_PREFIX};

/// A server bound to its address, its drives' thread and its schedules started,
/// ready to serve ([`Server::serve`]).
pub struct Server {
    listener: TcpListener,
    addr: SocketAddr,
    fingerprint: String,
    shared: Arc<serve::Shared>,
    s3: Option<serve::S3Front>,
}

/// Where a server is and how clients pin it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Listening {
    /// `https://ADDR:PORT`, the port the one listened on (when 0 was asked).
    pub url: String,
    /// The certificate's SHA-256, which clients pin.
    pub fingerprint: String,
    /// Where the S3 front end listens (`https://` or `http://` and the
    /// address), when it is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub s3_url: Option<String>,
}

impl Server {
    /// Starts the server of home `home` with `config` (the file's keys, flags over
    /// them): unlocks its key files, opens the home once with its lock (jobs a
    /// dead process left running are marked failed), binds the address, recovers
    /// what a killed server left on its spool, and starts the drives' thread and
    /// the schedules.
    pub fn start(home: &Path, config: config::Config) -> Result<Server, StartError> {
        let keys = keys::Keys::unlock(&config.keys)?;
        let dir: PathBuf = home.to_path_buf();
        let (site, unfinished, shared_catalog, barcodes) = {
            let home = Home::open(&dir)?;
            default_stage(&home, &config.queue)?;
            let lib = tapeloom_ops::status_page::at_start(&home)?;
            let site = work::Library {
                drives: lib.drives,
                lowest_mb_s: lib.lowest_mb_s,
            };
            // Streams cut by a server that stopped are named; jobs it left
            // staged are resumed (`writer::recover`).
            (
                site,
                tapeloom_ops::spool::recover(&home)?,
                tapeloom_ops::site::is_shared(&home),
                lib.barcodes,
            )
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
        let mut work = work::Work::new(dir.clone(), (config.limits, config.queue), &site);
        let s3 = match &config.s3 {
            Some(s) => {
                let watch = work.metrics.s3_on(s.restores.cache_bytes);
                Some(serve::S3Front::bind(&dir, s, watch)?)
            }
            None => None,
        };
        work.keys = keys;
        work.queue = queue::Queue::new(work.metrics.jobs());
        if shared_catalog {
            // A PostgreSQL catalog may be shared: the server joins its site.
            let url = (config.site.url.clone()).unwrap_or_else(|| format!("https://{addr}"));
            let s3_url = s3.as_ref().map(|f| f.site_url(&url));
            let me = site::Site::new(
                tapeloom_engine::home_name(&dir)?,
                (url, fingerprint.clone()),
                config.site.timeout,
                (site.drives, barcodes),
            );
            work.site = Some(me.with_s3(s3_url));
            work.queue = queue::Queue::numbered_from(work.metrics.jobs(), site::OWN_NUMBERS);
        }
        let work = Arc::new(work);
        writer::recover(&work, unfinished.clone());
        if let Some(s) = &work.site {
            tickets::start(&work, s).map_err(|why| ServerError::Io {
                what: "join the site".into(),
                source: std::io::Error::other(why),
            })?;
        }
        writer::start(work.clone()).map_err(|source| ServerError::Io {
            what: "start the drives' thread".into(),
            source,
        })?;
        schedule::start(Arc::clone(&work), config.schedules)?;
        if let Some(s) = &config.s3 {
            s3_tape::start(&work, (s.restores, s.archive), unfinished).map_err(|source| {
                ServerError::Io {
                    what: "start the S3 front end's tape threads".into(),
                    source,
                }
            })?;
        }
        sample_drives(Arc::clone(&work)).map_err(|source| ServerError::Io {
            what: "start the drives' sampling thread".into(),
            source,
        })?;
        let shared = Arc::new(serve::Shared::new(work, tls));
        Ok(Server {
            listener,
            addr,
            fingerprint,
            shared,
            s3,
        })
    }

    /// Where the server listens and how clients pin it.
    pub fn listening(&self) -> Listening {
        Listening {
            url: format!("https://{}", self.addr),
            fingerprint: self.fingerprint.clone(),
            s3_url: self.s3.as_ref().map(serve::S3Front::url),
        }
    }

    /// Serves until the process is stopped.
    pub fn serve(self) -> Result<(), ServerError> {
        serve::serve(self.listener, self.shared, self.s3).map_err(|source| ServerError::Io {
            what: "serve".into(),
            source,
        })
    }
}

/// Adds the stage clients' blocks wait on when the home has none: `spool_dir`
/// (default HOME/stage), `spool_bytes` large.
fn default_stage(home: &Home, q: &config::QueueLimits) -> Result<(), StartError> {
    let dir = (q.spool_dir.clone()).unwrap_or_else(|| home.dir().join("stage"));
    if let Some(path) = tapeloom_ops::spool::add_default(home, &dir, q.spool_bytes)? {
        tracing::info!(
            path = %path.display(),
            bytes = q.spool_bytes,
            "added the stage clients' blocks wait on"
        );
    }
    Ok(())
}

/// Starts the thread that counts what the running jobs' drives wrote, as often as
/// the engine samples them.
fn sample_drives(work: Arc<work::Work>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("drive metrics".into())
        .spawn(move || loop {
            work.queue.sample();
            std::thread::sleep(std::time::Duration::from_secs(1));
        })
        .map(|_| ())
}

/// Why a server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration, the certificate, the address or a key file.
    #[error(transparent)]
    Server(#[from] ServerError),
    /// A key file named in the configuration.
    #[error(transparent)]
    Keys(#[from] keys::KeyError),
    /// The home, its catalog or its library.
    #[error(transparent)]
    Engine(#[from] tapeloom_engine::Error),
    /// The home, its catalog, its library or its stages, as the operations
    /// layer found them.
    #[error(transparent)]
    Ops(#[from] tapeloom_ops::OpsError),
    /// A schedule of the configuration.
    #[error(transparent)]
    Schedule(#[from] schedule::ScheduleError),
    /// The S3 front end could not start.
    #[error(transparent)]
    S3(#[from] tapeloom_s3::Error),
}
