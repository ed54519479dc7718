//! Files appear under their names only once whole (a killed restore leaves
//! temporary files, which the next one removes), and a failure of the file
//! system reads the same for every kind of object.

mod common;
use common::*;
use serde_json::Value;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Runs `restore JOB --to OUT` and `more` arguments: (exit code, document,
/// standard error).
fn run_restore(home: &Path, job: &str, out: &Path, more: &[&str]) -> (i32, Value, String) {
    let mut args: Vec<&OsStr> = vec!["restore".as_ref(), job.as_ref(), "--to".as_ref()];
    args.push(out.as_os_str());
    args.extend(more.iter().map(OsStr::new));
    run(home, &args)
}

/// The reasons the restore document gives for `path`.
fn reasons(r: &Value, path: &str) -> Vec<String> {
    (r["errors"].as_array().unwrap().iter())
        .filter(|e| e["path"] == path)
        .map(|e| e["reason"].as_str().unwrap().to_string())
        .collect()
}

/// Every name below `root` that is a restore's temporary name.
fn temporary_files(root: &Path) -> Vec<PathBuf> {
    (tree(root).into_iter())
        .filter(|(rel, _)| {
            let name = rel.rsplit(|&b| b == b'/').next().unwrap_or(&[]);
            name.starts_with(b".") && name.windows(10).any(|w| w == b".tapeloom-")
        })
        .map(|(_, p)| p)
        .collect()
}

/// A restore killed partway leaves its files under temporary names, never a cut
/// file under a real name; the next restore into the same folder removes them,
/// with default options, and completes the tree. A name that only looks alike is
/// left alone.
#[test]
fn a_restore_run_again_removes_what_a_killed_one_left() {
    let t = tempfile::tempdir().unwrap();
    let (home, src, out) = (
        t.path().join("home"),
        t.path().join("src"),
        t.path().join("out"),
    );
    rich_tree(&src);
    write(&src.join("dir/sub/large.bin"), &noise(9, 1_808_917));
    let b = ok(&home, &["backup", src.to_str().unwrap()]);
    let job = b["job_id"].to_string();
    ok(&home, &["restore", &job, "--to", out.to_str().unwrap()]);
    assert_same_tree(&src, &out);
    // What a restore killed while writing leaves: the files it had not placed
    // absent, their temporary files cut short.
    for (rel, len) in [
        ("dir/sub/large.bin", 1_736_704),
        ("with space", 0),
        ("zero", 3),
    ] {
        let p = out.join(rel);
        std::fs::remove_file(&p).unwrap();
        let name = p.file_name().unwrap().as_bytes();
        let temp = [b".", name, b".tapeloom-0000abcd00000007"].concat();
        write(&p.with_file_name(OsStr::from_bytes(&temp)), &noise(4, len));
    }
    // Not a temporary name (too few digits): someone's file, kept.
    let lookalike = out.join("dir/.plain.txt.tapeloom-0000abcd");
    write(&lookalike, b"mine");
    let r = ok(&home, &["restore", &job, "--to", out.to_str().unwrap()]);
    assert_eq!(r["skipped_count"], 0, "{r}");
    assert_eq!(temporary_files(&out), std::slice::from_ref(&lookalike));
    // Taken away again, with the folder's time as the restore set it.
    std::fs::remove_file(&lookalike).unwrap();
    use std::os::unix::fs::MetadataExt;
    let d = std::fs::symlink_metadata(src.join("dir")).unwrap();
    set_times(&out.join("dir"), d.mtime(), d.mtime_nsec());
    assert_same_tree(&src, &out);
}

/// Unmounts a bind mount when dropped.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// A restore onto a file system that refuses writes: a fifo's failure and a
/// file's read alike, `create PATH: WHY (os error N)`.
#[test]
fn a_fifo_and_a_file_fail_in_the_same_words() {
    let t = tempfile::tempdir().unwrap();
    let (home, src, out) = (
        t.path().join("home"),
        t.path().join("src"),
        t.path().join("out"),
    );
    write(&src.join("big0.bin"), &noise(1, 400_000));
    write(&src.join("small.txt"), b"small");
    nix::unistd::mkfifo(
        &src.join("a.fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    let job = ok(&home, &["backup", src.to_str().unwrap()])["job_id"].to_string();
    std::fs::create_dir_all(&out).unwrap();
    let _mounted = if is_root() {
        let mount = |args: &[&str]| {
            std::process::Command::new("mount")
                .args(args)
                .arg(&out)
                .arg(&out)
                .status()
                .is_ok_and(|s| s.success())
        };
        if !mount(&["--bind"]) {
            eprintln!("skipped: this root may not bind-mount a read-only folder");
            return;
        }
        let m = Mounted(out.clone());
        let ro = std::process::Command::new("mount")
            .args(["-o", "remount,bind,ro"])
            .arg(&out)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ro, "remount read-only");
        Some(m)
    } else {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o555)).unwrap();
        None
    };
    let (code, r, err) = run_restore(&home, &job, &out, &[]);
    assert_eq!(code, 1, "{r} {err}");
    let worded = |name: &str| {
        let p = out.join(name).display().to_string();
        let said = reasons(&r, name);
        assert_eq!(said.len(), 1, "{name}: {r}");
        let why = (said[0].strip_prefix(&format!("create {p}: ")))
            .unwrap_or_else(|| panic!("{name}: {}", said[0]))
            .to_string();
        assert!(
            why.ends_with(" (os error 30)") || why.ends_with(" (os error 13)"),
            "{why}"
        );
        why
    };
    let fifo = worded("a.fifo");
    assert_eq!(fifo, worded("big0.bin"));
    assert_eq!(fifo, worded("small.txt"));
}
