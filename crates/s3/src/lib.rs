//! tapeloom's S3 front end: buckets and objects over the S3 API, each operation
//! done by the operations layer (`tapeloom_ops::s3`), so a bucket's objects take
//! their pool's rules as every job does.
//!
//! The S3 surface itself (routing path-style and virtual-hosted requests,
//! checking SigV4 signatures in headers and presigned URLs, decoding every
//! payload form, the signed and unsigned `aws-chunked` bodies with their
//! trailers included, and writing each operation's XML) is the `s3s` crate's,
//! pinned at one release. It is kept behind this crate: only this crate names
//! it, and the rest of tapeloom sees [`serve`] and [`Config`].
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
mod listing;
mod multipart;
mod restore;
mod shared;

use std::path::PathBuf;
use std::sync::Arc;

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
}

/// The S3 front end's service, for [`serve`].
pub type Service = s3s::service::S3Service;

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

/// The S3 service of `config`, for hyper; it sweeps the S3 stage of the data
/// files a killed server left first.
pub fn service(config: &Config) -> Result<s3s::service::S3Service, Error> {
    let store = tapeloom_ops::s3::Store::open(&config.home)?;
    let conn = tapeloom_ops::Conn::open(&config.home)?;
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
    Ok(b.build())
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

/// The S3 service, which closes the connection after answering a request that
/// asked for `100 Continue` when its body may be left unread: an empty body, or
/// a request refused (an answer other than 2xx), perhaps before its body was
/// read.
///
/// A client that asked for `100 Continue` and got a final answer instead sends
/// no body. hyper, which answered without reading the body, would read the
/// next request's first bytes as that body (the next request then arrives as
/// `ELETE /...` and fails its signature), and botocore keeps such an answer's
/// status line for the next request on the connection and then waits a minute
/// for it. Closing the connection makes the client open a new one, as RFC 9110
/// (section 10.1.1) lets a server do.
#[derive(Clone)]
struct Closing(Service);

/// Whether `req` asks for `100 Continue`, and whether its body is empty.
fn expecting(req: &http::Request<hyper::body::Incoming>) -> (bool, bool) {
    let h = req.headers();
    let expects = (h.get(http::header::EXPECT))
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let empty = (h.get(http::header::CONTENT_LENGTH)).is_some_and(|v| v.as_bytes() == b"0");
    (expects, empty)
}

impl hyper::service::Service<http::Request<hyper::body::Incoming>> for Closing {
    type Response = s3s::HttpResponse;
    type Error = s3s::HttpError;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>,
    >;

    fn call(&self, req: http::Request<hyper::body::Incoming>) -> Self::Future {
        let (expects, empty) = expecting(&req);
        let answer = hyper::service::Service::call(&self.0, req);
        Box::pin(async move {
            let mut r = answer.await?;
            with_storage_class(&mut r);
            with_status(&mut r);
            if expects && (empty || !r.status().is_success()) {
                let v = http::HeaderValue::from_static("close");
                r.headers_mut().insert(http::header::CONNECTION, v);
            }
            Ok(r)
        })
    }
}

/// Moves the storage class an InvalidObjectState error carries in a header
/// ([`shared::not_restored`]) into its XML body, as `<StorageClass>`, where S3
/// sends it.
fn with_storage_class(r: &mut s3s::HttpResponse) {
    let Some(class) = r.headers_mut().remove(shared::STORAGE_CLASS_MARK) else {
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

/// Serves S3 on `listener` until `stop` is notified: over TLS with `tls`, in
/// plain HTTP without it. Each connection is served by hyper (HTTP/1.1, and
/// HTTP/2 where the client asks for it).
pub async fn serve(
    listener: tokio::net::TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    service: s3s::service::S3Service,
    stop: Arc<tokio::sync::Notify>,
) {
    let builder = Arc::new(hyper_util::server::conn::auto::Builder::new(
        hyper_util::rt::TokioExecutor::new(),
    ));
    loop {
        let (tcp, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!("S3: accept: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = stop.notified() => return,
        };
        let (svc, builder, tls) = (Closing(service.clone()), builder.clone(), tls.clone());
        tokio::spawn(async move {
            let r = match tls {
                Some(tls) => match tls.accept(tcp).await {
                    Ok(s) => {
                        let io = hyper_util::rt::TokioIo::new(s);
                        builder.serve_connection(io, svc).await
                    }
                    Err(e) => {
                        tracing::debug!(peer = %peer, "S3: TLS: {e}");
                        return;
                    }
                },
                None => {
                    let io = hyper_util::rt::TokioIo::new(tcp);
                    builder.serve_connection(io, svc).await
                }
            };
            if let Err(e) = r {
                tracing::debug!(peer = %peer, "S3: connection: {e}");
            }
        });
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
