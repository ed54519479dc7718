//! Chunk files written, read back, damaged and checked against the catalog.

use super::*;
use crate::{ChunkHeaderProblem, Error, StageError};
use std::path::Path;
use tapeloom_catalog::{Catalog, ChunkFilter, ChunkState, Stage};
use tapeloom_format::{BlockHeader, PackedBlock, BLOCK_HEADER_LEN, NO_RECORD};

const TAG: u64 = 0x1234_5678_9abc_def0;

/// `n` consecutive blocks of `stream` from block `first`: plain 4 KiB blocks and,
/// every third, a "compressed" block of varying length (its bytes are not a real zstd
/// frame; the stage never looks inside).
fn blocks(stream: u16, first: u64, n: u64) -> Vec<PackedBlock> {
    let mut offset = first * 4000;
    (first..first + n)
        .map(|seq| {
            let compressed = seq % 3 == 2;
            let payload_len = if compressed {
                4000
            } else {
                1000 + (seq as u32 * 37) % 3000
            };
            let len = if compressed {
                BLOCK_HEADER_LEN + 100 + (seq as usize * 53) % 900
            } else {
                4096
            };
            let mut buf = vec![0u8; len];
            for (i, b) in buf[BLOCK_HEADER_LEN..].iter_mut().enumerate() {
                *b = (seq as usize * 31 + i) as u8;
            }
            let header = BlockHeader {
                volume: [0; 16],
                lbn: 0,
                job_tag: TAG,
                stream,
                payload_len,
                stream_offset: offset,
                first_record: NO_RECORD,
                compressed,
                encrypted: false,
            };
            offset += u64::from(payload_len);
            PackedBlock::new(buf, header, seq)
        })
        .collect()
}

/// Writes `blocks` as chunk `seq` of job 42 on `stage`; returns its path and row.
fn write_chunk(stage: &Path, seq: u64, bs: &mut [PackedBlock]) -> (PathBuf, StagedChunk) {
    let mut w = ChunkWriter::create(stage, 42, TAG, 3, seq, bs[0].seq).unwrap();
    for b in bs.iter_mut() {
        w.push(b).unwrap();
    }
    let row = w.finish(1).unwrap();
    (stage.join(&row.file), row)
}

use tapeloom_catalog::StagedChunk;

fn read_all(path: &Path) -> Vec<crate::Result<StagedBlock>> {
    ChunkReader::open(path).unwrap().collect()
}

#[test]
fn chunk_files_are_named_by_job_stream_and_seq() {
    assert_eq!(
        chunk_file(42, 3, 7),
        "tapeloom-stage/job-00000042/stream-0003/chunk-000007.tlc"
    );
}

#[test]
fn a_chunk_reads_back_the_blocks_written_sealed_for_the_stage() {
    let dir = tempfile::tempdir().unwrap();
    let mut bs = blocks(3, 10, 20);
    let (path, row) = write_chunk(dir.path(), 2, &mut bs);
    assert_eq!(
        row.file,
        "tapeloom-stage/job-00000042/stream-0003/chunk-000002.tlc"
    );
    assert_eq!(
        (row.job_id, row.stream, row.seq, row.first_block, row.blocks),
        (42, 3, 2, 10, 20)
    );
    assert_eq!(row.stream_offset, 40_000);
    assert_eq!(row.state, ChunkState::Spooled);
    assert_eq!(row.bytes, std::fs::metadata(&path).unwrap().len());
    assert!(!path.with_extension("tlc.part").exists());

    let r = ChunkReader::open_expecting(&path, TAG, 3).unwrap();
    assert_eq!((r.seq(), r.first_block(), r.blocks()), (2, 10, 20));
    let end = bs
        .last()
        .map(|b| b.header.stream_offset + u64::from(b.header.payload_len));
    assert_eq!(r.stream_range(), 40_000..end.unwrap());
    let back: Vec<StagedBlock> = r.map(|b| b.unwrap()).collect();
    assert_eq!(back.len(), 20);
    for (b, want) in back.iter().zip(&bs) {
        assert_eq!(b.seq, want.seq);
        assert_eq!(b.block, want.buf, "block {}", want.seq);
        assert_eq!(b.header.lbn, want.seq);
        assert_eq!(b.header.volume, [0; 16]);
        assert_eq!(b.header.compressed, want.header.compressed);
    }

    // Sealed blocks read back make the same chunk again.
    let other = tempfile::tempdir().unwrap();
    let mut w = ChunkWriter::create(other.path(), 42, TAG, 3, 2, 10).unwrap();
    for b in &back {
        w.push_sealed(&b.block).unwrap();
    }
    let again = w.finish(1).unwrap();
    assert_eq!(
        std::fs::read(other.path().join(&again.file)).unwrap(),
        std::fs::read(&path).unwrap()
    );
}

#[test]
fn a_chunk_refuses_blocks_out_of_place() {
    let dir = tempfile::tempdir().unwrap();
    let mut bs = blocks(3, 0, 3);
    let mut w = ChunkWriter::create(dir.path(), 42, TAG, 3, 0, 0).unwrap();
    w.push(&mut bs[0]).unwrap();
    let e = w.push(&mut bs[2]).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Stage(StageError::MisplacedBlock {
                seq: 1,
                what: "not the next block",
                ..
            })
        ),
        "{e:?}"
    );
    let mut other = blocks(4, 1, 1);
    assert!(matches!(
        w.push(&mut other[0]),
        Err(Error::Stage(StageError::MisplacedBlock {
            what: "another stream",
            ..
        }))
    ));
    let part = w.part_path().to_path_buf();
    assert!(part.exists());
    w.abandon().unwrap();
    assert!(!part.exists());
}

#[test]
fn a_flipped_byte_names_the_stream_bytes_it_costs() {
    let dir = tempfile::tempdir().unwrap();
    let mut bs = blocks(3, 0, 6);
    let (path, _) = write_chunk(dir.path(), 0, &mut bs);
    let mut bytes = std::fs::read(&path).unwrap();
    // The payload of block 2: past the chunk header, two blocks and three lengths.
    let at = CHUNK_HEADER_LEN + 3 * 4 + bs[0].buf.len() + bs[1].buf.len() + 100;
    bytes[at] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();
    let got = read_all(&path);
    assert_eq!(got.len(), 6);
    let (from, to) = (bs[2].header.stream_offset, bs[3].header.stream_offset);
    match &got[2] {
        Err(Error::Stage(StageError::DamagedBlock {
            stream: 3,
            seq: 2,
            from: f,
            to: t,
            path: p,
            ..
        })) => assert_eq!((*f, *t, p.as_path()), (from, to, path.as_path())),
        other => panic!("{other:?}"),
    }
    let intact: Vec<u64> = got
        .iter()
        .filter_map(|b| b.as_ref().ok().map(|b| b.seq))
        .collect();
    assert_eq!(intact, vec![0, 1, 3, 4, 5]);
}

#[test]
fn damage_in_the_last_block_runs_to_the_chunks_end() {
    let dir = tempfile::tempdir().unwrap();
    let mut bs = blocks(3, 0, 4);
    let (path, _) = write_chunk(dir.path(), 0, &mut bs);
    let mut bytes = std::fs::read(&path).unwrap();
    let n = bytes.len();
    bytes[n - 1] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let last = &bs[3].header;
    let got = read_all(&path);
    assert!(
        matches!(
            got[3],
            Err(Error::Stage(StageError::DamagedBlock { seq: 3, from, to, .. }))
                if from == last.stream_offset && to == last.stream_offset + u64::from(last.payload_len)
        ),
        "{:?}",
        got[3]
    );
}

#[test]
fn a_torn_tail_is_an_error_after_the_whole_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let mut bs = blocks(3, 0, 5);
    let (path, row) = write_chunk(dir.path(), 0, &mut bs);
    for cut in [1u64, 100, bs[4].buf.len() as u64 + 2] {
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(row.bytes - cut).unwrap();
        let got = read_all(&path);
        assert_eq!(got.len(), 5, "cut {cut}");
        assert!(got[..4].iter().all(|b| b.is_ok()));
        assert!(
            matches!(
                got[4],
                Err(Error::Stage(StageError::TornTail {
                    stream: 3,
                    blocks: 4,
                    expected: 5,
                    ..
                }))
            ),
            "cut {cut}: {:?}",
            got[4]
        );
    }
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(10).unwrap();
    assert!(matches!(
        ChunkReader::open(&path),
        Err(Error::Stage(StageError::ChunkHeader {
            problem: ChunkHeaderProblem::Truncated,
            ..
        }))
    ));
}

#[test]
fn a_bad_block_length_stops_reading() {
    let dir = tempfile::tempdir().unwrap();
    let mut bs = blocks(3, 0, 3);
    let (path, _) = write_chunk(dir.path(), 0, &mut bs);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = CHUNK_HEADER_LEN + 4 + bs[0].buf.len();
    bytes[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let got = read_all(&path);
    assert_eq!(got.len(), 2);
    assert!(matches!(
        got[1],
        Err(Error::Stage(StageError::BlockLength { len: u32::MAX, at: a, .. })) if a == at as u64
    ));
}

#[test]
fn a_chunk_of_another_job_or_stream_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut bs = blocks(3, 0, 1);
    let (path, _) = write_chunk(dir.path(), 0, &mut bs);
    let e = ChunkReader::open_expecting(&path, TAG, 4)
        .err()
        .expect("refused");
    assert!(matches!(
        e,
        Error::Stage(StageError::WrongChunk {
            stream: 4,
            found_stream: 3,
            found_tag: TAG,
            ..
        })
    ));
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[20] = 1;
    std::fs::write(&path, &bytes).unwrap();
    assert!(matches!(
        ChunkReader::open(&path),
        Err(Error::Stage(StageError::ChunkHeader {
            problem: ChunkHeaderProblem::BadCrc { .. },
            ..
        }))
    ));
}

fn catalog_with_stage(dir: &Path, limit: u64) -> (Catalog, Stage) {
    let c = Catalog::open(&dir.join("c.db")).unwrap();
    let s = c.add_stage(&dir.join("stage"), limit, 0).unwrap();
    (c, s)
}

#[test]
fn a_stream_spools_as_a_run_of_recorded_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let (c, stage) = catalog_with_stage(dir.path(), 1 << 20);
    let (set, reports) = StageSet::open(&c).unwrap();
    assert!(reports.iter().all(StageReport::is_clean));
    let mut spool = StreamSpool::new(set.clone(), &c, 42, TAG, 3, 20_000);
    let mut bs = blocks(3, 0, 30);
    let mut finished = Vec::new();
    for b in &mut bs {
        finished.extend(spool.push(b).unwrap());
    }
    finished.extend(spool.finish().unwrap());
    let rows = c.staged_chunks(&ChunkFilter::default()).unwrap();
    assert_eq!(rows, finished);
    assert!(rows.len() > 2);
    let mut next = 0;
    for (i, r) in rows.iter().enumerate() {
        assert_eq!((r.seq, r.first_block), (i as u64, next));
        assert!(r.bytes <= 20_000);
        next += r.blocks;
        let back: Vec<_> = ChunkReader::open(&stage.path.join(&r.file))
            .unwrap()
            .map(|b| b.unwrap().seq)
            .collect();
        assert_eq!(back, (r.first_block..next).collect::<Vec<_>>());
    }
    assert_eq!(next, 30);
    let total: u64 = rows.iter().map(|r| r.bytes).sum();
    assert_eq!(set.stages()[0].used, total);
    let (reopened, _) = StageSet::open(&c).unwrap();
    assert_eq!(reopened.stages()[0].used, total);
}

#[test]
fn opening_the_stages_removes_part_files_and_reports_strays_and_losses() {
    let dir = tempfile::tempdir().unwrap();
    let (c, stage) = catalog_with_stage(dir.path(), 1 << 20);
    let mut a = blocks(3, 0, 3);
    let (_, row) = write_chunk(&stage.path, 0, &mut a);
    c.add_staged_chunk(&StagedChunk {
        stage_id: stage.id,
        ..row.clone()
    })
    .unwrap();
    let mut b = blocks(3, 3, 3);
    let (lost_path, lost) = write_chunk(&stage.path, 1, &mut b);
    c.add_staged_chunk(&StagedChunk {
        stage_id: stage.id,
        ..lost.clone()
    })
    .unwrap();
    std::fs::remove_file(&lost_path).unwrap();
    // A chunk written and never recorded, and one never finished.
    let mut d = blocks(3, 6, 2);
    let (stray, _) = write_chunk(&stage.path, 2, &mut d);
    let mut w = ChunkWriter::create(&stage.path, 42, TAG, 3, 3, 8).unwrap();
    w.push(&mut blocks(3, 8, 1)[0]).unwrap();
    let part = w.part_path().to_path_buf();
    drop(w);
    assert!(part.exists());

    let (_, reports) = StageSet::open(&c).unwrap();
    let r = &reports[0];
    assert_eq!(r.removed_parts, vec![part.clone()]);
    assert!(!part.exists());
    assert_eq!(r.unrecorded, vec![stray]);
    assert_eq!(r.lost.len(), 1);
    assert_eq!(
        (r.lost[0].seq, r.lost[0].file.as_str()),
        (1, lost.file.as_str())
    );
    // A despooled chunk's file may be gone: that is no loss.
    c.mark_chunk_despooled(42, 3, 1).unwrap();
    assert!(check_stage(&c, &stage).unwrap().lost.is_empty());
}

#[test]
fn a_stage_is_added_once_and_removed_once_its_chunks_are_on_tape() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Catalog::open(&dir.path().join("c.db")).unwrap();
    let d = dir.path().join("a/b");
    assert!(matches!(
        add_stage(&c, &d, 0),
        Err(Error::Stage(StageError::ZeroSize))
    ));
    let file = dir.path().join("f");
    std::fs::write(&file, b"x").unwrap();
    assert!(matches!(
        add_stage(&c, &file, 10),
        Err(Error::Stage(StageError::NotADirectory { .. }))
    ));
    let s = add_stage(&c, &d, 1 << 20).unwrap();
    assert!(d.is_dir());
    assert_eq!(s.path, d.canonicalize().unwrap());
    assert!(matches!(
        add_stage(&c, &dir.path().join("a/./b"), 5),
        Err(Error::Catalog(
            tapeloom_catalog::CatalogError::StageExists { .. }
        ))
    ));
    let mut bs = blocks(3, 0, 2);
    let (path, row) = write_chunk(&s.path, 0, &mut bs);
    c.add_staged_chunk(&StagedChunk {
        stage_id: s.id,
        ..row
    })
    .unwrap();
    assert!(matches!(
        remove_stage(&mut c, &d),
        Err(Error::Catalog(tapeloom_catalog::CatalogError::StageHoldsData { ref jobs, .. })) if jobs == &[42]
    ));
    c.mark_chunk_despooled(42, 3, 0).unwrap();
    let (gone, deleted) = remove_stage(&mut c, &d).unwrap();
    assert_eq!((gone.id, deleted), (s.id, 1));
    assert!(!path.exists());
    assert!(!data_dir(&s.path).exists());
    assert!(d.is_dir());
    assert!(matches!(
        remove_stage(&mut c, &d),
        Err(Error::Stage(StageError::NoSuchStage { .. }))
    ));
}

mod damage {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]

        /// Whatever bit flips, the reader says so, and every block it returns is the
        /// block written.
        #[test]
        fn a_flipped_bit_is_reported_and_never_returned(at in 0.0f64..1.0, bit in 0u8..8) {
            let dir = tempfile::tempdir().unwrap();
            let mut bs = blocks(3, 0, 6);
            let (path, _) = write_chunk(dir.path(), 0, &mut bs);
            let mut bytes = std::fs::read(&path).unwrap();
            let pos = ((bytes.len() as f64 * at) as usize).min(bytes.len() - 1);
            bytes[pos] ^= 1 << bit;
            std::fs::write(&path, &bytes).unwrap();
            match ChunkReader::open(&path) {
                Err(_) => prop_assert!(pos < CHUNK_HEADER_LEN),
                Ok(r) => {
                    let got: Vec<_> = r.collect();
                    prop_assert!(got.iter().any(|b| b.is_err()), "flip at {} unnoticed", pos);
                    for b in got.iter().flatten() {
                        prop_assert_eq!(&b.block, &bs[b.seq as usize].buf);
                    }
                }
            }
        }

        /// Any bytes after a valid header are read without a panic.
        #[test]
        fn any_bytes_after_a_header_never_panic(
            blocks in 0u64..20,
            tail in proptest::collection::vec(any::<u8>(), 0..600),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("c.tlc");
            let head = chunk::ChunkHeader {
                job_tag: TAG, stream: 3, seq: 0, first_block: 0, blocks,
                first_offset: 0, end_offset: 100,
            };
            let mut bytes = head.encode().to_vec();
            bytes.extend_from_slice(&tail);
            std::fs::write(&path, &bytes).unwrap();
            let got: Vec<_> = ChunkReader::open(&path).unwrap().collect();
            prop_assert!(got.len() as u64 <= blocks);
        }

        /// Any file at all is opened or refused without a panic.
        #[test]
        fn any_file_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("c.tlc");
            std::fs::write(&path, &bytes).unwrap();
            if let Ok(r) = ChunkReader::open(&path) {
                let _ = r.count();
            }
        }
    }
}

#[test]
fn a_spooling_stream_waits_for_the_despooler_to_free_its_stage() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    // Room for two chunks of 20000 bytes.
    let (c, stage) = catalog_with_stage(dir.path(), 40_000);
    let (set, _) = StageSet::open(&c).unwrap();
    let spooler = {
        let set = set.clone();
        let db = db.clone();
        std::thread::spawn(move || {
            let c = Catalog::open(&db).unwrap();
            let mut spool = StreamSpool::new(set, &c, 42, TAG, 3, 20_000);
            let mut n = 0;
            for b in &mut blocks(3, 0, 40) {
                n += spool.push(b).unwrap().map_or(0, |_| 1);
            }
            n + spool.finish().unwrap().map_or(0, |_| 1)
        })
    };
    // The despooler: takes each recorded chunk, deletes its file and frees its space.
    let mut despooled = 0u64;
    let spooled = ChunkFilter {
        state: Some(ChunkState::Spooled),
        ..Default::default()
    };
    while !spooler.is_finished() || !c.staged_chunks(&spooled).unwrap().is_empty() {
        for ch in c.staged_chunks(&spooled).unwrap() {
            std::thread::sleep(std::time::Duration::from_millis(20));
            c.mark_chunk_despooled(ch.job_id, ch.stream, ch.seq)
                .unwrap();
            std::fs::remove_file(stage.path.join(&ch.file)).unwrap();
            set.release(ch.stage_id, ch.bytes);
            despooled += ch.blocks;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let chunks = spooler.join().unwrap();
    assert!(chunks > 4, "{chunks} chunks");
    assert_eq!(despooled, 40);
    let w = set.waits();
    assert!(w.count >= 1, "{w:?}");
    assert!(w.total > std::time::Duration::ZERO);
    assert_eq!(set.stages()[0].used, 0);
}
