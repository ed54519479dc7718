//! The S3 front end's rows (schemas 25 and 26): its access keys, its buckets
//! (each named for the pool its objects go to, with how its objects are gathered
//! into archive jobs), its objects (with the job that holds each on tape and
//! its restore) and their multipart uploads.
//!
//! An access key's secret is kept sealed (`sealed`): the operations layer seals
//! it with a key file kept in the home, outside the catalog, so a copy of the
//! catalog alone does not give the secret away. An object's key is kept as
//! bytes, so that both databases list keys in the byte order S3 lists them in.
//! A deleted or overwritten object keeps its row, marked with the time it went
//! (`deleted_ns`), until its tape space is reclaimed; only live rows are listed.

use crate::db::{params, OptionalExtension};
use crate::error::{is_duplicate_key, CatalogError, Doing, Result};
use crate::write_tx;
use crate::Catalog;

/// An access key of the S3 front end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Key {
    /// The access key id clients send.
    pub access_key: String,
    /// The name it was made for.
    pub name: String,
    /// The secret, sealed by the operations layer.
    pub sealed: Vec<u8>,
    /// The buckets it may use; empty when it may use every bucket.
    pub buckets: Vec<String>,
    /// When it was made, nanoseconds since the epoch.
    pub created_ns: i64,
    /// When it was revoked; a revoked key is refused.
    pub revoked_ns: Option<i64>,
}

/// A bucket and the pool its objects are archived to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bucket {
    /// The bucket's name.
    pub name: String,
    /// The pool its objects go to tape in.
    pub pool: String,
    /// When it was made, nanoseconds since the epoch.
    pub created_ns: i64,
    /// When a batch of its objects is written to tape.
    pub batching: Batching,
}

/// When a batch of a bucket's objects closes and is written to tape: as soon as
/// its oldest object has waited `age_s` seconds, or it holds `objects` objects
/// or `bytes` bytes, whichever comes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batching {
    /// The longest an object waits for tape, in seconds.
    pub age_s: i64,
    /// The most objects in one batch.
    pub objects: u64,
    /// The most bytes in one batch (an object larger goes alone).
    pub bytes: u64,
}

impl Default for Batching {
    /// Five minutes, 10,000 objects or 4 GiB: a batch is large enough that an
    /// LTO drive streams it for seconds (4 GiB is about ten seconds of LTO-9),
    /// and an object waits at most five minutes for tape.
    fn default() -> Batching {
        Batching {
            age_s: 300,
            objects: 10_000,
            bytes: 4 << 30,
        }
    }
}

/// An object's restore from tape: asked (and running until it ends), then
/// restored into the restore cache until its expiry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Restore {
    /// When the restore running now was asked; none when none runs.
    pub asked_ns: Option<i64>,
    /// The days the restored copy is kept, as last asked.
    pub days: Option<i64>,
    /// The tier asked (`Standard`, `Bulk` or `Expedited`).
    pub tier: Option<String>,
    /// The restored copy's data file in the S3 stage; none when there is none.
    pub file: Option<String>,
    /// When the restored copy expires, nanoseconds since the epoch.
    pub until_ns: Option<i64>,
    /// When the restored copy was last restored or read.
    pub used_ns: Option<i64>,
}

/// An object as the catalog keeps it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct S3Object {
    /// Its id, which also names its data file.
    pub id: i64,
    /// Its bucket.
    pub bucket: String,
    /// Its key, as the client sent it.
    pub key: Vec<u8>,
    /// Its size in bytes.
    pub size: u64,
    /// Its entity tag, without the quotes S3 sends it in.
    pub etag: String,
    /// Its storage class (`STANDARD`, `GLACIER` or `DEEP_ARCHIVE`).
    pub class: String,
    /// What else is kept of it (content type, user metadata, checksums), as JSON.
    pub meta: String,
    /// The name of its data file in the S3 stage.
    pub file: String,
    /// When it was stored, nanoseconds since the epoch.
    pub created_ns: i64,
    /// The job that holds it on tape; none while it waits for tape.
    pub job_id: Option<i64>,
    /// When its data file was removed, the object being on tape only (its
    /// `file` still names its entry in its job, in its stream's folder when
    /// the job has several streams); none while the file is kept.
    pub released_ns: Option<i64>,
    /// Its restore from tape.
    pub restore: Restore,
    /// The server whose disk holds its data file or its restored copy (the
    /// home's name; empty on a catalog one home keeps).
    pub host: String,
}

/// A multipart upload in progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    /// The upload id clients send.
    pub id: String,
    /// Its bucket.
    pub bucket: String,
    /// The key the object will have.
    pub key: Vec<u8>,
    /// The storage class the object will have.
    pub class: String,
    /// What the object will keep besides its data, as JSON.
    pub meta: String,
    /// When it began, nanoseconds since the epoch.
    pub created_ns: i64,
    /// The server whose disk holds its parts (as [`S3Object::host`]).
    pub host: String,
}

/// One part of a multipart upload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// Its number, 1 to 10,000.
    pub number: u32,
    /// Its size in bytes.
    pub size: u64,
    /// Its entity tag, without quotes.
    pub etag: String,
    /// Its checksums, as JSON.
    pub meta: String,
    /// The name of its data file in the S3 stage.
    pub file: String,
}

const KEY_COLS: &str = "access_key, name, sealed, buckets, created_ns, revoked_ns";

fn key_row(r: &crate::db::Row) -> crate::db::Result<S3Key> {
    let buckets: String = r.get(3)?;
    Ok(S3Key {
        access_key: r.get(0)?,
        name: r.get(1)?,
        sealed: r.get(2)?,
        buckets: buckets.split_whitespace().map(str::to_string).collect(),
        created_ns: r.get(4)?,
        revoked_ns: r.get(5)?,
    })
}

pub(crate) const OBJECT_COLS: &str = "id, bucket, key, size, etag, class, meta, file, created_ns, \
     job_id, released_ns, restore_asked_ns, restore_days, restore_tier, restored_file, \
     restored_until_ns, restored_used_ns, host";

pub(crate) fn object_row(r: &crate::db::Row) -> crate::db::Result<S3Object> {
    Ok(S3Object {
        id: r.get(0)?,
        bucket: r.get(1)?,
        key: r.get(2)?,
        size: r.get::<i64>(3)?.max(0) as u64,
        etag: r.get(4)?,
        class: r.get(5)?,
        meta: r.get(6)?,
        file: r.get(7)?,
        created_ns: r.get(8)?,
        job_id: r.get(9)?,
        released_ns: r.get(10)?,
        restore: Restore {
            asked_ns: r.get(11)?,
            days: r.get(12)?,
            tier: r.get(13)?,
            file: r.get(14)?,
            until_ns: r.get(15)?,
            used_ns: r.get(16)?,
        },
        host: r.get(17)?,
    })
}

const UPLOAD_COLS: &str = "id, bucket, key, class, meta, created_ns, host";

fn upload_row(r: &crate::db::Row) -> crate::db::Result<Upload> {
    Ok(Upload {
        id: r.get(0)?,
        bucket: r.get(1)?,
        key: r.get(2)?,
        class: r.get(3)?,
        meta: r.get(4)?,
        created_ns: r.get(5)?,
        host: r.get(6)?,
    })
}

fn part_row(r: &crate::db::Row) -> crate::db::Result<Part> {
    Ok(Part {
        number: r.get::<i64>(0)?.clamp(0, u32::MAX as i64) as u32,
        size: r.get::<i64>(1)?.max(0) as u64,
        etag: r.get(2)?,
        meta: r.get(3)?,
        file: r.get(4)?,
    })
}

/// What a new object is: everything of its row but the id it is given.
pub type NewObject = S3Object;

impl Catalog {
    /// Records a new access key.
    pub fn add_s3_key(&self, key: &S3Key) -> Result<()> {
        let r = self.conn.execute(
            "INSERT INTO s3_keys (access_key, name, sealed, buckets, created_ns) \
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                key.access_key,
                key.name,
                key.sealed,
                key.buckets.join(" "),
                key.created_ns
            ],
        );
        match r {
            Ok(_) => Ok(()),
            Err(e) if is_duplicate_key(&e) => Err(CatalogError::S3KeyExists {
                name: key.name.clone(),
            }),
            Err(e) => Err(e).doing("add an S3 key"),
        }
    }

    /// Every access key, by name.
    pub fn s3_keys(&self) -> Result<Vec<S3Key>> {
        let run = || -> crate::db::Result<Vec<S3Key>> {
            let mut st = self
                .conn
                .prepare(&format!("SELECT {KEY_COLS} FROM s3_keys ORDER BY name"))?;
            st.query_map(params![], key_row)?.collect()
        };
        run().doing("list S3 keys")
    }

    /// The access key `access_key`, revoked or not.
    pub fn s3_key(&self, access_key: &str) -> Result<Option<S3Key>> {
        self.conn
            .query_row(
                &format!("SELECT {KEY_COLS} FROM s3_keys WHERE access_key = ?1"),
                params![access_key],
                key_row,
            )
            .optional()
            .doing("look up an S3 key")
    }

    /// Revokes the access key of `name` (it stays revoked since the first time).
    pub fn revoke_s3_key(&self, name: &str, now_ns: i64) -> Result<()> {
        let n = self
            .conn
            .execute(
                "UPDATE s3_keys SET revoked_ns = COALESCE(revoked_ns, ?2) WHERE name = ?1",
                params![name, now_ns],
            )
            .doing("revoke an S3 key")?;
        if n == 0 {
            return Err(CatalogError::NoS3Key {
                name: name.to_string(),
            });
        }
        Ok(())
    }

    /// Records a new bucket.
    pub fn create_bucket(&self, b: &Bucket) -> Result<()> {
        let r = self.conn.execute(
            "INSERT INTO s3_buckets (name, pool, created_ns, batch_age_s, batch_objects, \
             batch_bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                b.name,
                b.pool,
                b.created_ns,
                b.batching.age_s,
                b.batching.objects.min(i64::MAX as u64) as i64,
                b.batching.bytes.min(i64::MAX as u64) as i64
            ],
        );
        match r {
            Ok(_) => Ok(()),
            Err(e) if is_duplicate_key(&e) => Err(CatalogError::BucketExists {
                name: b.name.clone(),
            }),
            Err(e) => Err(e).doing("create a bucket"),
        }
    }

    /// Every bucket, by name.
    pub fn buckets(&self) -> Result<Vec<Bucket>> {
        let run = || -> crate::db::Result<Vec<Bucket>> {
            let mut st = self.conn.prepare(
                "SELECT name, pool, created_ns, batch_age_s, batch_objects, batch_bytes \
                 FROM s3_buckets ORDER BY name",
            )?;
            st.query_map(params![], |r| {
                Ok(Bucket {
                    name: r.get(0)?,
                    pool: r.get(1)?,
                    created_ns: r.get(2)?,
                    batching: Batching {
                        age_s: r.get(3)?,
                        objects: r.get::<i64>(4)?.max(0) as u64,
                        bytes: r.get::<i64>(5)?.max(0) as u64,
                    },
                })
            })?
            .collect()
        };
        run().doing("list buckets")
    }

    /// Removes the bucket `name`, which must hold no object and no upload
    /// ([`CatalogError::BucketNotEmpty`]); false when there is no such bucket.
    pub fn delete_bucket(&self, name: &str) -> Result<bool> {
        let tx = write_tx(&self.conn).doing("delete a bucket")?;
        let held: i64 = (tx.query_row(
            "SELECT (SELECT COUNT(*) FROM s3_objects WHERE bucket = ?1 AND deleted_ns IS NULL) \
                  + (SELECT COUNT(*) FROM s3_uploads WHERE bucket = ?1)",
            params![name],
            |r| r.get(0),
        ))
        .doing("delete a bucket")?;
        if held > 0 {
            return Err(CatalogError::BucketNotEmpty {
                name: name.to_string(),
            });
        }
        let n = (tx.execute("DELETE FROM s3_buckets WHERE name = ?1", params![name]))
            .doing("delete a bucket")?;
        tx.commit().doing("delete a bucket")?;
        Ok(n > 0)
    }

    /// Records object `o` (its id and host are ignored: its host is this
    /// connection's) in place of the live object of the same bucket and key, in
    /// one transaction: its new id, and the object it replaced, whose data file
    /// is no longer needed.
    pub fn put_object(&self, o: &NewObject) -> Result<(i64, Option<S3Object>)> {
        let tx = write_tx(&self.conn).doing("store an object")?;
        let old = self.take_object(&o.bucket, &o.key, o.created_ns)?;
        let id = (tx.query_row(
            "INSERT INTO s3_objects (bucket, key, size, etag, class, meta, file, created_ns, host) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) RETURNING id",
            params![
                o.bucket,
                o.key,
                o.size.min(i64::MAX as u64) as i64,
                o.etag,
                o.class,
                o.meta,
                o.file,
                o.created_ns,
                self.host
            ],
            |r| r.get::<i64>(0),
        ))
        .doing("store an object")?;
        tx.commit().doing("store an object")?;
        Ok((id, old))
    }

    /// Marks the live object of `bucket` and `key` deleted at `now_ns`: the object
    /// it was, none when there was none.
    pub fn delete_object(&self, bucket: &str, key: &[u8], now_ns: i64) -> Result<Option<S3Object>> {
        let tx = write_tx(&self.conn).doing("delete an object")?;
        let old = self.take_object(bucket, key, now_ns)?;
        tx.commit().doing("delete an object")?;
        Ok(old)
    }

    fn take_object(&self, bucket: &str, key: &[u8], now_ns: i64) -> Result<Option<S3Object>> {
        let old = self.object(bucket, key)?;
        if let Some(old) = &old {
            (self.conn.execute(
                "UPDATE s3_objects SET deleted_ns = ?2, restore_asked_ns = NULL, \
                 restored_file = NULL, restored_until_ns = NULL WHERE id = ?1",
                params![old.id, now_ns],
            ))
            .doing("delete an object")?;
        }
        Ok(old)
    }

    /// The live object of `bucket` and `key`.
    pub fn object(&self, bucket: &str, key: &[u8]) -> Result<Option<S3Object>> {
        self.conn
            .query_row(
                &format!(
                    "SELECT {OBJECT_COLS} FROM s3_objects \
                     WHERE bucket = ?1 AND key = ?2 AND deleted_ns IS NULL"
                ),
                params![bucket, key],
                object_row,
            )
            .optional()
            .doing("look up an object")
    }

    /// At most `limit` live objects of `bucket` whose keys come after `after`
    /// (all when it is empty) and are at least `from`, in byte order of keys.
    pub fn objects(
        &self,
        bucket: &str,
        from: &[u8],
        after: &[u8],
        limit: usize,
    ) -> Result<Vec<S3Object>> {
        let run = || -> crate::db::Result<Vec<S3Object>> {
            let mut st = self.conn.prepare(&format!(
                "SELECT {OBJECT_COLS} FROM s3_objects \
                 WHERE bucket = ?1 AND deleted_ns IS NULL AND key >= ?2 AND key > ?3 \
                 ORDER BY key LIMIT ?4"
            ))?;
            let limit = limit.min(i64::MAX as usize) as i64;
            st.query_map(params![bucket, from, after, limit], object_row)?
                .collect()
        };
        run().doing("list objects")
    }

    /// Records a new multipart upload (its host is this connection's).
    pub fn create_upload(&self, u: &Upload) -> Result<()> {
        (self.conn.execute(
            "INSERT INTO s3_uploads (id, bucket, key, class, meta, created_ns, host) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                u.id,
                u.bucket,
                u.key,
                u.class,
                u.meta,
                u.created_ns,
                self.host
            ],
        ))
        .doing("begin an upload")?;
        Ok(())
    }

    /// The multipart upload `id`.
    pub fn upload(&self, id: &str) -> Result<Option<Upload>> {
        self.conn
            .query_row(
                &format!("SELECT {UPLOAD_COLS} FROM s3_uploads WHERE id = ?1"),
                params![id],
                upload_row,
            )
            .optional()
            .doing("look up an upload")
    }

    /// The multipart uploads of `bucket`, by key and then by when they began.
    pub fn uploads(&self, bucket: &str) -> Result<Vec<Upload>> {
        let run = || -> crate::db::Result<Vec<Upload>> {
            let mut st = self.conn.prepare(&format!(
                "SELECT {UPLOAD_COLS} FROM s3_uploads WHERE bucket = ?1 ORDER BY key, created_ns"
            ))?;
            st.query_map(params![bucket], upload_row)?.collect()
        };
        run().doing("list uploads")
    }

    /// Records part `p` of upload `id` in place of a part of the same number:
    /// the part it replaced, whose data file is no longer needed.
    pub fn put_part(&self, id: &str, p: &Part) -> Result<Option<Part>> {
        let tx = write_tx(&self.conn).doing("store a part")?;
        let old = (tx.query_row(
            "SELECT number, size, etag, meta, file FROM s3_parts WHERE upload = ?1 AND number = ?2",
            params![id, p.number as i64],
            part_row,
        ))
        .optional()
        .doing("store a part")?;
        (tx.execute(
            "DELETE FROM s3_parts WHERE upload = ?1 AND number = ?2",
            params![id, p.number as i64],
        ))
        .doing("store a part")?;
        (tx.execute(
            "INSERT INTO s3_parts (upload, number, size, etag, meta, file) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                id,
                p.number as i64,
                p.size.min(i64::MAX as u64) as i64,
                p.etag,
                p.meta,
                p.file
            ],
        ))
        .doing("store a part")?;
        tx.commit().doing("store a part")?;
        Ok(old)
    }

    /// The parts of upload `id`, by number.
    pub fn parts(&self, id: &str) -> Result<Vec<Part>> {
        let run = || -> crate::db::Result<Vec<Part>> {
            let mut st = self.conn.prepare(
                "SELECT number, size, etag, meta, file FROM s3_parts WHERE upload = ?1 ORDER BY number",
            )?;
            st.query_map(params![id], part_row)?.collect()
        };
        run().doing("list parts")
    }

    /// Ends upload `id`: its rows go, and, when `object` is given, that object is
    /// stored as [`Catalog::put_object`] stores one, in the same transaction.
    pub fn end_upload(
        &self,
        id: &str,
        object: Option<&NewObject>,
    ) -> Result<Option<(i64, Option<S3Object>)>> {
        let tx = write_tx(&self.conn).doing("end an upload")?;
        let stored = match object {
            Some(o) => Some(self.put_object(o)?),
            None => None,
        };
        (tx.execute("DELETE FROM s3_parts WHERE upload = ?1", params![id]))
            .doing("end an upload")?;
        (tx.execute("DELETE FROM s3_uploads WHERE id = ?1", params![id])).doing("end an upload")?;
        tx.commit().doing("end an upload")?;
        Ok(stored)
    }

    /// The names of every data file a live object, an upload's part or an object
    /// not yet archived keeps in the S3 stage, for sweeping the files a killed
    /// server left behind.
    pub fn s3_files(&self) -> Result<Vec<String>> {
        let run = || -> crate::db::Result<Vec<String>> {
            let mut st = self.conn.prepare(
                "SELECT file FROM s3_objects WHERE deleted_ns IS NULL AND released_ns IS NULL \
                 UNION SELECT restored_file FROM s3_objects WHERE restored_file IS NOT NULL \
                 UNION SELECT file FROM s3_parts",
            )?;
            st.query_map(params![], |r| r.get(0))?.collect()
        };
        run().doing("list the S3 stage's files")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::tests::both;
    use crate::tests::scratch;

    pub(crate) fn object(bucket: &str, key: &str, file: &str) -> NewObject {
        S3Object {
            id: 0,
            bucket: bucket.into(),
            key: key.as_bytes().to_vec(),
            size: 3,
            etag: "\"e\"".into(),
            class: "STANDARD".into(),
            meta: "{}".into(),
            file: file.into(),
            created_ns: 7,
            ..S3Object::default()
        }
    }

    both! {
        fn keys_are_added_found_and_revoked() {
            let (_d, c) = scratch();
            let k = S3Key {
                access_key: "TLAK1".into(),
                name: "alice".into(),
                sealed: vec![1, 2, 3],
                buckets: vec!["a".into(), "b".into()],
                created_ns: 5,
                revoked_ns: None,
            };
            c.add_s3_key(&k).unwrap();
            assert!(matches!(c.add_s3_key(&k), Err(CatalogError::S3KeyExists { .. })));
            assert_eq!(c.s3_key("TLAK1").unwrap(), Some(k.clone()));
            assert_eq!(c.s3_keys().unwrap(), vec![k]);
            c.revoke_s3_key("alice", 9).unwrap();
            assert_eq!(c.s3_key("TLAK1").unwrap().unwrap().revoked_ns, Some(9));
            assert!(matches!(c.revoke_s3_key("bob", 9), Err(CatalogError::NoS3Key { .. })));
        }
    }

    both! {
        fn objects_replace_list_in_byte_order_and_delete() {
            let (_d, c) = scratch();
            let b = Bucket { name: "b".into(), pool: "default".into(), created_ns: 1, batching: Batching::default() };
            c.create_bucket(&b).unwrap();
            assert!(matches!(c.create_bucket(&b), Err(CatalogError::BucketExists { .. })));
            assert_eq!(c.buckets().unwrap(), vec![b]);
            let (first, none) = c.put_object(&object("b", "k\u{e9}", "f1")).unwrap();
            assert!(none.is_none());
            let (second, old) = c.put_object(&object("b", "k\u{e9}", "f2")).unwrap();
            assert_eq!(old.map(|o| o.id), Some(first));
            c.put_object(&object("b", "kz", "f3")).unwrap();
            c.put_object(&object("b", "a", "f4")).unwrap();
            let keys = |v: Vec<S3Object>| v.into_iter().map(|o| o.key).collect::<Vec<_>>();
            // Byte order: "kz" (0x7a) before "k\u{e9}" (0xc3 0xa9).
            assert_eq!(
                keys(c.objects("b", b"k", b"", 10).unwrap()),
                vec![b"kz".to_vec(), "k\u{e9}".as_bytes().to_vec()]
            );
            assert_eq!(keys(c.objects("b", b"", b"kz", 10).unwrap()), vec!["k\u{e9}".as_bytes().to_vec()]);
            assert_eq!(c.objects("b", b"", b"", 1).unwrap().len(), 1);
            assert!(matches!(c.delete_bucket("b"), Err(CatalogError::BucketNotEmpty { .. })));
            assert_eq!(c.delete_object("b", "k\u{e9}".as_bytes(), 9).unwrap().map(|o| o.id), Some(second));
            assert!(c.object("b", "k\u{e9}".as_bytes()).unwrap().is_none());
            let mut files = c.s3_files().unwrap();
            files.sort();
            assert_eq!(files, vec!["f3".to_string(), "f4".to_string()]);
            c.delete_object("b", b"kz", 9).unwrap();
            c.delete_object("b", b"a", 9).unwrap();
            assert!(c.delete_bucket("b").unwrap());
            assert!(!c.delete_bucket("b").unwrap());
        }
    }

    both! {
        fn an_upload_keeps_its_last_part_of_each_number_and_ends_as_one_object() {
            let (_d, c) = scratch();
            c.create_bucket(&Bucket { name: "b".into(), pool: "default".into(), created_ns: 1, batching: Batching::default() }).unwrap();
            let u = Upload {
                id: "u1".into(),
                bucket: "b".into(),
                key: b"big".to_vec(),
                class: "GLACIER".into(),
                meta: "{}".into(),
                created_ns: 3,
                host: String::new(),
            };
            c.create_upload(&u).unwrap();
            assert_eq!(c.upload("u1").unwrap(), Some(u.clone()));
            assert_eq!(c.uploads("b").unwrap(), vec![u]);
            let part = |n: u32, file: &str| Part {
                number: n,
                size: 5,
                etag: "\"p\"".into(),
                meta: "{}".into(),
                file: file.into(),
            };
            assert!(c.put_part("u1", &part(2, "p2")).unwrap().is_none());
            assert!(c.put_part("u1", &part(1, "p1")).unwrap().is_none());
            assert_eq!(c.put_part("u1", &part(1, "p1b")).unwrap().map(|p| p.file), Some("p1".into()));
            let parts = c.parts("u1").unwrap();
            assert_eq!(parts.iter().map(|p| p.file.as_str()).collect::<Vec<_>>(), vec!["p1b", "p2"]);
            assert!(matches!(c.delete_bucket("b"), Err(CatalogError::BucketNotEmpty { .. })));
            let (id, _) = c.end_upload("u1", Some(&object("b", "big", "o1"))).unwrap().unwrap();
            assert_eq!(c.object("b", b"big").unwrap().map(|o| o.id), Some(id));
            assert!(c.upload("u1").unwrap().is_none() && c.parts("u1").unwrap().is_empty());
            assert_eq!(c.end_upload("u2", None).unwrap(), None);
        }
    }
}
