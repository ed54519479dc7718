//! `tapeloom completions SHELL`: a completion script made from the clap definitions.

use anyhow::Result;

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
    crate::output::write_stdout_bytes(&script);
    crate::output::finish()?;
    Ok(0)
}
