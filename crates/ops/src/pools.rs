//! Media pools: making one with its rules, in one transaction, and showing each
//! with its rules and cartridges.

use crate::error::{OpsError, Result};
use serde::Serialize;
use std::collections::HashMap;
use tapeloom_catalog::PoolRules;
pub use tapeloom_catalog::{Pool, PoolKey};
use tapeloom_device::TapeLibrary;
use tapeloom_engine::Home;

/// A pool to make, with its rules.
#[derive(Debug, Clone)]
pub struct NewPool {
    /// The pool's name and its own rules; its creation time is set here.
    pub pool: Pool,
    /// Blank cartridges only its jobs may label.
    pub cartridges: Vec<String>,
    /// The key file that encrypts its jobs, read (not unlocked) by the caller.
    pub key: Option<PoolKey>,
    /// The pool its jobs are copied to once they end.
    pub copy_to: Option<String>,
    /// The share of expired data (percent) from which `repack --pool` reclaims a
    /// cartridge.
    pub reclaim: Option<u32>,
}

/// Makes a pool and every rule of it in one transaction: either all of it is
/// recorded or none. Its copy pool must be another pool that exists.
pub fn create(home: &Home, mut new: NewPool) -> Result<Pool> {
    if let Some(to) = &new.copy_to {
        if *to == new.pool.name || home.catalog.pool(to)?.is_none() {
            return Err(OpsError::BadCopyPool {
                pool: new.pool.name.clone(),
                copy_pool: to.clone(),
            });
        }
    }
    new.pool.created_ns = tapeloom_engine::clock::now()?.as_nanos();
    let rules = PoolRules {
        copy_to: new.copy_to,
        reclaim: new.reclaim,
        key: new.key,
    };
    home.catalog
        .create_pool_with(&new.pool, &new.cartridges, &rules)?;
    Ok(new.pool)
}

/// A pool as `pool create` and `pool list` show it.
#[derive(Serialize)]
pub struct PoolOut {
    /// The pool's name.
    pub name: String,
    /// How long its jobs are kept, in seconds; none for forever.
    pub retention_s: Option<u64>,
    /// How many jobs one of its cartridges takes at most; none for no limit.
    pub max_jobs_per_volume: Option<u64>,
    /// Whether a job may go on a cartridge that holds others.
    pub append: bool,
    /// Whether its cartridges are write-once.
    pub worm: bool,
    /// Its cartridges: labelled ones, then assigned blank ones.
    pub cartridges: Vec<CartridgeOut>,
    /// Bytes on its cartridges, where the library knows.
    pub bytes_used: u64,
    /// How many jobs it holds.
    pub jobs: u64,
    /// The key file that encrypts its jobs, if it has one.
    pub key: Option<PoolKeyOut>,
    /// The pool its jobs are copied to once they end, if any.
    pub copy_to: Option<String>,
    /// The share of expired data (percent) from which `repack --pool` reclaims
    /// one of its cartridges, if any.
    pub reclaim_percent: Option<u32>,
}

/// A pool's key file.
#[derive(Serialize)]
pub struct PoolKeyOut {
    /// The key file's path.
    pub file: String,
    /// The key's fingerprint.
    pub fingerprint: String,
}

/// A cartridge of a pool: labelled into it, or assigned to it and still blank.
#[derive(Serialize)]
pub struct CartridgeOut {
    /// The cartridge's barcode.
    pub barcode: String,
    /// `labelled` or `assigned`.
    pub state: String,
    /// Bytes on it, where the library knows without loading it.
    pub bytes_used: Option<u64>,
    /// How many jobs it holds.
    pub jobs: u64,
    /// When it expires (RFC 3339, as `jobs` prints times): when every job on it
    /// is past the pool's retention; null for never (no retention, WORM, no job
    /// yet, suspect, or expired already).
    pub expires: Option<String>,
}

/// Every pool, by name.
#[derive(Serialize)]
pub struct Pools {
    /// Every pool, by name.
    pub pools: Vec<PoolOut>,
}

/// Every pool with its rules and cartridges, by name.
pub fn list(home: &Home) -> Result<Pools> {
    let lib = home.library()?;
    let expiries = tapeloom_engine::expiries(home)?;
    let pools = home
        .catalog
        .pools()?
        .iter()
        .map(|p| describe(home, &*lib, &expiries, p))
        .collect::<Result<_>>()?;
    Ok(Pools { pools })
}

/// A pool with its cartridges: its labelled volumes, then the barcodes assigned to
/// it and not labelled yet.
pub(crate) fn describe(
    home: &Home,
    lib: &dyn TapeLibrary,
    expiries: &HashMap<String, i64>,
    p: &Pool,
) -> Result<PoolOut> {
    let mut cartridges = Vec::new();
    for v in home.catalog.volumes()?.iter().filter(|v| v.pool == p.name) {
        cartridges.push(CartridgeOut {
            barcode: v.barcode.clone(),
            state: "labelled".into(),
            bytes_used: lib.cartridge_bytes(&v.barcode),
            jobs: home.catalog.jobs_on_volume(v.id)?,
            expires: expiries
                .get(&v.barcode)
                .map(|t| tapeloom_proto::fmt::time(*t)),
        });
    }
    for b in home.catalog.assigned_cartridges(&p.name)? {
        if !cartridges.iter().any(|c| c.barcode == b) {
            cartridges.push(CartridgeOut {
                bytes_used: lib.cartridge_bytes(&b),
                barcode: b,
                state: "assigned".into(),
                jobs: 0,
                expires: None,
            });
        }
    }
    Ok(PoolOut {
        key: home.catalog.pool_key(&p.name)?.map(|k| PoolKeyOut {
            file: k.key_file,
            fingerprint: k.fingerprint,
        }),
        copy_to: home.catalog.pool_copy(&p.name)?,
        reclaim_percent: home.catalog.pool_reclaim(&p.name)?,
        name: p.name.clone(),
        retention_s: p.retention_s,
        max_jobs_per_volume: p.max_jobs_per_volume,
        append: p.append,
        worm: p.worm,
        bytes_used: cartridges.iter().filter_map(|c| c.bytes_used).sum(),
        jobs: home.catalog.jobs_in_pool(&p.name)?,
        cartridges,
    })
}

/// Pool `p` with its rules and cartridges.
pub fn show(home: &Home, p: &Pool) -> Result<PoolOut> {
    describe(home, &*home.library()?, &HashMap::new(), p)
}
