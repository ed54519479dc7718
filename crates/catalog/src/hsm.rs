//! Hierarchical storage (schema 18): the folders tapeloom manages on each host
//! and, for each managed file whose data went to tape, its state and its tape
//! copy's address. The file's own extended attribute holds the same record, so
//! that either can be rebuilt from the other (`hsm reconcile`).

use crate::db::{params, OptionalExtension};
use crate::error::{Doing, Result};
use crate::Catalog;

/// A folder tapeloom manages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HsmRoot {
    /// Its absolute path on the host (raw bytes).
    pub path: Vec<u8>,
    /// The media pool its files migrate to.
    pub pool: String,
    /// When it was added, nanoseconds since the epoch.
    pub added_ns: i64,
}

/// A managed file whose data went to tape, as the catalog keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HsmFile {
    /// Its absolute path on the host (raw bytes).
    pub path: Vec<u8>,
    /// `premigrated`, `released` or `dirty`.
    pub state: String,
    /// The job its tape copy is in.
    pub job_id: i64,
    /// Its path in that job's namespace.
    pub entry: Vec<u8>,
    /// Its size when it was copied.
    pub size: u64,
    /// Its modification time when it was copied, in nanoseconds.
    pub mtime_ns: i64,
    /// Its status change time as last recorded (after the attribute was set),
    /// in nanoseconds: a file whose ctime differs was changed since.
    pub ctime_ns: i64,
    /// CRC32C of its data.
    pub crc: u32,
    /// Whether the tape copy was read back and checked.
    pub verified: bool,
    /// When this record last changed, nanoseconds since the epoch.
    pub changed_ns: i64,
}

const FILE_COLS: &str =
    "path, state, job_id, entry, size, mtime_ns, ctime_ns, crc, verified, changed_ns";

fn file_row(r: &crate::db::Row) -> crate::db::Result<HsmFile> {
    Ok(HsmFile {
        path: r.get(0)?,
        state: r.get(1)?,
        job_id: r.get(2)?,
        entry: r.get(3)?,
        size: r.get::<i64>(4)? as u64,
        mtime_ns: r.get(5)?,
        ctime_ns: r.get(6)?,
        crc: r.get::<i64>(7)? as u32,
        verified: r.get(8)?,
        changed_ns: r.get(9)?,
    })
}

impl Catalog {
    /// Records `path` as a folder this host manages, its files migrating to
    /// `pool` (again: the pool is updated).
    pub fn add_hsm_root(&self, path: &[u8], pool: &str, now_ns: i64) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO hsm_roots (host, path, pool, added_ns) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (host, path) DO UPDATE SET pool = excluded.pool",
                params![self.host, path, pool, now_ns],
            )
            .doing("add a managed folder")?;
        Ok(())
    }

    /// The folders this host manages, by path.
    pub fn hsm_roots(&self) -> Result<Vec<HsmRoot>> {
        let run = || -> crate::db::Result<Vec<HsmRoot>> {
            let mut st = self.conn.prepare(
                "SELECT path, pool, added_ns FROM hsm_roots WHERE host = ?1 ORDER BY path",
            )?;
            st.query_map(params![self.host], |r| {
                Ok(HsmRoot {
                    path: r.get(0)?,
                    pool: r.get(1)?,
                    added_ns: r.get(2)?,
                })
            })?
            .collect()
        };
        run().doing("list the managed folders")
    }

    /// Records `f` (again: replaces what was recorded of its path).
    pub fn put_hsm_file(&self, f: &HsmFile) -> Result<()> {
        self.conn
            .execute(
                &format!(
                    "INSERT INTO hsm_files (host, {FILE_COLS})
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
                     ON CONFLICT (host, path) DO UPDATE SET state = excluded.state,
                     job_id = excluded.job_id, entry = excluded.entry, size = excluded.size,
                     mtime_ns = excluded.mtime_ns, ctime_ns = excluded.ctime_ns,
                     crc = excluded.crc, verified = excluded.verified,
                     changed_ns = excluded.changed_ns"
                ),
                params![
                    self.host,
                    f.path,
                    f.state,
                    f.job_id,
                    f.entry,
                    f.size as i64,
                    f.mtime_ns,
                    f.ctime_ns,
                    i64::from(f.crc),
                    f.verified,
                    f.changed_ns
                ],
            )
            .doing("record a managed file")?;
        Ok(())
    }

    /// What is recorded of the managed file at `path`.
    pub fn hsm_file(&self, path: &[u8]) -> Result<Option<HsmFile>> {
        self.conn
            .query_row(
                &format!("SELECT {FILE_COLS} FROM hsm_files WHERE host = ?1 AND path = ?2"),
                params![self.host, path],
                file_row,
            )
            .optional()
            .doing("look up a managed file")
    }

    /// The managed files recorded under the folder `root` (every one when it is
    /// empty), by path.
    pub fn hsm_files(&self, root: &[u8]) -> Result<Vec<HsmFile>> {
        let mut under = root.to_vec();
        if !under.is_empty() && !under.ends_with(b"/") {
            under.push(b'/');
        }
        let run = || -> crate::db::Result<Vec<HsmFile>> {
            let mut st = self.conn.prepare(&format!(
                "SELECT {FILE_COLS} FROM hsm_files WHERE host = ?1 ORDER BY path"
            ))?;
            let rows: crate::db::Result<Vec<HsmFile>> =
                st.query_map(params![self.host], file_row)?.collect();
            Ok((rows?.into_iter())
                .filter(|f| f.path.starts_with(&under))
                .collect())
        };
        run().doing("list the managed files")
    }

    /// Forgets the managed file at `path` (it was deleted, or is resident again).
    pub fn forget_hsm_file(&self, path: &[u8]) -> Result<()> {
        self.conn
            .execute(
                "DELETE FROM hsm_files WHERE host = ?1 AND path = ?2",
                params![self.host, path],
            )
            .doing("forget a managed file")?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::tests::{both, scratch};

    fn file(path: &[u8], state: &str) -> super::HsmFile {
        super::HsmFile {
            path: path.to_vec(),
            state: state.into(),
            job_id: 7,
            entry: b"m/a".to_vec(),
            size: 10,
            mtime_ns: 1,
            ctime_ns: 2,
            crc: 0xdead_beef,
            verified: true,
            changed_ns: 3,
        }
    }

    both! {
        fn managed_files_are_recorded_replaced_listed_under_a_root_and_forgotten() {
            let (_t, c) = scratch();
            c.add_hsm_root(b"/m", "hsm", 1).unwrap();
            c.add_hsm_root(b"/m", "other", 2).unwrap();
            let roots = c.hsm_roots().unwrap();
            assert_eq!(roots.len(), 1);
            assert_eq!(roots[0].pool, "other");
            c.put_hsm_file(&file(b"/m/a", "premigrated")).unwrap();
            c.put_hsm_file(&file(b"/m/a", "released")).unwrap();
            c.put_hsm_file(&file(b"/mm/b", "released")).unwrap();
            let got = c.hsm_file(b"/m/a").unwrap().unwrap();
            assert_eq!(got, file(b"/m/a", "released"));
            assert_eq!(c.hsm_files(b"/m").unwrap().len(), 1);
            assert_eq!(c.hsm_files(b"").unwrap().len(), 2);
            c.forget_hsm_file(b"/m/a").unwrap();
            assert!(c.hsm_file(b"/m/a").unwrap().is_none());
        }
    }
}
