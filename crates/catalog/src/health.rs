//! Drive health: what each drive said about a cartridge at the end of a mount.

use crate::db::params;
use crate::error::{Doing, Result};
use crate::Catalog;

impl Catalog {
    /// Records what drive `drive` said about cartridge `barcode` at the end of its
    /// mount in a job's operation (`health` is JSON, as the engine writes it).
    pub fn add_drive_health(
        &self,
        job: i64,
        op: &str,
        drive: i64,
        barcode: &str,
        health: &str,
    ) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO drive_health (job_id, op, drive, barcode, health) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![job, op, drive, barcode, health],
            )
            .doing("record drive health")?;
        Ok(())
    }

    /// Forgets what the drives said in a job's operation (before a new restore's).
    pub fn clear_drive_health(&self, job: i64, op: &str) -> Result<()> {
        self.conn
            .execute(
                "DELETE FROM drive_health WHERE job_id = ?1 AND op = ?2",
                params![job, op],
            )
            .doing("forget drive health")?;
        Ok(())
    }

    /// What the drives said in a job's operation: (drive, barcode, health JSON), in
    /// the order of the mounts.
    pub fn drive_health(&self, job: i64, op: &str) -> Result<Vec<(i64, String, String)>> {
        let run = || -> crate::db::Result<Vec<(i64, String, String)>> {
            let mut st = self.conn.prepare_cached(
                "SELECT drive, barcode, health FROM drive_health \
                 WHERE job_id = ?1 AND op = ?2 ORDER BY rowid",
            )?;

            st.query_map(params![job, op], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                .collect()
        };
        run().doing("read drive health")
    }
}

#[cfg(test)]
mod tests {
    use crate::tests::both;

    both! {
        fn drive_health_is_kept_per_mount_and_forgotten_with_its_volume() {
            let (_dir, mut c) = crate::tests::scratch();
            let v = c
                .add_volume("TL0001L9", [3; 16], "default", 262144, 0)
                .unwrap();
            let job = c.begin_job(1, "j", 0, 262144, &[]).unwrap();
            c.add_job_volume(job, 0, 0, v.id, 0).unwrap();
            c.add_drive_health(job, "backup", 1, "TL0001L9", "{\"a\":1}")
                .unwrap();
            c.add_drive_health(job, "backup", 0, "TL0002L9", "{}")
                .unwrap();
            assert_eq!(
                c.drive_health(job, "backup").unwrap(),
                vec![
                    (1, "TL0001L9".to_string(), "{\"a\":1}".to_string()),
                    (0, "TL0002L9".to_string(), "{}".to_string())
                ]
            );
            assert!(c.drive_health(job, "restore").unwrap().is_empty());
            assert_eq!(c.forget_volume(v.id).unwrap(), vec![job]);
            assert!(c.drive_health(job, "backup").unwrap().is_empty());
        }
    }
}
