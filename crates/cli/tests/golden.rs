//! Format compatibility: tapes written by format version 1 (committed in
//! `tests/golden/v1`, made by `tests/golden/make-v1.sh`) must stay readable: the
//! catalog is rebuilt from them alone, and they verify and restore.

mod common;
use common::*;

#[test]
fn version_1_tapes_rebuild_verify_and_restore() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    ok(
        &home,
        &[
            "library",
            "create",
            "--drives",
            "1",
            "--slots",
            "2",
            "--capacity",
            "4M",
        ],
    );
    let golden = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/v1/tapes");
    for f in ["TL0001L9.data", "TL0001L9.idx"] {
        std::fs::copy(golden.join(f), home.join("library/tapes").join(f)).unwrap();
    }
    let r = ok(&home, &["catalog", "rebuild"]);
    assert_eq!(r["jobs_added"], serde_json::json!([1]), "{r}");
    assert_eq!(r["bad_blocks"], 0);
    let jobs = ok(&home, &["jobs"]);
    assert_eq!(jobs["jobs"][0]["name"], "golden");
    assert_eq!(jobs["jobs"][0]["status"], "ok");
    let ls = ok(&home, &["ls", "1"]);
    let paths: Vec<&str> = ls["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        vec![
            ".",
            "dir",
            "dir/link",
            "dir/noise.bin",
            "empty",
            "hello.txt"
        ]
    );
    assert_eq!(ok(&home, &["verify", "1"])["ok"], true);
    let out = t.path().join("out");
    let rr = ok(&home, &["restore", "1", "--to", out.to_str().unwrap()]);
    assert_eq!(rr["files"], 6, "{rr}");
    assert_eq!(
        std::fs::read(out.join("hello.txt")).unwrap(),
        b"hello, tape\n"
    );
    assert_eq!(
        std::fs::read(out.join("dir/noise.bin")).unwrap(),
        noise(7, 200_000)
    );
    assert_eq!(
        std::fs::read_link(out.join("dir/link")).unwrap().to_str(),
        Some("../hello.txt")
    );
    assert!(out.join("empty").is_dir());
    let m = meta(&out.join("hello.txt"), true);
    assert_eq!(m.mtime, (1_577_934_245, 123_456_789));
}
