//! The `tapeloom` command: thin over the engine, catalog and device libraries. Each
//! command lives in a module of `commands/` with its arguments, its run and its
//! output; this file parses, dispatches and prints errors.
#![forbid(unsafe_code)]

#[macro_use]
mod output;
mod commands;
mod duration;
mod error;
mod full;
mod net;
#[cfg(test)]
mod numeric_options;
#[cfg(test)]
#[path = "../tests/it/common/numeric_table.rs"]
mod numeric_table;
mod progress;
mod size;

/// Blocks of up to 8 MiB are allocated and freed at the rate of the data; mimalloc
/// keeps such memory for reuse where glibc's malloc maps and unmaps it each time.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{CommandFactory, Parser};
use commands::{Cmd, Context};
use std::path::PathBuf;

/// tapeloom: back up file trees to tape and restore them fast.
#[derive(Parser)]
#[command(name = "tapeloom", version, about)]
struct Cli {
    /// The home folder (catalog and virtual library). Default: $TAPELOOM_HOME, else
    /// $XDG_DATA_HOME/tapeloom, else ~/.local/share/tapeloom.
    #[arg(long, global = true, value_name = "DIR")]
    home: Option<PathBuf>,
    /// The PostgreSQL catalog to use instead of the home's own
    /// (`postgresql://USER@HOST/DB`); over `catalog` in the home's home.toml.
    /// The password comes from PGPASSWORD or ~/.pgpass, never from here.
    #[arg(long, global = true, value_name = "URL")]
    catalog: Option<String>,
    /// Print one JSON document on stdout and nothing else there.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    cmd: Cmd,
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
    let home = cli
        .home
        .clone()
        .unwrap_or_else(tapeloom_engine::default_home);
    match run(cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            let e = error::engine(e);
            let mut line = error::one_line(&e, hint);
            if let Some(full) = full::hint(&e, &home) {
                line = format!("{line}; {full}");
            }
            eprintln!("tapeloom: error: {line}");
            std::process::exit(1);
        }
    }
}

/// Runs the command and prints its output; returns the exit status.
fn run(cli: Cli) -> anyhow::Result<i32> {
    // Generator sources (`gen:PRESET:SIZE`) are made by the measuring tools'
    // dataset generator, which the engine reaches through its trait.
    tapeloom_engine::install_generator(std::sync::Arc::new(tapeloom_tools::gen::Generator));
    if let Some(url) = &cli.catalog {
        tapeloom_engine::use_catalog(url)?;
    }
    let ctx = Context {
        home: cli.home,
        json: cli.json,
    };
    cli.cmd.run(&ctx, Cli::command)
}
