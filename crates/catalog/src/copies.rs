//! Copies of jobs (schema 20): a job's further copies on other cartridges, each
//! written block for block (docs/COPIES.md). The job's own cartridges
//! (`job_volumes`) are its copy 1; each further copy has a number from 2, a pool,
//! a state, and its segments. A copy segment holds a run of the original's
//! objects (blocks and filemarks), one original segment's or part of one, in the
//! same order: the original's object at LBN `orig_first_lbn + i` of its volume
//! sequence `orig_seq` is the copy's at `first_lbn + i` of `volume`. Positions the
//! catalog and the index give in the original's terms are turned into the copy's
//! by [`copy_position`].

use crate::db::{params, BoxError, FromValue, OptionalExtension, Value};
use crate::error::{Doing, Result};
use crate::{write_tx, Catalog};
use std::fmt;

/// Where a copy stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyState {
    /// Being written: not read by restores.
    Writing,
    /// Written whole and checked as it was written: restores may read it.
    Ok,
    /// Given up (its cartridges were recycled, or the job moved elsewhere).
    Retired,
}

impl CopyState {
    /// The word the catalog stores.
    pub fn as_str(self) -> &'static str {
        match self {
            CopyState::Writing => "writing",
            CopyState::Ok => "ok",
            CopyState::Retired => "retired",
        }
    }

    fn parse(s: &str) -> Option<CopyState> {
        match s {
            "writing" => Some(CopyState::Writing),
            "ok" => Some(CopyState::Ok),
            "retired" => Some(CopyState::Retired),
            _ => None,
        }
    }
}

impl fmt::Display for CopyState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stored copy state the catalog does not know.
#[derive(Debug, thiserror::Error)]
#[error("the copy state {0:?} is none of writing, ok, retired")]
struct UnknownCopyState(String);

impl FromValue for CopyState {
    fn from_value(v: &Value) -> std::result::Result<Self, BoxError> {
        let s = crate::db::text(v)?;
        CopyState::parse(s).ok_or_else(|| Box::new(UnknownCopyState(s.into())) as BoxError)
    }
}

/// A further copy of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobCopy {
    /// The job.
    pub job_id: i64,
    /// Its number: 2 for the first copy after the job's own cartridges.
    pub copy_no: u32,
    /// The pool its cartridges belong to.
    pub pool: String,
    /// Where it stands.
    pub state: CopyState,
    /// When it was begun, nanoseconds since the epoch.
    pub created_ns: i64,
}

/// One segment of a copy: a run of the original's objects on one cartridge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopySegment {
    /// Its number within the copy, from 0, in the order written.
    pub seq: u32,
    /// The cartridge it is on (catalog id).
    pub volume_id: i64,
    /// The LBN on that cartridge of the first object copied.
    pub first_lbn: u64,
    /// The original's volume sequence the objects come from.
    pub orig_seq: u32,
    /// The original's LBN of the first object copied.
    pub orig_first_lbn: u64,
    /// Objects copied, once the segment is closed; `None` while it is written.
    pub objects: Option<u64>,
}

impl CopySegment {
    /// Whether it holds the original's object at (`seq`, `lbn`).
    pub fn holds(&self, seq: u32, lbn: u64) -> bool {
        self.orig_seq == seq
            && lbn >= self.orig_first_lbn
            && self.objects.is_none_or(|n| lbn - self.orig_first_lbn < n)
    }
}

/// Where the original's object at volume sequence `seq`, LBN `lbn` lies in a
/// copy of `segments`: its cartridge (catalog id) and LBN there; `None` when
/// the copy does not hold it.
pub fn copy_position(segments: &[CopySegment], seq: u32, lbn: u64) -> Option<(i64, u64)> {
    let s = segments.iter().find(|s| s.holds(seq, lbn))?;
    Some((
        s.volume_id,
        s.first_lbn.saturating_add(lbn - s.orig_first_lbn),
    ))
}

const SEGMENT_COLS: &str = "seq, volume_id, first_lbn, orig_seq, orig_first_lbn, objects";

fn segment_row(r: &crate::db::Row) -> crate::db::Result<CopySegment> {
    Ok(CopySegment {
        seq: r.get::<i64>(0)?.max(0) as u32,
        volume_id: r.get(1)?,
        first_lbn: r.get::<i64>(2)?.max(0) as u64,
        orig_seq: r.get::<i64>(3)?.max(0) as u32,
        orig_first_lbn: r.get::<i64>(4)?.max(0) as u64,
        objects: r.get::<Option<i64>>(5)?.map(|n| n.max(0) as u64),
    })
}

impl Catalog {
    /// Begins a further copy of `job` on cartridges of `pool`: its number is one
    /// more than the job's highest (2 for the first), state writing.
    pub fn begin_copy(&self, job: i64, pool: &str, now_ns: i64) -> Result<u32> {
        let run = || -> crate::db::Result<u32> {
            let tx = write_tx(&self.conn)?;
            let top: Option<i64> = tx.query_row(
                "SELECT MAX(copy_no) FROM job_copies WHERE job_id = ?1",
                params![job],
                |r| r.get(0),
            )?;
            let no = top.unwrap_or(1).max(1) + 1;
            tx.execute(
                "INSERT INTO job_copies (job_id, copy_no, pool, state, created_ns) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![job, no, pool, CopyState::Writing.as_str(), now_ns],
            )?;
            tx.commit()?;
            Ok(no as u32)
        };
        run().doing("begin a copy")
    }

    /// Records copy `copy_no` of `job` as found (a rebuild from tape), in `state`.
    pub fn record_copy(
        &self,
        job: i64,
        copy_no: u32,
        pool: &str,
        state: CopyState,
        created_ns: i64,
    ) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO job_copies (job_id, copy_no, pool, state, created_ns) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![job, copy_no as i64, pool, state.as_str(), created_ns],
            )
            .doing("record a copy")?;
        Ok(())
    }

    /// Records a segment of copy `copy_no` of `job`, as it is begun.
    pub fn add_copy_segment(&self, job: i64, copy_no: u32, s: &CopySegment) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO copy_segments (job_id, copy_no, seq, volume_id, first_lbn, \
                 orig_seq, orig_first_lbn, objects) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    job,
                    copy_no as i64,
                    s.seq as i64,
                    s.volume_id,
                    s.first_lbn as i64,
                    s.orig_seq as i64,
                    s.orig_first_lbn as i64,
                    s.objects.map(|n| n as i64)
                ],
            )
            .doing("record a copy segment")?;
        Ok(())
    }

    /// Closes segment `seq` of copy `copy_no` of `job`: it holds `objects` objects.
    pub fn end_copy_segment(&self, job: i64, copy_no: u32, seq: u32, objects: u64) -> Result<()> {
        self.conn
            .execute(
                "UPDATE copy_segments SET objects = ?4 \
                 WHERE job_id = ?1 AND copy_no = ?2 AND seq = ?3",
                params![job, copy_no as i64, seq as i64, objects as i64],
            )
            .doing("close a copy segment")?;
        Ok(())
    }

    /// Sets the state of copy `copy_no` of `job`.
    pub fn set_copy_state(&self, job: i64, copy_no: u32, state: CopyState) -> Result<()> {
        self.conn
            .execute(
                "UPDATE job_copies SET state = ?3 WHERE job_id = ?1 AND copy_no = ?2",
                params![job, copy_no as i64, state.as_str()],
            )
            .doing("set a copy's state")?;
        Ok(())
    }

    /// The further copies of `job`, by number.
    pub fn copies(&self, job: i64) -> Result<Vec<JobCopy>> {
        let run = || -> crate::db::Result<Vec<JobCopy>> {
            let mut st = self.conn.prepare_cached(
                "SELECT copy_no, pool, state, created_ns FROM job_copies \
                 WHERE job_id = ?1 ORDER BY copy_no",
            )?;
            st.query_map(params![job], |r| {
                Ok(JobCopy {
                    job_id: job,
                    copy_no: r.get::<i64>(0)?.max(0) as u32,
                    pool: r.get(1)?,
                    state: r.get(2)?,
                    created_ns: r.get(3)?,
                })
            })?
            .collect()
        };
        run().doing("read a job's copies")
    }

    /// The segments of copy `copy_no` of `job`, in the order written.
    pub fn copy_segments(&self, job: i64, copy_no: u32) -> Result<Vec<CopySegment>> {
        let run = || -> crate::db::Result<Vec<CopySegment>> {
            let mut st = self.conn.prepare_cached(&format!(
                "SELECT {SEGMENT_COLS} FROM copy_segments \
                 WHERE job_id = ?1 AND copy_no = ?2 ORDER BY seq"
            ))?;
            st.query_map(params![job, copy_no as i64], segment_row)?
                .collect()
        };
        run().doing("read a copy's segments")
    }

    /// The copies (job, copy number) that have a segment on `volume_id`.
    pub fn copy_on_volume(&self, volume_id: i64) -> Result<Vec<(i64, u32)>> {
        let run = || -> crate::db::Result<Vec<(i64, u32)>> {
            let mut st = self.conn.prepare_cached(
                "SELECT DISTINCT job_id, copy_no FROM copy_segments \
                 WHERE volume_id = ?1 ORDER BY job_id, copy_no",
            )?;
            st.query_map(params![volume_id], |r| {
                Ok((r.get(0)?, r.get::<i64>(1)?.max(0) as u32))
            })?
            .collect()
        };
        run().doing("read the copies on a volume")
    }

    /// Forgets copy `copy_no` of `job` and its segments.
    pub fn forget_copy(&self, job: i64, copy_no: u32) -> Result<()> {
        let run = || -> crate::db::Result<()> {
            let tx = write_tx(&self.conn)?;
            for table in ["copy_segments", "job_copies"] {
                tx.execute(
                    &format!("DELETE FROM {table} WHERE job_id = ?1 AND copy_no = ?2"),
                    params![job, copy_no as i64],
                )?;
            }
            tx.commit()
        };
        run().doing("forget a copy")
    }

    /// Whether copy `copy_no` of `job` exists.
    pub fn has_copy(&self, job: i64, copy_no: u32) -> Result<bool> {
        let found: Option<i64> = self
            .conn
            .query_row(
                "SELECT copy_no FROM job_copies WHERE job_id = ?1 AND copy_no = ?2",
                params![job, copy_no as i64],
                |r| r.get(0),
            )
            .optional()
            .doing("look for a copy")?;
        Ok(found.is_some())
    }
}

/// A job's place on a cartridge: its own segments (copy 1) or a further copy's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Place {
    /// The job.
    pub job_id: i64,
    /// 1 for the job's own segments, else the copy's number.
    pub copy_no: u32,
}

impl Catalog {
    /// The copy that stands in for `job`'s own cartridges since it was moved
    /// (`migrate`, `repack`); `None` while the job is on its own cartridges.
    pub fn moved_to(&self, job: i64) -> Result<Option<u32>> {
        let n: Option<i64> = self
            .conn
            .query_row(
                "SELECT copy_no FROM job_moves WHERE job_id = ?1",
                params![job],
                |r| r.get(0),
            )
            .optional()
            .doing("read where a job moved")?;
        Ok(n.map(|n| n.max(0) as u32))
    }

    /// Moves `job` to its copy `copy_no`, in one transaction: the copy becomes
    /// `ok` and stands in for the place the job was read from until now (its own
    /// segments, or the copy it was moved to before, which is forgotten). The
    /// job's segments (`job_volumes`) keep their positions, which are the
    /// original's and which the copy maps; each now names the cartridge of the
    /// copy that holds its first object, so that a cartridge the job left holds
    /// none of it. Returns the cartridges (catalog ids) of the place given up.
    pub fn move_job(&self, job: i64, copy_no: u32, now_ns: i64) -> Result<Vec<i64>> {
        let run = || -> crate::db::Result<std::result::Result<Vec<i64>, u32>> {
            let tx = write_tx(&self.conn)?;
            let segs: Vec<CopySegment> = {
                let mut st = tx.prepare_cached(&format!(
                    "SELECT {SEGMENT_COLS} FROM copy_segments \
                     WHERE job_id = ?1 AND copy_no = ?2 ORDER BY seq"
                ))?;
                let rows = st.query_map(params![job, copy_no as i64], segment_row)?;
                rows.collect::<crate::db::Result<_>>()?
            };
            let before: Option<i64> = tx
                .query_row(
                    "SELECT copy_no FROM job_moves WHERE job_id = ?1",
                    params![job],
                    |r| r.get(0),
                )
                .optional()?;
            let mut old: Vec<i64> = match before {
                Some(n) => {
                    let mut st = tx.prepare_cached(
                        "SELECT DISTINCT volume_id FROM copy_segments \
                         WHERE job_id = ?1 AND copy_no = ?2",
                    )?;
                    let rows = st.query_map(params![job, n], |r| r.get::<i64>(0))?;
                    rows.collect::<crate::db::Result<_>>()?
                }
                None => {
                    let mut st = tx.prepare_cached(
                        "SELECT DISTINCT volume_id FROM job_volumes WHERE job_id = ?1",
                    )?;
                    let rows = st.query_map(params![job], |r| r.get::<i64>(0))?;
                    rows.collect::<crate::db::Result<_>>()?
                }
            };
            let vols: Vec<(i64, i64)> = {
                let mut st = tx.prepare_cached(
                    "SELECT seq, first_lbn FROM job_volumes WHERE job_id = ?1 ORDER BY seq",
                )?;
                let rows = st.query_map(params![job], |r| Ok((r.get(0)?, r.get(1)?)))?;
                rows.collect::<crate::db::Result<_>>()?
            };
            for (seq, first) in vols {
                let Some((volume, _)) =
                    copy_position(&segs, seq.max(0) as u32, first.max(0) as u64)
                else {
                    // The copy does not hold the segment: nothing is changed.
                    return Ok(Err(seq.max(0) as u32));
                };
                tx.execute(
                    "UPDATE job_volumes SET volume_id = ?3 WHERE job_id = ?1 AND seq = ?2",
                    params![job, seq, volume],
                )?;
            }
            if let Some(n) = before {
                for table in ["copy_segments", "job_copies"] {
                    tx.execute(
                        &format!("DELETE FROM {table} WHERE job_id = ?1 AND copy_no = ?2"),
                        params![job, n],
                    )?;
                }
            }
            tx.execute(
                "UPDATE job_copies SET state = ?3 WHERE job_id = ?1 AND copy_no = ?2",
                params![job, copy_no as i64, CopyState::Ok.as_str()],
            )?;
            tx.execute(
                "INSERT INTO job_moves (job_id, copy_no, moved_ns) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (job_id) DO UPDATE SET copy_no = excluded.copy_no, \
                 moved_ns = excluded.moved_ns",
                params![job, copy_no as i64, now_ns],
            )?;
            tx.commit()?;
            old.sort_unstable();
            Ok(Ok(old))
        };
        match run().doing("move a job to its copy")? {
            Ok(old) => Ok(old),
            Err(seq) => Err(crate::error::CatalogError::CopyMissesSegment { job, copy_no, seq }),
        }
    }

    /// Makes copy `new` of `job` (written to replace copy `old`, and read back)
    /// `ok` and forgets copy `old`, in one transaction.
    pub fn replace_copy(&self, job: i64, old: u32, new: u32) -> Result<()> {
        let run = || -> crate::db::Result<()> {
            let tx = write_tx(&self.conn)?;
            tx.execute(
                "UPDATE job_copies SET state = ?3 WHERE job_id = ?1 AND copy_no = ?2",
                params![job, new as i64, CopyState::Ok.as_str()],
            )?;
            for table in ["copy_segments", "job_copies"] {
                tx.execute(
                    &format!("DELETE FROM {table} WHERE job_id = ?1 AND copy_no = ?2"),
                    params![job, old as i64],
                )?;
            }
            tx.commit()
        };
        run().doing("replace a copy")
    }

    /// Records that `job` is read from its copy `copy_no`, which stands in for
    /// its own cartridges (a rebuild that found the job only in copies).
    pub fn record_move(&self, job: i64, copy_no: u32, now_ns: i64) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO job_moves (job_id, copy_no, moved_ns) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (job_id) DO UPDATE SET copy_no = excluded.copy_no",
                params![job, copy_no as i64, now_ns],
            )
            .doing("record where a job moved")?;
        Ok(())
    }

    /// The places of jobs on `volume_id`: the segments of jobs read from their
    /// own cartridges, and the segments of further copies in any state.
    pub fn places_on_volume(&self, volume_id: i64) -> Result<Vec<Place>> {
        let run = || -> crate::db::Result<Vec<Place>> {
            let mut st = self.conn.prepare_cached(
                "SELECT DISTINCT job_id, 1 FROM job_volumes WHERE volume_id = ?1 \
                 AND job_id NOT IN (SELECT job_id FROM job_moves) \
                 UNION SELECT DISTINCT job_id, copy_no FROM copy_segments WHERE volume_id = ?1 \
                 ORDER BY 1, 2",
            )?;
            st.query_map(params![volume_id], |r| {
                Ok(Place {
                    job_id: r.get(0)?,
                    copy_no: r.get::<i64>(1)?.max(0) as u32,
                })
            })?
            .collect()
        };
        run().doing("read the jobs on a volume")
    }
}

impl Catalog {
    /// Records that `barcode` left the library through a mail slot at `now_ns`.
    pub fn set_offsite(&self, barcode: &str, now_ns: i64) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO offsite (barcode, since_ns) VALUES (?1, ?2) \
                 ON CONFLICT (barcode) DO UPDATE SET since_ns = excluded.since_ns",
                params![barcode, now_ns],
            )
            .doing("mark a cartridge offsite")?;
        Ok(())
    }

    /// Records that `barcode` is back in the library.
    pub fn clear_offsite(&self, barcode: &str) -> Result<()> {
        self.conn
            .execute("DELETE FROM offsite WHERE barcode = ?1", params![barcode])
            .doing("bring a cartridge back onsite")?;
        Ok(())
    }

    /// Every cartridge offsite, with since when, by barcode.
    pub fn offsite(&self) -> Result<Vec<(String, i64)>> {
        let run = || -> crate::db::Result<Vec<(String, i64)>> {
            let mut st = self
                .conn
                .prepare_cached("SELECT barcode, since_ns FROM offsite ORDER BY barcode")?;
            st.query_map(params![], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect()
        };
        run().doing("list the cartridges offsite")
    }

    /// Since when `barcode` is offsite (nanoseconds since the epoch), if it is.
    pub fn offsite_since(&self, barcode: &str) -> Result<Option<i64>> {
        self.conn
            .query_row(
                "SELECT since_ns FROM offsite WHERE barcode = ?1",
                params![barcode],
                |r| r.get(0),
            )
            .optional()
            .doing("look whether a cartridge is offsite")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{both, scratch};

    fn seg(
        seq: u32,
        volume_id: i64,
        first_lbn: u64,
        orig: (u32, u64),
        n: Option<u64>,
    ) -> CopySegment {
        CopySegment {
            seq,
            volume_id,
            first_lbn,
            orig_seq: orig.0,
            orig_first_lbn: orig.1,
            objects: n,
        }
    }

    #[test]
    fn an_original_position_is_found_in_the_copy_segment_that_holds_it() {
        // Original volume 0 (LBN 2..=101) copied in two parts, and volume 1.
        let segs = [
            seg(0, 7, 3, (0, 2), Some(60)),
            seg(1, 8, 3, (0, 62), Some(40)),
            seg(2, 8, 45, (1, 2), None),
        ];
        assert_eq!(copy_position(&segs, 0, 2), Some((7, 3)));
        assert_eq!(copy_position(&segs, 0, 61), Some((7, 62)));
        assert_eq!(copy_position(&segs, 0, 62), Some((8, 3)));
        assert_eq!(copy_position(&segs, 0, 101), Some((8, 42)));
        assert_eq!(copy_position(&segs, 0, 102), None);
        assert_eq!(copy_position(&segs, 0, 1), None);
        // A segment still written holds what follows its first object.
        assert_eq!(copy_position(&segs, 1, 500), Some((8, 543)));
        assert_eq!(copy_position(&segs, 2, 2), None);
    }

    both! {
        fn a_cartridge_is_offsite_from_its_export_to_its_import() {
            let (_dir, c) = scratch();
            assert_eq!(c.offsite_since("TL0001L9").unwrap(), None);
            c.set_offsite("TL0001L9", 7).unwrap();
            c.set_offsite("TL0001L9", 9).unwrap();
            assert_eq!(c.offsite_since("TL0001L9").unwrap(), Some(9));
            assert_eq!(c.offsite_since("TL0002L9").unwrap(), None);
            assert_eq!(c.offsite().unwrap(), vec![("TL0001L9".to_string(), 9)]);
            c.clear_offsite("TL0001L9").unwrap();
            assert_eq!(c.offsite_since("TL0001L9").unwrap(), None);
        }
    }

    both! {
        fn copies_are_numbered_from_two_with_their_segments() {
            let (_dir, c) = scratch();
            let v = c.add_volume("TL0001L9", [3; 16], "copies", 262144, 0).unwrap();
            let j = c.begin_job(1, "j", 0, 262144, &[]).unwrap();
            assert!(c.copies(j).unwrap().is_empty());
            let no = c.begin_copy(j, "copies", 5).unwrap();
            assert_eq!(no, 2);
            assert!(c.has_copy(j, 2).unwrap());
            assert!(!c.has_copy(j, 3).unwrap());
            c.add_copy_segment(j, no, &seg(0, v.id, 3, (0, 2), None)).unwrap();
            c.end_copy_segment(j, no, 0, 40).unwrap();
            c.set_copy_state(j, no, CopyState::Ok).unwrap();
            assert_eq!(
                c.copies(j).unwrap(),
                vec![JobCopy {
                    job_id: j,
                    copy_no: 2,
                    pool: "copies".into(),
                    state: CopyState::Ok,
                    created_ns: 5,
                }]
            );
            assert_eq!(c.copy_segments(j, 2).unwrap(), vec![seg(0, v.id, 3, (0, 2), Some(40))]);
            assert_eq!(c.copy_on_volume(v.id).unwrap(), vec![(j, 2)]);
            assert_eq!(c.begin_copy(j, "copies", 6).unwrap(), 3);
            c.forget_copy(j, 2).unwrap();
            assert_eq!(c.copies(j).unwrap().len(), 1);
            assert!(c.copy_segments(j, 2).unwrap().is_empty());
            assert!(c.copy_on_volume(v.id).unwrap().is_empty());
        }
    }
}
