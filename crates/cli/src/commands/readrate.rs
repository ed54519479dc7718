//! `tapeloom readrate DIR...`: read folders as a backup would and judge the rate
//! against a drive.

use crate::output::{Output, PathError};
use anyhow::Result;
use serde::Serialize;
use std::path::PathBuf;
use tapeloom_tools::benchdrive::model_params;
use tapeloom_tools::readrate::{read_rate, ReadRateOptions, StreamRate};

#[derive(clap::Args)]
pub struct Args {
    /// Folders, each read as one stream.
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
    /// Reader threads per folder (1 to 1024).
    #[arg(long, default_value_t = 1, value_parser = super::usize_in(1..=1024))]
    threads_per_source: usize,
    /// Bypass the page cache (O_DIRECT) where the file system allows it.
    #[arg(long)]
    direct: bool,
    /// The drive to judge against.
    #[arg(long, default_value = "lto9")]
    model: String,
}

/// Each folder's rate, the total, and the verdict.
#[derive(Serialize)]
pub struct ReadRate {
    streams: Vec<Stream>,
    total_bytes: u64,
    seconds: f64,
    total_mb_per_s: f64,
    model: String,
    drive_min_mb_per_s: f64,
    drive_native_mb_per_s: f64,
    verdict: String,
}

/// One folder read.
#[derive(Serialize)]
struct Stream {
    path: PathBuf,
    bytes: u64,
    files: u64,
    seconds: f64,
    mb_per_s: f64,
    files_per_s: f64,
    direct: bool,
    errors: Vec<PathError>,
}

impl From<StreamRate> for Stream {
    fn from(s: StreamRate) -> Self {
        Stream {
            errors: PathError::list(&s.errors),
            path: s.path,
            bytes: s.bytes,
            files: s.files,
            seconds: s.seconds,
            mb_per_s: s.mb_per_s,
            files_per_s: s.files_per_s,
            direct: s.direct,
        }
    }
}

pub fn run(a: Args) -> Result<ReadRate> {
    let params = model_params(&a.model, 1.0)?;
    let opts = ReadRateOptions {
        threads_per_source: a.threads_per_source,
        direct: a.direct,
    };
    let r = read_rate(&a.dirs, &opts)?;
    let (lowest, native, model) = (params.min_mb_s, params.native_mb_s, &a.model);
    let total = r.total_mb_per_s;
    // The drive compresses too: judge the host rate against the tape's range at 1:1,
    // the worst case (incompressible data).
    let verdict = if total >= native {
        format!("streams: {total:.1} MB/s keeps {model} at full speed ({native} MB/s)")
    } else if total >= lowest {
        format!(
            "streams: {total:.1} MB/s is within {model}'s speed matching ({lowest}-{native} MB/s); the drive slows to match"
        )
    } else {
        format!(
            "stalls: {total:.1} MB/s is below {model}'s lowest speed ({lowest} MB/s); the drive will stop and start (add sources, stage to disk, or interleave)"
        )
    };
    Ok(ReadRate {
        streams: r.streams.into_iter().map(Stream::from).collect(),
        total_bytes: r.total_bytes,
        seconds: r.seconds,
        total_mb_per_s: total,
        model: a.model,
        drive_min_mb_per_s: lowest,
        drive_native_mb_per_s: native,
        verdict,
    })
}

impl Output for ReadRate {
    fn print(&self) {
        for s in &self.streams {
            outln!(
                "{}: {} files, {} bytes, {:.1} MB/s, {:.0} files/s{}",
                s.path.display(),
                s.files,
                s.bytes,
                s.mb_per_s,
                s.files_per_s,
                if s.errors.is_empty() {
                    String::new()
                } else {
                    format!(", {} unreadable", s.errors.len())
                }
            );
        }
        outln!("total {:.1} MB/s: {}", self.total_mb_per_s, self.verdict);
    }
}
