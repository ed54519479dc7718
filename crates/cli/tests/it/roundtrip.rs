//! Backup and restore of real trees through the `tapeloom` binary.

use crate::common::*;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

#[test]
fn every_kind_of_object_restores_identical() {
    let t = tempfile::tempdir().unwrap();
    let (home, src, out) = (
        t.path().join("home"),
        t.path().join("src"),
        t.path().join("out"),
    );
    rich_tree(&src);
    let b = ok(&home, &["backup", src.to_str().unwrap()]);
    assert_eq!(b["status"], "ok", "{b}");
    assert_eq!(b["errors"].as_array().unwrap().len(), 0);
    assert_eq!(b["volumes"][0], "TL0001L9");
    let job = b["job_id"].as_i64().unwrap().to_string();
    let r = ok(&home, &["restore", &job, "--to", out.to_str().unwrap()]);
    assert_eq!(r["files"], b["files"], "{r}");
    assert_eq!(r["errors"].as_array().unwrap().len(), 0, "{r}");
    assert_same_tree(&src, &out);
    assert_eq!(ino(&out.join("hardlink")), ino(&out.join("dir/plain.txt")));
    let v = ok(&home, &["verify", &job]);
    assert_eq!(v["ok"], true, "{v}");
    assert!(v["blocks_checked"].as_u64().unwrap() > 0);
}

#[test]
fn ls_lists_paths_with_positions() {
    let t = tempfile::tempdir().unwrap();
    let (home, src) = (t.path().join("home"), t.path().join("src"));
    rich_tree(&src);
    let b = ok(
        &home,
        &["backup", src.to_str().unwrap(), "--name", "nightly"],
    );
    let job = b["job_id"].as_i64().unwrap().to_string();
    let all = ok(&home, &["ls", &job]);
    let entries = all["entries"].as_array().unwrap();
    assert_eq!(entries.len() as u64, b["files"].as_u64().unwrap());
    let plain = entries
        .iter()
        .find(|e| e["path"] == "dir/plain.txt")
        .unwrap();
    assert_eq!(plain["type"], "file");
    assert_eq!(plain["size"], 11);
    assert_eq!(plain["mtime"], "2001-09-09T01:46:40.123456789Z");
    assert_eq!(plain["volume"], "TL0001L9");
    assert!(plain["block"].as_u64().unwrap() >= 2);
    let sub = ok(&home, &["ls", &job, "dir/sub"]);
    let paths: Vec<&str> = sub["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, vec!["dir/sub", "dir/sub/big.bin"]);
    let jobs = ok(&home, &["jobs"]);
    assert_eq!(jobs["jobs"][0]["name"], "nightly");
    assert_eq!(jobs["jobs"][0]["status"], "ok");
    let (code, _, err) = run(
        &home,
        &[OsStr::new("ls"), OsStr::new(&job), OsStr::new("no/such")],
    );
    assert_ne!(code, 0);
    assert!(err.contains("no path no/such"), "{err}");
}

#[test]
fn single_file_restore_reads_only_its_blocks() {
    let t = tempfile::tempdir().unwrap();
    let (home, src, out) = (
        t.path().join("home"),
        t.path().join("src"),
        t.path().join("out"),
    );
    // 96 MiB of other files around one 1 MiB file.
    for i in 0..12 {
        write(&src.join(format!("a{i:02}.bin")), &noise(10 + i, 4 << 20));
    }
    let wanted = noise(99, 1 << 20);
    write(&src.join("m/wanted.bin"), &wanted);
    for i in 0..12 {
        write(&src.join(format!("z{i:02}.bin")), &noise(50 + i, 4 << 20));
    }
    let b = ok(&home, &["backup", src.to_str().unwrap()]);
    let job = b["job_id"].as_i64().unwrap().to_string();
    let r = ok(
        &home,
        &[
            "restore",
            &job,
            "--to",
            out.to_str().unwrap(),
            "m/wanted.bin",
        ],
    );
    assert_eq!(r["files"], 1, "{r}");
    assert_eq!(std::fs::read(out.join("m/wanted.bin")).unwrap(), wanted);
    let read = r["bytes_read_from_tape"].as_u64().unwrap();
    assert!(read < 2 << 20, "read {read} bytes for a 1 MiB file");
    assert!(!out.join("a00.bin").exists());
    // A directory restores just its contents.
    let out2 = t.path().join("out2");
    let r = ok(
        &home,
        &["restore", &job, "--to", out2.to_str().unwrap(), "m"],
    );
    assert_eq!(r["files"], 2, "{r}");
    assert!(r["bytes_read_from_tape"].as_u64().unwrap() < 2 << 20);
}

#[test]
fn several_sources_are_top_level_folders() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let a = t.path().join("x/data");
    let b = t.path().join("y/data");
    write(&a.join("one"), b"1");
    write(&b.join("two"), b"2");
    let r = ok(&home, &["backup", a.to_str().unwrap(), b.to_str().unwrap()]);
    let job = r["job_id"].as_i64().unwrap().to_string();
    let out = t.path().join("out");
    ok(&home, &["restore", &job, "--to", out.to_str().unwrap()]);
    assert_eq!(std::fs::read(out.join("data/one")).unwrap(), b"1");
    assert_eq!(std::fs::read(out.join("data-2/two")).unwrap(), b"2");
}

#[test]
fn non_utf8_paths_restore_by_name() {
    let t = tempfile::tempdir().unwrap();
    let (home, src, out) = (
        t.path().join("home"),
        t.path().join("src"),
        t.path().join("out"),
    );
    let name = OsStr::from_bytes(b"caf\xe9");
    write(&src.join(name), b"coffee");
    let b = ok(&home, &["backup", src.to_str().unwrap()]);
    let job = b["job_id"].as_i64().unwrap().to_string();
    let ls = ok(&home, &["ls", &job]);
    assert!(ls["entries"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["path"] == "caf\\xe9"));
    let (code, r, err) = run(
        &home,
        &[
            OsStr::new("restore"),
            OsStr::new(&job),
            OsStr::new("--to"),
            out.as_os_str(),
            name,
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["files"], 1);
    assert_eq!(std::fs::read(out.join(name)).unwrap(), b"coffee");
}

#[test]
fn a_backup_never_reads_its_own_home() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    let home = src.join("tapeloom-home");
    write(&src.join("data"), b"data");
    let b = ok(&home, &["backup", src.to_str().unwrap()]);
    assert_eq!(b["status"], "ok", "{b}");
    let job = b["job_id"].as_i64().unwrap().to_string();
    let ls = ok(&home, &["ls", &job]);
    let paths: Vec<&str> = ls["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, vec![".", "data"]);
}

#[test]
fn zstd_compression_stores_less_and_restores_identical() {
    let t = tempfile::tempdir().unwrap();
    let (home, src) = (t.path().join("home"), t.path().join("src"));
    rich_tree(&src);
    let text: Vec<u8> = (0..6_000_000u32)
        .map(|i| b"tape backup streams "[(i % 20) as usize])
        .collect();
    write(&src.join("big/text.log"), &text);
    write(&src.join("big/random.bin"), &noise(5, 4_000_000));
    let b = ok(
        &home,
        &["backup", src.to_str().unwrap(), "--compress", "zstd"],
    );
    let c = &b["compression"];
    assert_eq!(c["software"], "zstd", "{b}");
    assert!(c["compressed_blocks"].as_u64().unwrap() >= 10, "{b}");
    // The random file does not shrink: its blocks are stored as they are.
    assert!(c["stored_as_is_blocks"].as_u64().unwrap() >= 10, "{b}");
    assert!(c["ratio"].as_f64().unwrap() > 1.5, "{b}");
    let raw = c["raw_bytes"].as_u64().unwrap();
    let tape = std::fs::metadata(home.join("library/tapes/TL0001L9.data"))
        .unwrap()
        .len();
    assert!(
        tape < raw * 7 / 10,
        "{tape} bytes on tape for {raw} bytes of blocks"
    );
    let job = b["job_id"].as_i64().unwrap().to_string();
    assert_eq!(ok(&home, &["verify", &job])["ok"], true);
    let out = t.path().join("out");
    ok(&home, &["restore", &job, "--to", out.to_str().unwrap()]);
    assert_same_tree(&src, &out);
    let one = t.path().join("one");
    ok(
        &home,
        &[
            "restore",
            &job,
            "--to",
            one.to_str().unwrap(),
            "big/text.log",
        ],
    );
    assert_eq!(std::fs::read(one.join("big/text.log")).unwrap(), text);
    forget_catalog(&home);
    assert_eq!(ok(&home, &["catalog", "rebuild"])["jobs_added"][0], 1);
    assert_eq!(ok(&home, &["verify", "1"])["ok"], true);
    // auto on a library without a drive model stores data as it is (disk is faster
    // than zstd on a few cores).
    let b2 = ok(&home, &["backup", src.to_str().unwrap()]);
    assert_eq!(b2["compression"]["software"], "none", "{b2}");
}
