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
    /// The job queue and its spool.
    #[serde(default)]
    pub queue: FileQueue,
}

/// `[queue]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileQueue {
    /// Jobs of one client taken at once (receiving or writing).
    pub max_jobs_per_client: Option<usize>,
    /// Jobs taken at once per drive of the library (receiving or writing).
    pub max_jobs_per_drive: Option<usize>,
    /// The folder clients' blocks wait in (default HOME/server/spool).
    pub spool_dir: Option<PathBuf>,
    /// Bytes the spool holds at most, memory and folder together.
    pub spool_bytes: Option<u64>,
    /// MB/s a client must send for its job to go to a drive before all its blocks
    /// are in (default: the drives' lowest speed step, where the library knows it).
    pub start_rate_mb_s: Option<f64>,
}

/// The queue's settings in force.
#[derive(Debug, Clone)]
pub struct QueueLimits {
    /// Jobs of one client taken at once.
    pub per_client: usize,
    /// Jobs taken at once per drive.
    pub per_drive: usize,
    /// The spool's folder; none: HOME/server/spool.
    pub spool_dir: Option<PathBuf>,
    /// The spool's size.
    pub spool_bytes: u64,
    /// The start rate in MB/s; none: the drives'.
    pub start_rate_mb_s: Option<f64>,
}

impl Default for QueueLimits {
    fn default() -> Self {
        QueueLimits {
            per_client: 4,
            per_drive: 16,
            spool_dir: None,
            spool_bytes: 16 << 30,
            start_rate_mb_s: None,
        }
    }
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
    /// The queue.
    pub queue: QueueLimits,
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
        let q = self.queue;
        let dq = QueueLimits::default();
        let queue = QueueLimits {
            per_client: q.max_jobs_per_client.unwrap_or(dq.per_client),
            per_drive: q.max_jobs_per_drive.unwrap_or(dq.per_drive),
            spool_dir: q.spool_dir,
            spool_bytes: q.spool_bytes.unwrap_or(dq.spool_bytes),
            start_rate_mb_s: q.start_rate_mb_s,
        };
        if queue.per_client == 0
            || queue.per_drive == 0
            || queue.spool_bytes == 0
            || queue
                .start_rate_mb_s
                .is_some_and(|r| !(r >= 0.0 && r.is_finite()))
        {
            return Err(ServerError::BadQueue);
        }
        Ok(Config {
            queue,
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
             timeout_seconds = 2\n[queue]\nmax_jobs_per_client = 1\n\
             max_jobs_per_drive = 5\nspool_dir = \"/s\"\nspool_bytes = 1000\n\
             start_rate_mb_s = 1.5\n",
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
        let q = c.queue;
        assert_eq!((q.per_client, q.per_drive, q.spool_bytes), (1, 5, 1000));
        assert_eq!(q.spool_dir, Some("/s".into()));
        assert_eq!(q.start_rate_mb_s, Some(1.5));
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
