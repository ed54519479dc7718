//! A request as the routes see it, and their answer. The request is read from
//! hyper's parts under the server's limits: its method, path, query
//! (percent-decoded), token, and its body read whole (at most `max_body_bytes`)
//! for the routes that take one. Bodies are framed as HTTP says
//! (`Content-Length` or chunked); hyper reads the framing. An answer is a status,
//! a content type and a body: a JSON document, or a refusal of one line
//! ([`Answer::error`]); [`failed`] turns an error of the operations into its
//! status.

use std::io::{self, Read};
use std::net::SocketAddr;
use std::time::Duration;
use tapeloom_engine::{Error, JobError};
use tapeloom_ops::OpsError;
use tapeloom_proto::frame::percent_decode;

/// What bounds the server's connections and requests, so no client can hold its
/// resources.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections open at once, whatever they carry; more are closed at once.
    pub max_connections: usize,
    /// Control requests (everything but a stream's blocks, a restore's answer and
    /// a base's tree) served at once; more are answered 503.
    pub max_requests: usize,
    /// Bulk requests (a stream's blocks, a restore's answer, a base's tree)
    /// served at once; more are answered 503.
    pub max_streams: usize,
    /// Bytes of a request's line and headers (431 beyond).
    pub max_header_bytes: usize,
    /// Bytes of a request's body (413 beyond).
    pub max_body_bytes: u64,
    /// Time a connection has for its TLS handshake and for a request's head, that
    /// a body may go without a byte, and that a client may leave the answer
    /// unread; a client that stalls longer is dropped.
    pub timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 4096,
            max_requests: 64,
            max_streams: 1024,
            max_header_bytes: 16 * 1024,
            max_body_bytes: 1 << 20,
            timeout: Duration::from_secs(30),
        }
    }
}

/// Headers a request may have.
pub const MAX_HEADERS: usize = 64;

/// How long a request waits for a place in the queue or for its job's end before
/// the server answers `202`, and the client asks again.
pub const LONG_POLL: Duration = Duration::from_secs(20);

/// Why a request could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The connection ended, failed or stalled before a whole request came.
    #[error("connection: {0}")]
    Io(#[from] io::Error),
    /// A request no client of tapeloom's sends.
    #[error("malformed request: {0}")]
    Malformed(String),
    /// The body is larger than allowed.
    #[error("request body too large")]
    BodyTooLarge,
    /// A body of frames could not be read.
    #[error(transparent)]
    Frames(#[from] tapeloom_proto::frame::FrameError),
}

impl HttpError {
    /// The status to answer with; none when the connection is only closed.
    pub fn status(&self) -> Option<u16> {
        match self {
            HttpError::Io(_) => None,
            HttpError::Malformed(_) => Some(400),
            HttpError::BodyTooLarge => Some(413),
            HttpError::Frames(e) => e.status(),
        }
    }
}

fn malformed(why: impl Into<String>) -> HttpError {
    HttpError::Malformed(why.into())
}

/// A request as read.
#[derive(Debug)]
pub struct Request {
    /// `GET`, ...
    pub method: String,
    /// The path, without its query.
    pub path: String,
    /// The query's parameters, percent-decoded.
    pub query: Vec<(String, Vec<u8>)>,
    /// The value of `Authorization`, when given.
    pub authorization: Option<Vec<u8>>,
    /// The `Content-Length` the client gave; none for a chunked body.
    pub length: Option<u64>,
    /// The body, once read.
    pub body: Vec<u8>,
}

impl Request {
    /// The request of `parts`, its body not yet read.
    pub fn of(parts: &http::request::Parts) -> Result<Request, HttpError> {
        let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        if !target.starts_with('/') {
            return Err(malformed("the target must be an absolute path"));
        }
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let length = match parts.headers.get(http::header::CONTENT_LENGTH) {
            None => None,
            Some(v) => Some(
                (v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .ok_or_else(|| malformed("bad Content-Length"))?,
            ),
        };
        Ok(Request {
            method: parts.method.as_str().to_string(),
            path: path.to_string(),
            query: parse_query(query)?,
            authorization: (parts.headers.get(http::header::AUTHORIZATION))
                .map(|v| v.as_bytes().to_vec()),
            length,
            body: Vec::new(),
        })
    }

    /// The first value of query parameter `name`.
    pub fn param(&self, name: &str) -> Option<&[u8]> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_slice())
    }
}

/// An answer to write.
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// Its content type.
    pub content_type: &'static str,
    /// Its body.
    pub body: Vec<u8>,
}

const JSON: &str = "application/json";

impl Answer {
    /// A JSON document.
    pub fn json(doc: &impl serde::Serialize) -> Answer {
        match serde_json::to_vec(doc) {
            Ok(body) => Answer {
                status: 200,
                content_type: JSON,
                body,
            },
            Err(e) => Answer::error(500, &format!("encode the answer: {e}")),
        }
    }

    /// A JSON document already encoded.
    pub fn raw_json(body: Vec<u8>) -> Answer {
        Answer {
            status: 200,
            content_type: JSON,
            body,
        }
    }

    /// A refusal: `{"error": "..."}` with the reason on one line.
    pub fn error(status: u16, why: &str) -> Answer {
        #[derive(serde::Serialize)]
        struct Body {
            error: String,
        }
        let doc = Body {
            error: why.replace(['\n', '\r'], " "),
        };
        Answer {
            status,
            content_type: JSON,
            body: serde_json::to_vec(&doc).unwrap_or_default(),
        }
    }
}

/// An error met while answering: a job or path that is not there is 404; anything
/// else is the server's own failure (500), logged.
pub fn failed(e: &OpsError, req: &Request, peer: SocketAddr) -> Answer {
    match e.engine() {
        Some(Error::Job(JobError::NoJob(_) | JobError::NoPath { .. })) => {
            Answer::error(404, &e.to_string())
        }
        _ => {
            tracing::error!(peer = %peer, "{} {}: {e}", req.method, req.path);
            Answer::error(500, &e.to_string())
        }
    }
}

/// Reads a body to its end from `r`, at most `max` bytes; `length` is the
/// `Content-Length` the client gave, refused at once when larger.
pub fn read_body(r: &mut impl Read, max: u64, length: Option<u64>) -> Result<Vec<u8>, HttpError> {
    if length.is_some_and(|l| l > max) {
        return Err(HttpError::BodyTooLarge);
    }
    let mut body = Vec::with_capacity(length.unwrap_or(0) as usize);
    let got = r.take(max.saturating_add(1)).read_to_end(&mut body)?;
    if got as u64 > max {
        return Err(HttpError::BodyTooLarge);
    }
    Ok(body)
}

fn parse_query(q: &str) -> Result<Vec<(String, Vec<u8>)>, HttpError> {
    let mut out = Vec::new();
    for pair in q.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let bad = || malformed("bad percent escape");
        let k = String::from_utf8(percent_decode(k).ok_or_else(bad)?)
            .map_err(|_| malformed("a query key that is not UTF-8"))?;
        out.push((k, percent_decode(v).ok_or_else(bad)?));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(target: &str, headers: &[(&str, &str)]) -> Result<Request, HttpError> {
        let mut b = http::Request::builder().uri(target);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        let (parts, ()) = b.body(()).unwrap().into_parts();
        Request::of(&parts)
    }

    #[test]
    fn a_request_is_read_with_its_query_and_token() {
        let r = request(
            "/api/jobs/3/files?path=a%20b/c&x",
            &[("Authorization", "Bearer t"), ("Content-Length", "4")],
        )
        .unwrap();
        assert_eq!(r.path, "/api/jobs/3/files");
        assert_eq!(r.param("path"), Some(&b"a b/c"[..]));
        assert_eq!(r.param("x"), Some(&b""[..]));
        assert_eq!(r.authorization.as_deref(), Some(&b"Bearer t"[..]));
        assert_eq!(r.length, Some(4));
    }

    #[test]
    fn faults_are_errors_with_their_status() {
        let status = |t: &str, h: &[(&str, &str)]| request(t, h).err().and_then(|e| e.status());
        assert_eq!(status("/?p=%zz", &[]), Some(400));
        assert_eq!(status("/", &[("Content-Length", "x")]), Some(400));
        let body = |b: &[u8], max, length| read_body(&mut &b[..], max, length);
        assert!(matches!(
            body(b"abcde", 4, None),
            Err(HttpError::BodyTooLarge)
        ));
        assert!(matches!(
            body(b"", 4, Some(5)),
            Err(HttpError::BodyTooLarge)
        ));
        assert_eq!(body(b"abcd", 4, None).unwrap(), b"abcd");
    }
}
