//! Moving jobs to other cartridges (docs/COPIES.md): `tapeloom migrate` moves
//! jobs to another pool (a new generation of cartridges, say), and `tapeloom
//! repack` moves a cartridge's live jobs to other cartridges of its pool so that
//! the cartridge can be written again.
//!
//! A move is a copy ([`crate::copy_job`]) that stays `writing` (read by no
//! restore) until it has been read back whole; then one catalog transaction
//! makes it the job's place and gives up the old one. So whenever a move stops
//! (an error, a kill), each job is read from exactly one place: the old one
//! before that transaction, the new one after it. A copy left `writing` by a move
//! that stopped is forgotten when the move runs again; its cartridges hold only
//! dead data. A cartridge left holding no job is marked expired, and a repack
//! labels it anew at once, so that what was on it is gone from the tapes too.

use crate::copy::{copy_job, CopyOptions, CopyReport};
use crate::error::{CopyError, Result};
use crate::home::Home;
use crate::media::policy::{place, read_label, Found};
use crate::media::reader::CopyMap;
use crate::media::writer::Tapes;
use tapeloom_catalog::{CopyState, VolumeState};

/// How to move jobs.
#[derive(Debug, Clone, Default)]
pub struct MoveOptions {
    /// The pool the jobs go to.
    pub to_pool: String,
    /// The drive that reads (else one is chosen).
    pub read_drive: Option<usize>,
    /// The drive that writes (else another than the reading one).
    pub write_drive: Option<usize>,
    /// Cartridges never written to.
    pub avoid: Vec<String>,
    /// Label a cartridge anew as soon as it holds no job (a repack).
    pub relabel: bool,
}

/// One job moved.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Moved {
    /// The job.
    pub job_id: i64,
    /// The copy that is now its place.
    pub copy_no: u32,
    /// The cartridges it was on.
    pub from: Vec<String>,
    /// The cartridges it is on now.
    pub to: Vec<String>,
    /// Blocks read back from the new place before the move.
    pub verified_blocks: u64,
    /// The cartridges the move left holding no job (marked expired).
    pub emptied: Vec<String>,
    /// The copy as written.
    pub copy: CopyReport,
}

/// Moves job `job_id` to cartridges of `opts.to_pool`: copies it, reads the
/// copy back, and makes the copy its place in one transaction. The cartridges it
/// leaves holding no job are marked expired (and, with `opts.relabel`, labelled
/// anew).
pub fn move_job(home: &Home, job_id: i64, opts: &MoveOptions) -> Result<Moved> {
    move_one(home, (job_id, Replaced::Place), opts)
}

/// What a move replaces: the job's place, or one of its further copies.
#[derive(Clone, Copy)]
enum Replaced {
    /// Its own cartridges, or the copy it was moved to before.
    Place,
    /// Further copy N (not its place).
    Copy(u32),
}

/// Writes a new copy of job `job_id` to `opts.to_pool`, reads it back, and makes
/// it stand in for `what` in one transaction; then empties out the cartridges
/// given up.
fn move_one(home: &Home, (job_id, what): (i64, Replaced), opts: &MoveOptions) -> Result<Moved> {
    let cat = &home.catalog;
    forget_unfinished(cat, job_id)?;
    let old_copy = match what {
        Replaced::Place => None,
        Replaced::Copy(n) => {
            let map = CopyMap::load_in(cat, job_id, n, &[CopyState::Ok])?;
            let barcodes: Vec<String> = (map.cartridges().iter())
                .map(|v| v.barcode.clone())
                .collect();
            Some((n, barcodes))
        }
    };
    let copy = copy_job(
        home,
        job_id,
        &CopyOptions {
            to_pool: opts.to_pool.clone(),
            read_drive: opts.read_drive,
            write_drive: opts.write_drive,
            queue_bytes: 0,
            moving: Some(opts.avoid.clone()),
        },
    )?;
    let copy_no = copy.copy_no;
    let report = checked(home, (job_id, copy_no), opts)?;
    let from = match old_copy {
        Some((old, barcodes)) => {
            cat.replace_copy(job_id, old, copy_no)?;
            barcodes
        }
        None => {
            let now = crate::clock::now()?.as_nanos();
            let old = cat.move_job(job_id, copy_no, now)?;
            let by_id: std::collections::HashMap<i64, tapeloom_catalog::Volume> =
                cat.volumes()?.into_iter().map(|v| (v.id, v)).collect();
            (old.iter())
                .filter_map(|id| by_id.get(id).map(|v| v.barcode.clone()))
                .collect()
        }
    };
    let emptied = empty_out(home, &from, opts)?;
    Ok(Moved {
        job_id,
        copy_no,
        from,
        to: copy.cartridges.clone(),
        verified_blocks: report.blocks_checked,
        emptied,
        copy,
    })
}

/// Forgets the copies of `job` a move left `writing` when it stopped.
fn forget_unfinished(cat: &tapeloom_catalog::Catalog, job: i64) -> Result<()> {
    for c in cat.copies(job)? {
        if c.state == CopyState::Writing {
            cat.forget_copy(job, c.copy_no)?;
        }
    }
    Ok(())
}

/// Of `barcodes`, those that hold no job any more: each is marked expired (and
/// with `opts.relabel` labelled anew). Returns them.
fn empty_out(home: &Home, barcodes: &[String], opts: &MoveOptions) -> Result<Vec<String>> {
    let cat = &home.catalog;
    let mut out = Vec::new();
    for b in barcodes {
        let Some(v) = cat.volume_by_barcode(b)? else {
            continue;
        };
        if !cat.places_on_volume(v.id)?.is_empty() {
            continue;
        }
        if v.status != VolumeState::Expired {
            cat.set_volume_status(v.id, VolumeState::Expired)?;
            let now = crate::clock::now()?.as_nanos();
            cat.add_volume_note(v.id, now, "its jobs moved to other cartridges")?;
        }
        if opts.relabel {
            label_anew(home, b, opts.write_drive.or(opts.read_drive))?;
        }
        out.push(b.clone());
    }
    Ok(out)
}

/// The catalog's cartridge `barcode`; [`CopyError::UnknownCartridge`] when it
/// has none.
fn known(cat: &tapeloom_catalog::Catalog, barcode: &str) -> Result<tapeloom_catalog::Volume> {
    cat.volume_by_barcode(barcode)?.ok_or_else(|| {
        CopyError::UnknownCartridge {
            barcode: barcode.to_string(),
        }
        .into()
    })
}

/// Labels the expired cartridge `barcode`, which holds no job, anew: a new
/// volume UUID and the next generation, and nothing after its label. Its old
/// blocks are gone from the tape, so no rebuild finds them again.
pub(crate) fn label_anew(home: &Home, barcode: &str, drive: Option<usize>) -> Result<()> {
    let cat = &home.catalog;
    let v = known(cat, barcode)?;
    if let Some(p) = cat.places_on_volume(v.id)?.first() {
        return Err(CopyError::StillHolds {
            barcode: barcode.to_string(),
            job: p.job_id,
        }
        .into());
    }
    let tapes = Tapes::new(home.library()?);
    let (_, mut d, moved) = tapes.with_library(|lib| place(lib, barcode, drive))?;
    if moved {
        d.load()?;
    }
    let generation = match read_label(&mut *d)? {
        Found::Label(l) if l.uuid == v.uuid => l.generation.max(v.generation),
        // A repack that stopped while it labelled the cartridge left it blank.
        Found::Blank => v.generation,
        // A label this function wrote before its process died, before the
        // catalog took it: the catalog takes it now.
        Found::Label(l)
            if l.barcode == barcode
                && l.pool == v.pool
                && l.generation == v.generation.saturating_add(1) =>
        {
            let mut cat = home.connect()?;
            cat.relabel_volume(&v, l.uuid, l.generation, l.created.as_nanos())?;
            return Ok(());
        }
        _ => {
            return Err(crate::error::MediaError::LabelMismatch {
                barcode: barcode.to_string(),
            }
            .into())
        }
    }
    .saturating_add(1);
    let label = tapeloom_format::VolumeLabel {
        uuid: crate::media::random_uuid(),
        barcode: barcode.to_string(),
        pool: v.pool.clone(),
        created: crate::clock::now()?,
        block_size: v.block_size,
        generation,
    };
    if let Err(why) = crate::media::writer::write_label(&mut d, &label)? {
        return Err(crate::error::MediaError::LabelUnwritable {
            barcode: barcode.to_string(),
            why,
        }
        .into());
    }
    d.write_filemarks(0, false)?;
    let mut cat = home.connect()?;
    cat.relabel_volume(&v, label.uuid, generation, label.created.as_nanos())?;
    Ok(())
}

/// Reads the new copy `copy_no` of `job_id` back; a copy that does not read back
/// whole is forgotten and the move refused.
fn checked(
    home: &Home,
    (job_id, copy_no): (i64, u32),
    opts: &MoveOptions,
) -> Result<crate::verify::VerifyReport> {
    let cat = &home.catalog;
    match crate::verify::read_back_new_copy(home, (job_id, copy_no), opts.write_drive) {
        Ok(r) if r.ok => Ok(r),
        Ok(r) => {
            cat.forget_copy(job_id, copy_no)?;
            Err(CopyError::MoveUnsound {
                job: job_id,
                copy_no,
                bad: r.bad_blocks.len() as u64,
                missing: r.files_missing + r.files_affected.len() as u64,
            }
            .into())
        }
        Err(e) => {
            cat.forget_copy(job_id, copy_no)?;
            Err(e)
        }
    }
}

/// A cartridge `repack --pool` may reclaim, and why.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Candidate {
    /// Its barcode.
    pub barcode: String,
    /// Bytes on it, as the library says.
    pub written_bytes: u64,
    /// Bytes of the blocks of the jobs and copies it holds that are kept (each
    /// block counted at the job's block size, so never less than they take).
    pub live_bytes: u64,
    /// The share of what is on it that belongs to jobs that expired, percent.
    pub expired_percent: f64,
}

/// The cartridge holds a label and nothing else (at most this many bytes).
const BLANK_BYTES: u64 = 64 << 10;

/// The cartridges of `pool` with at least its reclaim share of expired data
/// (`pool create --reclaim`), the most expired first. A cartridge the library
/// cannot say the size of (tgt's) is left out.
pub fn reclaim_candidates(home: &Home, pool: &str) -> Result<Vec<Candidate>> {
    let cat = &home.catalog;
    let threshold = cat
        .pool_reclaim(pool)?
        .ok_or_else(|| CopyError::NoReclaim {
            pool: pool.to_string(),
        })?;
    let lib = home.library()?;
    let now = crate::clock::now()?.as_nanos();
    let expired = crate::expire::expired_jobs(cat, now)?;
    let mut out = Vec::new();
    for v in cat.volumes()? {
        if v.pool != pool {
            continue;
        }
        let Some(written) = lib.cartridge_bytes(&v.barcode) else {
            continue;
        };
        let mut places = cat.places_on_volume(v.id)?;
        // A blank cartridge is nothing to reclaim; but an expired one that looks
        // blank was being labelled anew when a repack stopped: it is finished.
        if places.is_empty() && written <= BLANK_BYTES && v.status != VolumeState::Expired {
            continue;
        }
        places.retain(|p| !expired.contains(&p.job_id));
        let live = live_bytes(cat, &v, &places)?;
        let expired = match written {
            // Nothing on it, or only what a repack that stopped left: all of it.
            _ if places.is_empty() && v.status == VolumeState::Expired => 100.0,
            0 => 0.0,
            w => 100.0 * (1.0 - (live as f64 / w as f64).min(1.0)),
        };
        if expired >= threshold as f64 {
            out.push(Candidate {
                barcode: v.barcode.clone(),
                written_bytes: written,
                live_bytes: live,
                expired_percent: expired,
            });
        }
    }
    out.sort_by(|a, b| b.expired_percent.total_cmp(&a.expired_percent));
    Ok(out)
}

/// Bytes the kept jobs and copies of `places` take on `v`, each block at its
/// job's block size.
fn live_bytes(
    cat: &tapeloom_catalog::Catalog,
    v: &tapeloom_catalog::Volume,
    places: &[tapeloom_catalog::Place],
) -> Result<u64> {
    let mut total = 0u64;
    for p in places {
        let Some(job) = cat.job(p.job_id)? else {
            continue;
        };
        let bs = job.block_size as u64;
        let objects: u64 = match p.copy_no {
            1 => (cat.job_volumes(p.job_id)?.iter())
                .filter(|s| s.volume.id == v.id)
                .map(|s| {
                    s.last_lbn
                        .unwrap_or(s.first_lbn)
                        .saturating_sub(s.first_lbn)
                        + 1
                })
                .sum(),
            n => (cat.copy_segments(p.job_id, n)?.iter())
                .filter(|s| s.volume_id == v.id)
                .map(|s| s.objects.unwrap_or(0))
                .sum(),
        };
        total = total.saturating_add(objects.saturating_mul(bs));
    }
    Ok(total)
}

/// What repacking one cartridge did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Repacked {
    /// Its barcode.
    pub barcode: String,
    /// The jobs and copies moved off it.
    pub moved: Vec<Moved>,
    /// Copies a repack that stopped had left `writing`, forgotten.
    pub forgotten: Vec<(i64, u32)>,
    /// Jobs on it past their retention, forgotten rather than moved.
    pub expired_jobs: Vec<i64>,
    /// It holds no job now and was labelled anew.
    pub freed: bool,
}

/// Repacks cartridge `barcode`: moves every job and copy kept on it to other
/// cartridges of its pool (never onto those in `opts.avoid`), then labels it
/// anew. A repack that stopped is finished by running it again.
pub fn repack(home: &Home, barcode: &str, opts: &MoveOptions) -> Result<Repacked> {
    let cat = &home.catalog;
    let v = known(cat, barcode)?;
    let mut opts = MoveOptions {
        to_pool: v.pool.clone(),
        relabel: true,
        ..opts.clone()
    };
    if !opts.avoid.iter().any(|b| b == barcode) {
        opts.avoid.push(barcode.to_string());
    }
    let mut forgotten: Vec<(i64, u32)> = Vec::new();
    let mut moved = Vec::new();
    // Jobs past their retention are forgotten, not moved.
    let now = crate::clock::now()?.as_nanos();
    let expired = crate::expire::expired_jobs(cat, now)?;
    let mut dead: Vec<i64> = (cat.places_on_volume(v.id)?.iter())
        .map(|p| p.job_id)
        .filter(|j| expired.contains(j))
        .collect();
    dead.dedup();
    if !dead.is_empty() {
        home.connect()?.forget_jobs(&dead)?;
    }
    for p in cat.places_on_volume(v.id)? {
        let state = (cat.copies(p.job_id)?.into_iter())
            .find(|c| c.copy_no == p.copy_no)
            .map(|c| c.state);
        if state == Some(CopyState::Writing) {
            cat.forget_copy(p.job_id, p.copy_no)?;
            forgotten.push((p.job_id, p.copy_no));
            continue;
        }
        // An earlier move in this repack may have taken it off already.
        if !cat.places_on_volume(v.id)?.contains(&p) {
            continue;
        }
        let primary = p.copy_no == 1 || cat.moved_to(p.job_id)? == Some(p.copy_no);
        moved.push(match primary {
            true => move_job(home, p.job_id, &opts)?,
            false => move_one(home, (p.job_id, Replaced::Copy(p.copy_no)), &opts)?,
        });
    }
    let freed = empty_out(home, &[barcode.to_string()], &opts)?;
    Ok(Repacked {
        barcode: barcode.to_string(),
        moved,
        forgotten,
        expired_jobs: dead,
        freed: !freed.is_empty(),
    })
}
