//! The memory-to-drive benchmark: blocks of patterned or random data from memory to a
//! drive, for each block size, as the OpenBench Labs tape benchmark does.

use crate::error::{Result, ToolError};
use crate::pattern::{fill, Noise, Pattern};
use tapeloom_device::lto::{generation, Clock, LtoDrive, LtoParams};
use tapeloom_device::{NullDrive, TapeDrive};
use tapeloom_engine::{Home, Library, MediaError};

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

/// A blank cartridge the catalog does not know: where the library cannot tell
/// without loading (real devices), the label block says.
fn blank_cartridge(home: &Home, lib: &mut Library, drive: usize) -> Result<String> {
    let known: Vec<String> = home
        .catalog
        .volumes()?
        .into_iter()
        .map(|v| v.barcode)
        .collect();
    for b in lib.inventory()?.barcodes() {
        if known.contains(&b) || lib.is_write_protected(&b) {
            continue;
        }
        if tapeloom_engine::is_blank(lib, &b, drive)? {
            return Ok(b);
        }
    }
    Err(tapeloom_engine::Error::from(MediaError::NoBlank).into())
}

/// The parameters of a model by name, scaled.
pub fn model_params(name: &str, scale: f64) -> Result<LtoParams> {
    let p = generation(name).ok_or_else(|| ToolError::NoModel {
        name: name.to_string(),
    })?;
    if !(scale > 0.0 && scale.is_finite()) {
        return Err(ToolError::Scale { scale }.into());
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
            return Err(ToolError::BlockSize { size: bs as u64 }.into());
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
        let s = d.stats().ok_or(ToolError::NoStatistics)?;
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

/// What `bench locate` measures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LocateHow {
    /// High-speed locate to a logical position (the drive's tape directory).
    Locate,
    /// Read everything in between.
    ReadThrough,
    /// Space forward file by file over files of this size, as `mt fsf` does.
    SpaceFiles(u64),
}

/// Result of `bench locate`.
#[derive(Debug, Clone)]
pub struct LocateResult {
    /// Modeled seconds to get from `from` to `to`.
    pub modeled_seconds: f64,
    /// Bytes passed per modeled second, MB/s.
    pub equivalent_mb_per_s: f64,
    /// Wraps of the start and the end.
    pub wraps: (u32, u32),
    /// Metres from the beginning of tape of the start and the end.
    pub metres: (f64, f64),
}

/// Models positioning on a full cartridge from byte offset `from` to `to` of its data.
pub fn bench_locate(model: &str, from: u64, to: u64, how: LocateHow) -> Result<LocateResult> {
    let params = model_params(model, 1.0)?;
    if from.max(to) as f64 > params.capacity_bytes {
        return Err(ToolError::BeyondCartridge {
            offset: from.max(to),
            capacity_gb: params.capacity_bytes / 1e9,
            model: model.to_string(),
        }
        .into());
    }
    let m = tapeloom_device::lto::TapeModel::new(params.clone());
    let (a, b) = (from as f64, to as f64);
    let span = (b - a).abs();
    let secs = match how {
        LocateHow::Locate => m.locate_seconds(a, b),
        LocateHow::ReadThrough => {
            if b < a {
                return Err(ToolError::ReadBackwards.into());
            }
            span / params.native()
        }
        LocateHow::SpaceFiles(size) => {
            if b < a || size == 0 {
                return Err(ToolError::SpaceBackwards.into());
            }
            // Each SPACE command finds the next filemark by reading the file at
            // streaming speed, then stops: a command and a backhitch per file.
            let files = (span / size as f64).ceil();
            span / params.native() + files * (params.command_s + params.backhitch_s / 4.0)
        }
    };
    let (ma, wa) = m.geometry(a);
    let (mb, wb) = m.geometry(b);
    Ok(LocateResult {
        modeled_seconds: secs,
        equivalent_mb_per_s: if secs > 0.0 { span / secs / 1e6 } else { 0.0 },
        wraps: (wa, wb),
        metres: (ma, mb),
    })
}

/// Runs the benchmark on drive `drive` of the home's library, on a blank cartridge
/// that is erased again afterwards. Rates are modeled when the library has a drive
/// model, and measured on the wall clock otherwise.
pub fn bench_library_drive(
    home: &Home,
    drive: usize,
    opts: &DriveBenchOptions,
) -> Result<(String, Vec<DriveBenchRow>)> {
    if opts.source_rate.is_some() {
        return Err(ToolError::SourceRateOnLibrary.into());
    }
    let mut lib = home.library()?;
    let barcode = blank_cartridge(home, &mut lib, drive)?;
    let model = lib.model().unwrap_or_else(|| "none".into());
    let capacity = lib.capacity().unwrap_or(u64::MAX);
    let pool_len = 64 << 20;
    let mut pool = vec![0u8; pool_len];
    fill(opts.pattern, &mut Noise::new(42), &mut pool);
    let mut rows = Vec::new();
    let size = opts.size.min(capacity / 10 * 9);
    let result = (|| -> Result<()> {
        for &bs in &opts.block_sizes {
            if bs == 0 || bs > 8 << 20 {
                return Err(ToolError::BlockSize { size: bs as u64 }.into());
            }
            let (_, mut d) = tapeloom_engine::mount(&mut lib, &barcode, Some(drive))?;
            d.rewind()?;
            // Time from the first block on: loading and rewinding are not the rate.
            let start = d.stats().unwrap_or_default();
            let wall = std::time::Instant::now();
            let blocks = size.div_ceil(bs as u64).max(1);
            let mut at = 0usize;
            let mut host = 0u64;
            for _ in 0..blocks {
                if at + bs > pool_len {
                    at = 0;
                }
                d.write_block(&pool[at..at + bs])?;
                host += bs as u64;
                at += bs;
            }
            d.write_filemarks(1, false)?;
            let wall_s = wall.elapsed().as_secs_f64();
            let row = match d.stats() {
                Some(s) => {
                    let secs = (s.modeled_seconds - start.modeled_seconds).max(1e-12);
                    let host = s.host_bytes - start.host_bytes;
                    let tape = s.tape_bytes - start.tape_bytes;
                    DriveBenchRow {
                        pattern: opts.pattern.to_string(),
                        block_size: bs,
                        compression: true,
                        host_mb_per_s: host as f64 / secs / 1e6,
                        tape_mb_per_s: tape as f64 / secs / 1e6,
                        compression_ratio: host as f64 / tape.max(1) as f64,
                        backhitches: (s.backhitches - start.backhitches).saturating_sub(1),
                        modeled_seconds: secs,
                        wall_seconds: wall_s,
                    }
                }
                None => DriveBenchRow {
                    pattern: opts.pattern.to_string(),
                    block_size: bs,
                    compression: false,
                    host_mb_per_s: host as f64 / wall_s.max(1e-12) / 1e6,
                    tape_mb_per_s: host as f64 / wall_s.max(1e-12) / 1e6,
                    compression_ratio: 1.0,
                    backhitches: 0,
                    modeled_seconds: wall_s,
                    wall_seconds: wall_s,
                },
            };
            rows.push(row);
            drop(d);
            // A virtual cartridge gives its space back at once; a real one is
            // written over from the beginning by the next block size.
            if lib.cartridge_bytes(&barcode).is_some() {
                lib.erase(&barcode)?;
            }
        }
        Ok(())
    })();
    // Leave the cartridge blank and back in its slot whatever happened. A drive
    // that cannot erase (tgt has no ERASE) gets a fresh tapeloom label instead, so
    // the cartridge is not left holding foreign data.
    let erased = lib.erase(&barcode).is_ok();
    if let Ok(inv) = lib.inventory() {
        if let Some(d) = inv.drive_of(&barcode) {
            let _ = lib.unload(d, None);
        }
    }
    if !erased {
        drop(lib);
        tapeloom_engine::label(
            home,
            &barcode,
            "default",
            tapeloom_format::DEFAULT_BLOCK_SIZE as u32,
            true,
        )?;
        tapeloom_engine::unload_drives(home, None)?;
    }
    result?;
    Ok((model, rows))
}
