//! A restore in two halves that may run on two machines: [`read_blocks`] does a
//! restore's reading (the same selection, plan, drives and stage reads) and hands
//! each block, as stored, to a [`BlockSink`]; [`crate::BlockRestore`] takes such blocks,
//! checks each with [`BlockHeader::open`] as a tape reader does, and decodes and
//! places them with the same decoders and restorer as a local restore. Nothing
//! the reading side sends is trusted: a block that fails its checks is lost as a
//! bad block on tape is, and paths are checked by the placer as for tape.
//!
//! An encrypted job is read without its key: its blocks are handed on sealed, as
//! stored (the plan comes from the catalog, never from their contents), and the
//! placing side, given the job's data key ([`crate::job_data_key`]), opens each
//! one, its tag checked, before decoding it.

use super::plan::Expect;
use super::plan::{self, select};
use super::{read_tape, staged, Out, RestoreOptions, RestoreReport};
use crate::error::{JobError, Result};
use crate::home::Home;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Mutex;
use std::time::Instant;
use tapeloom_catalog::FileRow;

/// Takes the blocks a restore reads, in the order the drives read them (the
/// blocks of several drives interleaved, each stream's in order).
pub trait BlockSink: Send {
    /// Before any block: the entries wanted (`None`: all of the job), those the
    /// job left out (their records may be partly stored), and what the catalog
    /// lists of each wanted entry, by path (the placing side names those it
    /// never meets, and those it meets otherwise).
    fn selection(
        &mut self,
        want: Option<&HashSet<Vec<u8>>>,
        left_out: &HashSet<Vec<u8>>,
        expected: &HashMap<Vec<u8>, Expect>,
    ) -> Result<()>;
    /// One block as stored: header and payload, still compressed as written.
    fn block(&mut self, block: &[u8]) -> Result<()>;
    /// Entries held by a block that could not be read, and why; from
    /// [`read_blocks`], one empty path for a block that held no entry.
    fn bad(&mut self, paths: &[Vec<u8>], why: &str) -> Result<()>;
}

/// The sink of [`read_blocks`] that tells a bad block holding no entry (of the
/// job's start, index or end) as one holding an entry of empty path: so that
/// the block itself is known to the other side, which a verify there needs.
struct Told<'a>(&'a mut dyn BlockSink);

impl BlockSink for Told<'_> {
    fn selection(
        &mut self,
        want: Option<&HashSet<Vec<u8>>>,
        left_out: &HashSet<Vec<u8>>,
        expected: &HashMap<Vec<u8>, Expect>,
    ) -> Result<()> {
        self.0.selection(want, left_out, expected)
    }

    fn block(&mut self, block: &[u8]) -> Result<()> {
        self.0.block(block)
    }

    fn bad(&mut self, paths: &[Vec<u8>], why: &str) -> Result<()> {
        match paths.is_empty() {
            true => self.0.bad(&[Vec::new()], why),
            false => self.0.bad(paths, why),
        }
    }
}

/// Reads what a restore of job `job_id` with `opts` reads (`opts.to` unused) and
/// hands it to `sink`. Returns the reading's figures: blocks, mounts, locates,
/// chains, drives, stage reads and seconds; nothing is placed. An encrypted job's
/// blocks are handed on sealed (those of a disk stage are in clear, as stored):
/// no key is needed here.
pub fn read_blocks(
    home: &Home,
    job_id: i64,
    opts: &RestoreOptions,
    sink: &mut dyn BlockSink,
) -> Result<RestoreReport> {
    let t0 = Instant::now();
    let mut told = Told(sink);
    let sink: &mut dyn BlockSink = &mut told;
    let cat = &home.catalog;
    let job = cat.job(job_id)?.ok_or(JobError::NoJob(job_id))?;
    let (want, rows) = select(cat, job_id, opts)?;
    let whole = want.is_none();
    let expected = plan::expected(cat, job_id, &rows, whole)?;
    sink.selection(want.as_ref(), &plan::left_out(cat, job_id)?, &expected)?;
    drop(expected);
    let streams = cat.streams(job_id)?;
    crate::regen::know(job.tag, &streams);
    let names: HashMap<u16, String> = streams.into_iter().map(|s| (s.stream, s.name)).collect();
    let needed: BTreeSet<u16> = match whole {
        true => names.keys().copied().collect(),
        false => rows.iter().map(|r| r.stream).collect(),
    };
    // A part of a job read by cartridge (`opts.volumes`) reads no stage: the
    // tape holds each block once, the stage may hold it too.
    let on_stage = match opts.volumes.is_empty() {
        true => staged::on_stage(cat, job_id, &needed)?,
        false => Default::default(),
    };
    let from_stage = staged::hand(job.tag, &on_stage, sink)?;
    let rows: Vec<FileRow> = (rows.into_iter())
        .filter(|r| !on_stage.contains_key(&r.stream))
        .collect();
    let mut report = RestoreReport::default();
    if !needed.iter().all(|s| on_stage.contains_key(s)) {
        let skip: HashSet<u16> = on_stage.keys().copied().collect();
        let facts = (job_id, job.tag, job.block_size as usize, None);
        let sink = Mutex::new(sink);
        let out = Out::Hand(&sink);
        let (reads, chains) =
            read_tape(home, facts, (rows, whole), (&names, &skip), (opts, out, t0))?;
        super::add_drives(&mut report, reads);
        report.chains = chains;
    }
    (report.stream_sources, report.source) = super::sources(&needed, &on_stage, &names);
    (report.job, report.jobs) = (job_id, vec![job_id]);
    report.blocks_read_from_stage = from_stage.blocks;
    report.bytes_read_from_stage = from_stage.bytes;
    report.seconds = t0.elapsed().as_secs_f64();
    Ok(report)
}

#[cfg(test)]
mod verify_tests {
    use super::*;
    use crate::{
        backup, verify, BackupOptions, BlockVerify, Compress, Listed, Progress, VerifyReport,
    };
    use std::path::Path;
    use std::sync::Arc;

    /// Hands what a restore reads to a [`BlockVerify`], as a client's frames do.
    struct Feed(BlockVerify);

    impl BlockSink for Feed {
        fn selection(
            &mut self,
            _: Option<&HashSet<Vec<u8>>>,
            left_out: &HashSet<Vec<u8>>,
            expected: &HashMap<Vec<u8>, Expect>,
        ) -> Result<()> {
            left_out.iter().for_each(|p| self.0.left_out(p.clone()));
            (expected.iter()).for_each(|(p, x)| self.0.expect(p.clone(), *x));
            Ok(())
        }

        fn block(&mut self, block: &[u8]) -> Result<()> {
            Ok(self.0.block(block)?)
        }

        fn bad(&mut self, paths: &[Vec<u8>], why: &str) -> Result<()> {
            paths.iter().for_each(|p| self.0.bad(p, why));
            Ok(())
        }
    }

    /// Job `job` read as for a restore and checked by a [`BlockVerify`] fed with
    /// the catalog's listing of it.
    fn handed(home: &Home, job: i64) -> VerifyReport {
        let cat = &home.catalog;
        let vols = cat.job_volumes(job).unwrap();
        let barcode = |seq| vols.iter().find(|v| v.seq == seq).unwrap();
        let listing = (cat.files(job, None).unwrap().into_iter())
            .map(|r| Listed {
                path: crate::display_path(&r.path),
                volume: barcode(r.start_seq).volume.barcode.clone(),
                block: r.start_lbn,
            })
            .collect();
        let mut feed = Feed(BlockVerify::new(listing));
        let read = read_blocks(home, job, &RestoreOptions::default(), &mut feed).unwrap();
        // The bytes read from tape are the reading side's figure.
        let mut r = feed.0.finish();
        r.bytes_read_from_tape = read.bytes_read_from_tape;
        r
    }

    fn same(a: &VerifyReport, b: &VerifyReport) {
        let figures = |r: &VerifyReport| {
            let files = (r.files_checked, r.files_missing, r.files_affected.clone());
            (
                r.ok,
                r.blocks_checked,
                r.bytes_read_from_tape,
                r.bad_blocks.clone(),
                files,
            )
        };
        assert_eq!(figures(a), figures(b), "handed {a:?}\nlocal {b:?}");
    }

    fn write(path: &Path, data: &[u8]) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, data).unwrap();
    }

    #[test]
    fn a_job_handed_on_verifies_as_a_local_verify_does() {
        let t = tempfile::tempdir().unwrap();
        let (s1, s2) = (t.path().join("s1"), t.path().join("s2"));
        for i in 0..40u32 {
            let line = format!("line {i} of a file that compresses\n");
            write(
                &s1.join(format!("d/f{i}")),
                &line.repeat(50 + 40 * i as usize).into_bytes(),
            );
        }
        let noise: Vec<u8> = (0..200_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        write(&s2.join("noise.bin"), &noise);
        let home = Home::open(&t.path().join("home")).unwrap();
        let opts = BackupOptions {
            name: "handed".into(),
            block_size: tapeloom_format::MIN_BLOCK_SIZE,
            compress: Compress::Zstd,
            ..BackupOptions::default()
        };
        let job = backup(&home, &[s1, s2], &opts, Arc::new(Progress::default()))
            .unwrap()
            .job_id;
        let local = verify(&home, job, None).unwrap();
        assert!(local.ok && local.files_checked > 40, "{local:?}");
        same(&handed(&home, job), &local);
        // A byte changed in the middle of the cartridge: the same bad block, the
        // same files damaged.
        let tapes = t.path().join("home/library/tapes");
        let data = (std::fs::read_dir(&tapes).unwrap())
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "data"))
            .max_by_key(|p| std::fs::metadata(p).unwrap().len())
            .unwrap();
        let mut bytes = std::fs::read(&data).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0x40;
        std::fs::write(&data, &bytes).unwrap();
        let local = verify(&home, job, None).unwrap();
        assert!(!local.ok && local.bad_blocks.len() == 1, "{local:?}");
        same(&handed(&home, job), &local);
    }
}
