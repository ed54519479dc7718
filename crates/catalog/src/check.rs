//! `Catalog::check`: the catalog's integrity, as SQLite sees it and as tapeloom's
//! rules say it must be.
//!
//! The rules: every row that names a job names one the catalog has, and every
//! segment a volume it has; a segment of a job that ended has a last block, not
//! before its first (a job that is running, or whose process died, may leave its
//! last segment open); a file row's first and last blocks lie inside its job's
//! segments of those volume sequences; an extent holds at least one block, lies
//! inside its segment, and no two extents of a job share a block of one segment.

use crate::db::{params, Row};
use crate::error::{Doing, Result};
use crate::Catalog;

/// The most problems listed of each kind: a catalog damaged throughout would
/// otherwise list millions of rows.
const LIMIT: usize = 1000;

/// Tables whose rows belong to a job (`job_id`).
const JOB_TABLES: &[&str] = &[
    "files",
    "extents",
    "streams",
    "job_errors",
    "job_volumes",
    "samples",
    "recall_samples",
    "job_copies",
    "copy_segments",
    "job_moves",
    "job_verifies",
    "marks",
    "drive_health",
    "staged_chunks",
    "stage_cuts",
];

/// What a check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckReport {
    /// Jobs in the catalog.
    pub jobs: u64,
    /// Volumes.
    pub volumes: u64,
    /// Job segments (`job_volumes` rows).
    pub segments: u64,
    /// File rows.
    pub files: u64,
    /// Extents.
    pub extents: u64,
    /// What is wrong; empty when the catalog is sound.
    pub problems: Vec<Problem>,
}

impl CheckReport {
    /// Whether the catalog is sound.
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// One thing wrong in the catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// What kind of fault.
    pub kind: ProblemKind,
    /// The job it concerns, when it concerns one.
    pub job: Option<i64>,
    /// The rows concerned and what is wrong with them.
    pub detail: String,
}

/// The kinds of fault a check names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProblemKind {
    /// SQLite's own `PRAGMA integrity_check` found the file damaged.
    Sqlite,
    /// Rows that name a job (or a stage) the catalog does not have.
    Orphan,
    /// A segment on a volume the catalog does not have.
    MissingVolume,
    /// A segment open though its job ended, or ending before it starts.
    Segment,
    /// A file row whose blocks are not inside its job's segments.
    FileOutsideSegment,
    /// An extent not inside its job's segment.
    ExtentOutsideSegment,
    /// Two extents of a job sharing blocks of one segment.
    ExtentOverlap,
    /// An extent of no blocks.
    EmptyExtent,
}

impl ProblemKind {
    /// The name reports use: `orphan`, `file-outside-segment`, ...
    pub const fn as_str(self) -> &'static str {
        match self {
            ProblemKind::Sqlite => "sqlite",
            ProblemKind::Orphan => "orphan",
            ProblemKind::MissingVolume => "missing-volume",
            ProblemKind::Segment => "segment",
            ProblemKind::FileOutsideSegment => "file-outside-segment",
            ProblemKind::ExtentOutsideSegment => "extent-outside-segment",
            ProblemKind::ExtentOverlap => "extent-overlap",
            ProblemKind::EmptyExtent => "empty-extent",
        }
    }
}

/// A segment's blocks for details: `2..30`, or `2..` while open.
fn span(first: i64, last: Option<i64>) -> String {
    match last {
        Some(l) => format!("{first}..{l}"),
        None => format!("{first}.. (open)"),
    }
}

impl Catalog {
    /// Checks the catalog: SQLite's integrity check first, then, when SQLite finds
    /// the file sound, tapeloom's rules (see the module's documentation). An error
    /// means the catalog could not be read at all.
    pub fn check(&self) -> Result<CheckReport> {
        const WHAT: &str = "check the catalog";
        let count = |table: &str| -> Result<u64> {
            self.conn
                .query_row(&format!("SELECT COUNT(*) FROM {table}"), params![], |r| {
                    r.get::<i64>(0)
                })
                .map(|n| n as u64)
                .doing(WHAT)
        };
        let mut problems = self.sqlite_problems()?;
        if problems.is_empty() {
            problems.extend(self.orphans()?);
            problems.extend(self.segment_problems()?);
            problems.extend(self.file_problems()?);
            problems.extend(self.extent_problems()?);
        }
        Ok(CheckReport {
            jobs: count("jobs")?,
            volumes: count("volumes")?,
            segments: count("job_volumes")?,
            files: count("files")?,
            extents: count("extents")?,
            problems,
        })
    }

    /// Runs `sql` and makes a problem of each row it returns (at most [`LIMIT`]).
    fn problems(
        &self,
        sql: &str,
        kind: ProblemKind,
        f: impl Fn(&Row) -> crate::db::Result<(Option<i64>, String)>,
    ) -> Result<Vec<Problem>> {
        const WHAT: &str = "check the catalog";
        let mut st = self.conn.prepare(sql).doing(WHAT)?;
        let rows = st.query_map(params![], |r| f(r)).doing(WHAT)?;
        let mut out = Vec::new();
        for row in rows.take(LIMIT) {
            let (job, detail) = row.doing(WHAT)?;
            out.push(Problem { kind, job, detail });
        }
        Ok(out)
    }

    fn sqlite_problems(&self) -> Result<Vec<Problem>> {
        // PostgreSQL keeps its own pages whole; it has no such check to run.
        if self.conn.dialect() == crate::db::Dialect::Postgres {
            return Ok(Vec::new());
        }
        let found = self.problems("PRAGMA integrity_check", ProblemKind::Sqlite, |r| {
            Ok((None, r.get(0)?))
        })?;
        Ok(found.into_iter().filter(|p| p.detail != "ok").collect())
    }

    fn orphans(&self) -> Result<Vec<Problem>> {
        let mut out = Vec::new();
        for table in JOB_TABLES {
            let sql = format!(
                "SELECT job_id, COUNT(*) FROM {table} \
                 WHERE job_id NOT IN (SELECT id FROM jobs) GROUP BY job_id"
            );
            out.extend(self.problems(&sql, ProblemKind::Orphan, |r| {
                let n: i64 = r.get(1)?;
                Ok((
                    Some(r.get(0)?),
                    format!("{n} rows of {table} whose job is missing"),
                ))
            })?);
        }
        out.extend(self.problems(
            "SELECT job_id, stage_id, COUNT(*) FROM staged_chunks \
             WHERE stage_id NOT IN (SELECT id FROM stages) GROUP BY job_id, stage_id",
            ProblemKind::Orphan,
            |r| {
                let (stage, n): (i64, i64) = (r.get(1)?, r.get(2)?);
                Ok((
                    Some(r.get(0)?),
                    format!("{n} staged chunks on stage {stage}, which is missing"),
                ))
            },
        )?);
        out.extend(self.problems(
            "SELECT job_id, seq, volume_id FROM job_volumes \
             WHERE volume_id NOT IN (SELECT id FROM volumes) ORDER BY job_id, seq",
            ProblemKind::MissingVolume,
            |r| {
                let (seq, vol): (i64, i64) = (r.get(1)?, r.get(2)?);
                Ok((
                    Some(r.get(0)?),
                    format!("segment {seq} is on volume {vol}, which is missing"),
                ))
            },
        )?);
        Ok(out)
    }

    fn segment_problems(&self) -> Result<Vec<Problem>> {
        self.problems(
            "SELECT jv.job_id, jv.seq, jv.first_lbn, jv.last_lbn, j.status \
             FROM job_volumes jv JOIN jobs j ON j.id = jv.job_id \
             WHERE (jv.last_lbn IS NULL AND j.status NOT IN ('running', 'failed', 'queued')) \
                OR jv.last_lbn < jv.first_lbn \
             ORDER BY jv.job_id, jv.seq",
            ProblemKind::Segment,
            |r| {
                let (seq, first, last, status): (i64, i64, Option<i64>, String) =
                    (r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?);
                let detail = match last {
                    None => format!(
                        "segment {seq} (blocks {first}..) is open, though the job ended {status}"
                    ),
                    Some(l) => {
                        format!("segment {seq} ends at block {l}, before it starts at {first}")
                    }
                };
                Ok((Some(r.get(0)?), detail))
            },
        )
    }

    fn file_problems(&self) -> Result<Vec<Problem>> {
        // An open segment's NULL last block makes its comparisons NULL: not a fault.
        self.problems(
            "SELECT f.job_id, f.path, f.start_seq, f.start_lbn, f.end_seq, f.end_lbn, \
                    s.job_id IS NOT NULL, s.first_lbn, s.last_lbn, \
                    e.job_id IS NOT NULL, e.first_lbn, e.last_lbn \
             FROM files f \
             LEFT JOIN job_volumes s ON s.job_id = f.job_id AND s.seq = f.start_seq \
             LEFT JOIN job_volumes e ON e.job_id = f.job_id AND e.seq = f.end_seq \
             WHERE f.job_id IN (SELECT id FROM jobs) AND ( \
                s.job_id IS NULL OR f.start_lbn < s.first_lbn OR f.start_lbn > s.last_lbn \
                OR e.job_id IS NULL OR f.end_lbn < e.first_lbn OR f.end_lbn > e.last_lbn \
                OR f.end_seq < f.start_seq \
                OR (f.end_seq = f.start_seq AND f.end_lbn < f.start_lbn)) \
             ORDER BY f.job_id, f.path",
            ProblemKind::FileOutsideSegment,
            |r| {
                let path = String::from_utf8_lossy(&r.get::<Vec<u8>>(1)?).into_owned();
                let (ss, sl, es, el): (i64, i64, i64, i64) =
                    (r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?);
                let end =
                    |seq: i64, lbn: i64, at: usize| -> crate::db::Result<Option<String>> {
                        if !r.get::<bool>(at)? {
                            return Ok(Some(format!("segment {seq} does not exist")));
                        }
                        let (first, last): (i64, Option<i64>) = (r.get(at + 1)?, r.get(at + 2)?);
                        let outside = lbn < first || last.is_some_and(|l| lbn > l);
                        Ok(outside
                            .then(|| format!("segment {seq} holds blocks {}", span(first, last))))
                    };
                let why = match (end(ss, sl, 6)?, end(es, el, 9)?) {
                    (Some(a), Some(b)) if a != b => format!("{a}; {b}"),
                    (Some(a), _) | (None, Some(a)) => a,
                    (None, None) => "it ends before it starts".to_string(),
                };
                Ok((
                    Some(r.get(0)?),
                    format!("{path}: blocks {ss}:{sl} to {es}:{el}, but {why}"),
                ))
            },
        )
    }

    fn extent_problems(&self) -> Result<Vec<Problem>> {
        let mut out = self.problems(
            "SELECT job_id, stream, seq, first_lbn, blocks FROM extents \
             WHERE blocks <= 0 AND job_id IN (SELECT id FROM jobs) \
             ORDER BY job_id, seq, first_lbn",
            ProblemKind::EmptyExtent,
            |r| {
                let (stream, seq, first, blocks): (i64, i64, i64, i64) =
                    (r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?);
                Ok((
                    Some(r.get(0)?),
                    format!("stream {stream}'s extent at {seq}:{first} holds {blocks} blocks"),
                ))
            },
        )?;
        out.extend(self.problems(
            "SELECT x.job_id, x.stream, x.seq, x.first_lbn, x.blocks, \
                    s.job_id IS NOT NULL, s.first_lbn, s.last_lbn \
             FROM extents x \
             LEFT JOIN job_volumes s ON s.job_id = x.job_id AND s.seq = x.seq \
             WHERE x.job_id IN (SELECT id FROM jobs) AND x.blocks > 0 AND ( \
                s.job_id IS NULL OR x.first_lbn < s.first_lbn \
                OR x.first_lbn + x.blocks - 1 > s.last_lbn) \
             ORDER BY x.job_id, x.seq, x.first_lbn",
            ProblemKind::ExtentOutsideSegment,
            |r| {
                let (stream, seq, first, blocks): (i64, i64, i64, i64) =
                    (r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?);
                let why = if r.get::<bool>(5)? {
                    format!("segment {seq} holds blocks {}", span(r.get(6)?, r.get(7)?))
                } else {
                    format!("segment {seq} does not exist")
                };
                Ok((
                    Some(r.get(0)?),
                    format!(
                        "stream {stream}'s extent of blocks {seq}:{first}..{}, but {why}",
                        first + blocks - 1
                    ),
                ))
            },
        )?);
        // Each extent against the furthest end of those before it on its segment.
        out.extend(self.problems(
            "SELECT job_id, stream, seq, first_lbn, blocks, reach FROM ( \
                SELECT job_id, stream, seq, first_lbn, blocks, \
                       MAX(first_lbn + blocks) OVER ( \
                           PARTITION BY job_id, seq ORDER BY first_lbn, blocks \
                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach \
                FROM extents WHERE blocks > 0 AND job_id IN (SELECT id FROM jobs)) AS ranked \
             WHERE reach > first_lbn \
             ORDER BY job_id, seq, first_lbn",
            ProblemKind::ExtentOverlap,
            |r| {
                let (stream, seq, first, blocks, reach): (i64, i64, i64, i64, i64) =
                    (r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?);
                Ok((
                    Some(r.get(0)?),
                    format!(
                        "stream {stream}'s extent of blocks {seq}:{first}..{} overlaps an \
                         earlier extent reaching block {}",
                        first + blocks - 1,
                        reach - 1
                    ),
                ))
            },
        )?);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::both;
    use crate::tests::{row, scratch};
    use crate::{Extent, JobState, Stream};

    /// A catalog of one ended job on one volume: segment 0 holds blocks 2..30,
    /// files in 3..9, extents 3..7 (stream 1) and 8..9 (stream 2). Foreign keys are
    /// off so the tests can break what they would guard.
    fn sound() -> (tempfile::TempDir, Catalog, i64) {
        let (dir, c) = scratch();
        let v = c
            .add_volume("TL0001L9", [1; 16], "default", 262144, 0)
            .unwrap();
        let streams = [Stream {
            stream: 1,
            name: "s".into(),
            source: b"/s".to_vec(),
        }];
        let j = c.begin_job(1, "j", 0, 262144, &streams).unwrap();
        c.add_job_volume(j, 0, 0, v.id, 2).unwrap();
        c.add_files(j, &[row("a", 3), row("b", 5), row("c", 8)])
            .unwrap();
        let ext = |stream, first_lbn, blocks| Extent {
            stream,
            seq: 0,
            first_lbn,
            blocks,
            stream_offset: 0,
        };
        c.add_extents(j, &[ext(1, 3, 5), ext(2, 8, 2)]).unwrap();
        c.add_error(j, b"x", "unreadable").unwrap();
        c.end_job_volume(j, 0, 30).unwrap();
        c.finish_job(j, JobState::Ok, 3, 30, 1.0, 9).unwrap();
        // A row in every other table that belongs to a job.
        let stage = c
            .add_stage(std::path::Path::new("/stage/a"), 1 << 30, 5)
            .unwrap();
        c.conn
            .execute_batch(&format!(
                "INSERT INTO samples VALUES ({j}, 'backup', 'drive:0', 0, 1, 0.5, NULL, 0, NULL); \
                 INSERT INTO recall_samples VALUES ({j}, 0, 1, 10, 2); \
                 INSERT INTO job_copies VALUES ({j}, 2, 'copies', 'ok', 5); \
                 INSERT INTO copy_segments VALUES ({j}, 2, 0, {}, 3, 0, 2, 40); \
                 INSERT INTO job_moves VALUES ({j}, 2, 5); \
                 INSERT INTO job_verifies VALUES ({j}, 5, 1, 40, 0, 'verify'); \
                 INSERT INTO marks VALUES ({j}, 'backup', 0, 'load', 0, 10); \
                 INSERT INTO drive_health VALUES ({j}, 'backup', 0, 'TL0001L9', '{{}}'); \
                 INSERT INTO staged_chunks (job_id, stream, seq, stage_id, file, first_block, \
                     blocks, stream_offset, bytes, state, created_ns) \
                     VALUES ({j}, 1, 0, {}, 'f', 0, 1, 0, 100, 'despooled', 9); \
                 INSERT INTO stage_cuts VALUES ({j}, 1, {});",
                v.id,
                stage.id,
                c.conn.pick("X'61'", "'\\x61'::bytea"),
            ))
            .unwrap();
        // The tests then break the rows as only a damaged catalog could.
        match c.conn.as_sqlite() {
            Some(s) => s.pragma_update(None, "foreign_keys", "OFF").unwrap(),
            None => sql(&c, "SET session_replication_role = replica"),
        }
        (dir, c, j)
    }

    fn kinds(c: &Catalog) -> Vec<(ProblemKind, Option<i64>)> {
        let r = c.check().unwrap();
        r.problems.iter().map(|p| (p.kind, p.job)).collect()
    }

    /// The literal of a path of ASCII `text`, in the catalog's SQL.
    fn blob(c: &Catalog, text: &str) -> String {
        c.conn
            .pick("CAST('{t}' AS BLOB)", "'{t}'::bytea")
            .replace("{t}", text)
    }

    fn sql(c: &Catalog, s: &str) {
        c.conn.execute_batch(s).unwrap();
    }

    both! {
        fn a_sound_catalog_has_no_problems() {
            let (_d, c, _j) = sound();
            let r = c.check().unwrap();
            assert!(r.ok(), "{r:?}");
            assert_eq!(
                (r.jobs, r.volumes, r.segments, r.files, r.extents),
                (1, 1, 1, 3, 2)
            );
        }
    }

    both! {
        fn a_segment_whose_volume_is_gone_is_named() {
            let (_d, c, j) = sound();
            sql(&c, "DELETE FROM volumes");
            assert_eq!(kinds(&c), [(ProblemKind::MissingVolume, Some(j))]);
        }
    }

    both! {
        fn a_file_outside_its_segment_is_named() {
            let (_d, c, j) = sound();
            sql(
                &c,
                &format!("UPDATE files SET start_lbn = 31, end_lbn = 32 WHERE path = {}", blob(&c, "b")),
            );
            let r = c.check().unwrap();
            assert_eq!(r.problems.len(), 1, "{r:?}");
            let p = &r.problems[0];
            assert_eq!((p.kind, p.job), (ProblemKind::FileOutsideSegment, Some(j)));
            assert!(
                p.detail.starts_with("b: blocks 0:31 to 0:32"),
                "{}",
                p.detail
            );
            assert!(
                p.detail.contains("segment 0 holds blocks 2..30"),
                "{}",
                p.detail
            );
            // In a segment the job does not have.
            sql(
                &c,
                &format!("UPDATE files SET start_lbn = 5, end_lbn = 6, end_seq = 1 WHERE path = {}", blob(&c, "b")),
            );
            let r = c.check().unwrap();
            assert!(
                r.problems[0].detail.contains("segment 1 does not exist"),
                "{r:?}"
            );
            // Ending before it starts.
            sql(
                &c,
                &format!("UPDATE files SET end_seq = 0, end_lbn = 4 WHERE path = {}", blob(&c, "b")),
            );
            assert_eq!(kinds(&c), [(ProblemKind::FileOutsideSegment, Some(j))]);
        }
    }

    both! {
        fn extents_outside_overlapping_or_empty_are_named() {
            let (_d, c, j) = sound();
            sql(&c, "UPDATE extents SET first_lbn = 30 WHERE stream = 2");
            assert_eq!(kinds(&c), [(ProblemKind::ExtentOutsideSegment, Some(j))]);
            sql(&c, "UPDATE extents SET first_lbn = 7 WHERE stream = 2");
            assert_eq!(kinds(&c), [(ProblemKind::ExtentOverlap, Some(j))]);
            sql(
                &c,
                "UPDATE extents SET first_lbn = 8, blocks = 0 WHERE stream = 2",
            );
            assert_eq!(kinds(&c), [(ProblemKind::EmptyExtent, Some(j))]);
        }
    }

    both! {
        fn rows_of_a_missing_job_are_orphans() {
            let (_d, c, j) = sound();
            sql(&c, "DELETE FROM jobs");
            let r = c.check().unwrap();
            let mut tables: Vec<&str> = (r.problems.iter())
                .inspect(|p| assert_eq!((p.kind, p.job), (ProblemKind::Orphan, Some(j))))
                .map(|p| {
                    p.detail
                        .split(" of ")
                        .nth(1)
                        .unwrap()
                        .split(' ')
                        .next()
                        .unwrap()
                })
                .collect();
            tables.sort();
            let mut all = JOB_TABLES.to_vec();
            all.sort();
            assert_eq!(tables, all);
        }
    }

    both! {
        fn chunks_on_a_missing_stage_are_orphans() {
            let (_d, c, j) = sound();
            sql(&c, "DELETE FROM stages");
            let r = c.check().unwrap();
            assert_eq!(r.problems.len(), 1, "{r:?}");
            assert_eq!(
                (r.problems[0].kind, r.problems[0].job),
                (ProblemKind::Orphan, Some(j))
            );
            assert!(
                r.problems[0]
                    .detail
                    .contains("on stage 1, which is missing"),
                "{r:?}"
            );
        }
    }

    both! {
        fn an_open_segment_is_a_problem_only_once_its_job_ended() {
            let (_d, c, j) = sound();
            sql(&c, "UPDATE job_volumes SET last_lbn = NULL");
            assert_eq!(kinds(&c), [(ProblemKind::Segment, Some(j))]);
            for status in ["running", "failed", "queued"] {
                sql(&c, &format!("UPDATE jobs SET status = '{status}'"));
                assert_eq!(kinds(&c), [], "{status}");
            }
            // A file past the open segment's first block is inside it, as far as is known.
            sql(
                &c,
                &format!("UPDATE files SET start_lbn = 500, end_lbn = 501 WHERE path = {}", blob(&c, "c")),
            );
            assert_eq!(kinds(&c), []);
            sql(&c, "UPDATE job_volumes SET last_lbn = 1");
            assert!(kinds(&c).contains(&(ProblemKind::Segment, Some(j))));
        }
    }

    #[test]
    fn damage_sqlite_finds_is_named_before_the_rest() {
        let (dir, c, _j) = sound();
        // An index that no longer matches its table.
        sql(
            &c,
            "PRAGMA writable_schema = ON; \
             UPDATE sqlite_schema SET sql = replace(sql, 'seq, first_lbn', 'first_lbn, seq') \
             WHERE name = 'extents_by_job';",
        );
        drop(c);
        let c = Catalog::open(&dir.path().join("c.db")).unwrap();
        let r = c.check().unwrap();
        assert!(!r.ok());
        assert!(
            r.problems.iter().all(|p| p.kind == ProblemKind::Sqlite),
            "{r:?}"
        );
    }
}
