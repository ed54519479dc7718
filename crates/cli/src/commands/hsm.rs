//! `tapeloom hsm ...`: hierarchical storage. Files of a managed folder migrate
//! to tape, give their disk space back (released: a stub of the same size and
//! times) and come back when recalled (`tapeloom_hsm`, docs/HSM.md).

use super::Context;
use crate::output::{bytes, emit, Output};
use anyhow::Result;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use tapeloom_engine::escape_controls;
use tapeloom_hsm::{Counts, Marks, MigrateOptions, RecallOrder, State};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// Manage a folder: its files may migrate to tape, as jobs of a pool of their own.
    Manage(ManageArgs),
    /// Write files of the managed folders to tape (resident and changed ones), read
    /// the job back, and mark each file premigrated (on disk and on tape).
    Migrate(MigrateArgs),
    /// Give back the disk space of premigrated files whose tape copy was read back:
    /// each becomes a stub of the same size, mode, owner and times.
    Release(ReleaseArgs),
    /// Bring released files back from tape, in one batch: each cartridge read once, in tape order.
    Recall(RecallArgs),
    /// Files and bytes in each state: resident, premigrated, released, dirty.
    Status(StatusArgs),
    /// Make the catalog agree with the files' own records (--check: only say
    /// where they differ, and exit 1 when they do).
    Reconcile(ReconcileArgs),
    /// Recall released files when they are read (root; fanotify pre-content
    /// events): a read waits while its file comes back. Runs until SIGTERM.
    Daemon(DaemonArgs),
    /// The daemon's guardian: answers waiting readers with EIO if the daemon dies.
    #[command(hide = true)]
    Guardian(GuardianArgs),
}

#[derive(clap::Args)]
struct DaemonArgs {
    /// Reads that come within this time are recalled as one batch.
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse, default_value = "2s")]
    window: std::time::Duration,
    /// A reader waits at most this long for its file, then gets an I/O error.
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse, default_value = "10m")]
    timeout: std::time::Duration,
    /// Write the daemon's counters (JSON) to this file as they change.
    #[arg(long, value_name = "FILE")]
    status: Option<PathBuf>,
}

#[derive(clap::Args)]
struct GuardianArgs {
    /// The daemon's fanotify descriptor, inherited.
    #[arg(long, value_parser = clap::value_parser!(i32).range(3..))]
    fd: i32,
}

#[derive(clap::Args)]
struct ManageArgs {
    /// The folder.
    dir: PathBuf,
    /// The media pool its files migrate to (made when missing).
    #[arg(long, default_value = tapeloom_hsm::DEFAULT_POOL)]
    pool: String,
}

#[derive(clap::Args)]
struct MigrateArgs {
    /// Files or folders in managed folders; all managed folders when none.
    paths: Vec<PathBuf>,
    /// Only files last modified at least this long ago (for example 30d).
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse)]
    older_than: Option<std::time::Duration>,
    /// Only files of at least this size (for example 1M).
    #[arg(long, value_name = "SIZE", value_parser = crate::size::within(0, crate::size::MAX), default_value = "0")]
    min_size: u64,
    /// Block size of the jobs written (64K to 8M, a multiple of 4K; default as
    /// for a backup).
    #[arg(long, value_parser = super::backup::parse_block_size)]
    block_size: Option<usize>,
}

#[derive(clap::Args)]
struct ReleaseArgs {
    /// Files or folders in managed folders; all managed folders when none.
    paths: Vec<PathBuf>,
    /// Release only while the file system is fuller than this (for example 90%),
    /// least recently read files first.
    #[arg(long, value_name = "PERCENT", value_parser = parse_percent, requires = "low")]
    high: Option<f64>,
    /// ... until it is under this (for example 70%).
    #[arg(long, value_name = "PERCENT", value_parser = parse_percent, requires = "high")]
    low: Option<f64>,
}

#[derive(clap::Args)]
struct PathsArgs {
    /// Files or folders in managed folders.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
}

#[derive(clap::Args)]
struct RecallArgs {
    /// Files or folders in managed folders.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// In what order the files are read: planned (all in one reading, each
    /// cartridge once, its files in the order the drive's model says is
    /// fastest), block (the same reading in block order), or asked (one file
    /// after another, each its own reading, in the order given).
    #[arg(long, default_value = "planned", value_parser = ["planned", "block", "asked"])]
    order: String,
}

#[derive(clap::Args)]
struct StatusArgs {
    /// Files or folders in managed folders; all managed folders when none.
    paths: Vec<PathBuf>,
    /// Also each folder, with the files directly in it.
    #[arg(long)]
    by_folder: bool,
}

#[derive(clap::Args)]
struct ReconcileArgs {
    /// Only say where the catalog and the files differ.
    #[arg(long)]
    check: bool,
}

/// A percentage: `90%` or `90`.
fn parse_percent(s: &str) -> Result<f64, String> {
    let n = s.strip_suffix('%').unwrap_or(s);
    match n.parse::<f64>() {
        Ok(v) if (1.0..=100.0).contains(&v) => Ok(v),
        _ => Err(format!("'{s}' is not a percentage from 1 to 100")),
    }
}

impl Args {
    /// Runs the subcommand and prints its output.
    pub fn run(self, ctx: &Context) -> Result<i32> {
        // The daemon opens the home only while it recalls, and the guardian never.
        match self.cmd {
            Cmd::Daemon(a) => run_daemon(a, ctx),
            Cmd::Guardian(a) => {
                tapeloom_hsm::guardian(a.fd, std::io::stdin().lock())?;
                Ok(0)
            }
            cmd => on_home(cmd, ctx),
        }
    }
}

/// Runs a subcommand that holds the home while it runs.
fn on_home(cmd: Cmd, ctx: &Context) -> Result<i32> {
    let mut home = ctx.open_home()?;
    match cmd {
        Cmd::Manage(a) => {
            let r = tapeloom_hsm::manage(&home, &a.dir, &a.pool)?;
            let out = Managed {
                folder: String::from_utf8_lossy(&r.path).into_owned(),
                pool: r.pool,
            };
            emit(&out, ctx.json)
        }
        Cmd::Migrate(a) => {
            let opts = MigrateOptions {
                older_than: a.older_than,
                min_size: a.min_size,
                block_size: a.block_size,
            };
            let r = tapeloom_hsm::migrate(&mut home, &a.paths, &opts, &super::key::Passphrase)?;
            emit(&MigratedOut::from(r), ctx.json)
        }
        Cmd::Release(a) => {
            let marks = match (a.high, a.low) {
                (Some(h), Some(l)) => Some(Marks::new(h, l)?),
                _ => None,
            };
            let r = tapeloom_hsm::release(&home, &a.paths, marks)?;
            emit(&ReleasedOut::from(r), ctx.json)
        }
        Cmd::Recall(a) => {
            let order = match a.order.as_str() {
                "block" => RecallOrder::Block,
                "asked" => RecallOrder::Asked,
                _ => RecallOrder::Planned,
            };
            let r = tapeloom_hsm::recall(&home, &a.paths, order)?;
            emit(&RecalledOut::from(r), ctx.json)
        }
        Cmd::Status(a) => emit(
            &StatusOut::from(tapeloom_hsm::status(&home, &a.paths, a.by_folder)?),
            ctx.json,
        ),
        Cmd::Reconcile(a) => emit(
            &ReconciledOut::new(tapeloom_hsm::reconcile(&home, a.check)?, a.check),
            ctx.json,
        ),
        Cmd::Daemon(_) | Cmd::Guardian(_) => Ok(2),
    }
}

/// Runs `hsm daemon` until SIGTERM, then prints its counters.
fn run_daemon(a: DaemonArgs, ctx: &Context) -> Result<i32> {
    let dir = (ctx.home.clone()).unwrap_or_else(tapeloom_engine::default_home);
    let mut guardian = std::process::Command::new(std::env::current_exe()?);
    guardian.arg("--home").arg(&dir).args(["hsm", "guardian"]);
    let opts = tapeloom_hsm::DaemonOptions {
        window: a.window,
        timeout: a.timeout,
        status: a.status,
        guardian: Some(guardian),
    };
    eprintln!(
        "tapeloom: hsm daemon watching the managed folders of {}",
        dir.display()
    );
    let c = tapeloom_hsm::daemon(&dir, opts, &|| false)?;
    emit(&DaemonOut(c), ctx.json)
}

#[derive(Serialize)]
struct DaemonOut(#[serde(serialize_with = "counters")] tapeloom_hsm::Counters);

fn counters<S: serde::Serializer>(c: &tapeloom_hsm::Counters, s: S) -> Result<S::Ok, S::Error> {
    let v: serde_json::Value =
        serde_json::from_str(&c.json("")).map_err(serde::ser::Error::custom)?;
    v.serialize(s)
}

impl Output for DaemonOut {
    fn print(&self) {
        let c = &self.0;
        outln!(
            "{} accesses: {} let through, {} waited; {} files recalled ({}) in {} batches, {} failed, {} timed out",
            c.events,
            c.passed,
            c.waited,
            c.recalled_files,
            bytes(c.recalled_bytes),
            c.batches,
            c.failed,
            c.timed_out
        );
    }
}

fn reasons(v: Vec<(PathBuf, String)>) -> Vec<PathWhy> {
    (v.into_iter())
        .map(|(p, why)| PathWhy {
            path: p.to_string_lossy().into_owned(),
            why,
        })
        .collect()
}

#[derive(Serialize)]
struct PathWhy {
    path: String,
    why: String,
}

#[derive(Serialize)]
struct Managed {
    folder: String,
    pool: String,
}

impl Output for Managed {
    fn print(&self) {
        outln!(
            "managing {} (its files migrate to pool {})",
            escape_controls(&self.folder),
            escape_controls(&self.pool)
        );
    }
}

#[derive(Serialize)]
struct MigratedOut {
    jobs: Vec<i64>,
    files: u64,
    bytes: u64,
    changed_while_read: Vec<String>,
    skipped: Vec<PathWhy>,
}

impl From<tapeloom_hsm::Migrated> for MigratedOut {
    fn from(r: tapeloom_hsm::Migrated) -> Self {
        MigratedOut {
            jobs: r.jobs,
            files: r.files,
            bytes: r.bytes,
            changed_while_read: r
                .changed
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect(),
            skipped: reasons(r.skipped),
        }
    }
}

impl Output for MigratedOut {
    fn print(&self) {
        outln!(
            "migrated {} files ({}) in job(s) {:?}",
            self.files,
            bytes(self.bytes),
            self.jobs
        );
        for p in &self.changed_while_read {
            outln!(
                "  changed while it was read, left as it was: {}",
                escape_controls(p)
            );
        }
        for s in &self.skipped {
            outln!(
                "  skipped {}: {}",
                escape_controls(&s.path),
                escape_controls(&s.why)
            );
        }
    }
}

#[derive(Serialize)]
struct ReleasedOut {
    files: u64,
    bytes: u64,
    kept: Vec<PathWhy>,
    fill: Vec<Fill>,
}

#[derive(Serialize)]
struct Fill {
    folder: String,
    before_percent: f64,
    after_percent: f64,
}

impl From<tapeloom_hsm::Released> for ReleasedOut {
    fn from(r: tapeloom_hsm::Released) -> Self {
        ReleasedOut {
            files: r.files,
            bytes: r.bytes,
            kept: reasons(r.kept),
            fill: (r.fill.into_iter())
                .map(|(p, before, after)| Fill {
                    folder: p.to_string_lossy().into_owned(),
                    before_percent: before,
                    after_percent: after,
                })
                .collect(),
        }
    }
}

impl Output for ReleasedOut {
    fn print(&self) {
        outln!("released {} files ({})", self.files, bytes(self.bytes));
        for f in &self.fill {
            outln!(
                "  {}: {:.1}% full before, {:.1}% after",
                escape_controls(&f.folder),
                f.before_percent,
                f.after_percent
            );
        }
        for k in &self.kept {
            outln!(
                "  kept {}: {}",
                escape_controls(&k.path),
                escape_controls(&k.why)
            );
        }
    }
}

#[derive(Serialize)]
struct RecalledOut {
    files: u64,
    bytes: u64,
    jobs: Vec<i64>,
    mounts: u64,
    loads: u64,
    blocks_read: u64,
    readings: u64,
    reordered: u64,
    modeled_seconds: Option<f64>,
    planned_seconds: Option<f64>,
    seconds: f64,
    failed: Vec<PathWhy>,
}

impl From<tapeloom_hsm::Recalled> for RecalledOut {
    fn from(r: tapeloom_hsm::Recalled) -> Self {
        RecalledOut {
            files: r.files,
            bytes: r.bytes,
            jobs: r.jobs,
            mounts: r.mounts,
            loads: r.loads,
            blocks_read: r.blocks_read,
            readings: r.readings,
            reordered: r.reordered,
            modeled_seconds: r.modeled_seconds,
            planned_seconds: r.planned_seconds,
            seconds: r.seconds,
            failed: reasons(r.failed),
        }
    }
}

impl Output for RecalledOut {
    fn print(&self) {
        outln!(
            "recalled {} files ({}) from {} job(s), {} mounts, in {:.1} s",
            self.files,
            bytes(self.bytes),
            self.jobs.len(),
            self.mounts,
            self.seconds
        );
        if let (Some(m), Some(p)) = (self.modeled_seconds, self.planned_seconds) {
            outln!("  modeled {m:.1} s, planned {p:.1} s");
        }
        for f in &self.failed {
            outln!(
                "  not recalled {}: {}",
                escape_controls(&f.path),
                escape_controls(&f.why)
            );
        }
    }

    fn failure(&self) -> Option<String> {
        (!self.failed.is_empty()).then(|| format!("{} files were not recalled", self.failed.len()))
    }
}

#[derive(Serialize)]
struct CountsOut {
    folder: String,
    /// Files and bytes by state.
    files: BTreeMap<&'static str, u64>,
    bytes: BTreeMap<&'static str, u64>,
    disk_bytes: u64,
    /// Files on tape by how many copies of them are on tape (as text: "1", "2").
    tape_copies: BTreeMap<String, u64>,
}

impl CountsOut {
    fn new(p: &std::path::Path, c: &Counts) -> Self {
        let of = |s: State| c.by_state.get(&s).copied().unwrap_or_default();
        CountsOut {
            folder: p.to_string_lossy().into_owned(),
            files: State::ALL.iter().map(|&s| (s.as_str(), of(s).0)).collect(),
            bytes: State::ALL.iter().map(|&s| (s.as_str(), of(s).1)).collect(),
            disk_bytes: c.disk_bytes,
            tape_copies: (c.by_copies.iter())
                .map(|(n, files)| (n.to_string(), *files))
                .collect(),
        }
    }

    fn print(&self) {
        let parts: Vec<String> = (State::ALL.iter())
            .map(|s| {
                let k = s.as_str();
                format!("{} {k} ({})", self.files[k], bytes(self.bytes[k]))
            })
            .collect();
        let copies: Vec<String> = (self.tape_copies.iter())
            .map(|(n, files)| match n.as_str() {
                "1" => format!("{files} in 1 copy"),
                _ => format!("{files} in {n} copies"),
            })
            .collect();
        let on_tape = match copies.is_empty() {
            true => String::new(),
            false => format!("; on tape: {}", copies.join(", ")),
        };
        outln!(
            "{}: {}; {} on disk{on_tape}",
            escape_controls(&self.folder),
            parts.join(", "),
            bytes(self.disk_bytes)
        );
    }
}

#[derive(Serialize)]
struct StatusOut {
    roots: Vec<CountsOut>,
    folders: Vec<CountsOut>,
    skipped: Vec<PathWhy>,
}

impl From<tapeloom_hsm::Status> for StatusOut {
    fn from(s: tapeloom_hsm::Status) -> Self {
        StatusOut {
            roots: s.roots.iter().map(|(p, c)| CountsOut::new(p, c)).collect(),
            folders: s
                .folders
                .iter()
                .map(|(p, c)| CountsOut::new(p, c))
                .collect(),
            skipped: reasons(s.skipped),
        }
    }
}

impl Output for StatusOut {
    fn print(&self) {
        for r in &self.roots {
            r.print();
        }
        if !self.folders.is_empty() {
            outln!("by folder:");
            for f in &self.folders {
                f.print();
            }
        }
    }
}

#[derive(Serialize)]
struct ReconciledOut {
    check: bool,
    clean: bool,
    recorded: Vec<String>,
    forgotten: Vec<String>,
    times: Vec<String>,
    /// Released files that still held data blocks (a cut release or recall).
    punched: Vec<String>,
    skipped: Vec<PathWhy>,
}

impl ReconciledOut {
    fn new(r: tapeloom_hsm::Reconciled, check: bool) -> Self {
        let list = |v: &[PathBuf]| v.iter().map(|p| p.to_string_lossy().into_owned()).collect();
        ReconciledOut {
            check,
            clean: r.clean(),
            recorded: list(&r.recorded),
            forgotten: list(&r.forgotten),
            times: list(&r.times),
            punched: list(&r.punched),
            skipped: reasons(r.skipped),
        }
    }
}

impl Output for ReconciledOut {
    fn print(&self) {
        let verb = if self.check { "differ" } else { "set right" };
        outln!(
            "{} records {verb}, {} to forget, {} stubs' times to put back, {} stubs with blocks to release again",
            self.recorded.len(),
            self.forgotten.len(),
            self.times.len(),
            self.punched.len()
        );
        for p in (self.recorded.iter())
            .chain(&self.forgotten)
            .chain(&self.times)
            .chain(&self.punched)
        {
            outln!("  {}", escape_controls(p));
        }
    }

    fn failure(&self) -> Option<String> {
        (self.check && !self.clean)
            .then(|| "the catalog and the managed files' records differ".to_string())
    }
}
