//! `tapeloom migrate` and `tapeloom repack`: move jobs to other cartridges
//! (docs/COPIES.md). `migrate` moves jobs to another pool, named by id, by a
//! cartridge they are on (`--volume`) or by their pool (`--pool`); `repack`
//! moves every job kept on cartridges to other cartridges of their pool and
//! labels them anew, named by barcode or chosen by the pool's reclaim share
//! (`--pool`, most expired first, at most `--limit`).

use super::Context;
use crate::error::OpsResult;
use crate::output::{self, Output};
use anyhow::Result;
use serde::Serialize;
use tapeloom_engine::{escape_controls, Candidate, MoveOptions, Moved, Repacked};
use tapeloom_ops::moves::{self, RepackWhat};
use tapeloom_ops::select::Selection;

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

/// Moves the jobs named.
pub fn migrate(a: MigrateArgs, ctx: &Context) -> Result<Migrated> {
    let home = ctx.open_home()?;
    let opts = MoveOptions {
        to_pool: a.to_pool.clone(),
        read_drive: a.read_drive,
        write_drive: a.write_drive,
        avoid: Vec::new(),
        relabel: false,
    };
    let sel = Selection {
        jobs: a.jobs,
        set: None,
        pool: a.pool,
        volume: a.volume,
    };
    let moved = moves::migrate(&home, &sel, &opts).ops()?;
    Ok(Migrated { moved })
}

/// The cartridges repacked.
#[derive(Serialize)]
pub struct Repacks {
    /// With --pool: the cartridges found over the pool's reclaim share.
    candidates: Vec<Candidate>,
    repacked: Vec<Repacked>,
}

/// Repacks the cartridges named, or those of a pool over its reclaim share.
pub fn repack(a: RepackArgs, ctx: &Context) -> Result<Repacks> {
    let home = ctx.open_home()?;
    let what = match a.pool {
        Some(pool) => RepackWhat::Pool {
            pool,
            limit: a.limit,
        },
        None => RepackWhat::Barcodes(a.barcodes),
    };
    let opts = MoveOptions {
        read_drive: a.read_drive,
        write_drive: a.write_drive,
        ..MoveOptions::default()
    };
    let (candidates, repacked) = moves::repack(&home, what, &opts).ops()?;
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
