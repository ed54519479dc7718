//! Multipart uploads: begun, sent in parts (each part a data file of the S3
//! stage), then completed into one object, whose data file is the parts' files
//! joined in order, or aborted.

use super::objects::{Meta, PartMeta};
use super::{buckets, check_key, now_ns, Part, Refused, Result, S3Object, Store, Upload};
use crate::access::Catalogued;
use crate::OpsError;

/// The smallest part but the last.
pub const MIN_PART: u64 = 5 << 20;

/// The most parts of one upload.
pub const MAX_PARTS: i64 = 10_000;

/// Begins an upload of `key` into `bucket` with storage class `class`.
pub fn create(
    at: &impl Catalogued,
    bucket: &str,
    key: &[u8],
    class: &'static str,
    meta: &Meta,
) -> Result<Upload> {
    buckets::get(at, bucket)?;
    check_key(key)?;
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(|e| OpsError::Random(e.to_string()))?;
    let u = Upload {
        id: hex::encode(b),
        bucket: bucket.to_string(),
        key: key.to_vec(),
        class: class.to_string(),
        meta: meta.to_json(),
        created_ns: now_ns()?,
        host: at.ops_catalog().host().to_string(),
    };
    at.ops_catalog().create_upload(&u)?;
    Ok(u)
}

/// The server of the site whose disk holds upload `id`'s parts, when it is
/// another one than this connection's; none when it is this one or the upload
/// is unknown.
pub fn elsewhere(at: &impl Catalogued, id: &str) -> Result<Option<String>> {
    let cat = at.ops_catalog();
    Ok((cat.upload(id)?).and_then(|u| (u.host != cat.host()).then_some(u.host)))
}

/// Upload `id` of `bucket` and `key`, or [`Refused::NoSuchUpload`].
pub fn get(at: &impl Catalogued, bucket: &str, key: &[u8], id: &str) -> Result<Upload> {
    match at.ops_catalog().upload(id)? {
        Some(u) if u.bucket == bucket && u.key == key => Ok(u),
        _ => Err(Refused::NoSuchUpload { id: id.into() }.into()),
    }
}

/// Checks a part's number: 1 to 10,000.
pub fn check_number(number: i64) -> std::result::Result<u32, Refused> {
    match (1..=MAX_PARTS).contains(&number) {
        true => Ok(number as u32),
        false => Err(Refused::BadPartNumber { number }),
    }
}

/// Records part `part` of upload `u`, whose data file is written and flushed,
/// in place of an earlier part of the same number, whose file goes.
pub fn put_part(at: &impl Catalogued, store: &Store, u: &Upload, part: &Part) -> Result<()> {
    if let Some(old) = at.ops_catalog().put_part(&u.id, part)? {
        store.remove(&old.file)?;
    }
    Ok(())
}

/// The parts of upload `u`, by number.
pub fn parts(at: &impl Catalogued, u: &Upload) -> Result<Vec<Part>> {
    Ok(at.ops_catalog().parts(&u.id)?)
}

/// The uploads in progress in `bucket`.
pub fn list(at: &impl Catalogued, bucket: &str) -> Result<Vec<Upload>> {
    buckets::get(at, bucket)?;
    Ok(at.ops_catalog().uploads(bucket)?)
}

/// The parts that complete upload `u` as the client lists them (number and
/// entity tag): each must have been uploaded with that tag, in ascending order,
/// and each but the last must be at least 5 MiB.
pub fn chosen(at: &impl Catalogued, u: &Upload, asked: &[(i64, String)]) -> Result<Vec<Part>> {
    let mut have: std::collections::HashMap<u32, Part> =
        parts(at, u)?.into_iter().map(|p| (p.number, p)).collect();
    let mut out: Vec<Part> = Vec::with_capacity(asked.len());
    let unquoted = |t: &str| t.trim_matches('"').to_string();
    for (number, etag) in asked {
        let n = check_number(*number)?;
        if out.last().is_some_and(|p| p.number >= n) {
            return Err(Refused::InvalidPartOrder.into());
        }
        match have.remove(&n) {
            Some(p) if unquoted(&p.etag) == unquoted(etag) => out.push(p),
            _ => {
                return Err(Refused::InvalidPart {
                    number: n,
                    etag: etag.clone(),
                }
                .into())
            }
        }
    }
    if out.is_empty() {
        return Err(Refused::InvalidPartOrder.into());
    }
    if let Some(p) = out[..out.len() - 1].iter().find(|p| p.size < MIN_PART) {
        return Err(Refused::EntityTooSmall {
            number: p.number,
            size: p.size,
        }
        .into());
    }
    Ok(out)
}

/// Joins the data files of `parts` (as [`chosen`] gave them) of upload `u` into
/// one new data file, flushed: its name and size, and the parts as an object
/// keeps them.
pub fn join(store: &Store, u: &Upload, parts: &[Part]) -> Result<(String, u64, Vec<PartMeta>)> {
    let (file, mut out) = store.create()?;
    let joined = (|| {
        let mut size = 0;
        let mut kept = Vec::with_capacity(parts.len());
        for p in parts {
            let io = |source| OpsError::Io {
                what: format!("join part {} of upload {}", p.number, u.id),
                source,
            };
            let mut f = std::fs::File::open(store.path(&p.file)).map_err(io)?;
            size += std::io::copy(&mut f, &mut out).map_err(io)?;
            kept.push(PartMeta {
                size: p.size,
                checksums: serde_json::from_str(&p.meta).unwrap_or_default(),
            });
        }
        store.sync(&out)?;
        Ok((size, kept))
    })();
    match joined {
        Ok((size, kept)) => Ok((file, size, kept)),
        Err(e) => {
            store.remove(&file)?;
            Err(e)
        }
    }
}

/// Ends upload `u` with the object whose data file `file` [`join`] made: the
/// object, whose entity tag is `etag` and whose meta is `meta`, replaces the
/// one of the same key in the same transaction that ends the upload. Every
/// part's file goes, used or not.
pub fn finish(
    at: &impl Catalogued,
    store: &Store,
    u: &Upload,
    (file, size): (String, u64),
    etag: String,
    meta: &Meta,
) -> Result<S3Object> {
    let mut row = S3Object {
        id: 0,
        bucket: u.bucket.clone(),
        key: u.key.clone(),
        size,
        etag,
        class: u.class.clone(),
        meta: meta.to_json(),
        file,
        created_ns: now_ns()?,
        host: at.ops_catalog().host().to_string(),
        ..S3Object::default()
    };
    let all = parts(at, u)?;
    let stored = at.ops_catalog().end_upload(&u.id, Some(&row))?;
    if let Some((id, old)) = stored {
        row.id = id;
        if let Some(old) = old {
            super::objects::forget(at, store, &old)?;
        }
    }
    for p in all {
        store.remove(&p.file)?;
    }
    Ok(row)
}

/// Aborts upload `u`: its parts' files go, and so does its row.
pub fn abort(at: &impl Catalogued, store: &Store, u: &Upload) -> Result<()> {
    let all = parts(at, u)?;
    at.ops_catalog().end_upload(&u.id, None)?;
    for p in all {
        store.remove(&p.file)?;
    }
    Ok(())
}
