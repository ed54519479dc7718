//! Bodies: an upload streamed into a data file of the S3 stage while its MD5
//! (the entity tag) and its checksums are computed, checked against those the
//! client sent in headers or trailers; a download streamed from a data file.

use bytes::Bytes;
use futures::StreamExt;
use s3s::checksum::ChecksumHasher;
use s3s::dto::StreamingBlob;
use s3s::{s3_error, S3Result};
use std::path::PathBuf;
use tapeloom_ops::s3::objects::Checksums;
use tapeloom_ops::s3::Store;
use tapeloom_ops::s3::{limits, Refused};
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

/// An upload written to the S3 stage and flushed.
pub(crate) struct Received {
    /// Its data file.
    pub file: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its MD5, in hex.
    pub md5: String,
    /// Its checksums: those the client sent (each checked), or CRC64NVME when it
    /// sent none, as S3 keeps it.
    pub checksums: Checksums,
}

/// The checksums a client sent with an upload, in headers (`given`) or named
/// for the trailer (`x-amz-trailer`), and the algorithm it asked for.
#[derive(Default)]
pub(crate) struct Asked {
    /// The values sent in headers.
    pub given: Checksums,
    /// The algorithm named by `x-amz-checksum-algorithm` or
    /// `x-amz-sdk-checksum-algorithm`, or by the trailer's name.
    pub algorithm: Option<String>,
    /// The base64 MD5 of `Content-MD5`.
    pub md5: Option<String>,
}

impl Asked {
    /// What `headers` ask for, besides the values in `given`.
    pub fn of(headers: &http::HeaderMap, given: Checksums, md5: Option<String>) -> Asked {
        let text = |n: &str| {
            headers
                .get(n)
                .and_then(|v| v.to_str().ok())
                .map(str::to_ascii_lowercase)
        };
        let algorithm = (text("x-amz-checksum-algorithm"))
            .or_else(|| text("x-amz-sdk-checksum-algorithm"))
            .or_else(|| {
                text("x-amz-trailer")
                    .and_then(|t| t.strip_prefix("x-amz-checksum-").map(str::to_string))
            });
        Asked {
            given,
            algorithm,
            md5,
        }
    }

    fn wants(&self, name: &str) -> bool {
        self.algorithm.as_deref() == Some(name)
    }
}

fn io(what: &'static str) -> impl Fn(std::io::Error) -> s3s::S3Error {
    move |e| crate::error::internal(format!("{what}: {e}"))
}

/// Writes `body` to a new data file of `store`, flushes it, and checks it
/// against what the client sent (`asked`, and the trailers once the body is
/// read); the file is removed when anything fails.
pub(crate) async fn receive(
    store: &Store,
    body: Option<StreamingBlob>,
    asked: Asked,
    trailers: Option<s3s::TrailingHeaders>,
) -> S3Result<Received> {
    let (file, f) = store.create().map_err(crate::error::internal)?;
    let path = store.path(&file);
    let r = write(f, body, &asked, trailers).await;
    match r {
        Ok((size, md5, checksums)) => Ok(Received {
            file,
            size,
            md5,
            checksums,
        }),
        Err(e) => {
            let _ = tokio::fs::remove_file(&path).await;
            Err(e)
        }
    }
}

async fn write(
    f: std::fs::File,
    body: Option<StreamingBlob>,
    asked: &Asked,
    trailers: Option<s3s::TrailingHeaders>,
) -> S3Result<(u64, String, Checksums)> {
    let mut hasher = ChecksumHasher {
        crc32: Some(Default::default()),
        crc32c: Some(Default::default()),
        crc64nvme: Some(Default::default()),
        sha1: (asked.given.sha1.is_some() || asked.wants("sha1")).then(Default::default),
        sha256: (asked.given.sha256.is_some() || asked.wants("sha256")).then(Default::default),
    };
    let mut md5 = s3s::crypto::Md5::new();
    let mut out = tokio::fs::File::from_std(f);
    let mut size = 0u64;
    if let Some(mut body) = body {
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| broken(&*e))?;
            // A body without a length in its head is held to the limit as it comes.
            let now = size + chunk.len() as u64;
            if now > limits::MAX_OBJECT_BYTES {
                return Err(crate::error::s3(
                    Refused::EntityTooLarge { size: now }.into(),
                ));
            }
            use s3s::crypto::Checksum as _;
            md5.update(&chunk);
            hasher.update(&chunk);
            out.write_all(&chunk)
                .await
                .map_err(io("write an object's data"))?;
            size += chunk.len() as u64;
        }
    }
    out.flush().await.map_err(io("write an object's data"))?;
    let f = out.into_std().await;
    tokio::task::spawn_blocking(move || f.sync_all())
        .await
        .map_err(crate::error::join)?
        .map_err(io("flush an object's data"))?;
    use s3s::crypto::Checksum as _;
    let md5 = md5.finalize();
    let got = hasher.finalize();
    let mut sent = asked.given.clone();
    if let Some(t) = trailers.and_then(|t| t.take()) {
        let v = |n: &str| t.get(n).and_then(|v| v.to_str().ok()).map(str::to_string);
        sent.crc32 = sent.crc32.or(v("x-amz-checksum-crc32"));
        sent.crc32c = sent.crc32c.or(v("x-amz-checksum-crc32c"));
        sent.crc64nvme = sent.crc64nvme.or(v("x-amz-checksum-crc64nvme"));
        sent.sha1 = sent.sha1.or(v("x-amz-checksum-sha1"));
        sent.sha256 = sent.sha256.or(v("x-amz-checksum-sha256"));
    }
    check(&sent, &got, asked.md5.as_deref(), &md5)?;
    Ok((size, hex::encode(md5), kept(sent, &got)))
}

/// S3's error for a body that broke off while it was read: 403
/// SignatureDoesNotMatch when a chunk of a signed `aws-chunked` body does not
/// carry the signature chained from the chunk before it, as S3 answers, else
/// 400 IncompleteBody.
///
/// s3s keeps the error type of its chunk decoder private, so that error is
/// known by its text, which ends in `SignatureMismatch` in the release pinned
/// (`bench/s3_bad.py` sends such a body and checks the answer).
fn broken(e: &(dyn std::error::Error + 'static)) -> s3s::S3Error {
    let mismatch = std::iter::successors(Some(e), |e| e.source())
        .any(|e| e.to_string().ends_with("SignatureMismatch"));
    match mismatch {
        true => s3_error!(
            SignatureDoesNotMatch,
            "a chunk's signature is not the one chained from the chunk before it"
        ),
        false => s3_error!(IncompleteBody, "the body broke off: {e}"),
    }
}

/// Checks each checksum the client sent against the one computed.
fn check(
    sent: &Checksums,
    got: &s3s::dto::Checksum,
    md5: Option<&str>,
    md5_got: &[u8],
) -> S3Result<()> {
    let pairs = [
        ("CRC32", &sent.crc32, &got.checksum_crc32),
        ("CRC32C", &sent.crc32c, &got.checksum_crc32c),
        ("CRC64NVME", &sent.crc64nvme, &got.checksum_crc64nvme),
        ("SHA1", &sent.sha1, &got.checksum_sha1),
        ("SHA256", &sent.sha256, &got.checksum_sha256),
    ];
    for (name, sent, got) in pairs {
        if let Some(s) = sent {
            if got.as_deref() != Some(s.as_str()) {
                return Err(s3_error!(
                    BadDigest,
                    "the {name} checksum sent, {s}, is not the body's, {}",
                    got.as_deref().unwrap_or("(not computed)")
                ));
            }
        }
    }
    if let Some(m) = md5 {
        use base64::Engine as _;
        let ok = base64::engine::general_purpose::STANDARD
            .decode(m)
            .is_ok_and(|b| b == md5_got);
        if !ok {
            return Err(s3_error!(
                BadDigest,
                "the Content-MD5 sent is not the body's"
            ));
        }
    }
    Ok(())
}

/// The checksums kept of an upload: those sent, or CRC64NVME when none was.
fn kept(sent: Checksums, got: &s3s::dto::Checksum) -> Checksums {
    if sent == Checksums::default() {
        return Checksums {
            crc64nvme: got.checksum_crc64nvme.clone(),
            ..Checksums::default()
        };
    }
    sent
}

/// The bytes `range` of data file `path`, streamed in pieces of 1 MiB.
pub(crate) async fn send(path: PathBuf, range: std::ops::Range<u64>) -> S3Result<StreamingBlob> {
    let mut f = tokio::fs::File::open(&path)
        .await
        .map_err(io("open an object's data"))?;
    f.seek(std::io::SeekFrom::Start(range.start))
        .await
        .map_err(io("read an object's data"))?;
    let left = range.end - range.start;
    let stream = futures::stream::unfold((f, left), |(mut f, left)| async move {
        if left == 0 {
            return None;
        }
        let n = left.min(1 << 20) as usize;
        let mut buf = vec![0u8; n];
        match f.read_exact(&mut buf).await {
            Ok(_) => Some((Ok(Bytes::from(buf)), (f, left - n as u64))),
            Err(e) => Some((Err(e), (f, 0))),
        }
    });
    Ok(StreamingBlob::wrap(stream))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("AwsChunkedStreamError: {0}")]
    struct Decoder(&'static str);

    #[test]
    fn a_chunk_that_does_not_chain_is_a_signature_error_and_other_breaks_are_incomplete() {
        let code = |e: &(dyn std::error::Error + 'static)| broken(e).code().clone();
        let status = |e: &(dyn std::error::Error + 'static)| broken(e).status_code();
        let mismatch = Decoder("SignatureMismatch");
        assert_eq!(code(&mismatch), s3s::S3ErrorCode::SignatureDoesNotMatch);
        assert_eq!(status(&mismatch), Some(http::StatusCode::FORBIDDEN));
        let cut = Decoder("Incomplete");
        assert_eq!(code(&cut), s3s::S3ErrorCode::IncompleteBody);
        assert_eq!(status(&cut), Some(http::StatusCode::BAD_REQUEST));
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        assert_eq!(code(&io), s3s::S3ErrorCode::IncompleteBody);
    }
}
