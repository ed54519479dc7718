//! TLS for the server and its clients: the server's certificate (given, or made
//! self-signed on first start and kept in the home), its SHA-256 fingerprint, and the
//! client's verifier, which accepts exactly the certificate whose fingerprint it was
//! given (pinning, as Proxmox Backup Server's clients do) instead of trusting
//! authorities.

use super::error::ServerError;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{ring as provider, CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The folder of the home that keeps the server's own certificate and key.
pub const SERVER_DIR: &str = "server";

/// A certificate's SHA-256 as colon-separated upper-case hex (`AB:CD:...`).
pub fn fingerprint(der: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, der);
    let hex: Vec<String> = d.as_ref().iter().map(|b| format!("{b:02X}")).collect();
    hex.join(":")
}

/// A fingerprint as given (with or without colons, either case) in the form
/// [`fingerprint`] writes.
pub fn parse_fingerprint(s: &str) -> Result<String, ServerError> {
    let hex: String = s.chars().filter(|c| *c != ':').collect();
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ServerError::BadFingerprint(s.to_string()));
    }
    let pairs: Vec<String> = hex
        .to_ascii_uppercase()
        .as_bytes()
        .chunks(2)
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    Ok(pairs.join(":"))
}

fn crypto() -> Arc<CryptoProvider> {
    Arc::new(provider::default_provider())
}

/// The server's certificate chain and key.
pub struct Identity {
    /// The chain, the server's own certificate first.
    pub certs: Vec<CertificateDer<'static>>,
    /// Its private key.
    pub key: PrivateKeyDer<'static>,
}

impl Identity {
    /// The SHA-256 fingerprint of the server's own certificate.
    pub fn fingerprint(&self) -> String {
        self.certs
            .first()
            .map_or_else(String::new, |c| fingerprint(c))
    }

    /// The rustls configuration that serves with this identity.
    pub fn server_config(self) -> Result<Arc<rustls::ServerConfig>, ServerError> {
        let c = rustls::ServerConfig::builder_with_provider(crypto())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(self.certs, self.key)?;
        Ok(Arc::new(c))
    }
}

fn read(path: &Path) -> Result<Vec<u8>, ServerError> {
    std::fs::read(path).map_err(|source| ServerError::Io {
        what: format!("read {}", path.display()),
        source,
    })
}

/// Loads a certificate chain and key from PEM files.
pub fn load(cert: &Path, key: &Path) -> Result<Identity, ServerError> {
    fn pem(path: &Path) -> impl Fn(rustls::pki_types::pem::Error) -> ServerError + '_ {
        move |source| ServerError::Pem {
            path: path.to_path_buf(),
            source,
        }
    }
    let certs = CertificateDer::pem_slice_iter(&read(cert)?)
        .collect::<Result<Vec<_>, _>>()
        .map_err(pem(cert))?;
    if certs.is_empty() {
        return Err(ServerError::NoPem {
            path: cert.to_path_buf(),
            what: "certificate",
        });
    }
    let key = PrivateKeyDer::from_pem_slice(&read(key)?).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => ServerError::NoPem {
            path: key.to_path_buf(),
            what: "private key",
        },
        e => pem(key)(e),
    })?;
    Ok(Identity { certs, key })
}

/// The home's own certificate and key (`HOME/server/cert.pem`, `key.pem`), made
/// self-signed on first use; the key is readable by its owner only.
pub fn home_identity(home: &Path) -> Result<Identity, ServerError> {
    let dir = home.join(SERVER_DIR);
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    if !cert.exists() || !key.exists() {
        generate(&dir, &cert, &key)?;
    }
    load(&cert, &key)
}

fn generate(dir: &Path, cert: &Path, key: &Path) -> Result<(), ServerError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let io = |what: String| move |source| ServerError::Io { what, source };
    std::fs::create_dir_all(dir).map_err(io(format!("create {}", dir.display())))?;
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| !h.is_empty());
    let names: Vec<String> = ["localhost".to_string()].into_iter().chain(host).collect();
    let made = rcgen::generate_simple_self_signed(names)?;
    let write = |path: &PathBuf, mode: u32, text: String| {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(mode)
            .open(path)
            .map_err(io(format!("create {}", path.display())))?;
        f.write_all(text.as_bytes())
            .and_then(|()| f.sync_all())
            .map_err(io(format!("write {}", path.display())))
    };
    // The key first: a certificate without its key would be taken as given.
    write(&key.to_path_buf(), 0o600, made.key_pair.serialize_pem())?;
    write(&cert.to_path_buf(), 0o644, made.cert.pem())
}

/// Accepts the one certificate whose fingerprint it holds; remembers the one it
/// was shown otherwise, so the refusal can name both.
#[derive(Debug)]
pub struct Pinned {
    expected: String,
    seen: Mutex<Option<String>>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl Pinned {
    /// A verifier that accepts the certificate of fingerprint `expected` (as
    /// [`parse_fingerprint`] returns it).
    pub fn new(expected: String) -> Arc<Self> {
        Arc::new(Pinned {
            expected,
            seen: Mutex::new(None),
            algorithms: crypto().signature_verification_algorithms,
        })
    }

    /// The refusal, when the server showed another certificate.
    pub fn mismatch(&self) -> Option<ServerError> {
        let seen = self
            .seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()?;
        Some(ServerError::WrongCertificate {
            expected: self.expected.clone(),
            got: seen,
        })
    }

    /// The rustls configuration of a client that trusts this certificate only.
    pub fn client_config(self: &Arc<Self>) -> Result<Arc<rustls::ClientConfig>, ServerError> {
        let c = rustls::ClientConfig::builder_with_provider(crypto())
            .with_safe_default_protocol_versions()?
            .dangerous()
            .with_custom_certificate_verifier(self.clone())
            .with_no_client_auth();
        Ok(Arc::new(c))
    }
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let got = fingerprint(end_entity);
        if got == self.expected {
            return Ok(ServerCertVerified::assertion());
        }
        *self.seen.lock().unwrap_or_else(|p| p.into_inner()) = Some(got);
        Err(rustls::Error::InvalidCertificate(
            rustls::CertificateError::ApplicationVerificationFailure,
        ))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_are_written_and_read_one_way() {
        let f = fingerprint(b"x");
        assert_eq!(f.len(), 32 * 3 - 1);
        assert_eq!(
            parse_fingerprint(&f.replace(':', "").to_lowercase()).unwrap(),
            f
        );
        assert!(matches!(
            parse_fingerprint("AB:CD"),
            Err(ServerError::BadFingerprint(_))
        ));
    }

    #[test]
    fn the_home_certificate_is_made_once_with_a_private_key() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let a = home_identity(d.path()).unwrap().fingerprint();
        let b = home_identity(d.path()).unwrap().fingerprint();
        assert_eq!(a, b);
        let key = d.path().join("server/key.pem");
        let mode = std::fs::metadata(key).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
