//! `library exercise`: a random cartridge into a random drive and back, timing
//! each robot move and each load.

use crate::error::{OpsError, Result};
use serde::Serialize;
use std::time::Instant;
use tapeloom_engine::{Home, Library};
use tapeloom_tools::pattern::Noise;

/// The timings of the cycles, and the ones that failed.
#[derive(Serialize)]
pub struct Exercised {
    /// The cycles run.
    pub cycles: u32,
    /// How many cycles failed.
    pub failures: usize,
    /// Seconds a robot move took, on average.
    pub mean_move_seconds: f64,
    /// Seconds the longest robot move took.
    pub max_move_seconds: f64,
    /// Seconds a load took, on average.
    pub mean_load_seconds: f64,
    /// Seconds the longest load took.
    pub max_load_seconds: f64,
    /// Loads per hour of the whole run.
    pub mounts_per_hour: f64,
    /// The cycles that failed, with why.
    pub errors: Vec<Failure>,
}

/// A cycle that failed.
#[derive(Serialize)]
pub struct Failure {
    /// The cycle, from 0.
    pub cycle: u32,
    /// The cartridge it moved.
    pub barcode: String,
    /// The drive it loaded.
    pub drive: usize,
    /// Why it failed.
    pub error: String,
}

/// Seconds each robot move and each load took.
#[derive(Default)]
struct Timings {
    /// Seconds of each robot move.
    moves: Vec<f64>,
    /// Seconds of each load.
    loads: Vec<f64>,
}

/// Runs `cycles` cycles, each a random cartridge (chosen from `seed`) into a
/// random drive, loaded, unloaded and put back; `done` hears of each cycle ended.
pub fn run(home: &Home, cycles: u32, seed: u64, done: &mut dyn FnMut(u32)) -> Result<Exercised> {
    let mut lib = home.library()?;
    tapeloom_engine::unload_drives(home, None)?;
    let mut noise = Noise::new(seed);
    let mut below = |n: usize| (noise.next_u64() % n.max(1) as u64) as usize;
    let (mut t, mut errors) = (Timings::default(), Vec::new());
    let started = Instant::now();
    for cycle in 0..cycles {
        let inv = lib.inventory()?;
        let full: Vec<_> = inv.slots.iter().filter(|s| s.barcode.is_some()).collect();
        if full.is_empty() || inv.drives.is_empty() {
            return Err(OpsError::NothingToExercise);
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
        done(cycle + 1);
    }
    Ok(t.summary(cycles, started.elapsed().as_secs_f64() / 3600.0, errors))
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
