//! Jobs: their rows, streams, segments on volumes and source errors.

use crate::db::{params, OptionalExtension};
use crate::error::{is_duplicate_key, CatalogError, Doing, Result};
use crate::volumes::{volume_row, VOLUME_COLS};
use crate::write_tx;
use crate::{Catalog, JobState, Volume};
use tapeloom_format::Level;

/// A job.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// Catalog id, the number users type.
    pub id: i64,
    /// The random tag written on tape.
    pub tag: u64,
    /// Name.
    pub name: String,
    /// Start, nanoseconds since the epoch.
    pub started_ns: i64,
    /// End, when it ended.
    pub ended_ns: Option<i64>,
    /// Running, ended (ok or partial) or failed.
    pub status: JobState,
    /// Entries written.
    pub files: u64,
    /// Data bytes stored.
    pub bytes: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Block size.
    pub block_size: u32,
    /// For an encrypted job: the fingerprint of its master key (hex) and its
    /// `JobKey` record's body (the wrapped data key).
    pub key: Option<(String, Vec<u8>)>,
    /// Its backup set (its name unless given).
    pub set: String,
    /// Its level in the set.
    pub level: Level,
    /// The job its changes are relative to (none for a full).
    pub base: Option<i64>,
    /// The client (a server token's name) that ran it; none for a job run on the
    /// server's own machine.
    pub client: Option<String>,
}

/// One volume of a job, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobVolume {
    /// Sequence within the job, from 0.
    pub seq: u32,
    /// The volume.
    pub volume: Volume,
    /// First block of the job's segment.
    pub first_lbn: u64,
    /// Last block of the segment (before its filemark), once known.
    pub last_lbn: Option<u64>,
    /// The chain of cartridges the volume belongs to, named by the sequence number of
    /// the chain's first volume: one chain per drive that wrote the job, each holding
    /// whole streams. `None` in catalogs written before chains were recorded.
    pub chain: Option<u32>,
}

/// One stream of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stream {
    /// Stream id.
    pub stream: u16,
    /// Name.
    pub name: String,
    /// Source path.
    pub source: Vec<u8>,
}

pub(crate) const JOB_COLS: &str =
    "id, tag, name, started_ns, ended_ns, status, files, bytes, seconds, block_size, key_fingerprint, job_key, set_name, level, base_job, client";

pub(crate) fn job_row(r: &crate::db::Row) -> crate::db::Result<Job> {
    Ok(Job {
        id: r.get(0)?,
        tag: r.get::<i64>(1)? as u64,
        name: r.get(2)?,
        started_ns: r.get(3)?,
        ended_ns: r.get(4)?,
        status: r.get(5)?,
        files: r.get::<i64>(6)? as u64,
        bytes: r.get::<i64>(7)? as u64,
        seconds: r.get(8)?,
        block_size: r.get(9)?,
        key: match (r.get::<Option<String>>(10)?, r.get::<Option<Vec<u8>>>(11)?) {
            (Some(f), Some(k)) => Some((f, k)),
            _ => None,
        },
        set: match r.get::<Option<String>>(12)? {
            Some(s) => s,
            None => r.get(2)?,
        },
        level: Level::from_u8(r.get(13)?).map_err(|e| crate::db::DbError::conversion(13, e))?,
        base: r.get(14)?,
        client: r.get(15)?,
    })
}

/// The reason recorded of a job its process left running (killed, or its machine
/// down): see [`Catalog::recover_interrupted`].
pub const INTERRUPTED: &str = "interrupted: the process running the job stopped before it ended";

/// The reason recorded of a job its process left running while its data was on
/// a disk stage: it is queued to be resumed (see [`Catalog::recover_interrupted`]).
pub const WAITS_ON_STAGE: &str = "its process stopped with its data on a disk stage, where it waits to be resumed (stage resume, or the server at its start)";

/// A number of PostgreSQL's advisory locks: held while a job's id is chosen.
const JOB_ID_LOCK: i64 = 0x7461_7065_6a6f_6273;

impl Catalog {
    /// Records that `client` (a server token's name) ran job `job`.
    pub fn set_job_client(&self, job: i64, client: &str) -> Result<()> {
        let n = self
            .conn
            .execute(
                "UPDATE jobs SET client = ?2 WHERE id = ?1",
                params![job, client],
            )
            .doing("record a job's client")?;
        if n == 0 {
            return Err(CatalogError::NoJob { id: job });
        }
        Ok(())
    }

    /// Starts a job and returns its id.
    pub fn begin_job(
        &self,
        tag: u64,
        name: &str,
        started_ns: i64,
        block_size: u32,
        streams: &[Stream],
    ) -> Result<i64> {
        let run = || -> crate::db::Result<i64> {
            let tx = write_tx(&self.conn)?;
            if tx.dialect() == crate::db::Dialect::Postgres {
                // Servers that begin jobs at once take turns: each new id is
                // the largest so far plus one.
                tx.query_row(
                    "SELECT 1 FROM pg_advisory_xact_lock(?1)",
                    params![JOB_ID_LOCK],
                    |_| Ok(()),
                )?;
            }
            // A new job's id is past every id a job had, also of jobs forgotten.
            let id: i64 = tx.query_row(
                tx.pick(
                    "INSERT INTO jobs (id, tag, name, started_ns, status, block_size, host) VALUES \
                     (MAX(COALESCE((SELECT MAX(id) FROM jobs), 0), \
                          COALESCE((SELECT last FROM id_floor WHERE name = 'jobs'), 0)) + 1, \
                      ?1, ?2, ?3, ?4, ?5, ?6) RETURNING id",
                    "INSERT INTO jobs (id, tag, name, started_ns, status, block_size, host) VALUES \
                     (GREATEST(COALESCE((SELECT MAX(id) FROM jobs), 0), \
                          COALESCE((SELECT last FROM id_floor WHERE name = 'jobs'), 0)) + 1, \
                      ?1, ?2, ?3, ?4, ?5, ?6) RETURNING id",
                ),
                params![tag as i64, name, started_ns, JobState::Running, block_size, self.host],
                |r| r.get(0),
            )?;
            for s in streams {
                tx.execute(
                    "INSERT INTO streams (job_id, stream, name, source) VALUES (?1, ?2, ?3, ?4)",
                    params![id, s.stream, s.name, s.source],
                )?;
            }
            tx.commit()?;
            Ok(id)
        };
        run().doing("start a job")
    }

    /// Records that segment `seq` of job `job`, in the chain whose first volume is
    /// `chain`, starts at `first_lbn` of volume `volume`. The job must not have a
    /// segment `seq` yet ([`CatalogError::SegmentExists`]).
    pub fn add_job_volume(
        &self,
        job: i64,
        seq: u32,
        chain: u32,
        volume: i64,
        first_lbn: u64,
    ) -> Result<()> {
        match self.conn.execute(
            "INSERT INTO job_volumes (job_id, seq, chain, volume_id, first_lbn) \
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![job, seq, chain, volume, first_lbn as i64],
        ) {
            Ok(_) => Ok(()),
            Err(e) if is_duplicate_key(&e) => Err(CatalogError::SegmentExists { job, seq }),
            Err(e) => Err(e).doing("record a job's segment"),
        }
    }

    /// Records the last block of segment `seq` of job `job`.
    pub fn end_job_volume(&self, job: i64, seq: u32, last_lbn: u64) -> Result<()> {
        let n = self
            .conn
            .execute(
                "UPDATE job_volumes SET last_lbn = ?3 WHERE job_id = ?1 AND seq = ?2",
                params![job, seq, last_lbn as i64],
            )
            .doing("end a job's segment")?;
        if n == 0 {
            return Err(CatalogError::NoSegment { job, seq });
        }
        Ok(())
    }

    /// Ends a job.
    pub fn finish_job(
        &self,
        job: i64,
        status: JobState,
        files: u64,
        bytes: u64,
        seconds: f64,
        ended_ns: i64,
    ) -> Result<()> {
        let n = self
            .conn
            .execute(
                "UPDATE jobs SET status = ?2, files = ?3, bytes = ?4, seconds = ?5, ended_ns = ?6 WHERE id = ?1",
                params![job, status, files as i64, bytes as i64, seconds, ended_ns],
            )
            .doing("end a job")?;
        if n == 0 {
            return Err(CatalogError::NoJob { id: job });
        }
        Ok(())
    }

    /// Marks jobs left `running` by a process that died: `queued`, with
    /// [`WAITS_ON_STAGE`] among its errors, when this host's stages hold chunks of
    /// it (it will be resumed from them); else `failed`, with [`INTERRUPTED`].
    /// Call only while holding the home's lock, so that no job is really running.
    /// The ids of both, in id order.
    pub fn recover_interrupted(&self) -> Result<Vec<i64>> {
        const STAGED: &str = "id IN (SELECT job_id FROM staged_chunks \
             WHERE stage_id IN (SELECT id FROM stages WHERE host = ?2))";
        let run = || -> crate::db::Result<Vec<i64>> {
            let tx = write_tx(&self.conn)?;
            let ids = {
                let mut st =
                    tx.prepare("SELECT id FROM jobs WHERE status = ?1 AND host = ?2 ORDER BY id")?;
                st.query_map(params![JobState::Running, self.host], |r| r.get(0))?
                    .collect::<crate::db::Result<_>>()?
            };
            // Without a reason, a job would not say why it stopped (its process
            // was killed, or its machine went down, before the job ended).
            for (staged, why) in [(true, WAITS_ON_STAGE), (false, INTERRUPTED)] {
                let which = match staged {
                    true => STAGED.to_string(),
                    false => format!("NOT {STAGED}"),
                };
                tx.execute(
                    &format!(
                        "INSERT INTO job_errors (job_id, path, reason) \
                         SELECT id, ?3, ?4 FROM jobs WHERE status = ?1 AND host = ?2 AND {which}"
                    ),
                    params![JobState::Running, self.host, b"".as_slice(), why],
                )?;
                let to = match staged {
                    true => JobState::Queued,
                    false => JobState::Failed,
                };
                tx.execute(
                    &format!(
                        "UPDATE jobs SET status = ?3 WHERE status = ?1 AND host = ?2 AND {which}"
                    ),
                    params![JobState::Running, self.host, to],
                )?;
            }
            tx.commit()?;
            Ok(ids)
        };
        run().doing("mark interrupted jobs failed or queued")
    }

    /// The reasons job `job` failed or waits for (its errors of no path).
    pub fn job_reasons(&self, job: i64) -> Result<Vec<String>> {
        Ok((self.errors(job)?.into_iter())
            .filter(|(path, _)| path.is_empty())
            .map(|(_, why)| why)
            .collect())
    }

    /// Records that job `job` is encrypted: its master key's fingerprint (hex) and its
    /// `JobKey` record's body.
    pub fn set_job_key(&self, job: i64, fingerprint: &str, job_key: &[u8]) -> Result<()> {
        self.conn
            .execute(
                "UPDATE jobs SET key_fingerprint = ?2, job_key = ?3 WHERE id = ?1",
                params![job, fingerprint, job_key],
            )
            .doing("record a job's key")?;
        Ok(())
    }

    /// Marks a job that had failed or waited as running again, and forgets why
    /// it stopped (its errors of no path), in one transaction: it goes on, and
    /// a new failure says its own.
    pub fn set_job_running(&self, job: i64) -> Result<()> {
        let run = || -> crate::db::Result<()> {
            let tx = write_tx(&self.conn)?;
            tx.execute(
                "DELETE FROM job_errors WHERE job_id = ?1 AND path = ?2",
                params![job, Vec::<u8>::new()],
            )?;
            tx.execute(
                "UPDATE jobs SET status = ?2 WHERE id = ?1",
                params![job, JobState::Running],
            )?;
            tx.commit()
        };
        run().doing("mark a job running again")
    }

    /// Puts a running job back to wait on its stage (`queued`), saying why
    /// (`why`): a resume that could not go on, whose data is still staged.
    pub fn requeue_job(&self, job: i64, why: &str) -> Result<()> {
        let run = || -> crate::db::Result<()> {
            let tx = write_tx(&self.conn)?;
            tx.execute(
                "INSERT INTO job_errors (job_id, path, reason) VALUES (?1, ?2, ?3)",
                params![job, Vec::<u8>::new(), why],
            )?;
            tx.execute(
                "UPDATE jobs SET status = ?2 WHERE id = ?1 AND status = ?3",
                params![job, JobState::Queued, JobState::Running],
            )?;
            tx.commit()
        };
        run().doing("put a job back to wait on its stage")
    }

    /// Every job, oldest first.
    pub fn jobs(&self) -> Result<Vec<Job>> {
        let run = || -> crate::db::Result<Vec<Job>> {
            let mut st = self
                .conn
                .prepare(&format!("SELECT {JOB_COLS} FROM jobs ORDER BY id"))?;

            st.query_map(params![], job_row)?.collect()
        };
        run().doing("list the jobs")
    }

    /// One job.
    pub fn job(&self, id: i64) -> Result<Option<Job>> {
        self.conn
            .query_row(
                &format!("SELECT {JOB_COLS} FROM jobs WHERE id = ?1"),
                params![id],
                job_row,
            )
            .optional()
            .doing("look up a job")
    }

    /// A job by the tag written on its tapes.
    pub fn job_by_tag(&self, tag: u64) -> Result<Option<Job>> {
        self.conn
            .query_row(
                &format!("SELECT {JOB_COLS} FROM jobs WHERE tag = ?1"),
                params![tag as i64],
                job_row,
            )
            .optional()
            .doing("look up a job by its tag")
    }

    /// The volumes of a job, in sequence order.
    pub fn job_volumes(&self, job: i64) -> Result<Vec<JobVolume>> {
        let run = || -> crate::db::Result<Vec<JobVolume>> {
            let mut st = self.conn.prepare(&format!(
                "SELECT jv.seq, jv.first_lbn, jv.last_lbn, jv.chain, {VOLUME_COLS} FROM job_volumes jv \
                 JOIN volumes v ON v.id = jv.volume_id WHERE jv.job_id = ?1 ORDER BY jv.seq"
            ))?;

            st.query_map(params![job], |r| {
                Ok(JobVolume {
                    seq: r.get(0)?,
                    first_lbn: r.get::<i64>(1)? as u64,
                    last_lbn: r.get::<Option<i64>>(2)?.map(|x| x as u64),
                    chain: r.get(3)?,
                    volume: volume_row(r, 4)?,
                })
            })?
            .collect()
        };
        run().doing("read a job's volumes")
    }

    /// The streams of a job.
    pub fn streams(&self, job: i64) -> Result<Vec<Stream>> {
        let run = || -> crate::db::Result<Vec<Stream>> {
            let mut st = self.conn.prepare(
                "SELECT stream, name, source FROM streams WHERE job_id = ?1 ORDER BY stream",
            )?;

            st.query_map(params![job], |r| {
                Ok(Stream {
                    stream: r.get(0)?,
                    name: r.get(1)?,
                    source: r.get(2)?,
                })
            })?
            .collect()
        };
        run().doing("read a job's streams")
    }

    /// Records a source object that could not be backed up.
    pub fn add_error(&self, job: i64, path: &[u8], reason: &str) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO job_errors (job_id, path, reason) VALUES (?1, ?2, ?3)",
                params![job, path, reason],
            )
            .doing("record a job's error")?;
        Ok(())
    }

    /// The errors of a job.
    pub fn errors(&self, job: i64) -> Result<Vec<(Vec<u8>, String)>> {
        let run = || -> crate::db::Result<Vec<(Vec<u8>, String)>> {
            let mut st = self
                .conn
                .prepare("SELECT path, reason FROM job_errors WHERE job_id = ?1 ORDER BY rowid")?;

            st.query_map(params![job], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect()
        };
        run().doing("read a job's errors")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::both;
    use crate::tests::scratch;

    both! {
        fn a_jobs_volumes_come_in_sequence_order() {
            let (_dir, c) = scratch();
            let vols: Vec<_> = ["TL0003L9", "TL0001L9", "TL0002L9"]
                .iter()
                .map(|b| c.add_volume(b, [1; 16], "default", 262144, 0).unwrap())
                .collect();
            let j = c.begin_job(1, "j", 0, 262144, &[]).unwrap();
            // Two drives mount in turn: sequence numbers are not recorded in order. The
            // first drive's chain is volumes 0 and 2, the second's volume 1.
            c.add_job_volume(j, 2, 0, vols[0].id, 30).unwrap();
            c.add_job_volume(j, 0, 0, vols[1].id, 2).unwrap();
            c.add_job_volume(j, 1, 1, vols[2].id, 20).unwrap();
            c.end_job_volume(j, 0, 99).unwrap();
            let jv = c.job_volumes(j).unwrap();
            let got: Vec<_> = jv
                .iter()
                .map(|v| {
                    let b = v.volume.barcode.as_str();
                    (v.seq, b, v.first_lbn, v.last_lbn, v.chain)
                })
                .collect();
            assert_eq!(
                got,
                vec![
                    (0, "TL0001L9", 2, Some(99), Some(0)),
                    (1, "TL0002L9", 20, None, Some(1)),
                    (2, "TL0003L9", 30, None, Some(0))
                ]
            );
            assert_eq!(jv[0].volume, vols[1]);
            let other = c.begin_job(2, "k", 0, 262144, &[]).unwrap();
            assert!(c.job_volumes(other).unwrap().is_empty());
        }
    }

    both! {
        fn recovery_fails_only_the_jobs_left_running() {
            let (_dir, c) = scratch();
            let ids: Vec<i64> = (0..4)
                .map(|i| c.begin_job(i, "j", 0, 262144, &[]).unwrap())
                .collect();
            c.finish_job(ids[0], JobState::Ok, 1, 1, 1.0, 1).unwrap();
            c.finish_job(ids[2], JobState::Partial, 1, 1, 1.0, 1)
                .unwrap();
            assert_eq!(c.recover_interrupted().unwrap(), vec![ids[1], ids[3]]);
            let states: Vec<JobState> = c.jobs().unwrap().iter().map(|j| j.status).collect();
            assert_eq!(
                states,
                [
                    JobState::Ok,
                    JobState::Failed,
                    JobState::Partial,
                    JobState::Failed
                ]
            );
            assert!(c.recover_interrupted().unwrap().is_empty());
            // Each failed one says why; the others have no error.
            let reasons = |j| c.errors(j).unwrap();
            assert_eq!(reasons(ids[1]), [(Vec::new(), INTERRUPTED.to_string())]);
            assert_eq!(reasons(ids[3]).len(), 1);
            assert!(reasons(ids[0]).is_empty() && reasons(ids[2]).is_empty());
        }
    }

    both! {
        fn a_job_keeps_its_tag_streams_and_errors() {
            let (_dir, c) = scratch();
            // Tags are random 64-bit numbers; SQLite stores them as signed.
            let tag = u64::MAX - 5;
            let streams = [
                Stream {
                    stream: 2,
                    name: "srv".into(),
                    source: b"/srv/\xff".to_vec(),
                },
                Stream {
                    stream: 1,
                    name: "home".into(),
                    source: b"/home".to_vec(),
                },
            ];
            let j = c.begin_job(tag, "nightly", 17, 65536, &streams).unwrap();
            c.add_error(j, b"b/\xfe", "permission denied").unwrap();
            c.add_error(j, b"a", "vanished").unwrap();
            let job = c.job_by_tag(tag).unwrap().expect("by tag");
            assert_eq!((job.id, job.tag, job.name.as_str()), (j, tag, "nightly"));
            assert_eq!(
                (job.started_ns, job.ended_ns, job.block_size),
                (17, None, 65536)
            );
            assert_eq!(c.job(j).unwrap(), Some(job));
            assert_eq!(c.job_by_tag(tag - 1).unwrap(), None);
            assert_eq!(
                c.streams(j).unwrap(),
                vec![streams[1].clone(), streams[0].clone()]
            );
            assert_eq!(
                c.errors(j).unwrap(),
                vec![
                    (b"b/\xfe".to_vec(), "permission denied".to_string()),
                    (b"a".to_vec(), "vanished".to_string())
                ]
            );
            c.finish_job(j, JobState::Partial, 3, 4, 5.5, 18).unwrap();
            let job = c.job(j).unwrap().unwrap();
            assert_eq!(
                (job.status, job.files, job.bytes, job.seconds, job.ended_ns),
                (JobState::Partial, 3, 4, 5.5, Some(18))
            );
        }
    }
}
