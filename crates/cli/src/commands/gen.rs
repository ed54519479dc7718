//! `tapeloom gen DIR`: a deterministic test tree.

use crate::output::Output;
use crate::size;
use anyhow::Result;
use serde::Serialize;
use std::path::PathBuf;
use tapeloom_tools::gen::{generate, GenOptions};
use tapeloom_tools::pattern::MAX_RATIO;

#[derive(clap::Args)]
pub struct Args {
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
    /// Files in each folder (from 1).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    files_per_dir: Option<u32>,
    /// Smallest file size (a power of two).
    #[arg(long, value_parser = size::within(1, size::MAX))]
    min: Option<u64>,
    /// Largest file size (a power of two).
    #[arg(long, value_parser = size::within(1, size::MAX))]
    max: Option<u64>,
    /// Compressibility of the data, from 1 to 100 (2 = compresses about 2:1; 1 =
    /// random).
    #[arg(long, value_parser = parse_ratio)]
    ratio: Option<f64>,
    /// Stop at about this much data: whole rounds of size classes; below one round,
    /// the classes that fit, to within one smallest file (the JSON says how far short).
    #[arg(long, value_parser = size::within(1, size::MAX))]
    total: Option<u64>,
}

/// `--ratio`: a compressibility the data pattern can make, 1 to 100.
fn parse_ratio(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if (1.0..=MAX_RATIO).contains(&r) => Ok(r),
        _ => Err(format!(
            "--ratio takes a number from 1 to {MAX_RATIO}, not '{s}'"
        )),
    }
}

impl Args {
    /// The preset with the flags given over it.
    fn options(&self) -> Result<GenOptions> {
        let mut o = GenOptions::preset(self.preset.as_deref().unwrap_or("hp-typical"))?;
        o.seed = self.seed.unwrap_or(o.seed);
        o.depth = self.depth.unwrap_or(o.depth);
        o.breadth = self.breadth.unwrap_or(o.breadth);
        o.files_per_dir = self.files_per_dir.unwrap_or(o.files_per_dir);
        o.min = self.min.unwrap_or(o.min);
        o.max = self.max.unwrap_or(o.max);
        o.ratio = self.ratio.unwrap_or(o.ratio);
        o.total = self.total.or(o.total);
        Ok(o)
    }
}

/// The tree made.
#[derive(Serialize)]
pub struct Generated {
    dir: PathBuf,
    files: u64,
    bytes: u64,
    dirs: u64,
    seed: u64,
    ratio: f64,
    /// The total asked for (`--total`), if any.
    requested_bytes: Option<u64>,
    /// How far below that total the tree stayed.
    shortfall_bytes: Option<u64>,
    classes: Vec<Class>,
}

/// Files of one size.
#[derive(Serialize)]
struct Class {
    size: u64,
    files: u64,
}

pub fn run(a: Args) -> Result<Generated> {
    let o = a.options()?;
    let r = generate(&a.dir, &o)?;
    Ok(Generated {
        dir: a.dir,
        files: r.files,
        bytes: r.bytes,
        dirs: r.dirs,
        seed: o.seed,
        ratio: o.ratio,
        requested_bytes: r.requested_bytes,
        shortfall_bytes: r.shortfall_bytes,
        classes: (r.classes.iter())
            .map(|c| Class {
                size: c.size,
                files: c.files,
            })
            .collect(),
    })
}

impl Output for Generated {
    fn print(&self) {
        outln!(
            "{}: {} files in {} folders, {} bytes",
            self.dir.display(),
            self.files,
            self.dirs,
            self.bytes
        );
        if let (Some(want), Some(short)) = (self.requested_bytes, self.shortfall_bytes) {
            if short > 0 {
                outln!("{short} bytes short of the {want} bytes asked for (the size classes allow no closer)");
            }
        }
        for c in &self.classes {
            outln!("{:>12} bytes: {} files", c.size, c.files);
        }
    }
}
