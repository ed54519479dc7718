//! `tapeloom expire`: marks expired the cartridges whose jobs all outlived their
//! pool's retention, and forgets those jobs (`--dry-run`: only says which).

use super::Context;
use crate::output::{self, Output};
use anyhow::Result;
use serde::Serialize;
use tapeloom_engine::escape_controls;

#[derive(clap::Args)]
pub struct Args {
    /// Say what would expire, and change nothing.
    #[arg(long)]
    dry_run: bool,
}

/// What expired (or would).
#[derive(Serialize)]
pub struct Expired {
    /// The time expiry was judged at (the engine's clock).
    now: String,
    dry_run: bool,
    cartridges: Vec<Cartridge>,
    /// Every job forgotten (or that would be).
    jobs_forgotten: Vec<i64>,
}

/// A cartridge that expired.
#[derive(Serialize)]
struct Cartridge {
    barcode: String,
    pool: String,
    jobs: Vec<i64>,
    /// When its last job expired.
    expired: String,
    /// The latest end of its jobs.
    jobs_ended: String,
}

pub fn run(a: Args, ctx: &Context) -> Result<Expired> {
    let home = ctx.open_home()?;
    let r = tapeloom_engine::expire(&home, a.dry_run)?;
    Ok(Expired {
        now: output::time(r.now_ns),
        dry_run: r.dry_run,
        cartridges: r
            .volumes
            .into_iter()
            .map(|v| Cartridge {
                barcode: v.barcode,
                pool: v.pool,
                jobs: v.jobs,
                expired: output::time(v.expired_ns),
                jobs_ended: output::time(v.jobs_ended_ns),
            })
            .collect(),
        jobs_forgotten: r.jobs,
    })
}

impl Output for Expired {
    fn print(&self) {
        if self.cartridges.is_empty() {
            outln!("nothing expires at {}", self.now);
            return;
        }
        for c in &self.cartridges {
            let jobs: Vec<String> = c.jobs.iter().map(|j| j.to_string()).collect();
            outln!(
                "{}  pool {}  expired at {}  jobs {}",
                escape_controls(&c.barcode),
                escape_controls(&c.pool),
                c.expired,
                jobs.join(", ")
            );
        }
        outln!(
            "{} cartridges, {} jobs {}",
            self.cartridges.len(),
            self.jobs_forgotten.len(),
            if self.dry_run {
                "to forget (dry run: nothing was changed)"
            } else {
                "forgotten"
            }
        );
    }
}
