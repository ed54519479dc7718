//! Several streams woven onto one drive, and restores that skip what they don't need.

use crate::common::*;
use std::ffi::OsStr;

#[test]
fn interleaved_streams_restore_whole_by_stream_and_by_path() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let (a, b) = (t.path().join("alpha"), t.path().join("beta"));
    for i in 0..3 {
        write(&a.join(format!("a{i}")), &noise(10 + i, 12_000_000));
        write(&b.join(format!("b{i}")), &noise(20 + i, 12_000_000));
    }
    // Rate limits make both streams slower than the writer, so their blocks
    // interleave; in turn, a whole extent of each, however fast each is read.
    let r = ok(
        &home,
        &[
            "backup",
            "--stream",
            &format!("first={}", a.display()),
            b.to_str().unwrap(),
            "--concurrency",
            "2",
            "--limit-rate",
            "40MB",
            "--extent-size",
            "1M",
            "--interleave",
            "in-turn",
        ],
    );
    assert_eq!(r["max_concurrency"], 2, "{r}");
    assert!(
        r["extents"].as_u64().unwrap() >= 6,
        "the streams did not interleave: {r}"
    );
    let names: Vec<&str> = r["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    // Sources given by position come first, then the named ones.
    assert_eq!(names, vec!["beta", "first"]);
    let job = r["job_id"].as_i64().unwrap().to_string();
    let total = 72_000_000u64;

    let all = t.path().join("all");
    let w = ok(&home, &["restore", &job, "--to", all.to_str().unwrap()]);
    assert_eq!(
        w["locates"], 1,
        "a whole-job restore reads the tape once: {w}"
    );
    assert_same_tree(&a, &all.join("first"));
    assert_same_tree(&b, &all.join("beta"));

    let one = t.path().join("one");
    let s = ok(
        &home,
        &[
            "restore",
            &job,
            "--to",
            one.to_str().unwrap(),
            "--stream",
            "beta",
        ],
    );
    assert_same_tree(&b, &one.join("beta"));
    assert!(!one.join("first").exists());
    let read = s["bytes_read_from_tape"].as_u64().unwrap();
    assert!(
        read < total * 6 / 10,
        "a one-stream restore read {read} of {total} bytes"
    );
    assert!(s["locates"].as_u64().unwrap() > 1, "{s}");

    let f = t.path().join("file");
    let p = ok(
        &home,
        &["restore", &job, "--to", f.to_str().unwrap(), "first/a1"],
    );
    assert_eq!(
        std::fs::read(f.join("first/a1")).unwrap(),
        noise(11, 12_000_000)
    );
    let read = p["bytes_read_from_tape"].as_u64().unwrap();
    assert!(
        read < 14_000_000,
        "a 12 MB file cost {read} bytes of reading"
    );

    assert_eq!(ok(&home, &["verify", &job])["ok"], true);
}

#[test]
fn adaptive_concurrency_weaves_slow_streams() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let mut args = vec!["backup".to_string(), "--limit-rate".into(), "20MB".into()];
    for s in 0..3 {
        let d = t.path().join(format!("s{s}"));
        write(&d.join("data"), &noise(30 + s, 6_000_000));
        args.push(d.to_str().unwrap().to_string());
    }
    let r = ok(&home, &args.iter().map(String::as_str).collect::<Vec<_>>());
    // Each stream alone leaves the writer waiting, so more are woven in.
    assert!(r["max_concurrency"].as_u64().unwrap() >= 2, "{r}");
    assert!(r["drives"][0]["writer_waits"].as_u64().unwrap() > 0, "{r}");
}

#[test]
fn stream_options_are_checked() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let d = t.path().join("d");
    write(&d.join("x"), b"x");
    let dd = format!("x={}", d.display());
    // What only the command can judge (streams, and an extent against the block
    // size) fails it (exit 1); a number out of its own range is refused by the
    // argument parser (exit 2). Both in one line.
    for (code_wanted, args) in [
        (
            1,
            vec!["backup", "--stream", dd.as_str(), "--stream", dd.as_str()],
        ),
        (1, vec!["backup", "--stream", "no-equals-sign"]),
        (
            1,
            vec!["backup", "--extent-size", "100K", d.to_str().unwrap()],
        ),
        (2, vec!["backup", "--concurrency", "0", d.to_str().unwrap()]),
        (
            2,
            vec!["backup", "--high-water", "150", d.to_str().unwrap()],
        ),
        (2, vec!["backup", "--buffers", "1", d.to_str().unwrap()]),
        (
            2,
            vec!["backup", "--readers-per-stream", "0", d.to_str().unwrap()],
        ),
        (2, vec!["backup", "--limit-rate", "0", d.to_str().unwrap()]),
        (
            1,
            vec!["backup", "--interleave", "in-turn", d.to_str().unwrap()],
        ),
        (
            2,
            vec!["backup", "--interleave", "sideways", d.to_str().unwrap()],
        ),
    ] {
        let (code, _, err) = run(&home, &args.iter().map(OsStr::new).collect::<Vec<_>>());
        assert_eq!(code, code_wanted, "{args:?}");
        assert!(
            err.starts_with("tapeloom: error: ") && err.trim_end().lines().count() == 1,
            "{err}"
        );
    }
    // A drive model scaled by 0 (or by nothing finite) would never finish a command.
    for args in [
        vec!["library", "create", "--model", "lto3", "--scale", "0"],
        vec!["bench", "drive", "--model", "lto3", "--scale", "nan"],
    ] {
        let (code, _, err) = run(&home, &args.iter().map(OsStr::new).collect::<Vec<_>>());
        assert_ne!(code, 0, "{args:?}");
        assert!(err.contains("is not a factor from 0.00"), "{err}");
    }
    let r = ok(&home, &["backup", "--stream", dd.as_str()]);
    let job = r["job_id"].as_i64().unwrap().to_string();
    let (code, _, err) = run(
        &home,
        &["restore", &job, "--to", "/tmp/never", "--stream", "nope"].map(OsStr::new),
    );
    assert_eq!(code, 1);
    assert!(err.contains("no stream nope"), "{err}");
}

/// Streams woven in turn land the same way on every run, however fast each is
/// read: a whole extent of each in the order given, and the same extents in two
/// homes whose backups read their sources at different rates.
#[test]
fn streams_woven_in_turn_land_the_same_way_on_every_run() {
    let t = tempfile::tempdir().unwrap();
    let mut srcs = Vec::new();
    for s in 0..3u64 {
        // Streams of one, two and three files: they end at different turns.
        let d = t.path().join(format!("s{s}"));
        for i in 0..=s {
            write(&d.join(format!("f{i}")), &noise(60 + 10 * s + i, 3_000_000));
        }
        srcs.push(d.to_str().unwrap().to_string());
    }
    let extents = |name: &str, rate: &[&str]| {
        let home = t.path().join(name);
        let mut args = vec!["backup", "--concurrency", "3", "--interleave", "in-turn"];
        args.extend(["--extent-size", "1M", "--block-size", "64K"]);
        args.extend_from_slice(rate);
        args.extend(srcs.iter().map(String::as_str));
        let b = ok(&home, &args);
        let c = open_catalog(&home);
        c.extents(b["job_id"].as_i64().unwrap()).unwrap()
    };
    let slow = extents("slow", &["--limit-rate", "20MB"]);
    let fast = extents("fast", &[]);
    assert_eq!(slow, fast);
    // Each stream in turn, sixteen blocks of 64 KiB each, while all three last.
    let turns: Vec<(u16, u64)> = slow.iter().map(|e| (e.stream, e.blocks)).collect();
    let whole = [(1, 16), (2, 16), (3, 16)];
    assert_eq!(turns[..6], [whole, whole].concat(), "{turns:?}");
}

/// Filemarks on a cartridge, from the virtual cartridge's index (FORMAT.md 8).
fn filemarks_on(home: &std::path::Path, barcode: &str) -> usize {
    let idx = std::fs::read(home.join(format!("library/tapes/{barcode}.idx"))).unwrap();
    idx.chunks_exact(16)
        .filter(|e| e[12..16] == [1, 0, 0, 0])
        .count()
}

#[test]
fn filemarks_inside_a_job_change_nothing_for_restores() {
    let t = tempfile::tempdir().unwrap();
    let (home, src) = (t.path().join("home"), t.path().join("src"));
    library(&home, 1, 3, "64M");
    for i in 0..8 {
        write(&src.join(format!("f{i}")), &noise(40 + i, 9_000_000));
    }
    let b = ok(
        &home,
        &["backup", src.to_str().unwrap(), "--segment-size", "2M"],
    );
    assert!(b["filemarks"].as_u64().unwrap() >= 30, "{b}");
    assert_eq!(b["volumes"].as_array().unwrap().len(), 2, "{b}");
    // Label filemark + segment filemarks + the job's closing filemark.
    assert!(filemarks_on(&home, "TL0001L9") > 10);
    let job = b["job_id"].as_i64().unwrap().to_string();
    assert_eq!(ok(&home, &["verify", &job])["ok"], true);
    let out = t.path().join("out");
    ok(&home, &["restore", &job, "--to", out.to_str().unwrap()]);
    assert_same_tree(&src, &out);
    let one = t.path().join("one");
    let r = ok(
        &home,
        &["restore", &job, "--to", one.to_str().unwrap(), "f5"],
    );
    assert_eq!(std::fs::read(one.join("f5")).unwrap(), noise(45, 9_000_000));
    assert!(
        r["bytes_read_from_tape"].as_u64().unwrap() < 10_000_000,
        "{r}"
    );
    forget_catalog(&home);
    let rb = ok(&home, &["catalog", "rebuild"]);
    assert_eq!(rb["files_added"], 9, "{rb}");
    let again = t.path().join("again");
    ok(&home, &["restore", &job, "--to", again.to_str().unwrap()]);
    assert_same_tree(&src, &again);
}

#[test]
fn two_drives_share_the_streams_each_spanning_its_own_cartridges() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    library(&home, 2, 6, "64M");
    let mut srcs = Vec::new();
    for s in 0..4u64 {
        let d = t.path().join(format!("s{s}"));
        for i in 0..5 {
            write(&d.join(format!("f{i}")), &noise(100 * s + i, 10_000_000));
        }
        srcs.push(d);
    }
    // Dealt in turn: two streams to each drive, whichever is faster.
    let mut args = vec!["backup", "--drives", "2", "--concurrency", "1"];
    args.extend(["--interleave", "in-turn"]);
    args.extend(srcs.iter().map(|p| p.to_str().unwrap()));
    let r = ok(&home, &args);
    let drives = r["drives"].as_array().unwrap();
    assert_eq!(drives.len(), 2, "{r}");
    for d in drives {
        assert!(
            d["bytes"].as_u64().unwrap() >= 50_000_000,
            "idle drive: {r}"
        );
        assert_eq!(d["streams"].as_array().unwrap().len(), 2, "{r}");
    }
    assert_eq!(drives[0]["streams"], serde_json::json!(["s0", "s2"]), "{r}");
    assert_eq!(drives[1]["streams"], serde_json::json!(["s1", "s3"]), "{r}");
    let vols: Vec<&str> = r["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(vols.len() >= 4, "each drive spans: {r}");
    let mut seen = vols.clone();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), vols.len(), "a cartridge used twice: {r}");
    let job = r["job_id"].as_i64().unwrap().to_string();

    assert_eq!(ok(&home, &["verify", &job])["ok"], true);
    let all = t.path().join("all");
    ok(&home, &["restore", &job, "--to", all.to_str().unwrap()]);
    for s in &srcs {
        assert_same_tree(s, &all.join(s.file_name().unwrap()));
    }
    // The catalog comes back from the cartridges of both drives.
    forget_catalog(&home);
    let rb = ok(&home, &["catalog", "rebuild"]);
    assert_eq!(rb["files_added"], 24, "{rb}");
    let one = t.path().join("one");
    let p = ok(
        &home,
        &["restore", "1", "--to", one.to_str().unwrap(), "s3/f4"],
    );
    assert!(
        p["bytes_read_from_tape"].as_u64().unwrap() < 12_000_000,
        "{p}"
    );
    assert_eq!(
        std::fs::read(one.join("s3/f4")).unwrap(),
        noise(304, 10_000_000)
    );
    // Asking for more drives than the library has is refused.
    let (code, _, err) = run(
        &home,
        &["backup", "--drives", "3", srcs[0].to_str().unwrap()].map(OsStr::new),
    );
    assert_eq!(code, 1);
    assert!(err.contains("3 drives"), "{err}");
}

/// Backs up three streams of 24 MB (noise seeded from `seed`, extents of 2 MiB
/// woven in turn, so that the tape's layout, and every modeled figure read from
/// it, is the same on every run) on a one-drive LTO-3 library at `scale` with the
/// virtual clock, then restores stream `s1` with each `--skip-by`: the backup's
/// JSON and each restore's, by mode.
fn one_stream_three_ways(
    t: &std::path::Path,
    scale: &str,
    seed: u64,
) -> (
    serde_json::Value,
    std::collections::HashMap<&'static str, serde_json::Value>,
) {
    let home = t.join("home");
    ok(
        &home,
        &[
            "library", "create", "--drives", "1", "--slots", "2", "--model", "lto3", "--clock",
            "virtual", "--scale", scale,
        ],
    );
    let mut args: Vec<String> = [
        "backup",
        "--concurrency",
        "3",
        "--limit-rate",
        "60MB",
        "--extent-size",
        "2M",
        "--interleave",
        "in-turn",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for s in 0..3u64 {
        let d = t.join(format!("s{s}"));
        for i in 0..3 {
            write(
                &d.join(format!("f{i}")),
                &noise(seed + 10 * s + i, 8_000_000),
            );
        }
        args.push(d.to_str().unwrap().to_string());
    }
    let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let r = ok(&home, &args);
    assert!(r["extents"].as_u64().unwrap() >= 9, "{r}");
    let job = r["job_id"].as_i64().unwrap().to_string();
    let mut by = std::collections::HashMap::new();
    for how in ["auto", "locate", "read"] {
        let out = t.join(how);
        let x = ok(
            &home,
            &[
                "restore",
                &job,
                "--to",
                out.to_str().unwrap(),
                "--stream",
                "s1",
                "--skip-by",
                how,
            ],
        );
        assert_same_tree(&t.join("s1"), &out.join("s1"));
        by.insert(how, x);
    }
    (r, by)
}

#[test]
fn restore_of_one_stream_skips_the_cheaper_way_by_the_drive_model() {
    let t = tempfile::tempdir().unwrap();
    let (_, by) = one_stream_three_ways(t.path(), "0.25", 0);
    let mut modeled = std::collections::HashMap::new();
    for (how, x) in &by {
        assert_eq!(x["streams"][0]["name"], "s1", "{x}");
        assert_eq!(x["streams"][0]["bytes"], 24_000_000, "{x}");
        assert!(
            x["drives"][0]["bytes"].as_u64().unwrap() > 24_000_000,
            "{x}"
        );
        let m = x["modeled_seconds"].as_f64().expect("a modeled drive");
        let bound = x["bound_seconds"].as_f64().expect("a bound");
        assert!(bound > 0.0 && bound <= m * 1.0001, "{x}");
        if *how == "auto" {
            // The model's choice at every gap: within 5 % of the bound.
            assert!(m <= bound / 0.95, "{x}");
            assert!(x["bound_mb_per_s"].as_f64().unwrap() > 0.0, "{x}");
        }
        if *how == "locate" {
            assert_eq!(x["read_through"], 0, "{x}");
            assert!(x["locates"].as_u64().unwrap() >= 2, "{x}");
        }
        modeled.insert(*how, m);
    }
    assert!(modeled["auto"] <= modeled["locate"] * 1.0001, "{modeled:?}");
    assert!(modeled["auto"] <= modeled["read"] * 1.0001, "{modeled:?}");
}

/// Where a stream's extents lie wraps apart, the serpentine brings them close: a
/// locate then beats reading through, while reading through still wins between
/// extents on one wrap. The restore takes each gap the cheaper way, so it beats both
/// plans. LTO-3 at scale 0.001 holds 9 MB a wrap, so this 72 MB job crosses eight
/// wraps (a full-size job of 72 GB would do the same).
#[test]
fn restore_of_one_stream_beats_reading_through_where_wraps_turn() {
    let t = tempfile::tempdir().unwrap();
    let (r, by) = one_stream_three_ways(t.path(), "0.001", 40);
    assert_eq!(r["volumes"].as_array().unwrap().len(), 1, "{r}");
    let modeled = |how: &str| {
        by[how]["modeled_seconds"]
            .as_f64()
            .expect("a modeled drive")
    };
    let x = &by["auto"];
    // Both ways were taken, each where it was cheaper.
    assert!(x["read_through"].as_u64().unwrap() >= 1, "{x}");
    assert!(x["locates"].as_u64().unwrap() >= 2, "{x}");
    let bound = x["bound_seconds"].as_f64().unwrap();
    assert!(modeled("auto") <= bound / 0.95, "{x}");
    assert!(modeled("auto") <= 0.97 * modeled("read"), "{by:?}");
    assert!(modeled("auto") <= 0.97 * modeled("locate"), "{by:?}");
}
