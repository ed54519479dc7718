//! A home whose file system fills during a backup: the job fails naming the file
//! system, its free space and how to win space back; `library trim` cuts what the
//! failed job left on the cartridge, and the next backup and the earlier job's
//! verify succeed.

use crate::common::*;
use std::process::Command;

#[test]
fn a_full_home_is_explained_and_trim_wins_the_space_back() {
    if !need(program("unshare", "util-linux")) {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let (small, big, fs, out) = (
        t.path().join("small"),
        t.path().join("big"),
        t.path().join("fs"),
        t.path().join("out"),
    );
    write(&small.join("a.txt"), b"small");
    write(&big.join("big.bin"), &noise(5, 40_000_000));
    std::fs::create_dir_all(&fs).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    // A 24 MiB file system of the test's own, in a mount namespace of its own so that
    // it goes away with the shell whatever happens (a user namespace when not root).
    let script = r#"
        mount -t tmpfs -o size=24m tmpfs "$FS" || exit 90
        H="$FS/home"
        "$T" --home "$H" backup "$SMALL" >/dev/null 2>"$OUT/small1.err"; echo "small1 $?"
        "$T" --home "$H" backup "$BIG" >/dev/null 2>"$OUT/big.err"; echo "big $?"
        "$T" --home "$H" backup "$SMALL" >/dev/null 2>"$OUT/small2.err"; echo "small2 $?"
        "$T" --home "$H" --json library trim >"$OUT/trim.json" 2>&1; echo "trim $?"
        "$T" --home "$H" backup "$SMALL" >/dev/null 2>"$OUT/small3.err"; echo "small3 $?"
        "$T" --home "$H" verify 1 >/dev/null 2>&1; echo "verify $?"
    "#;
    let ns: &[&str] = if is_root() { &["-m"] } else { &["-r", "-m"] };
    let o = Command::new("unshare")
        .args(ns)
        .args(["sh", "-c", script])
        .env("FS", &fs)
        .env("T", bin())
        .env("SMALL", &small)
        .env("BIG", &big)
        .env("OUT", &out)
        .output()
        .expect("run unshare");
    if o.status.code() == Some(90) || (!o.status.success() && !is_root()) {
        let why = "no tmpfs could be mounted here (needs root or user namespaces)";
        need(Err(why.to_string()));
        return;
    }
    let said = String::from_utf8_lossy(&o.stdout);
    let code = |step: &str| -> i32 {
        said.lines()
            .find_map(|l| l.strip_prefix(&format!("{step} ")))
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("no {step} in {said}"))
    };
    let err = |f: &str| std::fs::read_to_string(out.join(f)).unwrap_or_default();
    assert_eq!(code("small1"), 0, "{}", err("small1.err"));
    assert_eq!(code("big"), 1);
    let big_err = err("big.err");
    assert_eq!(big_err.lines().count(), 1, "{big_err}");
    for want in [
        "No space left on device",
        "the file system of the home",
        "free",
        "library trim",
    ] {
        assert!(big_err.contains(want), "{want}: {big_err}");
    }
    // The failed job's data still fills the cartridge: the next backup fails the same way.
    assert_eq!(code("small2"), 1);
    assert!(
        err("small2.err").contains("library trim"),
        "{}",
        err("small2.err")
    );
    assert_eq!(code("trim"), 0, "{}", err("trim.json"));
    let trim: serde_json::Value = serde_json::from_str(&err("trim.json")).unwrap();
    let freed = trim["cartridges"][0]["bytes_freed"].as_u64().unwrap_or(0);
    assert!(freed > 10_000_000, "{trim}");
    assert_eq!(code("small3"), 0, "{}", err("small3.err"));
    assert_eq!(code("verify"), 0);
}
