//! The tapeloom catalog: what every job wrote and where, in one SQLite file.
//!
//! The schema is versioned with `PRAGMA user_version` and migrated forward on open.
//! The database runs in WAL mode and every change is a transaction, so a crash loses
//! at most the rows of the job in flight; that job is marked `failed` by
//! [`Catalog::recover_interrupted`].
#![deny(missing_docs)]

use rusqlite::{params, Connection, OptionalExtension};
use std::path::Path;

mod error;
mod state;

use error::{is_duplicate_key, Doing};
pub use error::{CatalogError, Result};
pub use state::{JobState, UnknownState, VolumeState};

const MIGRATIONS: &[&str] = &[
    // 1: the first schema.
    "
    CREATE TABLE volumes (
        id INTEGER PRIMARY KEY,
        barcode TEXT NOT NULL UNIQUE,
        uuid BLOB NOT NULL,
        pool TEXT NOT NULL,
        block_size INTEGER NOT NULL,
        labelled_ns INTEGER NOT NULL,
        status TEXT NOT NULL
    );
    CREATE TABLE jobs (
        id INTEGER PRIMARY KEY,
        tag INTEGER NOT NULL,
        name TEXT NOT NULL,
        started_ns INTEGER NOT NULL,
        ended_ns INTEGER,
        status TEXT NOT NULL,
        files INTEGER NOT NULL DEFAULT 0,
        bytes INTEGER NOT NULL DEFAULT 0,
        seconds REAL NOT NULL DEFAULT 0,
        block_size INTEGER NOT NULL
    );
    CREATE TABLE job_volumes (
        job_id INTEGER NOT NULL REFERENCES jobs(id),
        seq INTEGER NOT NULL,
        volume_id INTEGER NOT NULL REFERENCES volumes(id),
        first_lbn INTEGER NOT NULL,
        last_lbn INTEGER,
        PRIMARY KEY (job_id, seq)
    );
    CREATE TABLE streams (
        job_id INTEGER NOT NULL REFERENCES jobs(id),
        stream INTEGER NOT NULL,
        name TEXT NOT NULL,
        source BLOB NOT NULL,
        PRIMARY KEY (job_id, stream)
    );
    CREATE TABLE job_errors (
        job_id INTEGER NOT NULL REFERENCES jobs(id),
        path BLOB NOT NULL,
        reason TEXT NOT NULL
    );
    CREATE TABLE files (
        job_id INTEGER NOT NULL,
        path BLOB NOT NULL,
        stream INTEGER NOT NULL,
        type INTEGER NOT NULL,
        mode INTEGER NOT NULL,
        uid INTEGER NOT NULL,
        gid INTEGER NOT NULL,
        size INTEGER NOT NULL,
        mtime_ns INTEGER NOT NULL,
        start_seq INTEGER NOT NULL,
        start_lbn INTEGER NOT NULL,
        start_off INTEGER NOT NULL,
        end_seq INTEGER NOT NULL,
        end_lbn INTEGER NOT NULL,
        crc INTEGER NOT NULL,
        link BLOB NOT NULL,
        PRIMARY KEY (job_id, path)
    ) WITHOUT ROWID;
    ",
    // 2: where each stream's runs of consecutive blocks are (multiplexed jobs).
    "
    CREATE TABLE extents (
        job_id INTEGER NOT NULL REFERENCES jobs(id),
        stream INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        first_lbn INTEGER NOT NULL,
        blocks INTEGER NOT NULL,
        stream_offset INTEGER NOT NULL
    );
    CREATE INDEX extents_by_job ON extents (job_id, seq, first_lbn);
    ",
    // 3: the per-second measurements of a job, per stream and per drive.
    "
    CREATE TABLE samples (
        job_id INTEGER NOT NULL REFERENCES jobs(id),
        op TEXT NOT NULL,
        series TEXT NOT NULL,
        t_ms INTEGER NOT NULL,
        bytes INTEGER NOT NULL,
        pool_fill REAL NOT NULL,
        buffer_fill REAL,
        backhitches INTEGER NOT NULL,
        speed_mb_s REAL,
        PRIMARY KEY (job_id, op, series, t_ms)
    ) WITHOUT ROWID;
    ",
    // 4: what the drives said about each cartridge at the end of a job's mount.
    "
    CREATE TABLE drive_health (
        job_id INTEGER NOT NULL REFERENCES jobs(id),
        op TEXT NOT NULL,
        drive INTEGER NOT NULL,
        barcode TEXT NOT NULL,
        health TEXT NOT NULL
    );
    CREATE INDEX drive_health_by_job ON drive_health (job_id, op);
    ",
];

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

/// A run of consecutive blocks of one stream on one volume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// Stream id.
    pub stream: u16,
    /// Volume sequence within the job.
    pub seq: u32,
    /// First block.
    pub first_lbn: u64,
    /// Number of blocks.
    pub blocks: u64,
    /// Stream offset of the first block's payload.
    pub stream_offset: u64,
}

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

/// One file system object of a job and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRow {
    /// Path in the job namespace (raw bytes).
    pub path: Vec<u8>,
    /// Stream id.
    pub stream: u16,
    /// Entry type code (FORMAT.md 5.3).
    pub kind: u8,
    /// Permission bits.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Logical size.
    pub size: u64,
    /// Modification time in nanoseconds.
    pub mtime_ns: i64,
    /// Volume sequence where the entry starts.
    pub start_seq: u32,
    /// Block where the entry starts.
    pub start_lbn: u64,
    /// Payload offset where the entry starts.
    pub start_off: u32,
    /// Volume sequence of the entry's last block.
    pub end_seq: u32,
    /// The entry's last block.
    pub end_lbn: u64,
    /// CRC32C of the stored bytes.
    pub crc: u32,
    /// Symlink or hard-link target.
    pub link: Vec<u8>,
}

/// The catalog database.
pub struct Catalog {
    conn: Connection,
}

/// Upper bound of the key range of paths under `prefix/`: the same bytes with the
/// trailing `/` replaced by `0`, the next byte value.
fn prefix_range(prefix: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut lo = prefix.to_vec();
    lo.push(b'/');
    let mut hi = prefix.to_vec();
    hi.push(b'/' + 1);
    (lo, hi)
}

const FILE_COLS: &str =
    "path, stream, type, mode, uid, gid, size, mtime_ns, start_seq, start_lbn, \
                         start_off, end_seq, end_lbn, crc, link";

fn file_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<FileRow> {
    Ok(FileRow {
        path: r.get(0)?,
        stream: r.get(1)?,
        kind: r.get(2)?,
        mode: r.get(3)?,
        uid: r.get(4)?,
        gid: r.get(5)?,
        size: r.get::<_, i64>(6)? as u64,
        mtime_ns: r.get(7)?,
        start_seq: r.get(8)?,
        start_lbn: r.get::<_, i64>(9)? as u64,
        start_off: r.get(10)?,
        end_seq: r.get(11)?,
        end_lbn: r.get::<_, i64>(12)? as u64,
        crc: r.get(13)?,
        link: r.get(14)?,
    })
}

fn volume_row(r: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<Volume> {
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

const VOLUME_COLS: &str = "v.id, v.barcode, v.uuid, v.pool, v.block_size, v.status";

fn job_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Job> {
    Ok(Job {
        id: r.get(0)?,
        tag: r.get::<_, i64>(1)? as u64,
        name: r.get(2)?,
        started_ns: r.get(3)?,
        ended_ns: r.get(4)?,
        status: r.get(5)?,
        files: r.get::<_, i64>(6)? as u64,
        bytes: r.get::<_, i64>(7)? as u64,
        seconds: r.get(8)?,
        block_size: r.get(9)?,
    })
}

const JOB_COLS: &str =
    "id, tag, name, started_ns, ended_ns, status, files, bytes, seconds, block_size";

impl Catalog {
    /// Opens (creating when missing) the catalog at `path` and migrates its schema.
    pub fn open(path: &Path) -> Result<Self> {
        let conn = Connection::open(path).map_err(|source| CatalogError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        let setup = || -> rusqlite::Result<()> {
            conn.busy_timeout(std::time::Duration::from_secs(30))?;
            conn.pragma_update(None, "journal_mode", "WAL")?;
            conn.pragma_update(None, "synchronous", "NORMAL")?;
            conn.pragma_update(None, "foreign_keys", "ON")
        };
        setup().doing("set up the connection")?;
        let mut c = Catalog { conn };
        c.migrate()?;
        Ok(c)
    }

    fn migrate(&mut self) -> Result<()> {
        let version = self.schema_version()?;
        let known = MIGRATIONS.len() as i64;
        if version > known {
            return Err(CatalogError::SchemaTooNew {
                found: version,
                known,
            });
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            let mut step = || -> rusqlite::Result<()> {
                let tx = self.conn.transaction()?;
                tx.execute_batch(sql)?;
                tx.pragma_update(None, "user_version", (i + 1) as i64)?;
                tx.commit()
            };
            step().doing("migrate the schema")?;
        }
        Ok(())
    }

    /// The schema version.
    pub fn schema_version(&self) -> Result<i64> {
        self.conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .doing("read the schema version")
    }

    /// Marks jobs left `running` by a process that died as `failed`. Call only while
    /// holding the home's lock, so that no job is really running.
    pub fn recover_interrupted(&self) -> Result<Vec<i64>> {
        let run = || -> rusqlite::Result<Vec<i64>> {
            let tx = self.conn.unchecked_transaction()?;
            let ids = {
                let mut st = tx.prepare("SELECT id FROM jobs WHERE status = ?1")?;
                let ids = st
                    .query_map([JobState::Running], |r| r.get(0))?
                    .collect::<rusqlite::Result<_>>()?;
                ids
            };
            tx.execute(
                "UPDATE jobs SET status = ?2 WHERE status = ?1",
                params![JobState::Running, JobState::Failed],
            )?;
            tx.commit()?;
            Ok(ids)
        };
        run().doing("mark interrupted jobs failed")
    }

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

    /// Starts a job and returns its id.
    pub fn begin_job(
        &self,
        tag: u64,
        name: &str,
        started_ns: i64,
        block_size: u32,
        streams: &[Stream],
    ) -> Result<i64> {
        let run = || -> rusqlite::Result<i64> {
            let tx = self.conn.unchecked_transaction()?;
            tx.execute(
                "INSERT INTO jobs (tag, name, started_ns, status, block_size) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![tag as i64, name, started_ns, JobState::Running, block_size],
            )?;
            let id = tx.last_insert_rowid();
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

    /// Records that segment `seq` of job `job` starts at `first_lbn` of volume `volume`.
    /// The job must not have a segment `seq` yet ([`CatalogError::SegmentExists`]).
    pub fn add_job_volume(&self, job: i64, seq: u32, volume: i64, first_lbn: u64) -> Result<()> {
        match self.conn.execute(
            "INSERT INTO job_volumes (job_id, seq, volume_id, first_lbn) VALUES (?1, ?2, ?3, ?4)",
            params![job, seq, volume, first_lbn as i64],
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

    /// Records files, in one transaction.
    pub fn add_files(&self, job: i64, rows: &[FileRow]) -> Result<()> {
        let run = || -> rusqlite::Result<()> {
            let tx = self.conn.unchecked_transaction()?;
            {
                let mut st = tx.prepare_cached(&format!(
                    "INSERT OR REPLACE INTO files (job_id, {FILE_COLS}) VALUES \
                     (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)"
                ))?;
                for f in rows {
                    st.execute(params![
                        job,
                        f.path,
                        f.stream,
                        f.kind,
                        f.mode,
                        f.uid,
                        f.gid,
                        f.size as i64,
                        f.mtime_ns,
                        f.start_seq,
                        f.start_lbn as i64,
                        f.start_off,
                        f.end_seq,
                        f.end_lbn as i64,
                        f.crc,
                        f.link
                    ])?;
                }
            }
            tx.commit()
        };
        run().doing("record files")
    }

    /// Records extents, in one transaction.
    pub fn add_extents(&self, job: i64, extents: &[Extent]) -> Result<()> {
        let run = || -> rusqlite::Result<()> {
            let tx = self.conn.unchecked_transaction()?;
            {
                let mut st = tx.prepare_cached(
                    "INSERT INTO extents (job_id, stream, seq, first_lbn, blocks, stream_offset) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )?;
                for e in extents {
                    st.execute(params![
                        job,
                        e.stream,
                        e.seq,
                        e.first_lbn as i64,
                        e.blocks as i64,
                        e.stream_offset as i64
                    ])?;
                }
            }
            tx.commit()
        };
        run().doing("record extents")
    }

    /// The extents of a job in tape order.
    pub fn extents(&self, job: i64) -> Result<Vec<Extent>> {
        let run = || -> rusqlite::Result<Vec<Extent>> {
            let mut st = self.conn.prepare_cached(
                "SELECT stream, seq, first_lbn, blocks, stream_offset FROM extents \
                 WHERE job_id = ?1 ORDER BY seq, first_lbn",
            )?;
            let v = st
                .query_map([job], |r| {
                    Ok(Extent {
                        stream: r.get(0)?,
                        seq: r.get(1)?,
                        first_lbn: r.get::<_, i64>(2)? as u64,
                        blocks: r.get::<_, i64>(3)? as u64,
                        stream_offset: r.get::<_, i64>(4)? as u64,
                    })
                })?
                .collect();
            v
        };
        run().doing("read a job's extents")
    }

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
        let run = || -> rusqlite::Result<Vec<(i64, String, String)>> {
            let mut st = self.conn.prepare_cached(
                "SELECT drive, barcode, health FROM drive_health \
                 WHERE job_id = ?1 AND op = ?2 ORDER BY rowid",
            )?;
            let v = st
                .query_map(params![job, op], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                .collect();
            v
        };
        run().doing("read drive health")
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
        let run = || -> rusqlite::Result<Vec<(Vec<u8>, String)>> {
            let mut st = self
                .conn
                .prepare("SELECT path, reason FROM job_errors WHERE job_id = ?1 ORDER BY rowid")?;
            let v = st
                .query_map([job], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect();
            v
        };
        run().doing("read a job's errors")
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

    /// Every job, oldest first.
    pub fn jobs(&self) -> Result<Vec<Job>> {
        let run = || -> rusqlite::Result<Vec<Job>> {
            let mut st = self
                .conn
                .prepare(&format!("SELECT {JOB_COLS} FROM jobs ORDER BY id"))?;
            let v = st.query_map([], job_row)?.collect();
            v
        };
        run().doing("list the jobs")
    }

    /// One job.
    pub fn job(&self, id: i64) -> Result<Option<Job>> {
        self.conn
            .query_row(
                &format!("SELECT {JOB_COLS} FROM jobs WHERE id = ?1"),
                [id],
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
                [tag as i64],
                job_row,
            )
            .optional()
            .doing("look up a job by its tag")
    }

    /// The volumes of a job, in sequence order.
    pub fn job_volumes(&self, job: i64) -> Result<Vec<JobVolume>> {
        let run = || -> rusqlite::Result<Vec<JobVolume>> {
            let mut st = self.conn.prepare(&format!(
                "SELECT jv.seq, jv.first_lbn, jv.last_lbn, {VOLUME_COLS} FROM job_volumes jv \
                 JOIN volumes v ON v.id = jv.volume_id WHERE jv.job_id = ?1 ORDER BY jv.seq"
            ))?;
            let v = st
                .query_map([job], |r| {
                    Ok(JobVolume {
                        seq: r.get(0)?,
                        first_lbn: r.get::<_, i64>(1)? as u64,
                        last_lbn: r.get::<_, Option<i64>>(2)?.map(|x| x as u64),
                        volume: volume_row(r, 3)?,
                    })
                })?
                .collect();
            v
        };
        run().doing("read a job's volumes")
    }

    /// The streams of a job.
    pub fn streams(&self, job: i64) -> Result<Vec<Stream>> {
        let run = || -> rusqlite::Result<Vec<Stream>> {
            let mut st = self.conn.prepare(
                "SELECT stream, name, source FROM streams WHERE job_id = ?1 ORDER BY stream",
            )?;
            let v = st
                .query_map([job], |r| {
                    Ok(Stream {
                        stream: r.get(0)?,
                        name: r.get(1)?,
                        source: r.get(2)?,
                    })
                })?
                .collect();
            v
        };
        run().doing("read a job's streams")
    }

    /// Calls `f` for every file of `job` at or under `prefix` (all files when `None`
    /// or `.`), in path order. Uses the primary key: instant for any job size.
    pub fn for_each_file(
        &self,
        job: i64,
        prefix: Option<&[u8]>,
        mut f: impl FnMut(FileRow) -> Result<()>,
    ) -> Result<()> {
        const WHAT: &str = "list files";
        let prefix = prefix.filter(|p| !p.is_empty() && *p != b".");
        let (sql, range) = match prefix {
            None => (
                format!("SELECT {FILE_COLS} FROM files WHERE job_id = ?1 ORDER BY path"),
                None,
            ),
            Some(p) => (
                format!(
                    "SELECT {FILE_COLS} FROM files WHERE job_id = ?1 AND \
                     (path = ?2 OR (path >= ?3 AND path < ?4)) ORDER BY path"
                ),
                Some((p, prefix_range(p))),
            ),
        };
        let mut st = self.conn.prepare_cached(&sql).doing(WHAT)?;
        let mut rows = match &range {
            None => st.query([job]),
            Some((p, (lo, hi))) => st.query(params![job, p, lo, hi]),
        }
        .doing(WHAT)?;
        while let Some(r) = rows.next().doing(WHAT)? {
            f(file_row(r).doing(WHAT)?)?;
        }
        Ok(())
    }

    /// Files of `job` at or under `prefix`, as a vector.
    pub fn files(&self, job: i64, prefix: Option<&[u8]>) -> Result<Vec<FileRow>> {
        let mut v = Vec::new();
        self.for_each_file(job, prefix, |r| {
            v.push(r);
            Ok(())
        })?;
        Ok(v)
    }

    /// One file by exact path.
    pub fn file(&self, job: i64, path: &[u8]) -> Result<Option<FileRow>> {
        self.conn
            .query_row(
                &format!("SELECT {FILE_COLS} FROM files WHERE job_id = ?1 AND path = ?2"),
                params![job, path],
                file_row,
            )
            .optional()
            .doing("look up a file")
    }

    /// Up to `limit` files of `job` with a path after `after`, in path order: the
    /// pages of a whole-job scan that holds at most one page in memory.
    pub fn files_after(
        &self,
        job: i64,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<FileRow>> {
        let run = || -> rusqlite::Result<Vec<FileRow>> {
            let mut st = self.conn.prepare_cached(&format!(
                "SELECT {FILE_COLS} FROM files WHERE job_id = ?1 AND path > ?2 ORDER BY path LIMIT ?3"
            ))?;
            let v = st
                .query_map(params![job, after.unwrap_or(b""), limit as i64], file_row)?
                .collect();
            v
        };
        run().doing("list files")
    }

    /// Files of `job` whose bytes include block `lbn` of volume sequence `seq`.
    pub fn files_in_block(&self, job: i64, seq: u32, lbn: u64) -> Result<Vec<Vec<u8>>> {
        let run = || -> rusqlite::Result<Vec<Vec<u8>>> {
            let mut st = self.conn.prepare_cached(
                "SELECT path FROM files WHERE job_id = ?1 \
                 AND (start_seq < ?2 OR (start_seq = ?2 AND start_lbn <= ?3)) \
                 AND (end_seq > ?2 OR (end_seq = ?2 AND end_lbn >= ?3)) ORDER BY path",
            )?;
            let v = st
                .query_map(params![job, seq, lbn as i64], |r| r.get(0))?
                .collect();
            v
        };
        run().doing("find the files in a block")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(path: &str, lbn: u64) -> FileRow {
        FileRow {
            path: path.as_bytes().to_vec(),
            stream: 1,
            kind: 1,
            mode: 0o644,
            uid: 0,
            gid: 0,
            size: 10,
            mtime_ns: 5,
            start_seq: 0,
            start_lbn: lbn,
            start_off: 0,
            end_seq: 0,
            end_lbn: lbn + 1,
            crc: 7,
            link: vec![],
        }
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

    #[test]
    fn drive_health_is_kept_per_mount_and_forgotten_with_its_volume() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Catalog::open(&dir.path().join("c.db")).unwrap();
        let v = c
            .add_volume("TL0001L9", [3; 16], "default", 262144, 0)
            .unwrap();
        let job = c.begin_job(1, "j", 0, 262144, &[]).unwrap();
        c.add_job_volume(job, 0, v.id, 0).unwrap();
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

    #[test]
    fn jobs_files_and_prefixes() {
        let dir = tempfile::tempdir().unwrap();
        let c = Catalog::open(&dir.path().join("c.db")).unwrap();
        assert_eq!(c.schema_version().unwrap(), 4);
        let v = c
            .add_volume("TL0001L9", [3; 16], "default", 262144, 0)
            .unwrap();
        let j = c.begin_job(42, "n", 1, 262144, &[]).unwrap();
        c.add_job_volume(j, 0, v.id, 2).unwrap();
        c.add_files(
            j,
            &[
                row("a", 2),
                row("a/b", 3),
                row("a/b/c", 4),
                row("a0", 5),
                row("a.x", 6),
                row("ab", 7),
            ],
        )
        .unwrap();
        let names = |p: Option<&str>| -> Vec<String> {
            c.files(j, p.map(|s| s.as_bytes()))
                .unwrap()
                .into_iter()
                .map(|r| String::from_utf8(r.path).unwrap())
                .collect()
        };
        assert_eq!(names(Some("a")), vec!["a", "a/b", "a/b/c"]);
        assert_eq!(names(Some("a/b")), vec!["a/b", "a/b/c"]);
        assert_eq!(names(None).len(), 6);
        assert_eq!(c.files_in_block(j, 0, 4).unwrap().len(), 2);
        assert_eq!(c.recover_interrupted().unwrap(), vec![j]);
        assert_eq!(c.job(j).unwrap().unwrap().status, JobState::Failed);
        assert_eq!(c.job_volumes(j).unwrap()[0].volume.barcode, "TL0001L9");
        assert_eq!(c.jobs_on_volume(v.id).unwrap(), 1);
        let ext = [
            Extent {
                stream: 2,
                seq: 0,
                first_lbn: 9,
                blocks: 4,
                stream_offset: 0,
            },
            Extent {
                stream: 1,
                seq: 0,
                first_lbn: 2,
                blocks: 7,
                stream_offset: 0,
            },
        ];
        c.add_extents(j, &ext).unwrap();
        assert_eq!(c.extents(j).unwrap(), vec![ext[1], ext[0]]);
    }

    #[test]
    fn a_catalog_from_a_newer_tapeloom_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let c = Catalog::open(&path).unwrap();
        let newer = MIGRATIONS.len() as i64 + 1;
        c.conn.pragma_update(None, "user_version", newer).unwrap();
        drop(c);
        let e = Catalog::open(&path).err().expect("refused");
        assert!(
            matches!(e, CatalogError::SchemaTooNew { found, known } if found == newer && known == newer - 1),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            format!(
                "the catalog has schema version {newer}; this tapeloom knows up to {}",
                newer - 1
            )
        );
    }

    #[test]
    fn a_catalog_that_cannot_be_opened_keeps_sqlites_error_as_its_cause() {
        use std::error::Error;
        let dir = tempfile::tempdir().unwrap();
        let e = Catalog::open(&dir.path().join("missing/c.db"))
            .err()
            .expect("refused");
        assert!(matches!(e, CatalogError::Open { .. }), "{e:?}");
        assert!(e.to_string().starts_with("open catalog "), "{e}");
        let source = e.source().expect("a cause");
        assert!(source.is::<rusqlite::Error>(), "{source}");
    }

    #[test]
    fn missing_and_duplicate_rows_are_variants() {
        let dir = tempfile::tempdir().unwrap();
        let c = Catalog::open(&dir.path().join("c.db")).unwrap();
        let v = c
            .add_volume("TL0001L9", [3; 16], "default", 262144, 0)
            .unwrap();
        assert_eq!(c.volume_by_barcode("TL0001L9").unwrap(), Some(v.clone()));
        assert!(matches!(
            c.add_volume("TL0001L9", [4; 16], "default", 262144, 0),
            Err(CatalogError::VolumeExists { barcode }) if barcode == "TL0001L9"
        ));
        let job = c.begin_job(1, "j", 0, 262144, &[]).unwrap();
        c.add_job_volume(job, 0, v.id, 2).unwrap();
        assert!(matches!(
            c.add_job_volume(job, 0, v.id, 9),
            Err(CatalogError::SegmentExists { job: j, seq: 0 }) if j == job
        ));
        assert!(matches!(
            c.end_job_volume(job, 1, 5),
            Err(CatalogError::NoSegment { job: j, seq: 1 }) if j == job
        ));
        assert!(matches!(
            c.finish_job(job + 1, JobState::Ok, 0, 0, 0.0, 0),
            Err(CatalogError::NoJob { id }) if id == job + 1
        ));
        assert!(matches!(
            c.set_volume_status(v.id + 1, VolumeState::Full),
            Err(CatalogError::NoVolume { id }) if id == v.id + 1
        ));
    }

    #[test]
    fn states_are_stored_as_their_words() {
        use std::error::Error;
        let dir = tempfile::tempdir().unwrap();
        let c = Catalog::open(&dir.path().join("c.db")).unwrap();
        let v = c
            .add_volume("TL0001L9", [3; 16], "default", 262144, 0)
            .unwrap();
        assert_eq!(v.status, VolumeState::Append);
        let j = c.begin_job(1, "j", 0, 262144, &[]).unwrap();
        let word = |sql: &str| -> String { c.conn.query_row(sql, [], |r| r.get(0)).unwrap() };
        assert_eq!(word("SELECT status FROM jobs"), "running");
        c.finish_job(j, JobState::Partial, 1, 2, 3.0, 4).unwrap();
        assert_eq!(word("SELECT status FROM jobs"), "partial");
        c.set_volume_status(v.id, VolumeState::Full).unwrap();
        assert_eq!(word("SELECT status FROM volumes"), "full");
        // Rows written as words by any tapeloom read back as states.
        c.conn.execute("UPDATE jobs SET status = 'ok'", []).unwrap();
        c.conn
            .execute("UPDATE volumes SET status = 'append'", [])
            .unwrap();
        assert_eq!(c.job(j).unwrap().unwrap().status, JobState::Ok);
        assert_eq!(c.volumes().unwrap()[0].status, VolumeState::Append);
        // A word no tapeloom writes is an error that names it, down the cause chain.
        c.conn
            .execute("UPDATE jobs SET status = 'paused'", [])
            .unwrap();
        let e = c.jobs().unwrap_err();
        assert!(matches!(e, CatalogError::Sqlite { .. }), "{e:?}");
        let sqlite = e.source().expect("SQLite's error");
        let unknown = sqlite.source().expect("the word");
        assert_eq!(unknown.to_string(), "unknown job state \"paused\"");
    }

    #[test]
    fn prefix_listing_of_a_million_files_is_indexed() {
        let dir = tempfile::tempdir().unwrap();
        let c = Catalog::open(&dir.path().join("c.db")).unwrap();
        let j = c.begin_job(1, "big", 0, 262144, &[]).unwrap();
        let rows: Vec<FileRow> = (0..200_000)
            .map(|i| row(&format!("d{:03}/f{i:07}", i % 500), i))
            .collect();
        c.add_files(j, &rows).unwrap();
        let plan: String = c
            .conn
            .query_row(
                "EXPLAIN QUERY PLAN SELECT path FROM files WHERE job_id = 1 AND (path = x'00' OR (path >= x'01' AND path < x'02'))",
                [],
                |r| r.get(3),
            )
            .unwrap();
        assert!(
            plan.contains("PRIMARY KEY") || plan.contains("INDEX"),
            "{plan}"
        );
        assert_eq!(c.files(j, Some(b"d007")).unwrap().len(), 400);
    }
}
