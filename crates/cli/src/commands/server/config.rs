//! The server's configuration: one TOML file (`--config`), each key documented in
//! the README; flags given on the command line win over the file.

use crate::net::error::ServerError;
pub use crate::net::http::Limits;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The address served when neither the file nor `--listen` names one.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8407";

/// The configuration file as written. Unknown keys are refused.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct File {
    /// `ADDR:PORT` to listen on.
    pub listen: Option<String>,
    /// The certificate (PEM); with `key`.
    pub cert: Option<PathBuf>,
    /// The certificate's private key (PEM); with `cert`.
    pub key: Option<PathBuf>,
    /// The limits.
    #[serde(default)]
    pub limits: FileLimits,
}

/// `[limits]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileLimits {
    /// Connections served at once.
    pub max_connections: Option<usize>,
    /// Bytes of a request's line and headers.
    pub max_header_bytes: Option<usize>,
    /// Bytes of a request's body.
    pub max_body_bytes: Option<u64>,
    /// Seconds a connection may take to send its request or take its answer.
    pub timeout_seconds: Option<u64>,
}

/// The configuration in force.
#[derive(Debug, Clone)]
pub struct Config {
    /// `ADDR:PORT` to listen on.
    pub listen: String,
    /// The certificate and key given; none: the home's own, made on first start.
    pub cert: Option<(PathBuf, PathBuf)>,
    /// The limits.
    pub limits: Limits,
}

impl File {
    /// Reads and parses `path`.
    pub fn read(path: &Path) -> Result<File, ServerError> {
        let text = std::fs::read_to_string(path).map_err(|source| ServerError::Io {
            what: format!("read {}", path.display()),
            source,
        })?;
        Self::parse(&text).map_err(|e| ServerError::Config {
            path: path.to_path_buf(),
            reason: e.message().trim().replace('\n', " "),
        })
    }

    /// Parses the text of a configuration file.
    pub fn parse(text: &str) -> Result<File, toml::de::Error> {
        toml::from_str(text)
    }

    /// The configuration in force: this file's settings, then `flags` over them.
    pub fn resolve(self, flags: File) -> Result<Config, ServerError> {
        let d = Limits::default();
        let l = self.limits;
        let limits = Limits {
            max_connections: l.max_connections.unwrap_or(d.max_connections),
            max_header_bytes: l.max_header_bytes.unwrap_or(d.max_header_bytes),
            max_body_bytes: l.max_body_bytes.unwrap_or(d.max_body_bytes),
            timeout: l.timeout_seconds.map_or(d.timeout, Duration::from_secs),
        };
        if limits.max_connections == 0 || limits.max_header_bytes < 64 || limits.timeout.is_zero() {
            return Err(ServerError::BadLimits);
        }
        let cert = match (flags.cert.or(self.cert), flags.key.or(self.key)) {
            (Some(c), Some(k)) => Some((c, k)),
            (None, None) => None,
            _ => return Err(ServerError::CertWithoutKey),
        };
        Ok(Config {
            listen: flags
                .listen
                .or(self.listen)
                .unwrap_or_else(|| DEFAULT_LISTEN.to_string()),
            cert,
            limits,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_parses_and_flags_win() {
        let f = File::parse(
            "listen = \"0.0.0.0:1\"\ncert = \"/c\"\nkey = \"/k\"\n[limits]\n\
             max_connections = 3\nmax_header_bytes = 4096\nmax_body_bytes = 10\n\
             timeout_seconds = 2\n",
        )
        .unwrap();
        let flags = File {
            listen: Some("127.0.0.1:2".into()),
            ..File::default()
        };
        let c = f.resolve(flags).unwrap();
        assert_eq!(c.listen, "127.0.0.1:2");
        assert_eq!(c.cert, Some(("/c".into(), "/k".into())));
        assert_eq!(c.limits.max_connections, 3);
        assert_eq!(c.limits.max_header_bytes, 4096);
        assert_eq!(c.limits.max_body_bytes, 10);
        assert_eq!(c.limits.timeout, Duration::from_secs(2));
    }

    #[test]
    fn unknown_keys_are_refused() {
        let e = File::parse("listen = \"x\"\nlisten_port = 3\n").unwrap_err();
        assert!(e.message().contains("listen_port"), "{e}");
        assert!(File::parse("[limits]\nmax_conns = 3\n").is_err());
    }

    #[test]
    fn a_certificate_needs_its_key() {
        let f = File {
            cert: Some("/c".into()),
            ..File::default()
        };
        assert!(matches!(
            f.resolve(File::default()),
            Err(ServerError::CertWithoutKey)
        ));
    }
}
