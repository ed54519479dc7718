//! Files and extents: where every entry of a job is, and each stream's runs of
//! blocks.

use crate::db::{params, OptionalExtension};
use crate::error::{Doing, Result};
use crate::write_tx;
use crate::Catalog;

/// One file system object of a job and where it is.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
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
    /// Status change time in nanoseconds (0 when not known: rows of older jobs).
    pub ctime_ns: i64,
    /// Inode number (0 when not known).
    pub ino: u64,
    /// A regular file's new metadata alone: its data is in an earlier job of the
    /// set, and it has no `Data` record in this one.
    pub meta_only: bool,
}

impl FileRow {
    /// Whether the entry has data in its job: a regular file, unless the row is
    /// metadata alone.
    pub fn has_data(&self) -> bool {
        self.kind == tapeloom_format::EntryType::Regular as u8 && !self.meta_only
    }
}

/// What change detection compares of a file row: its type, size, times, inode,
/// mode and owner, and a hard link's target.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileFacts {
    /// Entry type code.
    pub kind: u8,
    /// Logical size.
    pub size: u64,
    /// Modification time in nanoseconds.
    pub mtime_ns: i64,
    /// Status change time in nanoseconds (0 when not known).
    pub ctime_ns: i64,
    /// Inode number (0 when not known).
    pub ino: u64,
    /// Permission bits.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// A hard link's target (empty for every other type).
    pub link: Vec<u8>,
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
                         start_off, end_seq, end_lbn, crc, link, ctime_ns, ino, meta_only";

/// Columns of `FILE_COLS`.
const FILE_COL_COUNT: usize = 18;
/// Rows per `INSERT` statement when recording files: fewer statements to run, and
/// well below SQLite's limit on parameters.
const ROWS_PER_INSERT: usize = 32;

/// An insert of `n` file rows that replaces a row of the same path: `?1` is the job, then each row's
/// `FILE_COLS` in order. Rows of one statement are stored in order, as one statement
/// each would store them.
fn insert_files_sql(n: usize) -> String {
    let mut s = format!("INSERT INTO files (job_id, {FILE_COLS}) VALUES ");
    for i in 0..n {
        if i > 0 {
            s.push(',');
        }
        s.push_str("(?1");
        for c in 0..FILE_COL_COUNT {
            s.push_str(&format!(", ?{}", 2 + i * FILE_COL_COUNT + c));
        }
        s.push(')');
    }
    s.push_str(" ON CONFLICT (job_id, path) DO UPDATE SET ");
    let cols: Vec<String> = (FILE_COLS.split(','))
        .map(str::trim)
        .filter(|c| *c != "path")
        .map(|c| format!("{c} = excluded.{c}"))
        .collect();
    s.push_str(&cols.join(", "));
    s
}

/// The rows (`cols`) of job `?1` at path `?2` or under it (`?3` to `?4`, from
/// [`prefix_range`]), in path order. Two searches of the primary key, one for
/// the path and one for the range under it: a search of `path = ?2 OR (path >=
/// ?3 AND path < ?4)` reads every row of the job on SQLite.
fn prefix_sql(cols: &str) -> String {
    format!(
        "SELECT {cols} FROM files WHERE job_id = ?1 AND path = ?2 \
         UNION ALL SELECT {cols} FROM files WHERE job_id = ?1 AND path >= ?3 AND path < ?4 \
         ORDER BY path"
    )
}

/// Rows from which PostgreSQL gets files by `COPY` rather than by `INSERT`.
const COPY_FROM: usize = 256;

/// Records `rows` of `job` on PostgreSQL by `COPY`: into the table when none of
/// their paths is there yet, else into a temporary table and from it in one
/// statement, a row of the same path replaced. Of rows of one path, the last is
/// kept, as one statement each would keep it.
fn copy_files(conn: &crate::db::Conn, job: i64, rows: &[FileRow]) -> crate::db::Result<()> {
    use crate::db::{Type, Value};
    let mut last = std::collections::HashMap::with_capacity(rows.len());
    for (i, f) in rows.iter().enumerate() {
        last.insert(f.path.as_slice(), i);
    }
    let values: Vec<Vec<Value>> = (rows.iter().enumerate())
        .filter(|(i, f)| last.get(f.path.as_slice()) == Some(i))
        .map(|(_, f)| {
            let int = |v: i64| Value::Int(v);
            vec![
                int(job),
                Value::Blob(f.path.clone()),
                int(f.stream.into()),
                int(f.kind.into()),
                int(f.mode.into()),
                int(f.uid.into()),
                int(f.gid.into()),
                int(f.size as i64),
                int(f.mtime_ns),
                int(f.start_seq.into()),
                int(f.start_lbn as i64),
                int(f.start_off.into()),
                int(f.end_seq.into()),
                int(f.end_lbn as i64),
                int(f.crc.into()),
                Value::Blob(f.link.clone()),
                int(f.ctime_ns),
                int(f.ino as i64),
                int(f.meta_only.into()),
            ]
        })
        .collect();
    let mut columns = vec!["job_id"];
    columns.extend(FILE_COLS.split(',').map(str::trim));
    let mut types = vec![Type::INT8; columns.len()];
    for (c, t) in columns.iter().zip(types.iter_mut()) {
        if *c == "path" || *c == "link" {
            *t = Type::BYTEA;
        }
    }
    let tx = conn.write_tx()?;
    // Straight into the table: a job's rows are new, except when a path comes
    // again in a later batch; then the copy is undone and goes the longer way.
    tx.execute_batch("SAVEPOINT copy_files")?;
    match tx.copy_in("files", &columns, &types, &values) {
        Ok(_) => {
            tx.execute_batch("RELEASE SAVEPOINT copy_files")?;
            return tx.commit();
        }
        Err(e) if crate::error::is_duplicate_key(&e) => {
            tx.execute_batch("ROLLBACK TO SAVEPOINT copy_files")?;
        }
        Err(e) => return Err(e),
    }
    tx.execute_batch(
        "CREATE TEMP TABLE IF NOT EXISTS files_in (LIKE files) ON COMMIT DELETE ROWS",
    )?;
    tx.copy_in("files_in", &columns, &types, &values)?;
    let list = columns.join(", ");
    let set: Vec<String> = (columns.iter())
        .filter(|c| !matches!(**c, "job_id" | "path"))
        .map(|c| format!("{c} = excluded.{c}"))
        .collect();
    tx.execute(
        &format!(
            "INSERT INTO files ({list}) SELECT {list} FROM files_in \
             ON CONFLICT (job_id, path) DO UPDATE SET {}",
            set.join(", ")
        ),
        &[],
    )?;
    tx.commit()
}

/// Whether two rows of `rows` have one path.
fn has_repeated_path(rows: &[FileRow]) -> bool {
    let mut seen = std::collections::HashSet::with_capacity(rows.len());
    !rows.iter().all(|f| seen.insert(f.path.as_slice()))
}

/// Runs `sql` (of [`insert_files_sql`]) for `rows` of `job`.
fn insert_files(
    conn: &crate::db::Conn,
    sql: &str,
    job: i64,
    rows: &[FileRow],
) -> crate::db::Result<()> {
    let mut st = conn.prepare_cached(sql)?;
    st.raw_bind_parameter(1, job)?;
    for (i, f) in rows.iter().enumerate() {
        let b = 2 + i * FILE_COL_COUNT;
        st.raw_bind_parameter(b, &f.path)?;
        st.raw_bind_parameter(b + 1, f.stream)?;
        st.raw_bind_parameter(b + 2, f.kind)?;
        st.raw_bind_parameter(b + 3, f.mode)?;
        st.raw_bind_parameter(b + 4, f.uid)?;
        st.raw_bind_parameter(b + 5, f.gid)?;
        st.raw_bind_parameter(b + 6, f.size as i64)?;
        st.raw_bind_parameter(b + 7, f.mtime_ns)?;
        st.raw_bind_parameter(b + 8, f.start_seq)?;
        st.raw_bind_parameter(b + 9, f.start_lbn as i64)?;
        st.raw_bind_parameter(b + 10, f.start_off)?;
        st.raw_bind_parameter(b + 11, f.end_seq)?;
        st.raw_bind_parameter(b + 12, f.end_lbn as i64)?;
        st.raw_bind_parameter(b + 13, f.crc)?;
        st.raw_bind_parameter(b + 14, &f.link)?;
        st.raw_bind_parameter(b + 15, f.ctime_ns)?;
        st.raw_bind_parameter(b + 16, f.ino as i64)?;
        st.raw_bind_parameter(b + 17, f.meta_only)?;
    }
    st.raw_execute()?;
    Ok(())
}

fn file_row(r: &crate::db::Row) -> crate::db::Result<FileRow> {
    Ok(FileRow {
        path: r.get(0)?,
        stream: r.get(1)?,
        kind: r.get(2)?,
        mode: r.get(3)?,
        uid: r.get(4)?,
        gid: r.get(5)?,
        size: r.get::<i64>(6)? as u64,
        mtime_ns: r.get(7)?,
        start_seq: r.get(8)?,
        start_lbn: r.get::<i64>(9)? as u64,
        start_off: r.get(10)?,
        end_seq: r.get(11)?,
        end_lbn: r.get::<i64>(12)? as u64,
        crc: r.get(13)?,
        link: r.get(14)?,
        ctime_ns: r.get::<Option<i64>>(15)?.unwrap_or(0),
        ino: r.get::<Option<i64>>(16)?.unwrap_or(0) as u64,
        meta_only: r.get(17)?,
    })
}

impl Catalog {
    /// Records files, in one transaction, several rows per statement.
    pub fn add_files(&self, job: i64, rows: &[FileRow]) -> Result<()> {
        if self.conn.dialect() == crate::db::Dialect::Postgres && rows.len() >= COPY_FROM {
            return copy_files(&self.conn, job, rows).doing("record files");
        }
        let run = || -> crate::db::Result<()> {
            let tx = write_tx(&self.conn)?;
            let full = insert_files_sql(ROWS_PER_INSERT);
            for chunk in rows.chunks(ROWS_PER_INSERT) {
                // PostgreSQL refuses one statement that writes a row twice; rows of
                // one path go one statement each, the last one kept, as on SQLite.
                if has_repeated_path(chunk) {
                    for f in chunk {
                        insert_files(&tx, &insert_files_sql(1), job, std::slice::from_ref(f))?;
                    }
                } else if chunk.len() == ROWS_PER_INSERT {
                    insert_files(&tx, &full, job, chunk)?;
                } else {
                    insert_files(&tx, &insert_files_sql(chunk.len()), job, chunk)?;
                }
            }
            tx.commit()
        };
        run().doing("record files")
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
            Some(p) => (prefix_sql(FILE_COLS), Some((p, prefix_range(p)))),
        };
        let mut st = self.conn.prepare_cached(&sql).doing(WHAT)?;
        let mut rows = match &range {
            None => st.query(params![job]),
            Some((p, (lo, hi))) => st.query(params![job, p, lo, hi]),
        }
        .doing(WHAT)?;
        while let Some(r) = rows.next().doing(WHAT)? {
            f(file_row(r).doing(WHAT)?)?;
        }
        Ok(())
    }

    /// Calls `f` with the path and change facts of every file of `job` whose path
    /// is at or after `from` and before `to` (unbounded where `None`), reading only
    /// those columns, in path order.
    pub fn for_each_facts(
        &self,
        job: i64,
        (from, to): (Option<&[u8]>, Option<&[u8]>),
        mut f: impl FnMut(Vec<u8>, FileFacts),
    ) -> Result<()> {
        const WHAT: &str = "list files";
        // Only the bounds given are parameters: PostgreSQL cannot tell the type
        // of a parameter that is only ever NULL.
        let mut sql = String::from(
            "SELECT path, type, size, mtime_ns, ctime_ns, ino, mode, uid, gid, \
             CASE WHEN type = 4 THEN link END FROM files WHERE job_id = ?1",
        );
        let mut args: Vec<&dyn crate::db::ToValue> = vec![&job];
        if let Some(from) = &from {
            args.push(from);
            sql.push_str(&format!(" AND path >= ?{}", args.len()));
        }
        if let Some(to) = &to {
            args.push(to);
            sql.push_str(&format!(" AND path < ?{}", args.len()));
        }
        sql.push_str(" ORDER BY path");
        let mut st = self.conn.prepare_cached(&sql).doing(WHAT)?;
        let mut rows = st.query(&args).doing(WHAT)?;
        let facts = |r: &crate::db::Row| -> crate::db::Result<FileFacts> {
            Ok(FileFacts {
                kind: r.get(1)?,
                size: r.get::<i64>(2)? as u64,
                mtime_ns: r.get(3)?,
                ctime_ns: r.get::<Option<i64>>(4)?.unwrap_or(0),
                ino: r.get::<Option<i64>>(5)?.unwrap_or(0) as u64,
                mode: r.get(6)?,
                uid: r.get(7)?,
                gid: r.get(8)?,
                link: r.get::<Option<Vec<u8>>>(9)?.unwrap_or_default(),
            })
        };
        while let Some(r) = rows.next().doing(WHAT)? {
            let path: Vec<u8> = r.get(0).doing(WHAT)?;
            f(path, facts(r).doing(WHAT)?);
        }
        Ok(())
    }

    /// The path of `job`'s file number `n` in path order (from 0), if it has so many.
    pub fn nth_path(&self, job: i64, n: u64) -> Result<Option<Vec<u8>>> {
        self.conn
            .query_row(
                "SELECT path FROM files WHERE job_id = ?1 ORDER BY path LIMIT 1 OFFSET ?2",
                params![job, n as i64],
                |r| r.get(0),
            )
            .optional()
            .doing("find a file by its place")
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
        let run = || -> crate::db::Result<Vec<FileRow>> {
            let mut st = self.conn.prepare_cached(&format!(
                "SELECT {FILE_COLS} FROM files WHERE job_id = ?1 AND path > ?2 ORDER BY path LIMIT ?3"
            ))?;

            st.query_map(params![job, after.unwrap_or(b""), limit as i64], file_row)?
                .collect()
        };
        run().doing("list files")
    }

    /// Files of `job` whose bytes include block `lbn` of volume sequence `seq`.
    pub fn files_in_block(&self, job: i64, seq: u32, lbn: u64) -> Result<Vec<Vec<u8>>> {
        let run = || -> crate::db::Result<Vec<Vec<u8>>> {
            let mut st = self.conn.prepare_cached(
                "SELECT path FROM files WHERE job_id = ?1 \
                 AND (start_seq < ?2 OR (start_seq = ?2 AND start_lbn <= ?3)) \
                 AND (end_seq > ?2 OR (end_seq = ?2 AND end_lbn >= ?3)) ORDER BY path",
            )?;

            st.query_map(params![job, seq, lbn as i64], |r| r.get(0))?
                .collect()
        };
        run().doing("find the files in a block")
    }

    /// Records extents, in one transaction.
    pub fn add_extents(&self, job: i64, extents: &[Extent]) -> Result<()> {
        let run = || -> crate::db::Result<()> {
            let tx = write_tx(&self.conn)?;
            insert_extents(&tx, job, extents)?;
            tx.commit()
        };
        run().doing("record extents")
    }

    /// Replaces the extents of a job with `extents`, in one transaction.
    pub fn replace_extents(&self, job: i64, extents: &[Extent]) -> Result<()> {
        let run = || -> crate::db::Result<()> {
            let tx = write_tx(&self.conn)?;
            tx.execute("DELETE FROM extents WHERE job_id = ?1", params![job])?;
            insert_extents(&tx, job, extents)?;
            tx.commit()
        };
        run().doing("replace a job's extents")
    }

    /// The extents of a job in tape order.
    pub fn extents(&self, job: i64) -> Result<Vec<Extent>> {
        let run = || -> crate::db::Result<Vec<Extent>> {
            let mut st = self.conn.prepare_cached(
                "SELECT stream, seq, first_lbn, blocks, stream_offset FROM extents \
                 WHERE job_id = ?1 ORDER BY seq, first_lbn",
            )?;

            st.query_map(params![job], |r| {
                Ok(Extent {
                    stream: r.get(0)?,
                    seq: r.get(1)?,
                    first_lbn: r.get::<i64>(2)? as u64,
                    blocks: r.get::<i64>(3)? as u64,
                    stream_offset: r.get::<i64>(4)? as u64,
                })
            })?
            .collect()
        };
        run().doing("read a job's extents")
    }
}

pub(crate) fn insert_extents(
    tx: &crate::db::Tx<'_>,
    job: i64,
    extents: &[Extent],
) -> crate::db::Result<()> {
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
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::both;
    use crate::tests::{row, scratch};
    use crate::CatalogError;

    fn raw_row(path: &[u8], lbn: u64) -> FileRow {
        FileRow {
            path: path.to_vec(),
            ..row("", lbn)
        }
    }

    fn paths(c: &Catalog, job: i64, prefix: Option<&[u8]>) -> Vec<Vec<u8>> {
        let mut v = Vec::new();
        c.for_each_file(job, prefix, |r| {
            v.push(r.path);
            Ok(())
        })
        .unwrap();
        v
    }

    both! {
        /// Regression: the facts an incremental backup compares, read with
        /// `x''` for a link, failed on PostgreSQL ("CASE types bit and bytea
        /// cannot be matched").
        fn an_incremental_reads_each_files_facts_and_a_links_target() {
            let (_dir, c) = scratch();
            let j = c.begin_job(1, "j", 0, 262144, &[]).unwrap();
            let link = FileRow {
                kind: 4,
                link: b"a".to_vec(),
                ..raw_row(b"b", 3)
            };
            c.add_files(j, &[raw_row(b"a", 2), link]).unwrap();
            let mut seen = Vec::new();
            c.for_each_facts(j, (None, None), |p, f| seen.push((p, f.kind, f.link)))
                .unwrap();
            assert_eq!(
                seen,
                vec![(b"a".to_vec(), 1, vec![]), (b"b".to_vec(), 4, b"a".to_vec())]
            );
            // A shard of the paths: from a bound, up to one, and between two.
            for (range, want) in [
                ((Some(&b"b"[..]), None), vec![b"b".to_vec()]),
                ((None, Some(&b"b"[..])), vec![b"a".to_vec()]),
                ((Some(&b"a"[..]), Some(&b"b"[..])), vec![b"a".to_vec()]),
            ] {
                let mut paths = Vec::new();
                c.for_each_facts(j, range, |p, _| paths.push(p)).unwrap();
                assert_eq!(paths, want, "{range:?}");
            }
            // A job running again forgets its reasons (errors of no path), and
            // keeps its files'; put back to wait, it says why.
            c.add_error(j, b"", "the drive went away").unwrap();
            c.add_error(j, b"x", "unreadable").unwrap();
            c.set_job_running(j).unwrap();
            assert_eq!(c.errors(j).unwrap(), vec![(b"x".to_vec(), "unreadable".to_string())]);
            c.requeue_job(j, "no drive").unwrap();
            assert_eq!(c.job(j).unwrap().unwrap().status, crate::JobState::Queued);
            assert_eq!(c.job_reasons(j).unwrap(), ["no drive"]);
        }
    }

    both! {
        fn without_a_prefix_every_file_of_the_job_comes_in_byte_order() {
            let (_dir, c) = scratch();
            let j = c.begin_job(1, "j", 0, 262144, &[]).unwrap();
            let other = c.begin_job(2, "k", 0, 262144, &[]).unwrap();
            let names: [&[u8]; 6] = [b"a/b", b"\xff\xfe", b"B", b".", b"a", b"a\x80/x"];
            let rows: Vec<FileRow> = names.iter().map(|p| raw_row(p, 2)).collect();
            c.add_files(j, &rows).unwrap();
            c.add_files(other, &[raw_row(b"a/zzz", 9)]).unwrap();
            let want: Vec<Vec<u8>> = [&b"."[..], b"B", b"a", b"a/b", b"a\x80/x", b"\xff\xfe"]
                .iter()
                .map(|p| p.to_vec())
                .collect();
            assert_eq!(paths(&c, j, None), want);
            // `.` and the empty path name the namespace root: everything.
            assert_eq!(paths(&c, j, Some(b".")), want);
            assert_eq!(paths(&c, j, Some(b"")), want);
            assert_eq!(c.files(j, None).unwrap().len(), 6);
            assert_eq!(paths(&c, other, None), vec![b"a/zzz".to_vec()]);
        }
    }

    both! {
        fn a_prefix_lists_itself_and_what_is_under_it_never_a_sibling_it_begins() {
            let (_dir, c) = scratch();
            let j = c.begin_job(1, "j", 0, 262144, &[]).unwrap();
            // Siblings of `a/b` that begin with it, with the bytes just below and just
            // above `/`, and one that is not UTF-8.
            let names: [&[u8]; 9] = [
                b"a/b", b"a/b/c", b"a/b/d/e", b"a/b.x", b"a/b0", b"a/bc", b"a/bc/d", b"a/b\xff", b"a/c",
            ];
            let rows: Vec<FileRow> = names.iter().map(|p| raw_row(p, 2)).collect();
            c.add_files(j, &rows).unwrap();
            assert_eq!(
                paths(&c, j, Some(b"a/b")),
                vec![b"a/b".to_vec(), b"a/b/c".to_vec(), b"a/b/d/e".to_vec()]
            );
            assert_eq!(
                paths(&c, j, Some(b"a/bc")),
                vec![b"a/bc".to_vec(), b"a/bc/d".to_vec()]
            );
            assert_eq!(paths(&c, j, Some(b"a/b/c")), vec![b"a/b/c".to_vec()]);
            assert_eq!(paths(&c, j, Some(b"a/b\xff")), vec![b"a/b\xff".to_vec()]);
            assert!(paths(&c, j, Some(b"a/bd")).is_empty());
            assert_eq!(paths(&c, j, Some(b"a")).len(), names.len());
        }
    }

    both! {
        fn prefixes_and_paths_that_are_not_utf8() {
            let (_dir, c) = scratch();
            let j = c.begin_job(1, "j", 0, 262144, &[]).unwrap();
            let names: [&[u8]; 5] = [b"d\xff", b"d\xff/x", b"d\xff/y\x00z", b"d\xfe/x", b"d\xff0"];
            let rows: Vec<FileRow> = names.iter().map(|p| raw_row(p, 2)).collect();
            c.add_files(j, &rows).unwrap();
            assert_eq!(
                paths(&c, j, Some(b"d\xff")),
                vec![
                    b"d\xff".to_vec(),
                    b"d\xff/x".to_vec(),
                    b"d\xff/y\x00z".to_vec()
                ]
            );
            assert_eq!(paths(&c, j, Some(b"d\xfe")), vec![b"d\xfe/x".to_vec()]);
            assert_eq!(
                c.file(j, b"d\xff/y\x00z").unwrap().map(|r| r.path),
                Some(b"d\xff/y\x00z".to_vec())
            );
            assert_eq!(c.file(j, b"d\xff/y").unwrap(), None);
        }
    }

    both! {
        fn the_callbacks_error_ends_the_listing_and_is_returned() {
            let (_dir, c) = scratch();
            let j = c.begin_job(1, "j", 0, 262144, &[]).unwrap();
            let rows: Vec<FileRow> = (0..5).map(|i| row(&format!("f{i}"), i)).collect();
            c.add_files(j, &rows).unwrap();
            let mut seen = 0;
            let r = c.for_each_file(j, None, |_| {
                seen += 1;
                if seen == 2 {
                    return Err(CatalogError::NoJob { id: 77 });
                }
                Ok(())
            });
            assert!(matches!(r, Err(CatalogError::NoJob { id: 77 })), "{r:?}");
            assert_eq!(seen, 2);
        }
    }

    both! {
        fn pages_after_a_path_cover_every_file_once() {
            let (_dir, c) = scratch();
            let j = c.begin_job(1, "j", 0, 262144, &[]).unwrap();
            let rows: Vec<FileRow> = (0..7).map(|i| row(&format!("f{i}"), i)).collect();
            c.add_files(j, &rows).unwrap();
            let mut after: Option<Vec<u8>> = None;
            let mut got = Vec::new();
            loop {
                let page = c.files_after(j, after.as_deref(), 3).unwrap();
                assert!(page.len() <= 3);
                got.extend(page.iter().map(|r| r.path.clone()));
                match page.last() {
                    Some(last) if page.len() == 3 => after = Some(last.path.clone()),
                    _ => break,
                }
            }
            let want: Vec<Vec<u8>> = rows.iter().map(|r| r.path.clone()).collect();
            assert_eq!(got, want);
        }
    }

    both! {
        fn extents_come_in_tape_order_and_a_streams_runs_in_stream_order() {
            let (_dir, c) = scratch();
            let j = c.begin_job(1, "j", 0, 262144, &[]).unwrap();
            let other = c.begin_job(2, "k", 0, 262144, &[]).unwrap();
            let e = |stream, seq, first_lbn, blocks, stream_offset| Extent {
                stream,
                seq,
                first_lbn,
                blocks,
                stream_offset,
            };
            // Stream 1 runs over both volumes of the job, interleaved with stream 2.
            let stream1 = [
                e(1, 0, 2, 4, 0),
                e(1, 0, 10, 3, 4 * 1000),
                e(1, 1, 2, 5, 7 * 1000),
            ];
            let stream2 = [e(2, 0, 6, 4, 0), e(2, 1, 7, 2, 4 * 1000)];
            // Recorded as blocks landed on two drives: not in tape order.
            c.add_extents(j, &[stream1[2], stream2[1], stream1[0]])
                .unwrap();
            c.add_extents(j, &[stream2[0], stream1[1]]).unwrap();
            c.add_extents(other, &[e(1, 0, 3, 1, 0)]).unwrap();
            let all = c.extents(j).unwrap();
            assert_eq!(
                all,
                vec![stream1[0], stream2[0], stream1[1], stream1[2], stream2[1]]
            );
            let of =
                |s: u16| -> Vec<Extent> { all.iter().filter(|x| x.stream == s).copied().collect() };
            assert_eq!(of(1), stream1);
            assert_eq!(of(2), stream2);
            assert!(of(1)
                .windows(2)
                .all(|w| w[0].stream_offset < w[1].stream_offset));
            assert_eq!(c.extents(other).unwrap().len(), 1);
        }
    }

    both! {
        fn prefix_listing_of_a_million_files_is_indexed() {
            let (_dir, c) = crate::tests::scratch();
            let j = c.begin_job(1, "big", 0, 262144, &[]).unwrap();
            let rows: Vec<FileRow> = (0..200_000)
                .map(|i| row(&format!("d{:03}/f{i:07}", i % 500), i))
                .collect();
            c.add_files(j, &rows).unwrap();
            // The plan of the listing's own statement: each part searches the
            // primary key by the path, none reads the job's rows.
            let (lo, hi) = prefix_range(b"d007");
            let args = params![j, b"d007".as_slice(), lo, hi];
            let sql = prefix_sql("path");
            let plan: Vec<String> = match c.conn.as_sqlite() {
                Some(_) => (c.conn.query_all(&format!("EXPLAIN QUERY PLAN {sql}"), args))
                    .unwrap()
                    .iter()
                    .map(|r| r.get(3).unwrap())
                    .filter(|l: &String| l.contains("files"))
                    .collect(),
                None => {
                    c.conn.execute_batch("ANALYZE files").unwrap();
                    (c.conn.query_all(&format!("EXPLAIN {sql}"), args))
                        .unwrap()
                        .iter()
                        .map(|r| r.get(0).unwrap())
                        .filter(|l: &String| l.contains("Cond"))
                        .collect()
                }
            };
            assert_eq!(plan.len(), 2, "{plan:?}");
            for line in &plan {
                assert!(line.contains("path"), "a search not by path: {plan:?}");
            }
            assert_eq!(c.files(j, Some(b"d007")).unwrap().len(), 400);
        }
    }

    both! {
        fn many_rows_recorded_again_replace_the_first_ones() {
            let (_dir, c) = crate::tests::scratch();
            let j = c.begin_job(1, "j", 0, 262144, &[]).unwrap();
            let first: Vec<FileRow> = (0..600).map(|i| row(&format!("f{i:04}"), i)).collect();
            c.add_files(j, &first).unwrap();
            // The same paths again, with others and a path twice in one batch.
            let mut again: Vec<FileRow> = (300..900)
                .map(|i| FileRow {
                    crc: 99,
                    ..row(&format!("f{i:04}"), i)
                })
                .collect();
            again.push(FileRow {
                crc: 100,
                ..row("f0899", 899)
            });
            c.add_files(j, &again).unwrap();
            let all = c.files(j, None).unwrap();
            assert_eq!(all.len(), 900);
            assert!(all[..300].iter().all(|f| f.crc == 7));
            assert!(all[300..899].iter().all(|f| f.crc == 99));
            assert_eq!(all[899].crc, 100, "the last row of a path is kept");
        }
    }
}
