//! Objects: stored, found, listed and deleted. An object's data is in a file of
//! the S3 stage ([`super::Store`]), written and flushed by the front end before
//! [`put`] commits its row; what else S3 keeps of it (content type, user
//! metadata, checksums, the parts it was uploaded in) is its [`Meta`].

use super::{buckets, check_key, now_ns, shown, Refused, Result, S3Object, Store};
use crate::access::Catalogued;
use std::collections::BTreeMap;

/// The checksums of an object or a part, base64 as S3 sends them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Checksums {
    /// CRC32.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crc32: Option<String>,
    /// CRC32C.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crc32c: Option<String>,
    /// CRC64NVME.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crc64nvme: Option<String>,
    /// SHA-1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha1: Option<String>,
    /// SHA-256.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// One part of an object uploaded in parts.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PartMeta {
    /// Its size in bytes.
    pub size: u64,
    /// Its checksums.
    #[serde(default)]
    pub checksums: Checksums,
}

/// What S3 keeps of an object besides its data and its entity tag.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Meta {
    /// `Content-Type`.
    pub content_type: Option<String>,
    /// `Content-Encoding`.
    pub content_encoding: Option<String>,
    /// `Content-Disposition`.
    pub content_disposition: Option<String>,
    /// `Content-Language`.
    pub content_language: Option<String>,
    /// `Cache-Control`.
    pub cache_control: Option<String>,
    /// `Expires`, as sent.
    pub expires: Option<String>,
    /// The user's metadata (`x-amz-meta-*`), by name without the prefix.
    pub user: BTreeMap<String, String>,
    /// The object's checksums; for an object uploaded in parts, the checksums
    /// of its parts' checksums (S3's COMPOSITE type) unless `full_object`.
    pub checksums: Checksums,
    /// Whether the checksums are of the whole object (S3's FULL_OBJECT type).
    pub full_object: bool,
    /// The checksum algorithm a multipart upload was begun with, lower case.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<String>,
    /// The parts it was uploaded in; empty for a single PUT.
    pub parts: Vec<PartMeta>,
}

impl Meta {
    /// The meta of a row; a row whose JSON does not read gives the default.
    pub fn of(o: &S3Object) -> Meta {
        serde_json::from_str(&o.meta).unwrap_or_default()
    }

    /// As a row keeps it.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
    }
}

/// A new object whose data file is written and flushed.
pub struct New {
    /// Its bucket.
    pub bucket: String,
    /// Its key.
    pub key: Vec<u8>,
    /// Its size in bytes.
    pub size: u64,
    /// Its entity tag, without quotes.
    pub etag: String,
    /// Its storage class, checked by [`super::storage_class`].
    pub class: &'static str,
    /// The rest of what is kept of it.
    pub meta: Meta,
    /// Its data file in the S3 stage.
    pub file: String,
}

/// Stores object `new` in place of the object of the same key, whose data file
/// goes. The bucket must exist and the key must name an object.
pub fn put(at: &impl Catalogued, store: &Store, new: New) -> Result<S3Object> {
    buckets::get(at, &new.bucket)?;
    check_key(&new.key)?;
    let mut row = S3Object {
        id: 0,
        bucket: new.bucket,
        key: new.key,
        size: new.size,
        etag: new.etag,
        class: new.class.to_string(),
        meta: new.meta.to_json(),
        file: new.file,
        created_ns: now_ns()?,
        host: at.ops_catalog().host().to_string(),
        ..S3Object::default()
    };
    let (id, old) = at.ops_catalog().put_object(&row)?;
    row.id = id;
    if let Some(old) = old {
        forget(at, store, &old)?;
    }
    Ok(row)
}

/// Removes the data files of object `o`, deleted or replaced: its own (gone
/// already when it was released) and its restored copy. Its copy on tape stays
/// until its job's space is reclaimed. When the files are on another server's
/// disk (a site's), the catalog keeps their names for that server, which
/// removes them ([`super::tape::remove_left`]).
pub(crate) fn forget(at: &impl Catalogued, store: &Store, o: &S3Object) -> Result<()> {
    let files: Vec<&str> = std::iter::once(o.file.as_str())
        .chain(o.restore.file.as_deref())
        .collect();
    if o.host != at.ops_catalog().host() {
        at.ops_catalog().leave_files(o.id, &files)?;
        return Ok(());
    }
    for f in files {
        store.remove(f)?;
    }
    Ok(())
}

/// The object of `bucket` and `key`, or [`Refused::NoSuchKey`].
pub fn get(at: &impl Catalogued, bucket: &str, key: &[u8]) -> Result<S3Object> {
    match at.ops_catalog().object(bucket, key)? {
        Some(o) => Ok(o),
        None => {
            buckets::get(at, bucket)?;
            Err(Refused::NoSuchKey {
                bucket: bucket.into(),
                key: shown(key),
            }
            .into())
        }
    }
}

/// Deletes the object of `bucket` and `key`: it leaves every listing at once
/// and its data file goes. The object it was; none when there was none (S3
/// answers a delete of a missing key as done).
pub fn delete(
    at: &impl Catalogued,
    store: &Store,
    bucket: &str,
    key: &[u8],
) -> Result<Option<S3Object>> {
    buckets::get(at, bucket)?;
    let old = at.ops_catalog().delete_object(bucket, key, now_ns()?)?;
    if let Some(o) = &old {
        forget(at, store, o)?;
    }
    Ok(old)
}

/// A page of a bucket's listing.
#[derive(Debug, Default)]
pub struct Listing {
    /// The objects, in byte order of keys.
    pub objects: Vec<S3Object>,
    /// The common prefixes (keys cut after the delimiter), in byte order.
    pub prefixes: Vec<Vec<u8>>,
    /// Whether more follow.
    pub truncated: bool,
    /// The last key or prefix of the page, from which the next page goes on.
    pub last: Option<Vec<u8>>,
    /// When it was read, by the engine's clock: what each object's restore
    /// state is of (`restores::state`).
    pub now_ns: i64,
}

/// What a listing asks for.
#[derive(Debug, Default, Clone)]
pub struct Ask {
    /// Only keys that begin with this.
    pub prefix: Vec<u8>,
    /// Keys that hold this past the prefix are rolled up into one common prefix.
    pub delimiter: Option<Vec<u8>>,
    /// Only keys after this one (a start-after, a marker or a page's last).
    pub after: Vec<u8>,
    /// At most this many objects and prefixes together.
    pub max: usize,
}

/// Where a listing rolls `key` up: its common prefix, if it has one.
fn rolled<'k>(key: &'k [u8], ask: &Ask) -> Option<&'k [u8]> {
    let d = ask.delimiter.as_deref().filter(|d| !d.is_empty())?;
    let rest = &key[ask.prefix.len()..];
    let at = rest.windows(d.len()).position(|w| w == d)?;
    Some(&key[..ask.prefix.len() + at + d.len()])
}

/// A page of the live objects of `bucket` as S3's ListObjects asks for it.
pub fn list(at: &impl Catalogued, bucket: &str, ask: &Ask) -> Result<Listing> {
    buckets::get(at, bucket)?;
    let mut out = Listing {
        now_ns: now_ns()?,
        ..Listing::default()
    };
    let mut cursor = ask.after.clone();
    const PAGE: usize = 1000;
    loop {
        let rows = (at.ops_catalog()).objects(bucket, &ask.prefix, &cursor, PAGE)?;
        let full = rows.len() == PAGE;
        for o in rows {
            cursor.clone_from(&o.key);
            if !o.key.starts_with(&ask.prefix) {
                return Ok(out);
            }
            let item = rolled(&o.key, ask).map(<[u8]>::to_vec);
            // A prefix already given (on this page or as the last of the one
            // before) is not given again.
            if let Some(p) = &item {
                if out.prefixes.last() == Some(p) || ask.after == *p {
                    continue;
                }
            }
            if out.objects.len() + out.prefixes.len() >= ask.max {
                out.truncated = true;
                return Ok(out);
            }
            out.last = Some(item.clone().unwrap_or_else(|| cursor.clone()));
            match item {
                Some(p) => out.prefixes.push(p),
                None => out.objects.push(o),
            }
        }
        if !full {
            return Ok(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn stored(home: &tapeloom_engine::Home, store: &Store, key: &str) -> S3Object {
        let (file, mut f) = store.create().unwrap();
        f.write_all(key.as_bytes()).unwrap();
        store.sync(&f).unwrap();
        let new = New {
            bucket: "bkt".into(),
            key: key.as_bytes().to_vec(),
            size: key.len() as u64,
            etag: "\"x\"".into(),
            class: "STANDARD",
            meta: Meta::default(),
            file,
        };
        put(home, store, new).unwrap()
    }

    fn page(home: &tapeloom_engine::Home, ask: &Ask) -> (Vec<String>, Vec<String>, bool) {
        let l = list(home, "bkt", ask).unwrap();
        let s = |k: &[u8]| String::from_utf8_lossy(k).into_owned();
        let objects = l.objects.iter().map(|o| s(&o.key)).collect();
        (
            objects,
            l.prefixes.iter().map(|p| s(p)).collect(),
            l.truncated,
        )
    }

    #[test]
    fn a_listing_rolls_keys_up_at_the_delimiter_and_goes_on_from_its_last() {
        let d = tempfile::tempdir().unwrap();
        let home = tapeloom_engine::Home::open(d.path()).unwrap();
        let store = Store::open(d.path()).unwrap();
        buckets::create(&home, "bkt", None, super::super::Batching::default()).unwrap();
        for k in ["a/1", "a/2", "b", "c/x/1", "c/y", "d"] {
            stored(&home, &store, k);
        }
        let first = stored(&home, &store, "e");
        let again = stored(&home, &store, "e");
        assert!(!store.path(&first.file).exists() && store.path(&again.file).exists());
        let mut ask = Ask {
            delimiter: Some(b"/".to_vec()),
            max: 3,
            ..Ask::default()
        };
        let (o, p, more) = page(&home, &ask);
        assert_eq!(
            (o, p, more),
            (vec!["b".into()], vec!["a/".into(), "c/".into()], true)
        );
        ask.after = b"c/".to_vec();
        let (o, p, more) = page(&home, &ask);
        assert_eq!((o, p, more), (vec!["d".into(), "e".into()], vec![], false));
        let ask = Ask {
            prefix: b"c/".to_vec(),
            delimiter: Some(b"/".to_vec()),
            max: 10,
            ..Ask::default()
        };
        assert_eq!(
            page(&home, &ask),
            (vec!["c/y".into()], vec!["c/x/".into()], false)
        );
        let gone = delete(&home, &store, "bkt", b"d").unwrap().unwrap();
        assert!(!store.path(&gone.file).exists());
        assert_eq!(
            get(&home, "bkt", b"d").unwrap_err().to_string(),
            "no object d in bucket bkt"
        );
        assert_eq!(store.sweep(&home).unwrap(), 0);
        store.create().unwrap();
        assert_eq!(store.sweep(&home).unwrap(), 1);
    }
}
