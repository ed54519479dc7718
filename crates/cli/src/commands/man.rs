//! `tapeloom man [COMMAND...]`: the manual pages (roff), made from the clap
//! definitions: tapeloom(1), whose SUBCOMMANDS section names each command, and one
//! page per command with its options (tapeloom-backup(1), tapeloom-library-create(1)).

use crate::error::CliError;
use anyhow::{Context, Result};

#[derive(clap::Args)]
pub struct Args {
    /// The command whose page to print, e.g. `backup` or `library create`; without
    /// one, the page of tapeloom itself.
    command: Vec<String>,
}

/// Prints the page on stdout.
pub fn run(a: Args, mut cmd: clap::Command) -> Result<i32> {
    // Subcommands get their full names (tapeloom-library-create) when built.
    cmd.build();
    for name in &a.command {
        cmd = cmd
            .find_subcommand(name)
            .cloned()
            .ok_or_else(|| CliError::NoSuchCommand {
                name: a.command.join(" "),
            })?;
    }
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd)
        .render(&mut page)
        .context("render the manual page")?;
    crate::output::write_stdout_bytes(title_first(&String::from_utf8_lossy(&page)).as_bytes());
    crate::output::finish()?;
    Ok(0)
}

/// The page with its `.TH` title line first, as man(7) pages begin (clap_mangen
/// defines its apostrophe string before it; the definition works after it too).
fn title_first(page: &str) -> String {
    let mut lines: Vec<&str> = page.lines().collect();
    if let Some(i) = lines.iter().position(|l| l.starts_with(".TH ")) {
        let title = lines.remove(i);
        lines.insert(0, title);
    }
    lines.iter().map(|l| format!("{l}\n")).collect()
}
