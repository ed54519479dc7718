//! Backup sets: a job's set, level and base; the paths it found deleted; and the
//! tree of a set as it was at one of its jobs, merged from the job's chain of bases.

use crate::db::params;
use crate::error::{CatalogError, Doing, Result};
use crate::files::FileRow;
use crate::jobs::{Job, JOB_COLS};
use crate::write_tx;
use crate::{Catalog, JobState};
use std::collections::BTreeMap;
use tapeloom_format::Level;

/// One object of a set's tree at a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeFile {
    /// The job whose row this is: the last job of the chain that recorded the path.
    pub job: i64,
    /// The row.
    pub row: FileRow,
    /// When `row` is metadata alone: the earlier job and row holding the file's
    /// data (`None` when the chain has none, which a restore reports).
    pub data: Option<(i64, FileRow)>,
}

/// A set's tree at a job, by path.
pub type Tree = BTreeMap<Vec<u8>, TreeFile>;

impl Catalog {
    /// Records job `job`'s set, level and base.
    pub fn set_job_set(&self, job: i64, set: &str, level: Level, base: Option<i64>) -> Result<()> {
        self.conn
            .execute(
                "UPDATE jobs SET set_name = ?2, level = ?3, base_job = ?4 WHERE id = ?1",
                params![job, set, level as u8, base],
            )
            .doing("record a job's set")?;
        Ok(())
    }

    /// The jobs of set `set`, oldest first (a job named `set` without a set of its
    /// own is in it).
    pub fn set_jobs(&self, set: &str) -> Result<Vec<Job>> {
        let run = || -> crate::db::Result<Vec<Job>> {
            let mut st = self.conn.prepare_cached(&format!(
                "SELECT {JOB_COLS} FROM jobs WHERE set_name = ?1 \
                 OR (set_name IS NULL AND name = ?1) ORDER BY id"
            ))?;

            st.query_map(params![set], crate::jobs::job_row)?.collect()
        };
        run().doing("list a set's jobs")
    }

    /// The set's last job that ended (ok or partial), of level full when `full`.
    pub fn last_in_set(&self, set: &str, full: bool) -> Result<Option<Job>> {
        Ok(self.set_jobs(set)?.into_iter().rev().find(|j| {
            matches!(j.status, JobState::Ok | JobState::Partial)
                && (!full || j.level == Level::Full)
        }))
    }

    /// The chain of job `job`: its full, then each job relative to the one before,
    /// ending with `job` itself.
    pub fn chain(&self, job: i64) -> Result<Vec<Job>> {
        let mut out = Vec::new();
        let mut at = self.job(job)?.ok_or(CatalogError::NoJob { id: job })?;
        while let Some(base) = at.base {
            if out.len() > 100_000 || base >= at.id {
                // Bases are older jobs; anything else is a damaged catalog.
                return Err(CatalogError::BrokenChain { job: at.id, base });
            }
            let next = self
                .job(base)?
                .ok_or(CatalogError::BrokenChain { job: at.id, base })?;
            out.push(at);
            at = next;
        }
        out.push(at);
        out.reverse();
        Ok(out)
    }

    /// Records the paths job `job` found deleted since its base, with the entry type
    /// each had.
    pub fn add_deletions(&self, job: i64, paths: &[(Vec<u8>, u8)]) -> Result<()> {
        let run = || -> crate::db::Result<()> {
            let tx = write_tx(&self.conn)?;
            {
                let mut st = tx.prepare_cached(
                    "INSERT INTO deletions (job_id, path, type) VALUES (?1, ?2, ?3) \
                     ON CONFLICT (job_id, path) DO UPDATE SET type = excluded.type",
                )?;
                for (p, k) in paths {
                    st.execute(params![job, p, k])?;
                }
            }
            tx.commit()
        };
        run().doing("record deletions")
    }

    /// The paths job `job` found deleted, in path order, with their entry types.
    pub fn deletions(&self, job: i64) -> Result<Vec<(Vec<u8>, u8)>> {
        let run = || -> crate::db::Result<Vec<(Vec<u8>, u8)>> {
            let mut st = self.conn.prepare_cached(
                "SELECT path, type FROM deletions WHERE job_id = ?1 ORDER BY path",
            )?;

            st.query_map(params![job], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect()
        };
        run().doing("list deletions")
    }

    /// The set's tree as it was at job `job`: its chain's rows merged in order, each
    /// job's deletions taken away before its rows are laid on.
    pub fn tree_at(&self, job: i64) -> Result<Tree> {
        self.tree_of(job, None)
    }

    /// The part of [`Catalog::tree_at`] at `prefix` and under it: the same
    /// entries there, read by path from each job of the chain rather than every
    /// row of the chain (a folder of a set of millions of files lists at once).
    pub fn tree_under(&self, job: i64, prefix: &[u8]) -> Result<Tree> {
        self.tree_of(job, Some(prefix))
    }

    fn tree_of(&self, job: i64, prefix: Option<&[u8]>) -> Result<Tree> {
        let prefix = prefix.filter(|p| !p.is_empty() && *p != b".");
        let under = |path: &[u8]| match prefix {
            None => true,
            Some(p) => path == p || (path.starts_with(p) && path.get(p.len()) == Some(&b'/')),
        };
        let mut tree = Tree::new();
        for j in self.chain(job)? {
            for (p, _) in self.deletions(j.id)? {
                if under(&p) {
                    tree.remove(&p);
                }
            }
            self.for_each_file(j.id, prefix, |row| {
                let data = if row.meta_only {
                    tree.remove(&row.path).and_then(|prev| match prev.data {
                        Some(d) => Some(d),
                        None if !prev.row.meta_only && prev.row.kind == row.kind => {
                            Some((prev.job, prev.row))
                        }
                        None => None,
                    })
                } else {
                    None
                };
                tree.insert(
                    row.path.clone(),
                    TreeFile {
                        job: j.id,
                        row,
                        data,
                    },
                );
                Ok(())
            })?;
        }
        Ok(tree)
    }
}

#[cfg(test)]
mod tests {
    use crate::db::params;
    use crate::tests::both;
    use crate::tests::{row, scratch};
    use tapeloom_format::Level;

    both! {
        fn a_tree_merges_the_chain_and_leaves_deletions_out() {
            let (_d, c) = scratch();
            let full = c.begin_job(1, "s", 1, 262144, &[]).unwrap();
            c.add_files(full, &[row("a", 2), row("b", 4), row("c", 6)])
                .unwrap();
            c.finish_job(full, crate::JobState::Ok, 3, 30, 1.0, 2)
                .unwrap();
            let inc = c.begin_job(2, "s", 3, 262144, &[]).unwrap();
            c.set_job_set(inc, "s", Level::Incremental, Some(full))
                .unwrap();
            let mut meta = row("a", 9);
            meta.meta_only = true;
            meta.mode = 0o600;
            c.add_files(inc, &[meta, row("d", 10)]).unwrap();
            c.add_deletions(inc, &[(b"b".to_vec(), 1)]).unwrap();
            c.finish_job(inc, crate::JobState::Ok, 2, 10, 1.0, 4)
                .unwrap();
            assert_eq!(c.last_in_set("s", false).unwrap().unwrap().id, inc);
            assert_eq!(c.last_in_set("s", true).unwrap().unwrap().id, full);
            let chain: Vec<i64> = c.chain(inc).unwrap().iter().map(|j| j.id).collect();
            assert_eq!(chain, vec![full, inc]);
            let t = c.tree_at(inc).unwrap();
            let paths: Vec<&[u8]> = t.keys().map(|k| k.as_slice()).collect();
            assert_eq!(paths, vec![&b"a"[..], b"c", b"d"]);
            let a = &t[&b"a".to_vec()];
            assert_eq!((a.job, a.row.mode), (inc, 0o600));
            let (dj, drow) = a.data.as_ref().unwrap();
            assert_eq!((*dj, drow.start_lbn), (full, 2));
            assert_eq!(c.tree_at(full).unwrap().len(), 3);
            // A chain whose base is gone is refused.
            c.conn
                .execute("DELETE FROM jobs WHERE id = ?1", params![full])
                .unwrap();
            assert!(matches!(
                c.tree_at(inc),
                Err(crate::CatalogError::BrokenChain { .. })
            ));
        }
    }

    both! {
        fn a_part_of_the_tree_is_the_tree_at_that_path() {
            let (_d, c) = scratch();
            let full = c.begin_job(1, "s", 1, 262144, &[]).unwrap();
            let rows = ["d", "d/x", "d/y", "d2", "d2/z", "e"];
            let rows: Vec<_> = (rows.iter().zip(2..)).map(|(p, l)| row(p, l)).collect();
            c.add_files(full, &rows).unwrap();
            c.finish_job(full, crate::JobState::Ok, 6, 60, 1.0, 2).unwrap();
            let inc = c.begin_job(2, "s", 3, 262144, &[]).unwrap();
            c.set_job_set(inc, "s", Level::Incremental, Some(full)).unwrap();
            let mut meta = row("d/x", 20);
            meta.meta_only = true;
            c.add_files(inc, &[meta, row("d/w", 21)]).unwrap();
            c.add_deletions(inc, &[(b"d/y".to_vec(), 1), (b"d2/z".to_vec(), 1)])
                .unwrap();
            c.finish_job(inc, crate::JobState::Ok, 2, 10, 1.0, 4).unwrap();
            let whole = c.tree_at(inc).unwrap();
            for prefix in ["d", "d2", "d/x", "e", "nothing", "."] {
                let p = prefix.as_bytes();
                let expected: crate::Tree = (whole.clone().into_iter())
                    .filter(|(k, _)| {
                        p == b"." || k == p || (k.starts_with(p) && k.get(p.len()) == Some(&b'/'))
                    })
                    .collect();
                assert_eq!(c.tree_under(inc, p).unwrap(), expected, "{prefix}");
            }
            let d: Vec<_> = c.tree_under(inc, b"d").unwrap().into_keys().collect();
            assert_eq!(d, [&b"d"[..], b"d/w", b"d/x"]);
        }
    }
}
