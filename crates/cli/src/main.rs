//! The `tapeloom` command: thin over the engine, catalog and device libraries.

mod bench;
mod library;
mod output;
mod report;
mod size;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Parser, Subcommand};
use serde_json::{json, Value};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::Arc;
use tapeloom_device::LibraryConfig;
use tapeloom_engine::{
    backup, display_path, restore, verify, BackupOptions, Home, Progress, RestoreOptions, SkipBy,
};

/// tapeloom: back up file trees to tape and restore them fast.
#[derive(Parser)]
#[command(name = "tapeloom", version, about)]
struct Cli {
    /// The home folder (catalog and virtual library). Default: $TAPELOOM_HOME, else
    /// $XDG_DATA_HOME/tapeloom, else ~/.local/share/tapeloom.
    #[arg(long, global = true, value_name = "DIR")]
    home: Option<PathBuf>,
    /// Print one JSON document on stdout and nothing else there.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Back up files and directories.
    Backup {
        /// Files or directories to back up. Each is one stream, named after its last
        /// path component.
        #[arg(value_name = "SOURCE", required_unless_present = "stream")]
        sources: Vec<PathBuf>,
        /// A stream with a name of your choosing: NAME=PATH (repeatable).
        #[arg(long, value_name = "NAME=PATH")]
        stream: Vec<String>,
        /// Streams interleaved on the drive at once: a number, or auto (add a stream
        /// whenever the drive is about to run dry).
        #[arg(long, default_value = "auto")]
        concurrency: String,
        /// Most data of one stream written in a row before turning to another.
        #[arg(long, default_value = "64M", value_parser = size::parse)]
        extent_size: u64,
        /// Blocks in the buffer pool between the readers and the drive.
        #[arg(long, default_value_t = 64)]
        buffers: usize,
        /// Pool fill (percent) the writer waits for before it starts, and restarts
        /// after running dry.
        #[arg(long, default_value_t = 50.0)]
        high_water: f64,
        /// Files each stream reads at once. Small files are latency-bound: 16 reads in
        /// flight keep a disk's (or an array's) queue busy when they are not cached,
        /// and cost a thread and at most one small file of memory each.
        #[arg(long, default_value_t = 16)]
        readers_per_stream: usize,
        /// Most bytes per second each stream reads (for example 8MB).
        #[arg(long, value_parser = size::parse)]
        limit_rate: Option<u64>,
        /// Data between filemarks inside the job (written with the immediate bit, so
        /// the drive keeps streaming; restores never need them). 0 for none.
        #[arg(long, default_value = "16G", value_parser = size::parse)]
        segment_size: u64,
        /// Job name.
        #[arg(long)]
        name: Option<String>,
        /// Block size (64K to 8M, a multiple of 4K).
        #[arg(long, default_value = "256K", value_parser = size::parse)]
        block_size: u64,
        /// Drive to write with (the same as --drives D,).
        #[arg(long, conflicts_with = "drives")]
        drive: Option<usize>,
        /// Drives to write with: a number (the first N; 1 lets tapeloom pick the
        /// drive), all, or a list like 0,2. Streams are balanced across them.
        #[arg(long, default_value = "1", value_parser = parse_drives)]
        drives: tapeloom_engine::DriveSet,
        /// Software compression: none, zstd (data that does not shrink is stored as it
        /// is), or auto (the drive's compressor when it has one and it is on, zstd when
        /// a tape drive's is off, none on a library without a drive model).
        #[arg(long, default_value = "auto", value_parser = parse_compress)]
        compress: tapeloom_engine::Compress,
        /// The drive's own compression.
        #[arg(long, default_value = "on", value_parser = ["on", "off"])]
        drive_compression: String,
    },
    /// List jobs.
    Jobs,
    /// Draw a job's per-second measurements (throughput per stream and drive, buffer
    /// fill, speed steps and backhitches) as SVG, PNG, or an HTML page with a summary.
    Report {
        /// Job id.
        job: i64,
        /// Output file: .svg, .png or .html.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// Which run of the job: its backup, or its last restore.
        #[arg(long, default_value = "backup", value_parser = ["backup", "restore"])]
        op: String,
    },
    /// List what a job holds (recursively), under PATH or all of it.
    Ls {
        /// Job id.
        job: i64,
        /// Path in the job.
        path: Option<PathBuf>,
    },
    /// Restore a job, or some paths of it.
    Restore {
        /// Job id.
        job: i64,
        /// Where to put the restored tree.
        #[arg(long, value_name = "DIR")]
        to: PathBuf,
        /// Paths (files or directories) of the job; all when none.
        paths: Vec<PathBuf>,
        /// Drive to read with.
        #[arg(long)]
        drive: Option<usize>,
        /// Only this stream: its extents are read and the others' skipped.
        #[arg(long)]
        stream: Option<String>,
        /// How to pass over other data between wanted blocks: auto (the drive model
        /// decides; without one, locate unless the gap is a few blocks), locate, or
        /// read (read through).
        #[arg(long, default_value = "auto", value_parser = ["auto", "locate", "read"])]
        skip_by: String,
    },
    /// Read every block of a job and check its checksums.
    Verify {
        /// Job id.
        job: i64,
        /// Drive to read with.
        #[arg(long)]
        drive: Option<usize>,
    },
    /// SCSI tape drives and media changers: this machine's /dev/sg devices and the
    /// iSCSI logical units named.
    Devices {
        /// iSCSI logical units to probe (iscsi://HOST:PORT/TARGET/LUN).
        urls: Vec<String>,
    },
    /// The tape library.
    Library {
        #[command(subcommand)]
        cmd: LibCmd,
    },
    /// Make a deterministic test tree (like HPcreatedata): power-of-two size classes
    /// with equal file counts, data of a chosen compressibility.
    Gen {
        /// Folder to create (must be empty or missing).
        dir: PathBuf,
        /// Start from a preset: hp-typical (64 KiB-64 MiB, depth 3, breadth 4, 2:1) or
        /// small-files (4 KiB-64 KiB).
        #[arg(long)]
        preset: Option<String>,
        /// Seed: the same seed gives the same tree, byte for byte.
        #[arg(long)]
        seed: Option<u64>,
        /// Levels of folders below DIR.
        #[arg(long)]
        depth: Option<u32>,
        /// Subfolders per folder.
        #[arg(long)]
        breadth: Option<u32>,
        /// Files in each folder.
        #[arg(long)]
        files_per_dir: Option<u32>,
        /// Smallest file size (a power of two).
        #[arg(long, value_parser = size::parse)]
        min: Option<u64>,
        /// Largest file size (a power of two).
        #[arg(long, value_parser = size::parse)]
        max: Option<u64>,
        /// Compressibility of the data (2 = compresses about 2:1; 1 = random).
        #[arg(long)]
        ratio: Option<f64>,
        /// Stop at about this much data (whole rounds of size classes).
        #[arg(long, value_parser = size::parse)]
        total: Option<u64>,
    },
    /// Read folders in parallel as a backup would (like HPreaddata) and say whether
    /// they can keep a drive streaming.
    Readrate {
        /// Folders, each read as one stream.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Reader threads per folder.
        #[arg(long, default_value_t = 1)]
        threads_per_source: usize,
        /// Bypass the page cache (O_DIRECT) where the file system allows it.
        #[arg(long)]
        direct: bool,
        /// The drive to judge against.
        #[arg(long, default_value = "lto9")]
        model: String,
    },
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        cmd: BenchCmd,
    },
    /// Drive models.
    Drive {
        #[command(subcommand)]
        cmd: DriveCmd,
    },
    /// The catalog.
    Catalog {
        #[command(subcommand)]
        cmd: CatCmd,
    },
}

#[derive(Subcommand)]
enum BenchCmd {
    /// Stream data from memory to a modeled drive, for each block size.
    Drive {
        /// LTO generation to model (lto1 .. lto10).
        #[arg(long, default_value = "lto9")]
        model: String,
        /// Data: random, zero or ratio:R (compresses about R:1).
        #[arg(long, default_value = "random")]
        pattern: tapeloom_engine::tools::pattern::Pattern,
        /// Block sizes (default 1K, 2K, ... 256K).
        #[arg(long, value_delimiter = ',', value_parser = size::parse)]
        block_sizes: Vec<u64>,
        /// The drive's hardware compression.
        #[arg(long, default_value = "on")]
        compression: OnOff,
        /// Data per block size.
        #[arg(long, default_value = "4G", value_parser = size::parse)]
        size: u64,
        /// Feed the drive no faster than this (for example 40MB).
        #[arg(long, value_parser = size::parse)]
        source_rate: Option<u64>,
        /// virtual (add up modeled time) or real (take that long).
        #[arg(long, default_value = "virtual")]
        clock: ClockArg,
        /// Multiply every rate and buffer by this.
        #[arg(long, default_value_t = 1.0, value_parser = size::scale)]
        scale: f64,
        /// Run on this drive of the home's library (on a blank cartridge, erased
        /// afterwards) instead of a fresh modeled drive.
        #[arg(long, conflicts_with_all = ["clock", "scale"])]
        drive: Option<usize>,
    },
    /// Model positioning between two offsets of the data on a full cartridge.
    Locate {
        /// LTO generation to model.
        #[arg(long, default_value = "lto9")]
        model: String,
        /// Start offset (for example 0, 17G).
        #[arg(long, value_parser = size::parse)]
        from: u64,
        /// End offset.
        #[arg(long, value_parser = size::parse)]
        to: u64,
        /// Read all data in between instead of locating.
        #[arg(long)]
        read_through: bool,
        /// Space forward file by file instead of locating.
        #[arg(long, requires = "file_size")]
        space_files: bool,
        /// Size of the files spaced over.
        #[arg(long, value_parser = size::parse)]
        file_size: Option<u64>,
    },
}

#[derive(Subcommand)]
enum DriveCmd {
    /// The LTO generations the model knows, with their parameters.
    Models,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum OnOff {
    On,
    Off,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ClockArg {
    Virtual,
    Real,
}

#[derive(Subcommand)]
enum CatCmd {
    /// Read every labelled cartridge and add the jobs the catalog lacks, from the
    /// indexes on tape.
    Rebuild,
}

#[derive(Subcommand)]
enum LibCmd {
    /// Drives, slots and cartridges.
    Status,
    /// Use a SCSI media changer and its tape drives as the library (DEV is /dev/sgN or
    /// iscsi://HOST:PORT/TARGET/LUN). Refused while the current library holds jobs.
    Attach {
        /// The media changer.
        #[arg(long, value_name = "DEV")]
        changer: String,
        /// A tape drive, in the order of the changer's drive elements (repeat).
        #[arg(long = "drive", value_name = "DEV", required = true)]
        drives: Vec<String>,
        /// Attach even though the current library holds jobs.
        #[arg(long)]
        force: bool,
    },
    /// Go back to the home's virtual library. Refused while the SCSI library holds jobs.
    Detach {
        /// Detach even though the library holds jobs.
        #[arg(long)]
        force: bool,
    },
    /// What is in each drive and slot.
    Inventory {
        /// Have the changer scan its slots and barcodes again first.
        #[arg(long)]
        rescan: bool,
    },
    /// Put a cartridge into a drive and load it.
    Load {
        /// The cartridge's barcode.
        barcode: String,
        /// The drive (default: an empty one).
        #[arg(long)]
        drive: Option<usize>,
    },
    /// Unload a drive (default: every drive) and put its cartridge back in a slot.
    Unload {
        /// The drive.
        #[arg(long)]
        drive: Option<usize>,
    },
    /// Move a cartridge (from a drive, a slot or a mail slot) into an empty slot or
    /// mail slot (import/export element: that takes it out of the library).
    Move {
        /// The cartridge's barcode.
        barcode: String,
        /// The slot's or mail slot's address, as `library inventory` lists it.
        slot: usize,
    },
    /// Write tapeloom volume labels. A cartridge with data tapeloom did not write, or
    /// with jobs in the catalog, is overwritten only with --force.
    Label {
        /// The cartridges' barcodes.
        #[arg(required = true)]
        barcodes: Vec<String>,
        /// The pool the volumes belong to.
        #[arg(long, default_value = "default")]
        pool: String,
        /// Overwrite foreign data, or a volume and its jobs.
        #[arg(long)]
        force: bool,
    },
    /// Mount/dismount stress test: a random cartridge into a random drive and back.
    Exercise {
        /// Cycles to run.
        #[arg(long, default_value_t = 10)]
        cycles: u32,
        /// Seed of the random choices.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Replace the virtual library with a new layout (refused when it holds data).
    Create {
        /// Number of drives.
        #[arg(long, default_value_t = tapeloom_engine::DEFAULT_DRIVES)]
        drives: usize,
        /// Number of slots, each with a cartridge.
        #[arg(long, default_value_t = tapeloom_engine::DEFAULT_SLOTS)]
        slots: usize,
        /// Capacity of each cartridge (for example 64M, 1T).
        #[arg(long, default_value = "1T", value_parser = size::parse)]
        capacity: u64,
        /// Give the drives the timing of an LTO generation (lto1 .. lto10).
        #[arg(long)]
        model: Option<String>,
        /// virtual (add up modeled time) or real (take that long), with --model.
        #[arg(long, requires = "model")]
        clock: Option<ClockArg>,
        /// Multiply the model's rates and buffers by this, with --model.
        #[arg(long, requires = "model", value_parser = size::scale)]
        scale: Option<f64>,
    },
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                e.exit();
            }
            // Usage errors too are one line on stderr (and exit 2, as clap's do).
            eprintln!("tapeloom: error: {}", usage_line(&e.render().to_string()));
            std::process::exit(2);
        }
    };
    let json = cli.json;
    match run(cli) {
        Ok((value, code)) => {
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&value).unwrap_or_default()
                );
            }
            std::process::exit(code);
        }
        Err(e) => {
            eprintln!("tapeloom: error: {}", one_line(&e));
            std::process::exit(1);
        }
    }
}

/// `--drives`: a number, all, or a list of drive indexes.
fn parse_drives(s: &str) -> std::result::Result<tapeloom_engine::DriveSet, String> {
    s.parse()
        .map_err(|_| format!("--drives takes a number, all, or a list like 0,2; not '{s}'"))
}

/// `--compress`: none, zstd or auto.
fn parse_compress(s: &str) -> std::result::Result<tapeloom_engine::Compress, String> {
    s.parse()
        .map_err(|_| format!("--compress takes none, zstd or auto; not '{s}'"))
}

/// clap's rendering of a usage error on one line: its message and tips, without the
/// usage and help pointers.
fn usage_line(rendered: &str) -> String {
    rendered
        .lines()
        .map(str::trim)
        .filter(|l| {
            !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more information")
        })
        .map(|l| l.strip_prefix("error: ").unwrap_or(l))
        .fold(String::new(), |mut out, l| {
            if !out.is_empty() {
                out.push_str(if out.ends_with(':') { " " } else { "; " });
            }
            out.push_str(l);
            out
        })
}

/// How to get past a refusal, in the flags of the command line.
fn hint(e: &anyhow::Error) -> Option<&'static str> {
    use tapeloom_engine::{Error, HomeError, MediaError, ToolError};
    match e.chain().find_map(|c| c.downcast_ref::<Error>())? {
        Error::Media(MediaError::Foreign { .. }) => Some("--force to overwrite"),
        Error::Media(MediaError::HoldsJobs { .. }) => Some("--force to overwrite and forget them"),
        Error::Media(MediaError::UnknownLabel { .. }) => {
            Some("--force to overwrite; `catalog rebuild` reads it")
        }
        Error::Home(HomeError::HoldsJobs { .. }) => Some("--force to do it anyway"),
        Error::Tool(ToolError::SourceRateOnLibrary) => Some("--source-rate needs --model"),
        _ => None,
    }
}

/// The error and its causes on one line, with how to get past it.
fn one_line(e: &anyhow::Error) -> String {
    let mut s = e.to_string();
    for c in e.chain().skip(1) {
        let c = c.to_string();
        if !s.contains(&c) {
            s.push_str(": ");
            s.push_str(&c);
        }
    }
    if let Some(h) = hint(e) {
        s.push_str(&format!(" ({h})"));
    }
    s.replace('\n', " ")
}

fn run(cli: Cli) -> Result<(Value, i32)> {
    let human = !cli.json;
    // Commands that need no home.
    match cli.cmd {
        Cmd::Bench {
            cmd:
                BenchCmd::Drive {
                    ref model,
                    pattern,
                    ref block_sizes,
                    compression,
                    size,
                    source_rate,
                    clock,
                    scale,
                    drive: None,
                },
        } => {
            return bench::drive(
                human,
                model.clone(),
                pattern,
                block_sizes.clone(),
                matches!(compression, OnOff::On),
                size,
                source_rate,
                matches!(clock, ClockArg::Real),
                scale,
            )
        }
        Cmd::Drive {
            cmd: DriveCmd::Models,
        } => return bench::models(human),
        Cmd::Devices { ref urls } => return library::devices(urls, human),
        Cmd::Gen {
            ref dir,
            ref preset,
            seed,
            depth,
            breadth,
            files_per_dir,
            min,
            max,
            ratio,
            total,
        } => {
            let mut o = match preset {
                Some(p) => tapeloom_engine::tools::gen::GenOptions::preset(p)?,
                None => tapeloom_engine::tools::gen::GenOptions::preset("hp-typical")?,
            };
            o.seed = seed.unwrap_or(o.seed);
            o.depth = depth.unwrap_or(o.depth);
            o.breadth = breadth.unwrap_or(o.breadth);
            o.files_per_dir = files_per_dir.unwrap_or(o.files_per_dir);
            o.min = min.unwrap_or(o.min);
            o.max = max.unwrap_or(o.max);
            o.ratio = ratio.unwrap_or(o.ratio);
            o.total = total.or(o.total);
            return bench::gen(human, dir, &o);
        }
        Cmd::Readrate {
            ref dirs,
            threads_per_source,
            direct,
            ref model,
        } => return bench::readrate(human, dirs, threads_per_source, direct, model),
        Cmd::Bench {
            cmd:
                BenchCmd::Locate {
                    ref model,
                    from,
                    to,
                    read_through,
                    space_files,
                    file_size,
                },
        } => {
            let how = match (read_through, space_files, file_size) {
                (true, _, _) => tapeloom_engine::tools::benchdrive::LocateHow::ReadThrough,
                (false, true, Some(s)) => {
                    tapeloom_engine::tools::benchdrive::LocateHow::SpaceFiles(s)
                }
                _ => tapeloom_engine::tools::benchdrive::LocateHow::Locate,
            };
            return bench::locate(human, model, from, to, how);
        }
        _ => {}
    }
    let home_dir = cli
        .home
        .clone()
        .unwrap_or_else(tapeloom_engine::default_home);
    let home = Home::open(&home_dir)?;
    match cli.cmd {
        Cmd::Bench {
            cmd:
                BenchCmd::Drive {
                    pattern,
                    block_sizes,
                    size,
                    source_rate,
                    drive: Some(drive),
                    ..
                },
        } => bench::library_drive(&home, human, drive, pattern, block_sizes, size, source_rate),
        Cmd::Bench { .. }
        | Cmd::Drive { .. }
        | Cmd::Gen { .. }
        | Cmd::Readrate { .. }
        | Cmd::Devices { .. } => {
            unreachable!("handled above")
        }
        Cmd::Backup {
            mut sources,
            stream,
            concurrency,
            extent_size,
            buffers,
            high_water,
            readers_per_stream,
            limit_rate,
            segment_size,
            name,
            block_size,
            drive,
            drives,
            compress,
            drive_compression,
        } => {
            let mut stream_names: Vec<Option<String>> = vec![None; sources.len()];
            for s in &stream {
                let (n, p) = s
                    .split_once('=')
                    .ok_or_else(|| anyhow!("--stream takes NAME=PATH, not '{s}'"))?;
                stream_names.push(Some(n.to_string()));
                sources.push(PathBuf::from(p));
            }
            let concurrency = match concurrency.as_str() {
                "auto" => None,
                k => Some(k.parse::<usize>().ok().filter(|k| *k > 0).ok_or_else(|| {
                    anyhow!("--concurrency takes auto or a number from 1, not '{k}'")
                })?),
            };
            if !(0.0..=100.0).contains(&high_water) {
                bail!("--high-water takes a percentage from 0 to 100");
            }
            if buffers < 2 {
                bail!("--buffers takes a number from 2, not {buffers}");
            }
            if readers_per_stream == 0 {
                bail!("--readers-per-stream takes a number from 1, not 0");
            }
            if limit_rate == Some(0) {
                bail!("--limit-rate takes a rate above 0 (for example 8MB)");
            }
            if extent_size < block_size {
                bail!("--extent-size must hold at least one block ({block_size} bytes), not {extent_size}");
            }
            let block_size = usize::try_from(block_size)?;
            let opts = BackupOptions {
                name: name.unwrap_or_default(),
                block_size,
                drives: match drive {
                    Some(d) => tapeloom_engine::DriveSet::List(vec![d]),
                    None => drives,
                },
                concurrency,
                extent_blocks: (extent_size as usize / block_size).max(1),
                buffers,
                high_water: high_water / 100.0,
                readers: readers_per_stream,
                limit_rate: limit_rate.map(|r| r as f64),
                stream_names,
                segment_bytes: segment_size,
                compress,
                drive_compression: drive_compression == "on",
            };
            let progress = Arc::new(Progress::default());
            let bar = output::progress_bar(Arc::clone(&progress));
            let r = backup(&home, &sources, &opts, progress);
            if let Some(b) = bar {
                b.finish();
            }
            let r = r?;
            for (p, why) in &r.errors {
                eprintln!("tapeloom: warning: {p}: {why}");
            }
            if human {
                println!(
                    "job {} {}: {} files, {} in {:.1} s ({:.1} MB/s) on {}",
                    r.job_id,
                    r.status,
                    r.files,
                    output::bytes(r.bytes),
                    r.seconds,
                    r.bytes as f64 / 1e6 / r.seconds.max(1e-9),
                    r.volumes.join(", ")
                );
            }
            Ok((
                json!({
                    "job_id": r.job_id,
                    "status": r.status.as_str(),
                    "files": r.files,
                    "bytes": r.bytes,
                    "seconds": r.seconds,
                    "mb_per_s": r.bytes as f64 / 1e6 / r.seconds.max(1e-9),
                    "data_seconds": r.data_seconds,
                    "data_mb_per_s": r.bytes as f64 / 1e6 / r.data_seconds.max(1e-9),
                    "blocks": r.blocks,
                    "volumes": r.volumes,
                    "extents": r.extents,
                    "filemarks": r.filemarks,
                    "max_concurrency": r.max_concurrency,
                    "streams": r.streams.iter().map(|s| json!({
                        "name": s.name, "bytes": s.bytes, "files": s.files, "seconds": s.seconds,
                        "mb_per_s": s.bytes as f64 / 1e6 / s.seconds.max(1e-9),
                        "drive": s.drive.unwrap_or(0),
                    })).collect::<Vec<_>>(),
                    "drives": r.drives.iter().map(output::drive_summary).collect::<Vec<_>>(),
                    "compression": {
                        "software": if r.software_compression { "zstd" } else { "none" },
                        "drive": drive_compression,
                        "raw_bytes": r.compression_raw_bytes,
                        "stored_bytes": r.compression_stored_bytes,
                        "ratio": r.compression_raw_bytes as f64 / r.compression_stored_bytes.max(1) as f64,
                        "compressed_blocks": r.compressed_blocks.0,
                        "stored_as_is_blocks": r.compressed_blocks.1,
                    },
                    "errors": r.errors.iter().map(|(p, w)| json!({"path": p, "reason": w})).collect::<Vec<_>>(),
                }),
                0,
            ))
        }
        Cmd::Report { job, out, op } => {
            let v = report::report(&home, job, &op, &out)?;
            if human {
                println!("{}", out.display());
            }
            Ok((v, 0))
        }
        Cmd::Jobs => {
            let mut out = Vec::new();
            for j in home.catalog.jobs()? {
                let vols: Vec<String> = home
                    .catalog
                    .job_volumes(j.id)?
                    .into_iter()
                    .map(|v| v.volume.barcode)
                    .collect();
                if human {
                    println!(
                        "{:>5}  {:<8} {}  {:>9} files {:>10}  {}  {}",
                        j.id,
                        j.status,
                        output::time(j.started_ns),
                        j.files,
                        output::bytes(j.bytes),
                        vols.join(","),
                        j.name
                    );
                }
                out.push(json!({
                    "job_id": j.id, "name": j.name, "status": j.status.as_str(),
                    "started": output::time(j.started_ns),
                    "ended": j.ended_ns.map(output::time),
                    "files": j.files, "bytes": j.bytes, "seconds": j.seconds,
                    "block_size": j.block_size, "volumes": vols,
                }));
            }
            Ok((json!({ "jobs": out }), 0))
        }
        Cmd::Ls { job, path } => {
            let cat = &home.catalog;
            cat.job(job)?
                .ok_or_else(|| anyhow!("no job {job} in the catalog"))?;
            let vols = cat.job_volumes(job)?;
            let prefix = path
                .as_ref()
                .map(|p| tapeloom_engine::normalize(p.as_os_str().as_bytes()));
            let mut entries = Vec::new();
            let mut count = 0u64;
            cat.for_each_file(job, prefix.as_deref(), |r| {
                count += 1;
                let kind = tapeloom_format::EntryType::from_u8(r.kind)
                    .map(|k| k.name())
                    .unwrap_or("?");
                let barcode = vols
                    .iter()
                    .find(|v| v.seq == r.start_seq)
                    .map(|v| v.volume.barcode.as_str())
                    .unwrap_or("?");
                let path = display_path(&r.path);
                if human {
                    println!(
                        "{:<8} {:o} {:>12} {} {}:{} {}",
                        kind,
                        r.mode,
                        r.size,
                        output::time(r.mtime_ns),
                        barcode,
                        r.start_lbn,
                        path
                    );
                } else {
                    entries.push(json!({
                        "path": path, "type": kind, "size": r.size, "mode": r.mode,
                        "mtime": output::time(r.mtime_ns), "mtime_ns": r.mtime_ns,
                        "volume": barcode, "block": r.start_lbn, "offset": r.start_off,
                    }));
                }
                Ok(())
            })?;
            if count == 0 {
                if let Some(p) = prefix {
                    bail!("job {job} has no path {}", display_path(&p));
                }
            }
            Ok((json!({ "job_id": job, "entries": entries }), 0))
        }
        Cmd::Restore {
            job,
            to,
            paths,
            drive,
            stream,
            skip_by,
        } => {
            let opts = RestoreOptions {
                to,
                paths: paths
                    .iter()
                    .map(|p| p.as_os_str().as_bytes().to_vec())
                    .collect(),
                drive,
                stream,
                skip_by: match skip_by.as_str() {
                    "locate" => SkipBy::Locate,
                    "read" => SkipBy::Read,
                    _ => SkipBy::Auto,
                },
            };
            let r = restore(&home, job, &opts)?;
            for (p, why) in &r.errors {
                eprintln!("tapeloom: {p}: {why}");
            }
            let rate = r.bytes as f64 / 1e6 / r.seconds.max(1e-9);
            if human {
                println!(
                    "restored {} files, {} in {:.1} s ({:.1} MB/s); read {} blocks ({}) from tape{}",
                    r.files,
                    output::bytes(r.bytes),
                    r.seconds,
                    rate,
                    r.blocks_read,
                    output::bytes(r.bytes_read_from_tape),
                    if r.errors.is_empty() {
                        String::new()
                    } else {
                        format!("; {} could not be restored", r.errors.len())
                    }
                );
            }
            let code = if r.errors.is_empty() { 0 } else { 1 };
            if code != 0 {
                eprintln!(
                    "tapeloom: error: {} of the job's entries could not be restored",
                    r.errors.len()
                );
            }
            Ok((
                json!({
                    "job_id": job, "files": r.files, "bytes": r.bytes,
                    "blocks_read": r.blocks_read, "bytes_read_from_tape": r.bytes_read_from_tape,
                    "locates": r.locates, "mounts": r.mounts, "read_through": r.read_through,
                    "seconds": r.seconds, "mb_per_s": rate,
                    "modeled_seconds": r.modeled_seconds,
                    "modeled_mb_per_s": r.modeled_seconds.map(|s| r.bytes as f64 / 1e6 / s.max(1e-9)),
                    "bound_seconds": r.bound_seconds,
                    "bound_mb_per_s": r.bound_seconds.map(|s| r.bytes as f64 / 1e6 / s.max(1e-9)),
                    "streams": r.streams.iter().map(|(n, b)| json!({
                        "name": n, "bytes": b, "mb_per_s": *b as f64 / 1e6 / r.seconds.max(1e-9),
                    })).collect::<Vec<_>>(),
                    "drives": [{
                        "drive": opts.drive.unwrap_or(0),
                        "bytes": r.bytes_read_from_tape,
                        "mb_per_s": r.bytes_read_from_tape as f64 / 1e6 / r.seconds.max(1e-9),
                        "backhitches": r.drive_stats.as_ref().map(|s| s.backhitches),
                        "compression_ratio": r.drive_stats.as_ref().map(|s| s.compression_ratio()),
                        "modeled_seconds": r.modeled_seconds,
                        "tape_alerts": output::tape_alerts(&r.health),
                        "cartridges": output::cartridges(&r.health),
                    }],
                    "errors": r.errors.iter().map(|(p, w)| json!({"path": p, "reason": w})).collect::<Vec<_>>(),
                }),
                code,
            ))
        }
        Cmd::Verify { job, drive } => {
            let r = verify(&home, job, drive)?;
            if human {
                println!(
                    "job {job}: {} — {} blocks checked, {} bad, {} files checked, {} damaged",
                    if r.ok { "ok" } else { "DAMAGED" },
                    r.blocks_checked,
                    r.bad_blocks.len(),
                    r.files_checked,
                    r.files_affected.len()
                );
                for (b, l) in &r.bad_blocks {
                    println!("bad block {l} on {b}");
                }
                for p in &r.files_affected {
                    println!("damaged: {p}");
                }
            }
            if !r.ok {
                eprintln!("tapeloom: error: job {job} failed verification");
            }
            Ok((
                json!({
                    "job_id": job, "ok": r.ok, "blocks_checked": r.blocks_checked,
                    "bad_blocks": r.bad_blocks.iter().map(|(b, l)| json!({"volume": b, "block": l})).collect::<Vec<_>>(),
                    "files_checked": r.files_checked,
                    "files_affected": r.files_affected,
                    "files_missing": r.files_missing,
                    "bytes_read_from_tape": r.bytes_read_from_tape,
                    "seconds": r.seconds,
                }),
                if r.ok { 0 } else { 1 },
            ))
        }
        Cmd::Catalog {
            cmd: CatCmd::Rebuild,
        } => {
            let r = tapeloom_engine::rebuild(&home)?;
            if human {
                println!(
                    "read {} cartridges: {} jobs added ({} entries), {} already known, {} volumes added, {} bad blocks",
                    r.volumes_scanned,
                    r.jobs_added.len(),
                    r.files_added,
                    r.jobs_known,
                    r.volumes_added,
                    r.bad_blocks
                );
            }
            Ok((
                json!({
                    "volumes_scanned": r.volumes_scanned, "volumes_added": r.volumes_added,
                    "jobs_added": r.jobs_added, "jobs_known": r.jobs_known,
                    "files_added": r.files_added, "bad_blocks": r.bad_blocks,
                }),
                0,
            ))
        }
        Cmd::Library { cmd } => match cmd {
            LibCmd::Status => library_status(&home, human),
            LibCmd::Attach {
                changer,
                drives,
                force,
            } => library::attach(&home, &changer, &drives, force, human),
            LibCmd::Detach { force } => {
                let lib = home.virtual_library()?;
                home.detach(force)?;
                if human {
                    println!("using the virtual library {}", home.library_dir().display());
                }
                Ok((
                    json!({"library": home.library_dir(), "barcodes": lib.all_barcodes()}),
                    0,
                ))
            }
            LibCmd::Inventory { rescan } => library::inventory(&home, rescan, human),
            LibCmd::Load { barcode, drive } => library::load(&home, &barcode, drive, human),
            LibCmd::Unload { drive } => library::unload(&home, drive, human),
            LibCmd::Move { barcode, slot } => library::move_cartridge(&home, &barcode, slot, human),
            LibCmd::Label {
                barcodes,
                pool,
                force,
            } => library::label(&home, &barcodes, &pool, force, human),
            LibCmd::Exercise { cycles, seed } => library::exercise(&home, cycles, seed, human),
            LibCmd::Create {
                drives,
                slots,
                capacity,
                model,
                clock,
                scale,
            } => {
                let lib = home.create_library(LibraryConfig {
                    drives,
                    slots,
                    capacity,
                    model: model.clone(),
                    clock: clock.map(|c| match c {
                        ClockArg::Real => tapeloom_device::lto::Clock::Real,
                        ClockArg::Virtual => tapeloom_device::lto::Clock::Virtual,
                    }),
                    scale,
                })?;
                home.catalog.forget_unused_volumes()?;
                if human {
                    println!(
                        "library with {drives} drives and {slots} cartridges of {} in {}",
                        output::bytes(capacity),
                        home.library_dir().display()
                    );
                }
                Ok((
                    json!({"drives": drives, "slots": slots, "capacity": capacity, "model": model, "clock": lib.config().clock, "scale": lib.config().scale, "barcodes": lib.all_barcodes()}),
                    0,
                ))
            }
        },
    }
}

fn library_status(home: &Home, human: bool) -> Result<(Value, i32)> {
    let mut lib = home.library().context("open the library")?;
    let inv = lib.inventory()?;
    let cap = lib.capacity();
    let vols = home.catalog.volumes()?;
    let mut carts = Vec::new();
    for b in inv.barcodes() {
        let used = lib.cartridge_bytes(&b);
        let v = vols.iter().find(|v| v.barcode == b);
        let state = match (v, used) {
            (Some(v), _) => v.status.to_string(),
            (None, Some(0)) => "blank".into(),
            (None, Some(_)) => "foreign".into(),
            (None, None) => "unknown".into(),
        };
        let jobs = match v {
            Some(v) => home.catalog.jobs_on_volume(v.id)?,
            None => 0,
        };
        let location = match (inv.slot_of(&b), inv.drive_of(&b)) {
            (Some(s), _) => format!("slot {s}"),
            (_, Some(d)) => format!("drive {d}"),
            _ => "?".into(),
        };
        carts.push(json!({
            "barcode": b, "location": location, "state": state, "jobs": jobs,
            "bytes_used": used, "capacity": cap, "write_protected": lib.is_write_protected(&b),
        }));
    }
    let mut drives = Vec::new();
    for d in &inv.drives {
        let h = lib.drive_health(d.index).unwrap_or_default();
        drives.push(json!({
            "index": d.index, "device": lib.drive_device(d.index), "loaded": d.loaded,
            "tape_alerts": h.tape_alerts, "volume_statistics": h.volume_statistics,
        }));
    }
    if human {
        println!(
            "{}: {} drives, {} slots{}",
            lib.describe(),
            inv.drives.len(),
            inv.slots.len(),
            cap.map(|c| format!(", cartridges of {}", output::bytes(c)))
                .unwrap_or_default()
        );
        for (d, j) in inv.drives.iter().zip(&drives) {
            println!(
                "drive {}: {}{}",
                d.index,
                d.loaded.as_deref().unwrap_or("empty"),
                match j["tape_alerts"].as_array() {
                    Some(a) if !a.is_empty() => format!("  TapeAlert: {a:?}"),
                    _ => String::new(),
                }
            );
        }
        for c in &carts {
            println!(
                "{}  {:<8} {:<8} {:>10} used  {} jobs",
                c["barcode"].as_str().unwrap_or(""),
                c["location"].as_str().unwrap_or(""),
                c["state"].as_str().unwrap_or(""),
                c["bytes_used"]
                    .as_u64()
                    .map(output::bytes)
                    .unwrap_or_else(|| "?".into()),
                c["jobs"]
            );
        }
    }
    Ok((
        json!({
            "library": lib.describe(),
            "drives": drives,
            "slots": inv.slots.iter().map(|s| json!({"address": s.address, "barcode": s.barcode})).collect::<Vec<_>>(),
            "cartridges": carts,
            "bytes_used": carts.iter().map(|c| c["bytes_used"].as_u64().unwrap_or(0)).sum::<u64>(),
        }),
        0,
    ))
}
