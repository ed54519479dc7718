//! `tapeloom drive models`: the LTO generations the drive model knows.

use super::Context;
use crate::output::{emit, Output};
use anyhow::Result;
use serde::Serialize;
use tapeloom_device::lto::{generations, LtoParams};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// The LTO generations the model knows, with their parameters.
    Models,
}

impl Args {
    /// Runs the subcommand and prints its output.
    pub fn run(self, ctx: &Context) -> Result<i32> {
        match self.cmd {
            Cmd::Models => emit(&models(), ctx.json),
        }
    }
}

/// Every generation's parameters.
#[derive(Serialize)]
pub struct Models {
    models: Vec<Model>,
}

/// One generation, in the units of the JSON (MB/s, bytes, seconds, metres).
#[derive(Serialize)]
struct Model {
    name: &'static str,
    native_mb_per_s: f64,
    min_speed_mb_per_s: f64,
    speed_steps_mb_per_s: Vec<f64>,
    buffer_bytes: f64,
    interface_mb_per_s: f64,
    command_seconds: f64,
    capacity_bytes: f64,
    max_compression: f64,
    backhitch_seconds: f64,
    restart_fill: f64,
    filemark_immediate_seconds: f64,
    load_seconds: f64,
    unload_seconds: f64,
    first_load_calibration_seconds: f64,
    tape_m: f64,
    wraps: u32,
    locate_m_per_s: f64,
    wrap_change_seconds: f64,
    locate_overhead_seconds: f64,
    /// Speed steps, for the table.
    #[serde(skip)]
    steps: u32,
}

impl From<&LtoParams> for Model {
    fn from(g: &LtoParams) -> Self {
        Model {
            name: g.name,
            native_mb_per_s: g.native_mb_s,
            min_speed_mb_per_s: g.min_mb_s,
            speed_steps_mb_per_s: g.speed_steps().iter().map(|s| s / 1e6).collect(),
            buffer_bytes: g.buffer_bytes,
            interface_mb_per_s: g.interface_mb_s,
            command_seconds: g.command_s,
            capacity_bytes: g.capacity_bytes,
            max_compression: g.max_compression,
            backhitch_seconds: g.backhitch_s,
            restart_fill: g.restart_fill,
            filemark_immediate_seconds: g.filemark_immediate_s,
            load_seconds: g.load_s,
            unload_seconds: g.unload_s,
            first_load_calibration_seconds: g.first_load_calibration_s,
            tape_m: g.tape_m,
            wraps: g.wraps,
            locate_m_per_s: g.locate_m_s,
            wrap_change_seconds: g.wrap_change_s,
            locate_overhead_seconds: g.locate_overhead_s,
            steps: g.steps,
        }
    }
}

fn models() -> Models {
    let models = generations().iter().map(Model::from).collect();
    Models { models }
}

impl Output for Models {
    fn print(&self) {
        outln!(
            "{:<6} {:>7} {:>13} {:>6} {:>8} {:>9} {:>8} {:>9} {:>6} {:>6} {:>9}",
            "model",
            "native",
            "speed steps",
            "buffer",
            "iface",
            "capacity",
            "cmd µs",
            "backhitch",
            "tape m",
            "wraps",
            "locate m/s"
        );
        for g in &self.models {
            outln!(
                "{:<6} {:>7} {:>5}-{:<4}x{:<2} {:>5}M {:>8} {:>8}G {:>8.0} {:>9} {:>6} {:>6} {:>9}",
                g.name,
                g.native_mb_per_s,
                g.min_speed_mb_per_s,
                g.native_mb_per_s,
                g.steps,
                g.buffer_bytes / 1048576.0,
                g.interface_mb_per_s,
                g.capacity_bytes / 1e9,
                g.command_seconds * 1e6,
                g.backhitch_seconds,
                g.tape_m,
                g.wraps,
                g.locate_m_per_s
            );
        }
    }
}
