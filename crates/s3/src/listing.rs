//! ListObjectsV2 and ListObjects (v1): a page of a bucket's keys, rolled up at
//! the delimiter. A V2 continuation token is the last key or prefix of the page
//! before, in hex; with `encoding-type=url` keys and prefixes are sent
//! percent-encoded, as S3 sends them.

use crate::restore::restore_status;
use crate::shared::{run, stamp, Shared};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use s3s::dto::*;
use s3s::{s3_error, S3Response, S3Result};
use std::sync::Arc;
use tapeloom_ops::s3::objects::{self, Ask, Listing};

/// Every byte but the unreserved ones and `/` is escaped.
const KEY: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'/');

/// A key or prefix as the listing sends it.
fn shown(k: &[u8], url: bool) -> String {
    let s = String::from_utf8_lossy(k);
    match url {
        true => utf8_percent_encode(&s, KEY).to_string(),
        false => s.into_owned(),
    }
}

fn max_keys(asked: Option<i32>) -> usize {
    asked.map_or(1000, |m| m.clamp(0, 1000) as usize)
}

async fn page(shared: &Arc<Shared>, bucket: String, ask: Ask) -> S3Result<Listing> {
    run(shared, move |c, _| objects::list(c, &bucket, &ask)).await
}

fn contents(l: &Listing, url: bool, status: bool) -> (Vec<Object>, Vec<CommonPrefix>) {
    let objects = (l.objects.iter())
        .map(|o| Object {
            restore_status: status.then(|| restore_status(o, l.now_ns)).flatten(),
            key: Some(shown(&o.key, url)),
            e_tag: Some(ETag::Strong(o.etag.clone())),
            last_modified: Some(stamp(o.created_ns)),
            size: Some(o.size as i64),
            storage_class: Some(ObjectStorageClass::from(o.class.clone())),
            owner: None,
            ..Default::default()
        })
        .collect();
    let prefixes = (l.prefixes.iter())
        .map(|p| CommonPrefix {
            prefix: Some(shown(p, url)),
        })
        .collect();
    (objects, prefixes)
}

/// Whether a listing asks for each object's RestoreStatus
/// (`x-amz-optional-object-attributes: RestoreStatus`): V2 and V1 alike, as
/// rclone asks it of V1.
fn with_status(asked: &Option<OptionalObjectAttributesList>) -> bool {
    (asked.iter().flatten()).any(|a| a.as_str() == OptionalObjectAttributes::RESTORE_STATUS)
}

fn is_url(e: &Option<EncodingType>) -> S3Result<bool> {
    match e.as_ref().map(EncodingType::as_str) {
        None => Ok(false),
        Some("url") => Ok(true),
        Some(other) => Err(s3_error!(
            InvalidArgument,
            "encoding-type {other} is not url"
        )),
    }
}

/// ListObjectsV2.
pub(crate) async fn v2(
    shared: &Arc<Shared>,
    i: ListObjectsV2Input,
) -> S3Result<S3Response<ListObjectsV2Output>> {
    let url = is_url(&i.encoding_type)?;
    let after = match &i.continuation_token {
        Some(t) => hex::decode(t)
            .map_err(|_| s3_error!(InvalidArgument, "the continuation token was not made here"))?,
        None => i.start_after.clone().unwrap_or_default().into_bytes(),
    };
    let ask = Ask {
        prefix: i.prefix.clone().unwrap_or_default().into_bytes(),
        delimiter: i.delimiter.clone().map(String::into_bytes),
        after,
        max: max_keys(i.max_keys),
    };
    let l = page(shared, i.bucket.clone(), ask).await?;
    let (objects, prefixes) = contents(&l, url, with_status(&i.optional_object_attributes));
    let next = (l.truncated)
        .then(|| l.last.as_deref().map(hex::encode))
        .flatten();
    Ok(S3Response::new(ListObjectsV2Output {
        name: Some(i.bucket),
        prefix: Some(shown(i.prefix.unwrap_or_default().as_bytes(), url)),
        delimiter: i.delimiter.map(|d| shown(d.as_bytes(), url)),
        max_keys: Some(max_keys(i.max_keys) as i32),
        key_count: Some((objects.len() + prefixes.len()) as i32),
        is_truncated: Some(l.truncated),
        continuation_token: i.continuation_token,
        next_continuation_token: next,
        start_after: i.start_after.map(|s| shown(s.as_bytes(), url)),
        encoding_type: i.encoding_type,
        contents: Some(objects),
        common_prefixes: Some(prefixes),
        ..Default::default()
    }))
}

/// ListObjects (v1): as V2, with a marker instead of a token; the next marker
/// is given only when a delimiter was, as S3 does. rclone lists with it for
/// providers it does not know, its `backend restore-status` included.
pub(crate) async fn v1(
    shared: &Arc<Shared>,
    i: ListObjectsInput,
) -> S3Result<S3Response<ListObjectsOutput>> {
    let url = is_url(&i.encoding_type)?;
    let ask = Ask {
        prefix: i.prefix.clone().unwrap_or_default().into_bytes(),
        delimiter: i.delimiter.clone().map(String::into_bytes),
        after: i.marker.clone().unwrap_or_default().into_bytes(),
        max: max_keys(i.max_keys),
    };
    let l = page(shared, i.bucket.clone(), ask).await?;
    let (objects, prefixes) = contents(&l, url, with_status(&i.optional_object_attributes));
    let next = (l.truncated && i.delimiter.is_some())
        .then(|| l.last.as_deref().map(|k| shown(k, url)))
        .flatten();
    Ok(S3Response::new(ListObjectsOutput {
        name: Some(i.bucket),
        prefix: Some(shown(i.prefix.unwrap_or_default().as_bytes(), url)),
        delimiter: i.delimiter.map(|d| shown(d.as_bytes(), url)),
        marker: Some(i.marker.unwrap_or_default()),
        max_keys: Some(max_keys(i.max_keys) as i32),
        is_truncated: Some(l.truncated),
        next_marker: next,
        encoding_type: i.encoding_type,
        contents: Some(objects),
        common_prefixes: Some(prefixes),
        ..Default::default()
    }))
}
