//! The schema: migrations applied in order on open, counted by `PRAGMA user_version`.

use crate::db::{params, Dialect};
use crate::error::{CatalogError, Doing, Result};
use crate::Catalog;

/// Migration `i` takes the schema from version `i` to `i + 1`. Append only: a catalog
/// that has run a migration never runs it again.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: the first schema.
    "
    CREATE TABLE volumes (
        id INTEGER PRIMARY KEY,
        barcode TEXT NOT NULL UNIQUE,
        uuid BLOB NOT NULL,
        pool TEXT NOT NULL,
        block_size INTEGER NOT NULL,
        labelled_ns INTEGER NOT NULL,
        status TEXT NOT NULL
    );
    CREATE TABLE jobs (
        id INTEGER PRIMARY KEY,
        tag INTEGER NOT NULL,
        name TEXT NOT NULL,
        started_ns INTEGER NOT NULL,
        ended_ns INTEGER,
        status TEXT NOT NULL,
        files INTEGER NOT NULL DEFAULT 0,
        bytes INTEGER NOT NULL DEFAULT 0,
        seconds REAL NOT NULL DEFAULT 0,
        block_size INTEGER NOT NULL
    );
    CREATE TABLE job_volumes (
        job_id INTEGER NOT NULL REFERENCES jobs(id),
        seq INTEGER NOT NULL,
        volume_id INTEGER NOT NULL REFERENCES volumes(id),
        first_lbn INTEGER NOT NULL,
        last_lbn INTEGER,
        PRIMARY KEY (job_id, seq)
    );
    CREATE TABLE streams (
        job_id INTEGER NOT NULL REFERENCES jobs(id),
        stream INTEGER NOT NULL,
        name TEXT NOT NULL,
        source BLOB NOT NULL,
        PRIMARY KEY (job_id, stream)
    );
    CREATE TABLE job_errors (
        job_id INTEGER NOT NULL REFERENCES jobs(id),
        path BLOB NOT NULL,
        reason TEXT NOT NULL
    );
    CREATE TABLE files (
        job_id INTEGER NOT NULL,
        path BLOB NOT NULL,
        stream INTEGER NOT NULL,
        type INTEGER NOT NULL,
        mode INTEGER NOT NULL,
        uid INTEGER NOT NULL,
        gid INTEGER NOT NULL,
        size INTEGER NOT NULL,
        mtime_ns INTEGER NOT NULL,
        start_seq INTEGER NOT NULL,
        start_lbn INTEGER NOT NULL,
        start_off INTEGER NOT NULL,
        end_seq INTEGER NOT NULL,
        end_lbn INTEGER NOT NULL,
        crc INTEGER NOT NULL,
        link BLOB NOT NULL,
        PRIMARY KEY (job_id, path)
    ) WITHOUT ROWID;
    ",
    // 2: where each stream's runs of consecutive blocks are (multiplexed jobs).
    "
    CREATE TABLE extents (
        job_id INTEGER NOT NULL REFERENCES jobs(id),
        stream INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        first_lbn INTEGER NOT NULL,
        blocks INTEGER NOT NULL,
        stream_offset INTEGER NOT NULL
    );
    CREATE INDEX extents_by_job ON extents (job_id, seq, first_lbn);
    ",
    // 3: the per-second measurements of a job, per stream and per drive.
    "
    CREATE TABLE samples (
        job_id INTEGER NOT NULL REFERENCES jobs(id),
        op TEXT NOT NULL,
        series TEXT NOT NULL,
        t_ms INTEGER NOT NULL,
        bytes INTEGER NOT NULL,
        pool_fill REAL NOT NULL,
        buffer_fill REAL,
        backhitches INTEGER NOT NULL,
        speed_mb_s REAL,
        PRIMARY KEY (job_id, op, series, t_ms)
    ) WITHOUT ROWID;
    ",
    // 4: what the drives said about each cartridge at the end of a job's mount.
    "
    CREATE TABLE drive_health (
        job_id INTEGER NOT NULL REFERENCES jobs(id),
        op TEXT NOT NULL,
        drive INTEGER NOT NULL,
        barcode TEXT NOT NULL,
        health TEXT NOT NULL
    );
    CREATE INDEX drive_health_by_job ON drive_health (job_id, op);
    ",
    // 5: when a job's drives were loading, positioning or writing the index.
    "
    CREATE TABLE marks (
        job_id INTEGER NOT NULL REFERENCES jobs(id),
        op TEXT NOT NULL,
        drive INTEGER,
        phase TEXT NOT NULL,
        from_ms INTEGER NOT NULL,
        to_ms INTEGER NOT NULL
    );
    CREATE INDEX marks_by_job ON marks (job_id, op);
    ",
    // 6: which drive's chain of cartridges each segment of a job belongs to (the
    // sequence number of the chain's first volume). Rows of older catalogs have none.
    "
    ALTER TABLE job_volumes ADD COLUMN chain INTEGER;
    ",
    // 7: disk stages, and the chunks of job streams spooled to them before tape.
    "
    CREATE TABLE stages (
        id INTEGER PRIMARY KEY,
        path TEXT NOT NULL UNIQUE,
        size_limit INTEGER NOT NULL,
        added_ns INTEGER NOT NULL
    );
    CREATE TABLE staged_chunks (
        job_id INTEGER NOT NULL,
        stream INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        stage_id INTEGER NOT NULL REFERENCES stages(id),
        file TEXT NOT NULL,
        first_block INTEGER NOT NULL,
        blocks INTEGER NOT NULL,
        stream_offset INTEGER NOT NULL,
        bytes INTEGER NOT NULL,
        state TEXT NOT NULL,
        created_ns INTEGER NOT NULL,
        PRIMARY KEY (job_id, stream, seq)
    ) WITHOUT ROWID;
    CREATE INDEX staged_chunks_by_stage ON staged_chunks (stage_id, state);
    ",
    // 8: chunks kept on their stage after they reached tape, until a time (ns since
    // the epoch); none for chunks whose file is gone. Rows of older catalogs have none.
    "
    ALTER TABLE staged_chunks ADD COLUMN keep_until_ns INTEGER;
    ",
    // 9: the chunk holding a stream's end (so a job finished after its process died
    // tells a stream that ended from one cut short, when all its chunks are on
    // tape), and the entries whose start left a full stage for tape before they
    // ended (a job that dies then cannot finish them from the stage).
    "
    ALTER TABLE staged_chunks ADD COLUMN last INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE stage_cuts (
        job_id INTEGER NOT NULL,
        stream INTEGER NOT NULL,
        path BLOB NOT NULL,
        PRIMARY KEY (job_id, stream, path)
    ) WITHOUT ROWID;
    ",
    // 10: an encrypted job's `JobKey` record (its data key, wrapped by the master
    // key whose fingerprint is kept beside it, hex). Older jobs have none.
    "
    ALTER TABLE jobs ADD COLUMN key_fingerprint TEXT;
    ALTER TABLE jobs ADD COLUMN job_key BLOB;
    ",
    // 11: why a volume was marked suspect (a write error, a TapeAlert flag), and
    // other events of its life, in order.
    "
    CREATE TABLE IF NOT EXISTS volume_notes (
        volume_id INTEGER NOT NULL,
        at_ns INTEGER NOT NULL,
        note TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS volume_notes_by_volume ON volume_notes (volume_id);
    ",
    // 12: media pools (retention in seconds, none to keep forever; at most so many
    // jobs on a volume; whether later jobs may append; write once) and the blank
    // cartridges assigned to a pool before they are labelled. The pool `default`
    // needs no row.
    "
    CREATE TABLE IF NOT EXISTS pools (
        name TEXT PRIMARY KEY,
        retention_s INTEGER,
        max_jobs_per_volume INTEGER,
        append INTEGER NOT NULL DEFAULT 1,
        worm INTEGER NOT NULL DEFAULT 0,
        created_ns INTEGER NOT NULL
    );
    CREATE TABLE IF NOT EXISTS pool_cartridges (
        barcode TEXT PRIMARY KEY,
        pool TEXT NOT NULL
    );
    ",
    // 13: a pool's key file, which encrypts the pool's jobs that name no other
    // (the path, absolute, and the master key's fingerprint, hex).
    "
    CREATE TABLE IF NOT EXISTS pool_keys (
        pool TEXT PRIMARY KEY,
        key_file TEXT NOT NULL,
        fingerprint TEXT NOT NULL
    );
    ",
    // 14: each volume's label generation (how many times the cartridge was
    // labelled before: recycled; a volume without a row is of generation 0), and
    // for an expired volume the latest end of the jobs it held (recycling takes the
    // oldest first).
    "
    CREATE TABLE IF NOT EXISTS volume_generations (
        volume_id INTEGER PRIMARY KEY,
        generation INTEGER NOT NULL,
        jobs_ended_ns INTEGER
    );
    ",
    // 15: backup sets: each job's set (none: its name), level and base job; each
    // file's change time and inode (none in older rows) and whether the row is a
    // regular file's metadata alone (its data in an earlier job of the set); and the
    // paths a job found deleted since its base; and the highest job id ever given,
    // so the id of a forgotten job is never given again.
    "
    ALTER TABLE jobs ADD COLUMN set_name TEXT;
    ALTER TABLE jobs ADD COLUMN level INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE jobs ADD COLUMN base_job INTEGER;
    ALTER TABLE files ADD COLUMN ctime_ns INTEGER;
    ALTER TABLE files ADD COLUMN ino INTEGER;
    ALTER TABLE files ADD COLUMN meta_only INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE IF NOT EXISTS deletions (
        job_id INTEGER NOT NULL,
        path BLOB NOT NULL,
        type INTEGER NOT NULL,
        PRIMARY KEY (job_id, path)
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS jobs_by_set ON jobs (set_name, id);
    CREATE TABLE IF NOT EXISTS id_floor (
        name TEXT PRIMARY KEY,
        last INTEGER NOT NULL
    );
    ",
    // 16: the server's tokens (a name, the SHA-256 of the token, never the token;
    // whether it is an admin's; when it was made and revoked), and the client (the
    // token's name) that ran each job; jobs run on the server's own machine have none.
    "
    CREATE TABLE tokens (
        name TEXT PRIMARY KEY,
        hash BLOB NOT NULL UNIQUE,
        admin INTEGER NOT NULL,
        created_ns INTEGER NOT NULL,
        revoked_ns INTEGER
    );
    ALTER TABLE jobs ADD COLUMN client TEXT;
    ",
    // 17: several servers on one catalog. Each job and each stage belongs to a host
    // (the home's name; empty on a catalog one home keeps); the servers of the
    // site, the cartridges each one's library holds, and the site's queue of
    // backups.
    "
    ALTER TABLE jobs ADD COLUMN host TEXT NOT NULL DEFAULT '';
    ALTER TABLE stages ADD COLUMN host TEXT NOT NULL DEFAULT '';
    CREATE TABLE servers (
        name TEXT PRIMARY KEY,
        url TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        libraries TEXT NOT NULL,
        started_s INTEGER NOT NULL,
        heartbeat_s INTEGER NOT NULL,
        state TEXT NOT NULL
    );
    CREATE TABLE server_cartridges (
        barcode TEXT NOT NULL,
        server TEXT NOT NULL,
        PRIMARY KEY (barcode, server)
    );
    CREATE TABLE site_queue (
        id INTEGER PRIMARY KEY,
        client TEXT NOT NULL,
        name TEXT NOT NULL,
        pool TEXT,
        doc BLOB NOT NULL,
        state TEXT NOT NULL,
        server TEXT,
        asked_s INTEGER NOT NULL,
        claimed_s INTEGER,
        job_id INTEGER,
        reason TEXT
    );
    CREATE INDEX site_queue_by_state ON site_queue (state, id);
    ",
    // 18: hierarchical storage. The folders tapeloom manages on each host, and
    // each managed file whose data went to tape: its state and the address of its
    // tape copy, as the file's own extended attribute holds them.
    "
    CREATE TABLE hsm_roots (
        host TEXT NOT NULL,
        path BLOB NOT NULL,
        pool TEXT NOT NULL,
        added_ns INTEGER NOT NULL,
        PRIMARY KEY (host, path)
    );
    CREATE TABLE hsm_files (
        host TEXT NOT NULL,
        path BLOB NOT NULL,
        state TEXT NOT NULL,
        job_id INTEGER NOT NULL,
        entry BLOB NOT NULL,
        size INTEGER NOT NULL,
        mtime_ns INTEGER NOT NULL,
        ctime_ns INTEGER NOT NULL,
        crc INTEGER NOT NULL,
        verified INTEGER NOT NULL,
        changed_ns INTEGER NOT NULL,
        PRIMARY KEY (host, path)
    );
    CREATE INDEX hsm_files_by_job ON hsm_files (job_id);
    ",
    // 19: the per-second samples of hierarchical storage's recalls, kept with
    // each job a recall read: files and bytes written back so far, and files
    // still waiting.
    "
    CREATE TABLE recall_samples (
        job_id INTEGER NOT NULL REFERENCES jobs(id),
        t_ms INTEGER NOT NULL,
        files INTEGER NOT NULL,
        bytes INTEGER NOT NULL,
        waiting INTEGER NOT NULL,
        PRIMARY KEY (job_id, t_ms)
    ) WITHOUT ROWID;
    ",
    // 20: further copies of jobs, each written block for block on other
    // cartridges, and the segments of each copy: which run of the original's
    // objects each holds, and where (docs/COPIES.md).
    "
    CREATE TABLE job_copies (
        job_id INTEGER NOT NULL REFERENCES jobs(id),
        copy_no INTEGER NOT NULL,
        pool TEXT NOT NULL,
        state TEXT NOT NULL,
        created_ns INTEGER NOT NULL,
        PRIMARY KEY (job_id, copy_no)
    ) WITHOUT ROWID;
    CREATE TABLE copy_segments (
        job_id INTEGER NOT NULL REFERENCES jobs(id),
        copy_no INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        volume_id INTEGER NOT NULL REFERENCES volumes(id),
        first_lbn INTEGER NOT NULL,
        orig_seq INTEGER NOT NULL,
        orig_first_lbn INTEGER NOT NULL,
        objects INTEGER,
        PRIMARY KEY (job_id, copy_no, seq)
    ) WITHOUT ROWID;
    CREATE INDEX copy_segments_by_volume ON copy_segments (volume_id);
    ",
    // 21: cartridges taken out of the library through its mail slots (`library
    // export`), and since when.
    "
    CREATE TABLE offsite (
        barcode TEXT PRIMARY KEY,
        since_ns INTEGER NOT NULL
    );
    ",
    // 22: each job's last read-back (`verify`): when, what it found, and how it
    // was run.
    "
    CREATE TABLE job_verifies (
        job_id INTEGER PRIMARY KEY REFERENCES jobs(id),
        at_ns INTEGER NOT NULL,
        ok INTEGER NOT NULL,
        blocks INTEGER NOT NULL,
        bad_blocks INTEGER NOT NULL,
        how TEXT NOT NULL
    );
    ",
    // 23: the pool each pool's jobs are copied to once they end
    // (`pool create --copy-to`).
    "
    CREATE TABLE pool_copies (
        pool TEXT PRIMARY KEY,
        copy_pool TEXT NOT NULL
    );
    ",
    // 24: jobs moved off their own cartridges (`migrate`, `repack`): the copy that
    // stands in for them, and since when; and the share of a pool's cartridge
    // taken by expired jobs from which `repack --pool` reclaims it.
    "
    CREATE TABLE job_moves (
        job_id INTEGER PRIMARY KEY REFERENCES jobs(id),
        copy_no INTEGER NOT NULL,
        moved_ns INTEGER NOT NULL
    );
    CREATE TABLE pool_reclaims (
        pool TEXT PRIMARY KEY,
        percent INTEGER NOT NULL
    );
    ",
    // 25: the S3 front end: its access keys (the secret sealed with a key file
    // the home keeps outside the catalog), its buckets and the pool of each, its
    // objects (a deleted one keeps its row until its tape space comes back) and
    // the multipart uploads in progress with their parts.
    "
    CREATE TABLE s3_keys (
        access_key TEXT PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        sealed BLOB NOT NULL,
        buckets TEXT NOT NULL,
        created_ns INTEGER NOT NULL,
        revoked_ns INTEGER
    );
    CREATE TABLE s3_buckets (
        name TEXT PRIMARY KEY,
        pool TEXT NOT NULL,
        created_ns INTEGER NOT NULL
    );
    CREATE TABLE s3_objects (
        id INTEGER PRIMARY KEY,
        bucket TEXT NOT NULL,
        key BLOB NOT NULL,
        size INTEGER NOT NULL,
        etag TEXT NOT NULL,
        class TEXT NOT NULL,
        meta TEXT NOT NULL,
        file TEXT NOT NULL,
        created_ns INTEGER NOT NULL,
        deleted_ns INTEGER
    );
    CREATE UNIQUE INDEX s3_objects_live ON s3_objects (bucket, key) WHERE deleted_ns IS NULL;
    CREATE TABLE s3_uploads (
        id TEXT PRIMARY KEY,
        bucket TEXT NOT NULL,
        key BLOB NOT NULL,
        class TEXT NOT NULL,
        meta TEXT NOT NULL,
        created_ns INTEGER NOT NULL
    );
    CREATE TABLE s3_parts (
        upload TEXT NOT NULL,
        number INTEGER NOT NULL,
        size INTEGER NOT NULL,
        etag TEXT NOT NULL,
        meta TEXT NOT NULL,
        file TEXT NOT NULL,
        PRIMARY KEY (upload, number)
    );
    ",
    // 26: the S3 front end's tape side: how each bucket's objects are gathered
    // into archive jobs (a batch closes on age, count or size), the job that
    // holds each object on tape, when its disk copy was released, and its
    // restore (asked, then restored into the restore cache until an expiry).
    "
    ALTER TABLE s3_buckets ADD COLUMN batch_age_s INTEGER NOT NULL DEFAULT 300;
    ALTER TABLE s3_buckets ADD COLUMN batch_objects INTEGER NOT NULL DEFAULT 10000;
    ALTER TABLE s3_buckets ADD COLUMN batch_bytes INTEGER NOT NULL DEFAULT 4294967296;
    ALTER TABLE s3_objects ADD COLUMN job_id INTEGER;
    ALTER TABLE s3_objects ADD COLUMN released_ns INTEGER;
    ALTER TABLE s3_objects ADD COLUMN restore_asked_ns INTEGER;
    ALTER TABLE s3_objects ADD COLUMN restore_days INTEGER;
    ALTER TABLE s3_objects ADD COLUMN restore_tier TEXT;
    ALTER TABLE s3_objects ADD COLUMN restored_file TEXT;
    ALTER TABLE s3_objects ADD COLUMN restored_until_ns INTEGER;
    ALTER TABLE s3_objects ADD COLUMN restored_used_ns INTEGER;
    CREATE INDEX s3_objects_to_archive ON s3_objects (id) WHERE job_id IS NULL AND deleted_ns IS NULL;
    CREATE INDEX s3_objects_restoring ON s3_objects (restore_asked_ns) WHERE restore_asked_ns IS NOT NULL;
    ",
    // 27: the S3 front end on a site of several servers. Each object and each
    // upload names the server whose disk holds its data (its host, as jobs and
    // stages do); an object deleted or replaced through another server keeps
    // the names of the data files its host must still remove; and each server
    // says where it serves S3, so that the others can send requests on to it.
    "
    ALTER TABLE s3_objects ADD COLUMN host TEXT NOT NULL DEFAULT '';
    ALTER TABLE s3_objects ADD COLUMN left_files TEXT;
    ALTER TABLE s3_uploads ADD COLUMN host TEXT NOT NULL DEFAULT '';
    ALTER TABLE servers ADD COLUMN s3_url TEXT;
    CREATE INDEX s3_objects_left ON s3_objects (host) WHERE left_files IS NOT NULL;
    ",
];

/// The migrations of a PostgreSQL catalog past [`POSTGRES_SCHEMA`]: the one at
/// index `i` makes version `POSTGRES_SCHEMA_VERSION + i + 1`, as the SQLite
/// migration of that number does.
const POSTGRES_MIGRATIONS: &[&str] = &[
    // 17: as SQLite's 17; a stage's path is unique on its host.
    "
    ALTER TABLE jobs ADD COLUMN host TEXT NOT NULL DEFAULT '';
    ALTER TABLE stages ADD COLUMN host TEXT NOT NULL DEFAULT '';
    ALTER TABLE stages DROP CONSTRAINT stages_path_key;
    ALTER TABLE stages ADD CONSTRAINT stages_host_path_key UNIQUE (host, path);
    CREATE TABLE servers (
        name TEXT PRIMARY KEY,
        url TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        libraries TEXT NOT NULL,
        started_s BIGINT NOT NULL,
        heartbeat_s BIGINT NOT NULL,
        state TEXT NOT NULL
    );
    CREATE TABLE server_cartridges (
        barcode TEXT NOT NULL,
        server TEXT NOT NULL,
        PRIMARY KEY (barcode, server)
    );
    CREATE TABLE site_queue (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        client TEXT NOT NULL,
        name TEXT NOT NULL,
        pool TEXT,
        doc BYTEA NOT NULL,
        state TEXT NOT NULL,
        server TEXT,
        asked_s BIGINT NOT NULL,
        claimed_s BIGINT,
        job_id BIGINT,
        reason TEXT
    );
    CREATE INDEX site_queue_by_state ON site_queue (state, id);
    ",
    // 18: as SQLite's 18.
    "
    CREATE TABLE hsm_roots (
        host TEXT NOT NULL,
        path BYTEA NOT NULL,
        pool TEXT NOT NULL,
        added_ns BIGINT NOT NULL,
        PRIMARY KEY (host, path)
    );
    CREATE TABLE hsm_files (
        host TEXT NOT NULL,
        path BYTEA NOT NULL,
        state TEXT NOT NULL,
        job_id BIGINT NOT NULL,
        entry BYTEA NOT NULL,
        size BIGINT NOT NULL,
        mtime_ns BIGINT NOT NULL,
        ctime_ns BIGINT NOT NULL,
        crc BIGINT NOT NULL,
        verified BIGINT NOT NULL,
        changed_ns BIGINT NOT NULL,
        PRIMARY KEY (host, path)
    );
    CREATE INDEX hsm_files_by_job ON hsm_files (job_id);
    ",
    // 19: as SQLite's 19.
    "
    CREATE TABLE recall_samples (
        job_id BIGINT NOT NULL REFERENCES jobs(id),
        t_ms BIGINT NOT NULL,
        files BIGINT NOT NULL,
        bytes BIGINT NOT NULL,
        waiting BIGINT NOT NULL,
        PRIMARY KEY (job_id, t_ms)
    );
    ",
    // 20: as SQLite's 20.
    "
    CREATE TABLE job_copies (
        job_id BIGINT NOT NULL REFERENCES jobs(id),
        copy_no BIGINT NOT NULL,
        pool TEXT NOT NULL,
        state TEXT NOT NULL,
        created_ns BIGINT NOT NULL,
        PRIMARY KEY (job_id, copy_no)
    );
    CREATE TABLE copy_segments (
        job_id BIGINT NOT NULL REFERENCES jobs(id),
        copy_no BIGINT NOT NULL,
        seq BIGINT NOT NULL,
        volume_id BIGINT NOT NULL REFERENCES volumes(id),
        first_lbn BIGINT NOT NULL,
        orig_seq BIGINT NOT NULL,
        orig_first_lbn BIGINT NOT NULL,
        objects BIGINT,
        PRIMARY KEY (job_id, copy_no, seq)
    );
    CREATE INDEX copy_segments_by_volume ON copy_segments (volume_id);
    ",
    // 21: as SQLite's 21.
    "
    CREATE TABLE offsite (
        barcode TEXT PRIMARY KEY,
        since_ns BIGINT NOT NULL
    );
    ",
    // 22: as SQLite's 22.
    "
    CREATE TABLE job_verifies (
        job_id BIGINT PRIMARY KEY REFERENCES jobs(id),
        at_ns BIGINT NOT NULL,
        ok BIGINT NOT NULL,
        blocks BIGINT NOT NULL,
        bad_blocks BIGINT NOT NULL,
        how TEXT NOT NULL
    );
    ",
    // 23: as SQLite's 23.
    "
    CREATE TABLE pool_copies (
        pool TEXT PRIMARY KEY,
        copy_pool TEXT NOT NULL
    );
    ", // 24: as SQLite's 24.
    "
    CREATE TABLE job_moves (
        job_id BIGINT PRIMARY KEY REFERENCES jobs(id),
        copy_no BIGINT NOT NULL,
        moved_ns BIGINT NOT NULL
    );
    CREATE TABLE pool_reclaims (
        pool TEXT PRIMARY KEY,
        percent BIGINT NOT NULL
    );
    ",
    // 25: as SQLite's 25.
    "
    CREATE TABLE s3_keys (
        access_key TEXT PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        sealed BYTEA NOT NULL,
        buckets TEXT NOT NULL,
        created_ns BIGINT NOT NULL,
        revoked_ns BIGINT
    );
    CREATE TABLE s3_buckets (
        name TEXT PRIMARY KEY,
        pool TEXT NOT NULL,
        created_ns BIGINT NOT NULL
    );
    CREATE TABLE s3_objects (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        bucket TEXT NOT NULL,
        key BYTEA NOT NULL,
        size BIGINT NOT NULL,
        etag TEXT NOT NULL,
        class TEXT NOT NULL,
        meta TEXT NOT NULL,
        file TEXT NOT NULL,
        created_ns BIGINT NOT NULL,
        deleted_ns BIGINT
    );
    CREATE UNIQUE INDEX s3_objects_live ON s3_objects (bucket, key) WHERE deleted_ns IS NULL;
    CREATE TABLE s3_uploads (
        id TEXT PRIMARY KEY,
        bucket TEXT NOT NULL,
        key BYTEA NOT NULL,
        class TEXT NOT NULL,
        meta TEXT NOT NULL,
        created_ns BIGINT NOT NULL
    );
    CREATE TABLE s3_parts (
        upload TEXT NOT NULL,
        number BIGINT NOT NULL,
        size BIGINT NOT NULL,
        etag TEXT NOT NULL,
        meta TEXT NOT NULL,
        file TEXT NOT NULL,
        PRIMARY KEY (upload, number)
    );
    ",
    // 26: as SQLite's 26.
    "
    ALTER TABLE s3_buckets ADD COLUMN batch_age_s BIGINT NOT NULL DEFAULT 300;
    ALTER TABLE s3_buckets ADD COLUMN batch_objects BIGINT NOT NULL DEFAULT 10000;
    ALTER TABLE s3_buckets ADD COLUMN batch_bytes BIGINT NOT NULL DEFAULT 4294967296;
    ALTER TABLE s3_objects ADD COLUMN job_id BIGINT;
    ALTER TABLE s3_objects ADD COLUMN released_ns BIGINT;
    ALTER TABLE s3_objects ADD COLUMN restore_asked_ns BIGINT;
    ALTER TABLE s3_objects ADD COLUMN restore_days BIGINT;
    ALTER TABLE s3_objects ADD COLUMN restore_tier TEXT;
    ALTER TABLE s3_objects ADD COLUMN restored_file TEXT;
    ALTER TABLE s3_objects ADD COLUMN restored_until_ns BIGINT;
    ALTER TABLE s3_objects ADD COLUMN restored_used_ns BIGINT;
    CREATE INDEX s3_objects_to_archive ON s3_objects (id) WHERE job_id IS NULL AND deleted_ns IS NULL;
    CREATE INDEX s3_objects_restoring ON s3_objects (restore_asked_ns) WHERE restore_asked_ns IS NOT NULL;
    ",
    // 27: as SQLite's 27.
    "
    ALTER TABLE s3_objects ADD COLUMN host TEXT NOT NULL DEFAULT '';
    ALTER TABLE s3_objects ADD COLUMN left_files TEXT;
    ALTER TABLE s3_uploads ADD COLUMN host TEXT NOT NULL DEFAULT '';
    ALTER TABLE servers ADD COLUMN s3_url TEXT;
    CREATE INDEX s3_objects_left ON s3_objects (host) WHERE left_files IS NOT NULL;
    ",
];

/// The schema of a PostgreSQL catalog: the tables SQLite's catalog has after every
/// migration above, in PostgreSQL's types (every integer a `BIGINT`, bytes a
/// `BYTEA`). The tables SQLite reads in `rowid` order have a `rowid` column, last.
/// A PostgreSQL catalog begins at the version this schema is; later versions
/// will migrate it as [`MIGRATIONS`] migrate SQLite's.
const POSTGRES_SCHEMA: &str = "
    CREATE TABLE volumes (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        barcode TEXT NOT NULL UNIQUE,
        uuid BYTEA NOT NULL,
        pool TEXT NOT NULL,
        block_size BIGINT NOT NULL,
        labelled_ns BIGINT NOT NULL,
        status TEXT NOT NULL
    );
    CREATE TABLE jobs (
        id BIGINT PRIMARY KEY,
        tag BIGINT NOT NULL,
        name TEXT NOT NULL,
        started_ns BIGINT NOT NULL,
        ended_ns BIGINT,
        status TEXT NOT NULL,
        files BIGINT NOT NULL DEFAULT 0,
        bytes BIGINT NOT NULL DEFAULT 0,
        seconds DOUBLE PRECISION NOT NULL DEFAULT 0,
        block_size BIGINT NOT NULL,
        key_fingerprint TEXT,
        job_key BYTEA,
        set_name TEXT,
        level BIGINT NOT NULL DEFAULT 0,
        base_job BIGINT,
        client TEXT
    );
    CREATE INDEX jobs_by_set ON jobs (set_name, id);
    CREATE TABLE job_volumes (
        job_id BIGINT NOT NULL REFERENCES jobs(id),
        seq BIGINT NOT NULL,
        volume_id BIGINT NOT NULL REFERENCES volumes(id),
        first_lbn BIGINT NOT NULL,
        last_lbn BIGINT,
        chain BIGINT,
        PRIMARY KEY (job_id, seq)
    );
    CREATE TABLE streams (
        job_id BIGINT NOT NULL REFERENCES jobs(id),
        stream BIGINT NOT NULL,
        name TEXT NOT NULL,
        source BYTEA NOT NULL,
        PRIMARY KEY (job_id, stream)
    );
    CREATE TABLE job_errors (
        job_id BIGINT NOT NULL REFERENCES jobs(id),
        path BYTEA NOT NULL,
        reason TEXT NOT NULL,
        rowid BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY
    );
    CREATE INDEX job_errors_by_job ON job_errors (job_id);
    CREATE TABLE files (
        job_id BIGINT NOT NULL,
        path BYTEA NOT NULL,
        stream BIGINT NOT NULL,
        type BIGINT NOT NULL,
        mode BIGINT NOT NULL,
        uid BIGINT NOT NULL,
        gid BIGINT NOT NULL,
        size BIGINT NOT NULL,
        mtime_ns BIGINT NOT NULL,
        start_seq BIGINT NOT NULL,
        start_lbn BIGINT NOT NULL,
        start_off BIGINT NOT NULL,
        end_seq BIGINT NOT NULL,
        end_lbn BIGINT NOT NULL,
        crc BIGINT NOT NULL,
        link BYTEA NOT NULL,
        ctime_ns BIGINT,
        ino BIGINT,
        meta_only BIGINT NOT NULL DEFAULT 0,
        PRIMARY KEY (job_id, path)
    );
    CREATE TABLE extents (
        job_id BIGINT NOT NULL REFERENCES jobs(id),
        stream BIGINT NOT NULL,
        seq BIGINT NOT NULL,
        first_lbn BIGINT NOT NULL,
        blocks BIGINT NOT NULL,
        stream_offset BIGINT NOT NULL
    );
    CREATE INDEX extents_by_job ON extents (job_id, seq, first_lbn);
    CREATE TABLE samples (
        job_id BIGINT NOT NULL REFERENCES jobs(id),
        op TEXT NOT NULL,
        series TEXT NOT NULL,
        t_ms BIGINT NOT NULL,
        bytes BIGINT NOT NULL,
        pool_fill DOUBLE PRECISION NOT NULL,
        buffer_fill DOUBLE PRECISION,
        backhitches BIGINT NOT NULL,
        speed_mb_s DOUBLE PRECISION,
        PRIMARY KEY (job_id, op, series, t_ms)
    );
    CREATE TABLE drive_health (
        job_id BIGINT NOT NULL REFERENCES jobs(id),
        op TEXT NOT NULL,
        drive BIGINT NOT NULL,
        barcode TEXT NOT NULL,
        health TEXT NOT NULL,
        rowid BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY
    );
    CREATE INDEX drive_health_by_job ON drive_health (job_id, op);
    CREATE TABLE marks (
        job_id BIGINT NOT NULL REFERENCES jobs(id),
        op TEXT NOT NULL,
        drive BIGINT,
        phase TEXT NOT NULL,
        from_ms BIGINT NOT NULL,
        to_ms BIGINT NOT NULL
    );
    CREATE INDEX marks_by_job ON marks (job_id, op);
    CREATE TABLE stages (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        path TEXT NOT NULL UNIQUE,
        size_limit BIGINT NOT NULL,
        added_ns BIGINT NOT NULL
    );
    CREATE TABLE staged_chunks (
        job_id BIGINT NOT NULL,
        stream BIGINT NOT NULL,
        seq BIGINT NOT NULL,
        stage_id BIGINT NOT NULL REFERENCES stages(id),
        file TEXT NOT NULL,
        first_block BIGINT NOT NULL,
        blocks BIGINT NOT NULL,
        stream_offset BIGINT NOT NULL,
        bytes BIGINT NOT NULL,
        state TEXT NOT NULL,
        created_ns BIGINT NOT NULL,
        keep_until_ns BIGINT,
        last BIGINT NOT NULL DEFAULT 0,
        PRIMARY KEY (job_id, stream, seq)
    );
    CREATE INDEX staged_chunks_by_stage ON staged_chunks (stage_id, state);
    CREATE TABLE stage_cuts (
        job_id BIGINT NOT NULL,
        stream BIGINT NOT NULL,
        path BYTEA NOT NULL,
        PRIMARY KEY (job_id, stream, path)
    );
    CREATE TABLE volume_notes (
        volume_id BIGINT NOT NULL,
        at_ns BIGINT NOT NULL,
        note TEXT NOT NULL,
        rowid BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY
    );
    CREATE INDEX volume_notes_by_volume ON volume_notes (volume_id);
    CREATE TABLE pools (
        name TEXT PRIMARY KEY,
        retention_s BIGINT,
        max_jobs_per_volume BIGINT,
        append BIGINT NOT NULL DEFAULT 1,
        worm BIGINT NOT NULL DEFAULT 0,
        created_ns BIGINT NOT NULL
    );
    CREATE TABLE pool_cartridges (
        barcode TEXT PRIMARY KEY,
        pool TEXT NOT NULL
    );
    CREATE TABLE pool_keys (
        pool TEXT PRIMARY KEY,
        key_file TEXT NOT NULL,
        fingerprint TEXT NOT NULL
    );
    CREATE TABLE volume_generations (
        volume_id BIGINT PRIMARY KEY,
        generation BIGINT NOT NULL,
        jobs_ended_ns BIGINT
    );
    CREATE TABLE deletions (
        job_id BIGINT NOT NULL,
        path BYTEA NOT NULL,
        type BIGINT NOT NULL,
        PRIMARY KEY (job_id, path)
    );
    CREATE TABLE id_floor (
        name TEXT PRIMARY KEY,
        last BIGINT NOT NULL
    );
    CREATE TABLE tokens (
        name TEXT PRIMARY KEY,
        hash BYTEA NOT NULL UNIQUE,
        admin BIGINT NOT NULL,
        created_ns BIGINT NOT NULL,
        revoked_ns BIGINT
    );
";

/// The version [`POSTGRES_SCHEMA`] is.
const POSTGRES_SCHEMA_VERSION: i64 = 16;

/// A number of PostgreSQL's advisory locks: held while a server creates or
/// migrates the schema, so that two servers starting at once do not both do it.
const SCHEMA_LOCK: i64 = 0x7461_7065_6c6f_6f6d;

impl Catalog {
    /// Runs the migrations the catalog has not run yet; refuses a newer schema.
    pub(crate) fn migrate(&mut self) -> Result<()> {
        if self.conn.dialect() == Dialect::Postgres {
            return self.migrate_postgres();
        }
        let version = self.schema_version()?;
        let known = MIGRATIONS.len() as i64;
        if version > known {
            return Err(CatalogError::SchemaTooNew {
                found: version,
                known,
            });
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            let step = || -> crate::db::Result<()> {
                let tx = self.conn.write_tx()?;
                tx.execute_batch(sql)?; // SQLite only: PostgreSQL migrates below
                if let Some(c) = tx.as_sqlite() {
                    c.pragma_update(None, "user_version", (i + 1) as i64)?;
                }
                tx.commit()
            };
            step().doing("migrate the schema")?;
        }
        Ok(())
    }

    /// Creates a PostgreSQL catalog's tables when it has none.
    fn migrate_postgres(&mut self) -> Result<()> {
        let step = || -> crate::db::Result<i64> {
            let tx = self.conn.write_tx()?;
            tx.query_row(
                "SELECT 1 FROM pg_advisory_xact_lock(?1)",
                params![SCHEMA_LOCK],
                |_| Ok(()),
            )?;
            tx.execute_batch(
                "CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL)",
            )?;
            let found: Option<i64> =
                tx.query_row("SELECT MAX(version) FROM schema_version", params![], |r| {
                    r.get(0)
                })?;
            let version = match found {
                Some(v) => v,
                None => {
                    tx.execute_batch(POSTGRES_SCHEMA)?;
                    tx.execute(
                        "INSERT INTO schema_version (version) VALUES (?1)",
                        params![POSTGRES_SCHEMA_VERSION],
                    )?;
                    POSTGRES_SCHEMA_VERSION
                }
            };
            let newest = POSTGRES_SCHEMA_VERSION + POSTGRES_MIGRATIONS.len() as i64;
            if version < newest {
                for sql in &POSTGRES_MIGRATIONS[(version - POSTGRES_SCHEMA_VERSION) as usize..] {
                    tx.execute_batch(sql)?;
                }
                tx.execute(
                    "INSERT INTO schema_version (version) VALUES (?1)",
                    params![newest],
                )?;
            }
            tx.commit()?;
            Ok(version.max(newest))
        };
        let version = step().doing("create the catalog's tables")?;
        let known = POSTGRES_SCHEMA_VERSION + POSTGRES_MIGRATIONS.len() as i64;
        if version > known {
            return Err(CatalogError::SchemaTooNew {
                found: version,
                known,
            });
        }
        Ok(())
    }

    /// The schema version.
    pub fn schema_version(&self) -> Result<i64> {
        match self.conn.as_sqlite() {
            Some(c) => c
                .pragma_query_value(None, "user_version", |r| r.get(0))
                .map_err(crate::db::DbError::from)
                .doing("read the schema version"),
            None => self
                .conn
                .query_row("SELECT MAX(version) FROM schema_version", params![], |r| {
                    r.get(0)
                })
                .doing("read the schema version"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::params;

    #[test]
    fn segments_of_a_catalog_without_chains_open_with_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let c = Catalog::open(&path).unwrap();
        let v = c
            .add_volume("TL0001L9", [1; 16], "default", 262144, 0)
            .unwrap();
        let j = c.begin_job(1, "j", 0, 262144, &[]).unwrap();
        // The catalog as version 5 left it: no chain column.
        c.conn
            .execute_batch(
                "DROP TABLE s3_parts; DROP TABLE s3_uploads; DROP TABLE s3_objects; DROP TABLE s3_buckets; DROP TABLE s3_keys; DROP TABLE pool_reclaims; DROP TABLE job_moves; DROP TABLE pool_copies; DROP TABLE job_verifies; DROP TABLE offsite; DROP INDEX copy_segments_by_volume; DROP TABLE copy_segments; DROP TABLE job_copies; DROP TABLE recall_samples; DROP TABLE hsm_files; DROP TABLE hsm_roots; DROP INDEX site_queue_by_state; DROP TABLE site_queue; DROP TABLE server_cartridges; DROP TABLE servers; ALTER TABLE jobs DROP COLUMN host; ALTER TABLE stages DROP COLUMN host; DROP INDEX jobs_by_set; DROP TABLE tokens; ALTER TABLE jobs DROP COLUMN client; ALTER TABLE jobs DROP COLUMN set_name; ALTER TABLE jobs DROP COLUMN level; ALTER TABLE jobs DROP COLUMN base_job; ALTER TABLE files DROP COLUMN ctime_ns; ALTER TABLE files DROP COLUMN ino; ALTER TABLE files DROP COLUMN meta_only; DROP TABLE deletions; DROP TABLE id_floor; ALTER TABLE job_volumes DROP COLUMN chain; \
                 DROP TABLE stage_cuts; DROP TABLE staged_chunks; DROP TABLE stages; ALTER TABLE jobs DROP COLUMN key_fingerprint; ALTER TABLE jobs DROP COLUMN job_key; PRAGMA user_version = 5;",
            )
            .unwrap();
        c.conn
            .execute(
                "INSERT INTO job_volumes (job_id, seq, volume_id, first_lbn) VALUES (?1, 0, ?2, 2)",
                params![j, v.id],
            )
            .unwrap();
        drop(c);
        let c = Catalog::open(&path).unwrap();
        assert_eq!(c.schema_version().unwrap(), MIGRATIONS.len() as i64);
        let jv = c.job_volumes(j).unwrap();
        assert_eq!((jv.len(), jv[0].first_lbn, jv[0].chain), (1, 2, None));
        c.add_job_volume(j, 1, 1, v.id, 40).unwrap();
        assert_eq!(c.job_volumes(j).unwrap()[1].chain, Some(1));
    }

    #[test]
    fn a_catalog_of_version_6_gains_empty_stage_tables() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let c = Catalog::open(&path).unwrap();
        let j = c.begin_job(1, "j", 0, 262144, &[]).unwrap();
        // The catalog as version 6 left it: no stages.
        c.conn
            .execute_batch("DROP TABLE s3_parts; DROP TABLE s3_uploads; DROP TABLE s3_objects; DROP TABLE s3_buckets; DROP TABLE s3_keys; DROP TABLE pool_reclaims; DROP TABLE job_moves; DROP TABLE pool_copies; DROP TABLE job_verifies; DROP TABLE offsite; DROP INDEX copy_segments_by_volume; DROP TABLE copy_segments; DROP TABLE job_copies; DROP TABLE recall_samples; DROP TABLE hsm_files; DROP TABLE hsm_roots; DROP INDEX site_queue_by_state; DROP TABLE site_queue; DROP TABLE server_cartridges; DROP TABLE servers; ALTER TABLE jobs DROP COLUMN host; ALTER TABLE stages DROP COLUMN host; DROP INDEX jobs_by_set; DROP TABLE tokens; ALTER TABLE jobs DROP COLUMN client; ALTER TABLE jobs DROP COLUMN set_name; ALTER TABLE jobs DROP COLUMN level; ALTER TABLE jobs DROP COLUMN base_job; ALTER TABLE files DROP COLUMN ctime_ns; ALTER TABLE files DROP COLUMN ino; ALTER TABLE files DROP COLUMN meta_only; DROP TABLE deletions; DROP TABLE id_floor; DROP TABLE stage_cuts; DROP TABLE staged_chunks; DROP TABLE stages; ALTER TABLE jobs DROP COLUMN key_fingerprint; ALTER TABLE jobs DROP COLUMN job_key; PRAGMA user_version = 6;")
            .unwrap();
        drop(c);
        let c = Catalog::open(&path).unwrap();
        assert_eq!(c.schema_version().unwrap(), MIGRATIONS.len() as i64);
        assert!(c.stages().unwrap().is_empty());
        assert!(c
            .staged_chunks(&crate::ChunkFilter::default())
            .unwrap()
            .is_empty());
        assert_eq!(c.job(j).unwrap().unwrap().name, "j");
        let s = c
            .add_stage(std::path::Path::new("/stage/a"), 1 << 30, 5)
            .unwrap();
        assert_eq!(c.stages().unwrap(), vec![s]);
    }

    #[test]
    fn chunks_of_a_catalog_of_version_7_open_kept_by_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let c = Catalog::open(&path).unwrap();
        let s = c
            .add_stage(std::path::Path::new("/stage/a"), 1 << 30, 5)
            .unwrap();
        // The catalog as version 7 left it: chunks are not kept after tape.
        c.conn
            .execute_batch(
                "DROP TABLE s3_parts; DROP TABLE s3_uploads; DROP TABLE s3_objects; DROP TABLE s3_buckets; DROP TABLE s3_keys; DROP TABLE pool_reclaims; DROP TABLE job_moves; DROP TABLE pool_copies; DROP TABLE job_verifies; DROP TABLE offsite; DROP INDEX copy_segments_by_volume; DROP TABLE copy_segments; DROP TABLE job_copies; DROP TABLE recall_samples; DROP TABLE hsm_files; DROP TABLE hsm_roots; DROP INDEX site_queue_by_state; DROP TABLE site_queue; DROP TABLE server_cartridges; DROP TABLE servers; ALTER TABLE jobs DROP COLUMN host; ALTER TABLE stages DROP COLUMN host; DROP INDEX jobs_by_set; DROP TABLE tokens; ALTER TABLE jobs DROP COLUMN client; ALTER TABLE jobs DROP COLUMN set_name; ALTER TABLE jobs DROP COLUMN level; ALTER TABLE jobs DROP COLUMN base_job; ALTER TABLE files DROP COLUMN ctime_ns; ALTER TABLE files DROP COLUMN ino; ALTER TABLE files DROP COLUMN meta_only; DROP TABLE deletions; DROP TABLE id_floor; DROP TABLE stage_cuts; ALTER TABLE staged_chunks DROP COLUMN last; ALTER TABLE staged_chunks DROP COLUMN keep_until_ns; ALTER TABLE jobs DROP COLUMN key_fingerprint; ALTER TABLE jobs DROP COLUMN job_key; PRAGMA user_version = 7;",
            )
            .unwrap();
        c.conn
            .execute(
                "INSERT INTO staged_chunks (job_id, stream, seq, stage_id, file, first_block, \
                 blocks, stream_offset, bytes, state, created_ns) \
                 VALUES (3, 0, 0, ?1, 'f', 0, 1, 0, 100, 'despooled', 9)",
                params![s.id],
            )
            .unwrap();
        drop(c);
        let c = Catalog::open(&path).unwrap();
        assert_eq!(c.schema_version().unwrap(), MIGRATIONS.len() as i64);
        let rows = c.staged_chunks(&crate::ChunkFilter::default()).unwrap();
        assert_eq!((rows.len(), rows[0].keep_until_ns), (1, None));
        let u = c.stage_use().unwrap();
        assert_eq!((u[0].1.despooled_bytes, u[0].1.kept_bytes), (100, 0));
    }

    #[test]
    fn a_catalog_from_a_newer_tapeloom_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let c = Catalog::open(&path).unwrap();
        let newer = MIGRATIONS.len() as i64 + 1;
        c.conn
            .as_sqlite()
            .unwrap()
            .pragma_update(None, "user_version", newer)
            .unwrap();
        drop(c);
        let e = Catalog::open(&path).err().expect("refused");
        assert!(
            matches!(e, CatalogError::SchemaTooNew { found, known } if found == newer && known == newer - 1),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            format!(
                "the catalog has schema version {newer}; this tapeloom knows up to {}",
                newer - 1
            )
        );
    }
    #[test]
    fn a_postgresql_catalog_of_version_16_is_migrated_to_the_site_tables() {
        use tapeloom_testkit::{need::need, postgres as pg};
        if !need(pg::server().map(|_| ())) {
            return;
        }
        let url = pg::server().unwrap().database().unwrap();
        {
            // The catalog as the first PostgreSQL tapeloom made it, with a stage.
            let config: postgres::Config = url.parse().unwrap();
            let mut client = config.connect(postgres::NoTls).unwrap();
            client.batch_execute(POSTGRES_SCHEMA).unwrap();
            client
                .batch_execute(
                    "CREATE TABLE schema_version (version BIGINT NOT NULL); \
                     INSERT INTO schema_version VALUES (16); \
                     INSERT INTO stages (path, size_limit, added_ns) VALUES ('/s', 1, 1);",
                )
                .unwrap();
        }
        let mut c = Catalog::connect(&url).unwrap();
        let known = POSTGRES_SCHEMA_VERSION + POSTGRES_MIGRATIONS.len() as i64;
        assert_eq!(c.schema_version().unwrap(), known);
        assert_eq!(
            known,
            MIGRATIONS.len() as i64,
            "both databases at one version"
        );
        // The old stage is the home's own (host ''); another host may add the
        // same path, and the site's tables are there.
        assert_eq!(c.stages().unwrap().len(), 1);
        c.set_host("b");
        c.add_stage(std::path::Path::new("/s"), 1, 2).unwrap();
        assert_eq!(c.stages().unwrap().len(), 1);
        c.register_server("b", "https://127.0.0.1:1", "ff", "{}")
            .unwrap();
        assert_eq!(c.servers().unwrap().len(), 1);
        c.add_hsm_root(b"/m", "hsm", 1).unwrap();
        assert_eq!(c.hsm_roots().unwrap().len(), 1);
        drop(c);
        // Opened again, it is not migrated twice.
        let c = Catalog::connect(&url).unwrap();
        assert_eq!(c.schema_version().unwrap(), known);
    }
}
