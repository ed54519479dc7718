//! A backup set restored and listed as it was at each of its jobs: a full, days of
//! changes each followed by an incremental, then a differential; every restore is
//! compared object by object with a copy of the tree taken that day.

use crate::common::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Backs up `srcs` as set `set` at `level` with `extra` options; the job id.
fn backup(home: &Path, set: &str, level: &str, srcs: &[&Path], extra: &[&str]) -> i64 {
    let mut a = vec!["backup", "--set", set, "--level", level];
    a.extend_from_slice(extra);
    a.extend(srcs.iter().map(|x| p(x)));
    let b = ok(home, &a);
    b["job_id"].as_i64().unwrap()
}

/// A path as `ls` shows it: UTF-8 as it is, other bytes as `\xNN`.
fn shown(p: &[u8]) -> Vec<u8> {
    let mut out = String::new();
    for chunk in p.utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out.into_bytes()
}

/// The paths `ls --set NAME --at AT` lists, the root as "".
fn listed(home: &Path, set: &str, at: &str) -> BTreeSet<Vec<u8>> {
    let v = ok(home, &["ls", "--set", set, "--at", at]);
    v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| match e["path"].as_str().unwrap() {
            "." => Vec::new(),
            p => p.as_bytes().to_vec(),
        })
        .collect()
}

/// One day of changes to the tree, by number.
fn change(src: &Path, day: usize) {
    match day {
        // Modify (through the hard link's target), delete, add.
        1 => {
            write(&src.join("dir/plain.txt"), b"hello tape, day one\n");
            set_times(&src.join("dir/plain.txt"), 1_400_000_000, 111_222_333);
            std::fs::remove_file(src.join("zero")).unwrap();
            write(&src.join("dir/new.txt"), &noise(11, 300_000));
        }
        // Rename, and a change of mode alone.
        2 => {
            std::fs::rename(src.join("with space"), src.join("renamed")).unwrap();
            let big = src.join("dir/sub/big.bin");
            std::fs::set_permissions(&big, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        // Extended attributes alone, on the sparse file and on the hard-linked one.
        3 => {
            xattr::set(src.join("sparse"), "user.day", b"three").unwrap();
            xattr::remove(src.join("dir/plain.txt"), "user.tapeloom").unwrap();
            xattr::set(src.join("dir/plain.txt"), "user.other", b"3").unwrap();
        }
        // More of everything, for the differential.
        _ => {
            write(&src.join("dir/sub/big.bin"), &noise(44, 1_000_000));
            set_times(&src.join("dir/sub/big.bin"), 1_500_000_000, 999_999_999);
            std::fs::remove_file(src.join("dir/new.txt")).unwrap();
            write(&src.join("empty/late"), b"late");
        }
    }
}

/// Restores set `set` at `at` into `out`; the restore's JSON.
fn restore_at(home: &Path, set: &str, at: &str, out: &Path, extra: &[&str]) -> Value {
    let mut a = vec!["restore", "--set", set, "--at", at, "--to", p(out)];
    a.extend_from_slice(extra);
    ok(home, &a)
}

#[test]
fn each_day_of_a_set_restores_and_lists_as_it_was() {
    let t = tempfile::tempdir().unwrap();
    let (home, src) = (t.path().join("home"), t.path().join("src"));
    rich_tree(&src);
    let snap = |day: usize| t.path().join(format!("snap{day}"));
    let mut jobs = vec![backup(&home, "pit", "full", &[&src], &[])];
    copy_tree(&src, &snap(0));
    for day in 1..=4 {
        change(&src, day);
        let level = if day == 4 {
            "differential"
        } else {
            "incremental"
        };
        jobs.push(backup(&home, "pit", level, &[&src], &[]));
        copy_tree(&src, &snap(day));
    }
    let started: Vec<String> = ok(&home, &["jobs"])["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["started"].as_str().unwrap().to_string())
        .collect();
    for (day, job) in jobs.iter().enumerate() {
        let out = t.path().join(format!("out{day}"));
        // Day 2 by the time its job started, the others by job id.
        let at = match day {
            2 => started[day].clone(),
            _ => job.to_string(),
        };
        let r = restore_at(&home, "pit", &at, &out, &[]);
        assert_eq!(r["job_id"].as_i64(), Some(*job), "{r}");
        assert_eq!(r["errors"].as_array().unwrap().len(), 0, "{r}");
        assert_same_tree(&snap(day), &out);
        assert_eq!(ino(&out.join("dir/plain.txt")), ino(&out.join("hardlink")));
        let names: BTreeSet<Vec<u8>> = tree(&snap(day)).keys().map(|k| shown(k)).collect();
        assert_eq!(listed(&home, "pit", &at), names, "day {day}");
    }
    // The last day needs the full and the differential only.
    let last = restore_at(&home, "pit", &jobs[4].to_string(), &t.path().join("l"), &[]);
    assert_eq!(
        last["jobs"],
        serde_json::json!([jobs[0], jobs[4]]),
        "{last}"
    );
    // Without --at: the latest job.
    let latest = ok(&home, &["ls", "--set", "pit"]);
    assert_eq!(latest["job_id"].as_i64(), Some(jobs[4]));
    // Paths limit it; a hard link brings its target.
    let part = t.path().join("part");
    let r = restore_at(&home, "pit", &jobs[3].to_string(), &part, &["hardlink"]);
    assert_eq!(r["files"], 2, "{r}");
    assert_eq!(
        ino(&part.join("dir/plain.txt")),
        ino(&part.join("hardlink"))
    );
    assert_eq!(
        std::fs::read(part.join("hardlink")).unwrap(),
        b"hello tape, day one\n"
    );
    a_job_alone_leaves_out_what_it_holds_as_metadata(&home, jobs[3], &t.path().join("alone"));
    bad_points_in_time_are_one_line_errors(&home, jobs[0]);
    a_chain_without_its_base_is_refused(&home, jobs[0]);
}

/// The full gone from the catalog: every later job's tree is refused in one line.
fn a_chain_without_its_base_is_refused(home: &Path, full: i64) {
    // As a damaged catalog may leave it: the later jobs without their base.
    sql_exec(home, &format!("DELETE FROM jobs WHERE id = {full}"));
    for args in [
        &["ls", "--set", "pit"][..],
        &["restore", "--set", "pit", "--to", "/nonexistent/x"],
    ] {
        let a: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
        let (code, _, err) = run(home, &a);
        assert_ne!(code, 0, "{args:?}");
        let says = format!("is relative to job {full}, which is no longer in the catalog");
        assert!(err.contains(&says), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
}

/// `restore JOB` of an incremental with metadata-only files: they are left out and
/// counted, not errors.
fn a_job_alone_leaves_out_what_it_holds_as_metadata(home: &Path, job: i64, out: &Path) {
    let r = ok(home, &["restore", &job.to_string(), "--to", p(out)]);
    assert!(r["meta_only"].as_u64().unwrap() >= 1, "{r}");
    assert_eq!(r["errors"].as_array().unwrap().len(), 0, "{r}");
    assert!(!out.join("sparse").exists());
}

fn bad_points_in_time_are_one_line_errors(home: &Path, first: i64) {
    let other = (first + 100).to_string();
    let cases: [(&[&str], &str); 4] = [
        (&["--set", "nope"], "no backup set nope"),
        (
            &["--set", "pit", "--at", "2001-01-01T00:00:00Z"],
            "no job that ended",
        ),
        (
            &["--set", "pit", "--at", "yesterday"],
            "neither an RFC 3339 time",
        ),
        (
            &["--set", "pit", "--at", &other],
            "neither an RFC 3339 time",
        ),
    ];
    for (args, says) in cases {
        for cmd in ["restore", "ls"] {
            let mut a: Vec<&OsStr> = vec![OsStr::new(cmd)];
            a.extend(args.iter().map(OsStr::new));
            if cmd == "restore" {
                a.extend([OsStr::new("--to"), OsStr::new("/nonexistent/out")]);
            }
            let (code, _, err) = run(home, &a);
            assert_ne!(code, 0, "{cmd} {args:?}");
            assert!(err.contains(says), "{cmd} {args:?}: {err}");
            assert_eq!(err.trim().lines().count(), 1, "{cmd} {args:?}: {err}");
        }
    }
}

/// Three streams on three drives of an LTO library for the full, then days of
/// incrementals on one drive: the last day's restore mounts each cartridge it
/// needs once and reads no block twice.
#[test]
fn a_set_on_three_drives_mounts_each_cartridge_once() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    ok(
        &home,
        &[
            "library", "create", "--drives", "3", "--slots", "6", "--model", "lto3", "--clock",
            "virtual",
        ],
    );
    let srcs: Vec<PathBuf> = (0..3).map(|i| t.path().join(format!("src/s{i}"))).collect();
    for (i, d) in srcs.iter().enumerate() {
        for f in 0..3 {
            write(
                &d.join(format!("f{f}")),
                &noise(10 * i as u64 + f, 3_000_000),
            );
        }
    }
    let refs: Vec<&Path> = srcs.iter().map(|p| p.as_path()).collect();
    // One stream to each drive (dealt in turn: a drive that runs first does not
    // take them all).
    let full = [
        "--drives",
        "3",
        "--concurrency",
        "3",
        "--interleave",
        "in-turn",
    ];
    let mut last = backup(&home, "lto", "full", &refs, &full);
    for day in 1..=3u64 {
        for (i, d) in srcs.iter().enumerate() {
            write(
                &d.join(format!("f{day}")),
                &noise(100 * day + i as u64, 500_000),
            );
            write(
                &d.join(format!("new{day}")),
                &noise(200 * day + i as u64, 200_000),
            );
        }
        std::fs::remove_file(srcs[1].join("f0")).ok();
        // Days 1 and 3 on a drive the full left empty, day 2 after the full on
        // the cartridge drive 0 holds.
        let drive = if day == 2 { "0" } else { "2" };
        last = backup(&home, "lto", "incremental", &refs, &["--drive", drive]);
    }
    copy_tree(&t.path().join("src"), &t.path().join("snap"));
    for skip_by in ["locate", "auto"] {
        ok(&home, &["library", "unload"]);
        let out = t.path().join(format!("out-{skip_by}"));
        let extra = ["--skip-by", skip_by];
        let r = restore_at(&home, "lto", &last.to_string(), &out, &extra);
        for i in 0..3 {
            let name = format!("s{i}");
            assert_same_tree(&t.path().join("snap").join(&name), &out.join(&name));
        }
        let mounted: Vec<String> = r["drives"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|d| d["cartridges"].as_array().unwrap().clone())
            .map(|c| c["barcode"].as_str().unwrap().to_string())
            .collect();
        let distinct: BTreeSet<&String> = mounted.iter().collect();
        assert_eq!(
            mounted.len(),
            distinct.len(),
            "a cartridge mounted twice: {r}"
        );
        assert_eq!(r["mounts"].as_u64(), Some(distinct.len() as u64), "{r}");
        let listed: BTreeSet<String> = ok(&home, &["ls", "--set", "lto"])["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["volume"].as_str().unwrap().to_string())
            .collect();
        assert!(
            listed.iter().all(|v| distinct.contains(v)),
            "{listed:?} {r}"
        );
        let (read, planned) = (
            r["blocks_read"].as_u64().unwrap(),
            r["blocks_planned"].as_u64().unwrap(),
        );
        assert!(read > 0, "{r}");
        if skip_by == "locate" {
            // Each planned block once (a filemark in a run is no block).
            assert!(read <= planned, "read {read} of {planned} planned: {r}");
        }
        assert!(distinct.len() >= 2, "{r}");
    }
}
