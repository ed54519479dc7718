//! `tapeloom migrate` and `tapeloom repack`: move jobs to other cartridges
//! (docs/COPIES.md). `migrate` moves jobs to another pool, named by id, by a
//! cartridge they are on (`--volume`) or by their pool (`--pool`); `repack`
//! moves every job kept on cartridges to other cartridges of their pool and
//! labels them anew, named by barcode or chosen by the pool's reclaim share
//! (`--pool`, most expired first, at most `--limit`).

use super::Context;
use crate::output::{self, Output};
use anyhow::Result;
use serde::Serialize;
use tapeloom_catalog::{Catalog, JobState};
use tapeloom_engine::{escape_controls, Candidate, MoveOptions, Moved, Repacked};

#[derive(clap::Args)]
pub struct MigrateArgs {
    /// Job ids.
    #[arg(value_parser = super::parse_job_id, required_unless_present_any = ["volume", "pool"])]
    jobs: Vec<i64>,
    /// Move every job read from this cartridge.
    #[arg(long, value_name = "BARCODE", conflicts_with_all = ["jobs", "pool"])]
    volume: Option<String>,
    /// Move every job of this pool that ended.
    #[arg(long, value_name = "NAME", conflicts_with = "jobs")]
    pool: Option<String>,
    /// The pool whose cartridges take the jobs.
    #[arg(long, value_name = "POOL")]
    to_pool: String,
    /// Drive that reads the jobs' cartridges.
    #[arg(long, value_parser = super::usize_in(..=super::MAX_INDEX))]
    read_drive: Option<usize>,
    /// Drive that writes (with one drive, the same one: each segment goes
    /// through a spool file on disk).
    #[arg(long, value_parser = super::usize_in(..=super::MAX_INDEX))]
    write_drive: Option<usize>,
}

#[derive(clap::Args)]
pub struct RepackArgs {
    /// Cartridges to repack.
    #[arg(required_unless_present = "pool")]
    barcodes: Vec<String>,
    /// Repack the cartridges of this pool with at least its reclaim share of
    /// expired data (`pool create --reclaim`), the most expired first.
    #[arg(long, value_name = "NAME", conflicts_with = "barcodes")]
    pool: Option<String>,
    /// With --pool: repack at most this many cartridges.
    #[arg(long, value_name = "N", requires = "pool", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    limit: Option<u64>,
    /// Drive that reads the jobs' cartridges.
    #[arg(long, value_parser = super::usize_in(..=super::MAX_INDEX))]
    read_drive: Option<usize>,
    /// Drive that writes.
    #[arg(long, value_parser = super::usize_in(..=super::MAX_INDEX))]
    write_drive: Option<usize>,
}

/// The jobs moved.
#[derive(Serialize)]
pub struct Migrated {
    moved: Vec<Moved>,
}

pub fn migrate(a: MigrateArgs, ctx: &Context) -> Result<Migrated> {
    let home = ctx.open_home()?;
    let jobs = chosen(&home.catalog, &a)?;
    let opts = MoveOptions {
        to_pool: a.to_pool.clone(),
        read_drive: a.read_drive,
        write_drive: a.write_drive,
        avoid: Vec::new(),
        relabel: false,
    };
    let mut moved = Vec::new();
    for id in jobs {
        moved.push(tapeloom_engine::move_job(&home, id, &opts)?);
    }
    Ok(Migrated { moved })
}

/// The jobs `migrate` names: by id, by a cartridge their place is on, or by the
/// pool of their place.
fn chosen(cat: &Catalog, a: &MigrateArgs) -> Result<Vec<i64>> {
    let ended = |s: JobState| matches!(s, JobState::Ok | JobState::Partial);
    let mut jobs: Vec<i64> = a.jobs.clone();
    if let Some(b) = &a.volume {
        let v = (cat.volume_by_barcode(b)?).ok_or_else(|| {
            anyhow::anyhow!("the catalog knows no cartridge {}", escape_controls(b))
        })?;
        for p in cat.places_on_volume(v.id)? {
            let primary = p.copy_no == 1 || cat.moved_to(p.job_id)? == Some(p.copy_no);
            if primary && !jobs.contains(&p.job_id) {
                jobs.push(p.job_id);
            }
        }
    }
    if let Some(pool) = &a.pool {
        for j in cat.jobs()?.into_iter().filter(|j| ended(j.status)) {
            let vols = cat.job_volumes(j.id)?;
            if vols.first().is_some_and(|v| &v.volume.pool == pool) {
                jobs.push(j.id);
            }
        }
    }
    Ok(jobs)
}

/// The cartridges repacked.
#[derive(Serialize)]
pub struct Repacks {
    /// With --pool: the cartridges found over the pool's reclaim share.
    candidates: Vec<Candidate>,
    repacked: Vec<Repacked>,
}

pub fn repack(a: RepackArgs, ctx: &Context) -> Result<Repacks> {
    let home = ctx.open_home()?;
    let (barcodes, candidates) = match &a.pool {
        Some(pool) => {
            if home.catalog.pool(pool)?.is_none() {
                anyhow::bail!("no pool {} in the catalog", escape_controls(pool));
            }
            let c = tapeloom_engine::reclaim_candidates(&home, pool)?;
            let limit = a.limit.unwrap_or(u64::MAX) as usize;
            let b: Vec<String> = c.iter().take(limit).map(|c| c.barcode.clone()).collect();
            (b, c)
        }
        None => (a.barcodes.clone(), Vec::new()),
    };
    let opts = MoveOptions {
        to_pool: String::new(),
        read_drive: a.read_drive,
        write_drive: a.write_drive,
        // No job moves onto a cartridge this repack is to empty.
        avoid: barcodes.clone(),
        relabel: true,
    };
    let mut repacked = Vec::new();
    for b in &barcodes {
        repacked.push(tapeloom_engine::repack(&home, b, &opts)?);
    }
    Ok(Repacks {
        candidates,
        repacked,
    })
}

fn print_moved(m: &Moved) {
    outln!(
        "job {}: moved from {} to {} (copy {}, {} blocks, {}), read back whole ({} blocks)",
        m.job_id,
        escape_controls(&m.from.join(", ")),
        escape_controls(&m.to.join(", ")),
        m.copy_no,
        m.copy.blocks,
        output::bytes(m.copy.bytes),
        m.verified_blocks
    );
    if !m.emptied.is_empty() {
        outln!(
            "  holding no job now, expired: {}",
            escape_controls(&m.emptied.join(", "))
        );
    }
}

impl Output for Migrated {
    fn print(&self) {
        if self.moved.is_empty() {
            outln!("no job to move");
        }
        for m in &self.moved {
            print_moved(m);
        }
    }
}

impl Output for Repacks {
    fn print(&self) {
        for c in &self.candidates {
            outln!(
                "cartridge {}: {:.0}% expired ({} kept of {})",
                escape_controls(&c.barcode),
                c.expired_percent,
                output::bytes(c.live_bytes),
                output::bytes(c.written_bytes)
            );
        }
        if self.repacked.is_empty() {
            outln!("no cartridge to repack");
        }
        for r in &self.repacked {
            for m in &r.moved {
                print_moved(m);
            }
            let state = match r.freed {
                true => "labelled anew, free for its pool",
                false => "still holds jobs",
            };
            outln!("cartridge {}: {state}", escape_controls(&r.barcode));
        }
    }
}
