//! Format compatibility: tapes written by format version 1 (committed in
//! `tests/golden/v1`, made by `tests/golden/make-v1.sh`), an encrypted job of
//! version 3 (`tests/golden/v3-encrypted`, with its key file) and a backup set of
//! version 4 (`tests/golden/v4-sets`: a full and an incremental) must stay readable:
//! the catalog is rebuilt from them alone, and they verify and restore.

use crate::common::*;
use tapeloom_format::{EntryType, Level};

#[test]
fn version_1_tapes_rebuild_verify_and_restore() {
    check_golden("v1", &[], &[]);
}

#[test]
fn version_3_encrypted_tapes_rebuild_verify_and_restore_with_their_key() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/v3-encrypted");
    let data = std::fs::read(dir.join("tapes/TL0001L9.data")).unwrap();
    let has = |n: &[u8]| data.windows(n.len()).any(|w| w == n);
    assert!(!has(b"hello, tape") && !has(b"noise.bin") && !has(b"hello.txt"));
    // LBN 2: the job's first block, in clear, with the JobKey record after JobStart.
    let idx = std::fs::read(dir.join("tapes/TL0001L9.idx")).unwrap();
    let at =
        |lbn: usize| u64::from_le_bytes(idx[lbn * 16..lbn * 16 + 8].try_into().unwrap()) as usize;
    let first = &data[at(2)..];
    assert_eq!(&first[..4], b"TLBK");
    assert_eq!((first[4], first[5]), (3, 1), "write and read version");
    assert_eq!(u16::from_le_bytes([first[42], first[43]]), 0, "flags");
    // LBN 3: a data block, encrypted: flag bit 1, read version 3.
    let b = &data[at(3)..];
    assert_eq!((b[4], b[5]), (3, 3));
    assert_eq!(u16::from_le_bytes([b[40], b[41]]), 1, "stream");
    assert_eq!(u16::from_le_bytes([b[42], b[43]]) & 2, 2, "flags");
    let key = dir.join("golden.key");
    // Without the key the rebuild is refused, naming the key.
    let t = tempfile::tempdir().unwrap();
    let home = golden_home(t.path(), "v3-encrypted");
    let (code, _, err) = run(
        &home,
        &[std::ffi::OsStr::new("catalog"), "rebuild".as_ref()],
    );
    assert_eq!(code, 1);
    assert!(
        err.contains("is encrypted with key 6a5861196210633d"),
        "{err}"
    );
    let passphrase = [("TAPELOOM_PASSPHRASE", "golden")];
    check_golden(
        "v3-encrypted",
        &passphrase,
        &["--key", key.to_str().unwrap()],
    );
}

#[test]
fn version_4_sets_rebuild_with_their_chain_merge_and_restore() {
    let t = tempfile::tempdir().unwrap();
    let home = golden_home(t.path(), "v4-sets");
    let r = ok(&home, &["catalog", "rebuild"]);
    assert_eq!(r["jobs_added"], serde_json::json!([1, 2]), "{r}");
    assert_eq!(r["bad_blocks"], 0);
    let cat = open_catalog(&home);
    let (full, inc) = (cat.job(1).unwrap().unwrap(), cat.job(2).unwrap().unwrap());
    assert_eq!(
        (full.set.as_str(), full.level, full.base),
        ("golden", Level::Full, None)
    );
    assert_eq!(
        (inc.set.as_str(), inc.level, inc.base),
        ("golden", Level::Incremental, Some(1))
    );
    // Their `JobStart` ends after the pool: written for no client.
    assert_eq!((full.client, inc.client), (None, None));
    // The deletion is the job's, not a row of it.
    let gone = vec![(b"gone.txt".to_vec(), EntryType::Regular as u8)];
    assert_eq!(cat.deletions(2).unwrap(), gone);
    assert!(cat.file(2, b"gone.txt").unwrap().is_none());
    let tree = cat.tree_at(2).unwrap();
    let paths: Vec<&str> = tree
        .keys()
        .map(|p| std::str::from_utf8(p).unwrap())
        .collect();
    assert_eq!(
        paths,
        vec![
            ".",
            "added",
            "added/a.txt",
            "added/b.txt",
            "dir",
            "dir/link",
            "dir/noise.bin",
            "dir/twin",
            "empty",
            "hello.txt"
        ]
    );
    // The metadata-only file: its new mode from job 2, its data from job 1.
    let hello = &tree[&b"hello.txt".to_vec()];
    assert!(hello.row.meta_only && hello.row.ctime_ns != 0 && hello.row.ino != 0);
    assert_eq!((hello.job, hello.row.mode, hello.row.size), (2, 0o600, 12));
    let (data_job, data_row) = hello.data.as_ref().expect("its data in the full");
    assert_eq!(
        (*data_job, data_row.meta_only, data_row.mode),
        (1, false, 0o644)
    );
    assert_eq!(data_row.crc, crc32c::crc32c(b"hello, tape\n"));
    // Hard links: one kept from the full, one made in the incremental.
    let kind = |p: &[u8]| tree[&p.to_vec()].row.kind;
    let link = |p: &[u8]| tree[&p.to_vec()].row.link.clone();
    assert_eq!(kind(b"dir/twin"), EntryType::HardLink as u8);
    assert_eq!(link(b"dir/twin"), b"dir/noise.bin");
    assert_eq!(tree[&b"dir/twin".to_vec()].job, 1);
    assert_eq!(kind(b"added/b.txt"), EntryType::HardLink as u8);
    assert_eq!(link(b"added/b.txt"), b"added/a.txt");
    assert_eq!(tree[&b"added/b.txt".to_vec()].job, 2);
    // The full's tree has what it held, the deleted file included.
    let at_full = cat.tree_at(1).unwrap();
    assert!(at_full.contains_key(b"gone.txt".as_slice()));
    assert_eq!(at_full.len(), 8);
    drop(cat);
    assert_eq!(ok(&home, &["verify", "1"])["ok"], true);
    assert_eq!(ok(&home, &["verify", "2"])["ok"], true);
    let out = t.path().join("out");
    let rr = ok(&home, &["restore", "1", "--to", out.to_str().unwrap()]);
    assert_eq!(rr["files"], 8, "{rr}");
    assert_eq!(
        std::fs::read(out.join("hello.txt")).unwrap(),
        b"hello, tape\n"
    );
    assert_eq!(std::fs::read(out.join("gone.txt")).unwrap(), b"soon gone\n");
    assert_eq!(
        std::fs::read(out.join("dir/noise.bin")).unwrap(),
        noise(7, 20_000)
    );
    assert_eq!(ino(&out.join("dir/twin")), ino(&out.join("dir/noise.bin")));
    assert_eq!(
        std::fs::read_link(out.join("dir/link")).unwrap().to_str(),
        Some("../hello.txt")
    );
    let m = meta(&out.join("hello.txt"), true);
    assert_eq!(m.mtime, (1_577_934_245, 123_456_789));
}

/// A home with a small library holding the golden image `name`.
fn golden_home(t: &std::path::Path, name: &str) -> std::path::PathBuf {
    let home = t.join("home");
    library(&home, 1, 2, "4M");
    let golden = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
        .join("tapes");
    for f in ["TL0001L9.data", "TL0001L9.idx"] {
        std::fs::copy(golden.join(f), home.join("library/tapes").join(f)).unwrap();
    }
    home
}

/// Rebuilds, lists, verifies and restores the golden image `name` with the
/// variables `env`; `key` is added to the commands that read blocks.
fn check_golden(name: &str, env: &[(&str, &str)], key: &[&str]) {
    let with =
        |args: &[&str]| -> Vec<String> { args.iter().chain(key).map(|s| s.to_string()).collect() };
    let okk = |home: &std::path::Path, args: &[&str]| {
        let a = with(args);
        ok_env(home, env, &a.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let t = tempfile::tempdir().unwrap();
    let home = golden_home(t.path(), name);
    let r = okk(&home, &["catalog", "rebuild"]);
    assert_eq!(r["jobs_added"], serde_json::json!([1]), "{r}");
    assert_eq!(r["bad_blocks"], 0);
    // Labels older than write version 4 hold no generation: they read as 0.
    let st = ok(&home, &["library", "status"]);
    let tl1 = cartridge_in(&st, "TL0001L9");
    assert_eq!(tl1["generation"], 0, "{st}");
    let jobs = ok(&home, &["jobs"]);
    assert_eq!(jobs["jobs"][0]["name"], "golden");
    assert_eq!(jobs["jobs"][0]["status"], "ok");
    // A job from before backup sets is a set of its own, a full.
    let cat = open_catalog(&home);
    let j = cat.job(1).unwrap().unwrap();
    assert_eq!(
        (j.set.as_str(), j.level, j.base),
        ("golden", Level::Full, None)
    );
    assert!(cat.deletions(1).unwrap().is_empty());
    drop(cat);
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
    assert_eq!(okk(&home, &["verify", "1"])["ok"], true);
    let out = t.path().join("out");
    let rr = okk(&home, &["restore", "1", "--to", out.to_str().unwrap()]);
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
