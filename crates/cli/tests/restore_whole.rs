//! A restore's failures, as the file system gives them: a failure reads the same
//! for every kind of object.

mod common;
use common::*;
use serde_json::Value;
use std::ffi::OsStr;
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
