//! HTTP/1.1, as much as the server needs: one request per connection, read under
//! the limits (line and headers, body, time), answered with `Connection: close`.
//! Nothing a client sends can panic the server: every fault is an [`HttpError`].

use std::io::{self, Read, Write};
use std::time::Duration;
use tapeloom_proto::frame::percent_decode;

/// Headers a request may have.
const MAX_HEADERS: usize = 64;

/// What bounds each connection, so no client can hold the server's resources.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections served at once; more are closed at once.
    pub max_connections: usize,
    /// Bytes of a request's line and headers (431 beyond).
    pub max_header_bytes: usize,
    /// Bytes of a request's body (413 beyond).
    pub max_body_bytes: u64,
    /// Time a connection has for its TLS handshake and request, and for each write
    /// of its answer; a client that stalls longer is dropped.
    pub timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 64,
            max_header_bytes: 16 * 1024,
            max_body_bytes: 1 << 20,
            timeout: Duration::from_secs(30),
        }
    }
}

/// Why a request could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The connection ended, failed or stalled before a whole request came.
    #[error("connection: {0}")]
    Io(#[from] io::Error),
    /// Not an HTTP/1.x request.
    #[error("malformed request: {0}")]
    Malformed(String),
    /// The request line and headers are larger than allowed, or too many.
    #[error("request headers too large")]
    HeadersTooLarge,
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
            HttpError::HeadersTooLarge => Some(431),
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
    /// The body.
    pub body: Vec<u8>,
}

impl Request {
    /// The first value of query parameter `name`.
    pub fn param(&self, name: &str) -> Option<&[u8]> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_slice())
    }
}

/// Reads one request from `r` (whose reads end by the connection's deadline),
/// with its `Content-Length` body.
#[cfg(test)]
pub fn read_request(r: &mut impl Read, limits: &Limits) -> Result<Request, HttpError> {
    let (mut req, length, rest) = read_head(r, limits)?;
    req.body = read_body(r, limits, length, rest)?;
    Ok(req)
}

/// Reads a body of `length` bytes (at most `max_body_bytes`), `body` the bytes
/// already read past the head.
pub fn read_body(
    r: &mut impl Read,
    limits: &Limits,
    length: u64,
    mut body: Vec<u8>,
) -> Result<Vec<u8>, HttpError> {
    if length > limits.max_body_bytes {
        return Err(HttpError::BodyTooLarge);
    }
    let length = usize::try_from(length).map_err(|_| HttpError::BodyTooLarge)?;
    body.truncate(length);
    while body.len() < length {
        let room = (length - body.len()).min(64 * 1024);
        if read_some(r, &mut body, room)? == 0 {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
        }
    }
    Ok(body)
}

/// Reads a request's line and headers: the request (without its body), the
/// `Content-Length` it gives (0 without one), and the bytes read past the head.
pub fn read_head(r: &mut impl Read, limits: &Limits) -> Result<(Request, u64, Vec<u8>), HttpError> {
    let mut buf = Vec::with_capacity(1024);
    let end = loop {
        if let Some(i) = find_end(&buf) {
            break i;
        }
        if buf.len() >= limits.max_header_bytes {
            return Err(HttpError::HeadersTooLarge);
        }
        let room = (limits.max_header_bytes - buf.len()).min(4096);
        if read_some(r, &mut buf, room)? == 0 {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
        }
    };
    if end > limits.max_header_bytes {
        return Err(HttpError::HeadersTooLarge);
    }
    let (req, length) = parse_head(&buf[..end])?;
    let rest = buf.split_off(end);
    Ok((req, length, rest))
}

/// Appends at most `room` bytes read from `r` to `buf`; how many.
fn read_some(r: &mut impl Read, buf: &mut Vec<u8>, room: usize) -> io::Result<usize> {
    let at = buf.len();
    buf.resize(at + room, 0);
    let n = loop {
        match r.read(&mut buf[at..]) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => break other,
        }
    };
    buf.truncate(at + *n.as_ref().unwrap_or(&0));
    n
}

/// Where the head ends (after its blank line), once it has.
fn find_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// The request line and headers; the body's length.
fn parse_head(head: &[u8]) -> Result<(Request, u64), HttpError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut p = httparse::Request::new(&mut headers);
    match p.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err(malformed("incomplete head")),
        Err(httparse::Error::TooManyHeaders) => return Err(HttpError::HeadersTooLarge),
        Err(e) => return Err(malformed(e.to_string())),
    }
    let (Some(method), Some(target)) = (p.method, p.path) else {
        return Err(malformed("no request line"));
    };
    if !target.is_ascii() || !target.starts_with('/') {
        return Err(malformed("the target must be an absolute path"));
    }
    let mut length = None;
    let mut authorization = None;
    for h in p.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let n = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or_else(|| malformed("bad Content-Length"))?;
            if length.is_some_and(|l| l != n) {
                return Err(malformed("two Content-Lengths"));
            }
            length = Some(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(malformed("Transfer-Encoding is not accepted"));
        } else if h.name.eq_ignore_ascii_case("authorization") {
            authorization = Some(h.value.to_vec());
        }
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let req = Request {
        method: method.to_string(),
        path: path.to_string(),
        query: parse_query(query)?,
        authorization,
        body: Vec::new(),
    };
    Ok((req, length.unwrap_or(0)))
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

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        202 => "Accepted",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Internal Server Error",
    }
}

/// Writes a whole answer; the connection is closed after it.
pub fn write_response(
    w: &mut impl Write,
    status: u16,
    content_type: &str,
    body: &[u8],
) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Connection: close\r\nCache-Control: no-store\r\n\r\n",
        reason(status),
        body.len()
    );
    w.write_all(head.as_bytes())?;
    w.write_all(body)?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(bytes: &[u8], limits: &Limits) -> Result<Request, HttpError> {
        read_request(&mut &bytes[..], limits)
    }

    #[test]
    fn a_request_is_read_with_its_query_and_token() {
        let r = read(
            b"GET /api/jobs/3/files?path=a%20b/c&x HTTP/1.1\r\nAuthorization: Bearer t\r\n\r\n",
            &Limits::default(),
        )
        .unwrap();
        assert_eq!(
            (r.method.as_str(), r.path.as_str()),
            ("GET", "/api/jobs/3/files")
        );
        assert_eq!(r.param("path"), Some(&b"a b/c"[..]));
        assert_eq!(r.param("x"), Some(&b""[..]));
        assert_eq!(r.authorization.as_deref(), Some(&b"Bearer t"[..]));
    }

    #[test]
    fn faults_are_errors_with_their_status() {
        let l = Limits {
            max_header_bytes: 128,
            max_body_bytes: 4,
            ..Limits::default()
        };
        let status = |b: &[u8]| read(b, &l).err().and_then(|e| e.status());
        assert_eq!(status(b"\x00\x01\r\n\r\n"), Some(400));
        assert_eq!(
            status(b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n"),
            Some(400)
        );
        assert_eq!(
            status(b"GET / HTTP/1.1\r\nContent-Length: 5\r\n\r\n"),
            Some(413)
        );
        assert_eq!(status(&[b'a'; 300]), Some(431));
        assert_eq!(status(b"GET /?p=%zz HTTP/1.1\r\n\r\n"), Some(400));
        assert_eq!(status(b"GET / HTTP/1.1\r\nHost"), None);
        let many = format!("GET / HTTP/1.1\r\n{}\r\n", "a:b\r\n".repeat(70));
        let wide = Limits {
            max_header_bytes: 4096,
            ..l
        };
        let e = read(many.as_bytes(), &wide).unwrap_err();
        assert_eq!(e.status(), Some(431));
    }

    proptest::proptest! {
        /// Any bytes from a client are a request or an error, never a panic.
        #[test]
        fn any_bytes_are_read_without_panic(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..600),
        ) {
            let l = Limits { max_header_bytes: 256, max_body_bytes: 16, ..Limits::default() };
            let _ = read(&bytes, &l);
        }

        /// A valid head with random bytes in its target, headers and body.
        #[test]
        fn mutated_requests_are_read_without_panic(
            target in "[ -~]{0,40}",
            name in "[!-~]{0,12}",
            value in proptest::collection::vec(proptest::num::u8::ANY, 0..40),
            body in proptest::collection::vec(proptest::num::u8::ANY, 0..40),
        ) {
            let mut req = format!("GET {target} HTTP/1.1\r\n{name}: ").into_bytes();
            req.extend_from_slice(&value);
            req.extend_from_slice(b"\r\nContent-Length: 8\r\n\r\n");
            req.extend_from_slice(&body);
            let _ = read(&req, &Limits::default());
        }
    }
}
