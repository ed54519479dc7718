//! `bench drive` and `drive models`.

use anyhow::Result;
use serde_json::{json, Value};
use tapeloom_device::lto::{generations, Clock};
use tapeloom_engine::tools::benchdrive::{bench_drive, bench_locate, DriveBenchOptions, LocateHow};
use tapeloom_engine::tools::pattern::Pattern;

#[allow(clippy::too_many_arguments)]
pub fn drive(
    human: bool,
    model: String,
    pattern: Pattern,
    block_sizes: Vec<u64>,
    compression: bool,
    size: u64,
    source_rate: Option<u64>,
    real: bool,
    scale: f64,
) -> Result<(Value, i32)> {
    let block_sizes = sizes(block_sizes);
    let clock = if real { Clock::Real } else { Clock::Virtual };
    let opts = DriveBenchOptions {
        model: model.clone(),
        clock,
        scale,
        pattern,
        block_sizes,
        compression,
        size,
        source_rate: source_rate.map(|r| r as f64),
    };
    let rows = bench_drive(&opts)?;
    Ok(report(
        human,
        &model,
        real,
        scale,
        pattern,
        compression,
        size,
        source_rate,
        &rows,
    ))
}

#[allow(clippy::too_many_arguments)]
pub fn library_drive(
    home: &tapeloom_engine::Home,
    human: bool,
    drive: usize,
    pattern: Pattern,
    block_sizes: Vec<u64>,
    size: u64,
    source_rate: Option<u64>,
) -> Result<(Value, i32)> {
    let opts = DriveBenchOptions {
        model: String::new(),
        clock: Clock::Virtual,
        scale: 1.0,
        pattern,
        block_sizes: sizes(block_sizes),
        compression: true,
        size,
        source_rate: source_rate.map(|r| r as f64),
    };
    let (model, rows) =
        tapeloom_engine::tools::benchdrive::bench_library_drive(home, drive, &opts)?;
    let (mut v, code) = report(
        human,
        &model,
        false,
        1.0,
        pattern,
        true,
        size,
        source_rate,
        &rows,
    );
    v["drive"] = json!(drive);
    if model == "none" {
        v["clock"] = json!("wall");
    }
    Ok((v, code))
}

fn sizes(block_sizes: Vec<u64>) -> Vec<usize> {
    if block_sizes.is_empty() {
        (0..=8).map(|n| 1024usize << n).collect()
    } else {
        block_sizes.into_iter().map(|b| b as usize).collect()
    }
}

#[allow(clippy::too_many_arguments)]
fn report(
    human: bool,
    model: &str,
    real: bool,
    scale: f64,
    pattern: Pattern,
    compression: bool,
    size: u64,
    source_rate: Option<u64>,
    rows: &[tapeloom_engine::tools::benchdrive::DriveBenchRow],
) -> (Value, i32) {
    if human {
        println!(
            "{model} ({} clock{}), {pattern}, compression {}",
            if real { "real" } else { "virtual" },
            if scale != 1.0 {
                format!(", scale {scale}")
            } else {
                String::new()
            },
            if compression { "on" } else { "off" }
        );
        println!(
            "{:>10} {:>10} {:>10} {:>6} {:>11} {:>10}",
            "block", "host MB/s", "tape MB/s", "ratio", "backhitches", "seconds"
        );
        for r in rows {
            println!(
                "{:>10} {:>10.1} {:>10.1} {:>6.2} {:>11} {:>10.1}",
                r.block_size,
                r.host_mb_per_s,
                r.tape_mb_per_s,
                r.compression_ratio,
                r.backhitches,
                r.modeled_seconds
            );
        }
    }
    (
        json!({
            "model": model,
            "clock": if real { "real" } else { "virtual" },
            "scale": scale,
            "size": size,
            "source_rate": source_rate,
            "rows": rows.iter().map(|r| json!({
                "pattern": r.pattern, "block_size": r.block_size, "compression": r.compression,
                "host_mb_per_s": r.host_mb_per_s, "tape_mb_per_s": r.tape_mb_per_s,
                "compression_ratio": r.compression_ratio, "backhitches": r.backhitches,
                "modeled_seconds": r.modeled_seconds, "wall_seconds": r.wall_seconds,
            })).collect::<Vec<_>>(),
        }),
        0,
    )
}

pub fn models(human: bool) -> Result<(Value, i32)> {
    let gens = generations();
    if human {
        println!(
            "{:<6} {:>7} {:>13} {:>6} {:>8} {:>9} {:>8} {:>9} {:>6} {:>6} {:>9}",
            "model",
            "native",
            "speed steps",
            "buffer",
            "iface",
            "capacity",
            "cmd µs",
            "backhitch",
            "tape m",
            "wraps",
            "locate m/s"
        );
        for g in &gens {
            println!(
                "{:<6} {:>7} {:>5}-{:<4}x{:<2} {:>5}M {:>8} {:>8}G {:>8.0} {:>9} {:>6} {:>6} {:>9}",
                g.name,
                g.native_mb_s,
                g.min_mb_s,
                g.native_mb_s,
                g.steps,
                g.buffer_bytes / 1048576.0,
                g.interface_mb_s,
                g.capacity_bytes / 1e9,
                g.command_s * 1e6,
                g.backhitch_s,
                g.tape_m,
                g.wraps,
                g.locate_m_s
            );
        }
    }
    Ok((
        json!({ "models": gens.iter().map(|g| json!({
            "name": g.name, "native_mb_per_s": g.native_mb_s, "min_speed_mb_per_s": g.min_mb_s,
            "speed_steps_mb_per_s": g.speed_steps().iter().map(|s| s / 1e6).collect::<Vec<_>>(),
            "buffer_bytes": g.buffer_bytes, "interface_mb_per_s": g.interface_mb_s,
            "command_seconds": g.command_s, "capacity_bytes": g.capacity_bytes,
            "max_compression": g.max_compression, "backhitch_seconds": g.backhitch_s,
            "restart_fill": g.restart_fill, "filemark_immediate_seconds": g.filemark_immediate_s,
            "load_seconds": g.load_s, "unload_seconds": g.unload_s,
            "first_load_calibration_seconds": g.first_load_calibration_s,
            "tape_m": g.tape_m, "wraps": g.wraps, "locate_m_per_s": g.locate_m_s,
            "wrap_change_seconds": g.wrap_change_s, "locate_overhead_seconds": g.locate_overhead_s,
        })).collect::<Vec<_>>() }),
        0,
    ))
}

pub fn locate(
    human: bool,
    model: &str,
    from: u64,
    to: u64,
    how: LocateHow,
) -> Result<(Value, i32)> {
    let r = bench_locate(model, from, to, how)?;
    let what = match how {
        LocateHow::Locate => "locate".to_string(),
        LocateHow::ReadThrough => "read-through".to_string(),
        LocateHow::SpaceFiles(s) => format!("space over files of {s} bytes"),
    };
    if human {
        println!(
            "{model}: {what} from {from} to {to}: {:.1} s modeled, equivalent {:.1} MB/s (wrap {} at {:.0} m to wrap {} at {:.0} m)",
            r.modeled_seconds, r.equivalent_mb_per_s, r.wraps.0, r.metres.0, r.wraps.1, r.metres.1
        );
    }
    Ok((
        json!({
            "model": model, "how": what, "from": from, "to": to,
            "modeled_seconds": r.modeled_seconds, "equivalent_mb_per_s": r.equivalent_mb_per_s,
            "from_wrap": r.wraps.0, "to_wrap": r.wraps.1, "from_metres": r.metres.0, "to_metres": r.metres.1,
        }),
        0,
    ))
}

pub fn gen(
    human: bool,
    dir: &std::path::Path,
    o: &tapeloom_engine::tools::gen::GenOptions,
) -> Result<(Value, i32)> {
    let r = tapeloom_engine::tools::gen::generate(dir, o)?;
    if human {
        println!(
            "{}: {} files in {} folders, {} bytes",
            dir.display(),
            r.files,
            r.dirs,
            r.bytes
        );
        for c in &r.classes {
            println!("{:>12} bytes: {} files", c.size, c.files);
        }
    }
    Ok((
        json!({
            "dir": dir, "files": r.files, "bytes": r.bytes, "dirs": r.dirs,
            "seed": o.seed, "ratio": o.ratio,
            "classes": r.classes.iter().map(|c| json!({"size": c.size, "files": c.files})).collect::<Vec<_>>(),
        }),
        0,
    ))
}

pub fn readrate(
    human: bool,
    dirs: &[std::path::PathBuf],
    threads: usize,
    direct: bool,
    model: &str,
) -> Result<(Value, i32)> {
    let params = tapeloom_engine::tools::benchdrive::model_params(model, 1.0)?;
    let r = tapeloom_engine::tools::readrate::read_rate(
        dirs,
        &tapeloom_engine::tools::readrate::ReadRateOptions {
            threads_per_source: threads,
            direct,
        },
    )?;
    let (lowest, native) = (params.min_mb_s, params.native_mb_s);
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
    if human {
        for s in &r.streams {
            println!(
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
        println!("total {total:.1} MB/s: {verdict}");
    }
    Ok((
        json!({
            "streams": r.streams.iter().map(|s| json!({
                "path": s.path, "bytes": s.bytes, "files": s.files, "seconds": s.seconds,
                "mb_per_s": s.mb_per_s, "files_per_s": s.files_per_s, "direct": s.direct,
                "errors": s.errors.iter().map(|(p, w)| json!({"path": p, "reason": w})).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "total_bytes": r.total_bytes,
            "seconds": r.seconds,
            "total_mb_per_s": total,
            "model": model,
            "drive_min_mb_per_s": lowest,
            "drive_native_mb_per_s": native,
            "verdict": verdict,
        }),
        0,
    ))
}
