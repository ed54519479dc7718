//! `tapeloom backup SOURCE...`.

use super::Context;
use crate::error::CliError;
use crate::output::{self, Output};
use crate::size;
use anyhow::Result;
use std::path::PathBuf;
use std::sync::Arc;
use tapeloom_engine::{
    escape_controls, BackupOptions, Compress, DespoolOrder, DriveSet, Interleave, Progress, Via,
};
use tapeloom_format::Level;
pub use tapeloom_proto::backup::BackedUp;

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
    remote: crate::net::Remote,
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
pub(crate) fn parse_block_size(s: &str) -> Result<usize, String> {
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
            stages: None,
            only: None,
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
        return Err(tapeloom_client::backup::NotWithServer("via").into());
    }
    // The key is named by its fingerprint, read from the key file without its
    // passphrase: the server encrypts with its own copy, the key stays here.
    let encrypt = match &a.encrypt {
        Some(f) => Some(tapeloom_engine::read_key_file(f)?.fingerprint),
        None => None,
    };
    let (sources, opts) = a.options()?;
    opts.check_in_turn()?;
    let asked = tapeloom_client::backup::Asked {
        pack: opts.pack(),
        set: opts.set,
        pool: opts.pool,
        block_size: opts.block_size,
        level: opts.level,
        encrypt,
    };
    let sent = tapeloom_client::backup::run(&server, &sources, &asked)?;
    output::emit(&sent, json)
}

pub fn run(a: Args, ctx: &Context) -> Result<BackedUp> {
    let drive_compression = a.drive_compression.clone();
    let encrypt = a.encrypt.clone();
    let (sources, mut opts) = a.options()?;
    let mut home = ctx.open_home()?;
    if let Some(f) = &encrypt {
        opts.encrypt = Some(super::key::unlock(f)?);
    }
    // What earlier backups left on the stages goes to tape first; an encrypted
    // job among them goes on with the key of this one's pool too.
    if opts.via != Via::Direct {
        tapeloom_ops::backup::prepare(&mut home, &mut opts, &super::key::Passphrase)
            .map_err(crate::error::ops)?;
        let done = super::stage::resume(&home)?;
        if !done.is_empty() && !ctx.json {
            done.print();
        }
    }
    let progress = Arc::new(Progress::default());
    let bar = crate::progress::progress_bar(Arc::clone(&progress));
    let r = tapeloom_ops::backup::run(&mut home, &sources, opts, &super::key::Passphrase, progress);
    if let Some(b) = bar {
        b.finish();
    }
    let done = r.map_err(crate::error::ops)?;
    output::path_errors("tapeloom: warning: ", &done.report.errors);
    let mut out = tapeloom_ops::docs::backed_up(&done.report, drive_compression);
    match done.copy {
        Some(Ok(c)) => out.copy = Some(tapeloom_ops::docs::copied(&c)),
        Some(Err(e)) => out.copy_error = Some(e.to_string()),
        None => {}
    }
    Ok(out)
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
        if let Some(c) = &self.copy {
            outln!(
                "job {}: copy {} in pool {} on {}",
                c.job_id,
                c.copy_no,
                escape_controls(&c.pool),
                escape_controls(&c.cartridges.join(", "))
            );
        }
    }

    /// A job that could not back up every source object is partial: said, and exit
    /// 1, as `tar` exits non-zero on a file it cannot read (the job and what it holds
    /// are kept).
    fn failure(&self) -> Option<String> {
        if let Some(e) = &self.copy_error {
            return Some(format!(
                "job {} is whole, but its copy could not be written: {e}",
                self.job_id
            ));
        }
        partial(self.job_id, self.status, self.errors.len())
    }
}

/// Why a backup that ended partial exits 1.
pub(crate) fn partial(job: i64, status: &str, errors: usize) -> Option<String> {
    (status == "partial").then(|| {
        format!("job {job} is partial: {errors} source objects could not be backed up (each is named in the output)")
    })
}

impl Output for tapeloom_client::backup::Sent {
    fn print(&self) {
        let s = &self.summary;
        outln!(
            "job {} {}: {} files, {} in {:.1} s ({:.1} MB/s) on {}",
            s.job_id,
            s.status,
            s.files,
            output::bytes(s.bytes),
            s.seconds,
            s.mb_per_s,
            escape_controls(&s.volumes.join(", "))
        );
        for e in &s.errors {
            outln!("  not backed up: {}: {}", e.path, e.reason);
        }
    }

    fn failure(&self) -> Option<String> {
        let s = &self.summary;
        partial(s.job_id, &s.status, s.errors.len())
    }
}
