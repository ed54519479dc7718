//! Moving jobs to other cartridges: `migrate` (to another pool) and `repack`
//! (to other cartridges of their pool, the emptied ones labelled anew).

use crate::error::{OpsError, Result};
use crate::select::{self, Selection};
use tapeloom_engine::{Candidate, Home, MoveOptions, Moved, Repacked};

/// Moves each job `sel` names with `opts`, one after another.
pub fn migrate(home: &Home, sel: &Selection, opts: &MoveOptions) -> Result<Vec<Moved>> {
    let mut moved = Vec::new();
    for id in select::jobs(&home.catalog, sel)? {
        moved.push(tapeloom_engine::move_job(home, id, opts)?);
    }
    Ok(moved)
}

/// What to repack: cartridges by barcode, or those of a pool over its reclaim
/// share (most expired first, at most `limit`).
#[derive(Debug, Clone)]
pub enum RepackWhat {
    /// These cartridges.
    Barcodes(Vec<String>),
    /// The pool's cartridges over its reclaim share.
    Pool {
        /// The pool.
        pool: String,
        /// At most this many cartridges.
        limit: Option<u64>,
    },
}

/// Repacks what `what` names, reading and writing on the drives of `opts` (whose
/// pool and list of cartridges to avoid are set here): the pool's candidates
/// (with `RepackWhat::Pool`) and the cartridges repacked.
pub fn repack(
    home: &Home,
    what: RepackWhat,
    opts: &MoveOptions,
) -> Result<(Vec<Candidate>, Vec<Repacked>)> {
    let (barcodes, candidates) = match what {
        RepackWhat::Pool { pool, limit } => {
            if home.catalog.pool(&pool)?.is_none() {
                return Err(OpsError::NoPool(pool));
            }
            let c = tapeloom_engine::reclaim_candidates(home, &pool)?;
            let limit = limit.unwrap_or(u64::MAX) as usize;
            let b: Vec<String> = c.iter().take(limit).map(|c| c.barcode.clone()).collect();
            (b, c)
        }
        RepackWhat::Barcodes(b) => (b, Vec::new()),
    };
    let opts = MoveOptions {
        to_pool: String::new(),
        // No job moves onto a cartridge this repack is to empty.
        avoid: barcodes.clone(),
        relabel: true,
        ..opts.clone()
    };
    let mut repacked = Vec::new();
    for b in &barcodes {
        repacked.push(tapeloom_engine::repack(home, b, &opts)?);
    }
    Ok((candidates, repacked))
}
