//! The `tapeloom` command: thin over the engine, catalog and device libraries. Each
//! command lives in a module of `commands/` with its arguments, its run and its
//! output; this file parses, dispatches and prints errors.
#![forbid(unsafe_code)]

#[macro_use]
mod output;
mod commands;
mod duration;
mod error;
mod health;
mod progress;
mod size;

use clap::{CommandFactory, Parser, Subcommand};
use commands::*;
use error::Hint;
use output::emit;
use std::path::PathBuf;

/// tapeloom: back up file trees to tape and restore them fast.
#[derive(Parser)]
#[command(name = "tapeloom", version, about)]
struct Cli {
    /// The home folder (catalog and virtual library). Default: $TAPELOOM_HOME, else
    /// $XDG_DATA_HOME/tapeloom, else ~/.local/share/tapeloom.
    #[arg(long, global = true, value_name = "DIR")]
    home: Option<PathBuf>,
    /// Print one JSON document on stdout and nothing else there.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Back up files and directories.
    Backup(backup::Args),
    /// List jobs.
    Jobs,
    /// Draw a job's per-second measurements (throughput per stream and drive, buffer
    /// fill, speed steps and backhitches) as SVG, PNG, or an HTML page with a summary.
    Report(report::Args),
    /// List what a job holds (recursively), under PATH or all of it.
    Ls(ls::Args),
    /// Restore a job, or some paths of it.
    Restore(restore::Args),
    /// Read every block of a job and check its checksums.
    Verify(verify::Args),
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
    /// Print a shell completion script (for example: tapeloom completions bash >
    /// /etc/bash_completion.d/tapeloom).
    Completions(completions::Args),
    /// Print the manual page (roff) on stdout: tapeloom(1), or a command's own page
    /// (for example: tapeloom man library create).
    Man(man::Args),
}

impl Cmd {
    /// How this command tells to get past a refusal with its own flags.
    fn hint(&self) -> Hint {
        match self {
            Cmd::Library(a) => a.hint(),
            Cmd::Bench(a) => a.hint(),
            Cmd::Restore(_) | Cmd::Verify(_) | Cmd::Catalog(_) | Cmd::Stage(_) => error::key_hint,
            _ => error::no_hint,
        }
    }
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                e.exit();
            }
            // Usage errors too are one line on stderr (and exit 2, as clap's do).
            eprintln!(
                "tapeloom: error: {}",
                error::usage_line(&e.render().to_string())
            );
            std::process::exit(2);
        }
    };
    let hint = cli.cmd.hint();
    match run(cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("tapeloom: error: {}", error::one_line(&e, hint));
            std::process::exit(1);
        }
    }
}

/// Runs the command and prints its output; returns the exit status.
fn run(cli: Cli) -> anyhow::Result<i32> {
    let ctx = Context {
        home: cli.home,
        json: cli.json,
    };
    let json = ctx.json;
    match cli.cmd {
        Cmd::Backup(a) => emit(&backup::run(a, &ctx)?, json),
        Cmd::Jobs => emit(&jobs::run(&ctx)?, json),
        Cmd::Report(a) => emit(&report::run(a, &ctx)?, json),
        Cmd::Ls(a) => emit(&ls::run(a, &ctx)?, json),
        Cmd::Restore(a) => emit(&restore::run(a, &ctx)?, json),
        Cmd::Verify(a) => emit(&verify::run(a, &ctx)?, json),
        Cmd::Devices(a) => emit(&devices::run(a)?, json),
        Cmd::Library(a) => a.run(&ctx),
        Cmd::Gen(a) => emit(&gen::run(a)?, json),
        Cmd::Readrate(a) => emit(&readrate::run(a)?, json),
        Cmd::Bench(a) => a.run(&ctx),
        Cmd::Drive(a) => a.run(&ctx),
        Cmd::Catalog(a) => a.run(&ctx),
        Cmd::Key(a) => a.run(&ctx),
        Cmd::Stage(a) => a.run(&ctx),
        Cmd::Completions(a) => completions::run(a, &mut Cli::command()),
        Cmd::Man(a) => man::run(a, Cli::command()),
    }
}
