//! The S3 operations: each parses what s3s decoded, runs the operation of
//! `tapeloom_ops::s3` on a blocking thread, and answers in s3s's types. An
//! operation not listed here answers 501 NotImplemented (s3s's default).

use crate::body::{self, Asked};
use crate::error::s3;
use crate::restore::restore_header;
use crate::shared::{given, not_restored, owner, run, second, stamp, Headers, Shared};
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result, S3};
use std::sync::Arc;
use tapeloom_ops::s3::objects::{self, Checksums, Meta};
use tapeloom_ops::s3::{buckets, restores, storage_class, Batching, S3Object};

/// The S3 front end, as s3s calls it.
#[derive(Clone)]
pub(crate) struct Front(pub(crate) Arc<Shared>);

/// The storage class S3 names in a HEAD or a listing: none for STANDARD.
fn class_header(class: &str) -> Option<StorageClass> {
    (class != "STANDARD").then(|| StorageClass::from(class.to_string()))
}

/// The checksum type S3 names for an object's checksums.
fn checksum_type(m: &Meta) -> Option<ChecksumType> {
    let any = m.checksums != Checksums::default();
    let t = match m.parts.is_empty() || m.full_object {
        true => "FULL_OBJECT",
        false => "COMPOSITE",
    };
    any.then(|| ChecksumType::from(t.to_string()))
}

/// Checks the conditional headers of a GET or HEAD against `o`: 412 when
/// If-Match or If-Unmodified-Since fails, 304 when If-None-Match or
/// If-Modified-Since does.
fn conditions(
    o: &S3Object,
    if_match: Option<&ETagCondition>,
    if_none_match: Option<&ETagCondition>,
    if_modified_since: Option<&Timestamp>,
    if_unmodified_since: Option<&Timestamp>,
) -> S3Result<()> {
    let matches =
        |c: &ETagCondition| c.is_any() || c.as_etag().is_some_and(|e| e.value() == o.etag);
    let modified = second(o.created_ns);
    if let Some(c) = if_match {
        if !matches(c) {
            return Err(s3_error!(
                PreconditionFailed,
                "If-Match: the entity tag is {}",
                o.etag
            ));
        }
    } else if if_unmodified_since.is_some_and(|t| modified > *t) {
        return Err(s3_error!(
            PreconditionFailed,
            "If-Unmodified-Since: it was modified since"
        ));
    }
    if let Some(c) = if_none_match {
        if matches(c) {
            return Err(s3_error!(NotModified));
        }
    } else if if_modified_since.is_some_and(|t| modified <= *t) {
        return Err(s3_error!(NotModified));
    }
    Ok(())
}

/// The bytes of part `number` of an object of `size` bytes uploaded in the
/// parts of `m` (an object uploaded whole is its one part): S3's
/// InvalidPartNumber for a part it does not have.
fn part_range(m: &Meta, size: u64, number: i32) -> S3Result<std::ops::Range<u64>> {
    let sizes: Vec<u64> = match m.parts.is_empty() {
        true => vec![size],
        false => m.parts.iter().map(|p| p.size).collect(),
    };
    let n = usize::try_from(number).unwrap_or(0);
    if n == 0 || n > sizes.len() {
        // s3s has no InvalidPartNumber: S3's code and its 416 are set here.
        let code = s3s::S3ErrorCode::Custom("InvalidPartNumber".into());
        let msg = format!("the object has {} parts, not a part {number}", sizes.len());
        let mut e = s3s::S3Error::with_message(code, msg);
        e.set_status_code(http::StatusCode::RANGE_NOT_SATISFIABLE);
        return Err(e);
    }
    let start: u64 = sizes[..n - 1].iter().sum();
    Ok(start..start + sizes[n - 1])
}

fn expires_of(m: &Meta) -> Option<Timestamp> {
    m.expires
        .as_deref()
        .and_then(|e| Timestamp::parse(TimestampFormat::HttpDate, e).ok())
}

/// The answer of GetObject or HeadObject (`$out`) for object `$o` with meta
/// `$m`: the stored headers, the entity tag, the time, the class, the
/// checksums `$sums` (typed when `$typed`) and the restore state `$state`, with
/// the fields `$extra` of the one operation.
macro_rules! object_answer {
    ($out:ident, $o:expr, $m:expr, $sums:expr, $typed:expr, $state:expr, { $($extra:tt)* }) => {
        $out {
            $($extra)*
            restore: restore_header($state),
            accept_ranges: Some("bytes".into()),
            content_type: $m.content_type.clone(),
            content_encoding: $m.content_encoding.clone(),
            content_disposition: $m.content_disposition.clone(),
            content_language: $m.content_language.clone(),
            cache_control: $m.cache_control.clone(),
            expires: expires_of(&$m),
            e_tag: Some(ETag::Strong($o.etag.clone())),
            last_modified: Some(stamp($o.created_ns)),
            metadata: Some($m.user.clone().into_iter().collect()),
            storage_class: class_header(&$o.class),
            parts_count: (!$m.parts.is_empty()).then_some($m.parts.len() as i32),
            checksum_crc32: $sums.crc32,
            checksum_crc32c: $sums.crc32c,
            checksum_crc64nvme: $sums.crc64nvme,
            checksum_sha1: $sums.sha1,
            checksum_sha256: $sums.sha256,
            checksum_type: if $typed { checksum_type(&$m) } else { None },
            ..Default::default()
        }
    };
}

#[async_trait::async_trait]
impl S3 for Front {
    async fn list_buckets(
        &self,
        req: S3Request<ListBucketsInput>,
    ) -> S3Result<S3Response<ListBucketsOutput>> {
        let access_key = req.credentials.map(|c| c.access_key).unwrap_or_default();
        let key = crate::shared::key_of(&self.0, &access_key).await?;
        let all = run(&self.0, move |c, _| buckets::list(c, Some(&key))).await?;
        let buckets = all
            .into_iter()
            .map(|b| Bucket {
                name: Some(b.name),
                creation_date: Some(stamp(b.created_ns)),
                bucket_region: None,
            })
            .collect();
        Ok(S3Response::new(ListBucketsOutput {
            buckets: Some(buckets),
            owner: Some(owner()),
            ..Default::default()
        }))
    }

    async fn create_bucket(
        &self,
        req: S3Request<CreateBucketInput>,
    ) -> S3Result<S3Response<CreateBucketOutput>> {
        let name = req.input.bucket;
        let location = format!("/{name}");
        run(&self.0, move |c, _| {
            buckets::create(c, &name, None, Batching::default())
        })
        .await?;
        Ok(S3Response::new(CreateBucketOutput {
            location: Some(location),
        }))
    }

    async fn head_bucket(
        &self,
        req: S3Request<HeadBucketInput>,
    ) -> S3Result<S3Response<HeadBucketOutput>> {
        let name = req.input.bucket;
        run(&self.0, move |c, _| buckets::get(c, &name)).await?;
        Ok(S3Response::new(HeadBucketOutput::default()))
    }

    async fn delete_bucket(
        &self,
        req: S3Request<DeleteBucketInput>,
    ) -> S3Result<S3Response<DeleteBucketOutput>> {
        let name = req.input.bucket;
        run(&self.0, move |c, _| buckets::delete(c, &name)).await?;
        Ok(S3Response::new(DeleteBucketOutput {}))
    }

    async fn get_bucket_location(
        &self,
        req: S3Request<GetBucketLocationInput>,
    ) -> S3Result<S3Response<GetBucketLocationOutput>> {
        let name = req.input.bucket;
        run(&self.0, move |c, _| buckets::get(c, &name)).await?;
        Ok(S3Response::new(GetBucketLocationOutput::default()))
    }

    async fn put_object(
        &self,
        req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        let i = req.input;
        let class = storage_class(i.storage_class.as_ref().map(StorageClass::as_str))
            .map_err(|r| s3(r.into()))?;
        tapeloom_ops::s3::check_key(i.key.as_bytes()).map_err(|r| s3(r.into()))?;
        let (bucket, name) = (i.bucket.clone(), i.bucket.clone());
        run(&self.0, move |c, _| buckets::get(c, &name)).await?;
        let sent = given(
            i.checksum_crc32,
            i.checksum_crc32c,
            i.checksum_crc64nvme,
            i.checksum_sha1,
            i.checksum_sha256,
        );
        let asked = Asked::of(&req.headers, sent, i.content_md5);
        let got = body::receive(&self.0.store, i.body, asked, req.trailing_headers).await?;
        let headers = Headers {
            content_type: i.content_type,
            content_encoding: i.content_encoding,
            content_disposition: i.content_disposition,
            content_language: i.content_language,
            cache_control: i.cache_control,
            expires: i.expires,
            metadata: i.metadata,
        };
        let mut meta = headers.meta();
        meta.checksums = got.checksums.clone();
        meta.full_object = true;
        let new = objects::New {
            bucket,
            key: i.key.into_bytes(),
            size: got.size,
            etag: got.md5,
            class,
            meta,
            file: got.file,
        };
        let o = run(&self.0, move |c, s| objects::put(c, s, new)).await?;
        let m = Meta::of(&o);
        Ok(S3Response::new(PutObjectOutput {
            e_tag: Some(ETag::Strong(o.etag)),
            checksum_crc32: m.checksums.crc32,
            checksum_crc32c: m.checksums.crc32c,
            checksum_crc64nvme: m.checksums.crc64nvme,
            checksum_sha1: m.checksums.sha1,
            checksum_sha256: m.checksums.sha256,
            checksum_type: Some(ChecksumType::from("FULL_OBJECT".to_string())),
            size: Some(o.size as i64),
            ..Default::default()
        }))
    }

    async fn get_object(
        &self,
        req: S3Request<GetObjectInput>,
    ) -> S3Result<S3Response<GetObjectOutput>> {
        let i = req.input;
        if i.part_number.is_some() && i.range.is_some() {
            return Err(s3_error!(
                InvalidRequest,
                "a GET may give a Range or a partNumber, not both"
            ));
        }
        let (bucket, key) = (i.bucket.clone(), i.key.clone());
        let (o, state, file) = run(&self.0, move |c, _| {
            let o = objects::get(c, &bucket, key.as_bytes())?;
            let (file, state) = (restores::readable(c, &o)?, restores::state_now(&o)?);
            Ok((o, state, file))
        })
        .await?;
        conditions(
            &o,
            i.if_match.as_ref(),
            i.if_none_match.as_ref(),
            i.if_modified_since.as_ref(),
            i.if_unmodified_since.as_ref(),
        )?;
        let Some(file) = file else {
            return Err(not_restored(&o));
        };
        let whole = 0..o.size;
        let m = Meta::of(&o);
        let range = match (&i.range, i.part_number) {
            (Some(r), _) => r.check(o.size).map_err(|_| {
                s3_error!(
                    InvalidRange,
                    "the range is outside the object's {} bytes",
                    o.size
                )
            })?,
            (None, Some(n)) => part_range(&m, o.size, n)?,
            (None, None) => whole.clone(),
        };
        let content_range = (i.range.is_some() || i.part_number.is_some()).then(|| {
            format!(
                "bytes {}-{}/{}",
                range.start,
                range.end.saturating_sub(1),
                o.size
            )
        });
        let full = range == whole
            && i.checksum_mode
                .as_ref()
                .is_some_and(|c| c.as_str() == "ENABLED");
        let blob = body::send(self.0.store.path(&file), range.clone()).await?;
        let sums = if full {
            m.checksums.clone()
        } else {
            Checksums::default()
        };
        Ok(S3Response::new(
            object_answer!(GetObjectOutput, o, m, sums, full, state, {
                body: Some(blob),
                content_length: Some((range.end - range.start) as i64),
                content_range,
            }),
        ))
    }

    async fn head_object(
        &self,
        req: S3Request<HeadObjectInput>,
    ) -> S3Result<S3Response<HeadObjectOutput>> {
        let i = req.input;
        let (bucket, key) = (i.bucket.clone(), i.key.clone());
        let (o, state) = run(&self.0, move |c, _| {
            let o = objects::get(c, &bucket, key.as_bytes())?;
            let state = restores::state_now(&o)?;
            Ok((o, state))
        })
        .await?;
        conditions(
            &o,
            i.if_match.as_ref(),
            i.if_none_match.as_ref(),
            i.if_modified_since.as_ref(),
            i.if_unmodified_since.as_ref(),
        )?;
        let m = Meta::of(&o);
        let with_sums = i
            .checksum_mode
            .as_ref()
            .is_some_and(|c| c.as_str() == "ENABLED");
        let sums = if with_sums {
            m.checksums.clone()
        } else {
            Checksums::default()
        };
        let range = match i.part_number {
            Some(n) => part_range(&m, o.size, n)?,
            None => 0..o.size,
        };
        let content_range = i.part_number.map(|_| {
            let last = range.end.saturating_sub(1);
            format!("bytes {}-{last}/{}", range.start, o.size)
        });
        Ok(S3Response::new(
            object_answer!(HeadObjectOutput, o, m, sums, with_sums, state, {
                content_length: Some((range.end - range.start) as i64),
                content_range,
            }),
        ))
    }

    async fn delete_object(
        &self,
        req: S3Request<DeleteObjectInput>,
    ) -> S3Result<S3Response<DeleteObjectOutput>> {
        let (bucket, key) = (req.input.bucket, req.input.key);
        run(&self.0, move |c, s| {
            objects::delete(c, s, &bucket, key.as_bytes())
        })
        .await?;
        Ok(S3Response::new(DeleteObjectOutput::default()))
    }

    async fn delete_objects(
        &self,
        req: S3Request<DeleteObjectsInput>,
    ) -> S3Result<S3Response<DeleteObjectsOutput>> {
        let bucket = req.input.bucket;
        let quiet = req.input.delete.quiet.unwrap_or(false);
        let keys: Vec<String> = req
            .input
            .delete
            .objects
            .into_iter()
            .map(|o| o.key)
            .collect();
        if keys.len() > 1000 {
            return Err(s3_error!(
                MalformedXML,
                "at most 1,000 keys may be deleted at once"
            ));
        }
        let done = run(&self.0, move |c, s| {
            let mut done = Vec::with_capacity(keys.len());
            for k in keys {
                let r = objects::delete(c, s, &bucket, k.as_bytes());
                done.push((k, r.map(|_| ())));
            }
            Ok(done)
        })
        .await?;
        let (mut deleted, mut errors) = (Vec::new(), Vec::new());
        for (k, r) in done {
            match r {
                Ok(()) if quiet => {}
                Ok(()) => deleted.push(DeletedObject {
                    key: Some(k),
                    ..Default::default()
                }),
                Err(f) => {
                    let e = s3(f);
                    errors.push(Error {
                        code: Some(e.code().as_str().to_string()),
                        key: Some(k),
                        message: e.message().map(str::to_string),
                        version_id: None,
                    });
                }
            }
        }
        Ok(S3Response::new(DeleteObjectsOutput {
            deleted: Some(deleted),
            errors: (!errors.is_empty()).then_some(errors),
            ..Default::default()
        }))
    }

    async fn copy_object(
        &self,
        req: S3Request<CopyObjectInput>,
    ) -> S3Result<S3Response<CopyObjectOutput>> {
        crate::copy::copy_object(&self.0, req).await
    }

    async fn list_objects_v2(
        &self,
        req: S3Request<ListObjectsV2Input>,
    ) -> S3Result<S3Response<ListObjectsV2Output>> {
        crate::listing::v2(&self.0, req.input).await
    }

    async fn list_objects(
        &self,
        req: S3Request<ListObjectsInput>,
    ) -> S3Result<S3Response<ListObjectsOutput>> {
        crate::listing::v1(&self.0, req.input).await
    }

    async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        crate::multipart::create(&self.0, req.input).await
    }

    async fn upload_part(
        &self,
        req: S3Request<UploadPartInput>,
    ) -> S3Result<S3Response<UploadPartOutput>> {
        crate::multipart::upload_part(&self.0, req).await
    }

    async fn upload_part_copy(
        &self,
        req: S3Request<UploadPartCopyInput>,
    ) -> S3Result<S3Response<UploadPartCopyOutput>> {
        crate::copy::upload_part_copy(&self.0, req).await
    }

    async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        crate::multipart::complete(&self.0, req.input).await
    }

    async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        crate::multipart::abort(&self.0, req.input).await
    }

    async fn list_parts(
        &self,
        req: S3Request<ListPartsInput>,
    ) -> S3Result<S3Response<ListPartsOutput>> {
        crate::multipart::list_parts(&self.0, req.input).await
    }

    async fn restore_object(
        &self,
        req: S3Request<RestoreObjectInput>,
    ) -> S3Result<S3Response<RestoreObjectOutput>> {
        crate::restore::restore_object(&self.0, req.input).await
    }

    async fn list_multipart_uploads(
        &self,
        req: S3Request<ListMultipartUploadsInput>,
    ) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
        crate::multipart::list_uploads(&self.0, req.input).await
    }
}
