//! Cutting what failed jobs left at the end of cartridges (`tapeloom library trim`).
//!
//! A job that failed (a full file system under a virtual library, a killed process
//! whose job nobody recovered) leaves its blocks on the cartridge, and the next job
//! appends after them: on a virtual cartridge they keep filling the disk. Trimming
//! ends the cartridge's data where the first of its trailing failed jobs began, as a
//! tape drive ends it with a filemark written there, and forgets those jobs. It
//! touches only jobs the catalog holds as `failed` that no stage can finish (`stage
//! resume`), and only when every block after the cut is theirs: a job recovered
//! first with `catalog recover` is `partial` and is kept whole.

use crate::error::{MediaError, Result};
use crate::home::Home;
use crate::media::policy::mount;
use crate::media::scan::{Scan, Scanned};
use std::collections::{BTreeMap, BTreeSet};
use tapeloom_catalog::{ChunkFilter, ChunkState, JobState, Volume, VolumeState};
use tapeloom_device::ReadOutcome;
use tapeloom_format::MAX_BLOCK_SIZE;

/// What was (or, in a dry run, would be) cut from one cartridge.
#[derive(Debug, Clone)]
pub struct Trimmed {
    /// The cartridge.
    pub barcode: String,
    /// The first block cut: the cartridge's data now ends before it (with a
    /// filemark).
    pub from_block: u64,
    /// Bytes of the cartridge's file freed (a virtual cartridge), where known.
    pub bytes_freed: Option<u64>,
    /// The failed jobs whose data was cut; they are forgotten.
    pub jobs: Vec<i64>,
}

/// Cuts the failed jobs' data from the end of `barcodes` (every cartridge of the
/// catalog when empty). With `dry_run`, only says what it would cut.
pub fn trim(home: &mut Home, barcodes: &[String], dry_run: bool) -> Result<Vec<Trimmed>> {
    let cat = &home.catalog;
    let mut on_volume: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for (volume, job) in cat.volume_jobs()? {
        on_volume.entry(volume).or_default().push(job);
    }
    let mut plans = Vec::new();
    for v in cat.volumes()? {
        if !barcodes.is_empty() && !barcodes.contains(&v.barcode) {
            continue;
        }
        if let Some(p) = plan(home, &v, on_volume.get(&v.id).map_or(&[][..], |j| j))? {
            plans.push((v, p));
        }
    }
    let mut out = Vec::new();
    for (v, (from, jobs)) in plans {
        let bytes_freed = match dry_run {
            true => None,
            false => cut(home, &v, from, &jobs)?,
        };
        if !dry_run {
            home.catalog
                .forget_jobs(&jobs.iter().map(|j| j.0).collect::<Vec<_>>())?;
            if v.status == VolumeState::Full {
                home.catalog.set_volume_status(v.id, VolumeState::Append)?;
            }
        }
        out.push(Trimmed {
            barcode: v.barcode.clone(),
            from_block: from,
            bytes_freed,
            jobs: jobs.iter().map(|j| j.0).collect(),
        });
    }
    Ok(out)
}

/// What to cut from a volume: the first block, and the failed jobs (id, tag) whose
/// segments end its data.
type Cut = (u64, Vec<(i64, u64)>);

/// What to cut from volume `v`, which holds segments of `jobs`: none when its last
/// job did not fail.
fn plan(home: &Home, v: &Volume, jobs: &[i64]) -> Result<Option<Cut>> {
    let cat = &home.catalog;
    // Every segment on the volume: (first block, job).
    let mut segments = Vec::new();
    for &j in jobs {
        for s in cat.job_volumes(j)? {
            if s.volume.id == v.id {
                segments.push((s.first_lbn, j));
            }
        }
    }
    segments.sort();
    let mut failed = Vec::new();
    let mut from = None;
    for &(first, j) in segments.iter().rev() {
        let Some(job) = cat.job(j)? else { break };
        if job.status != JobState::Failed || resumable(home, j)? {
            break;
        }
        if !failed.iter().any(|&(id, _)| id == j) {
            failed.push((j, job.tag));
        }
        from = Some(first);
    }
    // A failed job's segments before the cut (on this volume or others) stay on
    // tape, unread: it is forgotten all the same, as nothing can restore it.
    Ok(from.filter(|_| !failed.is_empty()).map(|f| (f, failed)))
}

/// Whether a stage still holds a failed job's data for `stage resume` to finish.
fn resumable(home: &Home, job: i64) -> Result<bool> {
    let staged = home.catalog.staged_chunks(&ChunkFilter {
        job: Some(job),
        state: Some(ChunkState::Spooled),
        ..Default::default()
    })?;
    Ok(!staged.is_empty())
}

/// Ends volume `v`'s data before block `from` after checking that every block from
/// there on belongs to one of `jobs`; returns the bytes its file shrank by.
fn cut(home: &Home, v: &Volume, from: u64, jobs: &[(i64, u64)]) -> Result<Option<u64>> {
    let mut lib = home.library()?;
    let before = lib.cartridge_bytes(&v.barcode);
    let (_, mut drive) = mount(&mut lib, &v.barcode, None)?;
    let tags: BTreeSet<u64> = jobs.iter().map(|j| j.1).collect();
    let mut buf = vec![0u8; MAX_BLOCK_SIZE];
    match drive.locate(from) {
        Ok(()) => {}
        // The failed jobs wrote nothing that stayed: nothing to cut.
        Err(tapeloom_device::DeviceError::BeyondEndOfData { .. }) => {
            drive.unload()?;
            return Ok(Some(0));
        }
        Err(e) => return Err(e.into()),
    }
    let mut scan = Scan {
        lbn: from,
        uuid: v.uuid,
    };
    loop {
        match scan.next(&mut *drive, &mut buf)? {
            Scanned::Block { header, lbn, .. } if !tags.contains(&header.job_tag) => {
                drive.unload()?;
                let barcode = v.barcode.clone();
                return Err(MediaError::TrimOther {
                    barcode,
                    block: lbn,
                }
                .into());
            }
            // A damaged block (a write the failure cut short) holds nothing to keep.
            Scanned::Block { .. } | Scanned::Bad | Scanned::Filemark => {}
            Scanned::End => break,
        }
    }
    // The filemark that closed the segment before, written again where it was, ends
    // the data; after a segment that had none, a filemark at the cut does.
    let at = match from.checked_sub(1) {
        Some(p) => {
            drive.locate(p)?;
            match drive.read_block(&mut buf)? {
                ReadOutcome::Filemark => p,
                _ => from,
            }
        }
        None => from,
    };
    drive.locate(at)?;
    drive.write_filemarks(1, false)?;
    drive.unload()?;
    drop(drive);
    let after = lib.cartridge_bytes(&v.barcode);
    Ok(before.zip(after).map(|(b, a)| b.saturating_sub(a)))
}
