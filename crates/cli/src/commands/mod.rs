//! One module per command: its `clap::Args`, its `run`, and the typed output it
//! returns (which `--json` serializes and which prints itself for people).

pub mod backup;
pub mod bench;
pub mod catalog;
pub mod completions;
pub mod copy;
pub mod devices;
pub mod drive;
pub mod expire;
pub mod gen;
pub mod hsm;
pub mod jobs;
pub mod key;
pub mod library;
pub mod ls;
pub mod man;
pub mod migrate;
pub mod plan;
pub mod pool;
pub mod queue;
pub mod readrate;
pub mod report;
pub mod restore;
pub mod s3;
pub mod server;
pub mod stage;
pub mod verify;

use crate::error::Hint;
use crate::output::emit;
use anyhow::Result;
use std::path::PathBuf;
use tapeloom_engine::Home;

/// The commands.
#[derive(clap::Subcommand)]
pub enum Cmd {
    /// Back up files and directories.
    Backup(Box<backup::Args>),
    /// List jobs (of this machine's home, or through a server with --server).
    Jobs(jobs::Args),
    /// Draw a job's per-second measurements (throughput per stream and drive, buffer
    /// fill, speed steps and backhitches) as SVG, PNG, or an HTML page with a summary.
    Report(report::Args),
    /// List what a job holds (recursively), under PATH or all of it.
    Ls(ls::Args),
    /// Restore a job, or some paths of it.
    Restore(restore::Args),
    /// Read every block of a job and check its checksums.
    Verify(verify::Args),
    /// Write a further copy of jobs onto another pool's cartridges, block for
    /// block.
    Copy(copy::Args),
    /// Move jobs to another pool's cartridges (a new generation, say): each is
    /// copied, read back, and then read from its new place only.
    Migrate(migrate::MigrateArgs),
    /// Move the jobs kept on cartridges to other cartridges of their pool and
    /// label them anew, to win back the room expired jobs take.
    Repack(migrate::RepackArgs),
    /// SCSI tape drives and media changers: this machine's /dev/sg devices and the
    /// iSCSI logical units named.
    Devices(devices::Args),
    /// The tape library.
    Library(library::Args),
    /// Make a deterministic test tree (like HPcreatedata): power-of-two size classes
    /// with equal file counts, data of a chosen compressibility.
    Gen(gen::Args),
    /// Read folders in parallel as a backup would (like HPreaddata) and say whether
    /// they can keep a drive streaming.
    Readrate(readrate::Args),
    /// Predict a backup window (each drive's rate, backhitches, the stage's peak,
    /// restore times) and answer sizing questions: --solve drives, concurrency or
    /// stage.
    Plan(plan::Args),
    /// Benchmarks.
    Bench(bench::Args),
    /// Drive models.
    Drive(drive::Args),
    /// The catalog.
    Catalog(catalog::Args),
    /// Key files for encrypted backups.
    Key(key::Args),
    /// Disk stages: folders backups spool to before tape.
    Stage(stage::Args),
    /// Media pools: sets of cartridges with their own rules, which backups write to.
    Pool(pool::Args),
    /// Hierarchical storage: files of managed folders migrate to tape, give their
    /// disk space back, and are recalled.
    Hsm(hsm::Args),
    /// Mark expired the cartridges whose jobs all outlived their pool's retention,
    /// and forget those jobs; a backup of the pool may then recycle them.
    Expire(expire::Args),
    /// A server's jobs: waiting, receiving from their clients, writing, and the
    /// last that ended (--server).
    Queue(queue::Args),
    /// Serve the home's catalog to clients over TLS (in the foreground), and manage
    /// the tokens they give.
    Server(server::Args),
    /// The S3 front end's access keys and buckets (`server --s3-listen` serves S3).
    S3(s3::Args),
    /// Print a shell completion script (for example: tapeloom completions bash >
    /// /etc/bash_completion.d/tapeloom).
    Completions(completions::Args),
    /// Print the manual page (roff) on stdout: tapeloom(1), or a command's own page
    /// (for example: tapeloom man library create).
    Man(man::Args),
}

impl Cmd {
    /// How this command tells to get past a refusal with its own flags.
    pub fn hint(&self) -> Hint {
        match self {
            Cmd::Backup(_) => backup::hint,
            Cmd::Library(a) => a.hint(),
            Cmd::Restore(_) | Cmd::Verify(_) | Cmd::Catalog(_) | Cmd::Stage(_) => {
                crate::error::key_hint
            }
            _ => crate::error::no_hint,
        }
    }

    /// Runs the command and prints its output; returns the exit status. `cli` gives
    /// the whole command line's definition (for completions and manual pages).
    pub fn run(self, ctx: &Context, cli: fn() -> clap::Command) -> Result<i32> {
        let json = ctx.json;
        match self {
            Cmd::Backup(a) => backup::run_any(*a, ctx, json),
            Cmd::Jobs(a) => emit(&jobs::run(a, ctx)?, json),
            Cmd::Report(a) => emit(&report::run(a, ctx)?, json),
            Cmd::Ls(a) => emit(&ls::run(a, ctx)?, json),
            Cmd::Restore(a) => emit(&restore::run(a, ctx)?, json),
            Cmd::Verify(a) => emit(&verify::run(a, ctx)?, json),
            Cmd::Copy(a) => emit(&copy::run(a, ctx)?, json),
            Cmd::Migrate(a) => emit(&migrate::migrate(a, ctx)?, json),
            Cmd::Repack(a) => emit(&migrate::repack(a, ctx)?, json),
            Cmd::Devices(a) => emit(&devices::run(a)?, json),
            Cmd::Library(a) => a.run(ctx),
            Cmd::Gen(a) => emit(&gen::run(a)?, json),
            Cmd::Readrate(a) => emit(&readrate::run(a)?, json),
            Cmd::Plan(a) => emit(&plan::run(a, ctx)?, json),
            Cmd::Bench(a) => a.run(ctx),
            Cmd::Drive(a) => a.run(ctx),
            Cmd::Catalog(a) => a.run(ctx),
            Cmd::Key(a) => a.run(ctx),
            Cmd::Stage(a) => a.run(ctx),
            Cmd::Pool(a) => a.run(ctx),
            Cmd::Hsm(a) => a.run(ctx),
            Cmd::Expire(a) => emit(&expire::run(a, ctx)?, json),
            Cmd::Server(a) => a.run(ctx),
            Cmd::S3(a) => a.run(ctx),
            Cmd::Queue(a) => emit(&queue::run(a, ctx)?, json),
            Cmd::Completions(a) => completions::run(a, &mut cli()),
            Cmd::Man(a) => man::run(a, cli()),
        }
    }
}

/// What every command gets from the global flags.
pub struct Context {
    /// `--home`, when given.
    pub home: Option<PathBuf>,
    /// `--json`: the output is one JSON document, progress and tallies go elsewhere.
    pub json: bool,
}

impl Context {
    /// Opens (and locks) the home folder.
    pub fn open_home(&self) -> Result<Home> {
        Ok(Home::open(&self.home_dir())?)
    }

    /// Opens the home for a command that only reads it: also a home on a
    /// read-only file system ([`Home::open_to_read`]).
    pub fn open_home_to_read(&self) -> Result<Home> {
        Ok(Home::open_to_read(&self.home_dir())?)
    }

    /// The home folder: `--home`, else the default one.
    fn home_dir(&self) -> std::path::PathBuf {
        (self.home.clone()).unwrap_or_else(tapeloom_engine::default_home)
    }

    /// Whether the output is for people.
    pub fn human(&self) -> bool {
        !self.json
    }
}

/// The largest drive index or slot address a flag takes: SCSI numbers a library's
/// elements with 16 bits, so no library has more.
pub const MAX_INDEX: u64 = u16::MAX as u64;

/// A parser for a count or index flag of type `usize` that takes the numbers of
/// `range` only: one outside it is refused when it is parsed, with clap's one-line
/// error naming the range.
pub fn usize_in(
    range: impl std::ops::RangeBounds<u64>,
) -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::new().range(range)
}

/// Parses a job id: a number from 1 (the catalog numbers jobs from 1).
pub fn parse_job_id(s: &str) -> std::result::Result<i64, String> {
    match s.parse::<i64>() {
        Ok(id) if id >= 1 => Ok(id),
        _ => Err(format!("'{s}' is not a job id (a number from 1)")),
    }
}

/// The drive clock of a model: add up modeled time, or take that long.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum ClockArg {
    // The flags' help says what each does; doc comments here would turn it into
    // the long form.
    Virtual,
    Real,
}

impl From<ClockArg> for tapeloom_device::Clock {
    /// The flag's value as the model's clock.
    fn from(c: ClockArg) -> Self {
        match c {
            ClockArg::Virtual => tapeloom_device::Clock::Virtual,
            ClockArg::Real => tapeloom_device::Clock::Real,
        }
    }
}
