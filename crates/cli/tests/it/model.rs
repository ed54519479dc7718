//! The LTO drive model against the published figures (modeled time, so these are
//! deterministic, not timed tests).

use crate::common::*;
use serde_json::Value;
use std::process::Command;

fn tl(args: &[&str]) -> Value {
    let out = Command::new(bin())
        .arg("--json")
        .args(args)
        .output()
        .unwrap();
    let (code, v, err) = parse(out);
    assert_eq!(code, 0, "tapeloom {args:?}: {err}");
    v
}

fn rate(args: &[&str]) -> f64 {
    let mut a = vec!["bench", "drive"];
    a.extend_from_slice(args);
    tl(&a)["rows"][0]["host_mb_per_s"].as_f64().unwrap()
}

fn in_range(what: &str, v: f64, lo: f64, hi: f64) {
    assert!(v >= lo && v <= hi, "{what}: {v:.2} not in {lo}..{hi}");
}

#[test]
fn lto2_matches_the_openbench_review() {
    let random = rate(&["--model", "lto2", "--block-sizes", "128K", "--size", "2G"]);
    in_range("lto2 random", random, 28.5, 31.0);
    let patterned = rate(&[
        "--model",
        "lto2",
        "--block-sizes",
        "128K",
        "--size",
        "2G",
        "--pattern",
        "ratio:1.86",
    ]);
    in_range("lto2 1.86:1", patterned, 52.0, 58.0);
    let off = rate(&[
        "--model",
        "lto2",
        "--block-sizes",
        "128K",
        "--size",
        "2G",
        "--compression",
        "off",
    ]);
    assert!(random >= 0.99 * off, "compression on {random} vs off {off}");
}

#[test]
fn lto1_block_sizes_and_compression() {
    let v = tl(&[
        "bench",
        "drive",
        "--model",
        "lto1",
        "--block-sizes",
        "1K,128K,256K",
        "--size",
        "1G",
        "--compression",
        "off",
    ]);
    let r: Vec<f64> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["host_mb_per_s"].as_f64().unwrap())
        .collect();
    in_range("lto1 native 256K", r[2], 14.0, 16.0);
    assert!(
        (r[1] - r[2]).abs() / r[2] < 0.05,
        "128K {} vs 256K {}",
        r[1],
        r[2]
    );
    assert!(r[0] < r[2] / 2.0, "1K {} vs 256K {}", r[0], r[2]);
    let c = rate(&[
        "--model",
        "lto1",
        "--block-sizes",
        "256K",
        "--size",
        "1G",
        "--pattern",
        "ratio:2",
    ]);
    in_range("lto1 2:1", c, 28.0, 31.0);
}

#[test]
fn lto3_speed_matching() {
    in_range(
        "lto3 native",
        rate(&[
            "--model",
            "lto3",
            "--block-sizes",
            "256K",
            "--compression",
            "off",
        ]),
        76.0,
        84.0,
    );
    in_range(
        "lto3 2:1",
        rate(&[
            "--model",
            "lto3",
            "--block-sizes",
            "256K",
            "--pattern",
            "ratio:2",
        ]),
        150.0,
        165.0,
    );
    let fed = |r: &str| {
        tl(&[
            "bench",
            "drive",
            "--model",
            "lto3",
            "--block-sizes",
            "256K",
            "--source-rate",
            r,
        ])["rows"][0]["backhitches"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(fed("40MB"), 0, "fed at 40 MB/s the drive streams");
    assert!(fed("20MB") > 0, "fed at 20 MB/s (below 27) the drive stops");
}

#[test]
fn lto9_virtual_clock_is_fast() {
    let v = tl(&[
        "bench",
        "drive",
        "--model",
        "lto9",
        "--block-sizes",
        "256K",
        "--size",
        "20G",
    ]);
    let row = &v["rows"][0];
    in_range(
        "lto9 native",
        row["host_mb_per_s"].as_f64().unwrap(),
        380.0,
        410.0,
    );
    let modeled = row["modeled_seconds"].as_f64().unwrap();
    assert!(modeled > 50.0, "{modeled}");
    // Not a timing assertion on the machine: the virtual clock must not sleep, so the
    // run cannot take anywhere near the modeled time (half of it leaves room for a
    // debug build on a loaded machine; a clock that slept would take all of it).
    assert!(
        row["wall_seconds"].as_f64().unwrap() < modeled / 2.0,
        "{row}"
    );
}

#[test]
fn lto1_positioning_matches_nersc() {
    let loc = tl(&[
        "bench", "locate", "--model", "lto1", "--from", "0", "--to", "17G",
    ]);
    assert!(
        loc["equivalent_mb_per_s"].as_f64().unwrap() >= 100.0,
        "{loc}"
    );
    let fsf = tl(&[
        "bench",
        "locate",
        "--model",
        "lto1",
        "--from",
        "0",
        "--to",
        "10G",
        "--space-files",
        "--file-size",
        "100MB",
    ]);
    in_range(
        "lto1 fsf",
        fsf["equivalent_mb_per_s"].as_f64().unwrap(),
        12.0,
        16.0,
    );
    let rt = tl(&[
        "bench",
        "locate",
        "--model",
        "lto1",
        "--from",
        "0",
        "--to",
        "1G",
        "--read-through",
    ]);
    in_range(
        "lto1 read-through",
        rt["equivalent_mb_per_s"].as_f64().unwrap(),
        14.0,
        16.0,
    );
}

#[test]
fn drive_models_lists_ten_generations() {
    let v = tl(&["drive", "models"]);
    let names: Vec<&str> = v["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        vec!["lto1", "lto2", "lto3", "lto4", "lto5", "lto6", "lto7", "lto8", "lto9", "lto10"]
    );
    let lto3 = &v["models"][2];
    assert_eq!(lto3["speed_steps_mb_per_s"][0], 27.0);
    assert_eq!(lto3["native_mb_per_s"], 80.0);
}

#[test]
fn a_library_with_a_model_backs_up_restores_and_benches() {
    let t = tempfile::tempdir().unwrap();
    let (home, src, out) = (
        t.path().join("home"),
        t.path().join("src"),
        t.path().join("out"),
    );
    library_with(&home, 2, 3, "1G", &["--model", "lto3"]);
    rich_tree(&src);
    let b = ok(&home, &["backup", src.to_str().unwrap()]);
    // The flush that ends the job stops the tape after the data: counted apart from
    // the backhitches while data streamed.
    let d = &b["drives"][0];
    assert!(d["backhitches"].as_u64().is_some(), "{b}");
    assert!(d["stops_after_data"].as_u64().unwrap() >= 1, "{b}");
    let job = b["job_id"].as_i64().unwrap().to_string();
    ok(&home, &["restore", &job, "--to", out.to_str().unwrap()]);
    assert_same_tree(&src, &out);
    let bench = ok(
        &home,
        &[
            "bench",
            "drive",
            "--drive",
            "1",
            "--block-sizes",
            "256K",
            "--size",
            "256M",
        ],
    );
    assert_eq!(bench["model"], "lto3");
    assert!(
        bench["rows"][0]["host_mb_per_s"].as_f64().unwrap() > 50.0,
        "{bench}"
    );
    // The benchmark leaves its scratch cartridge blank again.
    let st = ok(&home, &["library", "status"]);
    let blanks = st["cartridges"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["state"] == "blank")
        .count();
    assert_eq!(blanks, 2, "{st}");
    let fresh = t.path().join("fresh");
    let (code, _, err) = run(
        &fresh,
        &["library", "create", "--model", "lto99"].map(std::ffi::OsStr::new),
    );
    assert_ne!(code, 0);
    assert!(err.contains("lto99"), "{err}");
}

#[test]
fn the_calibration_table_matches_what_the_commands_print() {
    if !need(program("python3", "python3")) {
        return;
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new("python3")
        .arg(root.join("bench/calibrate.py"))
        .arg("--check")
        .arg("--tapeloom")
        .arg(bin())
        .output()
        .expect("run python3 bench/calibrate.py");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn gen_is_deterministic_with_equal_classes_and_the_asked_ratio() {
    if !need(program("zstd", "zstd")) {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    let args = |d: &std::path::Path| {
        vec![
            "gen".to_string(),
            d.to_str().unwrap().to_string(),
            "--min".into(),
            "4K".into(),
            "--max".into(),
            "1M".into(),
            "--ratio".into(),
            "2".into(),
            "--seed".into(),
            "9".into(),
            "--depth".into(),
            "2".into(),
            "--breadth".into(),
            "3".into(),
            "--files-per-dir".into(),
            "9".into(),
        ]
    };
    let ga = tl(&args(&a).iter().map(String::as_str).collect::<Vec<_>>());
    let gb = tl(&args(&b).iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(ga["classes"], gb["classes"]);
    assert_same_tree(&a, &b);
    let counts: Vec<u64> = ga["classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["files"].as_u64().unwrap())
        .collect();
    assert_eq!(counts.len(), 9, "{ga}");
    assert!(
        counts.iter().all(|&c| c == counts[0] && c > 0),
        "{counts:?}"
    );
    // The data compresses about 2:1 with zstd -1, file by file.
    let mut checked = 0;
    for (rel, p) in tree(&a) {
        let name = String::from_utf8_lossy(&rel).into_owned();
        if !name.contains("File262144_") && !name.contains("File1048576_") {
            continue;
        }
        let out = Command::new("zstd")
            .args(["-1", "-q", "-c"])
            .arg(&p)
            .output()
            .expect("run zstd");
        assert!(out.status.success());
        let ratio = std::fs::metadata(&p).unwrap().len() as f64 / out.stdout.len() as f64;
        assert!((1.8..=2.2).contains(&ratio), "{name}: {ratio:.2}");
        checked += 1;
    }
    assert!(checked >= 4, "checked {checked} files");
}

#[test]
fn readrate_reports_streams_and_a_verdict() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    tl(&[
        "gen",
        a.to_str().unwrap(),
        "--preset",
        "small-files",
        "--total",
        "8M",
    ]);
    tl(&[
        "gen",
        b.to_str().unwrap(),
        "--preset",
        "small-files",
        "--total",
        "4M",
        "--seed",
        "2",
    ]);
    let r = tl(&[
        "readrate",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--model",
        "lto3",
        "--threads-per-source",
        "2",
    ]);
    let streams = r["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 2);
    assert!(streams[0]["bytes"].as_u64().unwrap() > streams[1]["bytes"].as_u64().unwrap());
    assert!(streams[0]["files"].as_u64().unwrap() > 0);
    assert!(streams[0]["mb_per_s"].as_f64().unwrap() > 0.0);
    assert!(r["total_mb_per_s"].as_f64().unwrap() > 0.0);
    assert!(r["verdict"].as_str().unwrap().contains("lto3"), "{r}");
    assert_eq!(r["drive_min_mb_per_s"], 27.0);
}

#[test]
fn the_real_clock_takes_the_modeled_time() {
    // LTO-3 at a quarter scale streams 20 MB/s: 64 MiB take about three seconds.
    let v = tl(&[
        "bench",
        "drive",
        "--model",
        "lto3",
        "--block-sizes",
        "256K",
        "--size",
        "64M",
        "--clock",
        "real",
        "--scale",
        "0.25",
        "--compression",
        "off",
    ]);
    let row = &v["rows"][0];
    let modeled = row["modeled_seconds"].as_f64().unwrap();
    in_range(
        "lto3 at scale 0.25",
        row["host_mb_per_s"].as_f64().unwrap(),
        17.0,
        21.0,
    );
    // A lower bound only: the real clock sleeps until the modeled time has passed.
    assert!(
        row["wall_seconds"].as_f64().unwrap() >= modeled * 0.95,
        "{row}"
    );
}

/// Reads a restore's modeled and bound seconds, which a modeled library must give.
fn modeled_and_bound(r: &Value) -> (f64, f64) {
    let m = r["modeled_seconds"].as_f64().expect("modeled seconds");
    let b = r["bound_seconds"].as_f64().expect("bound seconds");
    (m, b)
}

/// A job written by two drives has two chains of cartridges: restored on both drives
/// at once, it takes at most 60 % of the modeled time one drive takes reading the
/// chains one after another; and the bound stays below the modeled time either way.
#[test]
fn a_two_drive_job_restores_on_both_drives_at_once() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    ok(
        &home,
        &[
            "library", "create", "--drives", "2", "--slots", "4", "--model", "lto3", "--clock",
            "virtual",
        ],
    );
    let mut srcs = Vec::new();
    for s in 0..4u64 {
        let d = t.path().join(format!("src/s{s}"));
        for i in 0..2 {
            write(
                &d.join(format!("f{i}")),
                &noise(70 + 10 * s + i, 12_000_000),
            );
        }
        srcs.push(d.to_str().unwrap().to_string());
    }
    // The streams dealt to the drives in turn, each drive's laid the same way on
    // every run: the modeled times compared are the same on every run too.
    let mut args = vec!["backup", "--drives", "2", "--concurrency", "2"];
    args.extend(["--interleave", "in-turn"]);
    args.extend(srcs.iter().map(|s| s.as_str()));
    let b = ok(&home, &args);
    let job = b["job_id"].as_i64().unwrap().to_string();
    let restore = |to: &str, extra: &[&str]| {
        // Each restore starts with every cartridge in its slot.
        ok(&home, &["library", "unload"]);
        let out = t.path().join(to);
        let mut a = vec!["restore", &job, "--to", out.to_str().unwrap()];
        a.extend_from_slice(extra);
        let r = ok(&home, &a);
        for s in 0..4 {
            let s = format!("s{s}");
            assert_same_tree(&t.path().join("src").join(&s), &out.join(&s));
        }
        r
    };
    let one = restore("one", &["--drives", "1"]);
    let both = restore("both", &[]);
    assert_eq!(one["chains"], 2, "{one}");
    assert_eq!(one["drives"].as_array().unwrap().len(), 1, "{one}");
    let drives = both["drives"].as_array().unwrap();
    let used: Vec<u64> = drives
        .iter()
        .map(|d| d["drive"].as_u64().unwrap())
        .collect();
    assert_eq!(used, vec![0, 1], "{both}");
    for d in drives {
        assert!(d["bytes"].as_u64().unwrap() > 40_000_000, "{both}");
        assert_eq!(d["chains"].as_array().unwrap().len(), 1, "{both}");
    }
    let (m1, b1) = modeled_and_bound(&one);
    let (m2, b2) = modeled_and_bound(&both);
    assert!(b1 > 0.0 && b1 <= m1, "one drive: bound {b1} > modeled {m1}");
    assert!(
        b2 > 0.0 && b2 <= m2,
        "two drives: bound {b2} > modeled {m2}"
    );
    assert!(m2 <= 0.6 * m1, "two drives {m2} s vs one {m1} s");
    // The same from a catalog rebuilt from the tapes: the chains are found again.
    forget_catalog(&home);
    ok(&home, &["catalog", "rebuild"]);
    let again = restore("again", &[]);
    assert_eq!(again["chains"], 2, "{again}");
    assert_eq!(again["drives"].as_array().unwrap().len(), 2, "{again}");
}

/// A one-drive LTO-3 library, backed up and restored with the cartridge still in the
/// drive: the restore's modeled figures are numbers, and the bound stays below.
#[test]
fn a_restore_from_the_cartridge_left_in_the_drive_is_modeled() {
    let t = tempfile::tempdir().unwrap();
    let (home, src, out) = (
        t.path().join("home"),
        t.path().join("src"),
        t.path().join("out"),
    );
    ok(
        &home,
        &[
            "library", "create", "--drives", "1", "--slots", "2", "--model", "lto3", "--clock",
            "virtual",
        ],
    );
    write(&src.join("f"), &noise(5, 20_000_000));
    let b = ok(&home, &["backup", src.to_str().unwrap()]);
    let job = b["job_id"].as_i64().unwrap().to_string();
    let st = ok(&home, &["library", "status"]);
    assert!(st["drives"][0]["loaded"].is_string(), "{st}");
    let r = ok(&home, &["restore", &job, "--to", out.to_str().unwrap()]);
    assert_same_tree(&src, &out);
    let (m, bound) = modeled_and_bound(&r);
    assert!(m > 0.0 && bound <= m, "{r}");
    let d = &r["drives"][0];
    assert_eq!(d["modeled_seconds"].as_f64(), Some(m), "{r}");
    assert!(d["backhitches"].as_u64().is_some(), "{r}");
    assert!(d["compression_ratio"].as_f64().is_some(), "{r}");
}
