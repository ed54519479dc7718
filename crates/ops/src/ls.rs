//! A job's entries under a path, or a backup set's tree at one of its jobs, as
//! the document `tapeloom ls` prints and `GET /api/jobs/ID/files` and
//! `GET /api/sets/NAME/files` answer ([`tapeloom_proto::ls::Listing`]), each
//! entry with where its data starts in every copy.

use crate::Catalogued;
use std::collections::HashMap;
use tapeloom_catalog::{Catalog, FileRow, JobVolume};
use tapeloom_engine::{display_path, JobError};
use tapeloom_proto::fmt::time;
use tapeloom_proto::ls::{CopyPlace, Entry, Listing};

/// The whole further copies of job `job`: each one's number and segments, and
/// the barcodes of the cartridges they are on.
type Copies = (
    Vec<(u32, Vec<tapeloom_catalog::CopySegment>)>,
    HashMap<i64, String>,
);

fn copies_of(cat: &Catalog, job: i64) -> tapeloom_catalog::Result<Copies> {
    let mut out = Vec::new();
    for c in cat.copies(job)? {
        if c.state == tapeloom_catalog::CopyState::Ok {
            out.push((c.copy_no, cat.copy_segments(job, c.copy_no)?));
        }
    }
    let barcodes = match out.is_empty() {
        true => HashMap::new(),
        false => (cat.volumes()?.into_iter())
            .map(|v| (v.id, v.barcode))
            .collect(),
    };
    Ok((out, barcodes))
}

/// A job's further copies, and the segments of the copy it was moved to when it
/// was (`migrate`, `repack`): its entries are where that copy holds them.
type Placed = (Copies, Option<Vec<tapeloom_catalog::CopySegment>>);

fn placed(cat: &Catalog, job: i64) -> tapeloom_catalog::Result<Placed> {
    let ((mut copies, barcodes), moved) = (copies_of(cat, job)?, cat.moved_to(job)?);
    let own = (copies.iter().position(|(n, _)| Some(*n) == moved)).map(|i| copies.remove(i).1);
    Ok(((copies, barcodes), own))
}

/// Entry `e` of a job moved to the copy of `own`: where that copy holds it.
fn place_moved(
    e: &mut Entry,
    r: &FileRow,
    (own, barcodes): (&[tapeloom_catalog::CopySegment], &HashMap<i64, String>),
) {
    if let Some((volume_id, block)) = tapeloom_catalog::copy_position(own, r.start_seq, r.start_lbn)
    {
        e.volume = barcodes.get(&volume_id).cloned().unwrap_or_default();
        e.block = block;
    }
}

/// Hands each entry of job `job` under `path` (all when none) to `each`; refuses a
/// job or a path the catalog does not have.
pub fn list_job(
    at: &impl Catalogued,
    job: i64,
    path: Option<&[u8]>,
    each: &mut dyn FnMut(Entry),
) -> tapeloom_engine::Result<()> {
    let cat = at.ops_catalog();
    cat.job(job)?
        .ok_or(tapeloom_engine::Error::Job(JobError::NoJob(job)))?;
    let vols = cat.job_volumes(job)?;
    let prefix = path.map(tapeloom_engine::normalize);
    let ((copies, barcodes), own) = placed(cat, job)?;
    let mut count = 0u64;
    cat.for_each_file(job, prefix.as_deref(), |r| {
        count += 1;
        let mut e = entry(&r, &vols);
        if let Some(own) = &own {
            place_moved(&mut e, &r, (own, &barcodes));
        }
        for (copy_no, segs) in &copies {
            let at = tapeloom_catalog::copy_position(segs, r.start_seq, r.start_lbn);
            if let Some((volume_id, block)) = at {
                e.copies.push(CopyPlace {
                    copy_no: *copy_no,
                    volume: barcodes.get(&volume_id).cloned().unwrap_or_default(),
                    block,
                });
            }
        }
        each(e);
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
    at: &impl Catalogued,
    job: i64,
    path: Option<&[u8]>,
) -> tapeloom_engine::Result<Listing> {
    let mut entries = Vec::new();
    list_job(at, job, path, &mut |e| entries.push(e))?;
    Ok(Listing {
        job_id: job,
        set: None,
        entries,
    })
}

/// The listing of set `set` at `at` under `path`: each entry handed to `each`,
/// kept when it says so. `visible` is asked of every job whose rows the tree
/// holds; a tree with a row of a job it refuses is [`JobError::NoJob`] of the
/// set's job, as for a set that does not exist.
pub fn set_listing(
    from: &impl Catalogued,
    (set, at, path): (&str, Option<&str>, Option<&[u8]>),
    visible: impl Fn(&tapeloom_catalog::Job) -> bool,
    mut each: impl FnMut(&Entry) -> bool,
) -> Result<Listing, tapeloom_engine::Error> {
    let cat = from.ops_catalog();
    let paths: Vec<Vec<u8>> = path.iter().map(|p| p.to_vec()).collect();
    let (job, tree) = tapeloom_engine::set_tree(cat, set, at, &paths)?;
    let mut vols: HashMap<i64, (Vec<JobVolume>, Placed)> = HashMap::new();
    let mut entries = Vec::new();
    for f in tree.values() {
        let (v, ((_, barcodes), own)) = match vols.entry(f.job) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                let shown = cat.job(f.job)?.is_some_and(|j| visible(&j));
                if !shown {
                    return Err(JobError::NoJob(job.id).into());
                }
                e.insert((cat.job_volumes(f.job)?, placed(cat, f.job)?))
            }
        };
        let mut e = entry(&f.row, v);
        if let Some(own) = own {
            place_moved(&mut e, &f.row, (own, barcodes));
        }
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

/// The entry of row `r` of a job whose volumes are `vols`.
pub fn entry(r: &FileRow, vols: &[JobVolume]) -> Entry {
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
        mtime: time(r.mtime_ns),
        mtime_ns: r.mtime_ns,
        volume: volume.to_string(),
        block: r.start_lbn,
        offset: r.start_off,
        copies: Vec::new(),
    }
}
