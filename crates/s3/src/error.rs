//! The operations layer's refusals and failures as S3's errors.

use s3s::{S3Error, S3ErrorCode};
use tapeloom_ops::s3::{Refused, S3Failure};

/// S3's error for `f`: a refusal with its code and message, a failure as 500
/// InternalError (logged, since the client sees only that the server failed).
pub(crate) fn s3(f: S3Failure) -> S3Error {
    match f {
        S3Failure::Refused(r) => {
            let code =
                S3ErrorCode::from_bytes(r.code().as_bytes()).unwrap_or(S3ErrorCode::InvalidRequest);
            let mut e = S3Error::with_message(code, r.to_string());
            // S3 names the object's class in an InvalidObjectState error's body.
            if let Refused::NotArchived { class } = &r {
                mark_class(&mut e, class);
            }
            // The data is on another server of the site: the service sends
            // the request on to it (`peer.rs`).
            if let Refused::Elsewhere { server } = &r {
                if let Ok(v) = http::HeaderValue::from_str(server) {
                    let mut h = http::HeaderMap::new();
                    h.insert(crate::peer::PEER_MARK, v);
                    e.set_headers(h);
                }
            }
            e
        }
        S3Failure::Failed(e) => {
            tracing::error!("S3: {e}");
            S3Error::with_message(S3ErrorCode::InternalError, e.to_string())
        }
    }
}

/// S3's error for a request whose catalog work could not run (its thread
/// panicked or the runtime is stopping).
pub(crate) fn join(e: tokio::task::JoinError) -> S3Error {
    tracing::error!("S3: a request's work failed: {e}");
    S3Error::with_message(S3ErrorCode::InternalError, "the server failed: see its log")
}

/// 500 InternalError for a failure of this server's disk or catalog.
pub(crate) fn internal(e: impl std::fmt::Display) -> S3Error {
    tracing::error!("S3: {e}");
    S3Error::with_message(S3ErrorCode::InternalError, e.to_string())
}

/// Marks error `e` with the storage class `class` its body must name.
pub(crate) fn mark_class(e: &mut S3Error, class: &str) {
    if let Ok(v) = http::HeaderValue::from_str(class) {
        let mut h = http::HeaderMap::new();
        h.insert(STORAGE_CLASS_MARK, v);
        e.set_headers(h);
    }
}

/// The header an error carries its object's storage class in, on its way to
/// the error's body.
pub(crate) const STORAGE_CLASS_MARK: &str = "x-tapeloom-storage-class";
