//! Media pools: making one with its rules, in one transaction.

use crate::error::{OpsError, Result};
use tapeloom_catalog::{Pool, PoolKey, PoolRules};
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
