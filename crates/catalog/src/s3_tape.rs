//! The S3 front end's tape side (schema 26): which objects wait for tape, the
//! job that holds each once archived, the release of an archived object's disk
//! copy, and restores from tape into the restore cache.
//!
//! An object's restore is one set of columns of its row: asked (and running)
//! while `restore_asked_ns` is set; restored while `restored_file` names a copy
//! in the S3 stage, which is kept until `restored_until_ns`. A restore asked
//! again while a restored copy is kept only moves that expiry.

use crate::db::{params, OptionalExtension};
use crate::error::{Doing, Result};
use crate::s3::{object_row, S3Object, OBJECT_COLS};
use crate::write_tx;
use crate::Catalog;

/// What [`Catalog::end_restore`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestoreEnd {
    /// The restored copy is recorded; the copy it replaced, when there was one,
    /// is no longer needed.
    Kept {
        /// The data file of the copy replaced.
        replaced: Option<String>,
    },
    /// The object was deleted or replaced meanwhile: the new copy is not needed.
    Gone,
}

/// What waits on the S3 front end's tape side now, for its metrics and its
/// status page.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct S3Waiting {
    /// Live objects not yet on tape.
    pub objects: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Restores asked and not yet ended.
    pub restores: u64,
}

fn clamp(n: u64) -> i64 {
    n.min(i64::MAX as u64) as i64
}

impl Catalog {
    fn objects_where(
        &self,
        what: &'static str,
        cond: &str,
        p: crate::db::Params<'_>,
    ) -> Result<Vec<S3Object>> {
        let run = || -> crate::db::Result<Vec<S3Object>> {
            let mut st = self.conn.prepare(&format!(
                "SELECT {OBJECT_COLS} FROM s3_objects WHERE {cond}"
            ))?;
            st.query_map(p, object_row)?.collect()
        };
        run().doing(what)
    }

    /// At most `limit` live objects that wait for tape whose data is on this
    /// connection's host, oldest first.
    pub fn objects_to_archive(&self, limit: usize) -> Result<Vec<S3Object>> {
        self.objects_where(
            "list the objects waiting for tape",
            "job_id IS NULL AND deleted_ns IS NULL AND host = ?2 ORDER BY id LIMIT ?1",
            params![clamp(limit as u64), self.host],
        )
    }

    /// Records that job `job` holds the objects `ids` on tape.
    pub fn objects_archived(&self, ids: &[i64], job: i64) -> Result<()> {
        let tx = write_tx(&self.conn).doing("record archived objects")?;
        for id in ids {
            (tx.execute(
                "UPDATE s3_objects SET job_id = ?2 WHERE id = ?1",
                params![id, job],
            ))
            .doing("record archived objects")?;
        }
        tx.commit().doing("record archived objects")
    }

    /// At most `limit` live archived objects of a class kept on tape only whose
    /// data file is still kept on this connection's host, oldest first.
    pub fn objects_to_release(&self, limit: usize) -> Result<Vec<S3Object>> {
        self.objects_where(
            "list the objects whose disk copy may go",
            "job_id IS NOT NULL AND released_ns IS NULL AND deleted_ns IS NULL \
             AND class <> 'STANDARD' AND host = ?2 ORDER BY id LIMIT ?1",
            params![clamp(limit as u64), self.host],
        )
    }

    /// Records that object `id`'s data file is removed at `now_ns`; false when
    /// the object is deleted, or released already.
    pub fn release_object(&self, id: i64, now_ns: i64) -> Result<bool> {
        let n = (self.conn.execute(
            "UPDATE s3_objects SET released_ns = ?2 \
             WHERE id = ?1 AND released_ns IS NULL AND deleted_ns IS NULL",
            params![id, now_ns],
        ))
        .doing("release an object's disk copy")?;
        Ok(n > 0)
    }

    /// Asks a restore of object `id` for `days` days in `tier` at `now_ns`;
    /// false when one runs already (or the object is deleted).
    pub fn ask_restore(&self, id: i64, days: i64, tier: &str, now_ns: i64) -> Result<bool> {
        let n = (self.conn.execute(
            "UPDATE s3_objects SET restore_asked_ns = ?2, restore_days = ?3, restore_tier = ?4 \
             WHERE id = ?1 AND restore_asked_ns IS NULL AND deleted_ns IS NULL",
            params![id, now_ns, days, tier],
        ))
        .doing("ask a restore")?;
        Ok(n > 0)
    }

    /// The jobs that hold an object still live: they must not expire.
    pub fn s3_live_jobs(&self) -> Result<Vec<i64>> {
        let run = || -> crate::db::Result<Vec<i64>> {
            let mut st = self.conn.prepare(
                "SELECT DISTINCT job_id FROM s3_objects \
                 WHERE job_id IS NOT NULL AND deleted_ns IS NULL ORDER BY job_id",
            )?;
            st.query_map(params![], |r| r.get(0))?.collect()
        };
        run().doing("list the jobs of live S3 objects")
    }

    /// Every live object whose restore runs, the longest asked first.
    pub fn restores_asked(&self) -> Result<Vec<S3Object>> {
        self.objects_where(
            "list the restores asked",
            "restore_asked_ns IS NOT NULL AND deleted_ns IS NULL ORDER BY restore_asked_ns, id",
            params![],
        )
    }

    /// Ends the restore of object `id`: its restored copy is `file` on this
    /// connection's host, kept until `until_ns`, used at `now_ns`.
    pub fn end_restore(
        &self,
        id: i64,
        file: &str,
        until_ns: i64,
        now_ns: i64,
    ) -> Result<RestoreEnd> {
        const WHAT: &str = "record a restored copy";
        let tx = write_tx(&self.conn).doing(WHAT)?;
        let old: Option<Option<String>> = (tx.query_row(
            "SELECT restored_file FROM s3_objects WHERE id = ?1 AND deleted_ns IS NULL",
            params![id],
            |r| r.get(0),
        ))
        .optional()
        .doing(WHAT)?;
        let Some(replaced) = old else {
            return Ok(RestoreEnd::Gone);
        };
        (tx.execute(
            "UPDATE s3_objects SET restore_asked_ns = NULL, restored_file = ?2, \
             restored_until_ns = ?3, restored_used_ns = ?4, host = ?5 WHERE id = ?1",
            params![id, file, until_ns, now_ns, self.host],
        ))
        .doing(WHAT)?;
        tx.commit().doing(WHAT)?;
        Ok(RestoreEnd::Kept {
            replaced: replaced.filter(|f| f != file),
        })
    }

    /// Gives up the restore of object `id` that runs (it could not be read):
    /// it may be asked again.
    pub fn fail_restore(&self, id: i64) -> Result<()> {
        (self.conn.execute(
            "UPDATE s3_objects SET restore_asked_ns = NULL WHERE id = ?1",
            params![id],
        ))
        .doing("give up a restore")?;
        Ok(())
    }

    /// Keeps object `id`'s restored copy until `until_ns` (a restore asked
    /// again while the copy is kept); false when it has no restored copy.
    pub fn keep_restored(&self, id: i64, days: i64, until_ns: i64) -> Result<bool> {
        let n = (self.conn.execute(
            "UPDATE s3_objects SET restored_until_ns = ?2, restore_days = ?3 \
             WHERE id = ?1 AND restored_file IS NOT NULL AND deleted_ns IS NULL",
            params![id, until_ns, days],
        ))
        .doing("keep a restored copy")?;
        Ok(n > 0)
    }

    /// Records that object `id`'s restored copy was read at `now_ns`.
    pub fn restored_used(&self, id: i64, now_ns: i64) -> Result<()> {
        (self.conn.execute(
            "UPDATE s3_objects SET restored_used_ns = ?2 WHERE id = ?1",
            params![id, now_ns],
        ))
        .doing("record a read of a restored copy")?;
        Ok(())
    }

    /// Every object with a restored copy on this connection's host, the least
    /// recently used first.
    pub fn restored_copies(&self) -> Result<Vec<S3Object>> {
        self.objects_where(
            "list the restored copies",
            "restored_file IS NOT NULL AND host = ?1 ORDER BY restored_used_ns, id",
            params![self.host],
        )
    }

    /// Forgets object `id`'s restored copy `file` (it is evicted); false when
    /// the object no longer has that copy.
    pub fn drop_restored(&self, id: i64, file: &str) -> Result<bool> {
        let n = (self.conn.execute(
            "UPDATE s3_objects SET restored_file = NULL, restored_until_ns = NULL \
             WHERE id = ?1 AND restored_file = ?2",
            params![id, file],
        ))
        .doing("evict a restored copy")?;
        Ok(n > 0)
    }

    /// What waits for tape and for a restore now.
    pub fn s3_waiting(&self) -> Result<S3Waiting> {
        let (objects, bytes, restores): (i64, Option<i64>, i64) = (self.conn.query_row(
            "SELECT (SELECT COUNT(*) FROM s3_objects \
                     WHERE job_id IS NULL AND deleted_ns IS NULL), \
                    (SELECT CAST(SUM(size) AS BIGINT) FROM s3_objects \
                     WHERE job_id IS NULL AND deleted_ns IS NULL), \
                    (SELECT COUNT(*) FROM s3_objects \
                     WHERE restore_asked_ns IS NOT NULL AND deleted_ns IS NULL)",
            params![],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        ))
        .doing("count what waits for tape")?;
        let n = |v: i64| v.max(0) as u64;
        Ok(S3Waiting {
            objects: n(objects),
            bytes: n(bytes.unwrap_or(0)),
            restores: n(restores),
        })
    }

    /// The bytes of the restore cache: of the restored copies this connection's
    /// host keeps, and of the restores that run on the site.
    pub fn restore_cache_bytes(&self) -> Result<(u64, u64)> {
        let (kept, asked): (Option<i64>, Option<i64>) = (self.conn.query_row(
            "SELECT (SELECT CAST(SUM(size) AS BIGINT) FROM s3_objects \
                     WHERE restored_file IS NOT NULL AND host = ?1), \
                    (SELECT CAST(SUM(size) AS BIGINT) FROM s3_objects \
                     WHERE restore_asked_ns IS NOT NULL AND deleted_ns IS NULL)",
            params![self.host],
            |r| Ok((r.get(0)?, r.get(1)?)),
        ))
        .doing("sum the restore cache")?;
        Ok((
            kept.unwrap_or(0).max(0) as u64,
            asked.unwrap_or(0).max(0) as u64,
        ))
    }

    /// Records that object `id`, deleted or replaced through a server other
    /// than its host, leaves the data files `files` on its host's disk, which
    /// its host removes ([`Catalog::left_files`]).
    pub fn leave_files(&self, id: i64, files: &[&str]) -> Result<()> {
        (self.conn.execute(
            "UPDATE s3_objects SET left_files = ?2 WHERE id = ?1",
            params![id, files.join("\n")],
        ))
        .doing("record the files a deleted object leaves")?;
        Ok(())
    }

    /// The objects whose data files other servers left for this connection's
    /// host to remove, with the names of those files.
    pub fn left_files(&self) -> Result<Vec<(i64, Vec<String>)>> {
        let run = || -> crate::db::Result<Vec<(i64, String)>> {
            let mut st = self.conn.prepare(
                "SELECT id, left_files FROM s3_objects \
                 WHERE left_files IS NOT NULL AND host = ?1 ORDER BY id",
            )?;
            st.query_map(params![self.host], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect()
        };
        let rows = run().doing("list the files deleted objects left")?;
        Ok((rows.into_iter())
            .map(|(id, f)| (id, f.lines().map(str::to_string).collect()))
            .collect())
    }

    /// Records that the files object `id` left are removed.
    pub fn left_files_removed(&self, id: i64) -> Result<()> {
        (self.conn.execute(
            "UPDATE s3_objects SET left_files = NULL WHERE id = ?1",
            params![id],
        ))
        .doing("record the files a deleted object left removed")?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::s3::tests::object;
    use crate::tests::{both, scratch};
    use crate::{Batching, Bucket};

    both! {
        fn each_server_of_a_site_archives_releases_and_keeps_what_its_disk_holds() {
            let (_d, mut c) = scratch();
            let b = Bucket { name: "b".into(), pool: "default".into(), created_ns: 1, batching: Batching::default() };
            c.create_bucket(&b).unwrap();
            c.register_server("a", "https://a:1", "aa", "{}").unwrap();
            c.set_server_s3_url("a", Some("https://a:9000")).unwrap();
            assert_eq!(c.servers().unwrap()[0].s3_url.as_deref(), Some("https://a:9000"));
            c.set_host("a");
            let mut g = object("b", "g", "f1");
            g.class = "GLACIER".into();
            let (id, _) = c.put_object(&g).unwrap();
            let (sid, _) = c.put_object(&object("b", "s", "f2")).unwrap();
            assert_eq!(c.object("b", b"g").unwrap().unwrap().host, "a");
            let ids = |v: Vec<S3Object>| v.into_iter().map(|o| o.id).collect::<Vec<_>>();
            // Server b sees the objects but archives and releases none of them.
            c.set_host("b");
            assert!(c.objects_to_archive(10).unwrap().is_empty());
            c.set_host("a");
            assert_eq!(ids(c.objects_to_archive(10).unwrap()), vec![id, sid]);
            c.objects_archived(&[id, sid], 42).unwrap();
            c.set_host("b");
            assert!(c.objects_to_release(10).unwrap().is_empty());
            c.set_host("a");
            assert_eq!(ids(c.objects_to_release(10).unwrap()), vec![id]);
            assert!(c.release_object(id, 50).unwrap());
            // A restore asked through b, read by a: a's disk holds the copy.
            c.set_host("b");
            assert!(c.ask_restore(id, 1, "Bulk", 60).unwrap());
            c.set_host("a");
            c.end_restore(id, "r1", 1000, 70).unwrap();
            assert_eq!(ids(c.restored_copies().unwrap()), vec![id]);
            assert_eq!(c.restore_cache_bytes().unwrap(), (3, 0));
            c.set_host("b");
            assert!(c.restored_copies().unwrap().is_empty());
            assert_eq!(c.restore_cache_bytes().unwrap(), (0, 0));
            // Deleted through b: the files are a's to remove.
            let old = c.delete_object("b", b"s", 80).unwrap().unwrap();
            assert_eq!(old.host, "a");
            c.leave_files(old.id, &["f2"]).unwrap();
            assert!(c.left_files().unwrap().is_empty());
            c.set_host("a");
            assert_eq!(c.left_files().unwrap(), vec![(sid, vec!["f2".to_string()])]);
            c.left_files_removed(sid).unwrap();
            assert!(c.left_files().unwrap().is_empty());
        }
    }

    both! {
        fn an_object_is_archived_released_asked_restored_and_evicted() {
            let (_d, c) = scratch();
            let b = Bucket { name: "b".into(), pool: "default".into(), created_ns: 1, batching: Batching::default() };
            c.create_bucket(&b).unwrap();
            let mut g = object("b", "g", "f1");
            g.class = "GLACIER".into();
            let (id, _) = c.put_object(&g).unwrap();
            let (sid, _) = c.put_object(&object("b", "s", "f2")).unwrap();
            let ids = |v: Vec<S3Object>| v.into_iter().map(|o| o.id).collect::<Vec<_>>();
            assert_eq!(ids(c.objects_to_archive(10).unwrap()), vec![id, sid]);
            let sizes = g.size + object("b", "s", "f2").size;
            assert_eq!(c.s3_waiting().unwrap(), S3Waiting { objects: 2, bytes: sizes, restores: 0 });
            c.objects_archived(&[id, sid], 42).unwrap();
            assert!(c.objects_to_archive(10).unwrap().is_empty());
            assert_eq!(c.s3_live_jobs().unwrap(), vec![42]);
            assert_eq!(c.s3_waiting().unwrap(), S3Waiting::default());
            // Only the GLACIER object's disk copy may go.
            assert_eq!(ids(c.objects_to_release(10).unwrap()), vec![id]);
            assert!(c.release_object(id, 50).unwrap());
            assert!(!c.release_object(id, 51).unwrap());
            assert_eq!(c.s3_files().unwrap(), vec!["f2".to_string()]);
            // Asked once; asked again while it runs, refused.
            assert!(c.ask_restore(id, 2, "Bulk", 60).unwrap());
            assert!(!c.ask_restore(id, 2, "Bulk", 61).unwrap());
            let asked = c.restores_asked().unwrap();
            assert_eq!(asked.len(), 1);
            assert_eq!((asked[0].restore.days, asked[0].restore.tier.as_deref()), (Some(2), Some("Bulk")));
            assert_eq!(c.restore_cache_bytes().unwrap(), (0, 3));
            assert_eq!(c.s3_waiting().unwrap().restores, 1);
            assert_eq!(c.end_restore(id, "r1", 1000, 70).unwrap(), RestoreEnd::Kept { replaced: None });
            let o = c.object("b", b"g").unwrap().unwrap();
            assert_eq!((o.restore.asked_ns, o.restore.file.as_deref(), o.restore.until_ns), (None, Some("r1"), Some(1000)));
            assert_eq!(c.restore_cache_bytes().unwrap(), (3, 0));
            c.restored_used(id, 75).unwrap();
            assert_eq!(c.restored_copies().unwrap()[0].restore.used_ns, Some(75));
            assert!(c.keep_restored(id, 3, 2000).unwrap());
            assert_eq!(c.object("b", b"g").unwrap().unwrap().restore.until_ns, Some(2000));
            let mut files = c.s3_files().unwrap();
            files.sort();
            assert_eq!(files, vec!["f2".to_string(), "r1".to_string()]);
            // Evicted: the copy goes; once it has gone, the eviction is refused.
            assert!(c.drop_restored(id, "r1").unwrap());
            assert!(!c.drop_restored(id, "r1").unwrap());
            assert!(!c.keep_restored(id, 3, 3000).unwrap());
            // A restore given up may be asked again.
            assert!(c.ask_restore(id, 1, "Bulk", 76).unwrap());
            c.fail_restore(id).unwrap();
            assert!(c.restores_asked().unwrap().is_empty());
            // A restore whose object was deleted meanwhile is not kept.
            assert!(c.ask_restore(id, 1, "Standard", 80).unwrap());
            c.delete_object("b", b"g", 90).unwrap();
            assert!(c.restores_asked().unwrap().is_empty());
            assert_eq!(c.s3_live_jobs().unwrap(), vec![42]);
            c.delete_object("b", b"s", 91).unwrap();
            assert!(c.s3_live_jobs().unwrap().is_empty());
            assert_eq!(c.end_restore(id, "r2", 1000, 95).unwrap(), RestoreEnd::Gone);
        }
    }
}
