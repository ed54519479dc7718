//! `library exercise`: a random cartridge into a random drive and back, timing each
//! robot move and each load.

use crate::error::OpsResult;
use crate::output::Output;
use anyhow::Result;
use tapeloom_engine::Home;
use tapeloom_ops::exercise::Exercised;

#[derive(clap::Args)]
pub struct Args {
    /// Cycles to run (from 1).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    cycles: u32,
    /// Seed of the random choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// Runs the cycles; `progress`: count them on stderr.
pub fn run(a: Args, home: &Home, progress: bool) -> Result<Exercised> {
    let mut counted = |done: u32| {
        if progress {
            eprint!("\rcycle {done}/{}", a.cycles);
        }
    };
    let r = tapeloom_ops::exercise::run(home, a.cycles, a.seed, &mut counted).ops();
    if progress {
        eprintln!();
    }
    r
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
