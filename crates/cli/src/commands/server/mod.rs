//! `tapeloom server`: runs the server of `tapeloom-server` in the foreground, its
//! log on stderr (`log.rs`), and `server token add|list|revoke` (`token.rs`)
//! manages the tokens clients give it.

mod log;
mod token;

use crate::commands::Context;
use anyhow::Result;
use std::path::PathBuf;
use tapeloom_server::{config, Listening, Server};

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
    /// The configuration file (TOML; docs/CONFIG.md lists its keys).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The server's certificate chain (PEM), with --key. Default: the home's own,
    /// self-signed, made on first start in HOME/server/.
    #[arg(long, value_name = "FILE", requires = "key")]
    cert: Option<PathBuf>,
    /// The certificate's private key (PEM), with --cert.
    #[arg(long, value_name = "FILE", requires = "cert")]
    key: Option<PathBuf>,
    /// Also serve S3 on this address and port (docs/S3.md), over TLS with the
    /// server's certificate unless --s3-plain. Default: the configuration's
    /// `[s3] listen`, else no S3.
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_listen)]
    s3_listen: Option<String>,
    /// Serve S3 over plain HTTP: for loopback, or behind a TLS proxy.
    #[arg(long)]
    s3_plain: bool,
    /// The domain of S3's virtual-hosted addressing (BUCKET.DOMAIN); path-style
    /// addressing works always.
    #[arg(long, value_name = "DOMAIN")]
    s3_domain: Option<String>,
    /// The restore cache's limit: restored copies of archived objects are kept
    /// in it until they expire. Default: the configuration's `[s3]
    /// cache_bytes`, else 64G.
    #[arg(long, value_name = "SIZE", value_parser = crate::size::within(1, crate::size::MAX))]
    s3_cache: Option<u64>,
    /// How long Standard restores gather before they are read, in seconds (at
    /// most a year). Default: the configuration's, else 60.
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(0..=31_536_000))]
    s3_standard_window: Option<u64>,
    /// How long Bulk restores gather before they are read, in seconds (at most
    /// a year). Default: the configuration's, else 600.
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(0..=31_536_000))]
    s3_bulk_window: Option<u64>,
    /// The order a batch of S3 restores is read in: planned (each cartridge
    /// once, in the order its drive's model says is fastest), block, or asked
    /// (one object after another, as they came: for comparison).
    #[arg(long, value_name = "ORDER", value_parser = ["planned", "block", "asked"])]
    s3_restore_order: Option<String>,
    /// S3 control requests (every request but uploads and downloads) answered
    /// at once; more are answered 503 SlowDown. Default: the configuration's
    /// `[s3] max_requests`, else 128.
    #[arg(long, value_name = "N", value_parser = crate::commands::usize_in(1..=65_536))]
    s3_max_requests: Option<usize>,
    /// S3 bulk requests (PutObject, UploadPart, GetObject) answered at once;
    /// more are answered 503 SlowDown. Default: the configuration's `[s3]
    /// max_streams`, else 64.
    #[arg(long, value_name = "N", value_parser = crate::commands::usize_in(1..=65_536))]
    s3_max_streams: Option<usize>,
    /// The least severe events the log on stderr shows. Default: what RUST_LOG
    /// says, else info.
    #[arg(long, value_name = "LEVEL", value_enum)]
    log_level: Option<log::LogLevel>,
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// The tokens clients give the server.
    #[command(subcommand)]
    Token(token::Cmd),
}

impl crate::output::Output for Listening {
    fn print(&self) {
        outln!("listening on {}", self.url);
        outln!("certificate fingerprint (SHA-256) {}", self.fingerprint);
        if let Some(u) = &self.s3_url {
            outln!("S3 on {u}");
        }
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
    log::init(a.log_level);
    let file = match &a.config {
        Some(p) => config::File::read(p)?,
        None => config::File::default(),
    };
    let flags = config::File {
        listen: a.listen,
        cert: a.cert,
        key: a.key,
        s3: config::FileS3 {
            listen: a.s3_listen,
            plain: a.s3_plain.then_some(true),
            domain: a.s3_domain,
            cache_bytes: a.s3_cache,
            standard_window_seconds: a.s3_standard_window,
            bulk_window_seconds: a.s3_bulk_window,
            restore_order: a.s3_restore_order,
            max_requests: a.s3_max_requests,
            max_streams: a.s3_max_streams,
            ..config::FileS3::default()
        },
        ..config::File::default()
    };
    let config = file.resolve(flags)?;
    let dir = ctx
        .home
        .clone()
        .unwrap_or_else(tapeloom_engine::default_home);
    let server = Server::start(&dir, config)?;
    crate::output::emit(&server.listening(), ctx.json)?;
    server.serve()?;
    Ok(0)
}
