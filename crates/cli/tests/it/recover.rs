//! `catalog recover` and `catalog rebuild` of a backup killed before it wrote its
//! index: the entries whose blocks reached tape come back from the data streams.

use crate::common::*;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// Three sources of 12 noise files of about 1 MB each, under `t`.
fn sources(t: &Path) -> Vec<PathBuf> {
    (0..3u64)
        .map(|k| {
            let d = t.join(format!("s{k}"));
            for f in 0..12u64 {
                write(
                    &d.join(format!("f{f:02}")),
                    &noise(k * 100 + f, 1_000_000 + f as usize),
                );
            }
            d
        })
        .collect()
}

/// Backs up `srcs` in a child process and kills it (SIGKILL) once the tape has
/// grown by `grown` bytes.
fn killed_backup(home: &Path, srcs: &[PathBuf], grown: u64) {
    let mut args = ["--json", "backup"].map(OsStr::new).to_vec();
    args.extend(srcs.iter().map(|s| s.as_os_str()));
    args.extend(["--limit-rate", "3MB", "--block-size", "64K"].map(OsStr::new));
    killed_once_tape_grew(home, &args, grown);
}

/// Restores `job` to `out` and checks every restored file against its source;
/// returns the paths restored (relative).
fn restored_identical(home: &Path, job: &str, out: &Path, root: &Path) -> Vec<PathBuf> {
    ok(home, &["restore", job, "--to", out.to_str().unwrap()]);
    let mut got = Vec::new();
    for k in 0..3 {
        let dir = out.join(format!("s{k}"));
        for e in std::fs::read_dir(&dir).into_iter().flatten() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(out).unwrap().to_path_buf();
            assert_eq!(
                std::fs::read(&p).unwrap(),
                std::fs::read(root.join(&rel)).unwrap(),
                "{}",
                rel.display()
            );
            got.push(rel);
        }
    }
    got.sort();
    got
}

#[test]
fn a_killed_backup_is_recovered_from_its_data_streams_and_rebuilt_alike() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let srcs = sources(t.path());
    // An earlier job, whole: it must come out untouched.
    let first = ok(&home, &["backup", srcs[0].to_str().unwrap()]);
    let earlier = first["job_id"].to_string();
    killed_backup(&home, &srcs, 12_000_000);
    let jobs = ok(&home, &["jobs"]);
    let job = jobs["jobs"].as_array().unwrap().last().unwrap()["job_id"].to_string();
    assert_ne!(job, earlier);
    // Refused for a job that ended.
    let (code, _, err) = run(
        &home,
        &[
            OsStr::new("catalog"),
            OsStr::new("recover"),
            OsStr::new(&earlier),
        ],
    );
    assert_ne!(code, 0);
    assert!(err.contains("not failed"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");

    let r = ok(&home, &["catalog", "recover", &job]);
    let added = r["files_added"].as_u64().unwrap();
    assert!(added >= 6, "{r}");
    // The files being written when the backup died are named, one per stream
    // at most.
    let cut = r["not_recovered"].as_array().unwrap();
    assert!(cut.len() <= 3, "{r}");
    let out = t.path().join("out");
    let got = restored_identical(&home, &job, &out, t.path());
    assert!(got.len() >= 3, "{got:?}");
    // Every source file is restored or named as not recovered.
    for k in 0..3 {
        for f in 0..12 {
            let rel = PathBuf::from(format!("s{k}/f{f:02}"));
            let named = cut.iter().any(|c| c["path"] == rel.to_str().unwrap());
            assert!(!(named && got.contains(&rel)), "{rel:?} both");
        }
    }
    let j = ok(&home, &["jobs"]);
    let row = j["jobs"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(row["status"], "partial", "{row}");
    assert_eq!(ok(&home, &["verify", &job])["ok"], true);
    assert_eq!(ok(&home, &["verify", &earlier])["ok"], true);

    // From the tapes alone: the same entries, restored identical.
    forget_catalog(&home);
    let rb = ok(&home, &["catalog", "rebuild"]);
    assert_eq!(rb["jobs_recovered"].as_array().unwrap().len(), 1, "{rb}");
    let again = t.path().join("again");
    assert_eq!(restored_identical(&home, &job, &again, t.path()), got);
    let whole = t.path().join("whole");
    ok(
        &home,
        &["restore", &earlier, "--to", whole.to_str().unwrap()],
    );
    assert_same_tree(&srcs[0], &whole);
}
