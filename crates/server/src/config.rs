//! The server's configuration: one TOML file (`--config`), each key documented in
//! docs/CONFIG.md; flags given on the command line win over the file.

use super::calendar::Calendar;
pub use crate::http::Limits;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tapeloom_format::Level;
use tapeloom_proto::ServerError;

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
    /// The scheduled jobs (`[[schedule]]`).
    #[serde(default)]
    pub schedule: Vec<Schedule>,
    /// The key files the server holds (`[[encryption_key]]`).
    #[serde(default)]
    pub encryption_key: Vec<KeyEntry>,
    /// The server among others on one catalog (`[site]`).
    #[serde(default)]
    pub site: FileSite,
    /// The S3 front end (`[s3]`).
    #[serde(default)]
    pub s3: FileS3,
}

/// `[s3]` as written: where the S3 front end listens (none: it is off).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileS3 {
    /// `ADDR:PORT` to serve S3 on.
    pub listen: Option<String>,
    /// Whether S3 is served over plain HTTP (for loopback, or a TLS proxy in
    /// front) rather than over TLS with the server's certificate.
    pub plain: Option<bool>,
    /// The domain of virtual-hosted addressing (`BUCKET.DOMAIN`).
    pub domain: Option<String>,
    /// The restore cache's limit in bytes.
    pub cache_bytes: Option<u64>,
    /// How long Standard restores gather before they are read, in seconds.
    pub standard_window_seconds: Option<u64>,
    /// How long Bulk restores gather before they are read, in seconds.
    pub bulk_window_seconds: Option<u64>,
    /// The order a batch of restores is read in: `planned` (the default),
    /// `block`, or `asked` (one after another, for comparison).
    pub restore_order: Option<String>,
    /// S3 control requests (all but uploads and downloads) answered at once.
    pub max_requests: Option<usize>,
    /// S3 bulk requests (PutObject, UploadPart, GetObject) answered at once.
    pub max_streams: Option<usize>,
    /// The most drives one batch's archive job takes (default: as many as
    /// are free).
    pub archive_drives: Option<usize>,
    /// The least bytes of each stream of a batch's archive job: a batch is
    /// cut into a stream per this many bytes, each on a free drive of its own.
    pub archive_stream_bytes: Option<u64>,
}

/// The S3 front end's settings in force.
#[derive(Debug, Clone)]
pub struct S3Settings {
    /// `ADDR:PORT` to serve S3 on.
    pub listen: String,
    /// Plain HTTP rather than TLS.
    pub plain: bool,
    /// The domain of virtual-hosted addressing.
    pub domain: Option<String>,
    /// The restore windows and the restore cache's limit.
    pub restores: tapeloom_ops::s3::restores::Settings,
    /// The budgets of requests answered at once.
    pub limits: tapeloom_s3::Limits,
    /// How batches are spread over drives.
    pub archive: tapeloom_ops::s3::tape::Spread,
}

/// `[site]` as written: how the server stands among the servers that share its
/// catalog (a PostgreSQL catalog; a home on SQLite is a site of one).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSite {
    /// The URL clients and the other servers reach this one at (default:
    /// `https://` and the address listened on).
    pub url: Option<String>,
    /// Seconds without a heartbeat after which a server is taken for dead
    /// (default 60).
    pub heartbeat_timeout_seconds: Option<u64>,
}

/// The site's settings in force.
#[derive(Debug, Clone)]
pub struct SiteSettings {
    /// The URL to tell; none: the address listened on.
    pub url: Option<String>,
    /// How long a silent server is waited for before it is taken for dead.
    pub timeout: Duration,
}

impl Default for SiteSettings {
    fn default() -> Self {
        SiteSettings {
            url: None,
            timeout: Duration::from_secs(60),
        }
    }
}

/// An `[[encryption_key]]`: a key file the server unlocks at its start.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyEntry {
    /// The key file (`tapeloom key create`).
    pub file: PathBuf,
    /// The file whose first line is its passphrase (to be mode 0600); none:
    /// `TAPELOOM_PASSPHRASE`.
    pub passphrase_file: Option<PathBuf>,
}

/// A `[[schedule]]`: a backup the server runs itself at the calendar's times, of
/// paths on its own host, recorded for `client`; or, with `verify`, a read-back
/// of a pool's jobs.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    /// The job's name; one schedule per name.
    pub name: String,
    /// When it runs (UTC).
    #[serde(deserialize_with = "calendar")]
    pub calendar: Calendar,
    /// The token name the jobs are recorded for: that client sees and restores them.
    #[serde(default)]
    pub client: String,
    /// The paths backed up, on the server's host.
    #[serde(default)]
    pub sources: Vec<PathBuf>,
    /// A read-back instead of a backup: `pool:NAME`, and `older-than:D` to read
    /// back only jobs not read back within D (`pool:NAME,older-than:90d`).
    #[serde(default, deserialize_with = "read_back")]
    pub verify: Option<ReadBack>,
    /// The backup set (default: the name).
    pub set: Option<String>,
    /// full (the default), incremental or differential.
    #[serde(default, deserialize_with = "level")]
    pub level: Level,
    /// The media pool (default: `default`).
    pub pool: Option<String>,
}

/// A schedule's fault besides its keys' syntax.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    /// Two schedules of one name.
    #[error("two schedules are named '{0}'")]
    Duplicate(String),
    /// A schedule that both backs up and reads back.
    #[error("schedule '{0}' has both sources and verify: a schedule backs up or reads back")]
    VerifyAndSources(String),
    /// A schedule without a name, client or sources.
    #[error("schedule '{name}' has no {what}")]
    Missing {
        /// The schedule.
        name: String,
        /// name, client or sources.
        what: &'static str,
    },
}

/// What a read-back schedule reads back.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadBack {
    /// The pool whose jobs are read back.
    pub pool: String,
    /// Only jobs not read back within this long.
    pub older_than: Option<std::time::Duration>,
}

fn read_back<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<ReadBack>, D::Error> {
    let text = String::deserialize(d)?;
    let bad = |why: &str| serde::de::Error::custom(format!("verify '{text}': {why}"));
    let (mut pool, mut older_than) = (None, None);
    for part in text.split(',').map(str::trim) {
        match part.split_once(':') {
            Some(("pool", name)) if !name.is_empty() => pool = Some(name.to_string()),
            Some(("older-than", d)) => {
                let d = tapeloom_proto::duration::parse(d).map_err(|e| bad(&e.to_string()))?;
                older_than = Some(d);
            }
            _ => return Err(bad("each part is pool:NAME or older-than:DURATION")),
        }
    }
    let pool = pool.ok_or_else(|| bad("it names no pool (pool:NAME)"))?;
    Ok(Some(ReadBack { pool, older_than }))
}

fn calendar<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Calendar, D::Error> {
    let text = String::deserialize(d)?;
    Calendar::parse(&text).map_err(|e| serde::de::Error::custom(format!("calendar '{text}': {e}")))
}

fn level<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Level, D::Error> {
    match String::deserialize(d)?.as_str() {
        "full" => Ok(Level::Full),
        "incremental" => Ok(Level::Incremental),
        "differential" => Ok(Level::Differential),
        other => Err(serde::de::Error::custom(format!(
            "level takes full, incremental or differential, not '{other}'"
        ))),
    }
}

/// Refuses schedules of one name, and schedules without a name, client or sources.
fn check(schedules: &[Schedule]) -> Result<(), ScheduleError> {
    let mut names = std::collections::HashSet::new();
    for s in schedules {
        let missing = |what| ScheduleError::Missing {
            name: s.name.clone(),
            what,
        };
        if s.name.is_empty() {
            return Err(missing("name"));
        }
        if s.verify.is_some() {
            if !s.sources.is_empty() {
                return Err(ScheduleError::VerifyAndSources(s.name.clone()));
            }
        } else if s.client.is_empty() {
            return Err(missing("client"));
        } else if s.sources.is_empty() {
            return Err(missing("sources"));
        }
        if !names.insert(s.name.as_str()) {
            return Err(ScheduleError::Duplicate(s.name.clone()));
        }
    }
    Ok(())
}

/// `[queue]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileQueue {
    /// Jobs of one client taken at once (receiving or writing).
    pub max_jobs_per_client: Option<usize>,
    /// Jobs taken at once per drive of the library (receiving or writing).
    pub max_jobs_per_drive: Option<usize>,
    /// The folder of the stage the server adds when the home has none (default
    /// HOME/stage): clients' blocks wait there for a drive.
    pub spool_dir: Option<PathBuf>,
    /// The size of that stage.
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
    /// The default stage's folder; none: HOME/stage.
    pub spool_dir: Option<PathBuf>,
    /// The default stage's size.
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

/// The longest `timeout_seconds`: a day.
const MAX_TIMEOUT_SECONDS: u64 = 86_400;

/// `[limits]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileLimits {
    /// Connections open at once.
    pub max_connections: Option<usize>,
    /// Control requests answered at once.
    pub max_requests: Option<usize>,
    /// Bulk requests (a stream's blocks, a restore's answer, a base's tree)
    /// answered at once.
    pub max_streams: Option<usize>,
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
    /// The scheduled jobs.
    pub schedules: Vec<Schedule>,
    /// The key files to unlock.
    pub keys: Vec<KeyEntry>,
    /// The site.
    pub site: SiteSettings,
    /// The S3 front end; none when it is off.
    pub s3: Option<S3Settings>,
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
        let file: File = toml::from_str(text)?;
        check(&file.schedule).map_err(serde::de::Error::custom)?;
        Ok(file)
    }

    /// The configuration in force: this file's settings, then `flags` over them.
    pub fn resolve(self, flags: File) -> Result<Config, ServerError> {
        let d = Limits::default();
        let l = self.limits;
        let limits = Limits {
            max_connections: l.max_connections.unwrap_or(d.max_connections),
            max_requests: l.max_requests.unwrap_or(d.max_requests),
            max_streams: l.max_streams.unwrap_or(d.max_streams),
            max_header_bytes: l.max_header_bytes.unwrap_or(d.max_header_bytes),
            max_body_bytes: l.max_body_bytes.unwrap_or(d.max_body_bytes),
            timeout: l.timeout_seconds.map_or(d.timeout, Duration::from_secs),
        };
        // A timeout is added to the clock for each connection's deadline: past a
        // day it would serve no purpose, and past what the clock holds it would
        // overflow.
        if limits.max_connections == 0
            || limits.max_requests == 0
            || limits.max_streams == 0
            || limits.max_header_bytes < 64
            || !(1..=MAX_TIMEOUT_SECONDS).contains(&limits.timeout.as_secs())
        {
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
        let site = SiteSettings {
            url: flags.site.url.or(self.site.url),
            timeout: (self.site.heartbeat_timeout_seconds)
                .map_or(SiteSettings::default().timeout, Duration::from_secs),
        };
        if !(1..=MAX_TIMEOUT_SECONDS).contains(&site.timeout.as_secs()) {
            return Err(ServerError::BadSite);
        }
        let (f, c) = (flags.s3, self.s3);
        let d = tapeloom_ops::s3::restores::Settings::default();
        let secs =
            |a: Option<u64>, b: Option<u64>, or: Duration| a.or(b).map_or(or, Duration::from_secs);
        let restores = tapeloom_ops::s3::restores::Settings {
            standard: secs(
                f.standard_window_seconds,
                c.standard_window_seconds,
                d.standard,
            ),
            bulk: secs(f.bulk_window_seconds, c.bulk_window_seconds, d.bulk),
            cache_bytes: f.cache_bytes.or(c.cache_bytes).unwrap_or(d.cache_bytes),
            order: match f.restore_order.or(c.restore_order) {
                None => d.order,
                Some(o) => tapeloom_ops::s3::restores::Order::named(&o)
                    .ok_or(ServerError::BadRestoreOrder(o))?,
            },
        };
        let dl = tapeloom_s3::Limits::default();
        let s3_limits = tapeloom_s3::Limits {
            max_requests: (f.max_requests.or(c.max_requests)).unwrap_or(dl.max_requests),
            max_streams: (f.max_streams.or(c.max_streams)).unwrap_or(dl.max_streams),
        };
        if s3_limits.max_requests == 0 || s3_limits.max_streams == 0 {
            return Err(ServerError::BadS3Limits);
        }
        let ds = tapeloom_ops::s3::tape::Spread::default();
        let archive = tapeloom_ops::s3::tape::Spread {
            drives: f.archive_drives.or(c.archive_drives),
            stream_bytes: (f.archive_stream_bytes.or(c.archive_stream_bytes))
                .unwrap_or(ds.stream_bytes),
        };
        if archive.drives == Some(0) || archive.stream_bytes == 0 {
            return Err(ServerError::BadS3Spread);
        }
        let s3 = f.listen.or(c.listen).map(|listen| S3Settings {
            listen,
            plain: f.plain.or(c.plain).unwrap_or(false),
            domain: f.domain.or(c.domain),
            restores,
            limits: s3_limits,
            archive,
        });
        Ok(Config {
            site,
            s3,
            queue,
            schedules: self.schedule,
            keys: self.encryption_key,
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
    fn the_s3_budgets_parse_flags_win_and_none_may_be_zero() {
        let f =
            File::parse("[s3]\nlisten = \"127.0.0.1:9000\"\nmax_requests = 7\nmax_streams = 3\n")
                .unwrap();
        let flags = File {
            s3: FileS3 {
                max_streams: Some(2),
                ..FileS3::default()
            },
            ..File::default()
        };
        let s3 = f.resolve(flags).unwrap().s3.unwrap();
        assert_eq!((s3.limits.max_requests, s3.limits.max_streams), (7, 2));
        let d = File::parse("[s3]\nlisten = \"127.0.0.1:9000\"\n").unwrap();
        let s3 = d.resolve(File::default()).unwrap().s3.unwrap();
        assert_eq!(s3.limits, tapeloom_s3::Limits::default());
        for zero in ["max_requests = 0", "max_streams = 0"] {
            let f = File::parse(&format!("[s3]\n{zero}\n")).unwrap();
            let r = f.resolve(File::default());
            assert!(matches!(r, Err(ServerError::BadS3Limits)), "{zero}");
        }
    }

    #[test]
    fn the_s3_archive_spread_parses_and_none_may_be_zero() {
        let f = File::parse(
            "[s3]\nlisten = \"127.0.0.1:9000\"\narchive_drives = 2\narchive_stream_bytes = 4096\n",
        )
        .unwrap();
        let s3 = f.resolve(File::default()).unwrap().s3.unwrap();
        assert_eq!(
            (s3.archive.drives, s3.archive.stream_bytes),
            (Some(2), 4096)
        );
        let d = File::parse("[s3]\nlisten = \"127.0.0.1:9000\"\n").unwrap();
        let s3 = d.resolve(File::default()).unwrap().s3.unwrap();
        assert_eq!(s3.archive, tapeloom_ops::s3::tape::Spread::default());
        for zero in ["archive_drives = 0", "archive_stream_bytes = 0"] {
            let f = File::parse(&format!("[s3]\n{zero}\n")).unwrap();
            let r = f.resolve(File::default());
            assert!(matches!(r, Err(ServerError::BadS3Spread)), "{zero}");
        }
    }

    #[test]
    fn the_site_keys_parse_and_a_timeout_of_nothing_is_refused() {
        let c = File::parse(
            "[site]\nurl = \"https://b.example.org:8407\"\nheartbeat_timeout_seconds = 5\n",
        )
        .unwrap()
        .resolve(File::default())
        .unwrap();
        assert_eq!(c.site.url.as_deref(), Some("https://b.example.org:8407"));
        assert_eq!(c.site.timeout, Duration::from_secs(5));
        let d = File::default().resolve(File::default()).unwrap();
        assert_eq!(
            (d.site.url, d.site.timeout),
            (None, Duration::from_secs(60))
        );
        let zero = File::parse("[site]\nheartbeat_timeout_seconds = 0\n").unwrap();
        assert!(matches!(
            zero.resolve(File::default()),
            Err(ServerError::BadSite)
        ));
    }

    #[test]
    fn encryption_keys_parse() {
        let c = File::parse(
            "[[encryption_key]]\nfile = \"/k1\"\npassphrase_file = \"/p1\"\n\
             [[encryption_key]]\nfile = \"/k2\"\n",
        )
        .unwrap()
        .resolve(File::default())
        .unwrap();
        let [a, b] = &c.keys[..] else {
            panic!("{:?}", c.keys)
        };
        assert_eq!(
            (&a.file, &a.passphrase_file),
            (&"/k1".into(), &Some("/p1".into()))
        );
        assert_eq!((&b.file, &b.passphrase_file), (&"/k2".into(), &None));
        assert!(File::parse("[[encryption_key]]\nfile = \"/k\"\npassphrase = \"x\"\n").is_err());
        assert!(File::parse("[[encryption_key]]\npassphrase_file = \"/p\"\n").is_err());
    }

    #[test]
    fn unknown_keys_are_refused() {
        let e = File::parse("listen = \"x\"\nlisten_port = 3\n").unwrap_err();
        assert!(e.message().contains("listen_port"), "{e}");
        assert!(File::parse("[limits]\nmax_conns = 3\n").is_err());
    }

    #[test]
    fn limits_out_of_range_are_refused() {
        for limits in [
            "max_connections = 0",
            "max_header_bytes = 63",
            "timeout_seconds = 0",
            "timeout_seconds = 86401",
            "timeout_seconds = 9223372036854775807",
        ] {
            let f = File::parse(&format!("[limits]\n{limits}\n")).unwrap();
            let r = f.resolve(File::default());
            assert!(matches!(r, Err(ServerError::BadLimits)), "{limits}");
        }
        let f = File::parse("[limits]\ntimeout_seconds = 86400\n").unwrap();
        let c = f.resolve(File::default()).unwrap();
        assert_eq!(c.limits.timeout, Duration::from_secs(86_400));
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

    const SCHEDULE: &str = "[[schedule]]\nname = \"nightly\"\ncalendar = \"mon..fri 02:00\"\n\
                            client = \"c1\"\nsources = [\"/srv/a\", \"/srv/b\"]\n";

    #[test]
    fn schedules_parse_with_their_defaults() {
        let text = format!(
            "{SCHEDULE}[[schedule]]\nname = \"weekly\"\ncalendar = \"weekly\"\n\
             client = \"c2\"\nsources = [\"/home\"]\nset = \"h\"\n\
             level = \"incremental\"\npool = \"offsite\"\n"
        );
        let c = File::parse(&text)
            .unwrap()
            .resolve(File::default())
            .unwrap();
        let [a, b] = &c.schedules[..] else {
            panic!("{:?}", c.schedules)
        };
        assert_eq!((a.name.as_str(), a.client.as_str()), ("nightly", "c1"));
        assert_eq!(a.calendar, Calendar::parse("mon..fri 02:00").unwrap());
        assert_eq!(
            a.sources,
            [PathBuf::from("/srv/a"), PathBuf::from("/srv/b")]
        );
        assert_eq!(
            (a.set.as_deref(), a.level, a.pool.as_deref()),
            (None, Level::Full, None)
        );
        assert_eq!(b.set.as_deref(), Some("h"));
        assert_eq!(
            (b.level, b.pool.as_deref()),
            (Level::Incremental, Some("offsite"))
        );
        assert!(File::default()
            .resolve(File::default())
            .unwrap()
            .schedules
            .is_empty());
    }

    #[test]
    fn a_bad_schedule_refuses_the_file_on_one_line() {
        let msg = |text: &str| {
            let e = File::parse(text).unwrap_err().message().trim().to_string();
            assert!(!e.contains('\n'), "{e}");
            e
        };
        let bad = SCHEDULE.replace("mon..fri", "mon..fry");
        assert_eq!(
            msg(&bad),
            "calendar 'mon..fry 02:00': 'fry' is not a weekday (mon, tue, wed, thu, fri, sat, sun)"
        );
        assert_eq!(
            msg(&format!("{SCHEDULE}{SCHEDULE}")),
            "two schedules are named 'nightly'"
        );
        assert!(msg(&format!("{SCHEDULE}owner = \"x\"\n")).contains("owner"));
        assert!(msg(&format!("{SCHEDULE}level = \"weekly\"\n")).contains("level takes full"));
        let none = SCHEDULE.replace("[\"/srv/a\", \"/srv/b\"]", "[]");
        assert_eq!(msg(&none), "schedule 'nightly' has no sources");
        assert!(msg(&SCHEDULE.replace("client = \"c1\"\n", "")).contains("client"));
        // A read-back: a pool, and what it is not.
        let rb = "[[schedule]]\nname = \"rb\"\ncalendar = \"daily\"\n";
        let f = File::parse(&format!("{rb}verify = \"pool:archive, older-than:90d\"\n")).unwrap();
        let s = &f.resolve(File::default()).unwrap().schedules[0];
        let want = ReadBack {
            pool: "archive".into(),
            older_than: Some(std::time::Duration::from_secs(90 * 86400)),
        };
        assert_eq!(s.verify.as_ref(), Some(&want));
        assert!(msg(&format!("{rb}verify = \"older-than:1d\"\n")).contains("names no pool"));
        assert!(msg(&format!("{rb}verify = \"pool:a,older-than:1y\"\n")).contains("unknown unit"));
        assert!(
            msg(&format!("{SCHEDULE}verify = \"pool:a\"\n")).contains("both sources and verify")
        );
    }
}
