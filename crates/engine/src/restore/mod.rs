//! Restore: whole jobs, or chosen paths, reading only the blocks that hold them.
//!
//! [`plan`] chooses the wanted entries and the runs of blocks that hold them; the
//! job reader (`crate::media::reader`) reads those runs, passing over the gaps by
//! locate or read-through, whichever the drive model says is cheaper; the
//! [`restorer`] places what it decodes with [`place`] and [`writers`].

pub(crate) mod place;
pub(crate) mod plan;
pub(crate) mod restorer;
pub(crate) mod writers;

pub use plan::normalize;

use crate::error::Result;
use crate::home::Home;
use crate::media::reader::{Got, JobReader, Streams};
use crate::sampler::Sampler;
use plan::{plan_runs, select, Run};
use restorer::Restorer;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::Instant;
use tapeloom_catalog::{Catalog, JobVolume};

/// How to restore.
#[derive(Debug, Clone, Default)]
pub struct RestoreOptions {
    /// Where to put the restored tree.
    pub to: PathBuf,
    /// Paths (files or directories) of the job to restore; all when empty.
    pub paths: Vec<Vec<u8>>,
    /// Drive to read with, when the user chose one.
    pub drive: Option<usize>,
    /// Restore only this stream (by name).
    pub stream: Option<String>,
    /// How to pass over data that is not wanted between two wanted runs.
    pub skip_by: SkipBy,
}

/// How a restore passes over unwanted blocks between two wanted runs of one volume.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SkipBy {
    /// Whichever the drive's model says is faster; without a model, read through
    /// gaps of a few blocks and locate over longer ones.
    #[default]
    Auto,
    /// Always locate.
    Locate,
    /// Always read through.
    Read,
}

/// What a restore did.
#[derive(Debug, Clone, Default)]
pub struct RestoreReport {
    /// Objects restored.
    pub files: u64,
    /// File data bytes restored.
    pub bytes: u64,
    /// Blocks read from tape.
    pub blocks_read: u64,
    /// Bytes read from tape.
    pub bytes_read_from_tape: u64,
    /// Locates done.
    pub locates: u64,
    /// Cartridges mounted.
    pub mounts: u64,
    /// Gaps between wanted runs passed by reading through.
    pub read_through: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Modeled seconds of the drives' work, when they have a timing model.
    pub modeled_seconds: Option<f64>,
    /// Data bytes restored per stream, by name.
    pub streams: Vec<(String, u64)>,
    /// The last drive's statistics, when it keeps them.
    pub drive_stats: Option<tapeloom_device::DriveStats>,
    /// The model's lower bound for the same reads: every wanted block read at full
    /// speed, every gap passed the cheaper way (locate or read through), plus loads
    /// and unloads. With no overheads beyond the tape's physics, this is the best any
    /// restore of these blocks can do on this drive.
    pub bound_seconds: Option<f64>,
    /// Objects that could not be restored: path and reason.
    pub errors: Vec<(String, String)>,
    /// What the drive said about each cartridge at the end of its mount.
    pub health: Vec<(String, tapeloom_device::DriveHealth)>,
}

/// Restores job `job_id` (or the chosen paths of it) under `opts.to`.
pub fn restore(home: &Home, job_id: i64, opts: &RestoreOptions) -> Result<RestoreReport> {
    let t0 = Instant::now();
    let cat = &home.catalog;
    let (mut reader, vols) = JobReader::open(home, job_id, opts.drive)?;
    let (want, mut rows) = select(cat, job_id, opts)?;
    let mut rs = Restorer::new(&opts.to, want)?;
    let names: HashMap<u16, String> = cat
        .streams(job_id)?
        .into_iter()
        .map(|s| (s.stream, s.name))
        .collect();
    let extents = cat.extents(job_id)?;
    let (runs, hints) = plan_runs(&vols, &mut rows, rs.want.is_none(), &extents);
    let mut read = Reading {
        cat,
        job_id,
        vols: &vols,
        opts,
        names: &names,
        sampler: Sampler::new(t0),
        bound: 0.0,
        modeled: false,
    };
    let mut streams = Streams::default();
    for run in runs {
        read.run(&mut reader, &run, &hints, &mut streams, &mut rs)?;
    }
    streams.finish(&mut rs);
    read.sample(&reader, &rs);
    cat.clear_samples(job_id, "restore")?;
    cat.add_samples(job_id, "restore", &read.sampler.out)?;
    let health = reader.take_health();
    crate::media::save_health(
        cat,
        job_id,
        "restore",
        [(opts.drive.unwrap_or(0), health.as_slice())],
    )?;
    if let Some(w) = rs.writers.take() {
        let (files, bytes, errors) = w.finish();
        rs.report.files += files;
        rs.report.bytes += bytes;
        rs.report.errors.extend(errors);
    }
    rs.finish_dirs();
    let per_stream = std::mem::take(&mut rs.per_stream);
    let mut report = rs.report;
    // A file named for a bad block may also have failed its checksum: name it once.
    let mut seen = HashSet::new();
    report.errors.retain(|e| seen.insert(e.0.clone()));
    report.blocks_read = reader.blocks_read;
    report.bytes_read_from_tape = reader.bytes_read;
    report.locates = reader.locates;
    report.mounts = reader.mounts;
    report.drive_stats = reader.drive_stats();
    report.health = health;
    let mut per: Vec<(u16, u64)> = per_stream.into_iter().collect();
    per.sort();
    report.streams = per
        .into_iter()
        .map(|(id, b)| (names.get(&id).cloned().unwrap_or_default(), b))
        .collect();
    report.modeled_seconds = reader.modeled_seconds();
    if read.modeled || report.modeled_seconds.is_some() {
        report.bound_seconds = Some(read.bound + reader.fixed_seconds);
    }
    report.seconds = t0.elapsed().as_secs_f64();
    Ok(report)
}

/// One restore's reading: the runs in turn, the model's bound for the same reads,
/// and the samples.
struct Reading<'a> {
    cat: &'a Catalog,
    job_id: i64,
    vols: &'a [JobVolume],
    opts: &'a RestoreOptions,
    names: &'a HashMap<u16, String>,
    sampler: Sampler,
    /// The model's lower bound for the reads so far: wanted blocks at full speed,
    /// each gap passed the cheaper way.
    bound: f64,
    /// Whether the drive answered for its travel times.
    modeled: bool,
}

impl Reading<'_> {
    /// Reads one run: positions at its start (reading through a short or cheap gap),
    /// then feeds its blocks to the decoders.
    fn run(
        &mut self,
        reader: &mut JobReader,
        run: &Run,
        hints: &HashMap<(u32, u64, u16), u32>,
        streams: &mut Streams,
        rs: &mut Restorer,
    ) -> Result<()> {
        if self.position(reader, run)? {
            rs.report.read_through += 1;
        }
        while let Some(at) = reader.at() {
            if at > run.end {
                break;
            }
            if self.sampler.due() {
                self.sample(reader, rs);
            }
            if let Some(c) = reader.read_cost(at.1, at.1 + 1) {
                self.bound += c;
            }
            match reader.next()? {
                Got::End => break,
                Got::Bad { seq, lbn, why } => {
                    let barcode = self
                        .vols
                        .iter()
                        .find(|v| v.seq == seq)
                        .map(|v| v.volume.barcode.as_str())
                        .unwrap_or("?");
                    for p in self.cat.files_in_block(self.job_id, seq, lbn)? {
                        if rs.wanted(&p) {
                            rs.fail(&p, format!("block {lbn} of {barcode} is bad: {why}"));
                        }
                    }
                }
                Got::Block { seq, lbn, header } => {
                    let payload = header.payload(reader.block());
                    let hint = hints.get(&(seq, lbn, header.stream)).copied();
                    streams.feed(&header, payload, (seq, lbn), hint, rs)?;
                }
            }
        }
        Ok(())
    }

    /// Brings the reader to the start of `run`: mounts its volume, and between two
    /// runs locates or reads through as `--skip-by` and the model say. True when it
    /// read through.
    fn position(&mut self, reader: &mut JobReader, run: &Run) -> Result<bool> {
        if reader.at().is_none_or(|(seq, _)| seq != run.start.0) {
            // Mount the volume: the reader stands after its label.
            reader.seek(run.start.0, 1)?;
        }
        let mut passed = false;
        if let Some((seq, lbn)) = reader.at() {
            if seq == run.start.0 && lbn < run.start.1 {
                let travel = reader.travel(run.start.1);
                if let Some(t) = travel {
                    self.bound += t.read.min(t.locate);
                    self.modeled = true;
                }
                let read = match self.opts.skip_by {
                    SkipBy::Read => true,
                    SkipBy::Locate => false,
                    SkipBy::Auto => travel.is_some_and(|t| t.read <= t.locate),
                };
                if read {
                    reader.pass(run.start.1)?;
                }
                passed = read;
            }
        }
        if reader.at() != Some(run.start) {
            reader.seek(run.start.0, run.start.1)?;
        }
        Ok(passed)
    }

    /// Samples the drive and the streams restored so far.
    fn sample(&mut self, reader: &JobReader, rs: &Restorer) {
        let t = self.sampler.round();
        let stats = reader.drive_stats();
        let drive = self.opts.drive.unwrap_or(0);
        self.sampler
            .drive(t, drive, reader.bytes_read, 0.0, stats.as_ref(), None);
        for (id, b) in &rs.per_stream {
            let name = self.names.get(id).map(|s| s.as_str()).unwrap_or("?");
            self.sampler.stream(t, name, *b, 0.0, None);
        }
    }
}
