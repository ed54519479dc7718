//! A home on a read-only file system (a snapshot, a disaster-recovery copy): the
//! commands that only read it work there, a restore is identical, and a command
//! that must write says so in one line.

use crate::common::*;
use std::process::Command;

#[test]
fn a_read_only_home_lists_restores_and_verifies_and_a_backup_says_why_not() {
    if !need(program("unshare", "util-linux")) {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let (home, ro, src, out) = (
        t.path().join("home"),
        t.path().join("ro"),
        t.path().join("src"),
        t.path().join("out"),
    );
    library(&home, 1, 3, "256M");
    write(&src.join("a.txt"), b"read from a snapshot");
    write(&src.join("d/b.bin"), &noise(9, 400_000));
    ok(&home, &["backup", p(&src)]);
    std::fs::create_dir_all(&ro).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    // The home bound read-only in a mount namespace of the test's own, so that
    // the mount goes away with the shell whatever happens.
    let script = r#"
        mount --bind "$HOME_DIR" "$RO" && mount -o remount,ro,bind "$RO" || exit 90
        touch "$RO/probe" 2>/dev/null && exit 91
        for step in jobs "ls 1" "restore 1 --to $OUT/all" "verify 1" "library status" "backup $SRC"; do
            name=${step%% *}
            "$T" --home "$RO" --json $step >"$OUT/$name.json" 2>"$OUT/$name.err"
            echo "$name $?"
        done
    "#;
    let ns: &[&str] = if is_root() { &["-m"] } else { &["-r", "-m"] };
    let o = Command::new("unshare")
        .args(ns)
        .args(["sh", "-c", script])
        .env("HOME_DIR", &home)
        .env("RO", &ro)
        .env("T", bin())
        .env("SRC", &src)
        .env("OUT", &out)
        .output()
        .expect("run unshare");
    if o.status.code() == Some(90) || (!o.status.success() && !is_root()) {
        let why = "no read-only bind mount could be made here (needs root or user namespaces)";
        need(Err(why.to_string()));
        return;
    }
    assert_ne!(o.status.code(), Some(91), "the bind mount is writable");
    let said = String::from_utf8_lossy(&o.stdout);
    let err = |f: &str| std::fs::read_to_string(out.join(format!("{f}.err"))).unwrap_or_default();
    let code = |step: &str| -> i32 {
        said.lines()
            .find_map(|l| l.strip_prefix(&format!("{step} ")))
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("no {step} in {said}"))
    };
    for step in ["jobs", "ls", "restore", "verify", "library"] {
        assert_eq!(code(step), 0, "{step}: {}", err(step));
    }
    assert_same_tree(&src, &out.join("all"));
    let verified: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("verify.json")).unwrap()).unwrap();
    assert_eq!(verified["ok"], true, "{verified}");
    assert_one_line_error(code("backup"), &err("backup"), &["read-only file system"]);
    // Nothing was recorded: the verify left no mark on the job.
    let jobs = ok(&home, &["jobs"]);
    assert!(jobs["jobs"][0]["last_verified"].is_null(), "{jobs}");
}
