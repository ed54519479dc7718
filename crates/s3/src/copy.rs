//! CopyObject and UploadPartCopy: an object's data (or a range of it) copied
//! into a new data file of the S3 stage. The source must be in a bucket the
//! request's key may use, and readable: a GLACIER or DEEP_ARCHIVE source must
//! be restored first, as in S3.

use crate::multipart::digest_of;
use crate::shared::{key_of, not_restored, run, stamp, Headers, Shared};
use base64::Engine as _;
use s3s::crypto::Checksum as _;
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};
use std::sync::Arc;
use tapeloom_ops::s3::objects::{self, Checksums, Meta};
use tapeloom_ops::s3::{keys, restores, storage_class, uploads, Part, S3Object, Store};

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// The object a copy reads and the data file it is read from.
async fn source(
    shared: &Arc<Shared>,
    credentials: Option<&s3s::auth::Credentials>,
    from: &CopySource,
) -> S3Result<(S3Object, String)> {
    let (bucket, key) = match from {
        CopySource::Bucket { bucket, key, .. } => (bucket.to_string(), key.to_string()),
        _ => {
            return Err(s3_error!(
                NotImplemented,
                "only a copy source of a bucket and a key is built"
            ))
        }
    };
    let access = credentials
        .map(|c| c.access_key.clone())
        .unwrap_or_default();
    if !keys::may_use(&key_of(shared, &access).await?, &bucket) {
        return Err(s3_error!(
            AccessDenied,
            "this key was not made for bucket {bucket}"
        ));
    }
    let (o, file) = run(shared, move |c, _| {
        let o = objects::get(c, &bucket, key.as_bytes())?;
        let file = restores::readable(c, &o)?;
        Ok((o, file))
    })
    .await?;
    match file {
        Some(f) => Ok((o, f)),
        None => Err(not_restored(&o)),
    }
}

/// CopyObject: the source's data copied into a new data file, with the
/// source's metadata, or the request's with `x-amz-metadata-directive: REPLACE`.
pub(crate) async fn copy_object(
    shared: &Arc<Shared>,
    req: S3Request<CopyObjectInput>,
) -> S3Result<S3Response<CopyObjectOutput>> {
    let i = req.input;
    let class = storage_class(i.storage_class.as_ref().map(StorageClass::as_str))
        .map_err(|r| crate::error::s3(r.into()))?;
    let (src, file) = source(shared, req.credentials.as_ref(), &i.copy_source).await?;
    let replace = i
        .metadata_directive
        .as_ref()
        .is_some_and(|d| d.as_str() == "REPLACE");
    let mut meta = match replace {
        true => Headers {
            content_type: i.content_type,
            content_encoding: i.content_encoding,
            content_disposition: i.content_disposition,
            content_language: i.content_language,
            cache_control: i.cache_control,
            expires: i.expires,
            metadata: i.metadata,
        }
        .meta(),
        false => Meta::of(&src),
    };
    meta.parts = Vec::new();
    meta.full_object = true;
    let (bucket, key) = (i.bucket.clone(), i.key.clone());
    let o = run(shared, move |c, s| {
        let (file, size, md5, sums) = copy_range(s, &file, 0..src.size, None)?;
        meta.checksums = sums;
        let new = objects::New {
            bucket,
            key: key.into_bytes(),
            size,
            etag: md5,
            class,
            meta,
            file,
        };
        objects::put(c, s, new)
    })
    .await?;
    Ok(S3Response::new(CopyObjectOutput {
        copy_object_result: Some(CopyObjectResult {
            e_tag: Some(ETag::Strong(o.etag)),
            last_modified: Some(stamp(o.created_ns)),
            ..Default::default()
        }),
        ..Default::default()
    }))
}

/// The bytes `bytes=FIRST-LAST` names of an object of `size` bytes; the whole
/// object without a range.
fn copy_range_of(asked: Option<&str>, size: u64) -> S3Result<std::ops::Range<u64>> {
    let Some(r) = asked else {
        return Ok(0..size);
    };
    let bad = || {
        s3_error!(
            InvalidArgument,
            "x-amz-copy-source-range {r} is not bytes=FIRST-LAST within the source's {size} bytes"
        )
    };
    let (first, last) = r
        .strip_prefix("bytes=")
        .and_then(|x| x.split_once('-'))
        .ok_or_else(bad)?;
    let first: u64 = first.parse().map_err(|_| bad())?;
    let last: u64 = last.parse().map_err(|_| bad())?;
    if first > last || last >= size {
        return Err(bad());
    }
    Ok(first..last + 1)
}

/// UploadPartCopy: a part of a multipart upload copied from an object (or a
/// range of it, `x-amz-copy-source-range`), its checksum of the upload's
/// algorithm made as an uploaded part's is.
pub(crate) async fn upload_part_copy(
    shared: &Arc<Shared>,
    req: S3Request<UploadPartCopyInput>,
) -> S3Result<S3Response<UploadPartCopyOutput>> {
    let i = req.input;
    let number =
        uploads::check_number(i64::from(i.part_number)).map_err(|r| crate::error::s3(r.into()))?;
    let (bucket, key, id) = (i.bucket.clone(), i.key.clone(), i.upload_id.clone());
    let u = run(shared, move |c, _| {
        uploads::get(c, &bucket, key.as_bytes(), &id)
    })
    .await?;
    let (src, file) = source(shared, req.credentials.as_ref(), &i.copy_source).await?;
    let range = copy_range_of(i.copy_source_range.as_deref(), src.size)?;
    let algorithm = serde_json::from_str::<Meta>(&u.meta)
        .unwrap_or_default()
        .algorithm;
    let (part, sums, at) = run(shared, move |c, s| {
        let (file, size, md5, sums) = copy_range(s, &file, range, algorithm.as_deref())?;
        let part = Part {
            number,
            size,
            etag: md5,
            meta: serde_json::to_string(&sums).unwrap_or_else(|_| "{}".into()),
            file,
        };
        uploads::put_part(c, s, &u, &part)?;
        Ok((
            part,
            sums,
            tapeloom_ops::s3::wall_s().saturating_mul(1_000_000_000),
        ))
    })
    .await?;
    Ok(S3Response::new(UploadPartCopyOutput {
        copy_part_result: Some(CopyPartResult {
            e_tag: Some(ETag::Strong(part.etag)),
            last_modified: Some(stamp(at)),
            checksum_crc32: sums.crc32,
            checksum_crc32c: sums.crc32c,
            checksum_crc64nvme: sums.crc64nvme,
            checksum_sha1: sums.sha1,
            checksum_sha256: sums.sha256,
        }),
        ..Default::default()
    }))
}

/// Copies bytes `range` of data file `from` into a new data file, flushed:
/// its name, size, MD5 and checksums (its CRC64NVME, and its checksum of
/// `algorithm` when one is named).
fn copy_range(
    s: &Store,
    from: &str,
    range: std::ops::Range<u64>,
    algorithm: Option<&str>,
) -> tapeloom_ops::s3::Result<(String, u64, String, Checksums)> {
    use std::io::{Read, Seek, Write};
    let (file, mut out) = s.create()?;
    let io = |source| tapeloom_ops::OpsError::Io {
        what: "copy an object's data".into(),
        source,
    };
    let mut f = std::fs::File::open(s.path(from)).map_err(io)?;
    f.seek(std::io::SeekFrom::Start(range.start)).map_err(io)?;
    let mut f = f.take(range.end - range.start);
    let (mut md5, mut crc) = (s3s::crypto::Md5::new(), s3s::crypto::Crc64Nvme::new());
    let mut other = algorithm.and_then(digest_of);
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        md5.update(&buf[..n]);
        crc.update(&buf[..n]);
        if let Some(d) = other.as_mut() {
            d.update(&buf[..n]);
        }
        out.write_all(&buf[..n]).map_err(io)?;
        size += n as u64;
    }
    s.sync(&out)?;
    let mut sums = Checksums {
        crc64nvme: Some(B64.encode(crc.finalize())),
        ..Checksums::default()
    };
    if let (Some(alg), Some(d)) = (algorithm, other) {
        crate::multipart::set_sum(&mut sums, alg, d.finish());
    }
    Ok((file, size, hex::encode(md5.finalize()), sums))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_source_range_is_first_to_last_inclusive_within_the_source() {
        assert_eq!(copy_range_of(None, 10).unwrap(), 0..10);
        assert_eq!(copy_range_of(Some("bytes=2-5"), 10).unwrap(), 2..6);
        assert_eq!(copy_range_of(Some("bytes=0-9"), 10).unwrap(), 0..10);
        for bad in ["bytes=5-2", "bytes=0-10", "2-5", "bytes=a-3", "bytes=-3"] {
            assert!(copy_range_of(Some(bad), 10).is_err(), "{bad}");
        }
    }
}
