//! A set's point-in-time restore in two halves that may run on two machines, as
//! [`super::handoff`] splits a one-job restore: [`read_set_blocks`] does the
//! reading of [`super::restore_set`] (the same tree, plan and drives, each
//! cartridge once) and hands each block, as stored, to a [`SetBlockSink`] with
//! the job it is of, after a [`SetSelection`]: what the restore takes from each
//! job. [`crate::SetBlockRestore`] takes the selection and the blocks, checks each
//! against its job as a tape reader does, and places them with the restorer of
//! a local set restore: each file from the job that last wrote its data,
//! metadata-only changes and hard links once every file is placed.
//!
//! Encrypted jobs are read without their keys: their blocks are handed on
//! sealed, and the selection carries each one's `JobKey` record for the placing
//! side to open with its master key ([`crate::job_data_key`]).

use super::pit::{plan_set, SetRead, TreePlan};
use super::plan::Expect;
use super::{add_drives, Out, RestoreOptions, RestoreReport, SetJob, SetSelection};
use crate::error::{JobError, Result};
use crate::home::Home;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;
use tapeloom_catalog::Catalog;

/// Takes the blocks a set's restore reads, in the order the drives read them
/// (the blocks of several drives interleaved, each cartridge's in order).
pub trait SetBlockSink: Send {
    /// Before any block, and before any cartridge is mounted: what the restore
    /// takes from each job. An error here ends the restore with nothing read.
    fn selection(&mut self, selection: &SetSelection) -> Result<()>;
    /// One block of job `job` as stored: header and payload, still compressed
    /// (and sealed) as written.
    fn block(&mut self, job: i64, block: &[u8]) -> Result<()>;
    /// Entries of job `job` held by a block that could not be read, and why.
    fn bad(&mut self, job: i64, paths: &[Vec<u8>], why: &str) -> Result<()>;
}

/// Reads what [`super::restore_set`] of set `set` at `at` with `opts` reads
/// (`opts.to` unused) and hands it to `sink`. Returns the reading's figures:
/// blocks, mounts, locates, chains, drives, the jobs read and the job the tree
/// is at; nothing is placed. No key is needed: encrypted blocks go on sealed.
pub fn read_set_blocks(
    home: &Home,
    set: &str,
    at: Option<&str>,
    opts: &RestoreOptions,
    sink: &mut dyn SetBlockSink,
) -> Result<RestoreReport> {
    let t0 = Instant::now();
    let cat = &home.catalog;
    let (job, plan) = plan_set(cat, set, at, opts)?;
    sink.selection(&selection(cat, job.id, &plan)?)?;
    let read = SetRead::plan(home, job.id, plan.rows, true)?;
    let sink = Mutex::new(sink);
    let reads = read.run(home, opts, Out::Hand(&sink), t0)?;
    let mut report = RestoreReport::default();
    add_drives(&mut report, reads);
    read.fill(&mut report);
    report.seconds = t0.elapsed().as_secs_f64();
    Ok(report)
}

/// The selection of `plan`, a tree at job `at`: its jobs in id order, each
/// one's entries sorted.
fn selection(cat: &Catalog, at: i64, plan: &TreePlan) -> Result<SetSelection> {
    let sorted = |m: &HashMap<i64, std::collections::HashSet<Vec<u8>>>, id: i64| {
        let mut v: Vec<Vec<u8>> = m.get(&id).into_iter().flatten().cloned().collect();
        v.sort();
        v
    };
    let mut jobs = Vec::new();
    for (&id, rows) in plan.rows.iter() {
        let job = cat.job(id)?.ok_or(JobError::NoJob(id))?;
        let mut rows: Vec<(Vec<u8>, Expect)> = (rows.iter())
            .map(|r| (r.path.clone(), crate::restore::plan::expect_of(r)))
            .collect();
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        jobs.push(SetJob {
            id,
            tag: job.tag,
            block_size: job.block_size,
            key: job.key.map(|(_, record)| record),
            data: sorted(&plan.want.data, id),
            meta: sorted(&plan.want.meta, id),
            rows,
        });
    }
    let mut missing = plan.missing.clone();
    missing.sort();
    Ok(SetSelection { at, jobs, missing })
}
