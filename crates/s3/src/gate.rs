//! What every S3 request passes before s3s reads it: the limits of its head,
//! its place in one of two budgets, and the counting of what it sends and is
//! sent.
//!
//! A request is classed from its head alone, before anything of it is read:
//! a request with a streaming body (PutObject, UploadPart, PostObject, and
//! GetObject, whose answer is the stream) is bulk, any other is control. Each class has its own budget of requests answered at once
//! ([`Limits`]), so that listings and HEADs answer however many uploads run.
//! A request over its budget is answered 503 SlowDown with `Retry-After: 1`
//! at once, and is never queued; a request over a limit of its head
//! (`tapeloom_ops::s3::limits`) is answered with S3's code for it. A bulk
//! request holds its place until its answer's body is sent, or its connection
//! is gone.
//!
//! What the server counts of S3 requests (by operation and status, the bytes
//! received and sent, the SlowDown answers) it is told through [`Watch`].
//! The operation's name is s3s's, which the access check records for the
//! request ([`Named`]); a request refused before s3s knew its operation is
//! named by its class (`PutObject`, `UploadPart`, `GetObject`), else
//! [`UNKNOWN`].

use bytes::Bytes;
use http::{HeaderMap, Method, Uri};
use http_body::{Body, Frame, SizeHint};
use s3s::{S3Error, S3ErrorCode};
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use tapeloom_ops::s3::limits;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The operation label of a control request refused before s3s named it.
pub const UNKNOWN: &str = "unknown";

/// The two budgets of requests answered at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// Requests without a streaming body.
    Control,
    /// Requests with a streaming body: PutObject, UploadPart, GetObject.
    Bulk,
}

impl Budget {
    /// Its name, as a label.
    pub fn name(self) -> &'static str {
        match self {
            Budget::Control => "control",
            Budget::Bulk => "bulk",
        }
    }
}

/// How many requests of each budget are answered at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Control requests at once.
    pub max_requests: usize,
    /// Bulk requests at once.
    pub max_streams: usize,
}

impl Default for Limits {
    /// 128 control requests and 64 bulk ones. A bulk request holds a data file
    /// and a share of the S3 stage's disk for as long as its body takes: 64
    /// keep the disk busy for a dozen clients at their usual concurrency
    /// (aws-cli runs 10 transfers, restic 5, rclone 4) without thousands of
    /// half-written files. A control request is a short catalog look-up, and
    /// its own places keep listings and HEADs answering while uploads fill
    /// theirs.
    fn default() -> Limits {
        Limits {
            max_requests: 128,
            max_streams: 64,
        }
    }
}

/// What the server is told of S3 requests as they are answered.
pub trait Watch: Send + Sync + 'static {
    /// A request of `operation` (s3s's name of it, or its class's) was
    /// answered `status`.
    fn answered(&self, operation: &str, status: u16);
    /// `bytes` of a request's body came in.
    fn received(&self, bytes: u64);
    /// `bytes` of an answer's body went out.
    fn sent(&self, bytes: u64);
    /// A request over `budget` was answered 503 SlowDown.
    fn slowed_down(&self, budget: Budget);
}

/// A [`Watch`] that is told nothing, for a front end without metrics.
pub struct Unwatched;

impl Watch for Unwatched {
    fn answered(&self, _: &str, _: u16) {}
    fn received(&self, _: u64) {}
    fn sent(&self, _: u64) {}
    fn slowed_down(&self, _: Budget) {}
}

/// Where the access check records the name s3s gave a request's operation
/// (in the request's extensions).
#[derive(Clone, Default)]
pub(crate) struct Named(pub(crate) Arc<OnceLock<String>>);

/// A request's class, from its head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Class {
    /// Its operation where the class knows it, else [`UNKNOWN`].
    pub name: &'static str,
    /// Its budget.
    pub budget: Budget,
    /// Whether its body is an object's data.
    pub upload: bool,
}

/// Query parameters that are not subresources: a presigned URL's, a GET's
/// answer headers, a version, the SDKs' `x-id`, and a part's.
fn plain_param(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.starts_with("x-amz-")
        || lower.starts_with("response-")
        || [
            "awsaccesskeyid",
            "signature",
            "expires",
            "versionid",
            "x-id",
        ]
        .contains(&lower.as_str())
}

/// The class of a request of `method` on `uri` with `headers`, served with
/// virtual-hosted addressing under `domain` when it is given.
pub(crate) fn classify(
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    domain: Option<&str>,
) -> Class {
    let control = Class {
        name: UNKNOWN,
        budget: Budget::Control,
        upload: false,
    };
    let host = (headers.get(http::header::HOST))
        .and_then(|h| h.to_str().ok())
        .or_else(|| uri.host())
        .map(|h| h.rsplit_once(':').map_or(h, |(name, _)| name));
    let virtual_hosted = match (domain, host) {
        (Some(d), Some(h)) => {
            h.len() > d.len() + 1 && h.ends_with(d) && h[..h.len() - d.len()].ends_with('.')
        }
        _ => false,
    };
    let path = uri.path().trim_start_matches('/');
    let has_key = match virtual_hosted {
        true => !path.is_empty(),
        false => path.split_once('/').is_some_and(|(_, key)| !key.is_empty()),
    };
    let form = (headers.get(http::header::CONTENT_TYPE))
        .is_some_and(|v| v.as_bytes().starts_with(b"multipart/form-data"));
    if *method == Method::POST && !has_key && form {
        // A browser's upload through an HTML form (PostObject).
        return Class {
            name: "PostObject",
            budget: Budget::Bulk,
            upload: true,
        };
    }
    if !has_key {
        return control;
    }
    let params: Vec<&str> = (uri.query().unwrap_or("").split('&'))
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').map_or(p, |(name, _)| name))
        .collect();
    let has = |name: &str| params.contains(&name);
    let subresource =
        (params.iter()).any(|p| !plain_param(p) && !["partNumber", "uploadId"].contains(p));
    let copy = headers.contains_key("x-amz-copy-source");
    if subresource || copy {
        return control;
    }
    let bulk = |name| Class {
        name,
        budget: Budget::Bulk,
        upload: *method == Method::PUT,
    };
    match *method {
        Method::PUT if has("uploadId") && has("partNumber") => bulk("UploadPart"),
        Method::PUT if !has("uploadId") && !has("partNumber") => bulk("PutObject"),
        Method::GET if !has("uploadId") => bulk("GetObject"),
        _ => control,
    }
}

/// What the limits look at in a request's head.
pub(crate) fn head(headers: &HeaderMap, upload: bool) -> limits::Head {
    let mut header_bytes = 0;
    let mut metadata_bytes = 0;
    for (name, value) in headers {
        // "Name: value\r\n"
        header_bytes += name.as_str().len() + value.len() + 4;
        if let Some(key) = name.as_str().strip_prefix("x-amz-meta-") {
            metadata_bytes += key.len() + value.len();
        }
    }
    let number = |n: &str| {
        (headers.get(n))
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    limits::Head {
        upload,
        header_bytes,
        metadata_bytes,
        length: number("x-amz-decoded-content-length")
            .or_else(|| number(http::header::CONTENT_LENGTH.as_str())),
    }
}

/// The two budgets, and what classes a request.
pub(crate) struct Gate {
    control: Arc<Semaphore>,
    bulk: Arc<Semaphore>,
    domain: Option<String>,
}

/// A request let through: its class and its place in its budget.
pub(crate) struct Admitted {
    pub class: Class,
    pub place: OwnedSemaphorePermit,
}

/// A request refused at the gate: its class, S3's code and the message.
pub(crate) struct Refusal {
    pub class: Class,
    pub code: S3ErrorCode,
    pub message: String,
}

impl Gate {
    /// The gate of `limits`, for requests addressed under `domain` too.
    pub(crate) fn new(limits: Limits, domain: Option<String>) -> Gate {
        Gate {
            control: Arc::new(Semaphore::new(limits.max_requests)),
            bulk: Arc::new(Semaphore::new(limits.max_streams)),
            domain,
        }
    }

    /// A place in `budget`, if one is free.
    fn take(&self, budget: Budget) -> Option<OwnedSemaphorePermit> {
        let s = match budget {
            Budget::Control => &self.control,
            Budget::Bulk => &self.bulk,
        };
        s.clone().try_acquire_owned().ok()
    }

    /// Lets a request of `method` on `uri` with `headers` through, or refuses
    /// it: over a limit of its head, or over its budget (SlowDown).
    pub(crate) fn admit(
        &self,
        method: &Method,
        uri: &Uri,
        headers: &HeaderMap,
    ) -> Result<Admitted, Refusal> {
        let class = classify(method, uri, headers, self.domain.as_deref());
        if let Err(r) = limits::check(&head(headers, class.upload)) {
            return Err(Refusal {
                class,
                code: S3ErrorCode::from_bytes(r.code().as_bytes())
                    .unwrap_or(S3ErrorCode::InvalidRequest),
                message: r.to_string(),
            });
        }
        match self.take(class.budget) {
            Some(place) => Ok(Admitted { class, place }),
            None => Err(Refusal {
                class,
                code: S3ErrorCode::SlowDown,
                message: format!(
                    "the server answers as many {} requests as it may at once: try again in a second",
                    class.budget.name()
                ),
            }),
        }
    }
}

/// S3's answer for a request refused with `code` and `message`, before s3s
/// saw it; a SlowDown carries `Retry-After: 1`.
pub(crate) fn refusal(code: S3ErrorCode, message: &str) -> s3s::HttpResponse {
    let slow = code == S3ErrorCode::SlowDown;
    let mut r = S3Error::with_message(code, message.to_string())
        .to_http_response()
        .unwrap_or_else(|_| {
            let mut r = http::Response::new(s3s::Body::empty());
            *r.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
            r
        });
    if slow {
        let one = http::HeaderValue::from_static("1");
        r.headers_mut().insert(http::header::RETRY_AFTER, one);
    }
    r
}

/// The bytes of a refused request's body read and dropped, at most: reading
/// them lets the connection close without a reset that could lose the answer.
const DRAIN_BYTES: u64 = 1 << 20;

/// Reads and drops what `body` sends, up to [`DRAIN_BYTES`] or a second.
pub(crate) fn drain(body: hyper::body::Incoming) {
    tokio::spawn(async move {
        let mut body = body;
        let until = tokio::time::Instant::now() + std::time::Duration::from_secs(1);
        let mut read = 0u64;
        while read < DRAIN_BYTES {
            let frame = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx));
            match tokio::time::timeout_at(until, frame).await {
                Ok(Some(Ok(f))) => read += f.data_ref().map_or(0, |d| d.len() as u64),
                _ => return,
            }
        }
    });
}

/// A body whose data is counted as it passes: a request's as received, an
/// answer's as sent. An answer's body holds its request's place in its budget
/// until it is dropped.
pub(crate) struct Counted<B> {
    inner: B,
    watch: Arc<dyn Watch>,
    sending: bool,
    _place: Option<OwnedSemaphorePermit>,
}

impl<B> Counted<B> {
    /// A request's body.
    pub(crate) fn received(inner: B, watch: Arc<dyn Watch>) -> Counted<B> {
        Counted {
            inner,
            watch,
            sending: false,
            _place: None,
        }
    }

    /// An answer's body, holding `place`.
    pub(crate) fn sent(inner: B, watch: Arc<dyn Watch>, place: OwnedSemaphorePermit) -> Counted<B> {
        Counted {
            inner,
            watch,
            sending: true,
            _place: Some(place),
        }
    }
}

impl<B> Body for Counted<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled {
            if let Some(data) = frame.data_ref() {
                let n = data.len() as u64;
                match self.sending {
                    true => self.watch.sent(n),
                    false => self.watch.received(n),
                }
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(method: Method, uri: &str, headers: &[(&str, &str)], domain: Option<&str>) -> Class {
        let uri: Uri = uri.parse().unwrap();
        let mut h = HeaderMap::new();
        for (n, v) in headers {
            h.insert(
                http::HeaderName::from_bytes(n.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        classify(&method, &uri, &h, domain)
    }

    #[test]
    fn uploads_and_downloads_are_bulk_and_everything_else_control() {
        let name = |c: Class| (c.name, c.budget, c.upload);
        let put = class(Method::PUT, "/b/k", &[], None);
        assert_eq!(name(put), ("PutObject", Budget::Bulk, true));
        let presigned = "/b/a/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=f&x-id=PutObject";
        assert_eq!(class(Method::PUT, presigned, &[], None).name, "PutObject");
        let part = class(Method::PUT, "/b/k?partNumber=2&uploadId=u", &[], None);
        assert_eq!(name(part), ("UploadPart", Budget::Bulk, true));
        let get = class(Method::GET, "/b/k?response-content-type=x", &[], None);
        assert_eq!(name(get), ("GetObject", Budget::Bulk, false));
        for (m, uri) in [
            (Method::PUT, "/b"),
            (Method::PUT, "/b/"),
            (Method::GET, "/b?list-type=2"),
            (Method::GET, "/"),
            (Method::GET, "/b/k?uploadId=u"),
            (Method::HEAD, "/b/k"),
            (Method::POST, "/b?delete"),
            (Method::POST, "/b/k?restore"),
            (Method::POST, "/b/k?uploadId=u"),
            (Method::PUT, "/b/k?tagging"),
            (Method::DELETE, "/b/k"),
        ] {
            let c = class(m.clone(), uri, &[], None);
            assert_eq!(name(c), (UNKNOWN, Budget::Control, false), "{m} {uri}");
        }
        let form = [("content-type", "multipart/form-data; boundary=x")];
        let post = class(Method::POST, "/b", &form, None);
        assert_eq!(name(post), ("PostObject", Budget::Bulk, true));
        let copy = class(Method::PUT, "/b/k", &[("x-amz-copy-source", "/b/j")], None);
        assert_eq!(copy.budget, Budget::Control);
        // Virtual-hosted: the bucket is in the host, the key is the path.
        let vh = |uri| {
            class(
                Method::PUT,
                uri,
                &[("host", "b.s3.example:9000")],
                Some("s3.example"),
            )
        };
        assert_eq!(vh("/k").budget, Budget::Bulk);
        assert_eq!(vh("/").budget, Budget::Control);
        // A host that is the domain itself addresses path-style.
        let ps = class(
            Method::PUT,
            "/b",
            &[("host", "s3.example")],
            Some("s3.example"),
        );
        assert_eq!(ps.budget, Budget::Control);
    }

    #[test]
    fn the_head_gives_the_limits_its_sizes() {
        let mut h = HeaderMap::new();
        h.insert("x-amz-meta-colour", "blue".parse().unwrap());
        h.insert(http::header::CONTENT_LENGTH, "100".parse().unwrap());
        let got = head(&h, true);
        assert_eq!(got.metadata_bytes, "colour".len() + "blue".len());
        assert_eq!(
            got.header_bytes,
            "x-amz-meta-colour".len() + 4 + 4 + "content-length".len() + 3 + 4
        );
        assert_eq!(got.length, Some(100));
        // An aws-chunked body's length is its decoded one.
        h.insert("x-amz-decoded-content-length", "60".parse().unwrap());
        assert_eq!(head(&h, true).length, Some(60));
    }

    fn ask(
        gate: &Gate,
        method: Method,
        uri: &str,
        headers: &[(&str, &str)],
    ) -> Result<Admitted, Refusal> {
        let uri: Uri = uri.parse().unwrap();
        let mut h = HeaderMap::new();
        for (n, v) in headers {
            h.insert(
                http::HeaderName::from_bytes(n.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        gate.admit(&method, &uri, &h)
    }

    #[tokio::test]
    async fn a_budget_gives_its_places_and_answers_slow_down_past_them() {
        let gate = Gate::new(
            Limits {
                max_requests: 1,
                max_streams: 2,
            },
            None,
        );
        let put = |k: &str| {
            ask(
                &gate,
                Method::PUT,
                &format!("/b/{k}"),
                &[("content-length", "10")],
            )
        };
        let (one, two) = (put("a").ok().unwrap(), put("b").ok().unwrap());
        assert_eq!(one.class.name, "PutObject");
        let Err(over) = put("c") else {
            panic!("a third upload was let through a budget of two")
        };
        assert_eq!(
            (over.code.clone(), over.class.budget),
            (S3ErrorCode::SlowDown, Budget::Bulk)
        );
        let r = refusal(over.code, &over.message);
        assert_eq!(r.status(), http::StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(r.headers()[http::header::RETRY_AFTER], "1");
        // The control budget is its own: a listing answers while uploads fill theirs.
        let list = ask(&gate, Method::GET, "/b?list-type=2", &[]).ok().unwrap();
        assert_eq!(list.class.budget, Budget::Control);
        let Err(busy) = ask(&gate, Method::GET, "/b?list-type=2", &[]) else {
            panic!("a second listing was let through a budget of one")
        };
        assert_eq!(busy.class.budget, Budget::Control);
        // A place comes back when its request ends.
        drop(two);
        assert!(put("d").is_ok());
        drop((one, list));
    }

    #[tokio::test]
    async fn a_head_over_a_limit_is_refused_before_its_budget_with_s3s_code() {
        let gate = Gate::new(
            Limits {
                max_requests: 1,
                max_streams: 1,
            },
            None,
        );
        let big = (limits::MAX_OBJECT_BYTES + 1).to_string();
        let Err(r) = ask(&gate, Method::PUT, "/b/k", &[("content-length", &big)]) else {
            panic!("an upload over 5 GiB was let through")
        };
        assert_eq!(r.code, S3ErrorCode::EntityTooLarge);
        let xml = (limits::MAX_XML_BYTES + 1).to_string();
        let Err(r) = ask(
            &gate,
            Method::POST,
            "/b?delete",
            &[("content-length", &xml)],
        ) else {
            panic!("a DeleteObjects over the XML limit was let through")
        };
        assert_eq!(r.code, S3ErrorCode::MaxMessageLengthExceeded);
        let meta = "m".repeat(limits::MAX_METADATA_BYTES);
        let Err(r) = ask(&gate, Method::PUT, "/b/k", &[("x-amz-meta-a", &meta)]) else {
            panic!("metadata over 2 KiB was let through")
        };
        assert_eq!(r.code, S3ErrorCode::MetadataTooLarge);
        assert_eq!(
            refusal(r.code, &r.message).status(),
            http::StatusCode::BAD_REQUEST
        );
        // The refusals took no place: both budgets still have theirs.
        assert!(ask(&gate, Method::PUT, "/b/k", &[]).is_ok());
        assert!(ask(&gate, Method::HEAD, "/b/k", &[]).is_ok());
    }

    #[test]
    fn a_slow_down_is_s3s_503_with_retry_after_and_its_xml() {
        let r = refusal(S3ErrorCode::SlowDown, "the server is busy");
        assert_eq!(r.status(), http::StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(r.headers()[http::header::RETRY_AFTER], "1");
        let body = r.into_body().bytes().unwrap();
        let text = String::from_utf8_lossy(&body);
        assert!(text.contains("<Code>SlowDown</Code>"), "{text}");
        assert!(
            text.contains("<Message>the server is busy</Message>"),
            "{text}"
        );
        let r = refusal(S3ErrorCode::EntityTooLarge, "too large");
        assert_eq!(r.status(), http::StatusCode::BAD_REQUEST);
        assert!(!r.headers().contains_key(http::header::RETRY_AFTER));
    }
}
