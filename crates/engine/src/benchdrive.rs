//! The memory-to-drive benchmark: blocks of patterned or random data from memory to a
//! drive, for each block size, as the OpenBench Labs tape benchmark does.

use crate::error::{Error, Result};
use crate::pattern::{fill, Noise, Pattern};
use tapeloom_device::lto::{generation, Clock, LtoDrive, LtoParams};
use tapeloom_device::{NullDrive, TapeDrive};

/// One benchmark setting.
#[derive(Debug, Clone)]
pub struct DriveBenchOptions {
    /// The LTO generation to model.
    pub model: String,
    /// Virtual or real clock.
    pub clock: Clock,
    /// Rates and buffers multiplied by this (real clock experiments).
    pub scale: f64,
    /// Data pattern.
    pub pattern: Pattern,
    /// Block sizes in bytes.
    pub block_sizes: Vec<usize>,
    /// Drive compression.
    pub compression: bool,
    /// Bytes per block size.
    pub size: u64,
    /// Host rate in bytes/s, when the host is slower than the drive.
    pub source_rate: Option<f64>,
}

/// One result row.
#[derive(Debug, Clone)]
pub struct DriveBenchRow {
    /// Data pattern.
    pub pattern: String,
    /// Block size, bytes.
    pub block_size: usize,
    /// Drive compression on.
    pub compression: bool,
    /// Host bytes per modeled second, MB/s.
    pub host_mb_per_s: f64,
    /// Tape bytes per modeled second, MB/s.
    pub tape_mb_per_s: f64,
    /// Host bytes per tape byte.
    pub compression_ratio: f64,
    /// Times the tape ran dry while the data was flowing.
    pub backhitches: u64,
    /// Modeled seconds from the first block until everything is on tape.
    pub modeled_seconds: f64,
    /// Wall-clock seconds the run took.
    pub wall_seconds: f64,
}

/// The parameters of a model by name, scaled.
pub fn model_params(name: &str, scale: f64) -> Result<LtoParams> {
    let p = generation(name)
        .ok_or_else(|| Error::Msg(format!("no drive model '{name}' (try lto1 .. lto10)")))?;
    if !(scale > 0.0 && scale.is_finite()) {
        return Err(Error::Msg(format!(
            "scale {scale} must be a positive number"
        )));
    }
    Ok(if scale == 1.0 { p } else { p.scaled(scale) })
}

/// Runs the benchmark on a fresh modeled drive with a null store.
pub fn bench_drive(opts: &DriveBenchOptions) -> Result<Vec<DriveBenchRow>> {
    let params = model_params(&opts.model, opts.scale)?;
    // One pool of data, cycled through; large enough that no two blocks of a run
    // share a compressor's history.
    let pool_len = 64 << 20;
    let mut pool = vec![0u8; pool_len];
    fill(opts.pattern, &mut Noise::new(42), &mut pool);
    let mut rows = Vec::new();
    for &bs in &opts.block_sizes {
        if bs == 0 || bs > 8 << 20 {
            return Err(Error::Msg(format!(
                "block size {bs} is out of range (1 byte to 8 MiB)"
            )));
        }
        let wall = std::time::Instant::now();
        let mut d = LtoDrive::new(
            NullDrive::new(u64::MAX, 0),
            params.clone(),
            opts.clock,
            opts.compression,
        );
        let blocks = opts.size.div_ceil(bs as u64).max(1);
        let mut at = 0usize;
        for i in 0..blocks {
            if let Some(rate) = opts.source_rate {
                d.offer_at(i as f64 * bs as f64 / rate);
            }
            if at + bs > pool_len {
                at = 0;
            }
            d.write_block(&pool[at..at + bs])?;
            at += bs;
        }
        // The run ends when everything is on tape, as a benchmark's closing
        // filemark makes sure.
        let before_flush = d.stats().map(|s| s.backhitches).unwrap_or(0);
        d.write_filemarks(1, false)?;
        let s = d
            .stats()
            .ok_or_else(|| Error::Msg("the modeled drive kept no statistics".into()))?;
        let secs = s.modeled_seconds.max(1e-12);
        rows.push(DriveBenchRow {
            pattern: opts.pattern.to_string(),
            block_size: bs,
            compression: opts.compression,
            host_mb_per_s: s.host_bytes as f64 / secs / 1e6,
            tape_mb_per_s: s.tape_bytes as f64 / secs / 1e6,
            compression_ratio: s.compression_ratio(),
            backhitches: before_flush,
            modeled_seconds: secs,
            wall_seconds: wall.elapsed().as_secs_f64(),
        });
    }
    Ok(rows)
}
