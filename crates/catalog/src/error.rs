//! The catalog's error type.

use crate::db::DbError;
use std::path::PathBuf;

/// A catalog error: what was being done, and why it failed. Callers decide by variant;
/// a database's failure keeps the database's error as its source.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The catalog file could not be opened.
    #[error("open catalog {}: {source}", path.display())]
    Open {
        /// The catalog file.
        path: PathBuf,
        /// The database's error.
        #[source]
        source: DbError,
    },
    /// The PostgreSQL catalog could not be reached.
    #[error("connect to catalog {url}: {source}")]
    Connect {
        /// Its URL, without a password.
        url: String,
        /// PostgreSQL's error.
        #[source]
        source: DbError,
    },
    /// A catalog to copy into already holds rows of its own.
    #[error("the catalog to copy into is not empty: its {table} has {rows} rows")]
    NotEmpty {
        /// A table holding rows.
        table: String,
        /// How many.
        rows: u64,
    },
    /// A statement failed.
    #[error("catalog: {what}: {source}")]
    Database {
        /// What was being done, e.g. `record files`.
        what: &'static str,
        /// The database's error.
        #[source]
        source: DbError,
    },
    /// The catalog was written by a newer tapeloom, with a schema this one does not
    /// know.
    #[error("the catalog has schema version {found}; this tapeloom knows up to {known}")]
    SchemaTooNew {
        /// The catalog's schema version.
        found: i64,
        /// The newest schema version this tapeloom knows.
        known: i64,
    },
    /// A PostgreSQL database name to create that is not lowercase letters,
    /// digits and `_` (at most 63).
    #[error("{name:?} is not a database name of lowercase letters, digits and _ (at most 63)")]
    BadDatabaseName {
        /// The name given.
        name: String,
    },
    /// A catalog opened to read only whose schema is not this tapeloom's: it
    /// would have to be migrated, and nothing may be written.
    #[error("the catalog has schema version {found} and this tapeloom reads version {known}; on a read-only file system it cannot be migrated (open it once where it can be written)")]
    SchemaToMigrate {
        /// The catalog's schema version.
        found: i64,
        /// This tapeloom's schema version.
        known: i64,
    },
    /// A job's chain of bases in its set is broken: its base is no longer in the
    /// catalog.
    #[error("job {job} is relative to job {base}, which is no longer in the catalog")]
    BrokenChain {
        /// The job.
        job: i64,
        /// Its missing base.
        base: i64,
    },
    /// No job with this id.
    #[error("no job {id} in the catalog")]
    NoJob {
        /// The job id asked for.
        id: i64,
    },
    /// A volume was to be labelled anew, and it has not expired: its jobs are kept.
    #[error("volume {barcode} has not expired; it is not labelled anew")]
    NotExpired {
        /// Its barcode.
        barcode: String,
    },
    /// A job was to move to a copy that does not hold one of its segments.
    #[error("copy {copy_no} of job {job} does not hold the job's segment {seq}: the job stays where it is")]
    CopyMissesSegment {
        /// The job.
        job: i64,
        /// The copy.
        copy_no: u32,
        /// The segment it lacks.
        seq: u32,
    },
    /// No volume with this id.
    #[error("no volume {id} in the catalog")]
    NoVolume {
        /// The volume id asked for.
        id: i64,
    },
    /// The job has no segment with this volume sequence.
    #[error("job {job} has no segment {seq} in the catalog")]
    NoSegment {
        /// The job.
        job: i64,
        /// The volume sequence asked for.
        seq: u32,
    },
    /// A volume with this barcode is in the catalog already.
    #[error("volume {barcode} is in the catalog already")]
    VolumeExists {
        /// The barcode.
        barcode: String,
    },
    /// The job has a segment with this volume sequence already.
    #[error("job {job} has a segment {seq} in the catalog already")]
    SegmentExists {
        /// The job.
        job: i64,
        /// The volume sequence.
        seq: u32,
    },
    /// A stage with this path is in the catalog already.
    #[error("stage {} is in the catalog already", path.display())]
    StageExists {
        /// The stage's folder.
        path: PathBuf,
    },
    /// The catalog keeps stage paths as text; this one is not UTF-8.
    #[error("stage path {} is not UTF-8", path.display())]
    StagePathNotUtf8 {
        /// The path.
        path: PathBuf,
    },
    /// No stage with this id.
    #[error("no stage {id} in the catalog")]
    NoStage {
        /// The stage id asked for.
        id: i64,
    },
    /// The stage holds chunks whose blocks are not on tape yet.
    #[error("stage {} holds {chunks} chunks not yet on tape, of jobs {}", path.display(), list(jobs))]
    StageHoldsData {
        /// The stage's folder.
        path: PathBuf,
        /// Number of chunks not despooled.
        chunks: u64,
        /// Their jobs, in order.
        jobs: Vec<i64>,
    },
    /// The chunk is recorded already.
    #[error("chunk {seq} of job {job} stream {stream} is in the catalog already")]
    ChunkExists {
        /// The job.
        job: i64,
        /// The stream.
        stream: u16,
        /// The chunk's number within the stream.
        seq: u64,
    },
    /// No such chunk.
    #[error("no chunk {seq} of job {job} stream {stream} in the catalog")]
    NoChunk {
        /// The job.
        job: i64,
        /// The stream.
        stream: u16,
        /// The chunk's number within the stream.
        seq: u64,
    },
    /// A pool with this name exists already (`default` always does).
    #[error("pool {name} exists already")]
    PoolExists {
        /// The pool's name.
        name: String,
    },
    /// A pool name that cannot go in a volume label: 1 to 32 bytes of letters,
    /// digits, `.`, `_` and `-`.
    #[error("pool name '{name}' must be 1 to 32 letters, digits, '.', '_' or '-'")]
    BadPoolName {
        /// The name given.
        name: String,
    },
    /// No pool with this name.
    #[error("no pool {name}")]
    NoPool {
        /// The name asked for.
        name: String,
    },
    /// The cartridge is labelled into, or assigned to, another pool.
    #[error("cartridge {barcode} belongs to pool {pool}")]
    CartridgeInPool {
        /// The cartridge's barcode.
        barcode: String,
        /// The pool it belongs to.
        pool: String,
    },
    /// A token with this name exists already (revoked or not).
    #[error("token {name} exists already")]
    TokenExists {
        /// The token's name.
        name: String,
    },
    /// No token with this name.
    #[error("no token {name}")]
    NoToken {
        /// The name asked for.
        name: String,
    },
    /// A token name that is not 1 to 64 letters, digits, `.`, `_` or `-`.
    #[error("token name '{name}' must be 1 to 64 letters, digits, '.', '_' or '-'")]
    BadTokenName {
        /// The name given.
        name: String,
    },
    /// An S3 key with this name exists already (revoked or not).
    #[error("S3 key {name} exists already")]
    S3KeyExists {
        /// The key's name.
        name: String,
    },
    /// No S3 key with this name.
    #[error("no S3 key {name}")]
    NoS3Key {
        /// The name asked for.
        name: String,
    },
    /// A bucket with this name exists already.
    #[error("bucket {name} exists already")]
    BucketExists {
        /// The bucket's name.
        name: String,
    },
    /// The bucket holds objects or uploads.
    #[error("bucket {name} is not empty")]
    BucketNotEmpty {
        /// The bucket's name.
        name: String,
    },
}

/// Job ids as `1, 2, 3`.
fn list(jobs: &[i64]) -> String {
    let v: Vec<String> = jobs.iter().map(i64::to_string).collect();
    v.join(", ")
}

impl CatalogError {
    /// Whether the database failed because the disk (or the catalog's file system)
    /// is full.
    pub fn is_disk_full(&self) -> bool {
        match self {
            CatalogError::Open { source, .. } | CatalogError::Database { source, .. } => {
                source
                    .sqlite_code()
                    .is_some_and(|c| c.code == rusqlite::ErrorCode::DiskFull)
                    || source.postgres_code() == Some(&postgres::error::SqlState::DISK_FULL)
            }
            _ => false,
        }
    }
}

/// Result of catalog operations.
pub type Result<T> = std::result::Result<T, CatalogError>;

/// Names what a group of statements was doing when one of them failed.
pub(crate) trait Doing<T> {
    /// Wraps a database's error as [`CatalogError::Database`] with `what`.
    fn doing(self, what: &'static str) -> Result<T>;
}

impl<T> Doing<T> for crate::db::Result<T> {
    fn doing(self, what: &'static str) -> Result<T> {
        self.map_err(|source| CatalogError::Database { what, source })
    }
}

/// Whether `e` is the database refusing a row because of a UNIQUE or PRIMARY KEY
/// constraint: a row with that key is there already.
pub(crate) fn is_duplicate_key(e: &DbError) -> bool {
    e.sqlite_code().is_some_and(|f| {
        f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
            || f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
    }) || e.postgres_code() == Some(&postgres::error::SqlState::UNIQUE_VIOLATION)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error;

    #[test]
    fn an_sqlite_failure_says_what_was_done_and_keeps_its_cause() {
        let conn = crate::db::Conn::sqlite(rusqlite::Connection::open_in_memory().unwrap());
        let e = conn
            .execute("INSERT INTO nowhere VALUES (1)", crate::db::params![])
            .doing("record nothing")
            .unwrap_err();
        assert!(matches!(
            e,
            CatalogError::Database {
                what: "record nothing",
                ..
            }
        ));
        assert!(
            e.to_string()
                .starts_with("catalog: record nothing: no such table"),
            "{e}"
        );
        let source = e.source().expect("a cause");
        assert!(source.is::<DbError>(), "{source}");
        assert!(source.source().expect("SQLite's").is::<rusqlite::Error>());
    }
}
