//! HTTP/1.1, as much as the server needs: one request per connection, read under
//! the limits (line and headers, body, time), answered with `Connection: close`.
//! Nothing a client sends can panic the server: every fault is an [`HttpError`].

use std::io::{self, Read, Write};
use std::time::Duration;

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
    /// A frame of a framed body is longer than the job's blocks.
    #[error("a frame of {0} bytes, longer than any block of the job")]
    FrameTooLarge(u32),
}

impl HttpError {
    /// The status to answer with; none when the connection is only closed.
    pub fn status(&self) -> Option<u16> {
        match self {
            HttpError::Io(_) => None,
            HttpError::Malformed(_) => Some(400),
            HttpError::HeadersTooLarge => Some(431),
            HttpError::BodyTooLarge | HttpError::FrameTooLarge(_) => Some(413),
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

/// The bit of a frame's length that makes it a [`Frame::Note`].
pub const NOTE_FLAG: u32 = 1 << 31;
/// Bytes of a note at most.
pub const MAX_NOTE: usize = 64 * 1024;

/// A frame of a framed body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A block.
    Block(Vec<u8>),
    /// A source object the sender could not back up: `u32` little-endian length
    /// of its path, the path, then why (UTF-8).
    Note(Vec<u8>),
}

impl Frame {
    /// A note's path and reason; none when it does not hold them.
    pub fn parse_note(note: &[u8]) -> Option<(Vec<u8>, String)> {
        let len = u32::from_le_bytes(note.get(..4)?.try_into().ok()?) as usize;
        let path = note.get(4..4usize.checked_add(len)?)?;
        let why = std::str::from_utf8(note.get(4 + len..)?).ok()?;
        Some((path.to_vec(), why.to_string()))
    }

    /// The note of `path` and `why`.
    pub fn note(path: &[u8], why: &str) -> Frame {
        let mut n = (path.len() as u32).to_le_bytes().to_vec();
        n.extend_from_slice(path);
        n.extend_from_slice(why.as_bytes());
        n.truncate(MAX_NOTE);
        Frame::Note(n)
    }
}

/// The length that makes a frame a keepalive: a note of no bytes, which no note
/// is (a note holds at least its path's length). As a length of zero closes the
/// body, this one with [`NOTE_FLAG`] is no block, note or closing frame.
pub const KEEPALIVE: u32 = NOTE_FLAG;

/// What a body of frames that may hold keepalives holds next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Framed {
    /// A block or a note.
    Frame(Frame),
    /// A keepalive ([`KEEPALIVE`]): the sender is at work but has nothing to send.
    KeepAlive,
}

/// A body of frames, read one at a time: each a `u32` little-endian length and
/// that many bytes, the last of length zero. A length with [`NOTE_FLAG`] set is a
/// note of at most [`MAX_NOTE`] bytes; no other frame may be longer than `max`.
/// [`KEEPALIVE`] is a keepalive where the reader takes them
/// ([`Frames::next_framed`]), else malformed. The whole body is never held.
pub struct Frames {
    rest: Vec<u8>,
    max: usize,
    ended: bool,
}

impl Frames {
    /// The frames that follow a head, `rest` the bytes already read past it.
    pub fn new(rest: Vec<u8>, max: usize) -> Self {
        Frames {
            rest,
            max,
            ended: false,
        }
    }

    /// The next frame; none after the closing frame. A keepalive is refused.
    pub fn next_frame(&mut self, r: &mut impl Read) -> Result<Option<Frame>, HttpError> {
        if self.ended {
            return Ok(None);
        }
        let len = self.take(r, 4)?;
        let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]);
        if len == KEEPALIVE {
            return Err(malformed("a keepalive where none is taken"));
        }
        self.frame_of(r, len)
    }

    /// The next frame or keepalive; none after the closing frame.
    pub fn next_framed(&mut self, r: &mut impl Read) -> Result<Option<Framed>, HttpError> {
        if self.ended {
            return Ok(None);
        }
        let len = self.take(r, 4)?;
        let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]);
        if len == KEEPALIVE {
            return Ok(Some(Framed::KeepAlive));
        }
        Ok(self.frame_of(r, len)?.map(Framed::Frame))
    }

    /// The frame whose length is `len`, its bytes read from `r`.
    fn frame_of(&mut self, r: &mut impl Read, len: u32) -> Result<Option<Frame>, HttpError> {
        if len == 0 {
            self.ended = true;
            return Ok(None);
        }
        if len & NOTE_FLAG != 0 {
            let n = (len & !NOTE_FLAG) as usize;
            if n > MAX_NOTE {
                return Err(HttpError::FrameTooLarge(len));
            }
            return self.take(r, n).map(|b| Some(Frame::Note(b)));
        }
        if len as usize > self.max {
            return Err(HttpError::FrameTooLarge(len));
        }
        self.take(r, len as usize).map(|b| Some(Frame::Block(b)))
    }

    /// The trailer after the closing frame: a `u32` little-endian length of at
    /// most `max`, and that many bytes.
    pub fn trailer(&mut self, r: &mut impl Read, max: usize) -> Result<Vec<u8>, HttpError> {
        let len = self.take(r, 4)?;
        let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]);
        if len as usize > max {
            return Err(HttpError::FrameTooLarge(len));
        }
        self.take(r, len as usize)
    }

    /// Exactly `n` bytes: those already read first, then from `r`, read straight
    /// into the frame (nothing read ahead, each byte written once).
    fn take(&mut self, r: &mut impl Read, n: usize) -> Result<Vec<u8>, HttpError> {
        let have = self.rest.len().min(n);
        // Zeroed by the allocator, not byte by byte.
        let mut out = vec![0u8; n];
        out[..have].copy_from_slice(&self.rest[..have]);
        self.rest.drain(..have);
        let mut at = have;
        while at < n {
            match r.read(&mut out[at..]) {
                Ok(k) if k > 0 => at += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Said plainly (TLS says it with a link to its manual).
                Ok(_) => return Err(closed_midway().into()),
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    return Err(closed_midway().into())
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(out)
    }
}

/// The error of a body of frames cut short.
fn closed_midway() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "closed by the sender before the body's end",
    )
}

/// Writes `frames` and keepalives as a body of frames (see [`Frames`]), the
/// closing frame last;
/// each keepalive is flushed at once. How many frames (keepalives not counted).
pub fn write_framed(
    w: &mut (impl Write + ?Sized),
    frames: impl Iterator<Item = Framed>,
) -> io::Result<u64> {
    let mut n = 0;
    for f in frames {
        let (flag, b) = match f {
            Framed::Frame(Frame::Block(b)) => (0, b),
            Framed::Frame(Frame::Note(b)) => (NOTE_FLAG, b),
            Framed::KeepAlive => {
                w.write_all(&KEEPALIVE.to_le_bytes())?;
                w.flush()?;
                continue;
            }
        };
        // Nothing a reader would take for another frame, or refuse, is sent: an
        // empty block is the closing frame, an empty note a keepalive.
        if b.is_empty() {
            return Err(io::Error::other("an empty frame"));
        }
        if flag == NOTE_FLAG && b.len() > MAX_NOTE {
            return Err(io::Error::other("a note longer than 64 KiB"));
        }
        let len = u32::try_from(b.len())
            .ok()
            .filter(|l| l & NOTE_FLAG == 0)
            .ok_or_else(|| io::Error::other("a frame of 2 GiB or more"))?;
        w.write_all(&(len | flag).to_le_bytes())?;
        w.write_all(&b)?;
        n += 1;
    }
    w.write_all(&0u32.to_le_bytes())?;
    w.flush()?;
    Ok(n)
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
        let k = String::from_utf8(percent_decode(k)?)
            .map_err(|_| malformed("a query key that is not UTF-8"))?;
        out.push((k, percent_decode(v)?));
    }
    Ok(out)
}

/// `%XX` escapes decoded; anything else kept as it is.
pub fn percent_decode(s: &str) -> Result<Vec<u8>, HttpError> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'%' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let hex = b
            .get(i + 1..i + 3)
            .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok())
            .ok_or_else(|| malformed("bad percent escape"))?;
        out.push(hex);
        i += 3;
    }
    Ok(out)
}

/// Bytes escaped for a query value: unreserved characters and `/` as they are.
pub fn percent_encode(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len());
    for &c in b {
        if c.is_ascii_alphanumeric() || b"-._~/".contains(&c) {
            s.push(c as char);
        } else {
            s.push_str(&format!("%{c:02X}"));
        }
    }
    s
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

        /// Frames written are read back as they were; the closing frame ends them.
        #[test]
        fn frames_come_back(
            blocks in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 1..300), 0..8),
            notes in proptest::collection::vec(proptest::bool::ANY, 8),
        ) {
            let blocks: Vec<Frame> = blocks
                .into_iter()
                .zip(notes)
                .map(|(b, n)| if n { Frame::Note(b) } else { Frame::Block(b) })
                .collect();
            let mut body = Vec::new();
            write_framed(&mut body, blocks.clone().into_iter().map(Framed::Frame)).unwrap();
            let (rest, tail) = body.split_at(body.len().min(5));
            let mut frames = Frames::new(rest.to_vec(), 300);
            let mut r = tail;
            let mut got = Vec::new();
            while let Some(f) = frames.next_frame(&mut r).unwrap() {
                got.push(f);
            }
            proptest::prop_assert_eq!(got, blocks);
        }

        /// Frames and keepalives written are read back as they were by a reader
        /// that takes keepalives.
        #[test]
        fn keepalives_come_back_between_frames(
            items in proptest::collection::vec((proptest::collection::vec(proptest::num::u8::ANY, 1..100), 0u8..3), 0..12),
        ) {
            let sent: Vec<Framed> = (items.into_iter())
                .map(|(b, k)| match k {
                    0 => Framed::Frame(Frame::Block(b)),
                    1 => Framed::Frame(Frame::Note(b)),
                    _ => Framed::KeepAlive,
                })
                .collect();
            let mut body = Vec::new();
            write_framed(&mut body, sent.clone().into_iter()).unwrap();
            let mut frames = Frames::new(Vec::new(), 100);
            let mut r = body.as_slice();
            let mut got = Vec::new();
            while let Some(f) = frames.next_framed(&mut r).unwrap() {
                got.push(f);
            }
            proptest::prop_assert_eq!(got, sent);
            proptest::prop_assert!(r.is_empty());
        }

        /// Any bytes are frames or an error, never a panic, and no frame is longer
        /// than allowed.
        #[test]
        fn any_bytes_are_frames_or_an_error(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..600)) {
            let mut frames = Frames::new(Vec::new(), 64);
            let mut r = bytes.as_slice();
            while let Ok(Some(f)) = frames.next_framed(&mut r) {
                let Framed::Frame(f) = f else {
                    continue;
                };
                match f {
                    Frame::Block(b) => proptest::prop_assert!(!b.is_empty() && b.len() <= 64),
                    Frame::Note(n) => {
                        proptest::prop_assert!(n.len() <= MAX_NOTE);
                        let _ = Frame::parse_note(&n);
                    }
                }
            }
        }

        #[test]
        fn any_bytes_escape_and_come_back(b in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            proptest::prop_assert_eq!(percent_decode(&percent_encode(&b)).unwrap(), b);
        }
    }

    #[test]
    fn a_keepalive_is_four_bytes_and_only_where_taken() {
        let mut body = Vec::new();
        let sent = [Framed::KeepAlive, Framed::Frame(Frame::Block(vec![7; 3]))];
        assert_eq!(write_framed(&mut body, sent.into_iter()).unwrap(), 1);
        assert_eq!(body[..8], [0, 0, 0, 0x80, 3, 0, 0, 0]);
        // A reader that takes none refuses it.
        let e = Frames::new(Vec::new(), 64).next_frame(&mut body.as_slice());
        assert!(matches!(e, Err(HttpError::Malformed(_))), "{e:?}");
        // A keepalive cut short is a body cut short.
        let e = Frames::new(Vec::new(), 64).next_framed(&mut &body[..3]);
        assert!(e.unwrap_err().to_string().contains("before the body's end"));
        // No frame is written that a reader would take for another, or refuse.
        for bad in [
            Frame::Note(Vec::new()),
            Frame::Block(Vec::new()),
            Frame::Note(vec![0; MAX_NOTE + 1]),
        ] {
            let f = [Framed::Frame(bad)].into_iter();
            assert!(write_framed(&mut Vec::new(), f).is_err());
        }
        // A keepalive after the closing frame is not read as one.
        let mut body = Vec::new();
        write_framed(&mut body, std::iter::empty()).unwrap();
        body.extend_from_slice(&KEEPALIVE.to_le_bytes());
        let mut frames = Frames::new(Vec::new(), 64);
        let mut r = body.as_slice();
        assert_eq!(frames.next_framed(&mut r).unwrap(), None);
        assert_eq!(frames.next_framed(&mut r).unwrap(), None);
    }

    #[test]
    fn a_body_cut_short_says_so() {
        let body = [10u8, 0, 0, 0, 1, 2];
        let e = Frames::new(Vec::new(), 64).next_frame(&mut &body[..]);
        let e = e.unwrap_err();
        assert_eq!(e.status(), None);
        assert!(e.to_string().contains("before the body's end"), "{e}");
    }

    #[test]
    fn percent_escapes_go_both_ways() {
        let b = b"a b/\xff%?&=";
        assert_eq!(percent_decode(&percent_encode(b)).unwrap(), b);
        for bad in ["%", "%a", "%+1", "%zz"] {
            assert!(percent_decode(bad).is_err(), "{bad}");
        }
    }
}
