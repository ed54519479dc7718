//! `tapeloom man`: the manual page (roff), made from the clap definitions; its
//! SUBCOMMANDS section names each command, whose options `tapeloom CMD --help` gives.

use anyhow::{Context, Result};
use std::io::Write;

/// Prints the page on stdout.
pub fn run(cmd: clap::Command) -> Result<i32> {
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd)
        .render(&mut page)
        .context("render the manual page")?;
    std::io::stdout()
        .write_all(title_first(&String::from_utf8_lossy(&page)).as_bytes())
        .context("write the manual page")?;
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
