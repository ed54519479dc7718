//! Where a pool's key comes from, and the rule that it is the pool's.

use crate::error::{OpsError, Result};
use tapeloom_catalog::{Catalog, PoolKey};
use tapeloom_format::MasterKey;

/// How a front end has a pool's master key: the command line unlocks the key
/// file with a passphrase, a server holds the keys it unlocked at its start.
pub trait KeySource {
    /// The master key the pool's `key` names; an error that says why it cannot be
    /// had. The caller checks that it is the pool's key.
    fn master_key(
        &self,
        key: &PoolKey,
    ) -> std::result::Result<MasterKey, Box<dyn std::error::Error + Send + Sync>>;
}

/// A front end with no key at all: a pool with a key refuses its jobs.
pub struct NoKeys;

/// No key is held here.
#[derive(Debug, thiserror::Error)]
#[error("no key is held here")]
struct NoKeyHeld;

impl KeySource for NoKeys {
    fn master_key(
        &self,
        _: &PoolKey,
    ) -> std::result::Result<MasterKey, Box<dyn std::error::Error + Send + Sync>> {
        Err(Box::new(NoKeyHeld))
    }
}

/// The key a job into `pool` is encrypted with: none for a pool without a key
/// (or none named); else the pool's key from `keys`, which must be the one whose
/// fingerprint the pool was given.
pub fn pool_key(
    cat: &Catalog,
    pool: Option<&str>,
    keys: &dyn KeySource,
) -> Result<Option<MasterKey>> {
    let Some(pool) = pool else {
        return Ok(None);
    };
    let Some(k) = cat.pool_key(pool)? else {
        return Ok(None);
    };
    let master = keys.master_key(&k).map_err(|source| OpsError::PoolKey {
        pool: pool.to_string(),
        short: k.fingerprint.chars().take(16).collect(),
        source,
    })?;
    if master.fingerprint().to_string() != k.fingerprint {
        return Err(OpsError::WrongPoolKey {
            pool: pool.to_string(),
            file: k.key_file.clone(),
            held: master.fingerprint().short(),
            wanted: k.fingerprint.clone(),
        });
    }
    Ok(Some(master))
}
