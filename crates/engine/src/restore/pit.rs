//! Point in time: a backup set's tree as it was at one of its jobs, and its restore.
//!
//! The tree is the catalog's (`Catalog::tree_at`): each path's latest row in the
//! job's chain of bases, deleted paths left out. Each file is placed from the job
//! that last wrote its data; a metadata-only row's entry is read from its own job
//! too and its metadata set over the file at the end, as hard links are made only
//! once the files they point to are placed (a link's target may come from a later
//! job than the link). The runs of all the jobs are read as [`super::merge`] plans
//! them: each cartridge mounted once and read forward.

use crate::error::{JobError, Result};
use crate::home::Home;
use crate::media::reader::SharedLibrary;
use crate::restore::chains::Chain;
use crate::restore::merge::{self, Group, Placed};
use crate::restore::{
    chains, finish, plan_chains, read_all, which_drives, JobCtx, Read, Reading, RestoreOptions,
    RestoreReport, Shared, Source,
};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tapeloom_catalog::{Catalog, Extent, FileRow, Job, JobState, Tree};
use tapeloom_format::EntryType;
use tapeloom_tree::decode::Streams;
use tapeloom_tree::restore::restorer::{Expected, Restorer, SetWant};
use tapeloom_tree::restore::NO_DATA;

/// The job of set `set` a point-in-time restore or listing stands at: the set's
/// last job that ended ok or partial and started at or before `at` (an RFC 3339
/// time), or the job `at` names by id; without `at`, the set's last such job.
pub fn set_job(cat: &Catalog, set: &str, at: Option<&str>) -> Result<Job> {
    let jobs = cat.set_jobs(set)?;
    if jobs.is_empty() {
        return Err(JobError::NoSet { set: set.into() }.into());
    }
    let ended = |j: &&Job| matches!(j.status, JobState::Ok | JobState::Partial);
    let no_job = || JobError::NoJobAt {
        set: set.into(),
        at: at.unwrap_or("now").into(),
    };
    let bad = || JobError::BadAt {
        set: set.into(),
        at: at.unwrap_or_default().into(),
    };
    let found = match at {
        None => jobs.iter().rev().find(ended),
        Some(a) => match a.parse::<i64>() {
            Ok(id) => Some(jobs.iter().find(|j| j.id == id).ok_or_else(bad)?).filter(ended),
            Err(_) => {
                let t = crate::clock::parse(a).map_err(|_| bad())?.as_nanos();
                jobs.iter().rev().find(|j| ended(j) && j.started_ns <= t)
            }
        },
    };
    Ok(found.ok_or_else(no_job)?.clone())
}

/// The set's tree at [`set_job`], limited to `paths` (and the targets of the hard
/// links under them) when any are given.
pub fn set_tree(
    cat: &Catalog,
    set: &str,
    at: Option<&str>,
    paths: &[Vec<u8>],
) -> Result<(Job, Tree)> {
    let job = set_job(cat, set, at)?;
    if paths.is_empty() {
        return Ok((job.clone(), cat.tree_at(job.id)?));
    }
    // Each path's part of the tree alone, read by path from the chain's jobs.
    let mut out = Tree::new();
    for p in paths {
        let p = super::normalize(p);
        let part = cat.tree_under(job.id, &p)?;
        if part.is_empty() {
            let path = crate::display_path(&p);
            return Err(JobError::NoPath { job: job.id, path }.into());
        }
        out.extend(part);
    }
    let targets: Vec<Vec<u8>> = (out.values())
        .filter(|f| f.row.kind == EntryType::HardLink as u8)
        .map(|f| f.row.link.clone())
        .filter(|t| !out.contains_key(t))
        .collect();
    for t in targets {
        if let Some(f) = cat.tree_under(job.id, &t)?.remove(&t) {
            out.entry(t).or_insert(f);
        }
    }
    Ok((job, out))
}

/// What a tree needs of each job: the rows to read, by job; what the restorer
/// takes from each; and files whose data no job of the chain holds.
pub(crate) struct TreePlan {
    pub rows: BTreeMap<i64, Vec<FileRow>>,
    pub want: SetWant,
    pub missing: Vec<Vec<u8>>,
}

impl TreePlan {
    /// What the catalog lists of the entries read from each job: the rows
    /// planned, by job and path.
    pub(crate) fn expected(&self) -> Expected {
        let of = |rows: &[FileRow]| {
            (rows
                .iter()
                .map(|r| (r.path.clone(), crate::restore::plan::expect_of(r))))
            .collect()
        };
        (self.rows.iter())
            .map(|(&job, rows)| (job, of(rows)))
            .collect()
    }
}

fn plan_tree(tree: &Tree) -> TreePlan {
    let mut plan = TreePlan {
        rows: BTreeMap::new(),
        want: SetWant::default(),
        missing: Vec::new(),
    };
    let mut add = |job: i64, row: &FileRow, meta: bool| {
        let to = if meta {
            &mut plan.want.meta
        } else {
            &mut plan.want.data
        };
        to.entry(job).or_default().insert(row.path.clone());
        plan.rows.entry(job).or_default().push(row.clone());
    };
    for (path, f) in tree {
        match (&f.data, f.row.meta_only) {
            (_, false) => add(f.job, &f.row, false),
            (Some((job, row)), true) => {
                add(*job, row, false);
                add(f.job, &f.row, true);
            }
            (None, true) => plan.missing.push(path.clone()),
        }
    }
    plan
}

/// The job set `set`'s tree stands at ([`set_job`]) and what its restore (of
/// `opts.paths`, when any) needs of each job: the catalog alone is read.
pub(crate) fn plan_set(
    cat: &Catalog,
    set: &str,
    at: Option<&str>,
    opts: &RestoreOptions,
) -> Result<(Job, TreePlan)> {
    let (job, tree) = set_tree(cat, set, at, &opts.paths)?;
    Ok((job, plan_tree(&tree)))
}

/// The jobs a restore of set `set` as it was at [`set_job`] (of `opts.paths`,
/// when any) reads data from, oldest first: the catalog alone is read.
pub fn set_jobs_read(
    cat: &Catalog,
    set: &str,
    at: Option<&str>,
    opts: &RestoreOptions,
) -> Result<Vec<i64>> {
    let (_, plan) = plan_set(cat, set, at, opts)?;
    Ok(plan.rows.keys().copied().collect())
}

/// Restores set `set` as it was at [`set_job`] under `opts.to` (`opts.paths`
/// limit it as for a one-job restore), reading every job its tree needs.
pub fn restore_set(
    home: &Home,
    set: &str,
    at: Option<&str>,
    opts: &RestoreOptions,
) -> Result<RestoreReport> {
    let t0 = Instant::now();
    let (job, plan) = plan_set(&home.catalog, set, at, opts)?;
    let mut restorer = Restorer::new(&opts.to, opts.overwrite, None)?;
    for p in &plan.missing {
        restorer.fail(p, NO_DATA.into());
    }
    read_plan(home, (job.id, plan), restorer, opts, t0)
}

/// Reads what `plan` wants of each job (a tree at job `at`) into `restorer`,
/// each cartridge once, and reports.
fn read_plan(
    home: &Home,
    (at, plan): (i64, TreePlan),
    mut restorer: Restorer,
    opts: &RestoreOptions,
    t0: Instant,
) -> Result<RestoreReport> {
    restorer.expected = plan.expected();
    let read = SetRead::plan(home, at, plan.rows, false)?;
    restorer.set = Some(plan.want);
    let rs = Mutex::new(restorer);
    let reads = read.run(home, opts, super::Out::Place(&rs), t0)?;
    let (mut report, _) = finish(rs, reads)?;
    read.fill(&mut report);
    report.seconds = t0.elapsed().as_secs_f64();
    Ok(report)
}

/// Restores chosen files of several jobs under `opts.to` in one reading: `files`
/// gives, for each job, the paths of its entries to restore (files, links and
/// such, each by its own path; a folder brings only itself). Each cartridge is
/// mounted once and its runs of all the jobs read in the order planned for it.
/// A path two jobs give would land in one place: the caller keeps them apart.
/// `opts.paths` is not used.
pub fn restore_files(
    home: &Home,
    files: &BTreeMap<i64, Vec<Vec<u8>>>,
    opts: &RestoreOptions,
) -> Result<RestoreReport> {
    let t0 = Instant::now();
    let cat = &home.catalog;
    let mut plan = TreePlan {
        rows: BTreeMap::new(),
        want: SetWant::default(),
        missing: Vec::new(),
    };
    let mut restorer = Restorer::new(&opts.to, opts.overwrite, None)?;
    for (&job, paths) in files {
        for p in paths {
            let p = super::normalize(p);
            match cat.file(job, &p)? {
                Some(row) => {
                    plan.want.data.entry(job).or_default().insert(p);
                    plan.rows.entry(job).or_default().push(row);
                }
                None => restorer.fail(&p, format!("job {job} has no entry of it")),
            }
        }
    }
    let Some(&at) = plan.rows.keys().next() else {
        let (mut report, _) = finish(Mutex::new(restorer), Vec::new())?;
        report.seconds = t0.elapsed().as_secs_f64();
        return Ok(report);
    };
    read_plan(home, (at, plan), restorer, opts, t0)
}

/// Restores chosen files of several jobs under `opts.to`, one after another in
/// the order given (job and path of each), each read on its own as a recall
/// served per request would read it: each by the drive that holds its
/// cartridge, else by the drive used least recently, with no plan. The report's
/// modeled time is the sum of the drives' (one request at a time). It is the
/// yardstick for [`restore_files`]'s planned reading.
pub fn restore_files_in_order(
    home: &Home,
    files: &[(i64, Vec<u8>)],
    opts: &RestoreOptions,
) -> Result<RestoreReport> {
    let t0 = Instant::now();
    let cat = &home.catalog;
    let mut restorer = Restorer::new(&opts.to, opts.overwrite, None)?;
    let mut want = SetWant::default();
    let mut rows: BTreeMap<i64, Vec<FileRow>> = BTreeMap::new();
    let mut asked = Vec::new();
    for (job, p) in files {
        let p = super::normalize(p);
        match cat.file(*job, &p)? {
            Some(row) => {
                want.data.entry(*job).or_default().insert(p);
                rows.entry(*job).or_default().push(row.clone());
                asked.push((*job, row));
            }
            None => restorer.fail(&p, format!("job {job} has no entry of it")),
        }
    }
    let mut jobs = Vec::new();
    let mut layout = HashMap::new();
    let mut block_size = 0;
    for (&id, rows) in &rows {
        let l = job_ctx(home, id, rows.clone(), false)?;
        jobs.push(l.ctx);
        layout.insert(id, (l.chains, l.extents));
        block_size = block_size.max(l.block_size);
    }
    let mut requests = Vec::new();
    for (job, row) in asked {
        let Some((chains, extents)) = layout.get(&job) else {
            continue;
        };
        let path = row.path.clone();
        let (work, _) = plan_chains(chains, vec![row], false, extents);
        let steps = merge::split(job, &work).into_iter().map(|p| p.2).collect();
        requests.push((job, path, steps));
    }
    restorer.expected = (TreePlan {
        rows,
        want: SetWant::default(),
        missing: Vec::new(),
    })
    .expected();
    restorer.set = Some(want);
    let rs = Mutex::new(restorer);
    let reads = match jobs.is_empty() {
        true => Vec::new(),
        false => {
            let mut lib = home.library()?;
            let mut drives = which_drives(opts, lib.inventory()?.drives.len())?;
            if jobs.iter().any(|j| j.sources.first.is_some()) {
                // A copy's cartridges may hold what several drives would read.
                drives.truncate(1);
            }
            let lib: SharedLibrary = Arc::new(Mutex::new(lib));
            let (names, skip) = (HashMap::new(), HashSet::new());
            let stop = AtomicBool::new(false);
            let shared = Shared {
                jobs: &jobs,
                block_size,
                opts,
                names: &names,
                skip: &skip,
                out: super::Out::Place(&rs),
                lib: &lib,
                stop: &stop,
                t0,
            };
            let cats = (drives.iter())
                .map(|_| home.connect())
                .collect::<Result<Vec<_>>>()?;
            super::cartridge::read_in_order(&shared, &drives, &requests, &cats)?
        }
    };
    let (mut report, _) = finish(rs, reads)?;
    // One request at a time: the drives' times add up.
    let each = report.drives.iter().filter_map(|d| d.modeled_seconds);
    report.modeled_seconds = each.reduce(|a, b| a + b);
    report.planned_seconds = None;
    report.jobs = jobs.iter().map(|j| j.id).collect();
    report.source = Source::Tape;
    report.seconds = t0.elapsed().as_secs_f64();
    Ok(report)
}

/// A job as a restore of some of its rows reads it: its context, its chains,
/// its extent map, its block size, and the runs planned for the rows.
struct JobLayout {
    ctx: JobCtx,
    chains: Vec<Chain>,
    extents: Vec<Extent>,
    block_size: usize,
    work: Vec<(Chain, Vec<super::Run>)>,
}

/// A job's layout for a restore of `rows` of it, planned once. `sealed`: its
/// key is not looked up (its blocks are handed on as stored).
fn job_ctx(home: &Home, id: i64, rows: Vec<FileRow>, sealed: bool) -> Result<JobLayout> {
    let cat = &home.catalog;
    let job = cat.job(id)?.ok_or(JobError::NoJob(id))?;
    let key = match sealed {
        true => None,
        false => crate::crypt::for_job(&home.keys, &job)?.map(|c| c.data),
    };
    let vols = cat.job_volumes(id)?;
    if vols.is_empty() {
        return Err(JobError::NothingOnTape(id).into());
    }
    let extents = cat.extents(id)?;
    let chains = chains::chains(&vols, &extents);
    let (work, hints) = plan_chains(&chains, rows, false, &extents);
    // The copy read, and those a bad block is read from, as for one job's restore.
    let inv = home.library()?.inventory()?;
    let sources = crate::copy::sources(cat, &inv, (id, &vols), None)?;
    let ctx = JobCtx {
        id,
        tag: job.tag,
        vols,
        key,
        hints,
        sources,
        alt_drive: None,
    };
    Ok(JobLayout {
        ctx,
        chains,
        extents,
        block_size: job.block_size as usize,
        work,
    })
}

/// What a job gives a set's restore: how to read it, its runs cut into steps, and
/// its block size. `sealed`: its key is not looked up (its blocks are handed on as
/// stored).
fn job_steps(
    home: &Home,
    id: i64,
    rows: Vec<FileRow>,
    sealed: bool,
) -> Result<(JobCtx, Vec<Placed>, usize)> {
    let l = job_ctx(home, id, rows, sealed)?;
    Ok((l.ctx, merge::split(id, &l.work), l.block_size))
}

/// The reading of a set's restore: its jobs and the groups of cartridges.
pub(crate) struct SetRead {
    jobs: Vec<JobCtx>,
    block_size: usize,
    groups: Vec<Group>,
    /// The job the tree is at: the restore's samples and marks are kept with it.
    at: i64,
}

impl SetRead {
    /// Plans the reading of `rows` (by job) for a tree at job `at`, each
    /// cartridge once ([`merge`]); `sealed`: for blocks handed on as stored.
    pub(crate) fn plan(
        home: &Home,
        at: i64,
        rows: BTreeMap<i64, Vec<FileRow>>,
        sealed: bool,
    ) -> Result<Self> {
        let mut jobs = Vec::new();
        let mut placed = Vec::new();
        let mut block_size = 0;
        for (id, rows) in rows {
            let (ctx, steps, size) = job_steps(home, id, rows, sealed)?;
            jobs.push(ctx);
            placed.extend(steps);
            block_size = block_size.max(size);
        }
        Ok(SetRead {
            jobs,
            block_size,
            groups: merge::group(placed),
            at,
        })
    }

    /// Fills in what the plan says of the restore: its chains, jobs, blocks
    /// planned and source.
    pub(crate) fn fill(&self, report: &mut RestoreReport) {
        report.chains = self.groups.len();
        report.job = self.at;
        report.jobs = self.jobs.iter().map(|j| j.id).collect();
        report.blocks_planned = self.groups.iter().map(Group::blocks).sum();
        report.source = Source::Tape;
    }

    /// Gives the groups to drives as a one-job restore gives chains, reads them at
    /// once into `out`, and stores the drives' samples, marks and health. Nothing
    /// is read when there is nothing to read.
    pub(crate) fn run(
        &self,
        home: &Home,
        opts: &RestoreOptions,
        out: super::Out<'_>,
        t0: Instant,
    ) -> Result<Vec<crate::restore::DriveRead>> {
        if self.groups.is_empty() {
            return Ok(Vec::new());
        }
        let cat = &home.catalog;
        let mut lib = home.library()?;
        let inv = lib.inventory()?;
        let mut drives = which_drives(opts, inv.drives.len())?;
        if self.jobs.iter().any(|j| j.sources.first.is_some()) {
            // A copy's cartridges may hold what several drives would read.
            drives.truncate(1);
        }
        let held: HashMap<usize, String> = (inv.drives.iter())
            .filter_map(|d| d.loaded.clone().map(|b| (d.index, b)))
            .collect();
        let todo: Vec<_> = self.groups.iter().map(Group::chain).collect();
        let plan = chains::assign(&todo, &drives, &held);
        let lib: SharedLibrary = Arc::new(Mutex::new(lib));
        let (names, skip) = (HashMap::new(), HashSet::new());
        let stop = AtomicBool::new(false);
        let shared = Shared {
            jobs: &self.jobs,
            block_size: self.block_size,
            opts,
            names: &names,
            skip: &skip,
            out,
            lib: &lib,
            stop: &stop,
            t0,
        };
        let mut tasks = Vec::new();
        for (drive, list) in plan {
            let mine: Vec<&Group> = list.iter().map(|&i| &self.groups[i]).collect();
            tasks.push((drive, mine, home.connect()?));
        }
        let (mut reads, samples, marked) = read_all(&shared, tasks, read_groups)?;
        // The cartridges of the copies passed over before the read, said first.
        if let Some(first) = reads.first_mut() {
            let before = (self.jobs.iter()).flat_map(|j| j.sources.passed_over.iter().cloned());
            first.passed_over.splice(0..0, before);
        }
        // A home on a read-only file system keeps no figures of the read.
        if home.is_read_only() {
            return Ok(reads);
        }
        let op = opts.op();
        cat.clear_samples(self.at, op)?;
        cat.add_samples(self.at, op, &samples)?;
        cat.set_marks(self.at, op, &crate::sampler::marks(t0, &marked))?;
        let health = reads.iter().map(|d| (d.drive, d.health.as_slice()));
        crate::media::save_health(cat, self.at, op, health)?;
        Ok(reads)
    }
}

/// One drive's part of a set's restore: its groups' cartridges in order, on each
/// the steps of every job in the order planned for the cartridge, one job reader
/// switching between jobs.
fn read_groups(
    shared: &Shared<'_>,
    drive: usize,
    groups: &Vec<&Group>,
    cat: &Catalog,
) -> Result<Read> {
    let ctx = |id: i64| shared.jobs.iter().find(|j| j.id == id);
    let first = (groups.iter())
        .flat_map(|g| g.carts.iter().flat_map(|c| &c.steps))
        .next()
        .and_then(|s| ctx(s.job))
        .unwrap_or(&shared.jobs[0]);
    let mut reader = shared.reader(first, drive);
    let mut read = Reading::new(cat, shared, drive);
    let mut streams: HashMap<i64, Streams> = HashMap::new();
    let mut current = first.id;
    for cart in groups.iter().flat_map(|g| &g.carts) {
        let steps: Vec<&merge::Step> = cart.steps.iter().collect();
        let at = (&mut reader, &mut current, &mut streams);
        super::cartridge::read(shared, &mut read, at, &steps)?;
    }
    if let Some(rs) = shared.placing() {
        let mut rs = super::lock(rs)?;
        for (job, decoders) in streams.iter_mut() {
            (rs.job, rs.lane) = (*job, read.lane);
            decoders.finish(&mut *rs);
        }
        read.sample(&reader, &Streams::default(), Some(&rs.per_stream));
    }
    Ok(read.done(reader, groups.iter().map(|g| g.id).collect()))
}
