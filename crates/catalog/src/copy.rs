//! `Catalog::copy_into`: every row of one catalog into another, empty one (a
//! home's SQLite catalog into the PostgreSQL catalog a site moves to).
//!
//! Tables are copied in an order that keeps every reference whole (volumes and
//! jobs before the rows that name them), each in one transaction, in batches of
//! rows. The tables SQLite reads in insertion order (`rowid`) are read in that
//! order, so their rows keep it on the other side. The ids a table makes itself
//! (volumes, stages) are copied as they are, and the destination's counters are
//! then moved past them.

use crate::db::{Conn, Dialect, Value};
use crate::error::{CatalogError, Doing, Result};
use crate::Catalog;

/// The tables of the catalog, in the order they are copied, each with the
/// column it is read in order of.
const TABLES: &[(&str, &str)] = &[
    ("volumes", "id"),
    ("volume_generations", "volume_id"),
    ("volume_notes", "rowid"),
    ("pools", "name"),
    ("pool_cartridges", "barcode"),
    ("pool_keys", "pool"),
    ("pool_copies", "pool"),
    ("pool_reclaims", "pool"),
    ("tokens", "name"),
    ("stages", "id"),
    ("jobs", "id"),
    ("job_volumes", "job_id, seq"),
    ("streams", "job_id, stream"),
    ("job_errors", "rowid"),
    ("files", "job_id, path"),
    ("deletions", "job_id, path"),
    ("extents", "rowid"),
    ("samples", "job_id, op, series, t_ms"),
    ("recall_samples", "job_id, t_ms"),
    ("job_copies", "job_id, copy_no"),
    ("copy_segments", "job_id, copy_no, seq"),
    ("job_moves", "job_id"),
    ("offsite", "barcode"),
    ("job_verifies", "job_id"),
    ("marks", "rowid"),
    ("drive_health", "rowid"),
    ("staged_chunks", "job_id, stream, seq"),
    ("stage_cuts", "job_id, stream, path"),
    ("id_floor", "name"),
    ("hsm_roots", "host, path"),
    ("hsm_files", "host, path"),
    ("s3_keys", "access_key"),
    ("s3_buckets", "name"),
    ("s3_objects", "id"),
    ("s3_uploads", "id"),
    ("s3_parts", "upload, number"),
];

/// Rows per statement when copying.
const ROWS_PER_INSERT: usize = 64;

/// How many rows of each table were copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copied {
    /// Table and rows, in the order copied.
    pub tables: Vec<(String, u64)>,
}

impl Copied {
    /// Rows of `table` copied (0 for a table not named).
    pub fn rows(&self, table: &str) -> u64 {
        (self.tables.iter())
            .find(|t| t.0 == table)
            .map_or(0, |t| t.1)
    }
}

/// The columns of `table` as `conn` has them, in order; the `rowid` column a
/// PostgreSQL catalog has for ordering is not one (the destination makes its own).
fn columns(conn: &Conn, table: &str) -> crate::db::Result<Vec<String>> {
    let rows = match conn.dialect() {
        // SQLite only: PostgreSQL names its columns in the arm below.
        Dialect::Sqlite => conn.query_all(
            &format!("SELECT name FROM pragma_table_info('{table}')"),
            &[],
        )?,
        Dialect::Postgres => conn.query_all(
            "SELECT column_name::text FROM information_schema.columns \
             WHERE table_schema = current_schema() AND table_name = ?1 ORDER BY ordinal_position",
            &[&table],
        )?,
    };
    let mut out = Vec::new();
    for r in rows {
        let name: String = r.get(0)?;
        if name != "rowid" {
            out.push(name);
        }
    }
    Ok(out)
}

impl Catalog {
    /// Copies every row of this catalog into `to`, which must hold no job, volume
    /// or stage yet ([`CatalogError::NotEmpty`]); returns the rows per table.
    /// When `to` works for a host ([`Catalog::set_host`]), the jobs and stages
    /// copied become that host's.
    pub fn copy_into(&self, to: &Catalog) -> Result<Copied> {
        const WHAT: &str = "copy the catalog";
        for table in ["jobs", "volumes", "stages", "tokens", "pools"] {
            let n: i64 = (to.conn)
                .query_row(&format!("SELECT COUNT(*) FROM {table}"), &[], |r| r.get(0))
                .doing(WHAT)?;
            if n > 0 {
                return Err(CatalogError::NotEmpty {
                    table: table.to_string(),
                    rows: n as u64,
                });
            }
        }
        let mut copied = Vec::new();
        for (table, order) in TABLES {
            let n = self.copy_table(to, table, order).doing(WHAT)?;
            copied.push((table.to_string(), n));
        }
        if to.conn.dialect() == Dialect::Postgres {
            for table in ["volumes", "stages", "s3_objects"] {
                to.conn
                    .query_row(
                        &format!(
                            "SELECT setval(pg_get_serial_sequence('{table}', 'id'), \
                             COALESCE((SELECT MAX(id) FROM {table}), 0) + 1, false)"
                        ),
                        &[],
                        |_| Ok(()),
                    )
                    .doing(WHAT)?;
            }
        }
        // The jobs, stages and managed folders of a home become its host's on a
        // shared catalog.
        if !to.host.is_empty() {
            for table in ["jobs", "stages", "hsm_roots", "hsm_files"] {
                to.conn
                    .execute(
                        &format!("UPDATE {table} SET host = ?1 WHERE host = ''"),
                        crate::db::params![to.host],
                    )
                    .doing(WHAT)?;
            }
        }
        Ok(Copied { tables: copied })
    }

    fn copy_table(&self, to: &Catalog, table: &str, order: &str) -> crate::db::Result<u64> {
        let from_cols = columns(&self.conn, table)?;
        let to_cols = columns(&to.conn, table)?;
        // The columns both have: a column only the destination has keeps its default.
        let cols: Vec<&String> = from_cols.iter().filter(|c| to_cols.contains(c)).collect();
        let list = (cols.iter().map(|c| c.as_str()))
            .collect::<Vec<_>>()
            .join(", ");
        // Only some of PostgreSQL's tables have a rowid column.
        let order = match (order, self.conn.dialect()) {
            ("rowid", Dialect::Postgres) if !PG_ROWID.contains(&table) => "job_id",
            (o, _) => o,
        };
        let tx = to.conn.write_tx()?;
        let mut copied = 0;
        if table == "files" {
            // Page by page in key order: a catalog may hold millions of files.
            let key = (cols.iter())
                .position(|c| *c == "job_id")
                .zip(cols.iter().position(|c| *c == "path"));
            let Some((job_at, path_at)) = key else {
                return Err(crate::db::DbError::conversion(
                    0,
                    "files has no job_id or path",
                ));
            };
            let mut after: (i64, Vec<u8>) = (i64::MIN, Vec::new());
            loop {
                let rows = self.conn.query_all(
                    &format!(
                        "SELECT {list} FROM files WHERE job_id > ?1 OR (job_id = ?1 AND path > ?2) \
                         ORDER BY job_id, path LIMIT {PAGE}"
                    ),
                    &[&after.0, &after.1],
                )?;
                let Some(last) = rows.last() else { break };
                after = (last.get(job_at)?, last.get(path_at)?);
                insert_rows(&tx, table, &list, cols.len(), &rows)?;
                copied += rows.len() as u64;
            }
        } else {
            let rows = self
                .conn
                .query_all(&format!("SELECT {list} FROM {table} ORDER BY {order}"), &[])?;
            insert_rows(&tx, table, &list, cols.len(), &rows)?;
            copied = rows.len() as u64;
        }
        tx.commit()?;
        Ok(copied)
    }
}

/// The tables of a PostgreSQL catalog with a `rowid` column.
const PG_ROWID: [&str; 3] = ["job_errors", "volume_notes", "drive_health"];

/// Rows read at a time from the files table.
const PAGE: usize = 20_000;

/// Inserts `rows` (of `ncols` columns named by `list`) into `table`, several rows
/// a statement.
fn insert_rows(
    tx: &Conn,
    table: &str,
    list: &str,
    ncols: usize,
    rows: &[crate::db::Row],
) -> crate::db::Result<()> {
    for chunk in rows.chunks(ROWS_PER_INSERT) {
        let mut sql = format!("INSERT INTO {table} ({list}) VALUES ");
        let mut values: Vec<Value> = Vec::with_capacity(chunk.len() * ncols);
        for (i, r) in chunk.iter().enumerate() {
            if i > 0 {
                sql.push(',');
            }
            sql.push('(');
            for c in 0..ncols {
                if c > 0 {
                    sql.push(',');
                }
                sql.push_str(&format!("?{}", values.len() + 1));
                values.push(r.get(c)?);
            }
            sql.push(')');
        }
        let params: Vec<&dyn crate::db::ToValue> = values
            .iter()
            .map(|v| v as &dyn crate::db::ToValue)
            .collect();
        tx.execute(&sql, &params)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::tests::{both, row};
    use crate::{Catalog, ChunkState, JobState, Pool, PoolKey, StagedChunk, Stream};
    use tapeloom_format::Level;

    /// An SQLite catalog with a row in every table a site's catalog has.
    fn full(dir: &std::path::Path) -> Catalog {
        let c = Catalog::open(&dir.join("from.db")).unwrap();
        let v = c
            .add_volume("TL0001L9", [3; 16], "weekly", 262144, 5)
            .unwrap();
        c.add_volume_note(v.id, 6, "labelled").unwrap();
        let pool = Pool {
            name: "weekly".into(),
            retention_s: Some(3600),
            max_jobs_per_volume: None,
            append: true,
            worm: false,
            created_ns: 4,
        };
        c.create_pool(&pool, &["TL0001L9".to_string()]).unwrap();
        let key = PoolKey {
            key_file: "/keys/weekly.key".into(),
            fingerprint: "ab12".into(),
        };
        c.set_pool_key("weekly", &key).unwrap();
        c.add_token("alice", &[7; 32], false, 8).unwrap();
        let stage = c
            .add_stage(std::path::Path::new("/stage"), 1 << 30, 9)
            .unwrap();
        let s = Stream {
            stream: 1,
            name: "src".into(),
            source: b"/src".to_vec(),
        };
        for n in 0..3 {
            let j = c
                .begin_job(40 + n, "nightly", 10, 262144, std::slice::from_ref(&s))
                .unwrap();
            c.set_job_set(j, "nightly", Level::Full, None).unwrap();
            c.set_job_key(j, "ab12", &[9; 40]).unwrap();
            c.add_job_volume(j, 0, 0, v.id, 2 + n * 100).unwrap();
            let rows: Vec<_> = (0..250)
                .map(|i| row(&format!("d/f{i:04}"), 3 + n * 100))
                .collect();
            c.add_files(j, &rows).unwrap();
            c.add_error(j, b"d/bad", "unreadable").unwrap();
            c.end_job_volume(j, 0, 50 + n * 100).unwrap();
            c.finish_job(j, JobState::Ok, 250, 2500, 1.5, 9).unwrap();
        }
        c.add_staged_chunk(&StagedChunk {
            job_id: 1,
            stream: 1,
            seq: 0,
            stage_id: stage.id,
            file: "j1/s1/0".into(),
            first_block: 0,
            blocks: 1,
            stream_offset: 0,
            bytes: 100,
            state: ChunkState::Despooled,
            created_ns: 11,
            keep_until_ns: None,
        })
        .unwrap();
        c
    }

    both! {
        fn every_row_is_copied_and_reads_back_the_same() {
            let (dir, to) = crate::tests::scratch();
            let from = full(dir.path());
            let copied = from.copy_into(&to).unwrap();
            assert_eq!(copied.rows("files"), 750);
            assert_eq!(copied.rows("jobs"), 3);
            assert_eq!(to.jobs().unwrap(), from.jobs().unwrap());
            assert_eq!(to.volumes().unwrap(), from.volumes().unwrap());
            assert_eq!(to.pools().unwrap(), from.pools().unwrap());
            assert_eq!(to.tokens().unwrap(), from.tokens().unwrap());
            assert_eq!(to.stages().unwrap(), from.stages().unwrap());
            for j in from.jobs().unwrap() {
                assert_eq!(to.files(j.id, None).unwrap(), from.files(j.id, None).unwrap());
                assert_eq!(to.errors(j.id).unwrap(), from.errors(j.id).unwrap());
                assert_eq!(to.job_volumes(j.id).unwrap(), from.job_volumes(j.id).unwrap());
            }
            assert!(to.check().unwrap().ok());
            // New rows get ids past the copied ones.
            let v = to.add_volume("TL0002L9", [4; 16], "default", 262144, 0).unwrap();
            assert!(v.id > from.volumes().unwrap()[0].id, "{v:?}");
            let j = to.begin_job(99, "next", 0, 262144, &[]).unwrap();
            assert_eq!(j, 4);
            // A catalog with rows of its own is not copied into.
            let e = from.copy_into(&to).unwrap_err();
            assert!(e.to_string().contains("not empty"), "{e}");
            // And back: the copy (on PostgreSQL in the postgres variant) copied
            // into a new SQLite file holds the same rows.
            let back = Catalog::open(&dir.path().join("back.db")).unwrap();
            let again = to.copy_into(&back).unwrap();
            assert_eq!(again.rows("files"), 750);
            for j in from.jobs().unwrap() {
                assert_eq!(back.files(j.id, None).unwrap(), from.files(j.id, None).unwrap());
            }
        }
    }
}
