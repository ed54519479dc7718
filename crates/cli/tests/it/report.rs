//! Samples stored with jobs (ten a second in a job's first minute, then one a
//! second), and `tapeloom report`.

use crate::common::*;

/// Backs up two sources, alpha and beta, of `files` files of 4 MB each, woven
/// together at 8 MB/s per stream; returns the backup's JSON.
fn back_up_two_streams(
    dir: &std::path::Path,
    home: &std::path::Path,
    files: u64,
) -> serde_json::Value {
    let (a, b) = (dir.join("alpha"), dir.join("beta"));
    for i in 0..files {
        write(&a.join(format!("a{i}")), &noise(i, 4_000_000));
        write(&b.join(format!("b{i}")), &noise(10 + i, 4_000_000));
    }
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    ok(
        home,
        &["backup", a, b, "--concurrency", "2", "--limit-rate", "8MB"],
    )
}

#[test]
fn a_job_of_half_a_second_is_sampled_often_enough_to_draw_its_throughput() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    // 4 MB at 8 MB/s per stream: about half a second.
    let r = back_up_two_streams(t.path(), &home, 1);
    // What the job cost in CPU, in all and per GB of its data.
    let cpu = r["cpu_seconds"].as_f64().unwrap();
    let per_gb = r["cpu_seconds_per_gb"].as_f64().unwrap();
    assert!(cpu > 0.0 && per_gb > 0.0, "{r}");
    let gb = r["bytes"].as_f64().unwrap() / 1e9;
    assert!((per_gb * gb - cpu).abs() < 1e-6, "{r}");
    let job = r["job_id"].as_i64().unwrap().to_string();
    let out = t.path().join("short.svg");
    let x = ok(&home, &["report", &job, "--out", out.to_str().unwrap()]);
    // Ten a second: a few rounds of samples, each of the drive and both streams.
    assert!(x["samples"].as_u64().unwrap() >= 9, "{x}");
    let svg = std::fs::read_to_string(&out).unwrap();
    assert!(!svg.contains("at least two samples"), "{svg}");
}

#[test]
fn samples_are_stored_and_drawn_as_svg_png_and_html() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    // 24 MB at 8 MB/s per stream: about a second and a half, so a few samples.
    let r = back_up_two_streams(t.path(), &home, 3);
    let job = r["job_id"].as_i64().unwrap().to_string();
    for ext in ["svg", "png", "html"] {
        let out = t.path().join(format!("job.{ext}"));
        let x = ok(&home, &["report", &job, "--out", out.to_str().unwrap()]);
        assert!(x["samples"].as_u64().unwrap() >= 6, "{x}");
        let bytes = std::fs::read(&out).unwrap();
        match ext {
            "png" => assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n"),
            _ => {
                let text = String::from_utf8(bytes).unwrap();
                assert!(text.contains("<svg"), "{ext}");
                assert!(text.contains("alpha") && text.contains("beta"), "{ext}");
            }
        }
    }
    // The last sample of the drive holds every byte the job wrote.
    let x = ok(
        &home,
        &[
            "report",
            &job,
            "--out",
            t.path().join("j.svg").to_str().unwrap(),
        ],
    );
    assert!(
        x["drives"][0]["bytes"].as_u64().unwrap() >= 24_000_000,
        "{x}"
    );
    // What the drive said about the cartridge at the end of the mount: no TapeAlert
    // flag, and this mount's megabytes.
    let d = &r["drives"][0];
    assert_eq!(d["tape_alerts"], serde_json::json!([]), "{d}");
    let cart = &d["cartridges"][0];
    assert_eq!(cart["barcode"], d["volumes"][0], "{d}");
    let written = cart["volume_statistics"]["last_mount_mb_written"]
        .as_u64()
        .unwrap();
    assert!((24..=26).contains(&written), "{d}");
    assert_eq!(
        x["cartridges"][0]["volume_statistics"],
        cart["volume_statistics"]
    );
    let html = std::fs::read_to_string(t.path().join("job.html")).unwrap();
    assert!(
        html.contains("TapeAlert: none; this mount"),
        "report lacks drive health"
    );
    let out = t.path().join("out");
    let rr = ok(&home, &["restore", &job, "--to", out.to_str().unwrap()]);
    let read = rr["drives"][0]["cartridges"][0]["volume_statistics"]["last_mount_mb_read"]
        .as_u64()
        .unwrap();
    assert!((24..=26).contains(&read), "{rr}");
    let x = ok(
        &home,
        &[
            "report",
            &job,
            "--op",
            "restore",
            "--out",
            t.path().join("r.html").to_str().unwrap(),
        ],
    );
    assert!(
        x["drives"][0]["bytes"].as_u64().unwrap() >= 24_000_000,
        "{x}"
    );
    let (code, _, err) = run(
        &home,
        &["report", &job, "--out", "x.txt"].map(std::ffi::OsStr::new),
    );
    assert_eq!(code, 1);
    assert!(err.contains(".svg"), "{err}");
}

/// The report marks loading, positioning and the index write on the time axis and
/// gives the drive's rate while data moved next to its rate over the whole job. (With
/// the real clock an LTO-3 load takes 17 s of the job; the virtual clock keeps this
/// test short, so the spans are short too. The rates themselves are checked in the
/// report crate's tests.)
#[test]
fn loading_and_index_are_marked_and_data_phase_rates_shown() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    library_with(&home, 1, 2, "1G", &["--model", "lto3"]);
    let r = back_up_two_streams(t.path(), &home, 2);
    let job = r["job_id"].as_i64().unwrap().to_string();
    let html = t.path().join("j.html");
    let x = ok(&home, &["report", &job, "--out", html.to_str().unwrap()]);
    let spans = x["spans"].as_array().unwrap();
    let span = |what: &str| {
        spans
            .iter()
            .find(|s| s["what"] == what)
            .unwrap_or_else(|| panic!("no {what} span: {x}"))
    };
    let load = span("loading");
    let (from, to) = (
        load["from_s"].as_f64().unwrap(),
        load["to_s"].as_f64().unwrap(),
    );
    assert!(to >= from, "{x}");
    assert_eq!(load["drive"], "0", "{x}");
    let index = span("index");
    assert!(index["from_s"].as_f64().unwrap() >= to, "{x}");
    span("positioning");
    assert!(
        x["drives"][0]["data_mb_per_s"].as_f64().unwrap() > 0.0,
        "{x}"
    );
    assert!(x["data_mb_per_s"].as_f64().unwrap() > 0.0, "{x}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("while data moved"),
        "summary lacks data-phase rates"
    );
    assert!(
        page.contains("time without data"),
        "summary lacks the spans"
    );
    assert!(page.contains("loading"), "figure lacks the loading span");
    // A restore marks its load (the cartridge back from its slot) and the label
    // read, as the restore's own spans.
    ok(&home, &["library", "unload"]);
    let out = t.path().join("out");
    ok(&home, &["restore", &job, "--to", out.to_str().unwrap()]);
    let svg = t.path().join("r.svg");
    let x = ok(
        &home,
        &[
            "report",
            &job,
            "--op",
            "restore",
            "--out",
            svg.to_str().unwrap(),
        ],
    );
    let whats: Vec<&str> = (x["spans"].as_array().unwrap().iter())
        .filter_map(|s| s["what"].as_str())
        .collect();
    assert!(
        whats.contains(&"loading") && whats.contains(&"positioning"),
        "{x}"
    );
    assert!(!whats.contains(&"index"), "{x}");
}
