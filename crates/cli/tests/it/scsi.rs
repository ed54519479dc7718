//! tapeloom on a library of real SCSI devices: tgt's emulated changer and tape
//! drives over iSCSI on loopback, each test with a tgtd of its own.

use crate::common::*;
use tapeloom_device::scsi::ssc::ScsiDrive;
use tapeloom_device::scsi::{ScsiLibrary, ScsiLibraryConfig};
use tapeloom_device::{Changer, TapeDrive};
use tapeloom_testkit::tgt::{TgtLibrary, TgtOptions};

/// A tgt library of its own in `dir`, or `None` (the test returns) when tgt is
/// not there ([`TgtLibrary::start_for_test`]).
fn start(dir: &std::path::Path, drives: usize, tapes: usize, tape_mb: u64) -> Option<TgtLibrary> {
    TgtLibrary::start_for_test(&TgtOptions {
        drives,
        tapes,
        tape_mb,
        barcode_prefix: "TLS".into(),
        dir: dir.join("vtl"),
    })
}

fn attach(home: &std::path::Path, tgt: &TgtLibrary) -> serde_json::Value {
    let mut args = vec![
        "library".to_string(),
        "attach".into(),
        "--changer".into(),
        tgt.changer_url.clone(),
    ];
    for d in &tgt.drive_urls {
        args.push("--drive".into());
        args.push(d.clone());
    }
    let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let v = ok(home, &a);
    let mut missing = Vec::new();
    check_keys("library_attach", &v, &mut missing);
    assert!(missing.is_empty(), "keys gone: {missing:?}");
    v
}

#[test]
fn backup_spans_cartridges_through_the_changer_and_restores_identical() {
    let t = tempfile::tempdir().unwrap();
    let Some(tgt) = start(t.path(), 2, 6, 64) else {
        return;
    };
    let home = t.path().join("home");
    attach(&home, &tgt);

    let inv = ok(&home, &["library", "inventory"]);
    let slots = inv["slots"].as_array().unwrap();
    assert_eq!(slots.len(), 6, "{inv}");
    let mut barcodes: Vec<&str> = slots
        .iter()
        .map(|s| s["barcode"].as_str().unwrap())
        .collect();
    barcodes.sort();
    assert_eq!(
        barcodes,
        tgt.barcodes.iter().map(|s| s.as_str()).collect::<Vec<_>>()
    );
    let drives = inv["drives"].as_array().unwrap();
    assert_eq!(drives.len(), 2, "{inv}");
    for (i, d) in drives.iter().enumerate() {
        assert_eq!(d["index"], i);
        assert_eq!(d["device"], tgt.drive_urls[i].as_str());
        assert!(d["loaded"].is_null(), "{inv}");
    }

    // 200 MB on cartridges of 64 MB: at least three of them.
    let src = t.path().join("src");
    rich_tree(&src);
    for i in 0..9 {
        write(
            &src.join(format!("big/part{i}")),
            &noise(100 + i, 22_000_000),
        );
    }
    let one_mib = noise(7, 1 << 20);
    write(&src.join("deep/one-mib.bin"), &one_mib);
    let b = ok(&home, &["backup", src.to_str().unwrap()]);
    let vols = b["volumes"].as_array().unwrap();
    assert!(vols.len() >= 3, "the job should span three cartridges: {b}");
    // tgt has no LOG SENSE: no TapeAlert page, no volume statistics, but each
    // cartridge's mount is listed.
    let mut listed = Vec::new();
    for d in b["drives"].as_array().unwrap() {
        assert!(d["tape_alerts"].is_null(), "{d}");
        for c in d["cartridges"].as_array().unwrap() {
            // Nor a compressor: its Data Compression page has DCC clear.
            assert_eq!(d["drive_compression"], false, "{d}");
            assert!(c["volume_statistics"].is_null(), "{c}");
            listed.push(c["barcode"].clone());
        }
    }
    assert_eq!(listed.len(), vols.len(), "{b}");
    let job = b["job_id"].as_i64().unwrap().to_string();

    let v = ok(&home, &["verify", &job]);
    assert_eq!(v["ok"], true, "{v}");

    let out = t.path().join("out");
    ok(&home, &["restore", &job, "--to", out.to_str().unwrap()]);
    assert_same_tree(&src, &out);

    // One file of 1 MiB: tgt has no LOCATE, so the drive spaces to it; only its
    // blocks are read.
    let one = t.path().join("one");
    let r = ok(
        &home,
        &[
            "restore",
            &job,
            "--to",
            one.to_str().unwrap(),
            "deep/one-mib.bin",
        ],
    );
    let read = r["bytes_read_from_tape"].as_u64().unwrap();
    assert!(
        read < 2 << 20,
        "a 1 MiB file read {read} bytes from tape: {r}"
    );
    assert_eq!(
        std::fs::read(one.join("deep/one-mib.bin")).unwrap(),
        one_mib
    );

    // The catalog can be rebuilt from the cartridges alone.
    forget_catalog(&home);
    attach(&home, &tgt);
    let rb = ok(&home, &["catalog", "rebuild"]);
    assert_eq!(rb["jobs_added"].as_array().unwrap().len(), 1, "{rb}");
    let again = t.path().join("again");
    ok(&home, &["restore", &job, "--to", again.to_str().unwrap()]);
    assert_same_tree(&src, &again);

    // Offsite through tgt's import/export element: a restore that needs the
    // cartridge names it in one line; imported, it reads again.
    let tape = vols[0].as_str().unwrap();
    let e = ok(&home, &["library", "export", tape]);
    assert_eq!(e["cartridges"][0]["barcode"], tape, "{e}");
    let away = t.path().join("away");
    let restore = ["restore", &job, "--to", away.to_str().unwrap()];
    let args: Vec<&std::ffi::OsStr> = restore.iter().map(std::ffi::OsStr::new).collect();
    let (code, _, err) = run(&home, &args);
    assert_ne!(code, 0, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(tape) && err.contains("library import"),
        "{err}"
    );
    ok(&home, &["library", "import", tape]);
    ok(&home, &restore);
    assert_same_tree(&src, &away);
}

/// Writes one block that is not a tapeloom label on `barcode`, through the changer.
fn write_foreign(tgt: &TgtLibrary, barcode: &str) {
    let mut lib = ScsiLibrary::open(&ScsiLibraryConfig {
        changer: tgt.changer_url.clone(),
        drives: tgt.drive_urls.clone(),
    })
    .unwrap();
    let slot = lib.inventory().unwrap().slot_of(barcode).unwrap();
    lib.load(slot, 0).unwrap();
    let mut d = ScsiDrive::open(&tgt.drive_urls[0]).unwrap();
    d.load().unwrap();
    d.write_block(&[0x42; 4096]).unwrap();
    d.write_filemarks(1, false).unwrap();
    drop(d);
    lib.unload(0, Some(slot)).unwrap();
}

#[test]
fn a_cartridge_with_foreign_data_is_refused_and_labelling_needs_force() {
    let t = tempfile::tempdir().unwrap();
    let Some(tgt) = start(t.path(), 1, 2, 16) else {
        return;
    };
    let home = t.path().join("home");
    let foreign = tgt.barcodes[0].clone();
    write_foreign(&tgt, &foreign);
    attach(&home, &tgt);

    let (code, _, err) = run(
        &home,
        &["library".as_ref(), "label".as_ref(), foreign.as_ref()],
    );
    assert_ne!(code, 0);
    assert!(
        err.contains("did not write") && err.lines().count() == 1,
        "{err}"
    );

    // A backup passes it by and writes to the blank cartridge.
    let src = t.path().join("src");
    write(&src.join("f"), &noise(1, 3_000_000));
    let b = ok(&home, &["backup", src.to_str().unwrap()]);
    assert_eq!(
        b["volumes"],
        serde_json::json!([tgt.barcodes[1].clone()]),
        "{b}"
    );

    // Its data is still there: the first block is the one written.
    let l = ok(&home, &["library", "label", &foreign, "--force"]);
    assert_eq!(l["labelled"][0]["was"], "foreign", "{l}");
    // Now a labelled, empty tapeloom volume: labelling again is refused without
    // --force only when it holds jobs; the other one does.
    let (code, _, err) = run(
        &home,
        &[
            "library".as_ref(),
            "label".as_ref(),
            tgt.barcodes[1].as_ref(),
        ],
    );
    assert_ne!(code, 0);
    assert!(err.contains("holds 1 jobs"), "{err}");
}

#[test]
fn load_unload_move_and_exercise() {
    let t = tempfile::tempdir().unwrap();
    let Some(tgt) = start(t.path(), 2, 4, 8) else {
        return;
    };
    let home = t.path().join("home");
    attach(&home, &tgt);
    let b = &tgt.barcodes[2];
    let l = ok(&home, &["library", "load", b, "--drive", "1"]);
    assert_eq!(l["drive"], 1);
    let inv = ok(&home, &["library", "inventory"]);
    assert_eq!(inv["drives"][1]["loaded"], b.as_str(), "{inv}");
    let empty = inv["slots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["barcode"].is_null())
        .unwrap()["address"]
        .as_u64()
        .unwrap()
        .to_string();
    // From the drive into the empty slot.
    ok(&home, &["library", "move", b, &empty]);
    let inv = ok(&home, &["library", "inventory"]);
    assert!(inv["drives"][1]["loaded"].is_null(), "{inv}");
    assert!(
        inv["slots"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["barcode"] == b.as_str()
                && s["address"].as_u64().unwrap().to_string() == empty),
        "{inv}"
    );
    ok(&home, &["library", "load", &tgt.barcodes[0]]);
    let u = ok(&home, &["library", "unload"]);
    assert_eq!(u["unloaded"][0]["barcode"], tgt.barcodes[0].as_str(), "{u}");
    let inv = ok(&home, &["library", "inventory"]);

    // Out through the mail slot and back in.
    let mail = inv["import_export"][0]["address"]
        .as_u64()
        .unwrap()
        .to_string();
    let back = inv["slots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["barcode"] == tgt.barcodes[1].as_str())
        .unwrap()["address"]
        .as_u64()
        .unwrap()
        .to_string();
    ok(&home, &["library", "move", &tgt.barcodes[1], &mail]);
    let out = ok(&home, &["library", "inventory"]);
    assert_eq!(
        out["import_export"][0]["barcode"],
        tgt.barcodes[1].as_str(),
        "{out}"
    );
    assert!(
        !out["slots"].to_string().contains(&tgt.barcodes[1]),
        "{out}"
    );
    ok(&home, &["library", "move", &tgt.barcodes[1], &back]);
    let inv = ok(&home, &["library", "inventory"]);
    assert!(inv["import_export"][0]["barcode"].is_null(), "{inv}");

    let e = ok(&home, &["library", "exercise", "--cycles", "4"]);
    assert_eq!(e["cycles"], 4);
    assert_eq!(e["failures"], 0, "{e}");
    assert!(e["max_move_seconds"].as_f64().unwrap() > 0.0, "{e}");
    assert!(e["mounts_per_hour"].as_f64().unwrap() > 0.0, "{e}");
    let after = ok(&home, &["library", "inventory"]);
    assert_eq!(
        after["slots"], inv["slots"],
        "the exercise puts cartridges back"
    );

    let d = ok(&home, &["devices", &tgt.changer_url, &tgt.drive_urls[0]]);
    assert_eq!(
        d["devices"].as_array().unwrap().last().unwrap()["type"],
        "tape",
        "{d}"
    );
    let x = ok(&home, &["library", "detach"]);
    let mut missing = Vec::new();
    check_keys("devices_iscsi", &d, &mut missing);
    check_keys("library_detach", &x, &mut missing);
    assert!(missing.is_empty(), "keys gone: {missing:?}");
}
