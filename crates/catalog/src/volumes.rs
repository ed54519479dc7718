//! Volumes: the cartridges tapeloom has labelled, and forgetting them.

use crate::db::{params, OptionalExtension};
use crate::error::{is_duplicate_key, CatalogError, Doing, Result};
use crate::{Catalog, VolumeState};

/// A volume (cartridge) tapeloom has labelled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Volume {
    /// Catalog id.
    pub id: i64,
    /// Library barcode.
    pub barcode: String,
    /// UUID written in its label.
    pub uuid: [u8; 16],
    /// Pool.
    pub pool: String,
    /// Block size it was labelled with.
    pub block_size: u32,
    /// Append while it has room, full after early warning.
    pub status: VolumeState,
    /// Its label's generation: 0 when first labelled, one more at each recycling.
    pub generation: u32,
}

/// A volume's columns in the order [`volume_row`] reads them, of `volumes` named `v`.
pub(crate) const VOLUME_COLS: &str = "v.id, v.barcode, v.uuid, v.pool, v.block_size, v.status, \
     COALESCE((SELECT g.generation FROM volume_generations g WHERE g.volume_id = v.id), 0)";

/// A volume from the columns [`VOLUME_COLS`] starting at column `at`.
pub(crate) fn volume_row(r: &crate::db::Row, at: usize) -> crate::db::Result<Volume> {
    let uuid: Vec<u8> = r.get(at + 2)?;
    let mut u = [0u8; 16];
    if uuid.len() == 16 {
        u.copy_from_slice(&uuid);
    }
    Ok(Volume {
        id: r.get(at)?,
        barcode: r.get(at + 1)?,
        uuid: u,
        pool: r.get(at + 3)?,
        block_size: r.get(at + 4)?,
        status: r.get(at + 5)?,
        generation: u32::try_from(r.get::<i64>(at + 6)?).unwrap_or(0),
    })
}

impl Catalog {
    /// Records a newly labelled volume. A volume with the same barcode must not be in
    /// the catalog ([`CatalogError::VolumeExists`]).
    pub fn add_volume(
        &self,
        barcode: &str,
        uuid: [u8; 16],
        pool: &str,
        block_size: u32,
        labelled_ns: i64,
    ) -> Result<Volume> {
        let status = VolumeState::Append;
        match self.conn.query_row(
            "INSERT INTO volumes (barcode, uuid, pool, block_size, labelled_ns, status) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING id",
            params![barcode, &uuid[..], pool, block_size, labelled_ns, status],
            |r| r.get::<i64>(0),
        ) {
            Ok(id) => Ok(Volume {
                id,
                barcode: barcode.to_string(),
                uuid,
                pool: pool.to_string(),
                block_size,
                status,
                generation: 0,
            }),
            Err(e) if is_duplicate_key(&e) => Err(CatalogError::VolumeExists {
                barcode: barcode.to_string(),
            }),
            Err(e) => Err(e).doing("record a volume"),
        }
    }

    /// A volume by barcode.
    pub fn volume_by_barcode(&self, barcode: &str) -> Result<Option<Volume>> {
        self.conn
            .query_row(
                &format!("SELECT {VOLUME_COLS} FROM volumes v WHERE v.barcode = ?1"),
                params![barcode],
                |r| volume_row(r, 0),
            )
            .optional()
            .doing("look up a volume")
    }

    /// Every volume.
    pub fn volumes(&self) -> Result<Vec<Volume>> {
        let run = || -> crate::db::Result<Vec<Volume>> {
            let mut st = self.conn.prepare(&format!(
                "SELECT {VOLUME_COLS} FROM volumes v ORDER BY v.barcode"
            ))?;

            st.query_map(params![], |r| volume_row(r, 0))?.collect()
        };
        run().doing("list the volumes")
    }

    /// Notes an event of a volume's life (why it was marked suspect, say).
    pub fn add_volume_note(&self, id: i64, at_ns: i64, note: &str) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO volume_notes (volume_id, at_ns, note) VALUES (?1, ?2, ?3)",
                params![id, at_ns, note],
            )
            .doing("note an event of a volume")?;
        Ok(())
    }

    /// A volume's notes, oldest first: (time, note).
    pub fn volume_notes(&self, id: i64) -> Result<Vec<(i64, String)>> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT at_ns, note FROM volume_notes WHERE volume_id = ?1 ORDER BY at_ns, rowid",
            )
            .doing("read a volume's notes")?;
        let rows = st
            .query_map(params![id], |r| Ok((r.get(0)?, r.get(1)?)))
            .doing("read a volume's notes")?;
        rows.collect::<crate::db::Result<_>>()
            .doing("read a volume's notes")
    }

    /// Sets a volume's status.
    pub fn set_volume_status(&self, id: i64, status: VolumeState) -> Result<()> {
        let n = self
            .conn
            .execute(
                "UPDATE volumes SET status = ?2 WHERE id = ?1",
                params![id, status],
            )
            .doing("set a volume's status")?;
        if n == 0 {
            return Err(CatalogError::NoVolume { id });
        }
        Ok(())
    }

    /// Number of jobs with a segment on a volume.
    pub fn jobs_on_volume(&self, id: i64) -> Result<u64> {
        let n = self
            .conn
            .query_row(
                "SELECT COUNT(DISTINCT job_id) FROM job_volumes WHERE volume_id = ?1",
                params![id],
                |r| r.get::<i64>(0),
            )
            .doing("count a volume's jobs")?;
        Ok(n as u64)
    }

    /// Records a volume's label generation (a rebuild finds it in the label).
    pub fn set_volume_generation(&self, id: i64, generation: u32) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO volume_generations (volume_id, generation) VALUES (?1, ?2) \
                 ON CONFLICT (volume_id) DO UPDATE SET generation = excluded.generation",
                params![id, generation],
            )
            .doing("record a volume's generation")?;
        Ok(())
    }

    /// Records that an expired volume was labelled anew (recycled): its new UUID,
    /// generation and label time, and the state `append`. Refused with
    /// [`CatalogError::NotExpired`] unless the volume is expired and holds no job,
    /// so that no job the catalog keeps is overwritten.
    pub fn relabel_volume(
        &mut self,
        v: &Volume,
        uuid: [u8; 16],
        generation: u32,
        labelled_ns: i64,
    ) -> Result<Volume> {
        let tx = self
            .conn
            .write_tx()
            .doing("record a volume labelled anew")?;
        let (state, jobs): (VolumeState, i64) = tx
            .query_row(
                "SELECT status, (SELECT COUNT(*) FROM job_volumes WHERE volume_id = ?1) \
                 FROM volumes WHERE id = ?1",
                params![v.id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .doing("record a volume labelled anew")?
            .ok_or(CatalogError::NoVolume { id: v.id })?;
        if state != VolumeState::Expired || jobs != 0 {
            return Err(CatalogError::NotExpired {
                barcode: v.barcode.clone(),
            });
        }
        let run = || -> crate::db::Result<()> {
            tx.execute(
                "UPDATE volumes SET uuid = ?2, status = ?3, labelled_ns = ?4 WHERE id = ?1",
                params![v.id, &uuid[..], VolumeState::Append, labelled_ns],
            )?;
            tx.execute(
                "INSERT INTO volume_generations (volume_id, generation) VALUES (?1, ?2) \
                 ON CONFLICT (volume_id) DO UPDATE SET generation = excluded.generation, \
                 jobs_ended_ns = NULL",
                params![v.id, generation],
            )?;
            Ok(())
        };
        run().doing("record a volume labelled anew")?;
        tx.commit().doing("record a volume labelled anew")?;
        Ok(Volume {
            uuid,
            generation,
            status: VolumeState::Append,
            ..v.clone()
        })
    }

    /// The expired volumes of a pool, those whose jobs ended first first.
    pub fn expired_volumes(&self, pool: &str) -> Result<Vec<Volume>> {
        let run = || -> crate::db::Result<Vec<Volume>> {
            let mut st = self.conn.prepare(&format!(
                "SELECT {VOLUME_COLS} FROM volumes v \
                 LEFT JOIN volume_generations e ON e.volume_id = v.id \
                 WHERE v.pool = ?1 AND v.status = ?2 \
                 ORDER BY COALESCE(e.jobs_ended_ns, 0), v.barcode"
            ))?;

            st.query_map(params![pool, VolumeState::Expired], |r| volume_row(r, 0))?
                .collect()
        };
        run().doing("list a pool's expired volumes")
    }

    /// Every segment's volume and job: (volume id, job id), once per pair.
    pub fn volume_jobs(&self) -> Result<Vec<(i64, i64)>> {
        let run = || -> crate::db::Result<Vec<(i64, i64)>> {
            let mut st = self.conn.prepare(
                "SELECT DISTINCT volume_id, job_id FROM job_volumes ORDER BY volume_id, job_id",
            )?;

            st.query_map(params![], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect()
        };
        run().doing("list the jobs on each volume")
    }

    /// Marks volumes expired and forgets the jobs on them, in one transaction: each
    /// `(volume id, latest end of its jobs)`. The caller has found every job on them
    /// past its retention (and on no volume that stays). Returns the ids of the jobs
    /// forgotten.
    pub fn expire_volumes(&mut self, volumes: &[(i64, i64)]) -> Result<Vec<i64>> {
        let run = |tx: &crate::db::Tx<'_>| -> crate::db::Result<Vec<i64>> {
            let mut jobs = Vec::new();
            for (id, ended_ns) in volumes {
                tx.execute(
                    "INSERT INTO volume_generations (volume_id, generation, jobs_ended_ns) \
                     VALUES (?1, 0, ?2) \
                     ON CONFLICT (volume_id) DO UPDATE SET jobs_ended_ns = excluded.jobs_ended_ns",
                    params![id, ended_ns],
                )?;
                let mut st =
                    tx.prepare("SELECT DISTINCT job_id FROM job_volumes WHERE volume_id = ?1")?;
                for j in st.query_map(params![id], |r| r.get(0))? {
                    jobs.push(j?);
                }
                tx.execute(
                    "UPDATE volumes SET status = ?2 WHERE id = ?1",
                    params![id, VolumeState::Expired],
                )?;
            }
            jobs.sort_unstable();
            jobs.dedup();
            for j in &jobs {
                forget_job(tx, *j)?;
            }
            Ok(jobs)
        };
        let tx = self.conn.write_tx().doing("expire volumes")?;
        let jobs = run(&tx).doing("expire volumes")?;
        tx.commit().doing("expire volumes")?;
        Ok(jobs)
    }

    /// Forgets volumes that hold no job (after their library was replaced).
    pub fn forget_unused_volumes(&self) -> Result<usize> {
        self.conn
            .execute(
                "DELETE FROM volume_notes WHERE volume_id NOT IN (SELECT volume_id FROM job_volumes)",
                params![],
            )
            .doing("forget unused volumes")?;
        let n = self
            .conn
            .execute(
                "DELETE FROM volumes WHERE id NOT IN (SELECT volume_id FROM job_volumes)",
                params![],
            )
            .doing("forget unused volumes")?;
        self.conn
            .execute(
                "DELETE FROM volume_generations WHERE volume_id NOT IN (SELECT id FROM volumes)",
                params![],
            )
            .doing("forget unused volumes")?;
        Ok(n)
    }

    /// Forgets the volumes of `barcodes` that hold no job (a library replaced
    /// on a catalog other libraries share).
    pub fn forget_unused_volumes_among(&self, barcodes: &[String]) -> Result<usize> {
        let mut n = 0;
        for v in self.volumes()? {
            if !barcodes.contains(&v.barcode) || self.jobs_on_volume(v.id)? > 0 {
                continue;
            }
            let run = || -> crate::db::Result<usize> {
                let tx = crate::write_tx(&self.conn)?;
                for table in ["volume_notes", "volume_generations"] {
                    tx.execute(
                        &format!("DELETE FROM {table} WHERE volume_id = ?1"),
                        params![v.id],
                    )?;
                }
                let n = tx.execute("DELETE FROM volumes WHERE id = ?1", params![v.id])?;
                tx.commit()?;
                Ok(n)
            };
            n += run().doing("forget unused volumes")?;
        }
        Ok(n)
    }

    /// Forgets a volume and every job with a segment on it (the cartridge was
    /// overwritten). Returns the ids of the jobs forgotten.
    pub fn forget_volume(&mut self, id: i64) -> Result<Vec<i64>> {
        let run = || -> crate::db::Result<Vec<i64>> {
            let tx = self.conn.write_tx()?;
            let jobs: Vec<i64> = {
                let mut st =
                    tx.prepare("SELECT DISTINCT job_id FROM job_volumes WHERE volume_id = ?1")?;

                st.query_map(params![id], |r| r.get(0))?
                    .collect::<crate::db::Result<_>>()?
            };
            for j in &jobs {
                forget_job(&tx, *j)?;
            }
            tx.execute("DELETE FROM volumes WHERE id = ?1", params![id])?;
            tx.execute("DELETE FROM volume_notes WHERE volume_id = ?1", params![id])?;
            tx.execute(
                "DELETE FROM volume_generations WHERE volume_id = ?1",
                params![id],
            )?;
            tx.commit()?;
            Ok(jobs)
        };
        run().doing("forget a volume and its jobs")
    }
}

impl Catalog {
    /// Forgets jobs and every row of them (their data was cut from the cartridges).
    pub fn forget_jobs(&mut self, jobs: &[i64]) -> Result<()> {
        let run = || -> crate::db::Result<()> {
            let tx = self.conn.write_tx()?;
            for j in jobs {
                forget_job(&tx, *j)?;
            }
            tx.commit()
        };
        run().doing("forget jobs")
    }
}

/// Deletes a job and every row of it, in the caller's transaction.
fn forget_job(tx: &crate::db::Tx<'_>, job: i64) -> crate::db::Result<()> {
    for table in [
        "files",
        "extents",
        "samples",
        "recall_samples",
        "copy_segments",
        "job_verifies",
        "job_moves",
        "job_copies",
        "marks",
        "drive_health",
        "streams",
        "job_errors",
        "job_volumes",
        "stage_cuts",
        "deletions",
    ] {
        tx.execute(
            &format!("DELETE FROM {table} WHERE job_id = ?1"),
            params![job],
        )?;
    }
    tx.execute("DELETE FROM jobs WHERE id = ?1", params![job])?;
    // Its id is never given to another job.
    tx.execute(
        tx.pick(
            "INSERT INTO id_floor (name, last) VALUES ('jobs', ?1) \
             ON CONFLICT (name) DO UPDATE SET last = MAX(id_floor.last, excluded.last)",
            "INSERT INTO id_floor (name, last) VALUES ('jobs', ?1) \
             ON CONFLICT (name) DO UPDATE SET last = GREATEST(id_floor.last, excluded.last)",
        ),
        params![job],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::both;
    use crate::tests::{row, scratch};
    use crate::{Extent, JobState, Sample, Stream};

    /// A job with a segment on each of `volumes` and a row in every table.
    fn job_on(c: &Catalog, tag: u64, volumes: &[i64]) -> i64 {
        let stream = Stream {
            stream: 1,
            name: "s".into(),
            source: b"/s".to_vec(),
        };
        let j = c.begin_job(tag, "j", 0, 262144, &[stream]).unwrap();
        for (seq, v) in volumes.iter().enumerate() {
            c.add_job_volume(j, seq as u32, 0, *v, 2).unwrap();
        }
        c.add_files(j, &[row("a", 2)]).unwrap();
        let extent = Extent {
            stream: 1,
            seq: 0,
            first_lbn: 2,
            blocks: 1,
            stream_offset: 0,
        };
        c.add_extents(j, &[extent]).unwrap();
        let sample = Sample {
            series: crate::Series::Drive(0),
            t_ms: 1000,
            bytes: 1,
            pool_fill: 0.0,
            buffer_fill: None,
            backhitches: 0,
            speed_mb_s: None,
        };
        c.add_samples(j, "backup", &[sample]).unwrap();
        c.add_drive_health(j, "backup", 0, "X", "{}").unwrap();
        c.add_error(j, b"b", "gone").unwrap();
        c.finish_job(j, JobState::Ok, 1, 1, 1.0, 1).unwrap();
        j
    }

    fn rows_of(c: &Catalog, job: i64) -> usize {
        c.files(job, None).unwrap().len()
            + c.extents(job).unwrap().len()
            + c.samples(job, "backup").unwrap().len()
            + c.drive_health(job, "backup").unwrap().len()
            + c.streams(job).unwrap().len()
            + c.errors(job).unwrap().len()
            + c.job_volumes(job).unwrap().len()
            + usize::from(c.job(job).unwrap().is_some())
    }

    both! {
        fn forgetting_a_volume_forgets_every_job_on_it_and_nothing_else() {
            let (_dir, mut c) = scratch();
            let [a, b, other] = ["TL0001L9", "TL0002L9", "TL0003L9"]
                .map(|bc| c.add_volume(bc, [1; 16], "default", 262144, 0).unwrap().id);
            let only_a = job_on(&c, 1, &[a]);
            let spans_a_b = job_on(&c, 2, &[b, a]);
            let kept = job_on(&c, 3, &[other]);
            let before = rows_of(&c, kept);
            assert_eq!(before, 8);
            let mut forgotten = c.forget_volume(a).unwrap();
            forgotten.sort();
            assert_eq!(forgotten, vec![only_a, spans_a_b]);
            assert_eq!(rows_of(&c, only_a), 0);
            // The job that spanned to `b` is gone with its segment there too.
            assert_eq!(rows_of(&c, spans_a_b), 0);
            assert_eq!(rows_of(&c, kept), before);
            assert_eq!(c.volume_by_barcode("TL0001L9").unwrap(), None);
            assert_eq!(c.jobs_on_volume(b).unwrap(), 0);
            assert_eq!(c.jobs_on_volume(other).unwrap(), 1);
            // `b` holds no job now: it goes with the unused volumes, `other` stays.
            assert_eq!(c.forget_unused_volumes().unwrap(), 1);
            let left: Vec<String> = c
                .volumes()
                .unwrap()
                .into_iter()
                .map(|v| v.barcode)
                .collect();
            assert_eq!(left, vec!["TL0003L9"]);
            // A volume without jobs forgets none.
            assert!(c.forget_volume(other + 100).unwrap().is_empty());
        }
    }

    both! {
        fn only_the_named_volumes_without_jobs_are_forgotten() {
            let (_dir, c) = scratch();
            let mut ids = Vec::new();
            for bc in ["TL0001L9", "TL0002L9", "TL0003L9"] {
                ids.push(c.add_volume(bc, [1; 16], "pool", 65536, 0).unwrap().id);
            }
            job_on(&c, 1, &[ids[0]]);
            let named = ["TL0001L9".to_string(), "TL0002L9".to_string()];
            assert_eq!(c.forget_unused_volumes_among(&named).unwrap(), 1);
            let left: Vec<String> = c.volumes().unwrap().into_iter().map(|v| v.barcode).collect();
            assert_eq!(left, ["TL0001L9", "TL0003L9"]);
        }
    }

    both! {
        fn volumes_are_listed_by_barcode_with_their_state() {
            let (_dir, c) = scratch();
            for bc in ["TL0002L9", "TL0001L9"] {
                c.add_volume(bc, [2; 16], "pool", 65536, 0).unwrap();
            }
            let v = c.volume_by_barcode("TL0002L9").unwrap().unwrap();
            c.set_volume_status(v.id, VolumeState::Full).unwrap();
            let got: Vec<(String, VolumeState)> = c
                .volumes()
                .unwrap()
                .into_iter()
                .map(|v| (v.barcode, v.status))
                .collect();
            assert_eq!(
                got,
                vec![
                    ("TL0001L9".to_string(), VolumeState::Append),
                    ("TL0002L9".to_string(), VolumeState::Full)
                ]
            );
            assert_eq!(c.volume_by_barcode("TL0009L9").unwrap(), None);
        }
    }

    both! {
        fn expiring_forgets_the_jobs_and_only_an_expired_empty_volume_is_relabelled() {
            let (_dir, mut c) = scratch();
            let [a, b] = ["TL0001L9", "TL0002L9"]
                .map(|bc| c.add_volume(bc, [1; 16], "daily", 262144, 0).unwrap().id);
            let on_a = job_on(&c, 1, &[a]);
            let kept = job_on(&c, 2, &[b]);
            let vb = c.volume_by_barcode("TL0002L9").unwrap().unwrap();
            // A volume that has not expired is never labelled anew.
            let e = c.relabel_volume(&vb, [5; 16], 1, 9).unwrap_err();
            assert!(matches!(e, CatalogError::NotExpired { .. }), "{e}");
            assert_eq!(c.expire_volumes(&[(a, 100)]).unwrap(), vec![on_a]);
            assert_eq!(rows_of(&c, on_a), 0);
            assert_eq!(rows_of(&c, kept), 8);
            let va = c.volume_by_barcode("TL0001L9").unwrap().unwrap();
            assert_eq!((va.status, va.generation), (VolumeState::Expired, 0));
            assert_eq!(c.expired_volumes("daily").unwrap(), vec![va.clone()]);
            assert!(c.expired_volumes("other").unwrap().is_empty());
            let new = c.relabel_volume(&va, [5; 16], 1, 9).unwrap();
            assert_eq!(c.volume_by_barcode("TL0001L9").unwrap().unwrap(), new);
            assert_eq!(
                (new.uuid, new.generation, new.status),
                ([5; 16], 1, VolumeState::Append)
            );
            assert!(c.expired_volumes("daily").unwrap().is_empty());
            // The generation a rebuild reads from the label.
            c.set_volume_generation(vb.id, 4).unwrap();
            assert_eq!(
                c.volume_by_barcode("TL0002L9").unwrap().unwrap().generation,
                4
            );
        }
    }
}
