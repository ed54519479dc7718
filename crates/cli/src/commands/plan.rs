//! `tapeloom plan`: predict a backup window before buying or running anything,
//! and answer the sizing questions (`--solve drives|concurrency|stage`). The
//! simulation is the measuring tools' (`tapeloom_tools::plan`); this module gathers its inputs:
//! sources stated on the command line, read from `readrate --json` output, or
//! taken from past jobs in the catalog.

use super::Context;
use crate::error::OpsResult;
use crate::size;
use anyhow::{bail, Context as _, Result};
use serde::Serialize;
use std::path::PathBuf;
use tapeloom_tools::benchdrive::model_params;
use tapeloom_tools::plan::{
    hours, plan, solve_concurrency, solve_drives, solve_stage, PlanInput, PlanOutcome, PlanSource,
    PlanStage,
};

/// CPU seconds per GB the engine spent on a backup of 2:1 data on a two-core
/// machine (`bench/cpu.py`, rounded up): written directly, through a disk stage,
/// and by a server that receives it from a client over TLS and spools it (the
/// client's own CPU is not the server's). A site passes its own with
/// `--cpu-per-gb`, from a backup's `cpu_seconds_per_gb` or from that bench.
const CPU_PER_GB_DIRECT: f64 = 0.5;
const CPU_PER_GB_STAGED: f64 = 2.0;
const CPU_PER_GB_SERVER: f64 = 4.0;

#[derive(clap::Args)]
pub struct Args {
    /// A source as SIZE@RATE, or SIZE@RATExCOUNT for COUNT alike (for example
    /// 2T@150MB or 500G@80MBx8): its bytes and the bytes per second it reads at.
    #[arg(long = "source", value_name = "SIZE@RATE")]
    sources: Vec<String>,
    /// The streams of a `readrate --json` document, each with its bytes and rate.
    #[arg(long, value_name = "FILE")]
    readrate: Vec<PathBuf>,
    /// The streams of a past job in the catalog, each with its bytes and the rate
    /// it achieved (which the drive may have held down).
    #[arg(long, value_name = "JOB", value_parser = super::parse_job_id)]
    history: Vec<i64>,
    /// The drives' LTO generation (lto1 .. lto10).
    #[arg(long, default_value = "lto9")]
    model: String,
    /// Multiply the model's rates, buffers and capacity by this, as a library
    /// made with --scale does (0.000001 to 1000).
    #[arg(long, default_value_t = 1.0, value_parser = size::library_scale)]
    scale: f64,
    /// Drives the job writes with (1 to 256).
    #[arg(long, default_value_t = 1, value_parser = super::usize_in(1..=256))]
    drives: usize,
    /// How far the drives' compression shrinks the data (1 to 4; 1 when not known).
    #[arg(long, default_value_t = 1.0, value_parser = ratio)]
    ratio: f64,
    /// Streams each drive holds at once: a number (1 to 4096), or auto.
    #[arg(long, default_value = "auto", value_parser = concurrency)]
    concurrency: Concurrency,
    /// Bytes per block (64K to 8M).
    #[arg(long, default_value = "256K", value_parser = size::within(64 << 10, 8 << 20))]
    block_size: u64,
    /// Go through a disk stage of this size.
    #[arg(long, value_parser = size::within(1 << 20, size::MAX))]
    stage: Option<u64>,
    /// The stage disk's bytes per second (for example 1GB); with --stage or
    /// --solve stage.
    #[arg(long, default_value = "1GB", value_parser = size::within(1, size::MAX))]
    stage_rate: u64,
    /// The network's bytes per second from the clients, in all.
    #[arg(long, value_parser = size::within(1, size::MAX))]
    network: Option<u64>,
    /// The media server's cores.
    #[arg(long, value_parser = cores)]
    cores: Option<f64>,
    /// The engine's CPU seconds per GB written (a backup's cpu_seconds_per_gb);
    /// by default 0.5 for a direct backup, 2 through a stage (--stage), and 4 for
    /// a server receiving from clients (--network).
    #[arg(long, value_parser = cpu)]
    cpu_per_gb: Option<f64>,
    /// The window the backup must fit (for example 8h).
    #[arg(long, value_parser = crate::duration::parse)]
    window: Option<std::time::Duration>,
    /// Answer a sizing question: the fewest drives that fit --window, the
    /// concurrency without backhitches, or the smallest stage that keeps the
    /// drives streaming.
    #[arg(long, value_enum)]
    solve: Option<Solve>,
    /// Where the one file to restore lies on its cartridge, in bytes of tape from
    /// its beginning (the middle of the job's data when not given).
    #[arg(long, value_parser = size::parse)]
    restore_at: Option<u64>,
}

/// A sizing question.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Solve {
    /// The fewest drives whose window fits --window.
    Drives,
    /// The concurrency with the shortest window and no backhitches.
    Concurrency,
    /// The smallest stage with which the drives never stop.
    Stage,
}

/// Streams a drive holds at once.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Concurrency {
    Auto,
    Fixed(usize),
}

fn concurrency(s: &str) -> std::result::Result<Concurrency, String> {
    if s == "auto" {
        return Ok(Concurrency::Auto);
    }
    match s.parse::<usize>() {
        Ok(n) if (1..=4096).contains(&n) => Ok(Concurrency::Fixed(n)),
        _ => Err(format!("'{s}' is not auto or a number from 1 to 4096")),
    }
}

fn number_in(s: &str, lo: f64, hi: f64) -> std::result::Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (lo..=hi).contains(&v) => Ok(v),
        _ => Err(format!("'{s}' is not a number from {lo} to {hi}")),
    }
}

fn ratio(s: &str) -> std::result::Result<f64, String> {
    number_in(s, 1.0, 4.0)
}

fn cores(s: &str) -> std::result::Result<f64, String> {
    number_in(s, 0.1, 4096.0)
}

fn cpu(s: &str) -> std::result::Result<f64, String> {
    number_in(s, 0.0, 1000.0)
}

/// The plan: what it was made from, its predictions, and the answer asked for.
#[derive(Serialize)]
pub struct Plan {
    model: String,
    drives: usize,
    sources: Vec<SourceOut>,
    total_bytes: u64,
    ratio: f64,
    concurrency: Option<usize>,
    stage_bytes: Option<u64>,
    solve: Option<Solve>,
    /// The answer to --solve: a drive count, a concurrency or a stage size; `None`
    /// when no answer within reach exists.
    answer: Option<u64>,
    #[serde(flatten)]
    outcome: PlanOutcome,
    /// How long the planning took, in seconds.
    plan_seconds: f64,
}

#[derive(Serialize)]
struct SourceOut {
    name: String,
    bytes: u64,
    mb_per_s: f64,
}

/// A source as `SIZE@RATE[xCOUNT]`.
fn stated(s: &str) -> Result<Vec<PlanSource>> {
    let bad = |why: &str| {
        anyhow::anyhow!(
            "--source '{s}': {why} (write SIZE@RATE, for example 2T@150MB, or 500G@80MBx8)"
        )
    };
    let (size, rest) = s.split_once('@').ok_or_else(|| bad("it has no @"))?;
    let (rate, count) = match rest.split_once('x') {
        Some((r, c)) => (
            r,
            c.parse::<usize>()
                .map_err(|_| bad("the count is not a number"))?,
        ),
        None => (rest, 1),
    };
    let bytes = size::parse(size).map_err(|e| bad(&e))?;
    let rate = size::parse(rate.trim_end_matches("/s")).map_err(|e| bad(&e))?;
    if rate == 0 || count == 0 || count > 4096 {
        return Err(bad(
            "its rate and count must be above 0 (and at most 4096 alike)",
        ));
    }
    Ok((0..count)
        .map(|i| PlanSource {
            name: if count == 1 {
                s.to_string()
            } else {
                format!("{s}#{}", i + 1)
            },
            bytes,
            rate: rate as f64,
            files: 0,
        })
        .collect())
}

/// The streams of a `readrate --json` document.
fn from_readrate(path: &PathBuf) -> Result<Vec<PlanSource>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    let doc: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a readrate --json document", path.display()))?;
    let Some(streams) = doc["streams"].as_array() else {
        bail!(
            "{} is not a readrate --json document: it has no streams",
            path.display()
        );
    };
    streams
        .iter()
        .map(|s| {
            let (Some(bytes), Some(mb)) = (s["bytes"].as_u64(), s["mb_per_s"].as_f64()) else {
                bail!("{}: a stream has no bytes or mb_per_s", path.display());
            };
            Ok(PlanSource {
                name: s["path"].as_str().unwrap_or("?").to_string(),
                bytes,
                rate: (mb * 1e6).max(1.0),
                files: s["files"].as_u64().unwrap_or(0),
            })
        })
        .collect()
}

/// The streams of a past job: each one's bytes and the rate it achieved, from
/// its per-second samples.
fn from_history(ctx: &Context, job: i64) -> Result<Vec<PlanSource>> {
    let home = ctx.open_home()?;
    let out: Vec<PlanSource> = (tapeloom_ops::history::backup_streams(&home, job).ops()?)
        .into_iter()
        .map(|st| PlanSource {
            name: format!("job {job} {}", st.name),
            bytes: st.bytes,
            rate: st.rate,
            files: 0,
        })
        .collect();
    if out.is_empty() {
        bail!("job {job} has no stream samples to plan from");
    }
    Ok(out)
}

pub fn run(a: Args, ctx: &Context) -> Result<Plan> {
    let t0 = std::time::Instant::now();
    let mut sources = Vec::new();
    for s in &a.sources {
        sources.extend(stated(s)?);
    }
    for p in &a.readrate {
        sources.extend(from_readrate(p)?);
    }
    for &j in &a.history {
        sources.extend(from_history(ctx, j)?);
    }
    if sources.is_empty() {
        bail!("nothing to plan: give --source SIZE@RATE, --readrate FILE or --history JOB");
    }
    let model = model_params(&a.model, a.scale)?;
    let input = PlanInput {
        sources,
        model,
        drives: a.drives,
        ratio: a.ratio,
        block: a.block_size,
        concurrency: match a.concurrency {
            Concurrency::Auto => None,
            Concurrency::Fixed(n) => Some(n),
        },
        stage: a.stage.map(|bytes| PlanStage {
            bytes,
            rate: a.stage_rate as f64,
        }),
        network: a.network.map(|n| n as f64),
        cpu_per_gb: a.cpu_per_gb.unwrap_or(if a.network.is_some() {
            CPU_PER_GB_SERVER
        } else if a.stage.is_some() {
            CPU_PER_GB_STAGED
        } else {
            CPU_PER_GB_DIRECT
        }),
        cores: a.cores,
        window: a.window.map(|w| w.as_secs_f64()),
        restore_at: a.restore_at.map(|b| b as f64),
    };
    let (answer, outcome, used) = solve(&a, &input)?;
    Ok(Plan {
        model: a.model.clone(),
        drives: used.drives,
        total_bytes: used.sources.iter().map(|s| s.bytes).sum(),
        sources: used
            .sources
            .iter()
            .map(|s| SourceOut {
                name: s.name.clone(),
                bytes: s.bytes,
                mb_per_s: s.rate / 1e6,
            })
            .collect(),
        ratio: used.ratio,
        concurrency: used.concurrency,
        stage_bytes: used.stage.map(|s| s.bytes),
        solve: a.solve,
        answer,
        outcome,
        plan_seconds: t0.elapsed().as_secs_f64(),
    })
}

/// The plan, or the answer to --solve with the plan it gives.
fn solve(a: &Args, input: &PlanInput) -> Result<(Option<u64>, PlanOutcome, PlanInput)> {
    let mut used = input.clone();
    Ok(match a.solve {
        None => (None, plan(input), used),
        Some(Solve::Drives) => {
            let Some(w) = input.window else {
                bail!("--solve drives needs --window (for example --window 8h)");
            };
            match solve_drives(input, w, 256) {
                Some((n, o)) => {
                    used.drives = n;
                    (Some(n as u64), o, used)
                }
                None => {
                    used.drives = 256;
                    let mut o = plan(&used);
                    o.verdict.insert(
                        0,
                        format!("Even 256 drives do not fit the {} window.", hours(w)),
                    );
                    (None, o, used)
                }
            }
        }
        Some(Solve::Concurrency) => {
            let (c, o) = solve_concurrency(input);
            used.concurrency = Some(c);
            (Some(c as u64), o, used)
        }
        Some(Solve::Stage) => match solve_stage(input, a.stage_rate as f64) {
            Some((bytes, o)) => {
                used.stage = Some(PlanStage {
                    bytes,
                    rate: a.stage_rate as f64,
                });
                (Some(bytes), o, used)
            }
            None => {
                let mut o = plan(input);
                o.verdict.insert(
                    0,
                    "No stage up to the job's size keeps the drives streaming: the stage disk \
                     is too slow for them."
                        .into(),
                );
                (None, o, used)
            }
        },
    })
}

impl crate::output::Output for Plan {
    fn print(&self) {
        if let (Some(s), Some(n)) = (self.solve, self.answer) {
            match s {
                Solve::Drives => outln!("answer: {n} drives"),
                Solve::Concurrency => outln!("answer: {n} streams per drive"),
                Solve::Stage => outln!("answer: a stage of {}", crate::output::bytes(n)),
            }
        }
        for line in &self.outcome.verdict {
            outln!("{line}");
        }
        for d in &self.outcome.drives {
            outln!(
                "drive {}: {:.0} MB/s, streaming {:.0}% of the time, {} backhitches, done after {}",
                d.drive,
                d.mb_per_s,
                d.streaming_share * 100.0,
                d.backhitches,
                hours(d.seconds)
            );
        }
        if self.stage_bytes.is_some() {
            outln!(
                "stage peak: {}",
                crate::output::bytes(self.outcome.stage_peak_bytes)
            );
        }
        outln!(
            "CPU: {:.2} cores for the job, {:.2} per drive at its top rate",
            self.outcome.cores_needed,
            self.outcome.cores_per_drive
        );
    }
}
