//! `library exercise`: a random cartridge into a random drive and back, timing each
//! robot move and each load.

use crate::error::CliError;
use crate::output::Output;
use anyhow::Result;
use serde::Serialize;
use std::time::Instant;
use tapeloom_engine::{Home, Library};
use tapeloom_tools::pattern::Noise;

#[derive(clap::Args)]
pub struct Args {
    /// Cycles to run (from 1).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    cycles: u32,
    /// Seed of the random choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// The timings of the cycles, and the ones that failed.
#[derive(Serialize)]
pub struct Exercised {
    cycles: u32,
    failures: usize,
    mean_move_seconds: f64,
    max_move_seconds: f64,
    mean_load_seconds: f64,
    max_load_seconds: f64,
    mounts_per_hour: f64,
    errors: Vec<Failure>,
}

/// A cycle that failed.
#[derive(Serialize)]
struct Failure {
    cycle: u32,
    barcode: String,
    drive: usize,
    error: String,
}

/// Seconds each robot move and each load took.
#[derive(Default)]
struct Timings {
    moves: Vec<f64>,
    loads: Vec<f64>,
}

/// `progress`: count the cycles on stderr.
pub fn run(a: Args, home: &Home, progress: bool) -> Result<Exercised> {
    let mut lib = home.library()?;
    tapeloom_engine::unload_drives(home, None)?;
    let mut noise = Noise::new(a.seed);
    let mut below = |n: usize| (noise.next_u64() % n.max(1) as u64) as usize;
    let (mut t, mut errors) = (Timings::default(), Vec::new());
    let started = Instant::now();
    for cycle in 0..a.cycles {
        let inv = lib.inventory()?;
        let full: Vec<_> = inv.slots.iter().filter(|s| s.barcode.is_some()).collect();
        if full.is_empty() || inv.drives.is_empty() {
            return Err(CliError::NothingToExercise.into());
        }
        let slot = full[below(full.len())];
        let (slot, barcode) = (slot.address, slot.barcode.clone().unwrap_or_default());
        let drive = below(inv.drives.len());
        if let Err(e) = t.cycle(&mut lib, slot, drive) {
            let error = e.to_string();
            errors.push(Failure {
                cycle,
                barcode: barcode.clone(),
                drive,
                error,
            });
            // Put the cartridge back if it is stuck in the drive.
            if let Ok(inv) = lib.inventory() {
                if inv.drive_of(&barcode).is_some() {
                    let _ = lib.unload(drive, Some(slot));
                }
            }
        }
        if progress {
            eprint!("\rcycle {}/{}", cycle + 1, a.cycles);
        }
    }
    if progress {
        eprintln!();
    }
    Ok(t.summary(a.cycles, started.elapsed().as_secs_f64() / 3600.0, errors))
}

impl Timings {
    /// One cycle: the cartridge in `slot` into `drive`, loaded, unloaded and back.
    fn cycle(&mut self, lib: &mut Library, slot: usize, drive: usize) -> Result<()> {
        let t = Instant::now();
        lib.load(slot, drive)?;
        self.moves.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let mut d = lib.open_tape_drive(drive)?;
        d.load()?;
        self.loads.push(t.elapsed().as_secs_f64());
        d.unload()?;
        drop(d);
        let t = Instant::now();
        lib.unload(drive, Some(slot))?;
        self.moves.push(t.elapsed().as_secs_f64());
        Ok(())
    }

    fn summary(&self, cycles: u32, hours: f64, errors: Vec<Failure>) -> Exercised {
        let stat = |v: &[f64]| -> (f64, f64) {
            if v.is_empty() {
                (0.0, 0.0)
            } else {
                (
                    v.iter().sum::<f64>() / v.len() as f64,
                    v.iter().cloned().fold(0.0, f64::max),
                )
            }
        };
        let (mean_move_seconds, max_move_seconds) = stat(&self.moves);
        let (mean_load_seconds, max_load_seconds) = stat(&self.loads);
        let mounts = self.loads.len() as f64;
        Exercised {
            cycles,
            failures: errors.len(),
            mean_move_seconds,
            max_move_seconds,
            mean_load_seconds,
            max_load_seconds,
            mounts_per_hour: if hours > 0.0 { mounts / hours } else { 0.0 },
            errors,
        }
    }
}

impl Output for Exercised {
    fn print(&self) {
        outln!(
            "{} cycles, {} failures; moves {:.2} s mean, {:.2} s max; loads {:.2} s mean; {:.0} mounts per hour",
            self.cycles, self.failures, self.mean_move_seconds, self.max_move_seconds,
            self.mean_load_seconds, self.mounts_per_hour
        );
    }

    /// A failed cycle makes the exit status 1; the errors say why.
    fn exit_code(&self) -> i32 {
        i32::from(self.failures > 0)
    }
}
