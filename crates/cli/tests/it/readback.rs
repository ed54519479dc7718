//! Read-back of a pool (`verify --pool NAME --older-than D`): every job read back
//! and checked, the result kept with each job (`jobs`), and a cartridge with a bad
//! block marked suspect.

use crate::common::keyed::flip;
use crate::common::*;
use std::ffi::OsStr;

#[test]
fn a_pools_read_back_keeps_each_result_and_marks_a_damaged_cartridge_suspect() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    small_library(&home);
    let src = t.path().join("src");
    for i in 0..4 {
        write(&src.join(format!("f{i}")), &noise(i, 600_000));
    }
    let j1 = ok(&home, &["backup", src.to_str().unwrap()])["job_id"]
        .as_i64()
        .unwrap();
    let j2 = ok(&home, &["backup", src.to_str().unwrap()])["job_id"]
        .as_i64()
        .unwrap();

    let v = ok(&home, &["verify", "--pool", "default"]);
    assert_eq!(v["ok"], true, "{v}");
    let ids: Vec<i64> = (v["jobs"].as_array().unwrap().iter())
        .map(|j| j["job_id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, vec![j1, j2], "{v}");
    let jobs = ok(&home, &["jobs"]);
    for j in jobs["jobs"].as_array().unwrap() {
        let last = &j["last_verified"];
        assert_eq!(
            (last["ok"].as_bool(), last["how"].as_str()),
            (Some(true), Some("verify --pool")),
            "{j}"
        );
    }
    // Read back within the hour: left alone.
    let v = ok(
        &home,
        &["verify", "--pool", "default", "--older-than", "1h"],
    );
    assert_eq!(v["jobs"].as_array().map(Vec::len), Some(0), "{v}");
    assert_eq!(v["skipped"].as_array().map(Vec::len), Some(2), "{v}");

    // A flipped byte in the first job's first data block.
    flip(&home, 3, false);
    let args: Vec<&OsStr> = ["verify", "--pool", "default"]
        .iter()
        .map(OsStr::new)
        .collect();
    let (code, v, err) = run(&home, &args);
    assert_ne!(code, 0, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("pool default") && err.contains(&j1.to_string()),
        "{err}"
    );
    assert_eq!(v["jobs"][0]["ok"], false, "{v}");
    let jobs = ok(&home, &["jobs"]);
    let first = &jobs["jobs"][0]["last_verified"];
    assert_eq!(first["ok"], false, "{jobs}");
    assert!(first["bad_blocks"].as_u64().unwrap() >= 1, "{jobs}");
    let s = ok(&home, &["library", "status"]);
    let tape = (s["cartridges"].as_array().unwrap().iter())
        .find(|c| c["barcode"] == "TL0001L9")
        .unwrap();
    assert_eq!(tape["state"], "suspect", "{s}");
    assert!(
        tape["notes"][0].as_str().unwrap().contains("bad blocks"),
        "{s}"
    );
}
