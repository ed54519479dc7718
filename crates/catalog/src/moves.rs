//! Blocks a job wrote again on another cartridge after a deferred write error: the
//! drive reported that blocks it had taken never reached the tape, and the writer
//! wrote them again, in order, on the next cartridge. The rows and extents that
//! pointed at the lost places are pointed at the new ones.

use crate::db::params;
use crate::error::{Doing, Result};
use crate::write_tx;
use crate::{Catalog, Extent};

/// One block written again: where it was thought to be, where it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockMove {
    /// The block's stream.
    pub stream: u16,
    /// Stream offset of its payload.
    pub stream_offset: u64,
    /// (volume sequence, LBN) where it was written first and lost.
    pub from: (u32, u64),
    /// Where it was written again.
    pub to: (u32, u64),
}

impl Catalog {
    /// Points job `job`'s rows at where its lost blocks were written again
    /// (`moves`, in the order they were written). The extents of the segments the
    /// blocks were lost from end before the first lost block; the moved blocks of
    /// data streams (not `control`, the stream of the job's own records) get
    /// extents of their own.
    pub fn move_blocks(&self, job: i64, moves: &[BlockMove], control: u16) -> Result<()> {
        if moves.is_empty() {
            return Ok(());
        }
        let run = || -> crate::db::Result<()> {
            let tx = write_tx(&self.conn)?;
            tx.execute_batch(tx.pick(
                "CREATE TEMP TABLE IF NOT EXISTS moved_blocks ( \
                   seq INTEGER NOT NULL, lbn INTEGER NOT NULL, \
                   to_seq INTEGER NOT NULL, to_lbn INTEGER NOT NULL, \
                   PRIMARY KEY (seq, lbn)) WITHOUT ROWID; \
                 DELETE FROM moved_blocks;",
                "CREATE TEMP TABLE IF NOT EXISTS moved_blocks ( \
                   seq BIGINT NOT NULL, lbn BIGINT NOT NULL, \
                   to_seq BIGINT NOT NULL, to_lbn BIGINT NOT NULL, \
                   PRIMARY KEY (seq, lbn)); \
                 DELETE FROM moved_blocks;",
            ))?;
            {
                let mut ins = tx.prepare(
                    "INSERT INTO moved_blocks (seq, lbn, to_seq, to_lbn) VALUES (?1, ?2, ?3, ?4) \
                     ON CONFLICT (seq, lbn) DO UPDATE SET to_seq = excluded.to_seq, \
                     to_lbn = excluded.to_lbn",
                )?;
                for m in moves {
                    ins.execute(params![m.from.0, m.from.1, m.to.0, m.to.1])?;
                }
            }
            for end in ["start", "end"] {
                tx.execute(
                    &format!(
                        "UPDATE files SET ({end}_seq, {end}_lbn) = \
                           (SELECT to_seq, to_lbn FROM moved_blocks m \
                            WHERE m.seq = files.{end}_seq AND m.lbn = files.{end}_lbn) \
                         WHERE job_id = ?1 AND EXISTS (SELECT 1 FROM moved_blocks m \
                            WHERE m.seq = files.{end}_seq AND m.lbn = files.{end}_lbn)"
                    ),
                    params![job],
                )?;
            }
            // Each segment a block was lost from ends before its first lost block.
            let mut cut: Vec<(u32, u64)> = Vec::new();
            for m in moves {
                match cut.iter_mut().find(|c| c.0 == m.from.0) {
                    Some(c) => c.1 = c.1.min(m.from.1),
                    None => cut.push(m.from),
                }
            }
            for (seq, first) in cut {
                tx.execute(
                    "UPDATE extents SET blocks = ?3 - first_lbn WHERE job_id = ?1 AND seq = ?2 \
                     AND first_lbn < ?3 AND first_lbn + blocks > ?3",
                    params![job, seq, first],
                )?;
                tx.execute(
                    "DELETE FROM extents WHERE job_id = ?1 AND seq = ?2 AND first_lbn >= ?3",
                    params![job, seq, first],
                )?;
            }
            crate::files::insert_extents(&tx, job, &extents_of(moves, control))?;
            tx.execute("DELETE FROM moved_blocks", params![])?;
            tx.commit()
        };
        run().doing("point a job's rows at blocks written again")
    }
}

/// The runs of consecutive moved blocks of each data stream.
fn extents_of(moves: &[BlockMove], control: u16) -> Vec<Extent> {
    let mut out: Vec<Extent> = Vec::new();
    for m in moves.iter().filter(|m| m.stream != control) {
        if let Some(e) = out.iter_mut().rev().find(|e| e.stream == m.stream) {
            if e.seq == m.to.0 && e.first_lbn + e.blocks == m.to.1 {
                e.blocks += 1;
                continue;
            }
        }
        out.push(Extent {
            stream: m.stream,
            seq: m.to.0,
            first_lbn: m.to.1,
            blocks: 1,
            stream_offset: m.stream_offset,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::both;

    both! {
        fn rows_and_extents_follow_moved_blocks() {
            let (_dir, c) = crate::tests::scratch();
            let j = c.begin_job(1, "j", 0, 262144, &[]).unwrap();
            let ext = |stream, seq, first_lbn, blocks, stream_offset| Extent {
                stream,
                seq,
                first_lbn,
                blocks,
                stream_offset,
            };
            // Stream 1 in blocks 2..=9 of seq 0; stream 2 in 10..=11. Blocks 8..=11 are
            // lost and written again at 3.. of seq 1, in the same order.
            c.add_extents(j, &[ext(1, 0, 2, 8, 0), ext(2, 0, 10, 2, 0)])
                .unwrap();
            let mut a = crate::tests::row("a", 0);
            (a.start_seq, a.start_lbn, a.end_seq, a.end_lbn) = (0, 3, 0, 8);
            let mut b = crate::tests::row("b", 0);
            (b.start_seq, b.start_lbn, b.end_seq, b.end_lbn) = (0, 10, 0, 11);
            let mut keep = crate::tests::row("keep", 0);
            (keep.start_seq, keep.start_lbn, keep.end_seq, keep.end_lbn) = (0, 2, 0, 4);
            c.add_files(j, &[a, b, keep]).unwrap();
            let mv = |stream, off, from, to| BlockMove {
                stream,
                stream_offset: off,
                from: (0, from),
                to: (1, to),
            };
            let moves = [
                mv(1, 6 * 1000, 8, 3),
                mv(1, 7 * 1000, 9, 4),
                mv(2, 0, 10, 5),
                mv(0, 0, 11, 6),
            ];
            c.move_blocks(j, &moves, 0).unwrap();
            let files = c.files(j, None).unwrap();
            let at = |p: &str| {
                let f = files.iter().find(|f| f.path == p.as_bytes()).unwrap();
                (f.start_seq, f.start_lbn, f.end_seq, f.end_lbn)
            };
            assert_eq!(at("a"), (0, 3, 1, 3));
            assert_eq!(at("b"), (1, 5, 1, 6));
            assert_eq!(at("keep"), (0, 2, 0, 4));
            assert_eq!(
                c.extents(j).unwrap(),
                vec![
                    ext(1, 0, 2, 6, 0),
                    ext(1, 1, 3, 2, 6000),
                    ext(2, 1, 5, 1, 0)
                ]
            );
        }
    }
}
