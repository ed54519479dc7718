//! Who may do what: every request must be signed with an access key that is
//! not revoked (no anonymous access), a presigned URL may live at most seven
//! days, and a key made for some buckets sees only those and makes none.

use crate::shared::{key_of, Shared};
use s3s::access::{S3Access, S3AccessContext};
use s3s::auth::{S3Auth, SecretKey};
use s3s::path::S3Path;
use s3s::{s3_error, S3Result};
use std::sync::Arc;
use tapeloom_ops::s3::keys;

/// The access keys of the catalog, for checking signatures and access.
pub(crate) struct Keys(pub(crate) Arc<Shared>);

/// The longest a presigned URL may live: seven days, as in AWS.
const MAX_PRESIGNED_S: u64 = 7 * 24 * 3600;

#[async_trait::async_trait]
impl S3Auth for Keys {
    async fn get_secret_key(&self, access_key: &str) -> S3Result<SecretKey> {
        let (home, id) = (self.0.home.clone(), access_key.to_string());
        let found = tokio::task::spawn_blocking(move || {
            let conn = tapeloom_ops::Conn::open(&home)?;
            keys::secret(&conn, &id)
        })
        .await
        .map_err(crate::error::join)?;
        match found {
            Ok(Some((_, secret))) => Ok(SecretKey::from(secret)),
            Ok(None) => Err(s3_error!(InvalidAccessKeyId)),
            Err(e) => Err(crate::error::internal(e)),
        }
    }
}

/// The lifetime in seconds a presigned URL asks for, if `query` is one's: its
/// `X-Amz-Expires` (SigV4), or its `Expires` (SigV2, a time since the epoch)
/// less `now_s`.
fn presigned_expiry(query: Option<&str>, now_s: i64) -> Option<u64> {
    let q = query?;
    let param = |name: &str| q.split('&').find_map(|p| p.strip_prefix(name));
    if let Some(v) = param("X-Amz-Expires=") {
        return Some(v.parse().unwrap_or(u64::MAX));
    }
    let v = param("Expires=").filter(|_| param("AWSAccessKeyId=").is_some())?;
    Some(
        v.parse::<i64>()
            .map_or(u64::MAX, |t| t.saturating_sub(now_s).max(0) as u64),
    )
}

#[async_trait::async_trait]
impl S3Access for Keys {
    async fn check(&self, cx: &mut S3AccessContext<'_>) -> S3Result<()> {
        // The operation's name, for the server's metrics.
        let name = cx.s3_op().name().to_string();
        if let Some(named) = cx.extensions_mut().get::<crate::gate::Named>() {
            let _ = named.0.set(name);
        }
        let Some(creds) = cx.credentials() else {
            return Err(s3_error!(AccessDenied, "every request must be signed"));
        };
        let lifetime = presigned_expiry(cx.uri().query(), tapeloom_ops::s3::wall_s());
        if lifetime.is_some_and(|s| s > MAX_PRESIGNED_S) {
            return Err(s3_error!(
                AuthorizationQueryParametersError,
                "a presigned URL may live at most 604800 seconds (seven days)"
            ));
        }
        let key = key_of(&self.0, &creds.access_key).await?;
        let bucket = match cx.s3_path() {
            S3Path::Root => return Ok(()),
            S3Path::Bucket { bucket } | S3Path::Object { bucket, .. } => bucket.to_string(),
        };
        if cx.s3_op().name() == "CreateBucket" {
            return keys::may_create(&key).map_err(|r| crate::error::s3(r.into()));
        }
        if !keys::may_use(&key, &bucket) {
            return Err(s3_error!(
                AccessDenied,
                "this key was not made for bucket {bucket}"
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_presigned_urls_lifetime_is_read_from_its_query() {
        let v4 = presigned_expiry(Some("X-Amz-Algorithm=A&X-Amz-Expires=3600"), 0);
        assert_eq!(v4, Some(3600));
        assert_eq!(presigned_expiry(Some("X-Amz-Expires=x"), 0), Some(u64::MAX));
        let v2 = "AWSAccessKeyId=TL&Signature=s&Expires=1000";
        assert_eq!(presigned_expiry(Some(v2), 400), Some(600));
        assert_eq!(presigned_expiry(Some(v2), 4000), Some(0));
        assert_eq!(presigned_expiry(Some("Expires=1000"), 0), None);
        assert_eq!(presigned_expiry(Some("list-type=2"), 0), None);
        assert_eq!(presigned_expiry(None, 0), None);
    }
}
