//! Samples: the per-second measurements of a job's backup and last restore.

use crate::error::{Doing, Result};
use crate::Catalog;
use rusqlite::params;

/// One measurement of one stream or drive during a job.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// `stream:NAME` or `drive:N`.
    pub series: String,
    /// Milliseconds since the job (or the restore) started.
    pub t_ms: u64,
    /// Bytes so far.
    pub bytes: u64,
    /// Fill of the buffer pool, 0 to 1.
    pub pool_fill: f64,
    /// Fill of the drive's own buffer, 0 to 1, when the drive reports it.
    pub buffer_fill: Option<f64>,
    /// Backhitches so far.
    pub backhitches: u64,
    /// The drive's speed step now, MB/s, when the drive reports it.
    pub speed_mb_s: Option<f64>,
}

impl Catalog {
    /// Stores a job's samples for one operation (`backup` or `restore`), in one
    /// transaction. A later restore's samples replace the earlier ones.
    pub fn add_samples(&self, job: i64, op: &str, samples: &[Sample]) -> Result<()> {
        let run = || -> rusqlite::Result<()> {
            let tx = self.conn.unchecked_transaction()?;
            {
                let mut st = tx.prepare_cached(
                    "INSERT OR REPLACE INTO samples (job_id, op, series, t_ms, bytes, pool_fill, \
                     buffer_fill, backhitches, speed_mb_s) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                )?;
                for x in samples {
                    st.execute(params![
                        job,
                        op,
                        x.series,
                        x.t_ms as i64,
                        x.bytes as i64,
                        x.pool_fill,
                        x.buffer_fill,
                        x.backhitches as i64,
                        x.speed_mb_s
                    ])?;
                }
            }
            tx.commit()
        };
        run().doing("record samples")
    }

    /// Forgets a job's samples of one operation.
    pub fn clear_samples(&self, job: i64, op: &str) -> Result<()> {
        self.conn
            .execute(
                "DELETE FROM samples WHERE job_id = ?1 AND op = ?2",
                params![job, op],
            )
            .doing("forget samples")?;
        Ok(())
    }

    /// A job's samples of one operation, by series and time.
    pub fn samples(&self, job: i64, op: &str) -> Result<Vec<Sample>> {
        let run = || -> rusqlite::Result<Vec<Sample>> {
            let mut st = self.conn.prepare_cached(
                "SELECT series, t_ms, bytes, pool_fill, buffer_fill, backhitches, speed_mb_s \
                 FROM samples WHERE job_id = ?1 AND op = ?2 ORDER BY series, t_ms",
            )?;
            let v = st
                .query_map(params![job, op], |r| {
                    Ok(Sample {
                        series: r.get(0)?,
                        t_ms: r.get::<_, i64>(1)? as u64,
                        bytes: r.get::<_, i64>(2)? as u64,
                        pool_fill: r.get(3)?,
                        buffer_fill: r.get(4)?,
                        backhitches: r.get::<_, i64>(5)? as u64,
                        speed_mb_s: r.get(6)?,
                    })
                })?
                .collect();
            v
        };
        run().doing("read samples")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::scratch;

    fn at(series: &str, t_ms: u64, bytes: u64) -> Sample {
        Sample {
            series: series.into(),
            t_ms,
            bytes,
            pool_fill: 0.0,
            buffer_fill: None,
            backhitches: 0,
            speed_mb_s: Some(300.0),
        }
    }

    #[test]
    fn samples_come_per_job_and_operation_by_series_and_time() {
        let (_dir, c) = scratch();
        let j = c.begin_job(1, "j", 0, 262144, &[]).unwrap();
        let k = c.begin_job(2, "k", 0, 262144, &[]).unwrap();
        c.add_samples(
            j,
            "restore",
            &[
                at("stream:b", 2000, 4),
                at("drive:0", 2000, 2),
                at("stream:b", 1000, 3),
            ],
        )
        .unwrap();
        c.add_samples(k, "restore", &[at("drive:0", 1000, 9)])
            .unwrap();
        assert_eq!(
            c.samples(j, "restore").unwrap(),
            vec![
                at("drive:0", 2000, 2),
                at("stream:b", 1000, 3),
                at("stream:b", 2000, 4)
            ]
        );
        assert!(c.samples(j, "backup").unwrap().is_empty());
        // A later restore's sample at the same time replaces the earlier one.
        c.add_samples(j, "restore", &[at("drive:0", 2000, 7)])
            .unwrap();
        assert_eq!(c.samples(j, "restore").unwrap()[0], at("drive:0", 2000, 7));
        assert_eq!(c.samples(j, "restore").unwrap().len(), 3);
        c.clear_samples(j, "restore").unwrap();
        assert_eq!(
            c.samples(k, "restore").unwrap(),
            vec![at("drive:0", 1000, 9)]
        );
    }

    #[test]
    fn samples_round_trip_per_operation() {
        let dir = tempfile::tempdir().unwrap();
        let c = Catalog::open(&dir.path().join("c.db")).unwrap();
        let job = c.begin_job(1, "j", 0, 262144, &[]).unwrap();
        let s = |series: &str, t_ms, bytes| Sample {
            series: series.into(),
            t_ms,
            bytes,
            pool_fill: 0.5,
            buffer_fill: Some(0.25),
            backhitches: 2,
            speed_mb_s: None,
        };
        let backup = vec![
            s("drive:0", 1000, 10),
            s("drive:0", 2000, 20),
            s("stream:a", 1000, 5),
        ];
        c.add_samples(job, "backup", &backup).unwrap();
        c.add_samples(job, "restore", &[s("drive:1", 1000, 7)])
            .unwrap();
        assert_eq!(c.samples(job, "backup").unwrap(), backup);
        c.clear_samples(job, "restore").unwrap();
        assert!(c.samples(job, "restore").unwrap().is_empty());
        assert_eq!(c.samples(job, "backup").unwrap().len(), 3);
    }
}
