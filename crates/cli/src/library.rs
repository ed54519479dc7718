//! `tapeloom library ...` for SCSI libraries and cartridges, and `tapeloom devices`.

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::time::Instant;
use tapeloom_device::scsi::{self, discovery, ScsiLibrary, ScsiLibraryConfig};
use tapeloom_device::TapeDrive;
use tapeloom_engine::Home;

/// `library attach`: records a changer and its drives as the home's library.
pub fn attach(
    home: &Home,
    changer: &str,
    drives: &[String],
    force: bool,
    human: bool,
) -> Result<(Value, i32)> {
    let cfg = ScsiLibraryConfig {
        changer: changer.to_string(),
        drives: drives.to_vec(),
    };
    // Everything must answer before the home is changed.
    let mut lib = ScsiLibrary::open(&cfg).with_context(|| format!("open changer {changer}"))?;
    let mut rows = Vec::new();
    for (i, dev) in drives.iter().enumerate() {
        let d = scsi::ssc::ScsiDrive::open(dev).with_context(|| format!("open drive {dev}"))?;
        rows.push(json!({
            "index": i, "device": dev, "description": d.describe(), "serial": d.serial,
            "element": lib.drive_element(i)?,
        }));
    }
    let inv = tapeloom_device::Changer::inventory(&mut lib)?;
    home.attach(&cfg, force)?;
    home.catalog.forget_unused_volumes()?;
    if human {
        println!(
            "attached changer {changer} ({} slots) with {} drives",
            inv.slots.len(),
            drives.len()
        );
        for r in &rows {
            println!(
                "drive {}: {} ({})",
                r["index"],
                r["device"].as_str().unwrap_or(""),
                r["description"].as_str().unwrap_or("")
            );
        }
    }
    Ok((
        json!({"changer": changer, "drives": rows, "slots": inv.slots.len()}),
        0,
    ))
}

/// `library inventory`: what is where, with a rescan of the changer when asked.
pub fn inventory(home: &Home, rescan: bool, human: bool) -> Result<(Value, i32)> {
    let mut lib = home.library()?;
    if rescan {
        lib.rescan().context("rescan the changer")?;
    }
    let inv = lib.inventory()?;
    let drives: Vec<Value> = inv
        .drives
        .iter()
        .map(|d| json!({"index": d.index, "device": lib.drive_device(d.index), "loaded": d.loaded}))
        .collect();
    let slots: Vec<Value> = inv
        .slots
        .iter()
        .map(|s| json!({"address": s.address, "barcode": s.barcode}))
        .collect();
    if human {
        println!("{}", lib.describe());
        for d in &inv.drives {
            println!(
                "drive {} ({}): {}",
                d.index,
                lib.drive_device(d.index),
                d.loaded.as_deref().unwrap_or("empty")
            );
        }
        for s in &inv.slots {
            println!(
                "slot {:>4}: {}",
                s.address,
                s.barcode.as_deref().unwrap_or("empty")
            );
        }
    }
    let mail: Vec<Value> = inv
        .import_export
        .iter()
        .map(|s| json!({"address": s.address, "barcode": s.barcode}))
        .collect();
    if human {
        for s in &inv.import_export {
            println!(
                "mail slot {:>4}: {}",
                s.address,
                s.barcode.as_deref().unwrap_or("empty")
            );
        }
    }
    Ok((
        json!({"drives": drives, "slots": slots, "import_export": mail}),
        0,
    ))
}

/// `library load`.
pub fn load(home: &Home, barcode: &str, drive: Option<usize>, human: bool) -> Result<(Value, i32)> {
    let d = tapeloom_engine::load_cartridge(home, barcode, drive)?;
    if human {
        println!("{barcode} loaded in drive {d}");
    }
    Ok((json!({"barcode": barcode, "drive": d}), 0))
}

/// `library unload`.
pub fn unload(home: &Home, drive: Option<usize>, human: bool) -> Result<(Value, i32)> {
    let moved = tapeloom_engine::unload_drives(home, drive)?;
    if human {
        if moved.is_empty() {
            println!("no cartridge to unload");
        }
        for (d, b) in &moved {
            println!("{b} unloaded from drive {d}");
        }
    }
    Ok((
        json!({"unloaded": moved.iter().map(|(d, b)| json!({"drive": d, "barcode": b})).collect::<Vec<_>>()}),
        0,
    ))
}

/// `library move BARCODE SLOT`: a cartridge from a drive or slot into an empty slot.
pub fn move_cartridge(home: &Home, barcode: &str, to: usize, human: bool) -> Result<(Value, i32)> {
    let mut lib = home.library()?;
    let inv = lib.inventory()?;
    if let Some(d) = inv.drive_of(barcode) {
        lib.unload(d, Some(to))?;
    } else if let Some(s) = inv.slot_of(barcode).or(inv.mail_slot_of(barcode)) {
        if s != to {
            lib.transfer(s, to)?;
        }
    } else {
        bail!("cartridge {barcode} is not in the library");
    }
    if human {
        println!("{barcode} is in slot {to}");
    }
    Ok((json!({"barcode": barcode, "slot": to}), 0))
}

/// `library label`.
pub fn label(
    home: &Home,
    barcodes: &[String],
    pool: &str,
    force: bool,
    human: bool,
) -> Result<(Value, i32)> {
    let mut done = Vec::new();
    for b in barcodes {
        let l = tapeloom_engine::label(
            home,
            b,
            pool,
            tapeloom_format::DEFAULT_BLOCK_SIZE as u32,
            force,
        )
        .with_context(|| format!("label {b}"))?;
        if human {
            println!(
                "{} labelled for pool {pool} (was {}{})",
                l.barcode,
                l.was,
                if l.jobs_forgotten.is_empty() {
                    String::new()
                } else {
                    format!("; jobs forgotten: {:?}", l.jobs_forgotten)
                }
            );
        }
        done.push(json!({"barcode": l.barcode, "was": l.was, "jobs_forgotten": l.jobs_forgotten}));
    }
    // Cartridges go back to their slots.
    tapeloom_engine::unload_drives(home, None)?;
    Ok((json!({"labelled": done, "pool": pool}), 0))
}

/// A small deterministic generator for the exercise's choices.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n.max(1)
    }
}

/// `library exercise --cycles N`: a random cartridge into a random drive and back,
/// timing each robot move and each load.
pub fn exercise(home: &Home, cycles: u32, seed: u64, human: bool) -> Result<(Value, i32)> {
    let mut lib = home.library()?;
    tapeloom_engine::unload_drives(home, None)?;
    let mut rng = Rng(seed.max(1));
    let (mut moves, mut loads, mut failures) = (Vec::new(), Vec::new(), Vec::new());
    let started = Instant::now();
    for c in 0..cycles {
        let inv = lib.inventory()?;
        let full: Vec<_> = inv.slots.iter().filter(|s| s.barcode.is_some()).collect();
        if full.is_empty() || inv.drives.is_empty() {
            bail!("the library needs a cartridge in a slot and a drive to exercise");
        }
        let slot = full[rng.below(full.len())].address;
        let barcode = inv
            .slots
            .iter()
            .find(|s| s.address == slot)
            .and_then(|s| s.barcode.clone())
            .unwrap_or_default();
        let drive = rng.below(inv.drives.len());
        let r = (|| -> Result<()> {
            let t = Instant::now();
            lib.load(slot, drive)?;
            moves.push(t.elapsed().as_secs_f64());
            let t = Instant::now();
            let mut d = lib.open_tape_drive(drive)?;
            d.load()?;
            loads.push(t.elapsed().as_secs_f64());
            d.unload()?;
            drop(d);
            let t = Instant::now();
            lib.unload(drive, Some(slot))?;
            moves.push(t.elapsed().as_secs_f64());
            Ok(())
        })();
        if let Err(e) = r {
            failures.push(
                json!({"cycle": c, "barcode": barcode, "drive": drive, "error": e.to_string()}),
            );
            // Put the cartridge back if it is stuck in the drive.
            if let Ok(inv) = lib.inventory() {
                if inv.drive_of(&barcode).is_some() {
                    let _ = lib.unload(drive, Some(slot));
                }
            }
        }
        if human {
            eprint!("\rcycle {}/{cycles}", c + 1);
        }
    }
    if human {
        eprintln!();
    }
    let hours = started.elapsed().as_secs_f64() / 3600.0;
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
    let (mean_move, max_move) = stat(&moves);
    let (mean_load, max_load) = stat(&loads);
    let mounts = loads.len() as f64;
    let v = json!({
        "cycles": cycles,
        "failures": failures.len(),
        "mean_move_seconds": mean_move,
        "max_move_seconds": max_move,
        "mean_load_seconds": mean_load,
        "max_load_seconds": max_load,
        "mounts_per_hour": if hours > 0.0 { mounts / hours } else { 0.0 },
        "errors": failures,
    });
    if human {
        println!(
            "{cycles} cycles, {} failures; moves {:.2} s mean, {:.2} s max; loads {:.2} s mean; {:.0} mounts per hour",
            v["failures"], mean_move, max_move, mean_load, v["mounts_per_hour"].as_f64().unwrap_or(0.0)
        );
    }
    Ok((v, if failures.is_empty() { 0 } else { 1 }))
}

/// `tapeloom devices [URL...]`: SCSI generic devices of this machine and the iSCSI
/// logical units named.
pub fn devices(urls: &[String], human: bool) -> Result<(Value, i32)> {
    let mut code = 0;
    let rows: Vec<Value> = discovery::discover(urls)
        .into_iter()
        .map(|p| match p.result {
            Ok(d) => device_row(&d),
            Err(e) => {
                code = 1;
                json!({"device": p.address, "error": e.to_string()})
            }
        })
        .collect();
    if human {
        if rows.is_empty() {
            println!(
                "no SCSI devices found (name iSCSI logical units as iscsi://HOST:PORT/TARGET/LUN)"
            );
        }
        for r in &rows {
            match r.get("error") {
                Some(e) => println!(
                    "{}: {}",
                    r["device"].as_str().unwrap_or(""),
                    e.as_str().unwrap_or("")
                ),
                None => println!(
                    "{:<44} {:<8} {} {} {}{}",
                    r["device"].as_str().unwrap_or(""),
                    r["type"].as_str().unwrap_or(""),
                    r["vendor"].as_str().unwrap_or(""),
                    r["product"].as_str().unwrap_or(""),
                    r["revision"].as_str().unwrap_or(""),
                    r["serial"]
                        .as_str()
                        .map(|s| format!(" serial {s}"))
                        .unwrap_or_default()
                ),
            }
        }
    }
    Ok((json!({"devices": rows}), code))
}

/// One device of `tapeloom devices --json`: a probed device also names its quirks.
fn device_row(d: &discovery::Device) -> Value {
    let mut row = json!({
        "device": d.address, "type": d.kind(), "vendor": d.vendor,
        "product": d.product, "revision": d.revision, "serial": d.serial,
    });
    if d.source == discovery::Source::Inquiry {
        row["quirks"] = json!(d.quirks);
    }
    row
}
