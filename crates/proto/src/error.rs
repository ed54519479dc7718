//! What the server and its clients refuse, one variant per fault.

use std::path::PathBuf;

/// A fault of the server, or of a client talking to it.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// A file or socket operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The system's error.
        source: std::io::Error,
    },
    /// The configuration file does not parse, or holds an unknown key.
    #[error("configuration {}: {reason}", path.display())]
    Config {
        /// The file.
        path: PathBuf,
        /// The parser's message, on one line.
        reason: String,
    },
    /// A limit of nothing.
    #[error("limits: max_connections, max_requests and max_streams take a number from 1, timeout_seconds one from 1 to 86400, max_header_bytes one from 64")]
    BadLimits,
    /// A heartbeat timeout of nothing.
    #[error("site: heartbeat_timeout_seconds takes a number from 1 to 86400")]
    BadSite,
    /// An S3 restore order other than planned, block and asked.
    #[error("s3: restore_order takes planned, block or asked, not '{0}'")]
    BadRestoreOrder(String),
    /// An S3 budget of nothing.
    #[error("s3: max_requests and max_streams take a number from 1")]
    BadS3Limits,
    /// An S3 archive spread over no drive, or in streams of no byte.
    #[error("s3: archive_drives and archive_stream_bytes take a number from 1")]
    BadS3Spread,
    /// A queue limit of nothing.
    #[error("queue: max_jobs_per_client, max_jobs_per_drive and spool_bytes take a number from 1, start_rate_mb_s one from 0")]
    BadQueue,
    /// A certificate without its key, or a key without its certificate.
    #[error("a certificate needs its key and a key its certificate (--cert and --key)")]
    CertWithoutKey,
    /// A PEM file without what it should hold.
    #[error("{} holds no {what}", path.display())]
    NoPem {
        /// The file.
        path: PathBuf,
        /// A certificate or a private key.
        what: &'static str,
    },
    /// A PEM file that does not parse.
    #[error("{}: {source}", path.display())]
    Pem {
        /// The file.
        path: PathBuf,
        /// The parser's error.
        source: rustls::pki_types::pem::Error,
    },
    /// Making the self-signed certificate failed.
    #[error("make a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// rustls refused a configuration or a connection.
    #[error("TLS: {0}")]
    Tls(#[from] rustls::Error),
    /// A server address that is not `https://HOST:PORT`.
    #[error("--server takes https://HOST:PORT, not '{0}'")]
    BadUrl(String),
    /// A client without what it needs to reach the server.
    #[error("--server needs {0} (or ${1})")]
    Missing(&'static str, &'static str),
    /// A command that only a server answers, without one named.
    #[error("{0} asks a server: give --server https://HOST:PORT (or $TAPELOOM_SERVER)")]
    NoServer(&'static str),
    /// A fingerprint that is not 32 hex bytes.
    #[error(
        "--fingerprint takes the certificate's SHA-256 as 32 hex bytes (AB:CD:...), not '{0}'"
    )]
    BadFingerprint(String),
    /// The server's certificate is not the one pinned.
    #[error("the server's certificate has fingerprint {got}, not {expected}: refused")]
    WrongCertificate {
        /// The fingerprint given.
        expected: String,
        /// The server's.
        got: String,
    },
    /// The server answered with an error.
    #[error("the server refused: {message} (HTTP {status})")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// The error the server gave.
        message: String,
    },
    /// The server's answer is not HTTP or not the document expected.
    #[error("the server's answer is malformed: {0}")]
    BadAnswer(String),
    /// The base's tree the server sent does not read (`net::base`).
    #[error("the base's tree from the server: {0}")]
    Base(#[from] super::base::BaseError),
    /// The server's reading failed midway through its answer.
    #[error("the server's reading failed: {0}")]
    Failed(String),
    /// The job's cartridges sit in several libraries of the site: each server
    /// reads its part ([`crate::site::SplitRead`]).
    #[error("{}", .0.reason)]
    Split(Box<crate::site::SplitRead>),
    /// A command that is not served yet.
    #[error("{0} is not served by the server yet; run it on the server's machine")]
    NotServed(&'static str),
}
