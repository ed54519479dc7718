//! `tapeloom jobs`: the jobs in the catalog, of this machine's home or through a
//! server (`--server`), which answers with the same document.

use super::Context;
use crate::net::Remote;
use crate::output::{self, Output};
use anyhow::Result;
use tapeloom_engine::escape_controls;
use tapeloom_ops::jobs::list;
use tapeloom_proto::jobs::Jobs;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    remote: Remote,
}

pub fn run(a: Args, ctx: &Context) -> Result<Jobs> {
    if let Some(server) = a.remote.resolve()? {
        return Ok(server.get_json("/api/jobs")?);
    }
    let home = ctx.open_home_to_read()?;
    Ok(list(&home, |_| true)?)
}

impl Output for Jobs {
    fn print(&self) {
        // Names, sets, barcodes and clients come from tapes and clients: the
        // line is escaped whole.
        for j in &self.jobs {
            let line = format!(
                "{:>5}  {:<8} {}  {:>9} files {:>10}  {}{}  {}{}{}{}",
                j.job_id,
                j.status,
                j.started,
                j.files,
                output::bytes(j.bytes),
                j.volumes.join(","),
                j.copies.iter().fold(String::new(), |acc, c| format!(
                    "{acc} + copy {} ({}, {})",
                    c.copy_no,
                    c.volumes.join(","),
                    c.state
                )),
                j.name,
                match (j.level.as_str(), j.set == j.name) {
                    ("full", true) => String::new(),
                    (level, true) => format!("  ({level})"),
                    (level, false) => format!("  (set {}, {level})", j.set),
                },
                j.key
                    .as_ref()
                    .map_or(String::new(), |k| format!("  (encrypted, key {k})")),
                j.client
                    .as_ref()
                    .map_or(String::new(), |c| format!("  (client {c})"))
            );
            outln!("{}", escape_controls(&line));
            if let Some(why) = &j.why {
                outln!("       {}: {}", j.status, escape_controls(why));
            }
        }
    }
}
