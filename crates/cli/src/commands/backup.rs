//! `tapeloom backup SOURCE...`.

use super::Context;
use crate::error::CliError;
use crate::health::{self, CartridgeHealth};
use crate::output::{self, mb_per_s, Output, PathError};
use crate::size;
use anyhow::Result;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;
use tapeloom_engine::{
    escape_controls, BackupOptions, BackupReport, Compress, DespoolOrder, DriveReport, DriveSet,
    Interleave, Progress, Via,
};
use tapeloom_format::Level;

#[derive(clap::Args)]
pub struct Args {
    /// Files or directories to back up. Each is one stream, named after its last
    /// path component.
    #[arg(value_name = "SOURCE", required_unless_present = "stream")]
    sources: Vec<PathBuf>,
    /// A stream with a name of your choosing: NAME=PATH (repeatable).
    #[arg(long, value_name = "NAME=PATH")]
    stream: Vec<String>,
    /// Streams interleaved on the drive at once: a number from 1 to 65535, or auto
    /// (add a stream whenever the drive is about to run dry).
    #[arg(long, default_value = "auto", value_parser = parse_concurrency)]
    concurrency: Concurrency,
    /// Most data of one stream written in a row before turning to another (at
    /// least a block).
    #[arg(long, default_value = "64M", value_parser = size::within(1, size::MAX))]
    extent_size: u64,
    /// How a drive turns from stream to stream: ready (to the next stream with
    /// data waiting, so that a slow stream never holds the drive up) or in-turn
    /// (to each stream in the order given, a whole extent of each, waiting for its
    /// data; with several drives, the streams dealt to them in turn: the same
    /// sources and options lay the job on tape the same way on every run; needs a
    /// number for --concurrency and --via direct).
    #[arg(long, default_value = "ready", value_parser = ["ready", "in-turn"])]
    interleave: String,
    /// Blocks in the buffer pool between the readers and the drive (2 to 65536).
    #[arg(long, default_value_t = 64, value_parser = super::usize_in(2..=65536))]
    buffers: usize,
    /// Pool fill (percent, 0 to 100) the writer waits for before it starts, and
    /// restarts after running dry.
    #[arg(long, default_value_t = 50.0, value_parser = parse_high_water)]
    high_water: f64,
    /// Files each stream reads at once (1 to 1024). Small files are latency-bound:
    /// 16 reads in flight keep a disk's (or an array's) queue busy when they are
    /// not cached, and cost a thread and at most one small file of memory each.
    #[arg(long, default_value_t = 16, value_parser = super::usize_in(1..=1024))]
    readers_per_stream: usize,
    /// Most bytes per second each stream reads (for example 8MB).
    #[arg(long, value_parser = size::within(1, size::MAX))]
    limit_rate: Option<u64>,
    /// Data between filemarks inside the job (written with the immediate bit, so
    /// the drive keeps streaming; restores never need them). 0 for none.
    #[arg(long, default_value = "16G", value_parser = size::parse)]
    segment_size: u64,
    /// Job name.
    #[arg(long)]
    name: Option<String>,
    /// Block size (64K to 8M, a multiple of 4K).
    #[arg(long, default_value = "256K", value_parser = parse_block_size)]
    block_size: usize,
    /// Drive to write with (the same as --drives D,).
    #[arg(long, conflicts_with = "drives", value_parser = super::usize_in(..=super::MAX_INDEX))]
    drive: Option<usize>,
    /// Drives to write with: a number (the first N; 1 lets tapeloom pick the
    /// drive), all, or a list like 0,2. Streams are balanced across them.
    #[arg(long, default_value = "1", value_parser = parse_drives)]
    drives: DriveSet,
    /// Software compression: none, zstd (data that does not shrink is stored as it
    /// is), or auto (the drive's compressor when it has one and it is on, zstd when
    /// a tape drive's is off, none on a library without a drive model).
    #[arg(long, default_value = "auto", value_parser = parse_compress)]
    compress: Compress,
    /// The drive's own compression.
    #[arg(long, default_value = "on", value_parser = ["on", "off"])]
    drive_compression: String,
    /// Straight to the drives (direct), through the disk stages (stage: the
    /// sources spool at their own pace while the drives despool each stream in
    /// long runs), or auto (the stage when there is one and the streams' rate
    /// limits add up to less than the drive's lowest speed step).
    #[arg(long, default_value = "direct", value_parser = ["direct", "stage", "auto"])]
    via: String,
    /// Size of the chunk files a stream spools to the stage in.
    #[arg(long, default_value = "16M", value_parser = size::within(1, size::MAX))]
    chunk_size: u64,
    /// Through the stage: keep each chunk on the stage for this long once it is on
    /// tape (for example 2h or 7d), so a restore in that time reads it from disk.
    /// Kept chunks count against the stage's size; a spooler that finds no room
    /// deletes the oldest kept chunks rather than wait.
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse)]
    keep_staged: Option<std::time::Duration>,
    /// Through the stage: whole (each stream in one run where the stage holds it;
    /// the drive starts when it can write the streams back to back, and the job may
    /// end up to a despool time after its sources) or early (the drive starts as
    /// soon as it will not run dry before the sources end; the job ends soon after
    /// them and streams land in several runs).
    #[arg(long, default_value = "whole", value_parser = ["whole", "early"])]
    despool: String,
    /// Encrypt the job (AES-256-GCM) with a data key wrapped by this key file's key
    /// (`tapeloom key create`); the passphrase from TAPELOOM_PASSPHRASE or a prompt
    /// on the terminal. With --server, the server encrypts the job with its own
    /// copy of this key: only the key's fingerprint is sent, no passphrase asked.
    #[arg(long, value_name = "FILE")]
    encrypt: Option<PathBuf>,
    /// The media pool to write to (`tapeloom pool create`): its appendable volumes,
    /// else blank cartridges not assigned to another pool. Default: the pool
    /// default.
    #[arg(long, value_name = "NAME")]
    pool: Option<String>,
    /// The backup set the job belongs to (default: the job's name). With --set and
    /// no --name, the job is named after the set.
    #[arg(long, value_name = "NAME")]
    set: Option<String>,
    /// full; incremental (what changed since the set's last job that ended); or
    /// differential (what changed since its last full). Changes are found from the
    /// catalog (size, mtime, ctime, inode, mode, owner), without reading unchanged
    /// files. A set without a full gets a full, and says why.
    #[arg(long, value_name = "LEVEL", default_value = "full", value_parser = parse_level)]
    level: Level,
    /// Send the backup to a tapeloom server: this machine reads and packs its
    /// sources, the server writes the blocks to its drives and records the job
    /// for this client's token.
    #[command(flatten)]
    remote: crate::net::client::Remote,
}

/// `--level`: full, incremental or differential.
fn parse_level(s: &str) -> Result<Level, String> {
    match s {
        "full" => Ok(Level::Full),
        "incremental" | "incr" | "inc" => Ok(Level::Incremental),
        "differential" | "diff" => Ok(Level::Differential),
        _ => Err(format!(
            "--level takes full, incremental or differential; not '{s}'"
        )),
    }
}

/// `--drives`: a number, all, or a list of drive indexes, none above the largest
/// index a library has.
fn parse_drives(s: &str) -> Result<DriveSet, String> {
    let bad = || {
        format!(
            "--drives takes a number from 1 to {max}, all, or a list of drives from 0 to {max} like 0,2; not '{s}'",
            max = super::MAX_INDEX
        )
    };
    let set: DriveSet = s.parse().map_err(|_| bad())?;
    let most = match &set {
        DriveSet::All => 0,
        DriveSet::Count(n) => *n,
        DriveSet::List(v) => v.iter().copied().max().unwrap_or(0),
    };
    match u64::try_from(most) {
        Ok(m) if m <= super::MAX_INDEX => Ok(set),
        _ => Err(bad()),
    }
}

/// `--concurrency`: auto, or the most streams interleaved at once.
#[derive(Clone, Copy)]
pub struct Concurrency(Option<usize>);

/// `--concurrency`: auto, or a number from 1 to 65535 (stream numbers are 16-bit).
fn parse_concurrency(s: &str) -> Result<Concurrency, String> {
    if s == "auto" {
        return Ok(Concurrency(None));
    }
    match s.parse::<u16>() {
        Ok(k) if k > 0 => Ok(Concurrency(Some(usize::from(k)))),
        _ => Err(format!(
            "--concurrency takes auto or a number from 1 to 65535, not '{s}'"
        )),
    }
}

/// `--high-water`: a percentage from 0 to 100.
fn parse_high_water(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(p) if (0.0..=100.0).contains(&p) => Ok(p),
        _ => Err(format!(
            "--high-water takes a percentage from 0 to 100, not '{s}'"
        )),
    }
}

/// `--block-size`: a size a job may use (64K to 8M, a multiple of 4K).
fn parse_block_size(s: &str) -> Result<usize, String> {
    let bytes = size::parse(s)?;
    let block = usize::try_from(bytes).map_err(|_| format!("'{s}' is too large"))?;
    tapeloom_format::check_block_size(block).map_err(|e| e.to_string())?;
    Ok(block)
}

/// `--compress`: none, zstd or auto.
fn parse_compress(s: &str) -> Result<Compress, String> {
    s.parse()
        .map_err(|_| format!("--compress takes none, zstd or auto; not '{s}'"))
}

impl Args {
    /// The sources (positional ones first, then `--stream`s) and the engine's options,
    /// checked.
    fn options(self) -> Result<(Vec<PathBuf>, BackupOptions), CliError> {
        let mut sources = self.sources;
        let mut stream_names: Vec<Option<String>> = vec![None; sources.len()];
        for s in &self.stream {
            let (n, p) = s
                .split_once('=')
                .ok_or_else(|| CliError::StreamArg(s.clone()))?;
            stream_names.push(Some(n.to_string()));
            sources.push(PathBuf::from(p));
        }
        // Every number was checked when parsed; only how two of them go together
        // is left.
        let (block_size, extent) = (self.block_size, self.extent_size);
        let block = block_size as u64;
        if extent < block {
            return Err(CliError::ExtentSize { block, extent });
        }
        let opts = BackupOptions {
            name: self.name.or_else(|| self.set.clone()).unwrap_or_default(),
            block_size,
            drives: match self.drive {
                Some(d) => DriveSet::List(vec![d]),
                None => self.drives,
            },
            concurrency: self.concurrency.0,
            extent_blocks: usize::try_from(extent / block).unwrap_or(usize::MAX),
            interleave: match self.interleave.as_str() {
                "in-turn" => Interleave::InTurn,
                _ => Interleave::Ready,
            },
            buffers: self.buffers,
            high_water: self.high_water / 100.0,
            readers: self.readers_per_stream,
            limit_rate: self.limit_rate.map(|r| r as f64),
            stream_names,
            segment_bytes: self.segment_size,
            compress: self.compress,
            drive_compression: self.drive_compression == "on",
            via: match self.via.as_str() {
                "stage" => Via::Stage,
                "auto" => Via::Auto,
                _ => Via::Direct,
            },
            chunk_bytes: self.chunk_size,
            keep_staged: self.keep_staged,
            despool: match self.despool.as_str() {
                "early" => DespoolOrder::Early,
                _ => DespoolOrder::Whole,
            },
            encrypt: None,
            job_tag: None,
            client: String::new(),
            pool: self.pool,
            set: self.set,
            level: self.level,
        };
        Ok((sources, opts))
    }
}

/// How to get past a refusal of `backup` with its own flags.
pub fn hint(e: &tapeloom_engine::Error) -> Option<&'static str> {
    matches!(
        e,
        tapeloom_engine::Error::Options(tapeloom_engine::OptionsError::InTurn { .. })
    )
    .then_some("--interleave in-turn takes a number for --concurrency and --via direct")
}

/// Runs a backup here, or through a server when one is named; prints its output.
pub fn run_any(a: Args, ctx: &Context, json: bool) -> Result<i32> {
    let Some(server) = a.remote.resolve()? else {
        return output::emit(&run(a, ctx)?, json);
    };
    if a.via != "direct" {
        return Err(super::remote_backup::NotWithServer("via").into());
    }
    // The key is named by its fingerprint, read from the key file without its
    // passphrase: the server encrypts with its own copy, the key stays here.
    let encrypt = match &a.encrypt {
        Some(f) => Some(tapeloom_engine::read_key_file(f)?.fingerprint),
        None => None,
    };
    let (sources, opts) = a.options()?;
    let sent = super::remote_backup::run(&server, &sources, (&opts, encrypt))?;
    output::emit(&sent, json)
}

pub fn run(a: Args, ctx: &Context) -> Result<BackedUp> {
    let drive_compression = a.drive_compression.clone();
    let encrypt = a.encrypt.clone();
    let (sources, mut opts) = a.options()?;
    let mut home = ctx.open_home()?;
    if let Some(f) = &encrypt {
        opts.encrypt = Some(super::key::unlock(f)?);
    } else if let Some(pool) = &opts.pool {
        // The pool's key, when it has one.
        if let Some(k) = home.catalog.pool_key(pool)? {
            let master = super::key::unlock(std::path::Path::new(&k.key_file))?;
            if master.fingerprint().to_string() != k.fingerprint {
                anyhow::bail!(
                    "key file {} of pool {pool} holds key {}, not the pool's {}",
                    k.key_file,
                    master.fingerprint().short(),
                    k.fingerprint
                );
            }
            opts.encrypt = Some(master);
        }
    }
    // An encrypted job left on the stages with the same key goes on too.
    home.keys.extend(opts.encrypt.clone());
    // What earlier backups left on the stages goes to tape first.
    if opts.via != Via::Direct {
        let done = super::stage::resume(&home)?;
        if !done.is_empty() && !ctx.json {
            done.print();
        }
    }
    let progress = Arc::new(Progress::default());
    let bar = crate::progress::progress_bar(Arc::clone(&progress));
    let r = tapeloom_engine::backup(&home, &sources, &opts, progress);
    if let Some(b) = bar {
        b.finish();
    }
    let r = r?;
    output::path_errors("tapeloom: warning: ", &r.errors);
    Ok(BackedUp::new(&r, drive_compression))
}

/// What a backup wrote, and how fast.
#[derive(Serialize)]
pub struct BackedUp {
    job_id: i64,
    status: &'static str,
    #[serde(flatten)]
    set: SetFigures,
    files: u64,
    bytes: u64,
    seconds: f64,
    mb_per_s: f64,
    data_seconds: f64,
    data_mb_per_s: f64,
    blocks: u64,
    volumes: Vec<String>,
    extents: u64,
    filemarks: u64,
    max_concurrency: usize,
    streams: Vec<Stream>,
    drives: Vec<Drive>,
    compression: Compression,
    /// direct or stage.
    via: &'static str,
    /// Through the stage: whole or early (`--despool`).
    despool: Option<&'static str>,
    /// Through the stage: how often and how long spooling waited for space.
    stage_waits: Option<StageWaits>,
    errors: Vec<PathError>,
}

/// How often and how long spooling waited for stage space.
#[derive(Serialize)]
struct StageWaits {
    count: u64,
    seconds: f64,
}

/// One stream: its data and the drive that wrote it.
#[derive(Serialize)]
struct Stream {
    name: String,
    bytes: u64,
    files: u64,
    seconds: f64,
    mb_per_s: f64,
    drive: usize,
    /// Through the stage: the stream's rate onto the stage (its payload over the
    /// seconds from the job's start until its last block was staged).
    spool_mb_per_s: Option<f64>,
    /// Through the stage: seconds from the job's start until its last block was
    /// staged.
    spool_seconds: Option<f64>,
}

/// What compressed the data, and by how much.
#[derive(Serialize)]
struct Compression {
    /// zstd or none.
    software: &'static str,
    /// `--drive-compression`: on or off.
    drive: String,
    raw_bytes: u64,
    stored_bytes: u64,
    ratio: f64,
    compressed_blocks: u64,
    stored_as_is_blocks: u64,
}

/// A job's place in its set, and what its base comparison found.
#[derive(Serialize)]
struct SetFigures {
    set: String,
    level: &'static str,
    base_job: Option<i64>,
    /// Why the job ran at another level than the one asked for.
    promoted: Option<String>,
    /// Objects unchanged since the base: neither opened nor stored.
    unchanged: u64,
    /// Regular files recorded with their metadata alone.
    meta_only: u64,
    /// Paths found deleted since the base.
    deleted: u64,
    /// Bytes read from source files, and files opened to be read.
    source_bytes_read: u64,
    source_files_opened: u64,
}

impl BackedUp {
    pub(crate) fn new(r: &BackupReport, drive_compression: String) -> Self {
        BackedUp {
            job_id: r.job_id,
            status: r.status.as_str(),
            set: SetFigures {
                set: r.set.set.clone(),
                level: r.set.level.name(),
                base_job: r.set.base.as_ref().map(|b| b.id),
                promoted: r.set.promoted.clone(),
                unchanged: r.unchanged,
                meta_only: r.meta_only,
                deleted: r.deleted,
                source_bytes_read: r.source_bytes_read,
                source_files_opened: r.source_files_opened,
            },
            files: r.files,
            bytes: r.bytes,
            seconds: r.seconds,
            mb_per_s: mb_per_s(r.bytes, r.seconds),
            data_seconds: r.data_seconds,
            data_mb_per_s: mb_per_s(r.bytes, r.data_seconds),
            blocks: r.blocks,
            volumes: r.volumes.clone(),
            extents: r.extents,
            filemarks: r.filemarks,
            max_concurrency: r.max_concurrency,
            streams: r
                .streams
                .iter()
                .map(|s| Stream {
                    name: s.name.clone(),
                    bytes: s.bytes,
                    files: s.files,
                    seconds: s.seconds,
                    mb_per_s: mb_per_s(s.bytes, s.seconds),
                    drive: s.drive.unwrap_or(0),
                    spool_mb_per_s: s.spool.map(|(b, secs)| mb_per_s(b, secs)),
                    spool_seconds: s.spool.map(|(_, secs)| secs),
                })
                .collect(),
            drives: r.drives.iter().map(Drive::new).collect(),
            compression: Compression {
                software: if r.software_compression {
                    "zstd"
                } else {
                    "none"
                },
                drive: drive_compression,
                raw_bytes: r.compression_raw_bytes,
                stored_bytes: r.compression_stored_bytes,
                ratio: r.compression_raw_bytes as f64 / r.compression_stored_bytes.max(1) as f64,
                compressed_blocks: r.compressed_blocks.0,
                stored_as_is_blocks: r.compressed_blocks.1,
            },
            via: if r.staged { "stage" } else { "direct" },
            despool: r.despool.map(|d| match d {
                DespoolOrder::Whole => "whole",
                DespoolOrder::Early => "early",
            }),
            stage_waits: r.staged.then_some(StageWaits {
                count: r.stage_waits.0,
                seconds: r.stage_waits.1,
            }),
            errors: PathError::list(&r.errors),
        }
    }
}

impl Output for BackedUp {
    fn print(&self) {
        if let Some(why) = &self.set.promoted {
            outln!("{}", escape_controls(why));
        }
        if let Some(base) = self.set.base_job {
            outln!(
                "{} of set {} against job {base}: {} unchanged, {} with new metadata only, {} deleted",
                self.set.level,
                escape_controls(&self.set.set),
                self.set.unchanged,
                self.set.meta_only,
                self.set.deleted
            );
        }
        outln!(
            "job {} {}: {} files, {} in {:.1} s ({:.1} MB/s) on {}",
            self.job_id,
            self.status,
            self.files,
            output::bytes(self.bytes),
            self.seconds,
            self.mb_per_s,
            escape_controls(&self.volumes.join(", "))
        );
        for e in &self.errors {
            outln!("  not backed up: {}: {}", e.path, e.reason);
        }
    }

    /// A job that could not back up every source object is partial: said, and exit
    /// 1, as `tar` exits non-zero on a file it cannot read (the job and what it holds
    /// are kept).
    fn failure(&self) -> Option<String> {
        partial(self.job_id, self.status, self.errors.len())
    }
}

/// Why a backup that ended partial exits 1.
pub(crate) fn partial(job: i64, status: &str, errors: usize) -> Option<String> {
    (status == "partial").then(|| {
        format!("job {job} is partial: {errors} source objects could not be backed up (each is named in the output)")
    })
}

/// One drive of a backup: rate, utilization against the drive's maximum at the
/// data's compressibility (when the drive has a model), waits and backhitches:
/// those while the drive's data streamed, and the stops after its last data block
/// (waiting for the job's other drives, the index, the flush that ends the job).
/// Utilization counts the time the tape moved or stood during the job, not loads.
#[derive(Serialize)]
struct Drive {
    drive: usize,
    bytes: u64,
    mb_per_s: f64,
    volumes: Vec<String>,
    streams: Vec<String>,
    max_concurrency: usize,
    filemarks: u64,
    utilization: Option<f64>,
    backhitches: Option<u64>,
    stops_after_data: Option<u64>,
    compression_ratio: Option<f64>,
    modeled_seconds: Option<f64>,
    writer_waits: u64,
    writer_wait_seconds: f64,
    reader_waits: u64,
    reader_wait_seconds: f64,
    drive_compression: Option<bool>,
    tape_alerts: Option<Vec<String>>,
    cartridges: Vec<CartridgeHealth>,
    /// Through the stage: the drive's rate from its first despooled block to its
    /// last, and the most it takes for this data (when its model says).
    despool_mb_per_s: Option<f64>,
    despool_max_mb_per_s: Option<f64>,
    despool_seconds: Option<f64>,
    /// The tape's mean speed while it moved, as a share of its top speed step (from
    /// the drive's model): 1.0 when it streamed at full speed throughout.
    streaming_speed_share: Option<f64>,
}

/// The tape's time-weighted mean speed step over its top one, when it moved.
fn speed_share(s: &tapeloom_device::DriveStats) -> Option<f64> {
    let top = s.speed_steps_mb_s.last().copied()?;
    let moving: f64 = s.seconds_at_step.iter().sum();
    if moving <= 0.0 || top <= 0.0 {
        return None;
    }
    let weighted: f64 = s
        .speed_steps_mb_s
        .iter()
        .zip(&s.seconds_at_step)
        .map(|(v, t)| v * t)
        .sum();
    Some(weighted / moving / top)
}

impl Drive {
    fn new(r: &DriveReport) -> Self {
        let mut d = Drive {
            drive: r.drive.unwrap_or(0),
            bytes: r.bytes,
            mb_per_s: mb_per_s(r.bytes, r.seconds),
            volumes: r.volumes.clone(),
            streams: r.streams.clone(),
            max_concurrency: r.max_concurrency,
            filemarks: r.filemarks,
            utilization: None,
            backhitches: None,
            stops_after_data: None,
            compression_ratio: None,
            modeled_seconds: None,
            writer_waits: r.writer_waits,
            writer_wait_seconds: r.writer_wait_seconds,
            reader_waits: r.reader_waits,
            reader_wait_seconds: r.reader_wait_seconds,
            drive_compression: r.drive_compressed,
            tape_alerts: health::tape_alerts(&r.health),
            cartridges: health::cartridges(&r.health),
            despool_mb_per_s: r.despool.as_ref().map(|x| mb_per_s(x.bytes, x.seconds)),
            despool_max_mb_per_s: r
                .despool
                .as_ref()
                .and_then(|x| x.max_bytes_per_s)
                .map(|b| b / 1e6),
            despool_seconds: r.despool.as_ref().map(|x| x.seconds),
            streaming_speed_share: None,
        };
        if let Some(s) = &r.drive_stats {
            let secs = (s.streaming_seconds + s.stopped_seconds).max(1e-9);
            let ratio = s.compression_ratio();
            let top = s.speed_steps_mb_s.last().copied().unwrap_or(0.0) * ratio;
            let rate = s.host_bytes as f64 / secs / 1e6;
            let streaming = r.backhitches.unwrap_or(s.backhitches);
            d.utilization = (top > 0.0).then(|| (rate / top).min(1.0));
            d.backhitches = Some(streaming);
            d.stops_after_data = Some(s.backhitches.saturating_sub(streaming));
            d.compression_ratio = Some(ratio);
            d.modeled_seconds = Some(s.modeled_seconds);
            d.streaming_speed_share = speed_share(s);
        }
        d
    }
}
