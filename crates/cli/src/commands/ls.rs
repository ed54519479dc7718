//! `tapeloom ls JOB [PATH]`: what a job holds, from the catalog; `tapeloom ls --set
//! NAME [--at TIME] [PATH]`: a backup set's tree as it was at one of its jobs.

use super::Context;
use crate::net::Remote;
use crate::output::Output;
use anyhow::Result;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use tapeloom_engine::{escape_controls, Home};
use tapeloom_ops::ls::{list_job, set_listing};
use tapeloom_proto::ls::{Entry, Listing};

#[derive(clap::Args)]
pub struct Args {
    /// The job id, then a path in the job; with --set, a path in the set's tree only.
    #[arg(value_name = "JOB [PATH]", required_unless_present = "set", num_args = 0..=2)]
    args: Vec<PathBuf>,
    /// List this backup set's tree as it was at one of its jobs (each entry where
    /// its latest row in the set lies).
    #[arg(long, value_name = "NAME")]
    set: Option<String>,
    /// The set's point in time: an RFC 3339 time or a job id of the set, as for
    /// `restore --set`; the set's latest job that ended when not given.
    #[arg(long, value_name = "TIME", requires = "set")]
    at: Option<String>,
    #[command(flatten)]
    remote: Remote,
}

pub fn run(a: Args, ctx: &Context) -> Result<Listing> {
    let (job, mut path) = super::restore::job_and_paths(a.args.clone(), a.set.is_some())?;
    if path.len() > 1 {
        return Err(crate::error::CliError::OnePath(path.len()).into());
    }
    let path = path.pop();
    if let Some(server) = a.remote.resolve()? {
        let enc = tapeloom_proto::frame::percent_encode;
        let path_q = path
            .as_ref()
            .map(|p| format!("path={}", enc(p.as_os_str().as_bytes())));
        let Some(job) = job else {
            let set = a.set.clone().unwrap_or_default();
            let mut q = vec![format!("set={}", enc(set.as_bytes()))];
            q.extend(a.at.as_ref().map(|t| format!("at={}", enc(t.as_bytes()))));
            q.extend(path_q);
            return Ok(server.get_json(&format!("/api/sets/files?{}", q.join("&")))?);
        };
        let query = path_q.map_or_else(String::new, |q| format!("?{q}"));
        return Ok(server.get_json(&format!("/api/jobs/{job}/files{query}"))?);
    }
    let home = ctx.open_home_to_read()?;
    let Some(job) = job else {
        return list_set(&home, &a, path, ctx);
    };
    let path = path.as_ref().map(|p| p.as_os_str().as_bytes());
    let mut entries = Vec::new();
    list_job(&home, job, path, &mut |e| {
        if ctx.human() {
            print_entry(&e);
        } else {
            entries.push(e);
        }
    })?;
    Ok(Listing {
        job_id: job,
        set: None,
        entries,
    })
}

/// `ls --set NAME [--at TIME] [PATH]`.
fn list_set(home: &Home, a: &Args, path: Option<PathBuf>, ctx: &Context) -> Result<Listing> {
    let set = a.set.clone().unwrap_or_default();
    let path = path.as_ref().map(|p| p.as_os_str().as_bytes());
    let human = ctx.human();
    let listing = set_listing(
        home,
        (&set, a.at.as_deref(), path),
        |_| true,
        |e| {
            human.then(|| print_entry(e));
            !human
        },
    )?;
    Ok(listing)
}

/// Prints an entry on a line for people.
fn print_entry(e: &Entry) {
    // Where the entry starts in each further copy, after where it starts in
    // the job's own cartridges.
    let copies: String = (e.copies.iter())
        .map(|c| {
            format!(
                " copy{}={}:{}",
                c.copy_no,
                escape_controls(&c.volume),
                c.block
            )
        })
        .collect();
    outln!(
        "{:<8} {:o} {:>12} {} {}:{}{copies} {}",
        e.kind,
        e.mode,
        e.size,
        e.mtime,
        escape_controls(&e.volume),
        e.block,
        escape_controls(&e.path)
    );
}

impl Output for Listing {
    fn print(&self) {
        for e in &self.entries {
            print_entry(e);
        }
    }
}
