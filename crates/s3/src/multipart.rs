//! Multipart uploads and CopyObject. A completed upload's entity tag is the MD5
//! of its parts' MD5s followed by `-` and the number of parts, and its
//! checksums are S3's COMPOSITE ones (the checksum of the parts' checksums,
//! with the same suffix), or, for an upload begun with the FULL_OBJECT type,
//! computed over the joined object.

use crate::body::{self, Asked};
use crate::shared::{given, owner, run, stamp, Headers, Shared};
use base64::Engine as _;
use s3s::crypto::Checksum as _;
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};
use std::sync::Arc;
use tapeloom_ops::s3::objects::{Checksums, Meta, PartMeta};
use tapeloom_ops::s3::{storage_class, uploads, Part};

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// CreateMultipartUpload.
pub(crate) async fn create(
    shared: &Arc<Shared>,
    i: CreateMultipartUploadInput,
) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
    let class = storage_class(i.storage_class.as_ref().map(StorageClass::as_str))
        .map_err(|r| crate::error::s3(r.into()))?;
    let full = i
        .checksum_type
        .as_ref()
        .is_some_and(|t| t.as_str() == "FULL_OBJECT");
    let algorithm = i
        .checksum_algorithm
        .as_ref()
        .map(|a| a.as_str().to_ascii_lowercase());
    let mut meta = Headers {
        content_type: i.content_type,
        content_encoding: i.content_encoding,
        content_disposition: i.content_disposition,
        content_language: i.content_language,
        cache_control: i.cache_control,
        expires: i.expires,
        metadata: i.metadata,
    }
    .meta();
    meta.full_object = full;
    meta.algorithm.clone_from(&algorithm);
    let (bucket, key) = (i.bucket.clone(), i.key.clone());
    let u = run(shared, move |c, _| {
        uploads::create(c, &bucket, key.as_bytes(), class, &meta)
    })
    .await?;
    Ok(S3Response::new(CreateMultipartUploadOutput {
        bucket: Some(i.bucket),
        key: Some(i.key),
        upload_id: Some(u.id),
        checksum_algorithm: i.checksum_algorithm,
        checksum_type: i.checksum_type,
        ..Default::default()
    }))
}

/// UploadPart.
pub(crate) async fn upload_part(
    shared: &Arc<Shared>,
    req: S3Request<UploadPartInput>,
) -> S3Result<S3Response<UploadPartOutput>> {
    let i = req.input;
    let number =
        uploads::check_number(i64::from(i.part_number)).map_err(|r| crate::error::s3(r.into()))?;
    let (bucket, key, id) = (i.bucket.clone(), i.key.clone(), i.upload_id.clone());
    let u = run(shared, move |c, _| {
        uploads::get(c, &bucket, key.as_bytes(), &id)
    })
    .await?;
    let sent = given(
        i.checksum_crc32,
        i.checksum_crc32c,
        i.checksum_crc64nvme,
        i.checksum_sha1,
        i.checksum_sha256,
    );
    let asked = Asked::of(&req.headers, sent, i.content_md5);
    let got = body::receive(&shared.store, i.body, asked, req.trailing_headers).await?;
    let part = Part {
        number,
        size: got.size,
        etag: got.md5.clone(),
        meta: serde_json::to_string(&got.checksums).unwrap_or_else(|_| "{}".into()),
        file: got.file,
    };
    run(shared, move |c, s| uploads::put_part(c, s, &u, &part)).await?;
    let sums = got.checksums;
    Ok(S3Response::new(UploadPartOutput {
        e_tag: Some(ETag::Strong(got.md5)),
        checksum_crc32: sums.crc32,
        checksum_crc32c: sums.crc32c,
        checksum_crc64nvme: sums.crc64nvme,
        checksum_sha1: sums.sha1,
        checksum_sha256: sums.sha256,
        ..Default::default()
    }))
}

/// The checksum named `alg` of `data`, base64.
fn digest(alg: &str, data: &[&[u8]]) -> Option<String> {
    fn run<C: s3s::crypto::Checksum>(data: &[&[u8]]) -> String {
        let mut c = C::new();
        data.iter().for_each(|d| c.update(d));
        B64.encode(c.finalize().as_ref())
    }
    Some(match alg {
        "crc32" => run::<s3s::crypto::Crc32>(data),
        "crc32c" => run::<s3s::crypto::Crc32c>(data),
        "crc64nvme" => run::<s3s::crypto::Crc64Nvme>(data),
        "sha1" => run::<s3s::crypto::Sha1>(data),
        "sha256" => run::<s3s::crypto::Sha256>(data),
        _ => return None,
    })
}

fn get(c: &Checksums, alg: &str) -> Option<String> {
    match alg {
        "crc32" => c.crc32.clone(),
        "crc32c" => c.crc32c.clone(),
        "crc64nvme" => c.crc64nvme.clone(),
        "sha1" => c.sha1.clone(),
        "sha256" => c.sha256.clone(),
        _ => None,
    }
}

pub(crate) fn set_sum(c: &mut Checksums, alg: &str, v: String) {
    match alg {
        "crc32" => c.crc32 = Some(v),
        "crc32c" => c.crc32c = Some(v),
        "crc64nvme" => c.crc64nvme = Some(v),
        "sha1" => c.sha1 = Some(v),
        "sha256" => c.sha256 = Some(v),
        _ => {}
    }
}

const ALGORITHMS: [&str; 5] = ["crc32", "crc32c", "crc64nvme", "sha1", "sha256"];

/// The COMPOSITE checksums of an object made of `parts`: for each algorithm
/// every part has, the checksum of the parts' decoded checksums, `-N`.
fn composite(parts: &[PartMeta]) -> Checksums {
    let mut out = Checksums::default();
    for alg in ALGORITHMS {
        let decoded: Option<Vec<Vec<u8>>> = (parts.iter())
            .map(|p| get(&p.checksums, alg).and_then(|v| B64.decode(v).ok()))
            .collect();
        if let Some(d) = decoded {
            let refs: Vec<&[u8]> = d.iter().map(Vec::as_slice).collect();
            if let Some(v) = digest(alg, &refs) {
                set_sum(&mut out, alg, format!("{v}-{}", parts.len()));
            }
        }
    }
    out
}

/// The checksum `alg` of the whole data file `path`.
fn whole(path: std::path::PathBuf, alg: String) -> std::io::Result<Option<String>> {
    use std::io::Read;
    let Some(mut d) = digest_of(&alg) else {
        return Ok(None);
    };
    let mut f = std::fs::File::open(path)?;
    // Hashing piece by piece keeps at most one MiB in memory.
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(Some(d.finish()));
        }
        d.update(&buf[..n]);
    }
}

/// A checksum of one of S3's algorithms, made piece by piece.
pub(crate) enum Running {
    Crc32(s3s::crypto::Crc32),
    Crc32c(s3s::crypto::Crc32c),
    Crc64Nvme(s3s::crypto::Crc64Nvme),
    Sha1(s3s::crypto::Sha1),
    Sha256(s3s::crypto::Sha256),
}

/// The running checksum of algorithm `alg` (lower case); none for another name.
pub(crate) fn digest_of(alg: &str) -> Option<Running> {
    use s3s::crypto as c;
    Some(match alg {
        "crc32" => Running::Crc32(c::Crc32::new()),
        "crc32c" => Running::Crc32c(c::Crc32c::new()),
        "crc64nvme" => Running::Crc64Nvme(c::Crc64Nvme::new()),
        "sha1" => Running::Sha1(c::Sha1::new()),
        "sha256" => Running::Sha256(c::Sha256::new()),
        _ => return None,
    })
}

impl Running {
    pub(crate) fn update(&mut self, data: &[u8]) {
        match self {
            Running::Crc32(c) => c.update(data),
            Running::Crc32c(c) => c.update(data),
            Running::Crc64Nvme(c) => c.update(data),
            Running::Sha1(c) => c.update(data),
            Running::Sha256(c) => c.update(data),
        }
    }

    /// The checksum, base64 as S3 sends it.
    pub(crate) fn finish(self) -> String {
        match self {
            Running::Crc32(c) => B64.encode(c.finalize().as_ref()),
            Running::Crc32c(c) => B64.encode(c.finalize().as_ref()),
            Running::Crc64Nvme(c) => B64.encode(c.finalize().as_ref()),
            Running::Sha1(c) => B64.encode(c.finalize().as_ref()),
            Running::Sha256(c) => B64.encode(c.finalize().as_ref()),
        }
    }
}

/// The entity tag of an object made of parts with MD5s `etags` (hex).
fn multipart_etag(etags: &[String]) -> String {
    let mut md5 = s3s::crypto::Md5::new();
    for e in etags {
        md5.update(&hex::decode(e.trim_matches('"')).unwrap_or_default());
    }
    format!("{}-{}", hex::encode(md5.finalize()), etags.len())
}

/// CompleteMultipartUpload.
pub(crate) async fn complete(
    shared: &Arc<Shared>,
    i: CompleteMultipartUploadInput,
) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
    let asked: Vec<(i64, String)> = (i.multipart_upload.and_then(|m| m.parts).unwrap_or_default())
        .into_iter()
        .map(|p| {
            (
                i64::from(p.part_number.unwrap_or(0)),
                p.e_tag.map(|e| e.value().to_string()).unwrap_or_default(),
            )
        })
        .collect();
    let sent = given(
        i.checksum_crc32,
        i.checksum_crc32c,
        i.checksum_crc64nvme,
        i.checksum_sha1,
        i.checksum_sha256,
    );
    let (bucket, key, id) = (i.bucket.clone(), i.key.clone(), i.upload_id.clone());
    let (u, parts) = run(shared, move |c, _| {
        let u = uploads::get(c, &bucket, key.as_bytes(), &id)?;
        let parts = uploads::chosen(c, &u, &asked)?;
        Ok((u, parts))
    })
    .await?;
    let etag = multipart_etag(&parts.iter().map(|p| p.etag.clone()).collect::<Vec<_>>());
    let (u2, p2) = (u.clone(), parts.clone());
    let (file, size, kept) = run(shared, move |_, s| uploads::join(s, &u2, &p2)).await?;
    let mut meta: Meta = serde_json::from_str(&u.meta).unwrap_or_default();
    let checksums = match meta.full_object {
        true => {
            let alg = meta.algorithm.clone().unwrap_or_else(|| "crc64nvme".into());
            let path = shared.store.path(&file);
            let v = tokio::task::spawn_blocking(move || whole(path, alg.clone()).map(|v| (alg, v)))
                .await
                .map_err(crate::error::join)?
                .map_err(crate::error::internal)?;
            let mut c = Checksums::default();
            if let (alg, Some(v)) = v {
                set_sum(&mut c, &alg, v);
            }
            c
        }
        false => composite(&kept),
    };
    for alg in ALGORITHMS {
        if let Some(s) = get(&sent, alg) {
            if get(&checksums, alg).as_deref() != Some(s.as_str()) {
                let _ = tokio::fs::remove_file(shared.store.path(&file)).await;
                return Err(s3_error!(
                    BadDigest,
                    "the {alg} checksum sent, {s}, is not the object's"
                ));
            }
        }
    }
    meta.checksums = checksums;
    meta.parts = Vec::new();
    let (m2, e2) = (meta.clone(), etag.clone());
    let o = run(shared, move |c, s| {
        let mut m = m2;
        m.parts = kept;
        uploads::finish(c, s, &u, (file, size), e2, &m)
    })
    .await?;
    let sums = meta.checksums;
    Ok(S3Response::new(CompleteMultipartUploadOutput {
        bucket: Some(o.bucket),
        key: Some(i.key),
        e_tag: Some(ETag::Strong(etag)),
        checksum_crc32: sums.crc32,
        checksum_crc32c: sums.crc32c,
        checksum_crc64nvme: sums.crc64nvme,
        checksum_sha1: sums.sha1,
        checksum_sha256: sums.sha256,
        checksum_type: Some(ChecksumType::from(
            if meta.full_object {
                "FULL_OBJECT"
            } else {
                "COMPOSITE"
            }
            .to_string(),
        )),
        ..Default::default()
    }))
}

/// AbortMultipartUpload.
pub(crate) async fn abort(
    shared: &Arc<Shared>,
    i: AbortMultipartUploadInput,
) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
    run(shared, move |c, s| {
        let u = uploads::get(c, &i.bucket, i.key.as_bytes(), &i.upload_id)?;
        uploads::abort(c, s, &u)
    })
    .await?;
    Ok(S3Response::new(AbortMultipartUploadOutput::default()))
}

/// ListParts.
pub(crate) async fn list_parts(
    shared: &Arc<Shared>,
    i: ListPartsInput,
) -> S3Result<S3Response<ListPartsOutput>> {
    let (bucket, key, id) = (i.bucket.clone(), i.key.clone(), i.upload_id.clone());
    let (u, parts) = run(shared, move |c, _| {
        let u = uploads::get(c, &bucket, key.as_bytes(), &id)?;
        let parts = uploads::parts(c, &u)?;
        Ok((u, parts))
    })
    .await?;
    let marker = i.part_number_marker.unwrap_or(0).max(0) as u32;
    let max = i.max_parts.map_or(1000, |m| m.clamp(0, 1000)) as usize;
    let after: Vec<&Part> = parts.iter().filter(|p| p.number > marker).collect();
    let page: Vec<&Part> = after.iter().take(max).copied().collect();
    let truncated = after.len() > page.len();
    let listed = (page.iter())
        .map(|p| {
            let c: Checksums = serde_json::from_str(&p.meta).unwrap_or_default();
            s3s::dto::Part {
                part_number: Some(p.number as i32),
                size: Some(p.size as i64),
                e_tag: Some(ETag::Strong(p.etag.clone())),
                checksum_crc32: c.crc32,
                checksum_crc32c: c.crc32c,
                checksum_crc64nvme: c.crc64nvme,
                checksum_sha1: c.sha1,
                checksum_sha256: c.sha256,
                last_modified: None,
            }
        })
        .collect();
    Ok(S3Response::new(ListPartsOutput {
        bucket: Some(i.bucket),
        key: Some(i.key),
        upload_id: Some(i.upload_id),
        part_number_marker: i.part_number_marker,
        next_part_number_marker: page.last().map(|p| p.number as i32),
        max_parts: Some(max as i32),
        is_truncated: Some(truncated),
        parts: Some(listed),
        storage_class: Some(StorageClass::from(u.class)),
        owner: Some(owner()),
        ..Default::default()
    }))
}

/// ListMultipartUploads: the uploads in progress whose keys begin with the
/// prefix, at most `max-uploads` (1,000) of them.
pub(crate) async fn list_uploads(
    shared: &Arc<Shared>,
    i: ListMultipartUploadsInput,
) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
    let bucket = i.bucket.clone();
    let all = run(shared, move |c, _| uploads::list(c, &bucket)).await?;
    let prefix = i.prefix.clone().unwrap_or_default();
    let max = i.max_uploads.map_or(1000, |m| m.clamp(0, 1000)) as usize;
    let matching: Vec<_> = all
        .into_iter()
        .filter(|u| u.key.starts_with(prefix.as_bytes()))
        .collect();
    let truncated = matching.len() > max;
    let listed = (matching.into_iter().take(max))
        .map(|u| MultipartUpload {
            key: Some(String::from_utf8_lossy(&u.key).into_owned()),
            upload_id: Some(u.id),
            initiated: Some(stamp(u.created_ns)),
            storage_class: Some(StorageClass::from(u.class)),
            owner: Some(owner()),
            ..Default::default()
        })
        .collect();
    Ok(S3Response::new(ListMultipartUploadsOutput {
        bucket: Some(i.bucket),
        prefix: i.prefix,
        max_uploads: Some(max as i32),
        is_truncated: Some(truncated),
        uploads: Some(listed),
        ..Default::default()
    }))
}
