//! Volumes: the cartridges tapeloom has labelled, and forgetting them.

use crate::error::{is_duplicate_key, CatalogError, Doing, Result};
use crate::{Catalog, VolumeState};
use rusqlite::{params, OptionalExtension};

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
}

/// A volume's columns in the order [`volume_row`] reads them, of `volumes` named `v`.
pub(crate) const VOLUME_COLS: &str = "v.id, v.barcode, v.uuid, v.pool, v.block_size, v.status";

/// A volume from the columns [`VOLUME_COLS`] starting at column `at`.
pub(crate) fn volume_row(r: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<Volume> {
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
        match self.conn.execute(
            "INSERT INTO volumes (barcode, uuid, pool, block_size, labelled_ns, status) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![barcode, &uuid[..], pool, block_size, labelled_ns, status],
        ) {
            Ok(_) => Ok(Volume {
                id: self.conn.last_insert_rowid(),
                barcode: barcode.to_string(),
                uuid,
                pool: pool.to_string(),
                block_size,
                status,
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
                [barcode],
                |r| volume_row(r, 0),
            )
            .optional()
            .doing("look up a volume")
    }

    /// Every volume.
    pub fn volumes(&self) -> Result<Vec<Volume>> {
        let run = || -> rusqlite::Result<Vec<Volume>> {
            let mut st = self.conn.prepare(&format!(
                "SELECT {VOLUME_COLS} FROM volumes v ORDER BY v.barcode"
            ))?;
            let v = st.query_map([], |r| volume_row(r, 0))?.collect();
            v
        };
        run().doing("list the volumes")
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
                [id],
                |r| r.get::<_, i64>(0),
            )
            .doing("count a volume's jobs")?;
        Ok(n as u64)
    }

    /// Forgets volumes that hold no job (after their library was replaced).
    pub fn forget_unused_volumes(&self) -> Result<usize> {
        self.conn
            .execute(
                "DELETE FROM volumes WHERE id NOT IN (SELECT volume_id FROM job_volumes)",
                [],
            )
            .doing("forget unused volumes")
    }

    /// Forgets a volume and every job with a segment on it (the cartridge was
    /// overwritten). Returns the ids of the jobs forgotten.
    pub fn forget_volume(&mut self, id: i64) -> Result<Vec<i64>> {
        let mut run = || -> rusqlite::Result<Vec<i64>> {
            let tx = self.conn.transaction()?;
            let jobs: Vec<i64> = {
                let mut st =
                    tx.prepare("SELECT DISTINCT job_id FROM job_volumes WHERE volume_id = ?1")?;
                let v = st
                    .query_map([id], |r| r.get(0))?
                    .collect::<rusqlite::Result<_>>()?;
                v
            };
            for j in &jobs {
                for table in [
                    "files",
                    "extents",
                    "samples",
                    "drive_health",
                    "streams",
                    "job_errors",
                    "job_volumes",
                ] {
                    tx.execute(&format!("DELETE FROM {table} WHERE job_id = ?1"), [j])?;
                }
                tx.execute("DELETE FROM jobs WHERE id = ?1", [j])?;
            }
            tx.execute("DELETE FROM volumes WHERE id = ?1", [id])?;
            tx.commit()?;
            Ok(jobs)
        };
        run().doing("forget a volume and its jobs")
    }
}
