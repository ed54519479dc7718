//! tapeloom's S3 front end: buckets and objects over the S3 API, each operation
//! done by the operations layer (`tapeloom_ops::s3`), so a bucket's objects take
//! their pool's rules as every job does.
//!
//! The S3 surface itself (routing path-style and virtual-hosted requests,
//! checking SigV4 signatures in headers and presigned URLs, decoding every
//! payload form, the signed and unsigned `aws-chunked` bodies with their
//! trailers included, and writing each operation's XML) is the `s3s` crate's,
//! pinned at one release. It is kept behind this crate: only this crate names
//! it, and the rest of tapeloom sees [`serve`], [`Config`], the [`Service`]
//! with its [`Limits`], and the [`Watch`] it tells what it answers.
//!
//! Every request passes `gate.rs` before s3s reads it: the limits of its head,
//! and its place in the budget of control or of bulk requests.
//!
//! Each request's catalog work runs on a thread of tokio's blocking pool with a
//! connection of its own ([`tapeloom_ops::Conn`]); bodies are streamed to and
//! from the S3 stage's files ([`tapeloom_ops::s3::Store`]) without being held
//! whole in memory.

mod access;
mod body;
mod copy;
mod error;
mod front;
mod gate;
mod listing;
mod multipart;
mod peer;
mod restore;
mod shared;

pub use gate::{Budget, Limits, Unwatched, Watch, UNKNOWN};

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// What the S3 front end serves.
#[derive(Debug, Clone)]
pub struct Config {
    /// The server's home, whose catalog and S3 stage it uses.
    pub home: PathBuf,
    /// The domain of virtual-hosted addressing (`BUCKET.DOMAIN`); path-style
    /// only when none.
    pub domain: Option<String>,
    /// The restore windows and the restore cache's limit.
    pub restores: tapeloom_ops::s3::restores::Settings,
    /// The budgets of requests answered at once.
    pub limits: Limits,
}

/// Why the S3 front end cannot start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Its home could not be used.
    #[error(transparent)]
    Ops(#[from] tapeloom_ops::OpsError),
    /// `--s3-domain` is not a domain name.
    #[error("--s3-domain {0}: not a domain name")]
    BadDomain(String),
}

/// The S3 front end's service, for [`serve`]: s3s's, behind the limits and
/// budgets of `gate.rs`, telling what it answers to a [`Watch`].
#[derive(Clone)]
pub struct Service {
    s3: s3s::service::S3Service,
    gate: Arc<gate::Gate>,
    watch: Arc<dyn Watch>,
    /// On a site of several servers: this server's home and name, to find
    /// the server a request must be sent on to (`peer.rs`).
    site: Option<Arc<Site>>,
}

/// A server of a site, as its S3 front end sends requests on.
struct Site {
    home: PathBuf,
    me: String,
}

/// Which server holds what a request needs.
enum Holder {
    /// This one.
    Here,
    /// Another, up and serving S3 there.
    Peer(String, tapeloom_ops::site::S3Peer),
    /// Another, which does not answer S3 now.
    Away(String),
}

impl Site {
    /// Which server holds upload `id`'s parts; here when the upload is unknown
    /// (the operation answers NoSuchUpload).
    async fn upload_holder(&self, id: String) -> Holder {
        let home = self.home.clone();
        let found = tokio::task::spawn_blocking(move || {
            let conn = tapeloom_ops::Conn::open(&home)?;
            tapeloom_ops::s3::uploads::elsewhere(&conn, &id)
        })
        .await;
        match found {
            Ok(Ok(Some(server))) => self.holder(server).await,
            Ok(Ok(None)) => Holder::Here,
            Ok(Err(e)) => {
                tracing::warn!("S3: find an upload's server: {e}");
                Holder::Here
            }
            Err(e) => {
                tracing::warn!("S3: find an upload's server: {e}");
                Holder::Here
            }
        }
    }

    /// Server `server`, as this one reaches its S3 front end.
    async fn holder(&self, server: String) -> Holder {
        let (home, name) = (self.home.clone(), server.clone());
        let found = tokio::task::spawn_blocking(move || {
            let conn = tapeloom_ops::Conn::open(&home)?;
            tapeloom_ops::site::s3_peer(&conn, &name)
        })
        .await;
        match found {
            Ok(Ok(Some(p))) => Holder::Peer(server, p),
            Ok(Ok(None)) => Holder::Away(server),
            Ok(Err(e)) => {
                tracing::warn!("S3: find server {server}: {e}");
                Holder::Away(server)
            }
            Err(e) => {
                tracing::warn!("S3: find server {server}: {e}");
                Holder::Away(server)
            }
        }
    }
}

/// The S3 service of `config`, for hyper, telling `watch` what it answers; it
/// sweeps the S3 stage of the data files a killed server left first.
pub fn service(config: &Config, watch: Arc<dyn Watch>) -> Result<Service, Error> {
    let store = tapeloom_ops::s3::Store::open(&config.home)?;
    let conn = tapeloom_ops::Conn::open(&config.home)?;
    let site = tapeloom_ops::site::is_shared(&conn).then(|| {
        Arc::new(Site {
            home: config.home.clone(),
            me: tapeloom_ops::site::host(&conn),
        })
    });
    let swept = store.sweep(&conn)?;
    store.clear_scratch()?;
    if swept > 0 {
        tracing::info!(
            files = swept,
            "removed data files of uploads a stop cut short"
        );
    }
    let shared = Arc::new(shared::Shared {
        home: config.home.clone(),
        store,
        restores: config.restores,
    });
    let mut b = s3s::service::S3ServiceBuilder::new(front::Front(shared.clone()));
    b.set_auth(access::Keys(shared.clone()));
    b.set_access(access::Keys(shared));
    if let Some(domain) = &config.domain {
        s3s::host::SingleDomain::new(domain).map_err(|_| Error::BadDomain(domain.clone()))?;
        b.set_host(Domain(domain.to_ascii_lowercase()));
    }
    // A body s3s reads whole (XML) without a length in its head stops at the
    // same limit as one whose head gives it.
    let mut s3s_config = s3s::config::S3Config::default();
    s3s_config.xml_max_body_size = tapeloom_ops::s3::limits::MAX_XML_BYTES as usize;
    b.set_config(Arc::new(s3s::config::StaticConfigProvider::new(Arc::new(
        s3s_config,
    ))));
    Ok(Service {
        s3: b.build(),
        gate: Arc::new(gate::Gate::new(config.limits, config.domain.clone())),
        watch,
        site,
    })
}

/// Virtual-hosted addressing under one domain: a request to `BUCKET.DOMAIN`
/// (with or without a port) names its bucket in its host; a request to any
/// other host (the domain itself, `localhost`, an address) is path-style.
///
/// s3s's own `SingleDomain` compares the host with its port and takes any
/// other host for a bucket's own name (a CNAME), so that path-style requests to
/// `localhost:9000` would name a bucket `localhost:9000`.
struct Domain(String);

impl s3s::host::S3Host for Domain {
    fn parse_host_header<'a>(&'a self, host: &'a str) -> s3s::S3Result<s3s::host::VirtualHost<'a>> {
        let name = match host.rsplit_once(':') {
            Some((h, port)) if port.parse::<u16>().is_ok() => h,
            _ => host,
        };
        let bucket = (name.len() > self.0.len() + 1)
            .then(|| name.split_at(name.len() - self.0.len()))
            .filter(|(head, tail)| tail.eq_ignore_ascii_case(&self.0) && head.ends_with('.'))
            .map(|(head, _)| &head[..head.len() - 1]);
        Ok(match bucket {
            Some(b) => s3s::host::VirtualHost::new(self.0.as_str()).with_bucket(b),
            None => s3s::host::VirtualHost::new(name),
        })
    }
}

/// Whether `req` asks for `100 Continue`, and whether its body is empty.
fn expecting(req: &http::Request<hyper::body::Incoming>) -> (bool, bool) {
    let h = req.headers();
    let expects = (h.get(http::header::EXPECT))
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let empty = (h.get(http::header::CONTENT_LENGTH)).is_some_and(|v| v.as_bytes() == b"0")
        || !(h.contains_key(http::header::CONTENT_LENGTH)
            || h.contains_key(http::header::TRANSFER_ENCODING));
    (expects, empty)
}

impl Service {
    /// The answer to a request refused before s3s saw it: counted, its body
    /// (if any) read a little and dropped, its connection closed after it. The
    /// body of a request that waits for `100 Continue` is not read: its client
    /// sends none once it has the answer.
    fn refuse(
        &self,
        req: http::Request<hyper::body::Incoming>,
        name: &'static str,
        (code, message): (s3s::S3ErrorCode, &str),
    ) -> s3s::HttpResponse {
        let (expects, empty) = expecting(&req);
        let mut r = gate::refusal(code, message);
        self.watch.answered(name, r.status().as_u16());
        if !empty {
            if !expects {
                gate::drain(req.into_body());
            }
            let v = http::HeaderValue::from_static("close");
            r.headers_mut().insert(http::header::CONNECTION, v);
        }
        r
    }
}

/// Every S3 request passes here. It is classed, checked against the limits of
/// its head and given a place in its budget (`gate.rs`), then answered by
/// s3s; its answer is completed here as s3s cannot (a status, a storage class
/// in an error), and the connection is closed after answering a request that
/// asked for `100 Continue` when its body may be left unread: an empty body,
/// or a request refused (an answer other than 2xx), perhaps before its body
/// was read.
///
/// A client that asked for `100 Continue` and got a final answer instead sends
/// no body. hyper, which answered without reading the body, would read the
/// next request's first bytes as that body (the next request then arrives as
/// `ELETE /...` and fails its signature), and botocore keeps such an answer's
/// status line for the next request on the connection and then waits a minute
/// for it. Closing the connection makes the client open a new one, as RFC 9110
/// (section 10.1.1) lets a server do.
impl hyper::service::Service<http::Request<hyper::body::Incoming>> for Service {
    type Response = s3s::HttpResponse;
    type Error = s3s::HttpError;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>,
    >;

    fn call(&self, req: http::Request<hyper::body::Incoming>) -> Self::Future {
        let admitted = self.gate.admit(req.method(), req.uri(), req.headers());
        let gate::Admitted { class, place } = match admitted {
            Ok(a) => a,
            Err(r) => {
                if r.code == s3s::S3ErrorCode::SlowDown {
                    self.watch.slowed_down(r.class.budget);
                }
                let r = self.refuse(req, r.class.name, (r.code, &r.message));
                return Box::pin(async move { Ok(r) });
            }
        };
        let svc = self.clone();
        Box::pin(async move {
            let (r, name) = svc.answer(req, class.name).await?;
            svc.watch.answered(&name, r.status().as_u16());
            let watch = svc.watch.clone();
            Ok(r.map(|b| s3s::Body::http_body(gate::Counted::sent(b, watch, place))))
        })
    }
}

impl Service {
    /// The answer to an admitted request of class `class` (by the name its
    /// operation has once s3s named it): s3s's, or, on a site, that of the
    /// server the request is sent on to.
    async fn answer(
        &self,
        mut req: http::Request<hyper::body::Incoming>,
        class: &'static str,
    ) -> Result<(s3s::HttpResponse, String), s3s::HttpError> {
        let (expects, empty) = expecting(&req);
        let site = (self.site.clone()).filter(|_| !peer::was_forwarded(&req));
        let mut head = None;
        if let Some(site) = &site {
            match peer::upload_id(req.uri()) {
                Some(id) => match site.upload_holder(id).await {
                    Holder::Here => {}
                    holder => {
                        let req = req.map(|b| gate::Counted::received(b, self.watch.clone()));
                        return Ok((self.sent_on(site, holder, req).await, class.into()));
                    }
                },
                None if empty => head = Some(peer::Head::of(&req)),
                None => {}
            }
        }
        let named = gate::Named::default();
        req.extensions_mut().insert(named.clone());
        let watch = self.watch.clone();
        let req = req.map(|b| s3s::Body::http_body(gate::Counted::received(b, watch)));
        let mut r = self.s3.call(req).await?;
        let name = named.0.get().cloned().unwrap_or_else(|| class.into());
        if let Some(server) = r.headers_mut().remove(peer::PEER_MARK) {
            if let (Some(site), Some(head)) = (&site, head) {
                let server = String::from_utf8_lossy(server.as_bytes()).into_owned();
                let holder = site.holder(server).await;
                return Ok((self.sent_on(site, holder, head.request()).await, name));
            }
        }
        with_storage_class(&mut r);
        with_status(&mut r);
        if expects && (empty || !r.status().is_success()) {
            let v = http::HeaderValue::from_static("close");
            r.headers_mut().insert(http::header::CONNECTION, v);
        }
        Ok((r, name))
    }

    /// The answer of `holder` to `req`, sent on to it from `site`'s server;
    /// 503 ServiceUnavailable when it cannot be reached.
    async fn sent_on<B>(
        &self,
        site: &Site,
        holder: Holder,
        req: http::Request<B>,
    ) -> s3s::HttpResponse
    where
        B: http_body::Body<Data = bytes::Bytes> + Send + Sync + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let refused = |why: String| {
            tracing::warn!("S3: {why}");
            gate::refusal(s3s::S3ErrorCode::ServiceUnavailable, &why)
        };
        match holder {
            Holder::Here => refused("a request was sent on to this server itself".into()),
            Holder::Away(server) => refused(format!(
                "the data asked for is on server {server}, which does not answer S3 now"
            )),
            Holder::Peer(server, p) => match peer::forward((&server, &p), &site.me, req).await {
                Ok(r) => r.map(s3s::Body::http_body),
                Err(e) => refused(format!("the data asked for is on another server: {e}")),
            },
        }
    }
}

/// Moves the storage class an InvalidObjectState error carries in a header
/// ([`shared::not_restored`]) into its XML body, as `<StorageClass>`, where S3
/// sends it.
fn with_storage_class(r: &mut s3s::HttpResponse) {
    let Some(class) = r.headers_mut().remove(error::STORAGE_CLASS_MARK) else {
        return;
    };
    let Some(body) = r.body_mut().take_bytes() else {
        return;
    };
    let text = String::from_utf8_lossy(&body);
    let class = String::from_utf8_lossy(class.as_bytes());
    let with = text.replacen(
        "</Error>",
        &format!("<StorageClass>{class}</StorageClass></Error>"),
        1,
    );
    *r.body_mut() = s3s::Body::from(with);
    let xml = http::HeaderValue::from_static("application/xml");
    r.headers_mut().insert(http::header::CONTENT_TYPE, xml);
}

/// Sets the status an answer carries in a header ([`shared::STATUS_MARK`]):
/// s3s answers every operation that succeeds with 200, and RestoreObject must
/// answer 202 when a restore starts.
fn with_status(r: &mut s3s::HttpResponse) {
    let Some(v) = r.headers_mut().remove(shared::STATUS_MARK) else {
        return;
    };
    let code = std::str::from_utf8(v.as_bytes())
        .ok()
        .and_then(|s| s.parse().ok());
    if let Some(status) = code.and_then(|c: u16| http::StatusCode::from_u16(c).ok()) {
        *r.status_mut() = status;
    }
}

/// Serves S3 on `listener` until `stop` turns true: over TLS with `tls`, in
/// plain HTTP without it. Each connection is served by hyper (HTTP/1.1, and
/// HTTP/2 where the client asks for it). Once stopped it takes no connection,
/// lets each request under way finish (a connection then closes after its
/// answer, an idle one at once), and returns when every connection has closed
/// or `grace` has passed.
pub async fn serve(
    listener: tokio::net::TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    service: Service,
    mut stop: tokio::sync::watch::Receiver<bool>,
    grace: Duration,
) {
    let mut builder =
        hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
    // A client gets 30 s to send a request's head, and at most 100 headers.
    builder
        .http1()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .max_headers(100);
    builder
        .http2()
        .timer(hyper_util::rt::TokioTimer::new())
        .max_header_list_size(tapeloom_ops::s3::limits::MAX_HEADER_BYTES as u32 * 4);
    let builder = Arc::new(builder);
    // Each connection's task holds a clone: the count of clones is the count
    // of connections open, plus this one.
    let open = Arc::new(());
    loop {
        let (tcp, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!("S3: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = stopped(&mut stop) => break,
        };
        let (svc, builder, tls) = (service.clone(), builder.clone(), tls.clone());
        let (stop, open) = (stop.clone(), open.clone());
        tokio::spawn(async move {
            let r = match tls {
                Some(tls) => match tls.accept(tcp).await {
                    Ok(s) => connection(&builder, s, svc, stop).await,
                    Err(e) => {
                        tracing::debug!(peer = %peer, "S3: TLS: {e}");
                        return;
                    }
                },
                None => connection(&builder, tcp, svc, stop).await,
            };
            if let Err(e) = r {
                tracing::debug!(peer = %peer, "S3: connection: {e}");
            }
            drop(open);
        });
    }
    drop(listener);
    let until = tokio::time::Instant::now() + grace;
    while Arc::strong_count(&open) > 1 && tokio::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let left = Arc::strong_count(&open) - 1;
    if left > 0 {
        tracing::warn!(connections = left, "S3: connections still open are cut");
    } else {
        tracing::info!("S3: every connection has closed");
    }
}

/// Resolves once `stop` turns true (or its sender is gone).
async fn stopped(stop: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// How long a client may take to send a request's head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves one connection until it closes; once `stop` turns true, the request
/// under way finishes and the connection closes.
async fn connection<I>(
    builder: &hyper_util::server::conn::auto::Builder<hyper_util::rt::TokioExecutor>,
    io: I,
    svc: Service,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>>
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let conn = builder.serve_connection(hyper_util::rt::TokioIo::new(io), svc);
    tokio::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => r,
        _ = stopped(&mut stop) => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use s3s::host::S3Host;

    #[test]
    fn a_bucket_is_named_in_the_host_only_under_the_domain() {
        let d = Domain("s3.test".into());
        let bucket = |h: &str| d.parse_host_header(h).unwrap().bucket().map(str::to_string);
        assert_eq!(bucket("photos.s3.test:9000").as_deref(), Some("photos"));
        assert_eq!(bucket("a.b.S3.TEST").as_deref(), Some("a.b"));
        assert_eq!(bucket("s3.test:9000"), None);
        assert_eq!(bucket("localhost:9000"), None);
        assert_eq!(bucket("xs3.test"), None);
        assert_eq!(bucket(".s3.test"), None);
    }
}
