//! `tapeloom bench drive` and `bench locate`: the drive model, or a library's drive,
//! measured; `bench order`: the recall planner's order against the best an
//! offline search finds.

use super::{ClockArg, Context};
use crate::output::{emit, Output};
use crate::size;
use anyhow::Result;
use serde::Serialize;
use tapeloom_device::lto::Clock;
use tapeloom_format::MAX_BLOCK_SIZE;
use tapeloom_tools::benchdrive::{
    bench_drive, bench_library_drive, bench_locate, DriveBenchOptions, DriveBenchRow, LocateHow,
};
use tapeloom_tools::pattern::Pattern;
use tapeloom_tools::ToolError;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// Stream data from memory to a modeled drive, for each block size.
    Drive(DriveArgs),
    /// Model positioning between two offsets of the data on a full cartridge.
    Locate(LocateArgs),
    /// Time the recall planner's order of random files against the block
    /// order, the greedy walk alone and the best order an offline search finds.
    Order(OrderArgs),
}

impl Args {
    /// Runs the subcommand and prints its output.
    pub fn run(self, ctx: &Context) -> Result<i32> {
        match self.cmd {
            Cmd::Drive(a) => emit(&drive(a, ctx)?, ctx.json),
            Cmd::Locate(a) => emit(&locate(a)?, ctx.json),
            Cmd::Order(a) => emit(&order(a)?, ctx.json),
        }
    }
}

/// A measuring tool's error as the command line reports it: the engine's own error
/// when the engine failed (so that what the command line adds to it is found), and
/// a refusal of `--source-rate` with how to get past it.
fn reported(e: tapeloom_tools::Error) -> anyhow::Error {
    match e {
        tapeloom_tools::Error::Engine(e) => anyhow::Error::new(*e),
        tapeloom_tools::Error::Tool(ToolError::SourceRateOnLibrary) => {
            anyhow::anyhow!("{e} (--source-rate needs --model)")
        }
        e => anyhow::Error::new(e),
    }
}

/// On or off.
#[derive(Clone, Copy, clap::ValueEnum)]
enum OnOff {
    On,
    Off,
}

#[derive(clap::Args)]
struct DriveArgs {
    /// LTO generation to model (lto1 .. lto10).
    #[arg(long, default_value = "lto9")]
    model: String,
    /// Data: random, zero or ratio:R (compresses about R:1).
    #[arg(long, default_value = "random")]
    pattern: Pattern,
    /// Block sizes (1 byte to 8M; default 1K, 2K, ... 256K).
    #[arg(long, value_delimiter = ',', value_parser = size::within(1, MAX_BLOCK_SIZE as u64))]
    block_sizes: Vec<u64>,
    /// The drive's hardware compression.
    #[arg(long, default_value = "on")]
    compression: OnOff,
    /// Data per block size.
    #[arg(long, default_value = "4G", value_parser = size::within(1, size::MAX))]
    size: u64,
    /// Feed the drive no faster than this (for example 40MB).
    #[arg(long, value_parser = size::within(1, size::MAX))]
    source_rate: Option<u64>,
    /// virtual (add up modeled time) or real (take that long).
    #[arg(long, default_value = "virtual")]
    clock: ClockArg,
    /// Multiply every rate and buffer by this.
    #[arg(long, default_value_t = 1.0, value_parser = size::scale)]
    scale: f64,
    /// Run on this drive of the home's library (on a blank cartridge, erased
    /// afterwards) instead of a fresh modeled drive.
    #[arg(
        long,
        conflicts_with_all = ["clock", "scale"],
        value_parser = super::usize_in(..=super::MAX_INDEX)
    )]
    drive: Option<usize>,
}

/// A drive benchmark: the settings and a row per block size.
#[derive(Serialize)]
pub struct DriveBench {
    model: String,
    /// virtual or real for a modeled drive; wall for a library drive without a model.
    clock: &'static str,
    scale: f64,
    size: u64,
    source_rate: Option<u64>,
    /// The library's drive, when the benchmark ran on one.
    #[serde(skip_serializing_if = "Option::is_none")]
    drive: Option<usize>,
    rows: Vec<Row>,
    #[serde(skip)]
    pattern: Pattern,
    #[serde(skip)]
    compression: bool,
}

/// One block size's figures.
#[derive(Serialize)]
struct Row {
    pattern: String,
    block_size: usize,
    compression: bool,
    host_mb_per_s: f64,
    tape_mb_per_s: f64,
    compression_ratio: f64,
    backhitches: u64,
    modeled_seconds: f64,
    wall_seconds: f64,
}

impl From<DriveBenchRow> for Row {
    fn from(r: DriveBenchRow) -> Self {
        Row {
            pattern: r.pattern,
            block_size: r.block_size,
            compression: r.compression,
            host_mb_per_s: r.host_mb_per_s,
            tape_mb_per_s: r.tape_mb_per_s,
            compression_ratio: r.compression_ratio,
            backhitches: r.backhitches,
            modeled_seconds: r.modeled_seconds,
            wall_seconds: r.wall_seconds,
        }
    }
}

fn drive(a: DriveArgs, ctx: &Context) -> Result<DriveBench> {
    let block_sizes = if a.block_sizes.is_empty() {
        (0..=8).map(|n| 1024usize << n).collect()
    } else {
        a.block_sizes.iter().map(|&b| b as usize).collect()
    };
    let mut opts = DriveBenchOptions {
        model: a.model.clone(),
        clock: a.clock.into(),
        scale: a.scale,
        pattern: a.pattern,
        block_sizes,
        compression: matches!(a.compression, OnOff::On),
        size: a.size,
        source_rate: a.source_rate.map(|r| r as f64),
    };
    let mut clock = opts.clock.as_str();
    let (model, rows) = match a.drive {
        None => (a.model, bench_drive(&opts)?),
        Some(d) => {
            // A library's drive runs at its own pace, with its compression on.
            (opts.model, opts.clock, opts.scale) = (String::new(), Clock::Virtual, 1.0);
            opts.compression = true;
            clock = "virtual";
            let (model, rows) =
                bench_library_drive(&ctx.open_home()?, d, &opts).map_err(reported)?;
            if model == "none" {
                clock = "wall";
            }
            (model, rows)
        }
    };
    Ok(DriveBench {
        model,
        clock,
        scale: opts.scale,
        size: a.size,
        source_rate: a.source_rate,
        drive: a.drive,
        rows: rows.into_iter().map(Row::from).collect(),
        pattern: a.pattern,
        compression: opts.compression,
    })
}

impl Output for DriveBench {
    fn print(&self) {
        outln!(
            "{} ({} clock{}), {}, compression {}",
            self.model,
            self.clock,
            if self.scale != 1.0 {
                format!(", scale {}", self.scale)
            } else {
                String::new()
            },
            self.pattern,
            if self.compression { "on" } else { "off" }
        );
        outln!(
            "{:>10} {:>10} {:>10} {:>6} {:>11} {:>10}",
            "block",
            "host MB/s",
            "tape MB/s",
            "ratio",
            "backhitches",
            "seconds"
        );
        for r in &self.rows {
            outln!(
                "{:>10} {:>10.1} {:>10.1} {:>6.2} {:>11} {:>10.1}",
                r.block_size,
                r.host_mb_per_s,
                r.tape_mb_per_s,
                r.compression_ratio,
                r.backhitches,
                r.modeled_seconds
            );
        }
    }
}

#[derive(clap::Args)]
struct LocateArgs {
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
    #[arg(long, value_parser = size::within(1, size::MAX))]
    file_size: Option<u64>,
}

/// What positioning from one offset to another costs on the model.
#[derive(Serialize)]
pub struct Located {
    model: String,
    how: String,
    from: u64,
    to: u64,
    modeled_seconds: f64,
    equivalent_mb_per_s: f64,
    from_wrap: u32,
    to_wrap: u32,
    from_metres: f64,
    to_metres: f64,
}

fn locate(a: LocateArgs) -> Result<Located> {
    let how = match (a.read_through, a.space_files, a.file_size) {
        (true, _, _) => LocateHow::ReadThrough,
        (false, true, Some(s)) => LocateHow::SpaceFiles(s),
        _ => LocateHow::Locate,
    };
    let r = bench_locate(&a.model, a.from, a.to, how)?;
    Ok(Located {
        how: match how {
            LocateHow::Locate => "locate".to_string(),
            LocateHow::ReadThrough => "read-through".to_string(),
            LocateHow::SpaceFiles(s) => format!("space over files of {s} bytes"),
        },
        model: a.model,
        from: a.from,
        to: a.to,
        modeled_seconds: r.modeled_seconds,
        equivalent_mb_per_s: r.equivalent_mb_per_s,
        from_wrap: r.wraps.0,
        to_wrap: r.wraps.1,
        from_metres: r.metres.0,
        to_metres: r.metres.1,
    })
}

impl Output for Located {
    fn print(&self) {
        outln!(
            "{}: {} from {} to {}: {:.1} s modeled, equivalent {:.1} MB/s (wrap {} at {:.0} m to wrap {} at {:.0} m)",
            self.model, self.how, self.from, self.to, self.modeled_seconds, self.equivalent_mb_per_s,
            self.from_wrap, self.from_metres, self.to_wrap, self.to_metres
        );
    }
}

#[derive(clap::Args)]
struct OrderArgs {
    /// LTO generation to model.
    #[arg(long, default_value = "lto9")]
    model: String,
    /// Files read, in all.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    files: u32,
    /// Cartridges the files are dealt over.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    cartridges: u32,
    /// Each file's size.
    #[arg(long, default_value = "1M", value_parser = size::within(1, 1 << 40))]
    file_size: u64,
    /// The block size.
    #[arg(long, default_value = "256K", value_parser = size::within(1, MAX_BLOCK_SIZE as u64))]
    block_size: u64,
    /// The seed of the files' places.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Seconds the offline search may take for each cartridge.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u32).range(1..=86_400))]
    search_seconds: u32,
}

/// The recall planner's order against the others, summed over the cartridges.
#[derive(Serialize)]
pub struct Ordered {
    model: String,
    files: usize,
    cartridges: usize,
    block_seconds: f64,
    sltf_seconds: f64,
    planned_seconds: f64,
    planning_seconds: f64,
    offline_seconds: f64,
    search_seconds: f64,
    converged: bool,
    planned_over_offline: f64,
    sltf_over_offline: f64,
}

fn order(a: OrderArgs) -> Result<Ordered> {
    let opts = tapeloom_tools::benchorder::OrderBenchOptions {
        model: a.model.clone(),
        files: a.files as usize,
        cartridges: a.cartridges as usize,
        file_bytes: a.file_size,
        block_bytes: a.block_size,
        seed: a.seed,
        search_for: std::time::Duration::from_secs(a.search_seconds.into()),
    };
    let b = tapeloom_tools::benchorder::bench_order(&opts)?;
    let r = &b.sum;
    let over = |x: f64| match r.offline_seconds > 0.0 {
        true => x / r.offline_seconds,
        false => 1.0,
    };
    Ok(Ordered {
        model: a.model,
        files: b.files,
        cartridges: b.cartridges,
        block_seconds: r.block_seconds,
        sltf_seconds: r.sltf_seconds,
        planned_seconds: r.planned_seconds,
        planning_seconds: r.planning_seconds,
        offline_seconds: r.offline_seconds,
        search_seconds: r.search_seconds,
        converged: r.converged,
        planned_over_offline: over(r.planned_seconds),
        sltf_over_offline: over(r.sltf_seconds),
    })
}

impl Output for Ordered {
    fn print(&self) {
        outln!(
            "{} files over {} {} cartridges: block order {:.0} s, SLTF {:.0} s, planned {:.0} s ({:.3} s to plan), best found offline {:.0} s ({:.0} s of search{}); planned/offline {:.3}, SLTF/offline {:.3}",
            self.files, self.cartridges, self.model, self.block_seconds, self.sltf_seconds,
            self.planned_seconds, self.planning_seconds, self.offline_seconds, self.search_seconds,
            if self.converged { ", converged" } else { ", cut at its limit" },
            self.planned_over_offline, self.sltf_over_offline
        );
    }
}
