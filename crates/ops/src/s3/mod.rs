//! The S3 front end's operations: access keys ([`keys`]), buckets ([`buckets`]),
//! objects kept in the S3 stage ([`objects`], [`Store`]), multipart uploads
//! ([`uploads`]), their archiving to tape in batches ([`tape`]) and their
//! restores ([`restores`]). The front end (`tapeloom-s3`) parses requests, checks their
//! signatures and streams bodies; every rule of what is stored, where and for
//! whom is kept here, so that a bucket's objects follow their pool's rules as
//! every job does.
//!
//! An operation refused for a reason S3 has a code for answers [`Refused`]; the
//! front end turns it into S3's error.

pub mod buckets;
pub mod keys;
pub mod limits;
pub mod objects;
pub mod restores;
mod store;
pub mod tape;
pub mod uploads;

pub use store::Store;
pub use tapeloom_catalog::{Batching, Bucket, Part, Restore, S3Key, S3Object, Upload};

/// Why an S3 operation failed: refused for a reason S3 has a code for, or
/// failed as any operation can.
#[derive(Debug, thiserror::Error)]
pub enum S3Failure {
    /// Refused, with S3's reason.
    #[error(transparent)]
    Refused(#[from] Refused),
    /// Failed (the catalog, the disk).
    #[error(transparent)]
    Failed(#[from] crate::OpsError),
}

impl From<tapeloom_catalog::CatalogError> for S3Failure {
    fn from(e: tapeloom_catalog::CatalogError) -> S3Failure {
        use tapeloom_catalog::CatalogError as C;
        match e {
            C::BucketExists { name } => Refused::BucketExists { name }.into(),
            C::BucketNotEmpty { name } => Refused::BucketNotEmpty { name }.into(),
            e => S3Failure::Failed(e.into()),
        }
    }
}

/// The result of an S3 operation.
pub type Result<T> = std::result::Result<T, S3Failure>;

/// Why S3 refuses a request; each has S3's error code ([`Refused::code`]).
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// No bucket of this name.
    #[error("no bucket {name}")]
    NoSuchBucket {
        /// The bucket asked for.
        name: String,
    },
    /// A bucket of this name exists.
    #[error("bucket {name} exists already")]
    BucketExists {
        /// The bucket's name.
        name: String,
    },
    /// The bucket holds objects or uploads.
    #[error("bucket {name} is not empty")]
    BucketNotEmpty {
        /// The bucket's name.
        name: String,
    },
    /// A bucket name S3 does not allow.
    #[error("bucket name '{name}' must be 3 to 63 lower-case letters, digits, '.' or '-', beginning and ending with a letter or digit")]
    BadBucketName {
        /// The name given.
        name: String,
    },
    /// The pool a bucket names does not exist.
    #[error("no pool {pool}: make it with `tapeloom pool create {pool}` first")]
    NoPool {
        /// The pool named.
        pool: String,
    },
    /// No object of this key.
    #[error("no object {key} in bucket {bucket}")]
    NoSuchKey {
        /// The bucket.
        bucket: String,
        /// The key, shown with its control characters escaped.
        key: String,
    },
    /// A key longer than 1,024 bytes.
    #[error("a key may be at most 1,024 bytes long; this one is {len}")]
    KeyTooLong {
        /// The key's length.
        len: usize,
    },
    /// A key that is empty, holds a NUL or has a `.` or `..` segment.
    #[error("key {key}: a key must not be empty, hold a NUL or have '.' or '..' between slashes")]
    BadKey {
        /// The key, shown with its control characters escaped.
        key: String,
    },
    /// A storage class other than STANDARD, GLACIER and DEEP_ARCHIVE.
    #[error("storage class {class} is not one of STANDARD, GLACIER and DEEP_ARCHIVE")]
    InvalidStorageClass {
        /// The class asked for.
        class: String,
    },
    /// No multipart upload of this id.
    #[error("no upload {id}")]
    NoSuchUpload {
        /// The upload id given.
        id: String,
    },
    /// A part listed to complete an upload that was not uploaded, or whose
    /// entity tag differs.
    #[error("part {number} was not uploaded with entity tag {etag}")]
    InvalidPart {
        /// The part's number.
        number: u32,
        /// The entity tag given.
        etag: String,
    },
    /// Parts listed out of ascending order.
    #[error("the parts must be listed in ascending order of number")]
    InvalidPartOrder,
    /// A part other than the last smaller than 5 MiB.
    #[error("part {number} is {size} bytes: every part but the last must be at least 5 MiB")]
    EntityTooSmall {
        /// The part's number.
        number: u32,
        /// Its size.
        size: u64,
    },
    /// An access key used on a bucket it was not made for, or to make a bucket
    /// when it was made for some.
    #[error("S3 key {key} may not do this: it was made for other buckets")]
    NotYours {
        /// The key's name.
        key: String,
    },
    /// A restore's tier other than Standard, Bulk and Expedited.
    #[error("tier {tier} is not one of Standard, Bulk and Expedited")]
    BadTier {
        /// The tier asked for.
        tier: String,
    },
    /// A restore's days outside 1 to 36,500.
    #[error("a restore keeps its copy for 1 to 36,500 days, not {days}")]
    BadDays {
        /// The days asked for.
        days: i64,
    },
    /// A restore of an object that is not archived (STANDARD).
    #[error("the object is in storage class {class}, which is read without a restore")]
    NotArchived {
        /// Its class.
        class: String,
    },
    /// The object's data is on another server of the site, whose front end
    /// serves it (the request is sent on to it).
    #[error("the object's data is on server {server}, which serves it")]
    Elsewhere {
        /// That server's name.
        server: String,
    },
    /// The restore cache has no room: its copies have not expired.
    #[error("the restore cache holds {used} of its {limit} bytes in copies that have not expired and restores that run: ask again later")]
    SlowDown {
        /// Its bytes in use.
        used: u64,
        /// Its limit.
        limit: u64,
    },
    /// A part number outside 1 to 10,000.
    #[error("part number {number} is not between 1 and 10,000")]
    BadPartNumber {
        /// The number given.
        number: i64,
    },
    /// A request whose headers are larger than [`limits::MAX_HEADER_BYTES`].
    #[error(
        "the request's headers are {bytes} bytes: at most {} are read",
        limits::MAX_HEADER_BYTES
    )]
    HeadersTooLarge {
        /// Their size.
        bytes: usize,
    },
    /// User metadata (`x-amz-meta-*`) larger than [`limits::MAX_METADATA_BYTES`].
    #[error(
        "the user metadata is {bytes} bytes: at most {} are kept",
        limits::MAX_METADATA_BYTES
    )]
    MetadataTooLarge {
        /// Its size: the bytes of each name (after `x-amz-meta-`) and value.
        bytes: usize,
    },
    /// An object or a part larger than [`limits::MAX_OBJECT_BYTES`].
    #[error("an object or a part may be at most 5 GiB; this one is {size} bytes")]
    EntityTooLarge {
        /// Its size, as the request gave it or as far as it was read.
        size: u64,
    },
    /// A body read whole (XML) larger than [`limits::MAX_XML_BYTES`].
    #[error(
        "the request's body is {size} bytes: at most {} are read",
        limits::MAX_XML_BYTES
    )]
    MessageTooLarge {
        /// Its size, as the request gave it.
        size: u64,
    },
}

impl Refused {
    /// S3's error code of this refusal.
    pub fn code(&self) -> &'static str {
        match self {
            Refused::NoSuchBucket { .. } => "NoSuchBucket",
            Refused::BucketExists { .. } => "BucketAlreadyOwnedByYou",
            Refused::BucketNotEmpty { .. } => "BucketNotEmpty",
            Refused::BadBucketName { .. } => "InvalidBucketName",
            Refused::NoPool { .. } => "InvalidArgument",
            Refused::NoSuchKey { .. } => "NoSuchKey",
            Refused::KeyTooLong { .. } => "KeyTooLongError",
            Refused::BadKey { .. } => "InvalidArgument",
            Refused::InvalidStorageClass { .. } => "InvalidStorageClass",
            Refused::NoSuchUpload { .. } => "NoSuchUpload",
            Refused::InvalidPart { .. } => "InvalidPart",
            Refused::InvalidPartOrder => "InvalidPartOrder",
            Refused::EntityTooSmall { .. } => "EntityTooSmall",
            Refused::BadPartNumber { .. } => "InvalidArgument",
            Refused::NotYours { .. } => "AccessDenied",
            Refused::BadTier { .. } => "MalformedXML",
            Refused::BadDays { .. } => "InvalidArgument",
            Refused::NotArchived { .. } => "InvalidObjectState",
            Refused::SlowDown { .. } => "SlowDown",
            Refused::Elsewhere { .. } => "ServiceUnavailable",
            Refused::HeadersTooLarge { .. } => "RequestHeaderSectionTooLarge",
            Refused::MetadataTooLarge { .. } => "MetadataTooLarge",
            Refused::EntityTooLarge { .. } => "EntityTooLarge",
            Refused::MessageTooLarge { .. } => "MaxMessageLengthExceeded",
        }
    }
}

/// The storage classes: where an object's data stays.
pub const CLASSES: [&str; 3] = ["STANDARD", "GLACIER", "DEEP_ARCHIVE"];

/// The class asked for (STANDARD when none), or [`Refused::InvalidStorageClass`].
pub fn storage_class(asked: Option<&str>) -> std::result::Result<&'static str, Refused> {
    let asked = asked.unwrap_or("STANDARD");
    CLASSES
        .into_iter()
        .find(|c| *c == asked)
        .ok_or_else(|| Refused::InvalidStorageClass {
            class: tapeloom_engine::escape_controls(asked).into_owned(),
        })
}

/// Checks that `key` can name an object: 1 to 1,024 bytes, no NUL, no `.` or
/// `..` segment (a key becomes a path when a job of the bucket is restored).
pub fn check_key(key: &[u8]) -> std::result::Result<(), Refused> {
    if key.len() > 1024 {
        return Err(Refused::KeyTooLong { len: key.len() });
    }
    let dots = key.split(|b| *b == b'/').any(|s| s == b"." || s == b"..");
    if key.is_empty() || key.contains(&0) || dots {
        return Err(Refused::BadKey { key: shown(key) });
    }
    Ok(())
}

/// Checks that `name` can name a bucket as S3 allows: 3 to 63 lower-case
/// letters, digits, `.` and `-`, beginning and ending with a letter or digit,
/// no `..`, and not an IPv4 address.
pub fn check_bucket_name(name: &str) -> std::result::Result<(), Refused> {
    let b = name.as_bytes();
    let ok = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'.' || *c == b'-';
    let ends = |c: Option<&u8>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let good = (3..=63).contains(&b.len())
        && b.iter().all(ok)
        && ends(b.first())
        && ends(b.last())
        && !name.contains("..")
        && name.parse::<std::net::Ipv4Addr>().is_err();
    if good {
        Ok(())
    } else {
        Err(Refused::BadBucketName {
            name: tapeloom_engine::escape_controls(name).into_owned(),
        })
    }
}

/// Whether `key` may use bucket `bucket`.
pub fn may_use(key: &S3Key, bucket: &str) -> bool {
    key.buckets.is_empty() || key.buckets.iter().any(|b| b == bucket)
}

/// A key as a message shows it.
pub(crate) fn shown(key: &[u8]) -> String {
    tapeloom_engine::escape_controls(&String::from_utf8_lossy(key)).into_owned()
}

/// Now by the system's clock, in seconds since the epoch: what a signature's
/// time and a presigned URL's expiry are compared with.
pub fn wall_s() -> i64 {
    tapeloom_engine::clock::system_ns() / 1_000_000_000
}

/// Now, in nanoseconds since the epoch, by the engine's clock.
fn now_ns() -> crate::Result<i64> {
    Ok(tapeloom_engine::clock::now()?.as_nanos())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_that_cannot_name_an_object_are_refused_with_s3s_codes() {
        assert!(check_key(b"photos/2026/a.jpg").is_ok());
        assert!(check_key(b"a..b/.c/d.").is_ok());
        let code = |k: &[u8]| check_key(k).unwrap_err().code();
        assert_eq!(code(&[b'a'; 1025]), "KeyTooLongError");
        assert!(check_key(&[b'a'; 1024]).is_ok());
        assert_eq!(code(b"../etc/passwd"), "InvalidArgument");
        assert_eq!(code(b"a/./b"), "InvalidArgument");
        assert_eq!(code(b"a\0b"), "InvalidArgument");
        assert_eq!(code(b""), "InvalidArgument");
    }

    #[test]
    fn only_three_storage_classes_are_known() {
        assert_eq!(storage_class(None).unwrap(), "STANDARD");
        assert_eq!(storage_class(Some("GLACIER")).unwrap(), "GLACIER");
        assert_eq!(
            storage_class(Some("ONEZONE_IA")).unwrap_err().code(),
            "InvalidStorageClass"
        );
    }
}
