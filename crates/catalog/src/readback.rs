//! Read-back (schema 22): the last time each job was read back whole and
//! checked (`verify`, by hand or on a schedule), what it found, and how.

use crate::db::{params, OptionalExtension};
use crate::error::{Doing, Result};
use crate::Catalog;

/// The last read-back of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastVerify {
    /// The job.
    pub job_id: i64,
    /// When it ended, nanoseconds since the epoch.
    pub at_ns: i64,
    /// Whether every block and every file checked out.
    pub ok: bool,
    /// Blocks read and checked.
    pub blocks: u64,
    /// Blocks that were bad.
    pub bad_blocks: u64,
    /// How it was run: `verify` by hand, or `schedule NAME`.
    pub how: String,
}

impl Catalog {
    /// Records a read-back of a job, replacing the one before.
    pub fn record_verify(&self, v: &LastVerify) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO job_verifies (job_id, at_ns, ok, blocks, bad_blocks, how) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (job_id) DO UPDATE SET \
                 at_ns = excluded.at_ns, ok = excluded.ok, blocks = excluded.blocks, \
                 bad_blocks = excluded.bad_blocks, how = excluded.how",
                params![
                    v.job_id,
                    v.at_ns,
                    v.ok,
                    v.blocks as i64,
                    v.bad_blocks as i64,
                    v.how.as_str()
                ],
            )
            .doing("record a verify")?;
        Ok(())
    }

    /// The last read-back of `job`, if it was ever read back.
    pub fn last_verify(&self, job: i64) -> Result<Option<LastVerify>> {
        self.conn
            .query_row(
                "SELECT at_ns, ok, blocks, bad_blocks, how FROM job_verifies WHERE job_id = ?1",
                params![job],
                |r| {
                    Ok(LastVerify {
                        job_id: job,
                        at_ns: r.get(0)?,
                        ok: r.get(1)?,
                        blocks: r.get::<i64>(2)?.max(0) as u64,
                        bad_blocks: r.get::<i64>(3)?.max(0) as u64,
                        how: r.get(4)?,
                    })
                },
            )
            .optional()
            .doing("read a job's last verify")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{both, scratch};

    both! {
        fn a_jobs_last_verify_replaces_the_one_before() {
            let (_dir, c) = scratch();
            let j = c.begin_job(1, "j", 0, 262144, &[]).unwrap();
            assert_eq!(c.last_verify(j).unwrap(), None);
            let v = |at_ns, ok, bad_blocks, how: &str| LastVerify {
                job_id: j,
                at_ns,
                ok,
                blocks: 40,
                bad_blocks,
                how: how.into(),
            };
            c.record_verify(&v(5, true, 0, "verify")).unwrap();
            c.record_verify(&v(9, false, 2, "schedule weekly")).unwrap();
            assert_eq!(c.last_verify(j).unwrap(), Some(v(9, false, 2, "schedule weekly")));
        }
    }
}
