//! `tapeloom ls JOB [PATH]`: what a job holds, from the catalog; `tapeloom ls --set
//! NAME [--at TIME] [PATH]`: a backup set's tree as it was at one of its jobs.

use super::Context;
use crate::net::client::Remote;
use crate::output::{self, Output};
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use tapeloom_catalog::{Catalog, FileRow, JobVolume};
use tapeloom_engine::{display_path, escape_controls, JobError};

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

/// A job's entries under a path. For people each entry is printed as it is read
/// (a job can hold millions), so `entries` is filled only for `--json` (and by
/// the server, which sends them all).
#[derive(Serialize, Deserialize)]
pub struct Listing {
    job_id: i64,
    /// The backup set listed as it was at `job_id`, for `--set`.
    #[serde(skip_serializing_if = "Option::is_none")]
    set: Option<String>,
    entries: Vec<Entry>,
}

/// One entry and where its data starts on tape.
#[derive(Serialize, Deserialize)]
pub struct Entry {
    path: String,
    #[serde(rename = "type")]
    kind: String,
    size: u64,
    mode: u32,
    mtime: String,
    mtime_ns: i64,
    volume: String,
    block: u64,
    offset: u32,
}

pub fn run(a: Args, ctx: &Context) -> Result<Listing> {
    let (job, mut path) = super::restore::job_and_paths(a.args.clone(), a.set.is_some())?;
    if path.len() > 1 {
        return Err(crate::error::CliError::OnePath(path.len()).into());
    }
    let path = path.pop();
    if let Some(server) = a.remote.resolve()? {
        let enc = crate::net::http::percent_encode;
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
    let home = ctx.open_home()?;
    let Some(job) = job else {
        return list_set(&home.catalog, &a, path, ctx);
    };
    let path = path.as_ref().map(|p| p.as_os_str().as_bytes());
    let mut entries = Vec::new();
    list_job(&home.catalog, job, path, &mut |e| {
        if ctx.human() {
            e.print();
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

/// Hands each entry of job `job` under `path` (all when none) to `each`; refuses a
/// job or a path the catalog does not have.
pub fn list_job(
    cat: &Catalog,
    job: i64,
    path: Option<&[u8]>,
    each: &mut dyn FnMut(Entry),
) -> tapeloom_engine::Result<()> {
    cat.job(job)?
        .ok_or(tapeloom_engine::Error::Job(JobError::NoJob(job)))?;
    let vols = cat.job_volumes(job)?;
    let prefix = path.map(tapeloom_engine::normalize);
    let mut count = 0u64;
    cat.for_each_file(job, prefix.as_deref(), |r| {
        count += 1;
        each(Entry::new(&r, &vols));
        Ok(())
    })?;
    if let (0, Some(p)) = (count, prefix) {
        let path = display_path(&p);
        return Err(tapeloom_engine::Error::Job(JobError::NoPath { job, path }));
    }
    Ok(())
}

/// Every entry of job `job` under `path`, as one document.
pub fn job_listing(
    cat: &Catalog,
    job: i64,
    path: Option<&[u8]>,
) -> tapeloom_engine::Result<Listing> {
    let mut entries = Vec::new();
    list_job(cat, job, path, &mut |e| entries.push(e))?;
    Ok(Listing {
        job_id: job,
        set: None,
        entries,
    })
}

/// `ls --set NAME [--at TIME] [PATH]`.
fn list_set(cat: &Catalog, a: &Args, path: Option<PathBuf>, ctx: &Context) -> Result<Listing> {
    let set = a.set.clone().unwrap_or_default();
    let path = path.as_ref().map(|p| p.as_os_str().as_bytes());
    let human = ctx.human();
    let listing = set_listing(
        cat,
        (&set, a.at.as_deref(), path),
        |_| true,
        |e| {
            human.then(|| e.print());
            !human
        },
    )?;
    Ok(listing)
}

/// The listing of set `set` at `at` under `path`: each entry handed to `each`,
/// kept when it says so. `visible` is asked of every job whose rows the tree
/// holds; a tree with a row of a job it refuses is [`JobError::NoJob`] of the
/// set's job, as for a set that does not exist.
pub fn set_listing(
    cat: &Catalog,
    (set, at, path): (&str, Option<&str>, Option<&[u8]>),
    visible: impl Fn(&tapeloom_catalog::Job) -> bool,
    mut each: impl FnMut(&Entry) -> bool,
) -> Result<Listing, tapeloom_engine::Error> {
    let paths: Vec<Vec<u8>> = path.iter().map(|p| p.to_vec()).collect();
    let (job, tree) = tapeloom_engine::set_tree(cat, set, at, &paths)?;
    let mut vols: HashMap<i64, Vec<JobVolume>> = HashMap::new();
    let mut entries = Vec::new();
    for f in tree.values() {
        let v = match vols.entry(f.job) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                let shown = cat.job(f.job)?.is_some_and(|j| visible(&j));
                if !shown {
                    return Err(JobError::NoJob(job.id).into());
                }
                e.insert(cat.job_volumes(f.job)?)
            }
        };
        let e = Entry::new(&f.row, v);
        if each(&e) {
            entries.push(e);
        }
    }
    if !visible(&job) {
        return Err(JobError::NoJob(job.id).into());
    }
    Ok(Listing {
        job_id: job.id,
        set: Some(set.to_string()),
        entries,
    })
}

impl Entry {
    /// Row `r` of a job whose volumes are `vols`.
    fn new(r: &FileRow, vols: &[JobVolume]) -> Self {
        let volume = vols
            .iter()
            .find(|v| v.seq == r.start_seq)
            .map(|v| v.volume.barcode.as_str())
            .unwrap_or("?");
        Entry {
            path: display_path(&r.path),
            kind: tapeloom_format::EntryType::from_u8(r.kind)
                .map(|k| k.name())
                .unwrap_or("?")
                .to_string(),
            size: r.size,
            mode: r.mode,
            mtime: output::time(r.mtime_ns),
            mtime_ns: r.mtime_ns,
            volume: volume.to_string(),
            block: r.start_lbn,
            offset: r.start_off,
        }
    }

    fn print(&self) {
        outln!(
            "{:<8} {:o} {:>12} {} {}:{} {}",
            self.kind,
            self.mode,
            self.size,
            self.mtime,
            escape_controls(&self.volume),
            self.block,
            escape_controls(&self.path)
        );
    }
}

impl Output for Listing {
    fn print(&self) {
        for e in &self.entries {
            e.print();
        }
    }
}
