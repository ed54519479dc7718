//! The listener: HTTP/1.1 on hyper, over tokio and tokio-rustls. At most
//! `max_connections` connections are open at once (more are closed at once); a
//! connection has the timeout for its TLS handshake and for each request's head,
//! and is dropped when it leaves an answer unread for as long. Each request is
//! answered on a thread of tokio's blocking pool (`crate::bridge`), within one of
//! two budgets: bulk requests (a stream's blocks, a restore's answer, a base's
//! tree), which may last hours, and control requests (everything else), so the
//! status page, `/metrics` and the queue answer whatever number of uploads run.
//!
//! It is the dispatcher: [`route`] gives each route the parts of the server's
//! state it uses (the jobs' [`Work`], the verifies, what the status page saw),
//! and no route imports this module.

use crate::admission;
use crate::api;
use crate::auth;
use crate::backups;
use crate::bridge::{Conn, Deadlined, Head};
use crate::http::{self, Answer, HttpError};
use crate::metrics::ThreadKind;
use crate::restores::{self, Served};
use crate::seen::Seen;
use crate::verifies;
use crate::verify_runs::Verifies;
use crate::work::Work;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tapeloom_proto::body::Chunks;
use tapeloom_proto::ServerError;
use tokio::net::TcpStream;
use tokio::sync::{oneshot, Semaphore};

/// What every connection's task shares: the state of the routes, each of which
/// takes the parts it uses, and the listener's own.
pub struct Shared {
    /// What the server's jobs share, with the home, the limits and the counters.
    work: Arc<Work>,
    /// The verifies clients asked for.
    verifies: Arc<Verifies>,
    /// What the status page saw: its rates' figures, the library's last look.
    seen: Seen,
    /// The TLS configuration.
    tls: Arc<rustls::ServerConfig>,
    /// Connections open.
    active: AtomicUsize,
    /// Control requests being answered.
    control: Arc<Semaphore>,
    /// Bulk requests being answered.
    bulk: Arc<Semaphore>,
}

impl Shared {
    /// The state of a server whose jobs share `work`, served over `tls`.
    pub fn new(work: Arc<Work>, tls: Arc<rustls::ServerConfig>) -> Self {
        let l = work.limits;
        Shared {
            work,
            verifies: Default::default(),
            seen: Default::default(),
            tls,
            active: AtomicUsize::new(0),
            control: Arc::new(Semaphore::new(l.max_requests)),
            bulk: Arc::new(Semaphore::new(l.max_streams)),
        }
    }
}

/// Gives a connection's place back when it ends, however it ends.
struct Slot(Arc<Shared>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Threads of tokio's own (the connections' tasks); the requests are answered on
/// its blocking pool.
const NET_THREADS: usize = 2;

/// How long the jobs let in may go on to their end once the server is told to
/// stop; those still running are then cut, and have [`CUT_GRACE`] to record it.
const DRAIN_GRACE: Duration = Duration::from_secs(20);
const CUT_GRACE: Duration = Duration::from_secs(8);

/// Serves connections until the process is told to stop (SIGTERM or SIGINT),
/// then drains: no new job is taken (503 with `Retry-After`), the jobs let in go
/// on for [`DRAIN_GRACE`], those still running are cut with what they wrote
/// recorded, and the server returns, all within 30 s.
pub fn serve(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    s3: Option<S3Front>,
) -> io::Result<()> {
    let l = shared.work.limits;
    // Each S3 request's catalog work and file I/O run on the blocking pool too.
    let s3_places = s3.as_ref().map_or(0, |f| {
        let b = f.limits;
        b.max_requests + b.max_streams
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(NET_THREADS)
        .max_blocking_threads(l.max_requests + l.max_streams + s3_places + 16)
        .thread_name("tapeloom-net")
        .enable_all()
        .build()?;
    rt.block_on(async {
        let stop = told_to_stop()?;
        let accepting = tokio::spawn(accept(listener, shared.clone()));
        let (s3_stop, stopped) = tokio::sync::watch::channel(false);
        let mut s3_serving = None;
        if let Some(front) = s3 {
            let tls = (!front.plain).then(|| tokio_rustls::TlsAcceptor::from(shared.tls.clone()));
            front.listener.set_nonblocking(true)?;
            let listener = tokio::net::TcpListener::from_std(front.listener)?;
            s3_serving = Some(tokio::spawn(tapeloom_s3::serve(
                listener,
                tls,
                front.service,
                stopped,
                DRAIN_GRACE,
            )));
        }
        let signal = stop.await;
        let _ = s3_stop.send(true);
        tracing::info!("{signal}: the server stops taking jobs and drains");
        let work = &shared.work;
        work.drain();
        if work.site.is_some() {
            // Its claims go back to the site's queue, for the other servers. The
            // catalog is worked on a blocking thread: PostgreSQL's client runs a
            // runtime of its own, which cannot start inside this one.
            let w = work.clone();
            let _ = tokio::task::spawn_blocking(move || {
                let Some(site) = &w.site else { return };
                match tapeloom_ops::Conn::open(&w.home) {
                    Ok(conn) => site.stop(&conn),
                    Err(e) => tracing::warn!("site: open the catalog: {e}"),
                }
            })
            .await;
        }
        admission::stop_admitting(work);
        // The S3 requests under way finish beside the jobs' drain.
        let s3_drained = async {
            if let Some(h) = s3_serving {
                let _ = h.await;
            }
        };
        tokio::join!(drain(work), s3_drained);
        accepting.abort();
        Ok::<(), io::Error>(())
    })?;
    // Requests still reading or writing (a client's stalled upload) are left.
    rt.shutdown_timeout(Duration::from_secs(1));
    tracing::info!("stopped");
    Ok(())
}

/// The S3 front end, bound: its listener, its service and its budgets.
pub(crate) struct S3Front {
    listener: std::net::TcpListener,
    addr: std::net::SocketAddr,
    plain: bool,
    service: tapeloom_s3::Service,
    limits: tapeloom_s3::Limits,
}

impl S3Front {
    /// Binds the S3 front end of home `dir` as `s` says, telling `watch` what
    /// it answers.
    pub(crate) fn bind(
        dir: &std::path::Path,
        s: &super::config::S3Settings,
        watch: Arc<dyn tapeloom_s3::Watch>,
    ) -> Result<S3Front, super::StartError> {
        let config = tapeloom_s3::Config {
            home: dir.to_path_buf(),
            domain: s.domain.clone(),
            restores: s.restores,
            limits: s.limits,
        };
        let service = tapeloom_s3::service(&config, watch)?;
        let listener =
            std::net::TcpListener::bind(&s.listen).map_err(|source| ServerError::Io {
                what: format!("listen for S3 on {}", s.listen),
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| ServerError::Io {
            what: "read the address S3 is served on".into(),
            source,
        })?;
        Ok(S3Front {
            listener,
            addr,
            plain: s.plain,
            service,
            limits: s.limits,
        })
    }

    /// Where clients reach it.
    pub(crate) fn url(&self) -> String {
        let scheme = if self.plain { "http" } else { "https" };
        format!("{scheme}://{}", self.addr)
    }

    /// Where the other servers of a site reach this S3 front end: its own
    /// address, or, when it listens on every address (`0.0.0.0`, `[::]`), the
    /// host of `site_url` (the URL the server registers for its clients) with
    /// the S3 port.
    pub(crate) fn site_url(&self, site_url: &str) -> String {
        let scheme = if self.plain { "http" } else { "https" };
        if !self.addr.ip().is_unspecified() {
            return self.url();
        }
        let after = site_url.split_once("://").map_or(site_url, |(_, r)| r);
        let authority = after.split('/').next().unwrap_or(after);
        let host = match authority.rsplit_once(':') {
            Some((h, p)) if p.parse::<u16>().is_ok() => h,
            _ => authority,
        };
        format!("{scheme}://{host}:{}", self.addr.port())
    }
}

/// Resolves at the first SIGTERM or SIGINT, with its name.
fn told_to_stop() -> io::Result<impl std::future::Future<Output = &'static str>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(std::future::poll_fn(move |cx| {
        if term.poll_recv(cx).is_ready() {
            return std::task::Poll::Ready("SIGTERM");
        }
        if int.poll_recv(cx).is_ready() {
            return std::task::Poll::Ready("SIGINT");
        }
        std::task::Poll::Pending
    }))
}

/// Waits for the jobs let in to end, for [`DRAIN_GRACE`] at most, and sooner
/// once every stream of every job not ended is on the stages (its clients have
/// nothing more to send) and no job of the S3 front end runs; then stops the rest where they are and waits
/// [`CUT_GRACE`] at most for their threads. A job stopped so keeps what it staged,
/// and the next start writes it (`writer::recover`).
async fn drain(work: &Arc<Work>) {
    let wait_for = |d: Duration, done: fn(&Work) -> bool| {
        let work = work.clone();
        async move {
            let until = tokio::time::Instant::now() + d;
            while !done(&work) && tokio::time::Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    wait_for(DRAIN_GRACE, |w| w.backups.all_staged() && s3_idle(w)).await;
    if work.backups.any_open() {
        work.halt();
        let w = work.clone();
        let why =
            "the server stopped (SIGTERM): the job goes on from the stages when it starts again";
        let _ = tokio::task::spawn_blocking(move || w.backups.halt_all(why)).await;
        wait_for(CUT_GRACE, |w| {
            !w.backups.any_open() || w.backups.all_halted()
        })
        .await;
    }
}

/// Whether no job of the S3 front end runs: its archiving and restoring
/// threads stop between two jobs, so the job of either that runs is waited
/// for as the clients' are.
fn s3_idle(w: &Work) -> bool {
    let live = w.queue.live();
    !live
        .iter()
        .any(|l| l.entry.client == crate::s3_tape::CLIENT)
}

/// Takes connections, each served by a task of its own.
async fn accept(listener: std::net::TcpListener, shared: Arc<Shared>) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let tls = tokio_rustls::TlsAcceptor::from(shared.tls.clone());
    loop {
        let (sock, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                // Out of descriptors, or a connection reset before it was taken:
                // wait a little rather than spin.
                tracing::error!("accept a connection: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        if shared.active.fetch_add(1, Ordering::AcqRel) >= shared.work.limits.max_connections {
            shared.active.fetch_sub(1, Ordering::AcqRel);
            shared.work.metrics.dropped();
            continue;
        }
        let slot = Slot(shared.clone());
        let tls = tls.clone();
        tokio::spawn(async move {
            let shared = &slot.0;
            if let Err(e) = connection(sock, peer, tls, shared).await {
                shared.work.metrics.dropped();
                tracing::info!(peer = %peer, "connection dropped: {e}");
            }
        });
    }
}

/// Serves one connection: its TLS handshake, then its requests.
async fn connection(
    sock: TcpStream,
    peer: SocketAddr,
    tls: tokio_rustls::TlsAcceptor,
    shared: &Arc<Shared>,
) -> io::Result<()> {
    let l = shared.work.limits;
    sock.set_nodelay(true)?;
    let stream = tokio::time::timeout(l.timeout, tls.accept(sock))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no TLS handshake in time"))??;
    let io = TokioIo::new(Deadlined::new(stream, l.timeout));
    let shared = shared.clone();
    let service = hyper::service::service_fn(move |req| respond(req, shared.clone(), peer));
    let parts = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(l.timeout)
        .max_header_size(l.max_header_bytes)
        .max_headers(http::MAX_HEADERS)
        // One request per connection, as the client makes them: a connection's
        // deadlines and its place among `max_connections` are its request's.
        .keep_alive(false)
        .serve_connection(io, service)
        .without_shutdown()
        .await
        .map_err(io::Error::other)?;
    linger(parts.io.into_inner()).await;
    Ok(())
}

/// Bytes of a refused request read and dropped after the answer, at most.
const LINGER_BYTES: usize = 1 << 20;

/// Closes the connection's sending side and reads what the client still sends (a
/// refused request's rest) for a second at most: closing with unread bytes would
/// reset the connection and could lose the answer before the client reads it.
async fn linger(mut io: Deadlined<tokio_rustls::server::TlsStream<TcpStream>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = io.shutdown().await;
    let until = tokio::time::Instant::now() + std::time::Duration::from_secs(1);
    let mut buf = vec![0u8; 16 * 1024];
    let mut read = 0;
    while read < LINGER_BYTES {
        match tokio::time::timeout_at(until, io.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => read += n,
            _ => return,
        }
    }
}

/// Whether a request is bulk: a stream's blocks, a restore's answer or a base's
/// tree, which may last as long as a backup.
fn bulk(method: &hyper::Method, path: &str) -> bool {
    let s: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    matches!(
        (method.as_str(), s.as_slice()),
        ("POST", ["", "api", "backups", _, "streams", _])
            | ("POST", ["", "api", "backups", _, "deletions"])
            | ("GET", ["", "api", "backups", _, "base"])
            | ("GET", ["", "api", "jobs", _, "restore"])
            | ("GET", ["", "api", "sets", "restore"])
    )
}

/// Answers one request on a thread of the blocking pool, within its budget.
async fn respond(
    req: hyper::Request<Incoming>,
    shared: Arc<Shared>,
    peer: SocketAddr,
) -> Result<hyper::Response<Chunks>, io::Error> {
    let (parts, body) = req.into_parts();
    let budget = match bulk(&parts.method, parts.uri.path()) {
        true => &shared.bulk,
        false => &shared.control,
    };
    let Ok(permit) = budget.clone().try_acquire_owned() else {
        shared.work.metrics.answered(503);
        let a = Answer::error(503, "the server is busy: try again in a second");
        return Ok(response(whole(a)));
    };
    let request = match http::Request::of(&parts) {
        Ok(r) => r,
        Err(e) => {
            let a = Answer::error(e.status().unwrap_or(400), &e.to_string());
            shared.work.metrics.answered(a.status);
            return Ok(response(whole(a)));
        }
    };
    let (tx, rx) = oneshot::channel();
    let conn = Conn::new(
        tokio::runtime::Handle::current(),
        body,
        tx,
        shared.work.limits.timeout,
    );
    tokio::task::spawn_blocking(move || {
        answer(&shared, conn, request, peer);
        drop(permit);
    });
    // No answer: the request could not be read (the client stalled or went
    // away), and the connection is closed without one.
    match rx.await {
        Ok(head) => Ok(response(head)),
        Err(_) => Err(io::Error::other("the request could not be read")),
    }
}

/// A whole answer's head.
fn whole(a: Answer) -> Head {
    Head {
        status: a.status,
        content_type: a.content_type,
        body: Chunks::whole(a.body),
    }
}

/// The response of `head`.
fn response(head: Head) -> hyper::Response<Chunks> {
    let mut r = hyper::Response::new(head.body);
    *r.status_mut() = hyper::StatusCode::from_u16(head.status)
        .unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    let h = r.headers_mut();
    h.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(head.content_type),
    );
    h.insert(
        hyper::header::CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("no-store"),
    );
    if head.status == 503 {
        h.insert(
            hyper::header::RETRY_AFTER,
            hyper::header::HeaderValue::from_static("1"),
        );
    }
    r
}

/// Routes `req` on this thread and answers it; a route that panics is answered
/// 500 and the server goes on.
fn answer(shared: &Arc<Shared>, mut conn: Conn, req: http::Request, peer: SocketAddr) {
    let routed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        route(shared, &mut conn, req, peer)
    }));
    let a = match routed {
        Ok(Ok(Some(a))) => a,
        Ok(Ok(None)) => {
            shared.work.metrics.answered(200);
            return;
        }
        Ok(Err(e)) => match refused_request(e, peer) {
            Some(a) => a,
            None => {
                shared.work.metrics.dropped();
                return;
            }
        },
        Err(_) => {
            shared.work.metrics.panicked(ThreadKind::Connection);
            tracing::error!(peer = %peer, "a request's answer panicked");
            Answer::error(500, "the server failed to answer: see its log")
        }
    };
    shared.work.metrics.answered(a.status);
    if conn.answered() {
        tracing::warn!(peer = %peer, "{}", String::from_utf8_lossy(&a.body));
    }
    conn.answer(a);
}

/// The answer to a request that could not be read; none (the connection only
/// closed) when it broke off.
fn refused_request(e: HttpError, peer: SocketAddr) -> Option<Answer> {
    tracing::warn!(peer = %peer, "{e}");
    e.status()
        .map(|status| Answer::error(status, &e.to_string()))
}

/// Answers a request whose head was read: a stream's frames are read by the
/// backup they belong to, any other body whole first. None when the answer was
/// streamed as it was made (a restore's blocks).
fn route(
    shared: &Arc<Shared>,
    conn: &mut Conn,
    mut req: http::Request,
    peer: SocketAddr,
) -> Result<Option<Answer>, HttpError> {
    let cat = match tapeloom_ops::Conn::open(&shared.work.home) {
        Ok(cat) => cat,
        Err(e) => {
            tracing::error!("open the catalog: {e}");
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
    if !(streamed || deletions) {
        req.body = http::read_body(conn, shared.work.limits.max_body_bytes, req.length)?;
    }
    let restoring = match (req.method.as_str(), &segments[..]) {
        ("GET", ["", "api", "jobs", id, "restore"]) => Some(Some(*id)),
        ("GET", ["", "api", "sets", "restore"]) => Some(None),
        _ => None,
    };
    if let Some(job) = restoring {
        return Ok(restore(shared, (conn, peer), &req, &cat, job));
    }
    let work = &shared.work;
    let verifying = (work, &shared.verifies);
    if let Some(a) = verifies::route(verifying, &req, &cat, peer, &segments) {
        return Ok(Some(a));
    }
    if !backup_route {
        return Ok(Some(api::answer(&req, &cat, (work, &shared.seen), peer)));
    }
    let token = match auth::client(&req, &cat, &work.metrics, peer) {
        Ok(t) => t,
        Err(a) => return Ok(Some(a)),
    };
    let client = token.name.as_str();
    // A base's tree is written as it is read, not held as one answer.
    if let ("GET", [_, _, _, id, "base"]) = (req.method.as_str(), segments.as_slice()) {
        return Ok(backups::base(work, client, id, conn));
    }
    Ok(Some(match (req.method.as_str(), segments.as_slice()) {
        ("POST", [_, _, _]) => backups::begin(work, client, &req.body),
        ("POST", [_, _, _, id, "admit"]) => backups::admit(work, client, id),
        ("POST", [_, _, _, id, "streams", n]) => {
            backups::receive(work, client, (id, n, req.param("from")), conn)
        }
        ("GET", [_, _, _, id, "streams", n]) => backups::stream_state(work, client, (id, n)),
        ("GET", [_, _, _, id]) => backups::outcome(work, client, id),
        ("POST", [_, _, _, id, "deletions"]) => {
            backups::deletions(work, client, id, (conn, req.length))
        }
        _ => Answer::error(404, &format!("no such resource: {}", req.path)),
    }))
}

/// Answers a job's restore (`job`) or a set's (none): streamed as it is read,
/// else the refusal.
fn restore(
    shared: &Shared,
    (conn, peer): (&mut Conn, SocketAddr),
    req: &http::Request,
    cat: &tapeloom_ops::Conn,
    job: Option<&str>,
) -> Option<Answer> {
    let work = &shared.work;
    let token = match auth::client(req, cat, &work.metrics, peer) {
        Ok(t) => t,
        Err(a) => return Some(a),
    };
    let from = (work.home.as_path(), &work.keys, work.site.as_ref());
    let served = match job {
        Some(id) => restores::serve(from, (conn, peer), req, (cat, &token), id),
        None => restores::serve_set(from, (conn, peer), req, (cat, &token)),
    };
    match served {
        Served::Refused(a) => Some(a),
        Served::Streamed => None,
    }
}
