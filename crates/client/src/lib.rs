//! tapeloom's client: what the commands that take `--server` ask a tapeloom
//! server over TLS instead of opening the home: a backup packed here and sent
//! (`backup`), a restore or verify read on the server's drives and placed or
//! checked here (`restore`, `verify`), and the JSON documents of the others. One blocking HTTP/1.1 request per connection; the
//! server's certificate is pinned by its fingerprint.

pub use tapeloom_proto::ServerError;
pub mod backup;
pub mod restore;
pub mod verify;

use rustls::pki_types::ServerName;
use serde::de::DeserializeOwned;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;
use tapeloom_proto::tls::{parse_fingerprint, Pinned};

/// How long to wait for the server to accept, and for each read or write.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
const IO_TIMEOUT: Duration = Duration::from_secs(300);
/// Bytes of an answer's status line and headers.
const MAX_HEAD: usize = 64 * 1024;

/// `https://HOST:PORT` (a trailing `/` allowed; an IPv6 host in brackets).
fn parse_url(url: &str) -> Result<(String, u16), ServerError> {
    let bad = || ServerError::BadUrl(url.to_string());
    let rest = url.strip_prefix("https://").ok_or_else(bad)?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let (host, port) = rest.rsplit_once(':').ok_or_else(bad)?;
    let port = port.parse::<u16>().map_err(|_| bad())?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if host.is_empty() || host.contains('/') {
        return Err(bad());
    }
    Ok((host.to_string(), port))
}

/// A server to ask, with the token and the fingerprint to pin.
pub struct Server {
    host: String,
    port: u16,
    token: String,
    fingerprint: String,
}

impl Server {
    /// The server at `url` (`https://HOST:PORT`), asked with `token`, its
    /// certificate pinned by `fingerprint` (SHA-256, as the server prints it).
    pub fn new(url: &str, token: String, fingerprint: &str) -> Result<Server, ServerError> {
        let (host, port) = parse_url(url)?;
        Ok(Server {
            host,
            port,
            token,
            fingerprint: parse_fingerprint(fingerprint)?,
        })
    }

    /// GETs `path` and decodes the JSON document of a 200 answer; any other status
    /// is [`ServerError::Refused`] with the server's one-line error.
    pub fn get_json<T: DeserializeOwned>(&self, path: &str) -> Result<T, ServerError> {
        let (status, body) = self.get(path)?;
        if status != 200 {
            return Err(refusal(status, &body));
        }
        serde_json::from_slice(&body).map_err(|e| ServerError::BadAnswer(e.to_string()))
    }

    /// GETs `path`: the answer's status and body.
    pub fn get(&self, path: &str) -> Result<(u16, Vec<u8>), ServerError> {
        self.exchange("GET", path, "", |_| Ok(()))
    }

    /// POSTs `doc` as JSON to `path`: the answer's status and body.
    pub fn post_raw(
        &self,
        path: &str,
        doc: &impl serde::Serialize,
    ) -> Result<(u16, Vec<u8>), ServerError> {
        let body = serde_json::to_vec(doc).map_err(|e| ServerError::BadAnswer(e.to_string()))?;
        let head = format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        );
        self.exchange("POST", path, &head, |w| w.write_all(&body))
    }

    /// POSTs `frames` (and keepalives) to `path` as a body of frames
    /// (`http::write_framed`): the answer's status and body. A server that
    /// refuses the body midway answers before it closes; that answer is read when
    /// the sending fails.
    pub fn post_frames(
        &self,
        path: &str,
        frames: impl Iterator<Item = tapeloom_proto::frame::Framed>,
    ) -> Result<(u16, Vec<u8>), ServerError> {
        let head = "Content-Type: application/vnd.tapeloom.frames\r\n";
        self.exchange("POST", path, head, |w| {
            tapeloom_proto::frame::write_framed(w, frames).map(|_| ())
        })
    }

    /// One request: its head (with `headers`, each ending in CRLF), what `body`
    /// writes, then the answer's status and body.
    fn exchange(
        &self,
        method: &str,
        path: &str,
        headers: &str,
        body: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> Result<(u16, Vec<u8>), ServerError> {
        let (mut tls, pinned) = self.open()?;
        let sent = self
            .send_head(&mut tls, method, path, headers)
            .and_then(|()| body(&mut tls))
            .and_then(|()| tls.flush());
        // A refusal midway is answered before the server closes.
        let answer = match (sent, read_answer(&mut tls)) {
            (_, Ok(a)) => Ok(a),
            (Err(e), Err(_)) | (Ok(()), Err(e)) => Err(e),
        };
        answer.map_err(|source| self.io_fault(&pinned, source))?
    }

    /// GETs `path`, whose 200 answer is a body of frames (no `Content-Length`),
    /// and hands each frame to `each`; returns the trailer after the closing
    /// frame (`http::Frames::trailer`). Any other status is
    /// [`ServerError::Refused`] with the server's one-line error.
    pub fn get_frames<E: From<ServerError>>(
        &self,
        path: &str,
        max_frame: usize,
        mut each: impl FnMut(tapeloom_proto::frame::Frame) -> Result<(), E>,
    ) -> Result<Vec<u8>, E> {
        let (mut tls, pinned, rest) = self.get_ok(path)?;
        let fault = |e| self.io_fault(&pinned, e);
        let bad = |e: tapeloom_proto::frame::FrameError| match e {
            tapeloom_proto::frame::FrameError::Io(e) => fault(e),
            e => ServerError::BadAnswer(e.to_string()),
        };
        let mut frames = tapeloom_proto::frame::Frames::new(rest, max_frame);
        while let Some(f) = frames.next_frame(&mut tls).map_err(bad)? {
            each(f)?;
        }
        let trailer = frames
            .trailer(&mut tls, tapeloom_proto::restore::MAX_TRAILER)
            .map_err(bad)?;
        Ok(trailer)
    }

    /// GETs `path`, whose 200 answer's body (read until the server closes) `read`
    /// takes as it comes; any other status is [`ServerError::Refused`] with the
    /// server's one-line error.
    pub fn get_reading<T, E: From<ServerError>>(
        &self,
        path: &str,
        read: impl FnOnce(&mut dyn std::io::BufRead) -> Result<T, E>,
    ) -> Result<T, E> {
        let (tls, _, rest) = self.get_ok(path)?;
        let body = std::io::Cursor::new(rest).chain(Eof(tls));
        read(&mut std::io::BufReader::with_capacity(64 * 1024, body))
    }

    /// GETs `path` and reads the answer's head: on a 200, the connection, its
    /// pinning and what of the body came with the head; any other status is
    /// [`ServerError::Refused`] with the server's one-line error.
    fn get_ok(&self, path: &str) -> Result<(Tls, std::sync::Arc<Pinned>, Vec<u8>), ServerError> {
        let (mut tls, pinned) = self.open()?;
        let fault = |e| self.io_fault(&pinned, e);
        self.send_head(&mut tls, "GET", path, "")
            .and_then(|()| tls.flush())
            .map_err(fault)?;
        let (status, length, rest) = read_head(&mut tls).map_err(fault)??;
        if status != 200 {
            let body = read_body(&mut tls, rest, length.unwrap_or(0)).map_err(fault)?;
            return Err(refusal(status, &body));
        }
        Ok((tls, pinned, rest))
    }

    /// A TLS connection to the server, pinned to its fingerprint.
    fn open(&self) -> Result<(Tls, std::sync::Arc<Pinned>), ServerError> {
        let pinned = Pinned::new(self.fingerprint.clone());
        let name = ServerName::try_from(self.host.clone())
            .map_err(|_| ServerError::BadUrl(format!("https://{}:{}", self.host, self.port)))?;
        let conn = rustls::ClientConnection::new(pinned.client_config()?, name)?;
        let sock = self.connect()?;
        Ok((rustls::StreamOwned::new(conn, sock), pinned))
    }

    /// Writes a request's head, with `headers` (each ending in CRLF).
    fn send_head(
        &self,
        tls: &mut Tls,
        method: &str,
        path: &str,
        headers: &str,
    ) -> std::io::Result<()> {
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}:{}\r\nAuthorization: Bearer {}\r\n\
             User-Agent: tapeloom/{}\r\nConnection: close\r\n{headers}\r\n",
            self.host,
            self.port,
            self.token,
            env!("CARGO_PKG_VERSION")
        );
        tls.write_all(request.as_bytes())
    }

    /// A socket fault: the certificate refused, when it was; the I/O error
    /// otherwise.
    fn io_fault(&self, pinned: &Pinned, source: std::io::Error) -> ServerError {
        // Said plainly (TLS says it with a link to its manual): the server went
        // away, or stopped, before its answer.
        let source = match source.kind() {
            std::io::ErrorKind::UnexpectedEof => std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the server closed the connection before its answer",
            ),
            _ => source,
        };
        match pinned.mismatch() {
            Some(e) => e,
            None => ServerError::Io {
                what: format!("ask {}:{}", self.host, self.port),
                source,
            },
        }
    }

    fn connect(&self) -> Result<TcpStream, ServerError> {
        let what = || format!("connect to {}:{}", self.host, self.port);
        let io = |source| ServerError::Io {
            what: what(),
            source,
        };
        let addrs = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(io)?;
        let mut last = std::io::Error::from(std::io::ErrorKind::AddrNotAvailable);
        for a in addrs {
            match TcpStream::connect_timeout(&a, CONNECT_TIMEOUT) {
                Ok(s) => {
                    s.set_read_timeout(Some(IO_TIMEOUT)).map_err(io)?;
                    s.set_write_timeout(Some(IO_TIMEOUT)).map_err(io)?;
                    return Ok(s);
                }
                Err(e) => last = e,
            }
        }
        Err(io(last))
    }
}

/// The server's one-line error from a refusal's body (`{"error": "..."}`).
pub fn refusal(status: u16, body: &[u8]) -> ServerError {
    #[derive(serde::Deserialize)]
    struct Refusal {
        error: String,
    }
    let message = match serde_json::from_slice::<Refusal>(body) {
        Ok(r) => r.error,
        Err(_) => String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned(),
    };
    ServerError::Refused {
        status,
        message: message.replace(['\n', '\r'], " "),
    }
}

/// A client's TLS connection.
type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// An answer's body that ends when the server closes: a close without TLS's
/// close notice (rustls says `UnexpectedEof`) ends it as well, and the body's
/// reader finds it whole or cut by its own rules.
struct Eof(Tls);

impl Read for Eof {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.0.read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(0),
            r => r,
        }
    }
}

/// What an answer's head says: its status, its `Content-Length` (when it has
/// one), and the bytes read past the head.
type Head = (u16, Option<usize>, Vec<u8>);

/// Reads a whole answer: its status and its body (as long as its Content-Length).
fn read_answer(r: &mut impl Read) -> std::io::Result<Result<(u16, Vec<u8>), ServerError>> {
    let (status, length, rest) = match read_head(r)? {
        Ok(h) => h,
        Err(e) => return Ok(Err(e)),
    };
    let Some(length) = length else {
        return Ok(Err(ServerError::BadAnswer("no Content-Length".into())));
    };
    Ok(Ok((status, read_body(r, rest, length)?)))
}

/// Reads an answer's head.
fn read_head(r: &mut impl Read) -> std::io::Result<Result<Head, ServerError>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut resp = httparse::Response::new(&mut headers);
            let parsed = resp.parse(&buf[..end + 4]);
            let (Ok(httparse::Status::Complete(_)), Some(status)) = (parsed, resp.code) else {
                return Ok(Err(ServerError::BadAnswer("not an HTTP answer".into())));
            };
            let length = resp
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                .and_then(|h| {
                    std::str::from_utf8(h.value)
                        .ok()?
                        .trim()
                        .parse::<usize>()
                        .ok()
                });
            return Ok(Ok((status, length, buf.split_off(end + 4))));
        }
        if buf.len() > MAX_HEAD {
            return Ok(Err(ServerError::BadAnswer("headers too large".into())));
        }
        let n = r.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Reads a body of `length` bytes, `body` the ones already read.
fn read_body(r: &mut impl Read, mut body: Vec<u8>, length: usize) -> std::io::Result<Vec<u8>> {
    let mut chunk = [0u8; 16 * 1024];
    while body.len() < length {
        let n = r.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_https_host_and_port() {
        assert_eq!(
            parse_url("https://a.b:8407/").unwrap(),
            ("a.b".into(), 8407)
        );
        assert_eq!(parse_url("https://[::1]:1").unwrap(), ("::1".into(), 1));
        for bad in [
            "http://a:1",
            "https://a",
            "https://:1",
            "https://a:x",
            "https://a/b:1",
        ] {
            assert!(
                matches!(parse_url(bad), Err(ServerError::BadUrl(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_refusal_carries_the_servers_line() {
        let e = refusal(401, br#"{"error":"unknown token"}"#);
        assert_eq!(
            e.to_string(),
            "the server refused: unknown token (HTTP 401)"
        );
    }
}
