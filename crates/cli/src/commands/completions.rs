//! `tapeloom completions SHELL`: a completion script made from the clap definitions.

use anyhow::{Context, Result};
use std::io::Write;

#[derive(clap::Args)]
pub struct Args {
    /// The shell.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// Prints the script on stdout.
pub fn run(a: Args, cmd: &mut clap::Command) -> Result<i32> {
    let name = cmd.get_name().to_string();
    // Into a buffer first: clap_complete panics on a write error (a closed pipe).
    let mut script = Vec::new();
    clap_complete::generate(a.shell, cmd, name, &mut script);
    std::io::stdout()
        .write_all(&script)
        .context("write the completion script")?;
    Ok(0)
}
