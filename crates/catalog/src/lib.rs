//! The tapeloom catalog: what every job wrote and where, in one SQLite file.
//!
//! The schema is versioned with `PRAGMA user_version` and migrated forward on open
//! (`schema`). The database runs in WAL mode and every change is a transaction, so a
//! crash loses at most the rows of the job in flight; that job is marked `failed` by
//! [`Catalog::recover_interrupted`].
//!
//! [`Catalog`]'s methods are grouped by what they keep: `volumes`, `jobs` (with their
//! streams, segments and errors), `files` (with extents), `samples`, `health`,
//! `pools` (media pools and the cartridges assigned to them) and `stages` (disk
//! stages and the chunks spooled to them) and `tokens` (the server's clients);
//! `check` checks them all.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

use db::Conn;
use rusqlite::Connection;
use std::path::Path;

mod check;
mod copies;
mod copy;
pub mod db;
mod error;
mod files;
mod health;
mod hsm;
mod jobs;
mod moves;
mod pools;
mod readback;
mod s3;
mod s3_tape;
mod samples;
mod schema;
mod sets;
mod site;
mod stages;
mod state;
pub mod tls;
mod tokens;
mod volumes;

pub use check::{CheckReport, Problem, ProblemKind};
pub use copies::{copy_position, CopySegment, CopyState, JobCopy, Place};
pub use copy::Copied;
use error::Doing;
pub use error::{CatalogError, Result};
pub use files::{Extent, FileFacts, FileRow};
pub use hsm::{HsmFile, HsmRoot};
pub use jobs::{Job, JobVolume, Stream, INTERRUPTED, WAITS_ON_STAGE};
pub use moves::BlockMove;
pub use pools::{Pool, PoolKey, PoolRules, DEFAULT_POOL};
pub use readback::LastVerify;
pub use s3::{Batching, Bucket, NewObject, Part, Restore, S3Key, S3Object, Upload};
pub use s3_tape::{RestoreEnd, S3Waiting};
pub use samples::{Mark, Phase, RecallSample, Sample, Series};
pub use sets::{Tree, TreeFile};
pub use site::{Reaped, ServerRow, Ticket, TicketState};
pub use stages::{ChunkFilter, Stage, StageUse, StagedChunk};
pub use state::{ChunkState, JobState, UnknownState, VolumeState};
pub use tokens::Token;
pub use volumes::Volume;

/// A transaction that writes: `BEGIN IMMEDIATE`, which takes the write lock at
/// once, waiting for it under the busy timeout. A deferred transaction that
/// read first would fail at once, busy timeout or not, when another connection
/// wrote in between (the server's jobs each write through a connection of their
/// own).
fn write_tx(conn: &Conn) -> db::Result<db::Tx<'_>> {
    conn.write_tx()
}

/// A connection to the PostgreSQL server of `url`, with its configuration and
/// TLS connector. A password not in the URL is taken from `PGPASSWORD`, else
/// from the password file.
fn pg_connect(url: &str) -> Result<(postgres::Client, postgres::Config, tls::Connector)> {
    let fail = |source: db::DbError| CatalogError::Connect {
        url: redact(url),
        source,
    };
    let mut config: postgres::Config = url.parse().map_err(|e| fail(db::DbError::from(e)))?;
    if config.get_password().is_none() {
        if let Some(p) = std::env::var("PGPASSWORD")
            .ok()
            .or_else(|| passfile_password(&config))
        {
            config.password(p);
        }
    }
    let tls = tls::connector().map_err(|e| fail(db::DbError::Tls(Box::new(e))))?;
    let client = config
        .connect(tls.clone())
        .map_err(|e| fail(db::DbError::from(e)))?;
    Ok((client, config, tls))
}

/// The URI that opens the SQLite file at `path` as immutable (`file:` with the
/// characters a URI gives a meaning to escaped).
fn immutable_uri(path: &Path) -> String {
    use percent_encoding::{percent_encode, CONTROLS};
    use std::os::unix::ffi::OsStrExt;
    const IN_URI: &percent_encoding::AsciiSet = &CONTROLS.add(b'%').add(b'?').add(b'#');
    let escaped = percent_encode(path.as_os_str().as_bytes(), IN_URI);
    format!("file:{escaped}?immutable=1")
}

/// The catalog database.
pub struct Catalog {
    conn: Conn,
    /// The host this connection works for: its jobs and stages are the ones
    /// marked with this name (empty on a catalog one home keeps).
    host: String,
}

impl Catalog {
    /// Opens (creating when missing) the catalog at `path` and migrates its schema.
    pub fn open(path: &Path) -> Result<Self> {
        let conn = Connection::open(path).map_err(|source| CatalogError::Open {
            path: path.to_path_buf(),
            source: source.into(),
        })?;
        let setup = || -> rusqlite::Result<()> {
            conn.busy_timeout(std::time::Duration::from_secs(30))?;
            conn.pragma_update(None, "journal_mode", "WAL")?;
            conn.pragma_update(None, "synchronous", "NORMAL")?;
            conn.pragma_update(None, "foreign_keys", "ON")
        };
        setup()
            .map_err(db::DbError::from)
            .doing("set up the connection")?;
        let mut c = Catalog {
            conn: Conn::sqlite(conn),
            host: String::new(),
        };
        c.migrate()?;
        Ok(c)
    }

    /// Opens the catalog at `path` to read only, as a home on a read-only file
    /// system must be (a snapshot, a disaster-recovery copy): nothing is
    /// migrated or written, and every write fails. Without a write-ahead log
    /// beside it the file is taken as immutable, since nothing can change it;
    /// with one (a writer that did not close), the log is read too. The schema
    /// must be this tapeloom's own ([`CatalogError::SchemaToMigrate`]).
    pub fn open_read_only(path: &Path) -> Result<Self> {
        use rusqlite::OpenFlags;
        let fail = |source: rusqlite::Error| CatalogError::Open {
            path: path.to_path_buf(),
            source: source.into(),
        };
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI;
        let conn = match Path::new(&wal).exists() {
            true => Connection::open_with_flags(path, flags),
            false => Connection::open_with_flags(immutable_uri(path), flags),
        }
        .map_err(fail)?;
        (conn.busy_timeout(std::time::Duration::from_secs(30)))
            .map_err(db::DbError::from)
            .doing("set up the connection")?;
        let c = Catalog {
            conn: Conn::sqlite(conn),
            host: String::new(),
        };
        let (found, known) = (c.schema_version()?, schema::MIGRATIONS.len() as i64);
        if found != known {
            return Err(CatalogError::SchemaToMigrate { found, known });
        }
        Ok(c)
    }

    /// Connects to the PostgreSQL catalog at `url` (`postgresql://USER@HOST/DB`,
    /// or PostgreSQL's `key=value` form) and creates its tables when it has none.
    /// A password not in the URL is taken from `PGPASSWORD`, else from the password
    /// file (`PGPASSFILE`, default `~/.pgpass`), as PostgreSQL's own tools take it.
    pub fn connect(url: &str) -> Result<Self> {
        let (client, config, tls) = pg_connect(url)?;
        let mut c = Catalog {
            conn: Conn::postgres(client, config, tls),
            host: String::new(),
        };
        c.migrate()?;
        Ok(c)
    }

    /// Creates the empty PostgreSQL database `name` (lowercase letters, digits
    /// and `_`) on the server of `url`, as a user allowed to; the URL of the new
    /// database, for [`Catalog::connect`]. One server can so keep the catalogs
    /// of many homes (the end-to-end tests give each home its own).
    pub fn create_database(url: &str, name: &str) -> Result<String> {
        let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_';
        if name.is_empty() || name.len() > 63 || !name.chars().all(ok) {
            return Err(CatalogError::BadDatabaseName {
                name: name.to_string(),
            });
        }
        let (mut client, _, _) = pg_connect(url)?;
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .map_err(|e| CatalogError::Connect {
                url: redact(url),
                source: db::DbError::from(e),
            })?;
        let base = url.split('?').next().unwrap_or(url);
        let at = base
            .rfind('/')
            .filter(|i| base[..*i].ends_with(|c| c != '/'));
        Ok(match at {
            Some(i) => format!("{}/{name}{}", &base[..i], &url[base.len()..]),
            None => format!("{base}/{name}{}", &url[base.len()..]),
        })
    }

    /// Which database the catalog is in.
    pub fn dialect(&self) -> db::Dialect {
        self.conn.dialect()
    }

    /// Makes this connection work for host `name`: the jobs it begins and the
    /// stages it adds are marked with it, and the stages, staged jobs and
    /// interrupted jobs it finds are that host's only. Several servers share one
    /// catalog this way, each its own host.
    pub fn set_host(&mut self, name: &str) {
        self.host = name.to_string();
    }

    /// The host this connection works for (empty on a catalog one home keeps).
    pub fn host(&self) -> &str {
        &self.host
    }
}

/// The password the password file (`PGPASSFILE`, else `~/.pgpass`) gives the
/// first host, port, database and user of `config`: its first line of
/// `host:port:database:user:password` whose fields match (`*` matches any;
/// `\:` and `\\` stand for `:` and `\`).
fn passfile_password(config: &postgres::Config) -> Option<String> {
    let path = std::env::var_os("PGPASSFILE")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".pgpass")))?;
    let text = std::fs::read_to_string(path).ok()?;
    let host = match config.get_hosts().first() {
        Some(postgres::config::Host::Tcp(h)) => h.clone(),
        _ => "localhost".to_string(),
    };
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(5432)
        .to_string();
    let user = config.get_user().unwrap_or_default().to_string();
    let db = config
        .get_dbname()
        .map_or_else(|| user.clone(), str::to_string);
    let want = [host, port, db, user];
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(passfile_fields)
        .find(|f| f.len() == 5 && (0..4).all(|i| f[i] == "*" || f[i] == want[i]))
        .map(|f| f[4].clone())
}

/// The fields of a password file's line.
fn passfile_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let (Some(n), Some(f)) = (chars.next(), fields.last_mut()) {
                    f.push(n);
                }
            }
            ':' => fields.push(String::new()),
            c => {
                if let Some(f) = fields.last_mut() {
                    f.push(c);
                }
            }
        }
    }
    fields
}

/// `url` with its password (if it holds one) replaced by `***`, to be shown.
fn redact(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => match rest.split_once('@') {
            Some((user, host)) => match user.split_once(':') {
                Some((name, _)) => format!("{scheme}://{name}:***@{host}"),
                None => url.to_string(),
            },
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::params;

    thread_local! {
        /// Whether this thread's test runs on PostgreSQL (see [`both`]).
        static ON_POSTGRES: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    /// A new, empty catalog and a temporary folder (kept as long as it is): an
    /// SQLite file in the folder, or, for a test run by [`both`] on PostgreSQL, a
    /// new database of the test process's PostgreSQL server.
    pub(crate) fn scratch() -> (tempfile::TempDir, Catalog) {
        let dir = tempfile::tempdir().unwrap();
        if ON_POSTGRES.with(std::cell::Cell::get) {
            let server = tapeloom_testkit::postgres::server().unwrap();
            let url = server.database().unwrap();
            return (dir, Catalog::connect(&url).unwrap());
        }
        let c = Catalog::open(&dir.path().join("c.db")).unwrap();
        (dir, c)
    }

    /// Runs `body` with [`scratch`] giving PostgreSQL catalogs; without
    /// PostgreSQL the test says so and passes (or fails under the test command).
    pub(crate) fn on_postgres(body: impl FnOnce()) {
        use tapeloom_testkit::{need::need, postgres};
        if !need(postgres::server().map(|_| ())) {
            return;
        }
        ON_POSTGRES.with(|b| b.set(true));
        body();
    }

    #[test]
    fn postgresql_is_reached_over_tls_when_the_url_requires_it() {
        use tapeloom_testkit::{need::need, postgres};
        if !need(postgres::server().map(|_| ())) {
            return;
        }
        let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
        let server =
            postgres::Server::start_with_tls(&made.cert.pem(), &made.key_pair.serialize_pem())
                .unwrap();
        let url = format!("{}?sslmode=require", server.database().unwrap());
        let c = Catalog::connect(&url).unwrap();
        let ssl: bool = c
            .conn
            .query_row(
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                params![],
                |r| r.get(0),
            )
            .unwrap();
        assert!(ssl, "the connection is encrypted");
        assert_eq!(c.begin_job(1, "j", 1, 4096, &[]).unwrap(), 1);
        // A server that does not offer TLS is refused when the URL requires it.
        let plain = postgres::server().unwrap().database().unwrap();
        let refused = Catalog::connect(&format!("{plain}?sslmode=require"));
        assert!(
            matches!(refused, Err(CatalogError::Connect { .. })),
            "{:?}",
            refused.err()
        );
        server.stop().unwrap();
    }

    /// A test run twice, as `NAME::sqlite` and `NAME::postgres`: the catalog's
    /// behaviour is the same on both databases.
    macro_rules! both {
        ($(#[$m:meta])* fn $name:ident() $body:block) => {
            mod $name {
                #[allow(unused_imports)]
                use super::*;

                #[test]
                $(#[$m])*
                fn sqlite() $body

                #[test]
                $(#[$m])*
                fn postgres() {
                    crate::tests::on_postgres(|| $body)
                }
            }
        };
    }
    pub(crate) use both;

    /// A regular file at `path` in blocks `lbn` and `lbn + 1` of volume sequence 0.
    pub(crate) fn row(path: &str, lbn: u64) -> FileRow {
        FileRow {
            path: path.as_bytes().to_vec(),
            stream: 1,
            kind: 1,
            mode: 0o644,
            uid: 0,
            gid: 0,
            size: 10,
            mtime_ns: 5,
            start_seq: 0,
            start_lbn: lbn,
            start_off: 0,
            end_seq: 0,
            end_lbn: lbn + 1,
            crc: 7,
            link: vec![],
            ..FileRow::default()
        }
    }

    both! {
        fn jobs_files_and_prefixes() {
            let (_dir, c) = crate::tests::scratch();
            assert_eq!(c.schema_version().unwrap(), 27);
            let v = c
                .add_volume("TL0001L9", [3; 16], "default", 262144, 0)
                .unwrap();
            let j = c.begin_job(42, "n", 1, 262144, &[]).unwrap();
            c.add_job_volume(j, 0, 0, v.id, 2).unwrap();
            c.add_files(
                j,
                &[
                    row("a", 2),
                    row("a/b", 3),
                    row("a/b/c", 4),
                    row("a0", 5),
                    row("a.x", 6),
                    row("ab", 7),
                ],
            )
            .unwrap();
            let names = |p: Option<&str>| -> Vec<String> {
                c.files(j, p.map(|s| s.as_bytes()))
                    .unwrap()
                    .into_iter()
                    .map(|r| String::from_utf8(r.path).unwrap())
                    .collect()
            };
            assert_eq!(names(Some("a")), vec!["a", "a/b", "a/b/c"]);
            assert_eq!(names(Some("a/b")), vec!["a/b", "a/b/c"]);
            assert_eq!(names(None).len(), 6);
            assert_eq!(c.files_in_block(j, 0, 4).unwrap().len(), 2);
            assert_eq!(c.recover_interrupted().unwrap(), vec![j]);
            assert_eq!(c.job(j).unwrap().unwrap().status, JobState::Failed);
            assert_eq!(c.job_volumes(j).unwrap()[0].volume.barcode, "TL0001L9");
            assert_eq!(c.jobs_on_volume(v.id).unwrap(), 1);
            let ext = [
                Extent {
                    stream: 2,
                    seq: 0,
                    first_lbn: 9,
                    blocks: 4,
                    stream_offset: 0,
                },
                Extent {
                    stream: 1,
                    seq: 0,
                    first_lbn: 2,
                    blocks: 7,
                    stream_offset: 0,
                },
            ];
            c.add_extents(j, &ext).unwrap();
            assert_eq!(c.extents(j).unwrap(), vec![ext[1], ext[0]]);
        }
    }

    #[test]
    fn a_lost_postgresql_connection_is_made_again_between_statements() {
        use tapeloom_testkit::{need::need, postgres};
        if !need(postgres::server().map(|_| ())) {
            return;
        }
        let server = postgres::Server::start_new().unwrap();
        let url = server.database().unwrap();
        let c = Catalog::connect(&url).unwrap();
        let j = c.begin_job(1, "before", 0, 262144, &[]).unwrap();
        server.stop().unwrap();
        // While PostgreSQL is down, a statement fails at once.
        let e = c.job(j).unwrap_err();
        assert!(matches!(e, CatalogError::Database { .. }), "{e}");
        server.restart().unwrap();
        assert_eq!(c.job(j).unwrap().unwrap().name, "before");
        assert_eq!(c.begin_job(2, "after", 0, 262144, &[]).unwrap(), j + 1);
        server.stop().unwrap();
    }

    #[test]
    fn a_catalog_opened_to_read_only_reads_and_refuses_every_write() {
        let dir = tempfile::tempdir().unwrap();
        // A name a URI would take apart.
        let path = dir.path().join("a ?#%b.db");
        let c = Catalog::open(&path).unwrap();
        let j = c.begin_job(1, "kept", 0, 262144, &[]).unwrap();
        drop(c);
        let r = Catalog::open_read_only(&path).unwrap();
        assert_eq!(r.job(j).unwrap().unwrap().name, "kept");
        assert!(r.begin_job(2, "refused", 0, 262144, &[]).is_err());
        // A catalog of an older schema is not migrated.
        let old = Catalog::open(&dir.path().join("old.db")).unwrap();
        old.conn.execute_batch("PRAGMA user_version = 3").unwrap();
        drop(old);
        let e = Catalog::open_read_only(&dir.path().join("old.db")).err();
        assert!(
            matches!(e, Some(CatalogError::SchemaToMigrate { found: 3, .. })),
            "{e:?}"
        );
    }

    #[test]
    fn a_catalog_that_cannot_be_opened_keeps_sqlites_error_as_its_cause() {
        use std::error::Error;
        let dir = tempfile::tempdir().unwrap();
        let e = Catalog::open(&dir.path().join("missing/c.db"))
            .err()
            .expect("refused");
        assert!(matches!(e, CatalogError::Open { .. }), "{e:?}");
        assert!(e.to_string().starts_with("open catalog "), "{e}");
        let source = e.source().expect("a cause");
        assert!(source.is::<db::DbError>(), "{source}");
        let sqlite = source.source().expect("SQLite's error");
        assert!(sqlite.is::<rusqlite::Error>(), "{sqlite}");
    }

    both! {
        fn missing_and_duplicate_rows_are_variants() {
            let (_dir, c) = crate::tests::scratch();
            let v = c
                .add_volume("TL0001L9", [3; 16], "default", 262144, 0)
                .unwrap();
            assert_eq!(c.volume_by_barcode("TL0001L9").unwrap(), Some(v.clone()));
            assert!(matches!(
                c.add_volume("TL0001L9", [4; 16], "default", 262144, 0),
                Err(CatalogError::VolumeExists { barcode }) if barcode == "TL0001L9"
            ));
            let job = c.begin_job(1, "j", 0, 262144, &[]).unwrap();
            c.add_job_volume(job, 0, 0, v.id, 2).unwrap();
            assert!(matches!(
                c.add_job_volume(job, 0, 0, v.id, 9),
                Err(CatalogError::SegmentExists { job: j, seq: 0 }) if j == job
            ));
            assert!(matches!(
                c.end_job_volume(job, 1, 5),
                Err(CatalogError::NoSegment { job: j, seq: 1 }) if j == job
            ));
            assert!(matches!(
                c.finish_job(job + 1, JobState::Ok, 0, 0, 0.0, 0),
                Err(CatalogError::NoJob { id }) if id == job + 1
            ));
            assert!(matches!(
                c.set_volume_status(v.id + 1, VolumeState::Full),
                Err(CatalogError::NoVolume { id }) if id == v.id + 1
            ));
        }
    }

    both! {
        fn states_are_stored_as_their_words() {
            use std::error::Error;
            let (_dir, c) = crate::tests::scratch();
            let v = c
                .add_volume("TL0001L9", [3; 16], "default", 262144, 0)
                .unwrap();
            assert_eq!(v.status, VolumeState::Append);
            let j = c.begin_job(1, "j", 0, 262144, &[]).unwrap();
            let word =
                |sql: &str| -> String { c.conn.query_row(sql, params![], |r| r.get(0)).unwrap() };
            assert_eq!(word("SELECT status FROM jobs"), "running");
            c.finish_job(j, JobState::Partial, 1, 2, 3.0, 4).unwrap();
            assert_eq!(word("SELECT status FROM jobs"), "partial");
            // A job `catalog rebuild` salvaged from its blocks.
            c.finish_job(j, JobState::Salvaged, 1, 2, 3.0, 4).unwrap();
            assert_eq!(word("SELECT status FROM jobs"), "salvaged");
            assert_eq!(c.job(j).unwrap().unwrap().status, JobState::Salvaged);
            c.set_volume_status(v.id, VolumeState::Full).unwrap();
            assert_eq!(word("SELECT status FROM volumes"), "full");
            // Rows written as words by any tapeloom read back as states.
            c.conn
                .execute("UPDATE jobs SET status = 'ok'", params![])
                .unwrap();
            c.conn
                .execute("UPDATE volumes SET status = 'append'", params![])
                .unwrap();
            assert_eq!(c.job(j).unwrap().unwrap().status, JobState::Ok);
            assert_eq!(c.volumes().unwrap()[0].status, VolumeState::Append);
            // A word no tapeloom writes is an error that names it, down the cause chain.
            c.conn
                .execute("UPDATE jobs SET status = 'paused'", params![])
                .unwrap();
            let e = c.jobs().unwrap_err();
            assert!(matches!(e, CatalogError::Database { .. }), "{e:?}");
            let sqlite = e.source().expect("SQLite's error");
            let unknown = sqlite.source().expect("the word");
            assert_eq!(unknown.to_string(), "unknown job state \"paused\"");
        }
    }
}
