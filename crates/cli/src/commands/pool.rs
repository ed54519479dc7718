//! `tapeloom pool ...`: media pools, the sets of cartridges backups write to
//! (`backup --pool NAME`), each with its own rules.

use super::Context;
use crate::output::{self, emit, Output};
use anyhow::{Context as _, Result};
use serde::Serialize;
use std::collections::HashMap;
use tapeloom_catalog::Pool;
use tapeloom_device::TapeLibrary;
use tapeloom_engine::{escape_controls, Home};

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
            Cmd::List => emit(&list(&home)?, ctx.json),
        }
    }
}

/// A pool as `pool create` and `pool list` show it.
#[derive(Serialize)]
pub struct PoolOut {
    name: String,
    retention_s: Option<u64>,
    max_jobs_per_volume: Option<u64>,
    append: bool,
    worm: bool,
    cartridges: Vec<CartridgeOut>,
    bytes_used: u64,
    jobs: u64,
    /// The key file that encrypts its jobs, if it has one.
    key: Option<PoolKeyOut>,
    /// The pool its jobs are copied to once they end, if any.
    copy_to: Option<String>,
    /// The share of expired data (percent) from which `repack --pool` reclaims
    /// one of its cartridges, if any.
    reclaim_percent: Option<u32>,
}

/// A pool's key file.
#[derive(Serialize)]
struct PoolKeyOut {
    file: String,
    fingerprint: String,
}

/// A cartridge of a pool: labelled into it, or assigned to it and still blank.
#[derive(Serialize)]
struct CartridgeOut {
    barcode: String,
    /// `labelled` or `assigned`.
    state: String,
    /// Bytes on it, where the library knows without loading it.
    bytes_used: Option<u64>,
    jobs: u64,
    /// When it expires (RFC 3339, as `jobs` prints times): when every job on it
    /// is past the pool's retention; null for never (no retention, WORM, no job
    /// yet, suspect, or expired already).
    expires: Option<String>,
}

fn create(a: CreateArgs, home: &Home) -> Result<PoolOut> {
    // The key file is read (not unlocked) first: a wrong path creates no pool.
    let key = match &a.key {
        Some(f) => {
            let kf = tapeloom_engine::read_key_file(f)?;
            let path = std::path::absolute(f)
                .with_context(|| format!("resolve key file {}", f.display()))?;
            Some(tapeloom_catalog::PoolKey {
                key_file: path.to_string_lossy().into_owned(),
                fingerprint: kf.fingerprint.to_string(),
            })
        }
        None => None,
    };
    let new = tapeloom_ops::pools::NewPool {
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
    let pool = tapeloom_ops::pools::create(home, new).map_err(crate::error::ops)?;
    describe(home, &*home.library()?, &HashMap::new(), &pool)
}

/// Every pool, by name.
#[derive(Serialize)]
pub struct Pools {
    pools: Vec<PoolOut>,
}

fn list(home: &Home) -> Result<Pools> {
    let lib = home.library()?;
    let expiries = tapeloom_engine::expiries(home)?;
    let pools = home
        .catalog
        .pools()?
        .iter()
        .map(|p| describe(home, &*lib, &expiries, p))
        .collect::<Result<_>>()?;
    Ok(Pools { pools })
}

/// A pool with its cartridges: its labelled volumes, then the barcodes assigned to
/// it and not labelled yet.
fn describe(
    home: &Home,
    lib: &dyn TapeLibrary,
    expiries: &HashMap<String, i64>,
    p: &Pool,
) -> Result<PoolOut> {
    let mut cartridges = Vec::new();
    for v in home.catalog.volumes()?.iter().filter(|v| v.pool == p.name) {
        cartridges.push(CartridgeOut {
            barcode: v.barcode.clone(),
            state: "labelled".into(),
            bytes_used: lib.cartridge_bytes(&v.barcode),
            jobs: home.catalog.jobs_on_volume(v.id)?,
            expires: expiries.get(&v.barcode).map(|t| output::time(*t)),
        });
    }
    for b in home.catalog.assigned_cartridges(&p.name)? {
        if !cartridges.iter().any(|c| c.barcode == b) {
            cartridges.push(CartridgeOut {
                bytes_used: lib.cartridge_bytes(&b),
                barcode: b,
                state: "assigned".into(),
                jobs: 0,
                expires: None,
            });
        }
    }
    Ok(PoolOut {
        key: home.catalog.pool_key(&p.name)?.map(|k| PoolKeyOut {
            file: k.key_file,
            fingerprint: k.fingerprint,
        }),
        copy_to: home.catalog.pool_copy(&p.name)?,
        reclaim_percent: home.catalog.pool_reclaim(&p.name)?,
        name: p.name.clone(),
        retention_s: p.retention_s,
        max_jobs_per_volume: p.max_jobs_per_volume,
        append: p.append,
        worm: p.worm,
        bytes_used: cartridges.iter().filter_map(|c| c.bytes_used).sum(),
        jobs: home.catalog.jobs_in_pool(&p.name)?,
        cartridges,
    })
}

impl PoolOut {
    fn print_rules(&self) {
        let retention = self.retention_s.map_or("forever".to_string(), duration);
        let max = self
            .max_jobs_per_volume
            .map_or("no limit".to_string(), |n| n.to_string());
        outln!(
            "pool {}: retention {retention}, jobs per volume {max}, append {}{}; {} cartridges, {}, {} jobs",
            escape_controls(&self.name),
            self.append,
            if self.worm { ", WORM" } else { "" },
            self.cartridges.len(),
            output::bytes(self.bytes_used),
            self.jobs
        );
        if let Some(c) = &self.copy_to {
            outln!("  jobs copied to pool {}", escape_controls(c));
        }
        if let Some(n) = self.reclaim_percent {
            outln!("  a cartridge is reclaimed (`repack --pool`) at {n}% expired");
        }
        if let Some(k) = &self.key {
            outln!(
                "  jobs encrypted with key {} ({})",
                k.fingerprint,
                escape_controls(&k.file)
            );
        }
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
        self.print_rules();
    }
}

impl Output for Pools {
    fn print(&self) {
        for p in &self.pools {
            p.print_rules();
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
