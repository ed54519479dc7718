//! `restore --overwrite`: what a restore does with files already at its paths.

use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A job of small and large files, restored once into `out`: (home, src, out, job).
fn restored_once(root: &Path) -> (PathBuf, PathBuf, PathBuf, String) {
    let (home, src, out) = (root.join("home"), root.join("src"), root.join("out"));
    write(&src.join("a.txt"), b"the backed-up a\n");
    write(&src.join("b.txt"), b"the backed-up b\n");
    write(&src.join("sub/big.bin"), &noise(7, 1_500_000));
    std::os::unix::fs::symlink("a.txt", src.join("link")).unwrap();
    set_times(&src.join("a.txt"), 1_600_000_000, 500);
    set_times(&src.join("sub/big.bin"), 1_600_000_000, 700);
    let b = ok(&home, &["backup", src.to_str().unwrap()]);
    let job = b["job_id"].to_string();
    let r = restore(&home, &job, &out, &[]);
    assert_eq!(r["files"], b["files"], "{r}");
    assert_eq!(r["skipped_count"], 0, "{r}");
    assert_same_tree(&src, &out);
    (home, src, out, job)
}

fn restore(home: &Path, job: &str, out: &Path, more: &[&str]) -> Value {
    let mut args = vec!["restore", job, "--to", out.to_str().unwrap()];
    args.extend_from_slice(more);
    ok(home, &args)
}

fn skipped(r: &Value) -> Vec<(String, String)> {
    (r["skipped"].as_array().unwrap().iter())
        .map(|s| {
            let f = |k: &str| s[k].as_str().unwrap().to_string();
            (f("path"), f("reason"))
        })
        .collect()
}

/// `assert_same_tree` after the test put files back by hand, which moved the root's
/// mtime.
fn assert_same_after_edits(src: &Path, out: &Path) {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(src).unwrap();
    set_times(out, m.mtime(), m.mtime_nsec());
    assert_same_tree(src, out);
}

/// Changes a restored file's contents, size and mtime.
fn edit(p: &Path, secs: i64) {
    std::fs::write(p, b"edited since the backup, and longer\n").unwrap();
    set_times(p, secs, 0);
}

#[test]
fn a_modified_file_is_kept_and_reported_by_default() {
    let t = tempfile::tempdir().unwrap();
    let (home, _src, out, job) = restored_once(t.path());
    edit(&out.join("a.txt"), 1_700_000_000);
    edit(&out.join("sub/big.bin"), 1_700_000_000);
    let r = restore(&home, &job, &out, &[]);
    let mut kept = skipped(&r);
    kept.sort();
    assert_eq!(
        kept,
        [
            ("a.txt".to_string(), "differs".to_string()),
            ("sub/big.bin".to_string(), "differs".to_string())
        ]
    );
    assert_eq!(r["skipped_count"], 2, "{r}");
    assert_eq!(r["errors"].as_array().unwrap().len(), 0, "{r}");
    // b.txt and the symlink were identical: restored, left as they were.
    assert!(r["unchanged"].as_u64().unwrap() >= 2, "{r}");
    let edited = b"edited since the backup, and longer\n";
    assert_eq!(std::fs::read(out.join("a.txt")).unwrap(), edited);
    assert_eq!(std::fs::read(out.join("sub/big.bin")).unwrap(), edited);

    // For people: exit 0, and the kept files named.
    let human = Command::new(bin())
        .arg("--home")
        .arg(&home)
        .args(["restore", &job, "--to"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(human.status.code(), Some(0));
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(text.contains("kept 2 files already there"), "{text}");
    assert!(text.contains("kept a.txt: it differs"), "{text}");
}

#[test]
fn always_replaces_a_modified_file() {
    let t = tempfile::tempdir().unwrap();
    let (home, src, out, job) = restored_once(t.path());
    edit(&out.join("a.txt"), 1_700_000_000);
    edit(&out.join("sub/big.bin"), 1_500_000_000);
    let r = restore(&home, &job, &out, &["--overwrite", "always"]);
    assert_eq!(r["skipped_count"], 0, "{r}");
    assert_eq!(r["unchanged"], 0, "{r}");
    assert_same_tree(&src, &out);
}

#[test]
fn if_newer_replaces_only_files_older_than_the_backup() {
    let t = tempfile::tempdir().unwrap();
    let (home, src, out, job) = restored_once(t.path());
    edit(&out.join("a.txt"), 1_700_000_000); // newer than the backup's: kept
    edit(&out.join("sub/big.bin"), 1_500_000_000); // older: replaced
    let r = restore(&home, &job, &out, &["--overwrite", "if-newer"]);
    assert_eq!(
        skipped(&r),
        [("a.txt".to_string(), "not-older".to_string())]
    );
    assert_eq!(
        std::fs::read(out.join("sub/big.bin")).unwrap(),
        std::fs::read(src.join("sub/big.bin")).unwrap()
    );
    std::fs::remove_file(out.join("a.txt")).unwrap();
    std::fs::copy(src.join("a.txt"), out.join("a.txt")).unwrap();
    set_times(&out.join("a.txt"), 1_600_000_000, 500);
    assert_same_after_edits(&src, &out);
}

#[test]
fn if_changed_replaces_files_whose_size_or_mtime_differ() {
    let t = tempfile::tempdir().unwrap();
    let (home, src, out, job) = restored_once(t.path());
    // Newer and of another size: replaced (if-newer would keep it).
    edit(&out.join("a.txt"), 1_700_000_000);
    // Other bytes, same size and mtime: taken for identical and left alone.
    let b = out.join("b.txt");
    let mtime = std::fs::symlink_metadata(&b).unwrap();
    std::fs::write(&b, b"THE BACKED-UP B\n").unwrap();
    use std::os::unix::fs::MetadataExt;
    set_times(&b, mtime.mtime(), mtime.mtime_nsec());
    let r = restore(&home, &job, &out, &["--overwrite", "if-changed"]);
    assert_eq!(r["skipped_count"], 0, "{r}");
    assert_eq!(
        std::fs::read(out.join("a.txt")).unwrap(),
        b"the backed-up a\n"
    );
    assert_eq!(std::fs::read(&b).unwrap(), b"THE BACKED-UP B\n");
    // One path of the job: the same rules.
    edit(&out.join("a.txt"), 1_700_000_000);
    let one = restore(&home, &job, &out, &["a.txt"]);
    assert_eq!(
        skipped(&one),
        [("a.txt".to_string(), "differs".to_string())]
    );
    let one = restore(&home, &job, &out, &["--overwrite", "if-changed", "a.txt"]);
    assert_eq!(one["skipped_count"], 0, "{one}");
    std::fs::write(&b, b"the backed-up b\n").unwrap();
    set_times(&b, mtime.mtime(), mtime.mtime_nsec());
    assert_same_after_edits(&src, &out);
}

#[test]
fn a_second_restore_of_every_kind_of_object_finds_each_identical() {
    let t = tempfile::tempdir().unwrap();
    let (home, src, out) = (
        t.path().join("home"),
        t.path().join("src"),
        t.path().join("out"),
    );
    rich_tree(&src);
    let b = ok(&home, &["backup", src.to_str().unwrap()]);
    let job = b["job_id"].to_string();
    restore(&home, &job, &out, &[]);
    let r = restore(&home, &job, &out, &[]);
    assert_eq!(r["files"], b["files"], "{r}");
    assert_eq!(r["skipped_count"], 0, "{r}");
    assert_eq!(r["errors"].as_array().unwrap().len(), 0, "{r}");
    assert_eq!(r["bytes"], 0, "{r}");
    assert_same_tree(&src, &out);
}
