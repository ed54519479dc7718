//! `tapeloom pool ...`: media pools, the sets of cartridges backups write to
//! (`backup --pool NAME`), each with its own rules.

use super::Context;
use crate::error::OpsResult;
use crate::output::{self, emit, Output};
use anyhow::{Context as _, Result};
use tapeloom_engine::{escape_controls, Home};
use tapeloom_ops::pools::{self, Pool, PoolKey, PoolOut, Pools};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// Create a pool, optionally with blank cartridges assigned to it (only its jobs
    /// then label them).
    Create(CreateArgs),
    /// Every pool: its rules, its cartridges, the bytes and jobs on them.
    List,
}

#[derive(clap::Args)]
pub struct CreateArgs {
    /// The pool's name: 1 to 32 letters, digits, '.', '_' or '-'.
    name: String,
    /// How long its jobs are kept (for example 30d or 2w; units s, m, h, d, w).
    /// Default: forever. `tapeloom expire` expires cartridges whose jobs all outlived it.
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse)]
    retention: Option<std::time::Duration>,
    /// Cartridges (barcodes) only this pool's jobs may label.
    #[arg(long, value_name = "BARCODE", num_args = 1..)]
    cartridges: Vec<String>,
    /// At most this many jobs on one volume; a later job takes another cartridge.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=i64::MAX as u64))]
    max_jobs_per_volume: Option<u64>,
    /// Whether later jobs may append to a volume (false: each volume holds only
    /// the job that labelled it).
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    append: bool,
    /// Write once: its volumes are never to be overwritten (kept for later use).
    #[arg(long)]
    worm: bool,
    /// Key file (`tapeloom key create`) that encrypts the pool's jobs which name no
    /// other with --encrypt. Its passphrase is asked at each backup.
    #[arg(long, value_name = "FILE")]
    key: Option<std::path::PathBuf>,
    /// Another pool every job of this one is copied to once it ends
    /// (`tapeloom copy`, on a second drive when there is one).
    #[arg(long, value_name = "POOL")]
    copy_to: Option<String>,
    /// A cartridge of the pool is reclaimed by `tapeloom repack --pool` once at
    /// least this share of what was written to it belongs to expired jobs
    /// (for example 60%).
    #[arg(long, value_name = "PERCENT", value_parser = parse_percent)]
    reclaim: Option<u32>,
}

/// A share in percent, from 1% to 100%: `60%` or `60`.
fn parse_percent(s: &str) -> std::result::Result<u32, String> {
    let n = s.strip_suffix('%').unwrap_or(s);
    match n.parse::<u32>() {
        Ok(n) if (1..=100).contains(&n) => Ok(n),
        _ => Err(format!("not a share from 1% to 100%: '{s}'")),
    }
}

impl Args {
    /// Runs the subcommand and prints its output.
    pub fn run(self, ctx: &Context) -> Result<i32> {
        let home = ctx.open_home()?;
        match self.cmd {
            Cmd::Create(a) => emit(&create(a, &home)?, ctx.json),
            Cmd::List => emit(&pools::list(&home).ops()?, ctx.json),
        }
    }
}

fn create(a: CreateArgs, home: &Home) -> Result<PoolOut> {
    // The key file is read (not unlocked) first: a wrong path creates no pool.
    let key = match &a.key {
        Some(f) => {
            let kf = tapeloom_engine::read_key_file(f)?;
            let path = std::path::absolute(f)
                .with_context(|| format!("resolve key file {}", f.display()))?;
            Some(PoolKey {
                key_file: path.to_string_lossy().into_owned(),
                fingerprint: kf.fingerprint.to_string(),
            })
        }
        None => None,
    };
    let new = pools::NewPool {
        pool: Pool {
            name: a.name,
            retention_s: a.retention.map(|d| d.as_secs()),
            max_jobs_per_volume: a.max_jobs_per_volume,
            append: a.append,
            worm: a.worm,
            created_ns: 0,
        },
        cartridges: a.cartridges,
        key,
        copy_to: a.copy_to,
        reclaim: a.reclaim,
    };
    let pool = pools::create(home, new).ops()?;
    pools::show(home, &pool).ops()
}

/// A pool's rules, on lines of their own.
fn print_rules(p: &PoolOut) {
    let retention = p.retention_s.map_or("forever".to_string(), duration);
    let max = p
        .max_jobs_per_volume
        .map_or("no limit".to_string(), |n| n.to_string());
    outln!(
            "pool {}: retention {retention}, jobs per volume {max}, append {}{}; {} cartridges, {}, {} jobs",
            escape_controls(&p.name),
            p.append,
            if p.worm { ", WORM" } else { "" },
            p.cartridges.len(),
            output::bytes(p.bytes_used),
            p.jobs
        );
    if let Some(c) = &p.copy_to {
        outln!("  jobs copied to pool {}", escape_controls(c));
    }
    if let Some(n) = p.reclaim_percent {
        outln!("  a cartridge is reclaimed (`repack --pool`) at {n}% expired");
    }
    if let Some(k) = &p.key {
        outln!(
            "  jobs encrypted with key {} ({})",
            k.fingerprint,
            escape_controls(&k.file)
        );
    }
}

/// Seconds in the largest unit of the duration syntax that divides them: `4w`,
/// `30d`, `90s`.
fn duration(secs: u64) -> String {
    let units = [(604_800, 'w'), (86_400, 'd'), (3_600, 'h'), (60, 'm')];
    match units
        .iter()
        .find(|(n, _)| secs > 0 && secs.is_multiple_of(*n))
    {
        Some((n, u)) => format!("{}{u}", secs / n),
        None => format!("{secs}s"),
    }
}

impl Output for PoolOut {
    fn print(&self) {
        print_rules(self);
    }
}

impl Output for Pools {
    fn print(&self) {
        for p in &self.pools {
            print_rules(p);
            for c in &p.cartridges {
                let used = c.bytes_used.map_or("?".to_string(), output::bytes);
                let expires = c
                    .expires
                    .as_deref()
                    .map(|t| format!(", expires {t}"))
                    .unwrap_or_default();
                outln!(
                    "  {} {:<8} {:>12} {} jobs{expires}",
                    escape_controls(&c.barcode),
                    c.state,
                    used,
                    c.jobs
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn retention_is_shown_in_its_largest_unit() {
        let d = super::duration;
        assert_eq!(
            (d(28 * 86_400), d(30 * 86_400), d(7_200)),
            ("4w".into(), "30d".into(), "2h".into())
        );
        assert_eq!(
            (d(120), d(90), d(0)),
            ("2m".into(), "90s".into(), "0s".into())
        );
    }
}
