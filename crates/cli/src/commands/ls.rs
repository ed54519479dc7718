//! `tapeloom ls JOB [PATH]`: what a job holds, from the catalog.

use super::Context;
use crate::output::{self, Output};
use anyhow::Result;
use serde::Serialize;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use tapeloom_engine::{display_path, JobError};

#[derive(clap::Args)]
pub struct Args {
    /// Job id.
    job: i64,
    /// Path in the job.
    path: Option<PathBuf>,
}

/// A job's entries under a path. For people each entry is printed as it is read
/// (a job can hold millions), so `entries` is filled only for `--json`.
#[derive(Serialize)]
pub struct Listing {
    job_id: i64,
    entries: Vec<Entry>,
}

/// One entry and where its data starts on tape.
#[derive(Serialize)]
struct Entry {
    path: String,
    #[serde(rename = "type")]
    kind: &'static str,
    size: u64,
    mode: u32,
    mtime: String,
    mtime_ns: i64,
    volume: String,
    block: u64,
    offset: u32,
}

pub fn run(a: Args, ctx: &Context) -> Result<Listing> {
    let home = ctx.open_home()?;
    let (cat, job) = (&home.catalog, a.job);
    cat.job(job)?
        .ok_or(tapeloom_engine::Error::Job(JobError::NoJob(job)))?;
    let vols = cat.job_volumes(job)?;
    let prefix = a
        .path
        .as_ref()
        .map(|p| tapeloom_engine::normalize(p.as_os_str().as_bytes()));
    let mut entries = Vec::new();
    let mut count = 0u64;
    cat.for_each_file(job, prefix.as_deref(), |r| {
        count += 1;
        let volume = vols
            .iter()
            .find(|v| v.seq == r.start_seq)
            .map(|v| v.volume.barcode.as_str())
            .unwrap_or("?");
        let e = Entry {
            path: display_path(&r.path),
            kind: tapeloom_format::EntryType::from_u8(r.kind)
                .map(|k| k.name())
                .unwrap_or("?"),
            size: r.size,
            mode: r.mode,
            mtime: output::time(r.mtime_ns),
            mtime_ns: r.mtime_ns,
            volume: volume.to_string(),
            block: r.start_lbn,
            offset: r.start_off,
        };
        if ctx.human() {
            e.print();
        } else {
            entries.push(e);
        }
        Ok(())
    })?;
    if let (0, Some(p)) = (count, prefix) {
        let path = display_path(&p);
        return Err(tapeloom_engine::Error::Job(JobError::NoPath { job, path }).into());
    }
    Ok(Listing {
        job_id: job,
        entries,
    })
}

impl Entry {
    fn print(&self) {
        outln!(
            "{:<8} {:o} {:>12} {} {}:{} {}",
            self.kind,
            self.mode,
            self.size,
            self.mtime,
            self.volume,
            self.block,
            self.path
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
