//! Spanning, damage, crashes and hostile input: nothing is lost and errors say what.

use crate::common::*;
use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn tape_file(home: &Path, barcode: &str) -> std::path::PathBuf {
    home.join("library/tapes").join(format!("{barcode}.data"))
}

#[test]
fn a_large_job_spans_three_cartridges_and_restores() {
    let t = tempfile::tempdir().unwrap();
    let (home, src, out) = (
        t.path().join("home"),
        t.path().join("src"),
        t.path().join("out"),
    );
    library(&home, 1, 4, "64M");
    for i in 0..15 {
        write(&src.join(format!("f{i:02}")), &noise(i, 10_000_000));
    }
    let b = ok(&home, &["backup", src.to_str().unwrap()]);
    let vols: Vec<&str> = b["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(vols, vec!["TL0001L9", "TL0002L9", "TL0003L9"], "{b}");
    let job = b["job_id"].as_i64().unwrap().to_string();
    assert_eq!(ok(&home, &["verify", &job])["ok"], true);
    ok(&home, &["restore", &job, "--to", out.to_str().unwrap()]);
    assert_same_tree(&src, &out);
    // A file that starts on one cartridge and ends on the next restores on its own.
    let ls = ok(&home, &["ls", &job]);
    let e = ls["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["path"] == "f06")
        .unwrap()
        .clone();
    let one = t.path().join("one");
    let r = ok(
        &home,
        &["restore", &job, "--to", one.to_str().unwrap(), "f06"],
    );
    assert_eq!(
        std::fs::read(one.join("f06")).unwrap(),
        noise(6, 10_000_000),
        "{e} {r}"
    );
    // The catalog can be rebuilt from the three cartridges alone.
    forget_catalog(&home);
    let rb = ok(&home, &["catalog", "rebuild"]);
    assert_eq!(rb["jobs_added"], serde_json::json!([1]), "{rb}");
    assert_eq!(rb["volumes_scanned"], 3);
    let again = t.path().join("again");
    ok(&home, &["restore", &job, "--to", again.to_str().unwrap()]);
    assert_same_tree(&src, &again);
    // The library now holds data: it may not be replaced.
    let (code, _, err) = run(
        &home,
        &["library", "create", "--slots", "2"].map(OsStr::new),
    );
    assert_ne!(code, 0);
    assert!(err.contains("refusing"), "{err}");
    let st = ok(&home, &["library", "status"]);
    assert_eq!(st["cartridges"].as_array().unwrap().len(), 4);
    assert_eq!(st["cartridges"][3]["state"], "blank");
}

#[test]
fn a_flipped_byte_is_found_and_named_and_the_rest_restores() {
    let t = tempfile::tempdir().unwrap();
    let (home, src) = (t.path().join("home"), t.path().join("src"));
    for i in 0..8 {
        write(&src.join(format!("f{i}")), &noise(i, 2_000_000));
    }
    let b = ok(&home, &["backup", src.to_str().unwrap()]);
    let job = b["job_id"].as_i64().unwrap().to_string();
    let tape = tape_file(&home, "TL0001L9");
    let mut data = std::fs::read(&tape).unwrap();
    let mid = data.len() / 2;
    data[mid] ^= 0x40;
    std::fs::write(&tape, &data).unwrap();
    let (code, v, _) = run(&home, &["verify", &job].map(OsStr::new));
    assert_eq!(code, 1);
    assert_eq!(v["ok"], false, "{v}");
    assert_eq!(v["bad_blocks"].as_array().unwrap().len(), 1, "{v}");
    let affected: Vec<&str> = v["files_affected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert_eq!(affected.len(), 1, "{v}");
    let bad = affected[0].to_string();
    // A whole-job restore restores every other file and names the damaged one.
    let out = t.path().join("out");
    let (code, r, err) = run(
        &home,
        &[
            OsStr::new("restore"),
            OsStr::new(&job),
            OsStr::new("--to"),
            out.as_os_str(),
        ],
    );
    assert_eq!(code, 1, "{err}");
    assert_eq!(r["errors"][0]["path"], bad.as_str(), "{r}");
    for i in 0..8 {
        let name = format!("f{i}");
        if name != bad {
            assert_eq!(std::fs::read(out.join(&name)).unwrap(), noise(i, 2_000_000));
        } else {
            assert!(
                !out.join(&name).exists(),
                "a damaged file must not look restored"
            );
        }
    }
    // Restoring only good files succeeds.
    let good: Vec<String> = (0..8)
        .map(|i| format!("f{i}"))
        .filter(|n| *n != bad)
        .collect();
    let out2 = t.path().join("out2");
    let mut args = vec!["restore", job.as_str(), "--to", out2.to_str().unwrap()];
    args.extend(good.iter().map(|s| s.as_str()));
    let r = ok(&home, &args);
    assert_eq!(r["files"].as_u64().unwrap(), good.len() as u64);
}

#[test]
fn a_killed_backup_leaves_earlier_jobs_intact() {
    let t = tempfile::tempdir().unwrap();
    let (home, first, big) = (
        t.path().join("home"),
        t.path().join("first"),
        t.path().join("big"),
    );
    rich_tree(&first);
    let b = ok(&home, &["backup", first.to_str().unwrap()]);
    let job1 = b["job_id"].as_i64().unwrap().to_string();
    for i in 0..40 {
        write(&big.join(format!("f{i:02}")), &noise(100 + i, 10_000_000));
    }
    let tape = tape_file(&home, "TL0001L9");
    let before = std::fs::metadata(&tape).unwrap().len();
    let mut child = Command::new(bin())
        .arg("--home")
        .arg(&home)
        .args(["backup", "--block-size", "64K"])
        .arg(&big)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    loop {
        let now = std::fs::metadata(&tape).map(|m| m.len()).unwrap_or(0);
        if now > before + 20_000_000 {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the backup never got going"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the backup ended before it could be killed"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let jobs = ok(&home, &["jobs"]);
    assert_eq!(jobs["jobs"][0]["status"], "ok");
    assert_eq!(jobs["jobs"][1]["status"], "failed", "{jobs}");
    assert_eq!(ok(&home, &["verify", &job1])["ok"], true);
    let out = t.path().join("out");
    ok(&home, &["restore", &job1, "--to", out.to_str().unwrap()]);
    assert_same_tree(&first, &out);
    // The next job appends after the torn one and is whole.
    let small = t.path().join("small");
    write(&small.join("x"), b"after the crash");
    let b3 = ok(&home, &["backup", small.to_str().unwrap()]);
    let job3 = b3["job_id"].as_i64().unwrap().to_string();
    assert_eq!(ok(&home, &["verify", &job3])["ok"], true);
    let out3 = t.path().join("out3");
    ok(&home, &["restore", &job3, "--to", out3.to_str().unwrap()]);
    assert_eq!(std::fs::read(out3.join("x")).unwrap(), b"after the crash");
    // The torn job's open segment is no fault of the catalog.
    let check = ok(&home, &["catalog", "check"]);
    assert_eq!(check["ok"], true, "{check}");
}

#[test]
fn an_unreadable_source_file_makes_the_job_partial() {
    // As root the backup runs as another user, through setpriv.
    if is_root() && !need(program("setpriv", "util-linux")) {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let (home, src, out) = (
        t.path().join("home"),
        t.path().join("src"),
        t.path().join("out"),
    );
    write(&src.join("ok1"), b"one");
    write(&src.join("secret"), b"nobody may read this");
    write(&src.join("ok2"), b"two");
    std::fs::create_dir_all(src.join("closed")).unwrap();
    write(&src.join("closed/inner"), b"x");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(src.join("secret"), std::fs::Permissions::from_mode(0o000)).unwrap();
    std::fs::set_permissions(src.join("closed"), std::fs::Permissions::from_mode(0o000)).unwrap();
    let mut cmd = if is_root() {
        // Root reads everything: run the backup as an unprivileged user instead.
        for p in [t.path(), src.as_path()] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::fs::create_dir_all(&home).unwrap();
        std::os::unix::fs::chown(&home, Some(65534), Some(65534)).unwrap();
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", bin()]);
        c
    } else {
        Command::new(bin())
    };
    cmd.env("HOME", &home)
        .arg("--home")
        .arg(&home)
        .arg("--json")
        .arg("backup")
        .arg(&src);
    let (code, b, err) = parse(cmd.output().expect("run backup"));
    std::fs::set_permissions(src.join("closed"), std::fs::Permissions::from_mode(0o755)).unwrap();
    // Partial: said on stderr in one line, and exit 1, as tar exits non-zero.
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("is partial: 2 source objects"), "{err}");
    assert_eq!(b["status"], "partial", "{b}");
    let errors = b["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 2, "{b}");
    assert!(
        errors[0]["path"].as_str().unwrap().ends_with("/closed"),
        "{b}"
    );
    assert!(
        errors[1]["path"].as_str().unwrap().ends_with("/secret"),
        "{b}"
    );
    assert!(
        errors[1]["reason"].as_str().unwrap().contains("ermission"),
        "{b}"
    );
    let job = b["job_id"].as_i64().unwrap().to_string();
    let (code, r, err) = parse(
        Command::new(bin())
            .arg("--home")
            .arg(&home)
            .arg("--json")
            .args(["restore", &job, "--to"])
            .arg(&out)
            .output()
            .unwrap(),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["errors"].as_array().unwrap().len(), 0);
    assert_eq!(std::fs::read(out.join("ok1")).unwrap(), b"one");
    assert_eq!(std::fs::read(out.join("ok2")).unwrap(), b"two");
    assert!(!out.join("secret").exists());
    assert!(out.join("closed").is_dir());
}

/// Rewrites every occurrence of `from` on a cartridge with `to` (same length) and
/// reseals the blocks it touched, as FORMAT.md 4.2 says: CRC32C over bytes 0..60 and
/// 64..end. Models a tape written by a hostile or broken writer.
fn forge(home: &Path, from: &[u8], to: &[u8]) -> usize {
    assert_eq!(from.len(), to.len());
    let tape = tape_file(home, "TL0001L9");
    let idx = std::fs::read(home.join("library/tapes/TL0001L9.idx")).unwrap();
    let mut data = std::fs::read(&tape).unwrap();
    let mut changed = 0;
    for e in idx.chunks_exact(16) {
        let off = u64::from_le_bytes(e[0..8].try_into().unwrap()) as usize;
        let len = u32::from_le_bytes(e[8..12].try_into().unwrap()) as usize;
        let block = &mut data[off..off + len];
        if len < 64 || &block[..4] != b"TLBK" {
            continue;
        }
        let mut hit = false;
        let mut i = 64;
        while i + from.len() <= len {
            if &block[i..i + from.len()] == from {
                block[i..i + from.len()].copy_from_slice(to);
                hit = true;
                changed += 1;
            }
            i += 1;
        }
        if hit {
            let c = crc32c::crc32c_append(crc32c::crc32c(&block[..60]), &block[64..]);
            block[60..64].copy_from_slice(&c.to_le_bytes());
        }
    }
    std::fs::write(&tape, &data).unwrap();
    changed
}

#[test]
fn hostile_paths_on_tape_never_escape_the_restore_folder() {
    let t = tempfile::tempdir().unwrap();
    let (home, src) = (t.path().join("home"), t.path().join("src"));
    let outside = t.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    // Names that the forger turns into "../evil" and a symlink to `outside`.
    write(&src.join("XXXevil"), b"escape attempt");
    write(&src.join("good"), b"fine");
    std::os::unix::fs::symlink(&outside, src.join("lnA")).unwrap();
    write(&src.join("lnB/planted"), b"through a symlink");
    let b = ok(&home, &["backup", src.to_str().unwrap()]);
    let job = b["job_id"].as_i64().unwrap().to_string();
    assert!(forge(&home, b"XXXevil", b"../evil") > 0);
    assert!(forge(&home, b"lnB/planted", b"lnA/planted") > 0);
    let out = t.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let (code, r, err) = run(
        &home,
        &[
            OsStr::new("restore"),
            OsStr::new(&job),
            OsStr::new("--to"),
            out.as_os_str(),
        ],
    );
    assert_eq!(code, 1, "{r} {err}");
    let errors = r["errors"].to_string();
    assert!(
        errors.contains("unsafe path") && errors.contains("../evil"),
        "{errors}"
    );
    assert!(
        errors.contains("lnA/planted") && errors.contains("symlink"),
        "{errors}"
    );
    assert!(!t.path().join("evil").exists());
    assert!(!outside.join("planted").exists());
    assert_eq!(std::fs::read(out.join("good")).unwrap(), b"fine");
}

#[test]
fn bad_arguments_fail_with_one_line() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    for args in [
        vec!["restore", "7", "--to", "/tmp/x"],
        vec!["backup", "/no/such/source"],
        vec!["verify", "3"],
    ] {
        let (code, out, err) = run(&home, &args.iter().map(OsStr::new).collect::<Vec<_>>());
        assert_eq!(code, 1, "{args:?}");
        assert_eq!(out, serde_json::Value::Null, "{args:?}: nothing on stdout");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("tapeloom: error: "), "{err}");
    }
    // Usage errors found by the argument parser: one line too, exit 2.
    for args in [
        vec!["restore", "1", "--to", "/tmp/x", "--skip-by", "fly"],
        vec!["backup", "--block-size", "100000", "/tmp"],
        vec!["backup", "--block-size", "0", "/tmp"],
        vec!["backup"],
        vec!["frobnicate"],
    ] {
        let (code, _, err) = run(&home, &args.iter().map(OsStr::new).collect::<Vec<_>>());
        assert_eq!(code, 2, "{args:?}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("tapeloom: error: "), "{err}");
    }
}
