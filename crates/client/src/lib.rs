//! tapeloom's client: what the commands that take `--server` ask a tapeloom
//! server over TLS instead of opening the home: a backup packed here and sent
//! (`backup`), a restore or verify read on the server's drives and placed or
//! checked here (`restore`, `verify`), and the JSON documents of the others.
//!
//! Requests are HTTP/1.1 on hyper over tokio and tokio-rustls, one connection
//! each: a stream's blocks go as a chunked body, so any HTTP stack (a reverse
//! proxy, a load balancer) can carry them. The callers are threads (the tree
//! crate's packers, the restore's placing): each request runs on the `Server`'s own
//! runtime and its bodies cross over as `tapeloom_proto::body` says. The
//! server's certificate is pinned by its fingerprint.

#![forbid(unsafe_code)]

pub mod backup;
pub mod restore;
pub mod verify;
mod wire;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use serde::de::DeserializeOwned;
use std::io::Read;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tapeloom_proto::body::{BodyReader, Chunks};
use tapeloom_proto::tls::{parse_fingerprint, Pinned};
pub use tapeloom_proto::ServerError;
use tokio::runtime::Runtime;

/// How long to wait for the server to accept, and for each read or write.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
const IO_TIMEOUT: Duration = Duration::from_secs(300);
/// Bytes of an answer's status line and headers.
const MAX_HEAD: usize = 64 * 1024;
/// Bytes of an answer read whole (a JSON document), at most.
const MAX_ANSWER: u64 = 1 << 30;

/// `https://HOST:PORT` (a trailing `/` allowed; an IPv6 host in brackets), read
/// by `http::Uri`; no other path, no query.
fn parse_url(url: &str) -> Result<(String, u16), ServerError> {
    let bad = || ServerError::BadUrl(url.to_string());
    let uri: http::Uri = url.parse().map_err(|_| bad())?;
    let https = uri.scheme() == Some(&http::uri::Scheme::HTTPS);
    let bare = matches!(uri.path(), "" | "/") && uri.query().is_none();
    let (Some(host), Some(port), true, true) = (uri.host(), uri.port_u16(), https, bare) else {
        return Err(bad());
    };
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if host.is_empty() {
        return Err(bad());
    }
    Ok((host.to_string(), port))
}

/// A server to ask, with the token and the fingerprint to pin.
pub struct Server {
    /// Where requests go: the server given, or the one of its site it sent this
    /// client on to ([`Server::follow`]).
    target: std::sync::Mutex<Arc<Target>>,
    rt: Runtime,
}

/// Where the requests go and with what.
struct Target {
    host: String,
    port: u16,
    token: String,
    fingerprint: String,
}

/// Threads of the client's runtime: the connections' tasks; the callers' threads
/// make and read the bodies.
const NET_THREADS: usize = 1;

impl Server {
    /// The server at `url` (`https://HOST:PORT`), asked with `token`, its
    /// certificate pinned by `fingerprint` (SHA-256, as the server prints it).
    pub fn new(url: &str, token: String, fingerprint: &str) -> Result<Server, ServerError> {
        let (host, port) = parse_url(url)?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(NET_THREADS)
            .thread_name("tapeloom-client")
            .enable_all()
            .build()
            .map_err(|source| ServerError::Io {
                what: "start the client's runtime".into(),
                source,
            })?;
        let target = Target {
            host,
            port,
            token,
            fingerprint: parse_fingerprint(fingerprint)?,
        };
        Ok(Server {
            target: std::sync::Mutex::new(Arc::new(target)),
            rt,
        })
    }

    /// Where requests go now.
    fn target(&self) -> Arc<Target> {
        let t = self
            .target
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(&t)
    }

    /// Sends every later request to `server` of the same site, with the same
    /// token, pinned by the fingerprint the server this client trusts gave.
    pub fn follow(&self, server: &tapeloom_proto::site::SiteServer) -> Result<(), ServerError> {
        let (host, port) = parse_url(&server.url)?;
        let token = self.target().token.clone();
        let next = Target {
            host,
            port,
            token,
            fingerprint: parse_fingerprint(&server.fingerprint)?,
        };
        *self
            .target
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(next);
        Ok(())
    }

    /// `host:port` of the server requests go to now.
    pub fn address(&self) -> String {
        let t = self.target();
        format!("{}:{}", t.host, t.port)
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
        let answer = self.ask("GET", path, None, Chunks::whole(Bytes::new()));
        self.whole(answer)
    }

    /// POSTs `doc` as JSON to `path`: the answer's status and body.
    pub fn post_raw(
        &self,
        path: &str,
        doc: &impl serde::Serialize,
    ) -> Result<(u16, Vec<u8>), ServerError> {
        let body = serde_json::to_vec(doc).map_err(|e| ServerError::BadAnswer(e.to_string()))?;
        let json = Some("application/json");
        self.whole(self.ask("POST", path, json, Chunks::whole(body)))
    }

    /// POSTs `frames` (and keepalives) to `path` as a chunked body of frames
    /// (`tapeloom_proto::frame::write_framed`): the answer's status and body. A
    /// server that refuses the body midway answers before it closes; that answer
    /// is read when the sending fails.
    pub fn post_frames(
        &self,
        path: &str,
        frames: impl Iterator<Item = tapeloom_proto::frame::Framed>,
    ) -> Result<(u16, Vec<u8>), ServerError> {
        self.post_frames_keeping(path, frames, drop)
    }

    /// [`Server::post_frames`], each frame handed to `keep` once it was written
    /// (or its writing failed), so that a sender can send it again on another
    /// connection.
    pub fn post_frames_keeping(
        &self,
        path: &str,
        frames: impl Iterator<Item = tapeloom_proto::frame::Framed>,
        keep: impl FnMut(tapeloom_proto::frame::Frame),
    ) -> Result<(u16, Vec<u8>), ServerError> {
        let (body, mut w) = Chunks::stream(self.rt.handle().clone(), IO_TIMEOUT);
        let frames_type = Some("application/vnd.tapeloom.frames");
        let asked = self.rt.spawn(ask(
            self.target(),
            "POST",
            path.to_string(),
            frames_type,
            body,
        ));
        // When the server stops taking the body it has answered (or gone): its
        // answer says which.
        let sent = tapeloom_proto::frame::write_framed_keeping(&mut w, frames, keep).map(|_| ());
        drop(w);
        let answer = match self.rt.block_on(asked) {
            Ok(a) => a,
            Err(e) => Err(Fault::Io(std::io::Error::other(e))),
        };
        match (sent, self.whole(answer)) {
            (_, Ok(a)) => Ok(a),
            (Err(source), Err(ServerError::Io { what, .. })) => {
                Err(ServerError::Io { what, source })
            }
            (_, Err(e)) => Err(e),
        }
    }

    /// GETs `path`, whose 200 answer is a body of frames, and hands each frame to
    /// `each`; returns the trailer after the closing frame
    /// (`tapeloom_proto::frame::Frames::trailer`). Any other status is
    /// [`ServerError::Refused`] with the server's one-line error.
    pub fn get_frames<E: From<ServerError>>(
        &self,
        path: &str,
        max_frame: usize,
        mut each: impl FnMut(tapeloom_proto::frame::Frame) -> Result<(), E>,
    ) -> Result<Vec<u8>, E> {
        let (mut body, pinned) = self.get_ok(path)?;
        let fault = |e| self.fault(Fault::Io(e), Some(&pinned));
        let bad = |e: tapeloom_proto::frame::FrameError| match e {
            tapeloom_proto::frame::FrameError::Io(e) => fault(e),
            e => ServerError::BadAnswer(e.to_string()),
        };
        let mut frames = tapeloom_proto::frame::Frames::new(Vec::new(), max_frame);
        loop {
            body.deadline = Instant::now() + IO_TIMEOUT;
            match frames.next_frame(&mut body).map_err(bad)? {
                Some(f) => each(f)?,
                None => break,
            }
        }
        let trailer = frames
            .trailer(&mut body, tapeloom_proto::restore::MAX_TRAILER)
            .map_err(bad)?;
        Ok(trailer)
    }

    /// GETs `path`, whose 200 answer's body `read` takes as it comes; any other
    /// status is [`ServerError::Refused`] with the server's one-line error.
    pub fn get_reading<T, E: From<ServerError>>(
        &self,
        path: &str,
        read: impl FnOnce(&mut dyn std::io::BufRead) -> Result<T, E>,
    ) -> Result<T, E> {
        let (body, _) = self.get_ok(path)?;
        let body = Moving(body);
        read(&mut std::io::BufReader::with_capacity(64 * 1024, body))
    }

    /// GETs `path`: on a 200, the answer's body as it comes; any other status is
    /// [`ServerError::Refused`] with the server's one-line error.
    fn get_ok(&self, path: &str) -> Result<(BodyReader<Incoming>, Arc<Pinned>), ServerError> {
        let (answer, pinned) = (self.ask("GET", path, None, Chunks::whole(Bytes::new())))
            .map_err(|f| self.fault(f, None))?;
        let mut status = answer.status().as_u16();
        let (answer, pinned) = if status == tapeloom_proto::site::SENT_ON {
            // Another server of the site reads it: asked there, once.
            let mut body = BodyReader::new(
                self.rt.handle().clone(),
                answer.into_body(),
                Instant::now() + IO_TIMEOUT,
            );
            let text = tapeloom_proto::body::read_to_end(&mut body, MAX_HEAD as u64)
                .map_err(|e| self.fault(Fault::Io(e), Some(&pinned)))?;
            self.follow_sent_on(&text)?;
            let again = (self.ask("GET", path, None, Chunks::whole(Bytes::new())))
                .map_err(|f| self.fault(f, None))?;
            status = again.0.status().as_u16();
            again
        } else {
            (answer, pinned)
        };
        let body = BodyReader::new(
            self.rt.handle().clone(),
            answer.into_body(),
            Instant::now() + IO_TIMEOUT,
        );
        if status != 200 {
            let mut body = body;
            let text = tapeloom_proto::body::read_to_end(&mut body, MAX_HEAD as u64)
                .map_err(|e| self.fault(Fault::Io(e), Some(&pinned)))?;
            if status == tapeloom_proto::site::SPLIT {
                // The job is read in parts, by several servers: the caller asks each.
                let split = serde_json::from_slice(&text)
                    .map_err(|e| ServerError::BadAnswer(format!("a split reading: {e}")))?;
                return Err(ServerError::Split(Box::new(split)));
            }
            return Err(refusal(status, &text));
        }
        Ok((body, pinned))
    }

    /// Follows a `303` answer's [`tapeloom_proto::site::SentOn`] document: later
    /// requests go to the server it names. Says so on stderr.
    pub fn follow_sent_on(&self, body: &[u8]) -> Result<(), ServerError> {
        let sent: tapeloom_proto::site::SentOn =
            serde_json::from_slice(body).map_err(|e| ServerError::BadAnswer(e.to_string()))?;
        eprintln!(
            "tapeloom: sent on to server {} ({}): {}",
            tapeloom_tree::escape_controls(&sent.server.name),
            tapeloom_tree::escape_controls(&sent.server.url),
            tapeloom_tree::escape_controls(&sent.reason)
        );
        self.follow(&sent.server)
    }

    /// One request, on this thread: the answer's head, or why none came.
    fn ask(
        &self,
        method: &'static str,
        path: &str,
        content_type: Option<&'static str>,
        body: Chunks,
    ) -> Answered {
        let target = self.target();
        self.rt
            .block_on(ask(target, method, path.to_string(), content_type, body))
    }

    /// An answer read whole: its status and body.
    fn whole(&self, answer: Answered) -> Result<(u16, Vec<u8>), ServerError> {
        let (answer, pinned) = answer.map_err(|f| self.fault(f, None))?;
        let status = answer.status().as_u16();
        let mut body = BodyReader::new(
            self.rt.handle().clone(),
            answer.into_body(),
            Instant::now() + IO_TIMEOUT,
        );
        let text = tapeloom_proto::body::read_to_end(&mut body, MAX_ANSWER)
            .map_err(|e| self.fault(Fault::Io(e), Some(&pinned)))?;
        Ok((status, text))
    }

    /// A fault of a request: the certificate refused, when it was; the I/O error
    /// otherwise.
    fn fault(&self, f: Fault, pinned: Option<&Pinned>) -> ServerError {
        let (source, pinned) = match f {
            Fault::Server(e) => return e,
            Fault::Io(e) => (e, pinned.and_then(|p| p.mismatch())),
            Fault::Tls(e, p) => (e, p.mismatch()),
        };
        // Said plainly (TLS says it with a link to its manual): the server went
        // away, or stopped, before its answer.
        let source = match source.kind() {
            std::io::ErrorKind::UnexpectedEof => std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the server closed the connection before its answer",
            ),
            _ => source,
        };
        match pinned {
            Some(e) => e,
            None => ServerError::Io {
                what: {
                    let t = self.target();
                    format!("ask {}:{}", t.host, t.port)
                },
                source,
            },
        }
    }
}

/// Why a request got no answer.
enum Fault {
    /// Refused before anything was sent (the address, the TLS configuration).
    Server(ServerError),
    /// The connection failed.
    Io(std::io::Error),
    /// The connection failed where the certificate may be why.
    Tls(std::io::Error, Arc<Pinned>),
}

/// An answer's head and the pinning of its connection, or why none came.
type Answered = Result<(hyper::Response<Incoming>, Arc<Pinned>), Fault>;

/// One request: a connection of its own, TLS pinned to the fingerprint, HTTP/1.1.
async fn ask(
    t: Arc<Target>,
    method: &'static str,
    path: String,
    content_type: Option<&'static str>,
    body: Chunks,
) -> Answered {
    let pinned = Pinned::new(t.fingerprint.clone());
    let config = pinned.client_config().map_err(Fault::Server)?;
    let name = ServerName::try_from(t.host.clone()).map_err(|_| {
        Fault::Server(ServerError::BadUrl(format!(
            "https://{}:{}",
            t.host, t.port
        )))
    })?;
    let sock = connect(&t).await?;
    let tls = tokio_rustls::TlsConnector::from(config);
    let tls = tokio::time::timeout(IO_TIMEOUT, tls.connect(name, sock))
        .await
        .map_err(|_| Fault::Io(timed_out("no TLS handshake in time")))?
        .map_err(|e| Fault::Tls(e, pinned.clone()))?;
    let (mut sender, conn) = hyper::client::conn::http1::Builder::new()
        .max_buf_size(MAX_HEAD.max(8192) * 16)
        .handshake(TokioIo::new(tls))
        .await
        .map_err(|e| Fault::Io(std::io::Error::other(e)))?;
    tokio::spawn(async move {
        // The connection ends with its request; its faults are the request's.
        let _ = conn.await;
    });
    let mut req = hyper::Request::builder()
        .method(method)
        .uri(&path)
        .header(hyper::header::HOST, format!("{}:{}", t.host, t.port))
        .header(hyper::header::AUTHORIZATION, format!("Bearer {}", t.token))
        .header(
            hyper::header::USER_AGENT,
            concat!("tapeloom/", env!("CARGO_PKG_VERSION")),
        );
    if let Some(ct) = content_type {
        req = req.header(hyper::header::CONTENT_TYPE, ct);
    }
    let req = req
        .body(body)
        .map_err(|e| Fault::Server(ServerError::BadUrl(format!("{path}: {e}"))))?;
    let answer = tokio::time::timeout(IO_TIMEOUT, sender.send_request(req))
        .await
        .map_err(|_| Fault::Io(timed_out("no answer in time")))?
        .map_err(|e| Fault::Io(hyper_io(e)))?;
    Ok((answer, pinned))
}

/// A hyper error as the I/O error it comes from, where it comes from one.
fn hyper_io(e: hyper::Error) -> std::io::Error {
    if e.is_incomplete_message() {
        return std::io::ErrorKind::UnexpectedEof.into();
    }
    let source = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<std::io::Error>());
    match source {
        Some(io) => std::io::Error::new(io.kind(), io.to_string()),
        None => std::io::Error::other(e),
    }
}

fn timed_out(what: &'static str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::TimedOut, what)
}

/// A TCP connection to the server, under the connect timeout.
async fn connect(t: &Target) -> Result<tokio::net::TcpStream, Fault> {
    let io = |source| {
        Fault::Server(ServerError::Io {
            what: format!("connect to {}:{}", t.host, t.port),
            source,
        })
    };
    let addrs = tokio::net::lookup_host((t.host.as_str(), t.port))
        .await
        .map_err(io)?;
    let mut last = std::io::Error::from(std::io::ErrorKind::AddrNotAvailable);
    for a in addrs {
        match tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(a)).await {
            Ok(Ok(s)) => {
                s.set_nodelay(true).map_err(io)?;
                return Ok(s);
            }
            Ok(Err(e)) => last = e,
            Err(_) => last = timed_out("no connection in time"),
        }
    }
    Err(io(last))
}

/// An answer's body whose deadline moves on with each read: the reader takes it
/// as it comes, however long the whole takes.
struct Moving<B>(BodyReader<B>);

impl<B> Read for Moving<B>
where
    BodyReader<B>: Read,
{
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.deadline = Instant::now() + IO_TIMEOUT;
        self.0.read(buf)
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
            "https://a:1/b",
            "https://a:1?x",
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
