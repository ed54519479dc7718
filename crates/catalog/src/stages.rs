//! Disk stages: the folders streams are spooled to before tape, and the chunk files
//! each holds (STAGE.md). A chunk is recorded once its file is complete on disk, and
//! marked despooled once its blocks are on tape and recorded.

use crate::db::{params, OptionalExtension, ToValue};
use crate::error::{is_duplicate_key, CatalogError, Doing, Result};
use crate::{Catalog, ChunkState};
use std::path::{Path, PathBuf};

/// A disk stage: a folder and how much of it tapeloom may fill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stage {
    /// Catalog id.
    pub id: i64,
    /// The folder, absolute.
    pub path: PathBuf,
    /// Bytes of chunk files tapeloom may keep there.
    pub size_limit: u64,
    /// When it was added (ns since the epoch).
    pub added_ns: i64,
}

/// A chunk file of one stream, complete on a stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagedChunk {
    /// The job.
    pub job_id: i64,
    /// The stream within the job.
    pub stream: u16,
    /// The chunk's number within the stream, from 0.
    pub seq: u64,
    /// The stage holding it.
    pub stage_id: i64,
    /// Its file, relative to the stage's folder.
    pub file: String,
    /// Stream block seq of its first block.
    pub first_block: u64,
    /// Number of blocks in it.
    pub blocks: u64,
    /// Stream offset of its first block's payload.
    pub stream_offset: u64,
    /// Size of its file.
    pub bytes: u64,
    /// Whether its blocks are on tape yet.
    pub state: ChunkState,
    /// When it was recorded (ns since the epoch).
    pub created_ns: i64,
    /// Despooled and kept: its file stays on the stage until this time (ns since the
    /// epoch), or until its space is needed. `None`: not kept (spooled, or its file
    /// is gone).
    pub keep_until_ns: Option<i64>,
}

impl StagedChunk {
    /// Whether its blocks are on tape and its file is kept on the stage.
    pub fn is_kept(&self) -> bool {
        self.state == ChunkState::Despooled && self.keep_until_ns.is_some()
    }

    /// Whether the catalog says its file is on the stage: spooled, or kept.
    pub fn on_stage(&self) -> bool {
        self.state == ChunkState::Spooled || self.is_kept()
    }
}

/// Which chunks [`Catalog::staged_chunks`] lists; `None` fields match all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChunkFilter {
    /// Of this job.
    pub job: Option<i64>,
    /// Of this stream (of any job unless `job` is set).
    pub stream: Option<u16>,
    /// In this state.
    pub state: Option<ChunkState>,
    /// On this stage.
    pub stage: Option<i64>,
}

/// What a stage holds, by the catalog.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StageUse {
    /// Bytes of chunks not yet on tape: the space the stage's limit counts.
    pub spooled_bytes: u64,
    /// Chunks not yet on tape.
    pub spooled_chunks: u64,
    /// Bytes of chunks on tape whose rows are kept, their files kept or not.
    pub despooled_bytes: u64,
    /// Chunks on tape whose rows are kept.
    pub despooled_chunks: u64,
    /// Bytes of chunks on tape whose files are kept on the stage (part of
    /// `despooled_bytes`); the stage's limit counts them.
    pub kept_bytes: u64,
    /// Chunks on tape whose files are kept on the stage.
    pub kept_chunks: u64,
}

impl StageUse {
    /// The space the stage's limit counts: chunks not yet on tape, and kept ones.
    pub fn used(&self) -> u64 {
        self.spooled_bytes + self.kept_bytes
    }
}

const CHUNK_COLS: &str = "job_id, stream, seq, stage_id, file, first_block, blocks, \
                          stream_offset, bytes, state, created_ns, keep_until_ns";

fn chunk_row(r: &crate::db::Row) -> crate::db::Result<StagedChunk> {
    Ok(StagedChunk {
        job_id: r.get(0)?,
        stream: r.get(1)?,
        seq: r.get::<i64>(2)? as u64,
        stage_id: r.get(3)?,
        file: r.get(4)?,
        first_block: r.get::<i64>(5)? as u64,
        blocks: r.get::<i64>(6)? as u64,
        stream_offset: r.get::<i64>(7)? as u64,
        bytes: r.get::<i64>(8)? as u64,
        state: r.get(9)?,
        created_ns: r.get(10)?,
        keep_until_ns: r.get(11)?,
    })
}

fn stage_row(r: &crate::db::Row) -> crate::db::Result<Stage> {
    Ok(Stage {
        id: r.get(0)?,
        path: PathBuf::from(r.get::<String>(1)?),
        size_limit: r.get::<i64>(2)? as u64,
        added_ns: r.get(3)?,
    })
}

fn path_text(path: &Path) -> Result<&str> {
    path.to_str().ok_or_else(|| CatalogError::StagePathNotUtf8 {
        path: path.to_path_buf(),
    })
}

impl Catalog {
    /// Records a stage. Its path must not be in the catalog
    /// ([`CatalogError::StageExists`]); the caller makes it absolute.
    pub fn add_stage(&self, path: &Path, size_limit: u64, added_ns: i64) -> Result<Stage> {
        let text = path_text(path)?;
        match self.conn.query_row(
            "INSERT INTO stages (path, size_limit, added_ns, host) VALUES (?1, ?2, ?3, ?4) \
             RETURNING id",
            params![text, size_limit as i64, added_ns, self.host],
            |r| r.get::<i64>(0),
        ) {
            Ok(id) => Ok(Stage {
                id,
                path: path.to_path_buf(),
                size_limit,
                added_ns,
            }),
            Err(e) if is_duplicate_key(&e) => Err(CatalogError::StageExists {
                path: path.to_path_buf(),
            }),
            Err(e) => Err(e).doing("record a stage"),
        }
    }

    /// Every stage of this host, in the order they were added.
    pub fn stages(&self) -> Result<Vec<Stage>> {
        let run = || -> crate::db::Result<Vec<Stage>> {
            let mut st = self.conn.prepare(
                "SELECT id, path, size_limit, added_ns FROM stages WHERE host = ?1 ORDER BY id",
            )?;

            st.query_map(params![self.host], stage_row)?.collect()
        };
        run().doing("list the stages")
    }

    /// The stage at `path`, if one is.
    pub fn stage_by_path(&self, path: &Path) -> Result<Option<Stage>> {
        let text = path_text(path)?;
        self.conn
            .query_row(
                "SELECT id, path, size_limit, added_ns FROM stages WHERE path = ?1 AND host = ?2",
                params![text, self.host],
                stage_row,
            )
            .optional()
            .doing("look up a stage")
    }

    /// Forgets a stage and the rows of its despooled chunks. Refused while it holds
    /// chunks not yet on tape ([`CatalogError::StageHoldsData`], naming their jobs).
    pub fn remove_stage(&mut self, id: i64) -> Result<()> {
        let run = |c: &mut Catalog| -> crate::db::Result<std::result::Result<(), CatalogError>> {
            let tx = c.conn.write_tx()?;
            let path: Option<String> = tx
                .query_row("SELECT path FROM stages WHERE id = ?1", params![id], |r| {
                    r.get(0)
                })
                .optional()?;
            let Some(path) = path else {
                return Ok(Err(CatalogError::NoStage { id }));
            };
            let jobs: Vec<(i64, i64)> = {
                let mut st = tx.prepare(
                    "SELECT job_id, COUNT(*) FROM staged_chunks \
                     WHERE stage_id = ?1 AND state = ?2 GROUP BY job_id ORDER BY job_id",
                )?;

                st.query_map(params![id, ChunkState::Spooled], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })?
                .collect::<crate::db::Result<_>>()?
            };
            if !jobs.is_empty() {
                return Ok(Err(CatalogError::StageHoldsData {
                    path: PathBuf::from(path),
                    chunks: jobs.iter().map(|&(_, n)| n as u64).sum(),
                    jobs: jobs.into_iter().map(|(j, _)| j).collect(),
                }));
            }
            tx.execute("DELETE FROM staged_chunks WHERE stage_id = ?1", params![id])?;
            tx.execute("DELETE FROM stages WHERE id = ?1", params![id])?;
            tx.commit()?;
            Ok(Ok(()))
        };
        run(self).doing("remove a stage")?
    }

    /// Records a chunk whose file is complete on its stage. The same (job, stream,
    /// seq) must not be recorded ([`CatalogError::ChunkExists`]).
    pub fn add_staged_chunk(&self, c: &StagedChunk) -> Result<()> {
        match self.conn.execute(
            &format!(
                "INSERT INTO staged_chunks ({CHUNK_COLS}) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
            ),
            params![
                c.job_id,
                c.stream,
                c.seq as i64,
                c.stage_id,
                c.file,
                c.first_block as i64,
                c.blocks as i64,
                c.stream_offset as i64,
                c.bytes as i64,
                c.state,
                c.created_ns,
                c.keep_until_ns
            ],
        ) {
            Ok(_) => Ok(()),
            Err(e) if is_duplicate_key(&e) => Err(CatalogError::ChunkExists {
                job: c.job_id,
                stream: c.stream,
                seq: c.seq,
            }),
            Err(e) => Err(e).doing("record a staged chunk"),
        }
    }

    /// The jobs with chunks recorded on this host's stages, in any state.
    pub fn jobs_with_chunks(&self) -> Result<Vec<i64>> {
        let run = || -> crate::db::Result<Vec<i64>> {
            let mut st = self.conn.prepare(
                "SELECT DISTINCT job_id FROM staged_chunks \
                 WHERE stage_id IN (SELECT id FROM stages WHERE host = ?1) ORDER BY job_id",
            )?;

            st.query_map(params![self.host], |r| r.get(0))?.collect()
        };
        run().doing("list the jobs with staged chunks")
    }

    /// Marks chunk `seq` as the one holding its stream's end.
    pub fn mark_chunk_last(&self, job: i64, stream: u16, seq: u64) -> Result<()> {
        self.conn
            .execute(
                "UPDATE staged_chunks SET last = 1 WHERE job_id = ?1 AND stream = ?2 AND seq = ?3",
                params![job, stream, seq as i64],
            )
            .map(|_| ())
            .doing("mark a stream's last chunk")
    }

    /// The streams of `job` whose last chunk was recorded: they were spooled whole.
    pub fn streams_spooled_whole(&self, job: i64) -> Result<Vec<u16>> {
        let run = || -> crate::db::Result<Vec<u16>> {
            let mut st = self.conn.prepare(
                "SELECT DISTINCT stream FROM staged_chunks WHERE job_id = ?1 AND last = 1 \
                 ORDER BY stream",
            )?;

            st.query_map(params![job], |r| r.get(0))?.collect()
        };
        run().doing("list the streams spooled whole")
    }

    /// Records that entry `path` of `stream` was open when the chunk holding its
    /// start left the stage (a full stage gives back what is on tape).
    pub fn add_stage_cut(&self, job: i64, stream: u16, path: &[u8]) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO stage_cuts (job_id, stream, path) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
                params![job, stream, path],
            )
            .map(|_| ())
            .doing("record an entry cut from the stage")
    }

    /// The entries of `job` recorded by [`Catalog::add_stage_cut`]: (stream, path).
    pub fn stage_cuts(&self, job: i64) -> Result<Vec<(u16, Vec<u8>)>> {
        let run = || -> crate::db::Result<Vec<(u16, Vec<u8>)>> {
            let mut st = self.conn.prepare(
                "SELECT stream, path FROM stage_cuts WHERE job_id = ?1 ORDER BY stream, path",
            )?;

            st.query_map(params![job], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect()
        };
        run().doing("list the entries cut from the stage")
    }

    /// Marks a chunk despooled: its blocks are on tape and recorded. Its file is
    /// gone (or about to be).
    pub fn mark_chunk_despooled(&self, job: i64, stream: u16, seq: u64) -> Result<()> {
        self.mark_chunk_despooled_until(job, stream, seq, None)
    }

    /// Marks a chunk despooled, its file kept on the stage until `keep_until_ns`
    /// when that is given.
    pub fn mark_chunk_despooled_until(
        &self,
        job: i64,
        stream: u16,
        seq: u64,
        keep_until_ns: Option<i64>,
    ) -> Result<()> {
        let n = self
            .conn
            .execute(
                "UPDATE staged_chunks SET state = ?4, keep_until_ns = ?5 \
                 WHERE job_id = ?1 AND stream = ?2 AND seq = ?3",
                params![
                    job,
                    stream,
                    seq as i64,
                    ChunkState::Despooled,
                    keep_until_ns
                ],
            )
            .doing("mark a chunk despooled")?;
        if n == 0 {
            return Err(CatalogError::NoChunk { job, stream, seq });
        }
        Ok(())
    }

    /// A kept chunk's file is gone from its stage (its keep ran out, or its space
    /// was needed): it is no longer kept. A chunk not kept is left as it is.
    pub fn drop_kept_chunk(&self, job: i64, stream: u16, seq: u64) -> Result<()> {
        let n = self
            .conn
            .execute(
                "UPDATE staged_chunks SET keep_until_ns = NULL \
                 WHERE job_id = ?1 AND stream = ?2 AND seq = ?3 AND state = ?4",
                params![job, stream, seq as i64, ChunkState::Despooled],
            )
            .doing("drop a kept chunk")?;
        if n == 0 && !self.chunk_exists(job, stream, seq)? {
            return Err(CatalogError::NoChunk { job, stream, seq });
        }
        Ok(())
    }

    fn chunk_exists(&self, job: i64, stream: u16, seq: u64) -> Result<bool> {
        self.conn
            .query_row(
                "SELECT 1 FROM staged_chunks WHERE job_id = ?1 AND stream = ?2 AND seq = ?3",
                params![job, stream, seq as i64],
                |_| Ok(()),
            )
            .optional()
            .map(|r| r.is_some())
            .doing("look up a chunk")
    }

    /// The chunks `filter` matches, by job, stream and seq.
    pub fn staged_chunks(&self, filter: &ChunkFilter) -> Result<Vec<StagedChunk>> {
        let stage_id = filter.stage;
        let mut conds = Vec::new();
        let mut args: Vec<&dyn ToValue> = Vec::new();
        if let Some(j) = &filter.job {
            args.push(j);
            conds.push(format!("job_id = ?{}", args.len()));
        }
        if let Some(s) = &filter.stream {
            args.push(s);
            conds.push(format!("stream = ?{}", args.len()));
        }
        if let Some(s) = &filter.state {
            args.push(s);
            conds.push(format!("state = ?{}", args.len()));
        }
        if let Some(s) = &stage_id {
            args.push(s);
            conds.push(format!("stage_id = ?{}", args.len()));
        }
        let mut sql = format!("SELECT {CHUNK_COLS} FROM staged_chunks");
        if !conds.is_empty() {
            sql.push_str(" WHERE ");
            sql.push_str(&conds.join(" AND "));
        }
        sql.push_str(" ORDER BY job_id, stream, seq");
        let run = || -> crate::db::Result<Vec<StagedChunk>> {
            let mut st = self.conn.prepare(&sql)?;

            st.query_map(&args[..], chunk_row)?.collect()
        };
        run().doing("list staged chunks")
    }

    /// What each stage holds, by stage id; stages without chunks are absent.
    pub fn stage_use(&self) -> Result<Vec<(i64, StageUse)>> {
        let run = || -> crate::db::Result<Vec<(i64, StageUse)>> {
            let mut st = self.conn.prepare(
                "SELECT stage_id, \
                   CAST(SUM(CASE WHEN state = ?1 THEN bytes ELSE 0 END) AS BIGINT), \
                   CAST(SUM(CASE WHEN state = ?1 THEN 1 ELSE 0 END) AS BIGINT), \
                   CAST(SUM(CASE WHEN state = ?1 THEN 0 ELSE bytes END) AS BIGINT), \
                   CAST(SUM(CASE WHEN state = ?1 THEN 0 ELSE 1 END) AS BIGINT), \
                   CAST(SUM(CASE WHEN state = ?1 OR keep_until_ns IS NULL THEN 0 ELSE bytes END) AS BIGINT), \
                   CAST(SUM(CASE WHEN state = ?1 OR keep_until_ns IS NULL THEN 0 ELSE 1 END) AS BIGINT) \
                 FROM staged_chunks GROUP BY stage_id ORDER BY stage_id",
            )?;

            st.query_map(params![ChunkState::Spooled], |r| {
                Ok((
                    r.get(0)?,
                    StageUse {
                        spooled_bytes: r.get::<i64>(1)? as u64,
                        spooled_chunks: r.get::<i64>(2)? as u64,
                        despooled_bytes: r.get::<i64>(3)? as u64,
                        despooled_chunks: r.get::<i64>(4)? as u64,
                        kept_bytes: r.get::<i64>(5)? as u64,
                        kept_chunks: r.get::<i64>(6)? as u64,
                    },
                ))
            })?
            .collect()
        };
        run().doing("add up the stages' use")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::both;
    use crate::tests::scratch;

    fn chunk(job: i64, stream: u16, seq: u64, stage: i64, bytes: u64) -> StagedChunk {
        StagedChunk {
            job_id: job,
            stream,
            seq,
            stage_id: stage,
            file: format!("job-{job:08}/stream-{stream:04}/chunk-{seq:06}.tlc"),
            first_block: seq * 10,
            blocks: 10,
            stream_offset: seq * 1000,
            bytes,
            state: ChunkState::Spooled,
            created_ns: 7,
            keep_until_ns: None,
        }
    }

    both! {
        fn stages_are_added_once_and_listed_in_order() {
            let (_d, c) = scratch();
            let a = c.add_stage(Path::new("/s/a"), 100, 1).unwrap();
            let b = c.add_stage(Path::new("/s/b"), 200, 2).unwrap();
            assert_eq!(c.stages().unwrap(), vec![a.clone(), b]);
            assert_eq!(c.stage_by_path(Path::new("/s/a")).unwrap(), Some(a));
            assert_eq!(c.stage_by_path(Path::new("/s/c")).unwrap(), None);
            assert!(matches!(
                c.add_stage(Path::new("/s/a"), 5, 3),
                Err(CatalogError::StageExists { path }) if path == Path::new("/s/a")
            ));
        }
    }

    both! {
        fn a_stage_holding_chunks_not_on_tape_is_not_removed() {
            let (_d, mut c) = scratch();
            let a = c.add_stage(Path::new("/s/a"), 100, 1).unwrap();
            c.add_staged_chunk(&chunk(42, 0, 0, a.id, 10)).unwrap();
            c.add_staged_chunk(&chunk(42, 1, 0, a.id, 10)).unwrap();
            c.add_staged_chunk(&chunk(7, 0, 0, a.id, 10)).unwrap();
            let e = c.remove_stage(a.id).unwrap_err();
            assert!(
                matches!(&e, CatalogError::StageHoldsData { chunks: 3, jobs, .. } if jobs == &[7, 42]),
                "{e:?}"
            );
            assert_eq!(
                e.to_string(),
                "stage /s/a holds 3 chunks not yet on tape, of jobs 7, 42"
            );
            c.mark_chunk_despooled(42, 0, 0).unwrap();
            c.mark_chunk_despooled(42, 1, 0).unwrap();
            let e = c.remove_stage(a.id).unwrap_err();
            assert!(
                matches!(&e, CatalogError::StageHoldsData { chunks: 1, jobs, .. } if jobs == &[7]),
                "{e:?}"
            );
            c.mark_chunk_despooled(7, 0, 0).unwrap();
            c.remove_stage(a.id).unwrap();
            assert!(c.stages().unwrap().is_empty());
            assert!(c.staged_chunks(&ChunkFilter::default()).unwrap().is_empty());
            assert!(matches!(
                c.remove_stage(a.id),
                Err(CatalogError::NoStage { id }) if id == a.id
            ));
        }
    }

    both! {
        fn chunks_are_recorded_once_marked_and_listed_by_filter() {
            let (_d, c) = scratch();
            let a = c.add_stage(Path::new("/s/a"), 100, 1).unwrap();
            let b = c.add_stage(Path::new("/s/b"), 100, 1).unwrap();
            let rows = [
                chunk(1, 0, 0, a.id, 10),
                chunk(1, 0, 1, b.id, 20),
                chunk(1, 2, 0, a.id, 30),
                chunk(2, 0, 0, b.id, 40),
            ];
            for r in &rows {
                c.add_staged_chunk(r).unwrap();
            }
            assert!(matches!(
                c.add_staged_chunk(&rows[1]),
                Err(CatalogError::ChunkExists {
                    job: 1,
                    stream: 0,
                    seq: 1
                })
            ));
            assert!(matches!(
                c.mark_chunk_despooled(1, 0, 9),
                Err(CatalogError::NoChunk {
                    job: 1,
                    stream: 0,
                    seq: 9
                })
            ));
            c.mark_chunk_despooled(1, 0, 0).unwrap();
            let all = c.staged_chunks(&ChunkFilter::default()).unwrap();
            assert_eq!(all.len(), 4);
            assert_eq!(all[0].state, ChunkState::Despooled);
            assert_eq!(all[1], rows[1]);
            let seqs = |f: ChunkFilter| -> Vec<(i64, u16, u64)> {
                c.staged_chunks(&f)
                    .unwrap()
                    .iter()
                    .map(|r| (r.job_id, r.stream, r.seq))
                    .collect()
            };
            let job1 = ChunkFilter {
                job: Some(1),
                ..Default::default()
            };
            assert_eq!(seqs(job1), vec![(1, 0, 0), (1, 0, 1), (1, 2, 0)]);
            assert_eq!(
                seqs(ChunkFilter {
                    stream: Some(0),
                    ..job1
                }),
                vec![(1, 0, 0), (1, 0, 1)]
            );
            assert_eq!(
                seqs(ChunkFilter {
                    state: Some(ChunkState::Spooled),
                    ..job1
                }),
                vec![(1, 0, 1), (1, 2, 0)]
            );
            assert_eq!(
                seqs(ChunkFilter {
                    stage: Some(b.id),
                    ..Default::default()
                }),
                vec![(1, 0, 1), (2, 0, 0)]
            );
            assert_eq!(
                c.stage_use().unwrap(),
                vec![
                    (
                        a.id,
                        StageUse {
                            spooled_bytes: 30,
                            spooled_chunks: 1,
                            despooled_bytes: 10,
                            despooled_chunks: 1,
                            ..Default::default()
                        }
                    ),
                    (
                        b.id,
                        StageUse {
                            spooled_bytes: 60,
                            spooled_chunks: 2,
                            ..Default::default()
                        }
                    )
                ]
            );
        }
    }

    both! {
        fn a_chunk_despooled_and_kept_counts_until_its_file_is_dropped() {
            let (_d, c) = scratch();
            let a = c.add_stage(Path::new("/s/a"), 100, 1).unwrap();
            c.add_staged_chunk(&chunk(1, 0, 0, a.id, 10)).unwrap();
            c.add_staged_chunk(&chunk(1, 0, 1, a.id, 20)).unwrap();
            c.mark_chunk_despooled_until(1, 0, 0, Some(500)).unwrap();
            c.mark_chunk_despooled(1, 0, 1).unwrap();
            let rows = c.staged_chunks(&ChunkFilter::default()).unwrap();
            assert_eq!(rows[0].keep_until_ns, Some(500));
            assert!(rows[0].is_kept() && rows[0].on_stage());
            assert!(!rows[1].is_kept() && !rows[1].on_stage());
            let u = c.stage_use().unwrap()[0].1;
            assert_eq!(
                (u.despooled_bytes, u.kept_bytes, u.kept_chunks),
                (30, 10, 1)
            );
            assert_eq!(u.used(), 10);
            c.drop_kept_chunk(1, 0, 0).unwrap();
            // Dropping a chunk not kept changes nothing; one not recorded is refused.
            c.drop_kept_chunk(1, 0, 1).unwrap();
            assert!(matches!(
                c.drop_kept_chunk(1, 0, 7),
                Err(CatalogError::NoChunk { seq: 7, .. })
            ));
            let u = c.stage_use().unwrap()[0].1;
            assert_eq!((u.kept_bytes, u.used()), (0, 0));
        }
    }

    both! {
        fn last_chunks_and_cut_entries_are_recorded_per_job() {
            let (_d, c) = scratch();
            let st = c.add_stage(Path::new("/s/a"), 1000, 1).unwrap().id;
            for (stream, seq) in [(1, 0), (1, 1), (2, 0)] {
                c.add_staged_chunk(&chunk(5, stream, seq, st, 10)).unwrap();
            }
            assert!(c.streams_spooled_whole(5).unwrap().is_empty());
            c.mark_chunk_last(5, 1, 1).unwrap();
            assert_eq!(c.streams_spooled_whole(5).unwrap(), vec![1]);
            assert!(c.streams_spooled_whole(6).unwrap().is_empty());
            c.add_stage_cut(5, 2, b"b/big").unwrap();
            c.add_stage_cut(5, 2, b"b/big").unwrap();
            assert_eq!(c.stage_cuts(5).unwrap(), vec![(2, b"b/big".to_vec())]);
            assert!(c.stage_cuts(6).unwrap().is_empty());
        }
    }
}
