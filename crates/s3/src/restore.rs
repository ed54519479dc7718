//! RestoreObject, and how an object's restore is shown: the `x-amz-restore`
//! header of HEAD and GET, and RestoreStatus in a listing. The rules (which
//! objects must be restored, the expiry, the restore cache) are the operations
//! layer's (`tapeloom_ops::s3::restores`); this module speaks S3.
//!
//! AWS answers a restore that starts 202 Accepted, one asked while it runs 409
//! RestoreAlreadyInProgress, and one asked of an object already restored 200
//! OK (its expiry set again from now). The header has exactly two forms:
//! `ongoing-request="true"` while a restore runs, and
//! `ongoing-request="false", expiry-date="Fri, 01 Jan 2027 00:00:00 GMT"` while
//! a restored copy is kept; it is absent otherwise.

use crate::error::s3;
use crate::shared::{run, stamp, Shared};
use s3s::dto::*;
use s3s::{s3_error, S3Response, S3Result};
use std::sync::Arc;
use tapeloom_ops::s3::restores::{self, Asked, State, Tier};
use tapeloom_ops::s3::S3Object;

/// A time as an HTTP date (`Fri, 01 Jan 2027 00:00:00 GMT`).
fn http_date(ns: i64) -> String {
    let mut b = Vec::new();
    match stamp(ns).format(TimestampFormat::HttpDate, &mut b) {
        Ok(()) => String::from_utf8_lossy(&b).into_owned(),
        Err(_) => String::new(),
    }
}

/// The `x-amz-restore` header of an object whose restore is in `state`.
pub(crate) fn restore_header(state: State) -> Option<String> {
    match state {
        State::None => None,
        State::Ongoing => Some("ongoing-request=\"true\"".into()),
        State::Restored(until) => Some(format!(
            "ongoing-request=\"false\", expiry-date=\"{}\"",
            http_date(until)
        )),
    }
}

/// An object's RestoreStatus in a listing made at `now_ns`: none when no
/// restore runs and no restored copy is kept.
pub(crate) fn restore_status(o: &S3Object, now_ns: i64) -> Option<RestoreStatus> {
    match restores::state(o, now_ns) {
        State::None => None,
        State::Ongoing => Some(RestoreStatus {
            is_restore_in_progress: Some(true),
            restore_expiry_date: None,
        }),
        State::Restored(until) => Some(RestoreStatus {
            is_restore_in_progress: Some(false),
            restore_expiry_date: Some(stamp(until)),
        }),
    }
}

/// The days and tier a restore request asks for: its Days (required) and its
/// Tier (or its GlacierJobParameters' tier; Standard when none). A SELECT
/// restore is not built.
fn asked(r: Option<RestoreRequest>) -> S3Result<(i64, Tier)> {
    let Some(r) = r else {
        return Err(s3_error!(
            MalformedXML,
            "RestoreObject needs a RestoreRequest"
        ));
    };
    if r.type_.is_some() || r.select_parameters.is_some() || r.output_location.is_some() {
        return Err(s3_error!(
            NotImplemented,
            "a restore with a SELECT is not built"
        ));
    }
    let Some(days) = r.days else {
        return Err(s3_error!(MalformedXML, "a restore must give its Days"));
    };
    let tier = r.tier.or(r.glacier_job_parameters.map(|g| g.tier));
    let tier = Tier::named(tier.as_ref().map(|t| t.as_str())).map_err(|e| s3(e.into()))?;
    Ok((i64::from(days), tier))
}

/// RestoreObject: 202 when a restore starts, 409 while one runs, 200 when the
/// object is restored already (its copy kept the days asked from now).
pub(crate) async fn restore_object(
    shared: &Arc<Shared>,
    i: RestoreObjectInput,
) -> S3Result<S3Response<RestoreObjectOutput>> {
    let (days, tier) = asked(i.restore_request)?;
    let settings = shared.restores;
    let (bucket, key) = (i.bucket, i.key);
    let done = run(shared, move |c, s| {
        restores::ask(c, s, (&bucket, key.as_bytes()), (days, tier), &settings)
    })
    .await?;
    match done {
        Asked::Started => {
            let mut r = S3Response::new(RestoreObjectOutput::default());
            let accepted = http::HeaderValue::from_static("202");
            r.headers.insert(crate::shared::STATUS_MARK, accepted);
            Ok(r)
        }
        Asked::Running => Err(s3_error!(
            RestoreAlreadyInProgress,
            "a restore of the object runs already"
        )),
        Asked::Kept(_) => Ok(S3Response::new(RestoreObjectOutput::default())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_restore_header_has_two_forms() {
        assert_eq!(restore_header(State::None), None);
        assert_eq!(
            restore_header(State::Ongoing).as_deref(),
            Some("ongoing-request=\"true\"")
        );
        // 2027-01-01 00:00:00 UTC.
        let t = 1_798_761_600 * 1_000_000_000;
        assert_eq!(
            restore_header(State::Restored(t)).as_deref(),
            Some("ongoing-request=\"false\", expiry-date=\"Fri, 01 Jan 2027 00:00:00 GMT\"")
        );
    }
}
