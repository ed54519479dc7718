//! The reading of one cartridge: its steps (of one job or of several) gathered
//! into units that must be read whole, the units put in the order [`super::order`]
//! plans from the mounted drive's model, and each read in turn. A one-job restore
//! of chosen paths and a set's restore both read their cartridges here, and so do
//! the recalls of hierarchical storage, which restore many files of many jobs at
//! once.

use super::merge::Step;
use super::order::{self, Unit};
use super::{lock, DriveRead, Reading, Shared};
use crate::error::{JobError, Result};
use crate::media::reader::JobReader;
use std::collections::{HashMap, HashSet};
use tapeloom_catalog::Catalog;
use tapeloom_tree::decode::Streams;
use tapeloom_tree::restore::restorer::SetWant;

/// Where the drive stands between cartridges: its reader, the job it reads now,
/// and each job's decoders.
pub(crate) type At<'r> = (
    &'r mut JobReader,
    &'r mut i64,
    &'r mut HashMap<i64, Streams>,
);

/// Reads `steps`, all on one cartridge and in block order, in the order planned
/// for them (block order when the restore does not plan or the drive has no
/// model).
pub(crate) fn read(
    shared: &Shared<'_>,
    read: &mut Reading<'_, '_>,
    (reader, current, decoders): At<'_>,
    steps: &[&Step],
) -> Result<()> {
    let Some(first) = steps.first() else {
        return Ok(());
    };
    let units = units(steps);
    let mut order: Vec<usize> = (0..units.len()).collect();
    let plans = shared.plans();
    if plans {
        // Mounted first: the plan is made from the drive's model of this tape.
        switch(shared, reader, current, first)?;
        reader.follow(vec![first.seq]);
        if reader.mounted().is_none_or(|(seq, _)| seq != first.seq) {
            reader.seek(first.seq, 1)?;
        }
        let plain: Vec<Unit> = units.iter().map(|(u, _)| u.clone()).collect();
        let plain = costed(reader, plain, &units, steps);
        let at = reader.mounted().map_or(1, |(_, lbn)| lbn);
        let travel = |a: u64, b: u64| reader.travel_between(a, b);
        if let Some(p) = order::plan(at, &plain, &travel) {
            read.planned = Some(read.planned.unwrap_or(0.0) + p.seconds);
            read.reordered += u64::from(p.reordered);
            order = p.order;
        } else if let Some(o) = drive_order(reader, &plain) {
            read.reordered += u64::from(o != order);
            order = o;
        }
    }
    for i in order {
        for (k, &s) in units[i].1.iter().enumerate() {
            let step = steps[s];
            switch(shared, reader, current, step)?;
            reader.follow(vec![step.seq]);
            let job = job(shared, step.job)?;
            let dec = decoders.entry(job.id).or_default();
            if plans && k == 0 && !step.carried {
                if let Some(rs) = shared.placing() {
                    let mut rs = lock(rs)?;
                    (rs.job, rs.lane) = (job.id, read.lane);
                    dec.jump(&mut *rs);
                }
            }
            read.run(reader, job, &step.run, dec)?;
        }
    }
    Ok(())
}

/// The mounted drive's own order of `units` (a drive without a timing model
/// that has a Recommended Access Order, as LTO-9 and later do), kept but for
/// each job's first and last unit ([`order::follow`]); `None` when the drive
/// has none.
fn drive_order(reader: &mut JobReader, units: &[Unit]) -> Option<Vec<usize>> {
    if units.len() < 2 {
        return None;
    }
    let extents: Vec<(u64, u64)> = (units.iter())
        .map(|u| match u.end {
            // Read to the end of the volume: its last block is not known here.
            u64::MAX => (u.first, u.first),
            end => (u.first, end.saturating_sub(1).max(u.first)),
        })
        .collect();
    let drive = reader.recommended_order(&extents)?;
    let order = order::follow(units, &drive)?;
    tracing::info!(
        units = units.len(),
        "reading the cartridge in the drive's recommended access order"
    );
    Some(order)
}

/// Reads `requests` (each a file: its job, its path and the steps that hold it)
/// one after another in the order given, each step by the drive that holds its cartridge, else by the drive
/// that read least recently (one catalog connection in `cats` for each of
/// `drives`): how a reading served per request, in the order asked, goes. It is
/// the yardstick the planned reading is measured against.
pub(crate) fn read_in_order(
    shared: &Shared<'_>,
    drives: &[usize],
    requests: &[(i64, Vec<u8>, Vec<Step>)],
    cats: &[Catalog],
) -> Result<Vec<DriveRead>> {
    let Some(first) = shared.jobs.first() else {
        return Ok(Vec::new());
    };
    let mut state: Vec<(JobReader, Reading<'_, '_>, i64, usize)> = (drives.iter().zip(cats))
        .map(|(&d, cat)| {
            let mut read = Reading::new(cat, shared, d);
            read.lane = LANE;
            (shared.reader(first, d), read, first.id, 0)
        })
        .collect();
    let mut decoders: HashMap<i64, Streams> = HashMap::new();
    for (n, (file_job, path, request)) in requests.iter().enumerate() {
        // Only this file is placed now: a file whose entry begins in its last
        // block is read whole by its own request.
        if let Some(rs) = shared.placing() {
            let data = HashMap::from([(*file_job, HashSet::from([path.clone()]))]);
            lock(rs)?.set = Some(SetWant {
                data,
                meta: HashMap::new(),
            });
        }
        for (k, step) in request.iter().enumerate() {
            let job = job(shared, step.job)?;
            let vol = (job.vols.iter())
                .find(|v| v.seq == step.seq)
                .map(|v| v.volume.id);
            let holder = (state.iter()).position(|s| vol.is_some() && s.0.mounted_volume() == vol);
            let least = (state.iter().enumerate())
                .min_by_key(|(_, s)| s.3)
                .map_or(0, |(i, _)| i);
            let Some((reader, read, current, used)) = state.get_mut(holder.unwrap_or(least)) else {
                return Ok(Vec::new());
            };
            *used = n + 1;
            switch(shared, reader, current, step)?;
            reader.follow(vec![step.seq]);
            let dec = decoders.entry(job.id).or_default();
            if k == 0 {
                if let Some(rs) = shared.placing() {
                    let mut rs = lock(rs)?;
                    (rs.job, rs.lane) = (job.id, LANE);
                    dec.jump(&mut *rs);
                }
            }
            read.run(reader, job, &step.run, dec)?;
        }
    }
    if let Some(rs) = shared.placing() {
        let mut rs = lock(rs)?;
        for (job, dec) in decoders.iter_mut() {
            (rs.job, rs.lane) = (*job, LANE);
            dec.finish(&mut *rs);
        }
    }
    let done = state.into_iter();
    Ok(done
        .map(|(reader, read, _, _)| read.done(reader, Vec::new()).0)
        .collect())
}

/// The restorer's lane of a reading in the order asked: one, since the drives
/// take turns and share their decoders.
const LANE: usize = 0;

/// The job context of job `id`.
fn job<'s>(shared: &'s Shared<'_>, id: i64) -> Result<&'s super::JobCtx> {
    (shared.jobs.iter())
        .find(|j| j.id == id)
        .ok_or_else(|| JobError::NoJob(id).into())
}

/// Has the reader read `step`'s job.
fn switch(
    shared: &Shared<'_>,
    reader: &mut JobReader,
    current: &mut i64,
    step: &Step,
) -> Result<()> {
    if step.job != *current {
        let job = job(shared, step.job)?;
        reader.switch(job.vols.clone(), job.tag, job.key.clone())?;
        reader.set_copies(job.sources.first.clone(), job.sources.others.clone());
        *current = job.id;
    }
    Ok(())
}

/// The units of `steps`: each step, with the steps a wanted entry goes on into
/// joined to it; with the indices of their steps.
fn units(steps: &[&Step]) -> Vec<(Unit, Vec<usize>)> {
    let mut out: Vec<(Unit, Vec<usize>)> = Vec::new();
    for (i, s) in steps.iter().enumerate() {
        let end = s.run.end.1.saturating_add(1);
        if s.joined {
            if let Some((u, members)) = out.iter_mut().rev().find(|(u, _)| u.job == s.job) {
                u.end = u.end.max(end);
                u.carries |= s.carries;
                members.push(i);
                continue;
            }
        }
        let unit = Unit {
            job: s.job,
            first: s.run.start.1,
            end,
            cost: 0.0,
            carried: s.carried,
            carries: s.carries,
        };
        out.push((unit, vec![i]));
    }
    out
}

/// `plain` with each unit's cost of reading: its steps' blocks, and the moves
/// between them, as the mounted drive's model has them.
fn costed(
    reader: &JobReader,
    mut plain: Vec<Unit>,
    units: &[(Unit, Vec<usize>)],
    steps: &[&Step],
) -> Vec<Unit> {
    for (u, (_, members)) in plain.iter_mut().zip(units) {
        let mut cost = 0.0;
        let mut pos = None;
        for &m in members {
            let run = steps[m].run;
            if run.end.1 == u64::MAX {
                // Read to the end of the volume: its length is not known here.
                continue;
            }
            if let Some(p) = pos {
                let t = reader.travel_between(p, run.start.1);
                cost += t.map_or(0.0, |t| t.read.min(t.locate));
            }
            let r = reader.travel_between(run.start.1, run.end.1 + 1);
            cost += r.map_or(0.0, |t| t.read);
            pos = Some(run.end.1 + 1);
        }
        u.cost = cost;
    }
    plain
}
