//! The listener: one thread per connection, at most `max_connections` at once
//! (more are closed at once), each connection one request under a deadline, so a
//! client that stalls holds its thread no longer than the configured timeout.

use super::api::{self, Answer};
use super::backups::{self, Backups};
use super::config::{Limits, QueueLimits};
use super::metrics::Metrics;
use super::queue::Queue;
use super::restores::{self, Served};
use crate::http::{self, HttpError};
use std::io::{self, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tapeloom_engine::Home;

/// What every connection's thread shares.
pub struct Shared {
    /// The home whose catalog is served.
    pub home: PathBuf,
    /// The limits.
    pub limits: Limits,
    /// The TLS configuration.
    pub tls: Arc<rustls::ServerConfig>,
    /// The counters.
    pub metrics: Metrics,
    /// Connections being served.
    active: AtomicUsize,
    /// The backups clients began.
    pub backups: Backups,
    /// The jobs, from their request to their end.
    pub queue: Queue,
    /// The queue's limits.
    pub queue_limits: QueueLimits,
    /// Drives of the library.
    pub drives: usize,
    /// MB/s a client must send for its job to go to a drive before it is whole.
    pub start_rate_mb_s: f64,
    /// What the status page saw: its rates' figures, the library's last look.
    pub status: super::status::Seen,
    /// The verifies clients asked for.
    pub verifies: super::verifies::Verifies,
    /// The key files' master keys the server holds.
    pub keys: super::keys::Keys,
}

/// What the server knows of its library when it starts.
pub struct Site {
    /// Drives of the library.
    pub drives: usize,
    /// Their lowest speed step in MB/s, where known.
    pub lowest_mb_s: Option<f64>,
}

impl Shared {
    /// The state of a server of `home`.
    pub fn new(
        home: PathBuf,
        (limits, queue_limits): (Limits, QueueLimits),
        tls: Arc<rustls::ServerConfig>,
        site: &Site,
    ) -> Self {
        let spool =
            (queue_limits.spool_dir.clone()).unwrap_or_else(|| home.join("server").join("spool"));
        Shared {
            backups: Backups::new(spool, queue_limits.spool_bytes),
            start_rate_mb_s: (queue_limits.start_rate_mb_s)
                .or(site.lowest_mb_s)
                .unwrap_or(0.0),
            home,
            limits,
            tls,
            metrics: Metrics::default(),
            active: AtomicUsize::new(0),
            queue: Queue::default(),
            queue_limits,
            drives: site.drives,
            status: Default::default(),
            verifies: Default::default(),
            keys: Default::default(),
        }
    }
}

/// Gives a connection's place back when its thread ends, however it ends.
struct Slot(Arc<Shared>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Serves connections until the process is stopped.
pub fn serve(listener: TcpListener, shared: Arc<Shared>) {
    for conn in listener.incoming() {
        let sock = match conn {
            Ok(s) => s,
            Err(e) => {
                // Out of descriptors, or a connection reset before it was taken:
                // wait a little rather than spin.
                server_log!("accept: {e}");
                std::thread::sleep(std::time::Duration::from_millis(100));
                continue;
            }
        };
        if shared.active.fetch_add(1, Ordering::AcqRel) >= shared.limits.max_connections {
            shared.active.fetch_sub(1, Ordering::AcqRel);
            shared.metrics.dropped();
            continue;
        }
        let slot = Slot(shared.clone());
        let spawned = std::thread::Builder::new()
            .name("connection".into())
            .spawn(move || handle(sock, &slot.0));
        if let Err(e) = spawned {
            shared.metrics.dropped();
            server_log!("start a connection's thread: {e}");
        }
    }
}

/// Serves one connection: its request, then its answer, then the close.
fn handle(sock: TcpStream, shared: &Arc<Shared>) {
    let Ok(peer) = sock.peer_addr() else {
        shared.metrics.dropped();
        return;
    };
    if let Err(e) = serve_one(sock, shared, peer) {
        shared.metrics.dropped();
        server_log!("{peer}: connection dropped: {e}");
    }
}

/// A connection's socket whose reads all end by one deadline: the TLS handshake
/// and the request together, however the client trickles its bytes.
pub struct Deadlined {
    sock: TcpStream,
    /// When the reads in progress must end.
    pub deadline: Instant,
}

/// A connection: TLS over the deadlined socket.
pub type Tls = rustls::StreamOwned<rustls::ServerConnection, Deadlined>;

impl io::Read for Deadlined {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "request not received in time",
            ));
        }
        self.sock.set_read_timeout(Some(left))?;
        match self.sock.read(buf) {
            // The socket's timeout (the deadline) passed: said as such, not as
            // "Resource temporarily unavailable".
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "request not received in time",
            )),
            r => r,
        }
    }
}

impl io::Write for Deadlined {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.sock.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.sock.flush()
    }
}

fn serve_one(sock: TcpStream, shared: &Arc<Shared>, peer: SocketAddr) -> io::Result<()> {
    let limits = shared.limits;
    let ctl = sock.try_clone()?;
    sock.set_write_timeout(Some(limits.timeout))?;
    sock.set_nodelay(true)?;
    let conn = rustls::ServerConnection::new(shared.tls.clone()).map_err(io::Error::other)?;
    let deadline = Instant::now() + limits.timeout;
    let mut tls = rustls::StreamOwned::new(conn, Deadlined { sock, deadline });
    let answer = match http::read_head(&mut tls, &limits) {
        Ok((req, length, rest)) => match route(shared, &mut tls, req, (length, rest), peer) {
            Ok(a) => a,
            Err(e) => Some(refused_request(e, peer)?),
        },
        Err(e) => Some(refused_request(e, peer)?),
    };
    // The answer has its own time: each write may take the timeout.
    tls.sock.deadline = Instant::now() + limits.timeout;
    match answer {
        Some(answer) => {
            shared.metrics.answered(answer.status);
            http::write_response(&mut tls, answer.status, answer.content_type, &answer.body)?;
        }
        None => shared.metrics.answered(200),
    }
    tls.conn.send_close_notify();
    // The close is a courtesy: a client that went away has its answer or not.
    let _ = tls.conn.complete_io(&mut tls.sock);
    linger(&ctl);
    Ok(())
}

/// The answer to a request that could not be read; none (the connection only
/// closed) when it broke off.
fn refused_request(e: HttpError, peer: SocketAddr) -> io::Result<Answer> {
    if let HttpError::Io(e) = e {
        return Err(e);
    }
    server_log!("{peer}: {e}");
    match e.status() {
        Some(status) => Ok(Answer::error(status, &e.to_string())),
        None => Err(io::Error::other(e.to_string())),
    }
}

/// Answers a request whose head was read: a stream's frames are read by the
/// backup they belong to, any other body whole first. None when the answer was
/// streamed as it was made (a restore's blocks).
fn route(
    shared: &Arc<Shared>,
    tls: &mut Tls,
    mut req: http::Request,
    (length, rest): (u64, Vec<u8>),
    peer: SocketAddr,
) -> Result<Option<Answer>, HttpError> {
    let cat = match Home::open_catalog_unlocked(&shared.home) {
        Ok(cat) => cat,
        Err(e) => {
            server_log!("open the catalog: {e}");
            return Ok(Some(Answer::error(503, "the catalog cannot be opened")));
        }
    };
    let path = req.path.trim_end_matches('/').to_string();
    let segments: Vec<&str> = path.split('/').collect();
    let backup_route = segments.get(..3) == Some(&["", "api", "backups"][..]);
    let streamed =
        req.method == "POST" && matches!(segments.as_slice(), [_, _, _, _, "streams", _]);
    // A job's deletions may be larger than other bodies: read once its token is known.
    let deletions = backup_route
        && req.method == "POST"
        && matches!(segments.as_slice(), [_, _, _, _, "deletions"]);
    let mut rest = Some(rest);
    if !(streamed || deletions) {
        let rest = rest.take().unwrap_or_default();
        req.body = http::read_body(tls, &shared.limits, length, rest)?;
    }
    if let ("GET", ["", "api", "jobs", id, "restore"]) = (req.method.as_str(), &segments[..]) {
        return Ok(match restores::serve(shared, (tls, peer), &req, &cat, id) {
            Served::Refused(a) => Some(a),
            Served::Streamed => None,
        });
    }
    if let ("GET", ["", "api", "sets", "restore"]) = (req.method.as_str(), &segments[..]) {
        return Ok(match restores::serve_set(shared, (tls, peer), &req, &cat) {
            Served::Refused(a) => Some(a),
            Served::Streamed => None,
        });
    }
    if let Some(a) = super::verifies::route(shared, &req, &cat, peer, &segments) {
        return Ok(Some(a));
    }
    if !backup_route {
        return Ok(Some(api::answer(&req, &cat, shared, peer)));
    }
    let token = match api::client(&req, &cat, &shared.metrics, peer) {
        Ok(t) => t,
        Err(a) => return Ok(Some(a)),
    };
    let client = token.name.as_str();
    // A base's tree is written as it is read, not held as one answer.
    if let ("GET", [_, _, _, id, "base"]) = (req.method.as_str(), segments.as_slice()) {
        return Ok(backups::base(shared, client, id, tls));
    }
    Ok(Some(match (req.method.as_str(), segments.as_slice()) {
        ("POST", [_, _, _]) => backups::begin(shared, client, &req.body),
        ("POST", [_, _, _, id, "admit"]) => backups::admit(shared, client, id),
        ("POST", [_, _, _, id, "streams", n]) => backups::receive(
            shared,
            client,
            (id, n),
            (tls, rest.take().unwrap_or_default()),
        ),
        ("GET", [_, _, _, id]) => backups::outcome(shared, client, id),
        ("POST", [_, _, _, id, "deletions"]) => backups::deletions(
            shared,
            client,
            id,
            (tls, length, rest.take().unwrap_or_default()),
        ),
        _ => Answer::error(404, &format!("no such resource: {}", req.path)),
    }))
}

/// Bytes of a refused request read and dropped after the answer, at most.
const LINGER_BYTES: usize = 1 << 20;

/// Closes the connection's sending side and reads what the client still sends (a
/// refused request's rest) for a second at most: closing with unread bytes would
/// reset the connection and could lose the answer before the client reads it.
fn linger(sock: &TcpStream) {
    let _ = sock.shutdown(std::net::Shutdown::Write);
    let until = Instant::now() + std::time::Duration::from_secs(1);
    let mut buf = [0u8; 16 * 1024];
    let mut read = 0;
    while read < LINGER_BYTES {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() || sock.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match (&*sock).read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => read += n,
        }
    }
}
