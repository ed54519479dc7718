//! TLS to PostgreSQL, on the rustls (ring) that the server and its clients use.
//!
//! The URL's `sslmode` says whether TLS is used, as libpq reads it: `disable`
//! never, `prefer` (the default) when the server offers it, `require` always (the
//! connection fails when the server does not offer it). The server's certificate
//! is checked as libpq checks it: against the root certificates of the file
//! `PGSSLROOTCERT` names, or `~/.postgresql/root.crt`, when there is one (with
//! the host name, as `verify-full`); without such a file the connection is
//! encrypted but the certificate is taken as it is, as libpq's `require` takes it.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{ring, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::path::PathBuf;
use std::sync::Arc;

/// What connects to PostgreSQL with TLS when the URL asks for it.
pub(crate) type Connector = tokio_postgres_rustls::MakeRustlsConnect;

/// Why TLS to PostgreSQL could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// rustls refused its own configuration.
    #[error("TLS: {0}")]
    Config(#[source] rustls::Error),
    /// The root certificates' file could not be read as PEM.
    #[error("read the root certificates {path}: {source}")]
    Roots {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// A certificate of that file is not a root rustls takes.
    #[error("a root certificate of {path}: {source}")]
    Root {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        #[source]
        source: rustls::Error,
    },
}

/// The connector for PostgreSQL's connections.
pub(crate) fn connector() -> Result<Connector, TlsError> {
    let provider = Arc::new(ring::default_provider());
    let algorithms = provider.signature_verification_algorithms;
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Config)?;
    let config = match root_file() {
        Some(path) => {
            let mut roots = rustls::RootCertStore::empty();
            let certs = CertificateDer::pem_file_iter(&path)
                .and_then(|i| i.collect::<Result<Vec<_>, _>>())
                .map_err(|source| TlsError::Roots {
                    path: path.clone(),
                    source,
                })?;
            for c in certs {
                roots.add(c).map_err(|source| TlsError::Root {
                    path: path.clone(),
                    source,
                })?;
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Unverified(algorithms)))
            .with_no_client_auth(),
    };
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

/// `PGSSLROOTCERT`, else `~/.postgresql/root.crt` when it exists.
fn root_file() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PGSSLROOTCERT").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let home = std::env::var_os("HOME")?;
    let p = PathBuf::from(home).join(".postgresql/root.crt");
    p.exists().then_some(p)
}

/// Takes the server's certificate as it is, and checks only that the server
/// holds its key (the handshake's signatures): libpq's `require` without a root
/// certificate.
#[derive(Debug)]
struct Unverified(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}
