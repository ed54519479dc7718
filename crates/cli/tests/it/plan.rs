//! `tapeloom plan`: a window predicted from stated sources, readrate output and
//! past jobs, and the sizing answers.

use crate::common::*;

#[test]
fn a_plan_says_what_binds_and_solves_for_drives() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    // Fast sources: the drive binds, at its top rate.
    let p = ok(
        &home,
        &["plan", "--source", "200G@500MB", "--model", "lto9"],
    );
    assert_eq!(p["binds"], "drives", "{p}");
    let d = &p["drives"][0];
    assert!(
        (d["mb_per_s"].as_f64().unwrap() - 400.0).abs() < 10.0,
        "{p}"
    );
    assert_eq!(d["backhitches"], 0, "{p}");
    assert!(p["plan_seconds"].as_f64().unwrap() < 1.0, "{p}");
    // A slow source: backhitches, and the verdict says what to change.
    let p = ok(&home, &["plan", "--source", "50G@60MB", "--model", "lto9"]);
    assert_eq!(p["binds"], "sources", "{p}");
    assert!(p["drives"][0]["backhitches"].as_u64().unwrap() > 0, "{p}");
    let verdict = p["verdict"].to_string();
    assert!(verdict.contains("--stage"), "{verdict}");
    // The fewest drives for a night: that many fit, one fewer does not.
    let args = [
        "plan",
        "--source",
        "1T@200MBx16",
        "--model",
        "lto9",
        "--window",
        "8h",
    ];
    let mut solve = args.to_vec();
    solve.extend(["--solve", "drives"]);
    let s = ok(&home, &solve);
    let n = s["answer"].as_u64().unwrap();
    assert!(n >= 2, "{s}");
    assert_eq!(s["fits"], true, "{s}");
    let fewer = (n - 1).to_string();
    let mut one_less = args.to_vec();
    one_less.extend(["--drives", &fewer]);
    let f = ok(&home, &one_less);
    assert_eq!(f["fits"], false, "{f}");
}

#[test]
fn a_plan_reads_readrate_output_and_past_jobs() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    library(&home, 1, 2, "1G");
    let src = t.path().join("src");
    rich_tree(&src);
    let rr = ok(&home, &["readrate", src.to_str().unwrap()]);
    let file = t.path().join("rates.json");
    std::fs::write(&file, rr.to_string()).unwrap();
    let p = ok(
        &home,
        &[
            "plan",
            "--readrate",
            file.to_str().unwrap(),
            "--model",
            "lto3",
        ],
    );
    assert_eq!(p["total_bytes"], rr["total_bytes"], "{p}");
    let b = ok(&home, &["backup", "gen:hp-typical:64M"]);
    let job = b["job_id"].to_string();
    let h = ok(&home, &["plan", "--history", &job, "--model", "lto3"]);
    assert_eq!(h["sources"].as_array().unwrap().len(), 1, "{h}");
    assert!(h["total_bytes"].as_u64().unwrap() > 0, "{h}");
    // What cannot be planned from is one line.
    for (args, words) in [
        (vec!["plan"], &["nothing to plan"][..]),
        (
            vec!["plan", "--source", "1T"],
            &["--source '1T'", "no @"][..],
        ),
        (vec!["plan", "--source", "1T@fast"], &["fast"][..]),
        (
            vec!["plan", "--source", "1T@100MB", "--solve", "drives"],
            &["--window"][..],
        ),
        (vec!["plan", "--history", "99"], &["job 99"][..]),
    ] {
        let a: Vec<&std::ffi::OsStr> = args.iter().map(|s| s.as_ref()).collect();
        let (code, _, err) = run(&home, &a);
        assert_one_line_error(code, &err, words);
    }
}
