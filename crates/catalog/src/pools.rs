//! Media pools: named sets of cartridges with their own rules, and the blank
//! cartridges assigned to a pool before they are labelled into it.
//!
//! A labelled volume's pool is the one in its label (`volumes.pool`); a blank
//! cartridge may be reserved for a pool in `pool_cartridges`. The pool
//! [`DEFAULT_POOL`] always exists, with or without a row.

use crate::db::{params, OptionalExtension};
use crate::error::{is_duplicate_key, CatalogError, Doing, Result};
use crate::write_tx;
use crate::Catalog;

/// The pool every job writes to unless told otherwise; it always exists.
pub const DEFAULT_POOL: &str = "default";

/// A media pool and its rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pool {
    /// The pool's name.
    pub name: String,
    /// How long its jobs are kept, in seconds; `None` keeps them forever.
    pub retention_s: Option<u64>,
    /// At most this many jobs on one volume; `None` for no limit.
    pub max_jobs_per_volume: Option<u64>,
    /// Whether a later job may append to a volume of the pool; when false, a
    /// volume holds only the job that labelled it.
    pub append: bool,
    /// Write once: its volumes are never overwritten (kept for later use).
    pub worm: bool,
    /// When the pool was created, in nanoseconds since the epoch (0 for the
    /// implicit default pool).
    pub created_ns: i64,
}

impl Pool {
    /// The default pool when no row describes it: kept forever, appendable.
    pub fn default_pool() -> Pool {
        Pool::named(DEFAULT_POOL)
    }

    /// A pool with the default rules (kept forever, appendable): the default pool,
    /// and a pool known only from its volumes' labels (as after `catalog rebuild`)
    /// until `pool create` gives it rules.
    pub fn named(name: &str) -> Pool {
        Pool {
            name: name.to_string(),
            retention_s: None,
            max_jobs_per_volume: None,
            append: true,
            worm: false,
            created_ns: 0,
        }
    }
}

/// A pool's rules kept beside its row: the pool its jobs are copied to, the
/// share of expired data from which a cartridge is reclaimed, and its key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolRules {
    /// The pool each job is copied to once it ends.
    pub copy_to: Option<String>,
    /// The share (percent) of expired data from which `repack --pool` reclaims a
    /// cartridge.
    pub reclaim: Option<u32>,
    /// The key that encrypts its jobs.
    pub key: Option<PoolKey>,
}

/// A pool's columns in the order [`pool_row`] reads them.
const POOL_COLS: &str = "name, retention_s, max_jobs_per_volume, append, worm, created_ns";

fn pool_row(r: &crate::db::Row) -> crate::db::Result<Pool> {
    let retention: Option<i64> = r.get(1)?;
    let max_jobs: Option<i64> = r.get(2)?;
    Ok(Pool {
        name: r.get(0)?,
        retention_s: retention.map(|v| v.max(0) as u64),
        max_jobs_per_volume: max_jobs.map(|v| v.max(0) as u64),
        append: r.get::<i64>(3)? != 0,
        worm: r.get::<i64>(4)? != 0,
        created_ns: r.get(5)?,
    })
}

impl Catalog {
    /// Records a new pool, with the blank cartridges assigned to it, in one
    /// transaction. The name must fit a volume label ([`CatalogError::BadPoolName`]);
    /// a pool of the same name must not exist ([`CatalogError::PoolExists`];
    /// `default` always does); the cartridges are refused as by
    /// [`Catalog::assign_cartridges`], and then the pool is not created either.
    pub fn create_pool(&self, pool: &Pool, cartridges: &[String]) -> Result<()> {
        self.create_pool_with(pool, cartridges, &PoolRules::default())
    }

    /// Records a new pool as [`Catalog::create_pool`] does, with its further
    /// rules (copy pool, reclaim share, key), all in one transaction: a failure
    /// at any of them records nothing.
    pub fn create_pool_with(
        &self,
        pool: &Pool,
        cartridges: &[String],
        rules: &PoolRules,
    ) -> Result<()> {
        let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
        if pool.name.is_empty() || pool.name.len() > 32 || !pool.name.chars().all(ok) {
            return Err(CatalogError::BadPoolName {
                name: pool.name.clone(),
            });
        }
        if pool.name == DEFAULT_POOL {
            return Err(CatalogError::PoolExists {
                name: pool.name.clone(),
            });
        }
        let to_sql = |v: Option<u64>| v.map(|v| v.min(i64::MAX as u64) as i64);
        let tx = write_tx(&self.conn).doing("record a pool")?;
        match tx.execute(
            "INSERT INTO pools (name, retention_s, max_jobs_per_volume, append, worm, created_ns) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                pool.name,
                to_sql(pool.retention_s),
                to_sql(pool.max_jobs_per_volume),
                pool.append as i64,
                pool.worm as i64,
                pool.created_ns
            ],
        ) {
            Ok(_) => {}
            Err(e) if is_duplicate_key(&e) => {
                return Err(CatalogError::PoolExists {
                    name: pool.name.clone(),
                })
            }
            Err(e) => return Err(e).doing("record a pool"),
        }
        self.assign_in_transaction(&pool.name, cartridges)?;
        if let Some(to) = &rules.copy_to {
            self.set_pool_copy(&pool.name, to)?;
        }
        if let Some(n) = rules.reclaim {
            self.set_pool_reclaim(&pool.name, n)?;
        }
        if let Some(k) = &rules.key {
            self.set_pool_key(&pool.name, k)?;
        }
        tx.commit().doing("record a pool")
    }

    /// A pool by name; the default pool always answers.
    pub fn pool(&self, name: &str) -> Result<Option<Pool>> {
        let row = self
            .conn
            .query_row(
                &format!("SELECT {POOL_COLS} FROM pools WHERE name = ?1"),
                params![name],
                pool_row,
            )
            .optional()
            .doing("look up a pool")?;
        if row.is_some() || name == DEFAULT_POOL {
            return Ok(row.or_else(|| Some(Pool::default_pool())));
        }
        Ok(self
            .label_pools()?
            .contains(&name.to_string())
            .then(|| Pool::named(name)))
    }

    /// Pool names the volumes' labels carry.
    fn label_pools(&self) -> Result<Vec<String>> {
        let run = || -> crate::db::Result<Vec<String>> {
            let mut st = self
                .conn
                .prepare_cached("SELECT DISTINCT pool FROM volumes ORDER BY pool")?;

            st.query_map(params![], |r| r.get(0))?.collect()
        };
        run().doing("list the pools of the volumes")
    }

    /// Every pool by name, the default pool among them.
    pub fn pools(&self) -> Result<Vec<Pool>> {
        let run = || -> crate::db::Result<Vec<Pool>> {
            let mut st = self
                .conn
                .prepare(&format!("SELECT {POOL_COLS} FROM pools ORDER BY name"))?;

            st.query_map(params![], pool_row)?.collect()
        };
        let mut pools = run().doing("list the pools")?;
        let names = self.label_pools()?;
        for name in names.iter().map(String::as_str).chain([DEFAULT_POOL]) {
            if !pools.iter().any(|p| p.name == name) {
                pools.push(Pool::named(name));
            }
        }
        pools.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(pools)
    }

    /// Assigns cartridges to a pool, so that only its jobs label them. The pool must
    /// exist ([`CatalogError::NoPool`]); a cartridge labelled into or assigned to
    /// another pool is refused ([`CatalogError::CartridgeInPool`]) and then none is
    /// assigned. Assigning a cartridge to its own pool again changes nothing.
    pub fn assign_cartridges(&self, pool: &str, barcodes: &[String]) -> Result<()> {
        if self.pool(pool)?.is_none() {
            return Err(CatalogError::NoPool {
                name: pool.to_string(),
            });
        }
        let tx = write_tx(&self.conn).doing("assign cartridges")?;
        self.assign_in_transaction(pool, barcodes)?;
        tx.commit().doing("assign cartridges")
    }

    /// The checks and rows of [`Catalog::assign_cartridges`], inside the caller's
    /// transaction.
    fn assign_in_transaction(&self, pool: &str, barcodes: &[String]) -> Result<()> {
        for barcode in barcodes {
            match self.pool_of_barcode(barcode)? {
                Some(other) if other != pool => {
                    return Err(CatalogError::CartridgeInPool {
                        barcode: barcode.clone(),
                        pool: other,
                    })
                }
                _ => {}
            }
            self.conn
                .execute(
                    "INSERT INTO pool_cartridges (barcode, pool) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                    params![barcode, pool],
                )
                .doing("assign cartridges")?;
        }
        Ok(())
    }

    /// The pool a cartridge belongs to: the pool of its label when it is labelled,
    /// else the pool it is assigned to, else none.
    pub fn pool_of_barcode(&self, barcode: &str) -> Result<Option<String>> {
        if let Some(v) = self.volume_by_barcode(barcode)? {
            return Ok(Some(v.pool));
        }
        self.assigned_pool(barcode)
    }

    /// The pool a cartridge is assigned to, labelled or not; none when it is
    /// assigned to none.
    pub fn assigned_pool(&self, barcode: &str) -> Result<Option<String>> {
        self.conn
            .query_row(
                "SELECT pool FROM pool_cartridges WHERE barcode = ?1",
                params![barcode],
                |r| r.get(0),
            )
            .optional()
            .doing("look up a cartridge's pool")
    }

    /// Number of jobs with a segment on a volume of the pool.
    pub fn jobs_in_pool(&self, pool: &str) -> Result<u64> {
        let n = self
            .conn
            .query_row(
                "SELECT COUNT(DISTINCT jv.job_id) FROM job_volumes jv \
                 JOIN volumes v ON v.id = jv.volume_id WHERE v.pool = ?1",
                params![pool],
                |r| r.get::<i64>(0),
            )
            .doing("count a pool's jobs")?;
        Ok(n as u64)
    }

    /// The barcodes assigned to a pool (labelled or not), in order.
    pub fn assigned_cartridges(&self, pool: &str) -> Result<Vec<String>> {
        let run = || -> crate::db::Result<Vec<String>> {
            let mut st = self
                .conn
                .prepare("SELECT barcode FROM pool_cartridges WHERE pool = ?1 ORDER BY barcode")?;

            st.query_map(params![pool], |r| r.get(0))?.collect()
        };
        run().doing("list a pool's cartridges")
    }
}

/// A pool's key file: where it is and the fingerprint of its master key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolKey {
    /// The key file's path, as given when it was set (absolute).
    pub key_file: String,
    /// The master key's fingerprint, hex.
    pub fingerprint: String,
}

impl Catalog {
    /// Has the jobs of `pool` copied to `copy_pool` once they end.
    pub fn set_pool_copy(&self, pool: &str, copy_pool: &str) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO pool_copies (pool, copy_pool) VALUES (?1, ?2) \
                 ON CONFLICT (pool) DO UPDATE SET copy_pool = excluded.copy_pool",
                params![pool, copy_pool],
            )
            .doing("set a pool's copy pool")?;
        Ok(())
    }

    /// The pool the jobs of `pool` are copied to once they end, if any.
    pub fn pool_copy(&self, pool: &str) -> Result<Option<String>> {
        self.conn
            .query_row(
                "SELECT copy_pool FROM pool_copies WHERE pool = ?1",
                params![pool],
                |r| r.get(0),
            )
            .optional()
            .doing("read a pool's copy pool")
    }

    /// Makes a cartridge of `pool` a candidate for `repack --pool` once
    /// `percent` of what was written to it belongs to jobs that expired.
    pub fn set_pool_reclaim(&self, pool: &str, percent: u32) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO pool_reclaims (pool, percent) VALUES (?1, ?2) \
                 ON CONFLICT (pool) DO UPDATE SET percent = excluded.percent",
                params![pool, percent as i64],
            )
            .doing("set a pool's reclaim share")?;
        Ok(())
    }

    /// The share (percent) of expired data from which a cartridge of `pool` is
    /// reclaimed, if the pool has one.
    pub fn pool_reclaim(&self, pool: &str) -> Result<Option<u32>> {
        let n: Option<i64> = self
            .conn
            .query_row(
                "SELECT percent FROM pool_reclaims WHERE pool = ?1",
                params![pool],
                |r| r.get(0),
            )
            .optional()
            .doing("read a pool's reclaim share")?;
        Ok(n.map(|n| n.clamp(0, 100) as u32))
    }

    /// Sets the key file that encrypts `pool`'s jobs (those that name no other).
    pub fn set_pool_key(&self, pool: &str, key: &PoolKey) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO pool_keys (pool, key_file, fingerprint) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (pool) DO UPDATE SET key_file = excluded.key_file, \
                 fingerprint = excluded.fingerprint",
                params![pool, key.key_file, key.fingerprint],
            )
            .doing("set a pool's key")?;
        Ok(())
    }

    /// The key file of `pool`, if it has one.
    pub fn pool_key(&self, pool: &str) -> Result<Option<PoolKey>> {
        self.conn
            .query_row(
                "SELECT key_file, fingerprint FROM pool_keys WHERE pool = ?1",
                params![pool],
                |r| {
                    Ok(PoolKey {
                        key_file: r.get(0)?,
                        fingerprint: r.get(1)?,
                    })
                },
            )
            .optional()
            .doing("read a pool's key")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::both;
    use crate::tests::scratch;

    both! {
        fn a_pool_named_only_by_labels_is_known_with_default_rules_until_created() {
            let (_d, c) = scratch();
            c.add_volume("TL0001L9", [1; 16], "weekly", 262144, 0)
                .unwrap();
            assert_eq!(c.pool("weekly").unwrap(), Some(Pool::named("weekly")));
            assert_eq!(c.pool("monthly").unwrap(), None);
            let names: Vec<String> = c.pools().unwrap().into_iter().map(|p| p.name).collect();
            assert_eq!(names, vec!["default", "weekly"]);
            // Its rules come back with `pool create`.
            let mut w = pool("weekly");
            w.retention_s = Some(7 * 86400);
            c.create_pool(&w, &[]).unwrap();
            assert_eq!(c.pool("weekly").unwrap(), Some(w));
            assert_eq!(c.pools().unwrap().len(), 2);
        }
    }

    both! {
        fn a_pool_and_its_rules_are_recorded_whole_or_not_at_all() {
            let (_d, c) = scratch();
            c.create_pool(&pool("vault"), &[]).unwrap();
            let key = PoolKey {
                key_file: "/k".into(),
                fingerprint: "ab".repeat(16),
            };
            let rules = PoolRules {
                copy_to: Some("vault".into()),
                reclaim: Some(60),
                key: Some(key.clone()),
            };
            c.create_pool_with(&pool("main"), &[], &rules).unwrap();
            assert_eq!(c.pool_copy("main").unwrap().as_deref(), Some("vault"));
            assert_eq!(c.pool_reclaim("main").unwrap(), Some(60));
            assert_eq!(c.pool_key("main").unwrap(), Some(key));
            // The last of its writes fails: neither the pool nor its copy pool
            // nor its reclaim share is left behind.
            c.conn.execute_batch("DROP TABLE pool_keys").unwrap();
            assert!(c.create_pool_with(&pool("half"), &[], &rules).is_err());
            assert_eq!(c.pool("half").unwrap(), None);
            assert_eq!(c.pool_copy("half").unwrap(), None);
            assert_eq!(c.pool_reclaim("half").unwrap(), None);
        }
    }

    fn pool(name: &str) -> Pool {
        Pool {
            name: name.to_string(),
            retention_s: Some(86400 * 30),
            max_jobs_per_volume: Some(2),
            append: false,
            worm: true,
            created_ns: 7,
        }
    }

    both! {
        fn the_default_pool_always_exists() {
            let (_d, c) = scratch();
            assert_eq!(c.pools().unwrap(), vec![Pool::default_pool()]);
            assert_eq!(c.pool(DEFAULT_POOL).unwrap(), Some(Pool::default_pool()));
            assert_eq!(c.pool("weekly").unwrap(), None);
            assert!(matches!(
                c.create_pool(&pool(DEFAULT_POOL), &[]),
                Err(CatalogError::PoolExists { name }) if name == DEFAULT_POOL
            ));
        }
    }

    both! {
        fn pools_are_created_once_and_listed_by_name() {
            let (_d, c) = scratch();
            c.create_pool(&pool("weekly"), &[]).unwrap();
            let mut open = pool("archive");
            open.retention_s = None;
            open.max_jobs_per_volume = None;
            open.append = true;
            open.worm = false;
            c.create_pool(&open, &[]).unwrap();
            assert_eq!(c.pool("weekly").unwrap(), Some(pool("weekly")));
            let names: Vec<String> = c.pools().unwrap().into_iter().map(|p| p.name).collect();
            assert_eq!(names, ["archive", "default", "weekly"]);
            assert_eq!(c.pool("archive").unwrap(), Some(open));
            assert!(matches!(
                c.create_pool(&pool("weekly"), &[]),
                Err(CatalogError::PoolExists { name }) if name == "weekly"
            ));
        }
    }

    both! {
        fn a_cartridge_belongs_to_one_pool() {
            let (_d, c) = scratch();
            let codes = |v: &[&str]| -> Vec<String> { v.iter().map(|s| s.to_string()).collect() };
            c.create_pool(&pool("a"), &codes(&["TL0001L9"])).unwrap();
            c.create_pool(&pool("b"), &[]).unwrap();
            c.assign_cartridges("a", &codes(&["TL0002L9"])).unwrap();
            // Again to the same pool: nothing changes.
            c.assign_cartridges("a", &codes(&["TL0002L9"])).unwrap();
            assert_eq!(
                c.assigned_cartridges("a").unwrap(),
                ["TL0001L9", "TL0002L9"]
            );
            assert_eq!(c.pool_of_barcode("TL0001L9").unwrap().as_deref(), Some("a"));
            assert_eq!(c.pool_of_barcode("TL0003L9").unwrap(), None);
            assert_eq!(c.assigned_pool("TL0002L9").unwrap().as_deref(), Some("a"));
            // Assigned to another pool: refused, and none of the list is assigned.
            assert!(matches!(
                c.assign_cartridges("b", &codes(&["TL0003L9", "TL0002L9"])),
                Err(CatalogError::CartridgeInPool { barcode, pool }) if barcode == "TL0002L9" && pool == "a"
            ));
            assert_eq!(c.pool_of_barcode("TL0003L9").unwrap(), None);
            // Labelled into another pool: refused too.
            c.add_volume("TL0004L9", [1; 16], "b", 262144, 0).unwrap();
            assert_eq!(c.pool_of_barcode("TL0004L9").unwrap().as_deref(), Some("b"));
            assert!(matches!(
                c.assign_cartridges("a", &codes(&["TL0004L9"])),
                Err(CatalogError::CartridgeInPool { barcode, pool }) if barcode == "TL0004L9" && pool == "b"
            ));
            assert!(matches!(
                c.assign_cartridges("nope", &codes(&["TL0005L9"])),
                Err(CatalogError::NoPool { name }) if name == "nope"
            ));
            // A pool created with a cartridge of another pool is not created at all.
            assert!(matches!(
                c.create_pool(&pool("c"), &codes(&["TL0005L9", "TL0001L9"])),
                Err(CatalogError::CartridgeInPool { barcode, pool }) if barcode == "TL0001L9" && pool == "a"
            ));
            assert_eq!(
                (c.pool("c").unwrap(), c.pool_of_barcode("TL0005L9").unwrap()),
                (None, None)
            );
        }
    }

    both! {
        fn pool_names_fit_a_label_and_jobs_are_counted() {
            let (_d, c) = scratch();
            for bad in ["", "a b", "x/y", &"p".repeat(33)] {
                assert!(matches!(
                    c.create_pool(&pool(bad), &[]),
                    Err(CatalogError::BadPoolName { name }) if name == bad
                ));
            }
            c.create_pool(&pool("weekly-1.a_b"), &[]).unwrap();
            let v = c
                .add_volume("TL0001L9", [1; 16], "weekly-1.a_b", 262144, 0)
                .unwrap();
            let w = c
                .add_volume("TL0002L9", [2; 16], "weekly-1.a_b", 262144, 0)
                .unwrap();
            let j = c.begin_job(1, "j", 0, 262144, &[]).unwrap();
            c.add_job_volume(j, 0, 0, v.id, 2).unwrap();
            c.add_job_volume(j, 1, 0, w.id, 2).unwrap();
            assert_eq!(c.jobs_in_pool("weekly-1.a_b").unwrap(), 1);
            assert_eq!(c.jobs_in_pool(DEFAULT_POOL).unwrap(), 0);
        }
    }
}
