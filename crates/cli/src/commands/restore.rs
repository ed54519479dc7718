//! `tapeloom restore JOB --to DIR [PATH...]`, and a backup set as it was at one
//! of its jobs: `tapeloom restore --set NAME [--at TIME] --to DIR [PATH...]`.
//! Either may be read by a server's drives (`--server`) and placed here.

use super::Context;
use crate::error::CliError;
use crate::error::OpsResult;
use crate::output::{self, mb_per_s, Output, PathError};
use anyhow::Result;
use serde::Serialize;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use tapeloom_client::restore as remote;
use tapeloom_engine::{
    escape_controls, Overwrite, ReadOrder, RestoreOptions, RestoreReport, SkipBy, Source,
};
use tapeloom_ops::docs as health;
use tapeloom_proto::health::CartridgeHealth;

#[derive(clap::Args)]
pub struct Args {
    /// The job id (that job alone: files it holds as metadata only are left out),
    /// then paths (files or directories) of the job, all when none; with --set,
    /// paths of the set's tree only.
    #[arg(value_name = "JOB [PATH]", required_unless_present = "set")]
    args: Vec<PathBuf>,
    /// Restore this backup set's tree as it was at one of its jobs, each file
    /// from the job that last wrote it.
    #[arg(long, value_name = "NAME")]
    set: Option<String>,
    /// The set's point in time: an RFC 3339 time (its last job that ended ok or
    /// partial and started then or before) or a job id of the set; the set's
    /// latest such job when not given.
    #[arg(long, value_name = "TIME", requires = "set")]
    at: Option<String>,
    /// Where to put the restored tree.
    #[arg(long, value_name = "DIR")]
    to: PathBuf,
    #[command(flatten)]
    key: super::key::KeyArg,
    /// Drive to read with (the only one).
    #[arg(long, conflicts_with = "drives", value_parser = super::usize_in(..=super::MAX_INDEX))]
    drive: Option<usize>,
    /// Most drives to read with at once, the library's first ones; all when not
    /// given. A job written by several drives is read on as many.
    #[arg(long, value_parser = super::usize_in(1..=super::MAX_INDEX))]
    drives: Option<usize>,
    /// Read only this copy of the job (1: its own cartridges; `jobs` lists its
    /// copies). Without it, the first copy whose cartridges are all in the
    /// library and none suspect is read, and a bad block is read from another.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=65535), conflicts_with = "set")]
    copy: Option<u32>,
    /// Only this stream: its extents are read and the others' skipped.
    #[arg(long, conflicts_with = "set")]
    stream: Option<String>,
    /// How to pass over other data between wanted blocks: auto (the drive model
    /// decides; without one, locate unless the gap is a few blocks), locate, or
    /// read (read through).
    #[arg(long, default_value = "auto", value_parser = ["auto", "locate", "read"])]
    skip_by: String,
    /// Bring back the data of files that come back as stubs of hierarchical
    /// storage (released when they were backed up), instead of leaving them
    /// stubs that a read through `hsm daemon` recalls.
    #[arg(long)]
    recall: bool,
    /// In what order each cartridge's wanted files are read: planned (the order
    /// the drive's model says is fastest, shortest locate time first) or block
    /// (the order they were written).
    #[arg(long, default_value = "planned", value_parser = ["planned", "block"])]
    order: String,
    /// What to do with a file already at a restored path: never (keep it when it
    /// differs, and report it), always (replace it), if-newer (replace it when the
    /// backup's mtime is later), if-changed (replace it when its size, mtime or type
    /// differ). A file with the backed-up size and mtime counts as restored and is
    /// left as it is, except with always.
    #[arg(long, value_enum, default_value = "never", value_name = "WHEN")]
    overwrite: OverwriteArg,
    #[command(flatten)]
    remote: crate::net::Remote,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum OverwriteArg {
    Always,
    IfNewer,
    IfChanged,
    Never,
}

impl From<OverwriteArg> for Overwrite {
    fn from(a: OverwriteArg) -> Self {
        match a {
            OverwriteArg::Always => Overwrite::Always,
            OverwriteArg::IfNewer => Overwrite::IfNewer,
            OverwriteArg::IfChanged => Overwrite::IfChanged,
            OverwriteArg::Never => Overwrite::Never,
        }
    }
}

/// A cartridge a read passed over, and why.
#[derive(Serialize)]
pub struct PassedOver {
    barcode: String,
    why: String,
}

/// The cartridges a read passed over, as the output gives them.
pub fn passed_over(list: &[(String, String)]) -> Vec<PassedOver> {
    (list.iter())
        .map(|(barcode, why)| PassedOver {
            barcode: barcode.clone(),
            why: why.clone(),
        })
        .collect()
}

/// Says each cartridge a read passed over, one line each.
pub fn print_passed_over(list: &[PassedOver], copy: u32) {
    for p in list {
        outln!(
            "passed over cartridge {}: {}; read copy {copy} instead",
            escape_controls(&p.barcode),
            escape_controls(&p.why)
        );
    }
}

/// What a restore did, and at what rate.
#[derive(Serialize)]
pub struct Restored {
    job_id: i64,
    /// The copy of the job read from tape (1: its own cartridges; 0: none read).
    copy: u32,
    /// Bad blocks read from another copy of the job instead.
    from_other_copy: u64,
    /// Cartridges passed over because they could not be mounted, with why; the
    /// next copy of the job was read instead.
    passed_over: Vec<PassedOver>,
    /// The backup set restored as it was at `job_id`, for `--set`.
    set: Option<String>,
    /// The set of the job restored alone, for the note on metadata-only files.
    #[serde(skip)]
    set_of_job: String,
    /// The jobs read from.
    jobs: Vec<i64>,
    /// Blocks of the runs a set's restore planned (each block once).
    blocks_planned: u64,
    /// Files the job holds as metadata only, whose data is in an earlier job of
    /// its set: left out of a one-job restore.
    meta_only: u64,
    files: u64,
    bytes: u64,
    blocks_read: u64,
    bytes_read_from_tape: u64,
    locates: u64,
    mounts: u64,
    /// Cartridges the changer moved into a drive.
    loads: u64,
    read_through: u64,
    /// Cartridges read in another order than the block order.
    reordered: u64,
    seconds: f64,
    mb_per_s: f64,
    modeled_seconds: Option<f64>,
    modeled_mb_per_s: Option<f64>,
    /// Modeled seconds the reading plans predicted.
    planned_seconds: Option<f64>,
    bound_seconds: Option<f64>,
    bound_mb_per_s: Option<f64>,
    /// Modeled seconds until the first wanted block was under the head.
    first_block_seconds: Option<f64>,
    /// File bytes over the modeled seconds from the first wanted block on: the
    /// reading, without the mount and the travel to where the data starts.
    modeled_data_mb_per_s: Option<f64>,
    /// The job's chains of cartridges (one per drive that wrote it).
    chains: usize,
    /// Where the streams were read: stage, tape, or stage+tape.
    source: &'static str,
    blocks_read_from_stage: u64,
    bytes_read_from_stage: u64,
    streams: Vec<Stream>,
    drives: Vec<Drive>,
    errors: Vec<PathError>,
    /// With --recall: files that came back as stubs and were recalled.
    recalled: Option<u64>,
    /// Files already there, identical to the backed-up ones (size and mtime), left
    /// as they were; counted in `files`.
    unchanged: u64,
    /// How many files already there differ and were kept (`--overwrite`).
    skipped_count: usize,
    /// Those files, and why each was kept: `differs` or `not-older`.
    skipped: Vec<PathError>,
}

/// One stream's restored bytes.
#[derive(Serialize)]
struct Stream {
    name: String,
    bytes: u64,
    mb_per_s: f64,
    /// Where it was read: stage or tape.
    source: &'static str,
}

/// A drive read with, and the chains it read.
#[derive(Serialize)]
struct Drive {
    drive: usize,
    chains: Vec<u32>,
    bytes: u64,
    mb_per_s: f64,
    backhitches: Option<u64>,
    compression_ratio: Option<f64>,
    modeled_seconds: Option<f64>,
    planned_seconds: Option<f64>,
    bound_seconds: Option<f64>,
    /// Modeled seconds until this drive had the first wanted block.
    first_block_seconds: Option<f64>,
    locates: u64,
    /// Modeled seconds of its locates.
    locate_seconds: Option<f64>,
    tape_alerts: Option<Vec<String>>,
    cartridges: Vec<CartridgeHealth>,
}

/// The job id and paths of `JOB [PATH...]`; paths alone with `--set`.
pub fn job_and_paths(
    mut args: Vec<PathBuf>,
    set: bool,
) -> Result<(Option<i64>, Vec<PathBuf>), CliError> {
    if set || args.is_empty() {
        return Ok((None, args));
    }
    let first = args.remove(0);
    match first.to_str().and_then(|j| super::parse_job_id(j).ok()) {
        Some(job) => Ok((Some(job), args)),
        None => Err(CliError::NotAJob(first.display().to_string())),
    }
}

pub fn run(a: Args, ctx: &Context) -> Result<Restored> {
    let (job, paths) = job_and_paths(a.args, a.set.is_some())?;
    let server = a.remote.resolve()?;
    let opts = RestoreOptions {
        to: a.to,
        paths: paths
            .iter()
            .map(|p| p.as_os_str().as_bytes().to_vec())
            .collect(),
        drive: a.drive,
        drives: a.drives,
        stream: a.stream,
        skip_by: match a.skip_by.as_str() {
            "locate" => SkipBy::Locate,
            "read" => SkipBy::Read,
            _ => SkipBy::Auto,
        },
        overwrite: a.overwrite.into(),
        volumes: Vec::new(),
        order: match a.order.as_str() {
            "block" => ReadOrder::Block,
            _ => ReadOrder::Planned,
        },
        samples_as: None,
        copy: a.copy,
    };
    if a.recall && server.is_some() {
        return Err(CliError::RecallNeedsHome.into());
    }
    if let Some(server) = server {
        // The key file is read and unlocked here, before the server is asked: the
        // key never leaves this machine.
        let keys = a.key.keys()?;
        let (r, set) = match (job, a.set) {
            (Some(job), _) => (remote::job(&server, (job, keys), &opts)?, None),
            (None, set) => {
                let set = set.unwrap_or_default();
                let r = remote::set(&server, (&set, a.at.as_deref()), keys, &opts)?;
                (r, Some(set))
            }
        };
        output::path_errors("tapeloom: ", &r.errors);
        // The server's drives read the blocks: its report names none here.
        let r: RestoreReport = r.with_drives(Vec::new());
        let mut out = Restored::new(r.job, &r);
        out.set = set;
        return Ok(out);
    }
    let out_dir = opts.to.clone();
    let mut home = ctx.open_home_to_read()?;
    a.key.give(&mut home)?;
    let (r, set) = match (job, a.set) {
        (Some(job), _) => (tapeloom_engine::restore(&home, job, &opts)?, None),
        (None, set) => {
            let set = set.unwrap_or_default();
            let r = tapeloom_engine::restore_set(&home, &set, a.at.as_deref(), &opts)?;
            (r, Some(set))
        }
    };
    output::path_errors("tapeloom: ", &r.errors);
    let mut out = Restored::new(r.job, &r);
    if a.recall {
        let back = tapeloom_hsm::recall_restored(&home, &out_dir)?;
        let why = |(p, w): &(PathBuf, String)| PathError {
            path: p.display().to_string(),
            reason: format!("not recalled: {w}"),
        };
        out.errors.extend(back.failed.iter().map(why));
        out.recalled = Some(back.files);
    }
    if r.meta_only > 0 {
        out.set_of_job = (tapeloom_ops::select::set_of(&home, r.job).ops()?).unwrap_or_default();
    }
    out.set = set;
    Ok(out)
}

impl Restored {
    fn new(job_id: i64, r: &RestoreReport) -> Self {
        let rate = |s: f64| mb_per_s(r.bytes, s);
        Restored {
            job_id,
            copy: r.copy_no,
            from_other_copy: r.from_other_copy,
            passed_over: passed_over(&r.passed_over),
            set: None,
            set_of_job: String::new(),
            jobs: r.jobs.clone(),
            blocks_planned: r.blocks_planned,
            meta_only: r.meta_only,
            files: r.files,
            bytes: r.bytes,
            blocks_read: r.blocks_read,
            bytes_read_from_tape: r.bytes_read_from_tape,
            locates: r.locates,
            mounts: r.mounts,
            loads: r.loads,
            read_through: r.read_through,
            reordered: r.reordered,
            seconds: r.seconds,
            mb_per_s: rate(r.seconds),
            modeled_seconds: r.modeled_seconds,
            modeled_mb_per_s: r.modeled_seconds.map(rate),
            planned_seconds: r.planned_seconds,
            bound_seconds: r.bound_seconds,
            bound_mb_per_s: r.bound_seconds.map(rate),
            first_block_seconds: r.first_block_seconds,
            modeled_data_mb_per_s: r
                .modeled_seconds
                .zip(r.first_block_seconds)
                .map(|(m, f)| rate(m - f)),
            chains: r.chains,
            source: r.source.as_str(),
            blocks_read_from_stage: r.blocks_read_from_stage,
            bytes_read_from_stage: r.bytes_read_from_stage,
            streams: r
                .streams
                .iter()
                .map(|(name, bytes)| Stream {
                    name: name.clone(),
                    bytes: *bytes,
                    mb_per_s: mb_per_s(*bytes, r.seconds),
                    source: (r.stream_sources.iter())
                        .find(|(n, _)| n == name)
                        .map_or(Source::Tape, |(_, s)| *s)
                        .as_str(),
                })
                .collect(),
            drives: (r.drives.iter())
                .map(|d| Drive {
                    drive: d.drive,
                    chains: d.chains.clone(),
                    bytes: d.bytes_read_from_tape,
                    mb_per_s: mb_per_s(d.bytes_read_from_tape, r.seconds),
                    backhitches: d.stats.as_ref().map(|s| s.backhitches),
                    compression_ratio: d.stats.as_ref().map(|s| s.compression_ratio()),
                    modeled_seconds: d.modeled_seconds,
                    planned_seconds: d.planned_seconds,
                    bound_seconds: d.bound_seconds,
                    first_block_seconds: d.first_block_seconds,
                    locates: d.locates,
                    locate_seconds: d.stats.as_ref().map(|s| s.locate_seconds),
                    tape_alerts: health::tape_alerts(&d.health),
                    cartridges: health::cartridges(&d.health),
                })
                .collect(),
            errors: PathError::list(&r.errors),
            recalled: None,
            unchanged: r.unchanged,
            skipped_count: r.skipped.len(),
            skipped: (r.skipped.iter())
                .map(|(path, why)| PathError {
                    path: path.clone(),
                    reason: why.as_str().to_string(),
                })
                .collect(),
        }
    }
}

impl Output for Restored {
    fn print(&self) {
        print_passed_over(&self.passed_over, self.copy);
        let stage = match self.blocks_read_from_stage {
            0 => String::new(),
            n => format!(
                "; read {n} blocks ({}) from the disk stage",
                output::bytes(self.bytes_read_from_stage)
            ),
        };
        outln!(
            "restored {} files, {} in {:.1} s ({:.1} MB/s); read {} blocks ({}) from tape{}{stage}{}",
            self.files,
            output::bytes(self.bytes),
            self.seconds,
            self.mb_per_s,
            self.blocks_read,
            output::bytes(self.bytes_read_from_tape),
            match self.drives.len() {
                0 | 1 => String::new(),
                n => format!(" with {n} drives at once"),
            },
            if self.errors.is_empty() {
                String::new()
            } else {
                format!("; {} could not be restored", self.errors.len())
            }
        );
        if let Some(n) = self.recalled {
            outln!("recalled {n} files that came back as stubs");
        }
        if let Some(set) = &self.set {
            let jobs: Vec<String> = self.jobs.iter().map(|j| j.to_string()).collect();
            outln!(
                "backup set {} as it was at job {}, read from jobs {}",
                escape_controls(set),
                self.job_id,
                jobs.join(", ")
            );
        }
        if self.meta_only > 0 {
            outln!(
                "left out {} files this job holds as metadata only (their data is in an earlier job of its set): restore --set {} --at {} restores them",
                self.meta_only,
                escape_controls(&self.set_of_job),
                self.job_id
            );
        }
        if self.unchanged > 0 {
            outln!(
                "{} files already there were identical (size and mtime) and left as they were",
                self.unchanged
            );
        }
        if self.skipped_count > 0 {
            outln!(
                "kept {} files already there that differ from the backup (--overwrite always|if-newer|if-changed replaces them):",
                self.skipped_count
            );
            for s in &self.skipped {
                let why = match s.reason.as_str() {
                    "not-older" => "it is as new as the backup's or newer",
                    _ => "it differs",
                };
                outln!("  kept {}: {why}", escape_controls(&s.path));
            }
        }
    }

    fn failure(&self) -> Option<String> {
        (!self.errors.is_empty()).then(|| {
            format!(
                "{} of the job's entries could not be restored",
                self.errors.len()
            )
        })
    }
}
