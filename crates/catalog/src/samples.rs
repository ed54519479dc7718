//! Samples: the per-second measurements of a job's backup and last restore.

use crate::db::params;
use crate::db::{BoxError, FromValue, Value};
use crate::error::{Doing, Result};
use crate::write_tx;
use crate::Catalog;
use std::fmt;

/// What a series of samples measures.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Series {
    /// A drive of the library, by index.
    Drive(usize),
    /// A stream of the job, by name.
    Stream(String),
    /// The disk stages a job was backed up through: the space held on them.
    Stage,
}

impl fmt::Display for Series {
    /// The name the catalog stores: `drive:N`, `stream:NAME` or `stage`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Series::Drive(d) => write!(f, "drive:{d}"),
            Series::Stream(s) => write!(f, "stream:{s}"),
            Series::Stage => f.write_str("stage"),
        }
    }
}

impl Series {
    /// Reads a stored series name back; `None` for a name of none of the forms.
    pub fn parse(s: &str) -> Option<Series> {
        if s == "stage" {
            return Some(Series::Stage);
        }
        if let Some(name) = s.strip_prefix("stream:") {
            return Some(Series::Stream(name.to_string()));
        }
        s.strip_prefix("drive:")
            .and_then(|d| d.parse().ok())
            .map(Series::Drive)
    }
}

/// A stored name of none of the forms.
#[derive(Debug, thiserror::Error)]
#[error("the series name {0:?} is none of drive:N, stream:NAME, stage")]
struct UnknownSeries(String);

impl FromValue for Series {
    fn from_value(v: &Value) -> std::result::Result<Self, BoxError> {
        let s = crate::db::text(v)?;
        Series::parse(s).ok_or_else(|| Box::new(UnknownSeries(s.into())) as BoxError)
    }
}

/// What a drive was doing between two times of a job, other than moving data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// Changing cartridges: the changer's move, the drive threading the tape (and
    /// unloading the cartridge before it, when one is changed for another).
    Load,
    /// Finding the place to write or read: the label, the end of data, a locate.
    Position,
    /// Writing the job's index and end record.
    Index,
}

impl Phase {
    /// The word the catalog stores.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Load => "load",
            Phase::Position => "position",
            Phase::Index => "index",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stored phase name the catalog does not know.
#[derive(Debug, thiserror::Error)]
#[error("the phase name {0:?} is none of load, position, index")]
struct UnknownPhase(String);

impl FromValue for Phase {
    fn from_value(v: &Value) -> std::result::Result<Self, BoxError> {
        match crate::db::text(v)? {
            "load" => Ok(Phase::Load),
            "position" => Ok(Phase::Position),
            "index" => Ok(Phase::Index),
            s => Err(Box::new(UnknownPhase(s.into()))),
        }
    }
}

/// A span of a job's time axis in which a drive did not move data: a [`Phase`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    /// The drive, when the library has drives by index.
    pub drive: Option<usize>,
    /// What the drive was doing.
    pub phase: Phase,
    /// Milliseconds since the job (or the restore) started, when it began.
    pub from_ms: u64,
    /// When it ended.
    pub to_ms: u64,
}

/// One measurement of one stream, drive or the stages during a job.
///
/// A [`Series::Stage`] sample is a level, not a count: `bytes` is the space the
/// stages hold (chunks staged and not yet given back, and the chunk being written),
/// and `pool_fill` that space as a share of the stages' size.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The stream, drive or stages measured.
    pub series: Series,
    /// Milliseconds since the job (or the restore) started.
    pub t_ms: u64,
    /// Bytes so far; for the stages, bytes held now.
    pub bytes: u64,
    /// Fill of the buffer pool, 0 to 1; for the stages, their fill, 0 to 1.
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
        let run = || -> crate::db::Result<()> {
            let tx = write_tx(&self.conn)?;
            {
                let mut st = tx.prepare_cached(
                    "INSERT INTO samples (job_id, op, series, t_ms, bytes, pool_fill, \
                     buffer_fill, backhitches, speed_mb_s) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) \
                     ON CONFLICT (job_id, op, series, t_ms) DO UPDATE SET bytes = excluded.bytes, \
                     pool_fill = excluded.pool_fill, buffer_fill = excluded.buffer_fill, \
                     backhitches = excluded.backhitches, speed_mb_s = excluded.speed_mb_s",
                )?;
                for x in samples {
                    st.execute(params![
                        job,
                        op,
                        x.series.to_string(),
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

    /// Stores a job's marks for one operation, replacing those an earlier run of the
    /// same operation left, in one transaction.
    pub fn set_marks(&self, job: i64, op: &str, marks: &[Mark]) -> Result<()> {
        let run = || -> crate::db::Result<()> {
            let tx = write_tx(&self.conn)?;
            tx.execute(
                "DELETE FROM marks WHERE job_id = ?1 AND op = ?2",
                params![job, op],
            )?;
            {
                let mut st = tx.prepare_cached(
                    "INSERT INTO marks (job_id, op, drive, phase, from_ms, to_ms) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )?;
                for m in marks {
                    st.execute(params![
                        job,
                        op,
                        m.drive.map(|d| d as i64),
                        m.phase.as_str(),
                        m.from_ms as i64,
                        m.to_ms as i64
                    ])?;
                }
            }
            tx.commit()
        };
        run().doing("record marks")
    }

    /// A job's marks of one operation, in time order.
    pub fn marks(&self, job: i64, op: &str) -> Result<Vec<Mark>> {
        let run = || -> crate::db::Result<Vec<Mark>> {
            let mut st = self.conn.prepare_cached(
                "SELECT drive, phase, from_ms, to_ms FROM marks \
                 WHERE job_id = ?1 AND op = ?2 ORDER BY from_ms, drive",
            )?;

            st.query_map(params![job, op], |r| {
                Ok(Mark {
                    drive: r.get::<Option<i64>>(0)?.map(|d| d.max(0) as usize),
                    phase: r.get(1)?,
                    from_ms: r.get::<i64>(2)?.max(0) as u64,
                    to_ms: r.get::<i64>(3)?.max(0) as u64,
                })
            })?
            .collect()
        };
        run().doing("read marks")
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
        let run = || -> crate::db::Result<Vec<Sample>> {
            let mut st = self.conn.prepare_cached(
                "SELECT series, t_ms, bytes, pool_fill, buffer_fill, backhitches, speed_mb_s \
                 FROM samples WHERE job_id = ?1 AND op = ?2 ORDER BY series, t_ms",
            )?;

            st.query_map(params![job, op], |r| {
                Ok(Sample {
                    series: r.get(0)?,
                    t_ms: r.get::<i64>(1)? as u64,
                    bytes: r.get::<i64>(2)? as u64,
                    pool_fill: r.get(3)?,
                    buffer_fill: r.get(4)?,
                    backhitches: r.get::<i64>(5)? as u64,
                    speed_mb_s: r.get(6)?,
                })
            })?
            .collect()
        };
        run().doing("read samples")
    }
}

/// One second of a recall of hierarchical storage (`hsm recall`, or a batch of
/// the daemon's), kept with each job the recall read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecallSample {
    /// Milliseconds since the recall started.
    pub t_ms: u64,
    /// Files written back into their place so far.
    pub files: u64,
    /// Bytes written back so far.
    pub bytes: u64,
    /// Files asked for and not back yet.
    pub waiting: u64,
}

impl Catalog {
    /// Stores the samples of a recall that read `job`, replacing those of an
    /// earlier recall, in one transaction.
    pub fn set_recall_samples(&self, job: i64, samples: &[RecallSample]) -> Result<()> {
        let run = || -> crate::db::Result<()> {
            let tx = write_tx(&self.conn)?;
            tx.execute("DELETE FROM recall_samples WHERE job_id = ?1", params![job])?;
            {
                let mut st = tx.prepare_cached(
                    "INSERT INTO recall_samples (job_id, t_ms, files, bytes, waiting) \
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )?;
                for x in samples {
                    st.execute(params![
                        job,
                        x.t_ms as i64,
                        x.files as i64,
                        x.bytes as i64,
                        x.waiting as i64
                    ])?;
                }
            }
            tx.commit()
        };
        run().doing("record recall samples")
    }

    /// The samples of the last recall that read `job`, in time order.
    pub fn recall_samples(&self, job: i64) -> Result<Vec<RecallSample>> {
        let run = || -> crate::db::Result<Vec<RecallSample>> {
            let mut st = self.conn.prepare_cached(
                "SELECT t_ms, files, bytes, waiting FROM recall_samples \
                 WHERE job_id = ?1 ORDER BY t_ms",
            )?;
            st.query_map(params![job], |r| {
                Ok(RecallSample {
                    t_ms: r.get::<i64>(0)?.max(0) as u64,
                    files: r.get::<i64>(1)?.max(0) as u64,
                    bytes: r.get::<i64>(2)?.max(0) as u64,
                    waiting: r.get::<i64>(3)?.max(0) as u64,
                })
            })?
            .collect()
        };
        run().doing("read recall samples")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::both;
    use crate::tests::scratch;

    fn at(series: &str, t_ms: u64, bytes: u64) -> Sample {
        Sample {
            series: Series::parse(series).unwrap(),
            t_ms,
            bytes,
            pool_fill: 0.0,
            buffer_fill: None,
            backhitches: 0,
            speed_mb_s: Some(300.0),
        }
    }

    both! {
        fn a_recalls_samples_replace_the_last_recalls() {
            let (_dir, c) = scratch();
            let j = c.begin_job(1, "j", 0, 262144, &[]).unwrap();
            let s = |t_ms, files, waiting| RecallSample {
                t_ms,
                files,
                bytes: files * 10,
                waiting,
            };
            c.set_recall_samples(j, &[s(2000, 3, 0), s(1000, 0, 3)]).unwrap();
            assert_eq!(
                c.recall_samples(j).unwrap(),
                vec![s(1000, 0, 3), s(2000, 3, 0)]
            );
            c.set_recall_samples(j, &[s(500, 1, 0)]).unwrap();
            assert_eq!(c.recall_samples(j).unwrap(), vec![s(500, 1, 0)]);
        }
    }

    both! {
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
    }

    both! {
        fn samples_round_trip_per_operation() {
            let (_dir, c) = crate::tests::scratch();
            let job = c.begin_job(1, "j", 0, 262144, &[]).unwrap();
            let s = |series: &str, t_ms, bytes| Sample {
                series: Series::parse(series).unwrap(),
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

    #[test]
    fn series_names_round_trip() {
        for s in [
            Series::Drive(0),
            Series::Drive(12),
            Series::Stream("a:b".into()),
            Series::Stream("stage".into()),
            Series::Stage,
        ] {
            assert_eq!(Series::parse(&s.to_string()), Some(s));
        }
        assert_eq!(Series::parse("drive:x"), None);
        assert_eq!(Series::parse("other"), None);
        assert_eq!(Series::parse("stage:0"), None);
    }

    both! {
        fn a_stored_name_of_neither_form_is_an_error_with_its_cause() {
            let (_t, c) = scratch();
            let j = c.begin_job(1, "j", 0, 65536, &[]).unwrap();
            c.add_samples(j, "backup", &[at("drive:0", 1000, 9)])
                .unwrap();
            c.conn
                .execute("UPDATE samples SET series = 'tape:9'", params![])
                .unwrap();
            let e = c.samples(j, "backup").unwrap_err();
            let mut chain = Vec::new();
            let mut cur: Option<&dyn std::error::Error> = Some(&e);
            while let Some(x) = cur {
                chain.push(x.to_string());
                cur = x.source();
            }
            assert!(chain[0].contains("read samples"), "{chain:?}");
            assert!(chain.iter().any(|m| m.contains("tape:9")), "{chain:?}");
        }
    }

    both! {
        fn marks_replace_those_of_the_same_operation_and_come_back_in_time_order() {
            let (_t, c) = scratch();
            let j = c.begin_job(1, "j", 0, 65536, &[]).unwrap();
            let m = |drive, phase, from_ms, to_ms| Mark {
                drive,
                phase,
                from_ms,
                to_ms,
            };
            c.set_marks(j, "backup", &[m(Some(1), Phase::Index, 9000, 9500)])
                .unwrap();
            c.set_marks(
                j,
                "backup",
                &[
                    m(Some(0), Phase::Index, 9000, 9800),
                    m(Some(0), Phase::Load, 0, 4000),
                    m(None, Phase::Position, 4000, 4100),
                ],
            )
            .unwrap();
            c.set_marks(j, "restore", &[m(Some(0), Phase::Load, 0, 1)])
                .unwrap();
            let got = c.marks(j, "backup").unwrap();
            assert_eq!(
                got,
                vec![
                    m(Some(0), Phase::Load, 0, 4000),
                    m(None, Phase::Position, 4000, 4100),
                    m(Some(0), Phase::Index, 9000, 9800),
                ]
            );
            c.conn
                .execute("UPDATE marks SET phase = 'rewind'", params![])
                .unwrap();
            let e = c.marks(j, "backup").unwrap_err();
            assert!(format!("{e}").contains("read marks"), "{e}");
            let cause = std::error::Error::source(&e).map(|x| x.to_string());
            assert!(cause.is_some(), "{e}");
        }
    }
}
