//! A site's S3: every server of a site answers S3 for every bucket, but an
//! object's data (its stage file or its restored copy) and a multipart
//! upload's parts are on the disk of one server, the one that took the PUT or
//! read the restore (the catalog names it: the object's or the upload's
//! host). A request that needs those bytes is sent on to that server, and its
//! answer streamed back as it comes.
//!
//! - A request about a multipart upload (its query names an `uploadId`) is
//!   sent on, body and all, before it is read, when the upload is another
//!   server's.
//! - A request without a body (GET of an object, CopyObject) is answered here
//!   until the operations layer finds the data on another server
//!   ([`tapeloom_ops::s3::Refused::Elsewhere`]); then its head, kept for this,
//!   is sent on.
//!
//! A request is sent on exactly as the client sent it: its `Host` and its
//! signature are the client's, so the other server checks the client's key
//! itself (every server of a site has the same `s3-seal.key`). It carries
//! [`FORWARDED`], and a request that carries it is never sent on again. The
//! connection to the other server is TLS pinned to the certificate fingerprint
//! it registered, or plain HTTP when it serves S3 so (`--s3-plain`).
//!
//! hyper's client connection is used directly: one connection per request
//! sent on, as a site's servers are few and such requests are the exception.

use bytes::Bytes;
use std::sync::Arc;
use std::time::Duration;
use tapeloom_ops::site::S3Peer;

/// The header a request sent on by another server of the site carries: the
/// name of the server that sent it.
pub(crate) const FORWARDED: &str = "x-tapeloom-forwarded";

/// The header an error carries the name of the server that holds the data in,
/// on its way to [`crate::Service`], which sends the request on.
pub(crate) const PEER_MARK: &str = "x-tapeloom-peer";

/// How long connecting to another server and getting its answer's head may
/// take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Headers of one connection only, which are not sent on.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "upgrade",
];

/// Why a request could not be sent on.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PeerError {
    /// The other server's URL as registered does not read.
    #[error("server {server} registered the S3 URL {url}, which does not read")]
    BadUrl { server: String, url: String },
    /// Connecting, TLS or HTTP.
    #[error("server {server} ({url}): {why}")]
    Failed {
        server: String,
        url: String,
        why: String,
    },
}

/// The head of a request without a body, kept to be sent on.
#[derive(Debug, Clone)]
pub(crate) struct Head {
    method: http::Method,
    uri: http::Uri,
    headers: http::HeaderMap,
}

impl Head {
    /// The head of `req`.
    pub(crate) fn of<B>(req: &http::Request<B>) -> Head {
        Head {
            method: req.method().clone(),
            uri: req.uri().clone(),
            headers: req.headers().clone(),
        }
    }

    /// The request again, with an empty body.
    pub(crate) fn request(self) -> http::Request<s3s::Body> {
        let mut r = http::Request::new(s3s::Body::empty());
        *r.method_mut() = self.method;
        *r.uri_mut() = self.uri;
        *r.headers_mut() = self.headers;
        r
    }
}

/// Whether `req` was sent on by another server of the site.
pub(crate) fn was_forwarded<B>(req: &http::Request<B>) -> bool {
    req.headers().contains_key(FORWARDED)
}

/// The upload id the query of `uri` names, when it names one.
pub(crate) fn upload_id(uri: &http::Uri) -> Option<String> {
    let q = uri.query()?;
    q.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == "uploadId").then(|| {
            percent_encoding::percent_decode_str(v)
                .decode_utf8_lossy()
                .into_owned()
        })
    })
}

/// Sends `req` on to server `server` at `peer`, from server `me`; its answer.
pub(crate) async fn forward<B>(
    (server, peer): (&str, &S3Peer),
    me: &str,
    mut req: http::Request<B>,
) -> Result<http::Response<hyper::body::Incoming>, PeerError>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let failed = |why: String| PeerError::Failed {
        server: server.to_string(),
        url: peer.url.clone(),
        why,
    };
    let bad_url = || PeerError::BadUrl {
        server: server.to_string(),
        url: peer.url.clone(),
    };
    let (tls, authority) = match peer.url.split_once("://") {
        Some(("https", a)) => (true, a.trim_end_matches('/')),
        Some(("http", a)) => (false, a.trim_end_matches('/')),
        _ => return Err(bad_url()),
    };
    let host = match authority.rsplit_once(':') {
        Some((h, p)) if p.parse::<u16>().is_ok() => h.trim_start_matches('[').trim_end_matches(']'),
        _ => return Err(bad_url()),
    };
    // The request as the client sent it, over HTTP/1.1 in origin form, its
    // `Host` kept (HTTP/2 gives it in the URI only).
    if !req.headers().contains_key(http::header::HOST) {
        if let Some(a) = req.uri().authority() {
            let v = http::HeaderValue::from_str(a.as_str()).map_err(|_| bad_url())?;
            req.headers_mut().insert(http::header::HOST, v);
        }
    }
    let path = (req.uri().path_and_query()).map_or("/", http::uri::PathAndQuery::as_str);
    *req.uri_mut() = path.parse().map_err(|_| bad_url())?;
    *req.version_mut() = http::Version::HTTP_11;
    for h in HOP_BY_HOP {
        req.headers_mut().remove(*h);
    }
    let from = http::HeaderValue::from_str(me).map_err(|_| failed(format!("server name {me}")))?;
    req.headers_mut().insert(FORWARDED, from);
    let tcp = tokio::time::timeout(TIMEOUT, tokio::net::TcpStream::connect(authority))
        .await
        .map_err(|_| failed("no connection in time".into()))?
        .map_err(|e| failed(format!("connect: {e}")))?;
    let _ = tcp.set_nodelay(true);
    let answer = if tls {
        let pinned = tapeloom_proto::tls::Pinned::new(peer.fingerprint.clone());
        let config = pinned.client_config().map_err(|e| failed(e.to_string()))?;
        let name = tokio_rustls::rustls::pki_types::ServerName::try_from(host.to_string())
            .map_err(|_| bad_url())?;
        let io = tokio::time::timeout(
            TIMEOUT,
            tokio_rustls::TlsConnector::from(Arc::clone(&config)).connect(name, tcp),
        )
        .await
        .map_err(|_| failed("no TLS handshake in time".into()))?
        .map_err(|e| match pinned.mismatch() {
            Some(m) => failed(m.to_string()),
            None => failed(format!("TLS: {e}")),
        })?;
        send(io, req).await
    } else {
        send(tcp, req).await
    };
    answer.map_err(failed)
}

/// Sends `req` over the connection `io`; the answer's head, its body to come.
async fn send<I, B>(
    io: I,
    req: http::Request<B>,
) -> Result<http::Response<hyper::body::Incoming>, String>
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(io))
            .await
            .map_err(|e| format!("HTTP: {e}"))?;
    tokio::spawn(async move {
        // The connection ends with its request; its faults are the request's.
        let _ = conn.await;
    });
    tokio::time::timeout(TIMEOUT, sender.send_request(req))
        .await
        .map_err(|_| "no answer in time".to_string())?
        .map_err(|e| format!("HTTP: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upload_id_is_read_from_the_query() {
        let u = |s: &str| upload_id(&s.parse::<http::Uri>().unwrap());
        assert_eq!(
            u("/b/k?partNumber=2&uploadId=ab%2Bc").as_deref(),
            Some("ab+c")
        );
        assert_eq!(u("/b/k?uploads"), None);
        assert_eq!(u("/b/k"), None);
        assert_eq!(u("/b/k?xuploadId=1"), None);
    }
}
