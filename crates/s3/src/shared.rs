//! What the S3 operations share: the home and its S3 stage ([`Shared`]), a
//! request's catalog work on a blocking thread ([`run`]), and how times,
//! checksums, stored headers and archived objects are shown.

use crate::error::{join, s3};
use s3s::dto::*;
use s3s::{s3_error, S3Result};
use std::path::PathBuf;
use std::sync::Arc;
use tapeloom_ops::s3::objects::{Checksums, Meta};
use tapeloom_ops::s3::{keys, S3Key, S3Object, Store};
use tapeloom_ops::Conn;

/// What every request shares: the home and its S3 stage.
pub(crate) struct Shared {
    /// The server's home.
    pub home: PathBuf,
    /// Its S3 stage.
    pub store: Store,
    /// The restore windows and the restore cache's limit.
    pub restores: tapeloom_ops::s3::restores::Settings,
}

/// Runs `f` with a connection to the catalog on a blocking thread.
pub(crate) async fn run<T: Send + 'static>(
    shared: &Arc<Shared>,
    f: impl FnOnce(&Conn, &Store) -> tapeloom_ops::s3::Result<T> + Send + 'static,
) -> S3Result<T> {
    let shared = shared.clone();
    let r = tokio::task::spawn_blocking(move || {
        let conn = Conn::open(&shared.home)?;
        f(&conn, &shared.store)
    })
    .await
    .map_err(join)?;
    r.map_err(s3)
}

/// A time of the catalog (nanoseconds since the epoch) as S3 sends one:
/// listings show its milliseconds, headers whole seconds.
pub(crate) fn stamp(ns: i64) -> Timestamp {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ns))
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    Timestamp::from(t)
}

/// The same time cut to whole seconds, as conditional headers compare it.
pub(crate) fn second(ns: i64) -> Timestamp {
    stamp(ns - ns.rem_euclid(1_000_000_000))
}

/// The checksums sent in an upload's headers.
pub(crate) fn given(
    crc32: Option<String>,
    crc32c: Option<String>,
    crc64nvme: Option<String>,
    sha1: Option<String>,
    sha256: Option<String>,
) -> Checksums {
    Checksums {
        crc32,
        crc32c,
        crc64nvme,
        sha1,
        sha256,
    }
}

/// The answer to a read of an archived object that is not restored.
/// S3 names the object's storage class in this error's body, which s3s's error
/// cannot hold: the class goes in the header [`crate::error::STORAGE_CLASS_MARK`], and the
/// service moves it into the body ([`crate::with_storage_class`]).
pub(crate) fn not_restored(o: &S3Object) -> s3s::S3Error {
    let mut e = s3_error!(
        InvalidObjectState,
        "the object is in storage class {}: restore it first (RestoreObject)",
        o.class
    );
    crate::error::mark_class(&mut e, &o.class);
    e
}

/// The header an answer carries the status it must have in, when s3s would
/// answer another.
pub(crate) const STATUS_MARK: &str = "x-tapeloom-status";

/// What an upload keeps besides its data, from its headers.
pub(crate) struct Headers {
    pub content_type: Option<String>,
    pub content_encoding: Option<String>,
    pub content_disposition: Option<String>,
    pub content_language: Option<String>,
    pub cache_control: Option<String>,
    pub expires: Option<Timestamp>,
    pub metadata: Option<Metadata>,
}

impl Headers {
    pub(crate) fn meta(self) -> Meta {
        let expires = self.expires.and_then(|t| {
            let mut b = Vec::new();
            t.format(TimestampFormat::HttpDate, &mut b).ok()?;
            String::from_utf8(b).ok()
        });
        Meta {
            content_type: self.content_type,
            content_encoding: self.content_encoding,
            content_disposition: self.content_disposition,
            content_language: self.content_language,
            cache_control: self.cache_control,
            expires,
            user: self.metadata.unwrap_or_default().into_iter().collect(),
            ..Meta::default()
        }
    }
}

/// The owner every bucket and object is shown with: the server itself.
pub(crate) fn owner() -> Owner {
    Owner {
        display_name: Some("tapeloom".into()),
        id: Some("tapeloom".into()),
    }
}

/// The key whose id is `access_key`, revoked ones not.
pub(crate) async fn key_of(shared: &Arc<Shared>, access_key: &str) -> S3Result<S3Key> {
    let (home, id) = (shared.home.clone(), access_key.to_string());
    let found = tokio::task::spawn_blocking(move || {
        let conn = tapeloom_ops::Conn::open(&home)?;
        keys::find(&conn, &id)
    })
    .await
    .map_err(crate::error::join)?;
    match found {
        Ok(Some(k)) => Ok(k),
        Ok(None) => Err(s3_error!(InvalidAccessKeyId)),
        Err(e) => Err(crate::error::internal(e)),
    }
}
