//! Faults injected with `TAPELOOM_FAULTS` (docs/FAULTS.md), through the binary: what
//! a backup, a restore and the changer do when the drive or the robot fails.

use crate::common::*;
use std::path::Path;

/// Eight files of 2 MB: several blocks each.
fn source(dir: &Path) {
    for i in 0..8 {
        write(&dir.join(format!("f{i}")), &noise(i, 2_000_000));
    }
}

/// Each file's first block, in block order.
fn first_blocks(home: &Path, job: &str) -> Vec<(String, u64)> {
    let ls = ok(home, &["ls", job]);
    let mut v: Vec<(String, u64)> = ls["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "file")
        .map(|e| {
            (
                e["path"].as_str().unwrap().to_string(),
                e["block"].as_u64().unwrap(),
            )
        })
        .collect();
    v.sort_by_key(|(_, b)| *b);
    v
}

#[test]
fn a_write_error_moves_the_job_to_the_next_cartridge() {
    if !test_hooks() {
        return;
    }
    for spec in ["write-error@lbn=10", "write-error-written@lbn=20"] {
        let t = tempfile::tempdir().unwrap();
        let (home, src) = (t.path().join("home"), t.path().join("src"));
        source(&src);
        let (code, b, err) = run_with(&home, spec, &["backup", src.to_str().unwrap()]);
        // The cartridge is suspect and left; the job goes on on the next one from
        // the failed block and ends whole.
        assert_eq!(code, 0, "{spec}: {err}");
        assert_eq!(b["status"], "ok", "{b}");
        assert_eq!(
            b["volumes"],
            serde_json::json!(["TL0001L9", "TL0002L9"]),
            "{b}"
        );
        assert_eq!(cartridge(&home, "TL0001L9")["state"], "suspect");
        let job = b["job_id"].to_string();
        assert_eq!(ok(&home, &["verify", &job])["ok"], true);
        restores_identical(&home, &job, &src, &t.path().join("out"));
        // From the tapes alone too: a block the drive wrote but called failed is
        // on the old cartridge as well, and read once.
        restores_identical_from_tapes_alone(&home, &job, &src, &t.path().join("again"));
        // No job writes to the suspect cartridge again.
        let next = ok(&home, &["backup", src.to_str().unwrap()]);
        assert!(
            !next["volumes"]
                .as_array()
                .unwrap()
                .contains(&"TL0001L9".into()),
            "{next}"
        );
    }
}

#[test]
fn a_deferred_write_error_writes_the_lost_blocks_again_on_the_next_cartridge() {
    if !test_hooks() {
        return;
    }
    // Lost in the middle of the data, and at the flush before the index.
    for spec in ["write-error-deferred@lbn=30", "write-error-deferred@lbn=62"] {
        let t = tempfile::tempdir().unwrap();
        let (home, src) = (t.path().join("home"), t.path().join("src"));
        source(&src);
        let (code, b, err) = run_with(&home, spec, &["backup", src.to_str().unwrap()]);
        assert_eq!(code, 0, "{spec}: {err}");
        assert_eq!(b["status"], "ok", "{b}");
        assert!(err.contains("deferred write error"), "{err}");
        assert_eq!(
            b["volumes"],
            serde_json::json!(["TL0001L9", "TL0002L9"]),
            "{b}"
        );
        assert_eq!(cartridge(&home, "TL0001L9")["state"], "suspect");
        let job = b["job_id"].to_string();
        assert_eq!(ok(&home, &["verify", &job])["ok"], true);
        let check = ok(&home, &["catalog", "check"]);
        assert_eq!(check["problems"], serde_json::json!([]), "{spec}: {check}");
        restores_identical(&home, &job, &src, &t.path().join("out"));
        // Each file alone, from where the catalog says its blocks are now.
        for (path, _) in first_blocks(&home, &job) {
            let one = t.path().join("one").join(&path);
            ok(
                &home,
                &["restore", &job, "--to", one.to_str().unwrap(), &path],
            );
            let name = std::path::Path::new(&path).file_name().unwrap();
            assert_eq!(
                std::fs::read(one.join(&path)).unwrap(),
                std::fs::read(src.join(name)).unwrap(),
                "{spec}: {path}"
            );
        }
        // From the tapes alone: the index on tape points at the new places too.
        restores_identical_from_tapes_alone(&home, &job, &src, &t.path().join("again"));
    }
}

#[test]
fn a_drive_that_fails_every_write_fails_the_job_with_one_line() {
    if !test_hooks() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let (home, src) = (t.path().join("home"), t.path().join("src"));
    source(&src);
    let (code, _, err) = run_with(
        &home,
        "write-error@lbn=5,every",
        &["backup", src.to_str().unwrap()],
    );
    assert_one_line_error(code, &err, &["WRITE failed", "MEDIUM ERROR", "0C/00"]);
    let jobs = ok(&home, &["jobs"]);
    assert_eq!(jobs["jobs"][0]["status"], "failed", "{jobs}");
    // It gave up after a few cartridges, each marked suspect.
    let suspect = (1..=4)
        .filter(|i| cartridge(&home, &format!("TL000{i}L9"))["state"] == "suspect")
        .count();
    assert_eq!(suspect, 4, "cartridges marked suspect");
}

#[test]
fn a_read_error_at_a_block_costs_only_the_file_it_holds() {
    if !test_hooks() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let (home, src, out) = (
        t.path().join("home"),
        t.path().join("src"),
        t.path().join("out"),
    );
    source(&src);
    let b = ok(&home, &["backup", src.to_str().unwrap()]);
    let job = b["job_id"].as_i64().unwrap().to_string();
    let files = first_blocks(&home, &job);
    // A block in the middle of the third file, unreadable every time.
    let (hit, lbn) = (&files[2].0, files[2].1 + 2);
    let spec = format!("read-error@lbn={lbn},every");
    let (code, r, err) = run_with(
        &home,
        &spec,
        &["restore", &job, "--to", out.to_str().unwrap()],
    );
    // The restore reads on past the bad block: the file it holds is named (and not
    // left part written), every other file is restored.
    assert_eq!(code, 1, "{err}");
    let errors = r["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{r}");
    assert_eq!(errors[0]["path"], hit.as_str(), "{r}");
    let why = errors[0]["reason"].as_str().unwrap();
    assert!(
        why.contains(&format!("block {lbn}")) && why.contains("MEDIUM ERROR"),
        "{why}"
    );
    assert!(!out.join(hit).exists(), "{hit} left part written");
    for (name, _) in files.iter().filter(|(n, _)| n != hit) {
        assert_eq!(
            std::fs::read(out.join(name)).unwrap(),
            std::fs::read(src.join(name)).unwrap(),
            "{name}"
        );
    }
    // verify names the block and the file, and reads the rest.
    let (code, v, err) = run_with(&home, &spec, &["verify", &job]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(v["ok"], false, "{v}");
    assert_eq!(v["files_affected"], serde_json::json!([hit]), "{v}");
    // Without the fault the same restore is whole.
    restores_identical(&home, &job, &src, &t.path().join("again"));
}

#[test]
fn a_write_reported_done_but_never_on_tape_fails_the_backup_at_its_flush() {
    if !test_hooks() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let (home, src) = (t.path().join("home"), t.path().join("src"));
    source(&src);
    let (code, _, err) = run_with(
        &home,
        "write-ok-unwritten@lbn=12",
        &["backup", src.to_str().unwrap()],
    );
    // The drive said the block was written; after the segment's flush it stands
    // one block short, and the job is not recorded as whole.
    assert_one_line_error(code, &err, &["TL0001L9", "lost writes"]);
    let jobs = ok(&home, &["jobs"]);
    assert_eq!(jobs["jobs"][0]["status"], "failed", "{jobs}");
    // The same backup without the fault is whole.
    let b = ok(&home, &["backup", src.to_str().unwrap()]);
    assert_eq!(b["status"], "ok", "{b}");
}

#[test]
fn a_failed_changer_move_is_one_line() {
    if !test_hooks() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let (home, src) = (t.path().join("home"), t.path().join("src"));
    source(&src);
    let (code, _, err) = run_with(&home, "move-fail@n=1", &["backup", src.to_str().unwrap()]);
    assert_one_line_error(
        code,
        &err,
        &[
            "MOVE MEDIUM from slot 0 to drive 0",
            "HARDWARE ERROR",
            "15/01",
        ],
    );
    let (code, _, err) = run_with(&home, "slot-empty=0", &["library", "load", "TL0001L9"]);
    assert_one_line_error(code, &err, &["ILLEGAL REQUEST", "3B/0E"]);
    // Nothing moved: the cartridge is still in its slot, and loads without faults.
    ok(&home, &["library", "load", "TL0001L9"]);
}

#[test]
fn a_bad_fault_spec_is_one_line_naming_the_bad_part() {
    if !test_hooks() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let (code, _, err) = run_with(
        &home,
        "seed=1;read-error@lbn=5;stall=2hours@lbn=3",
        &["library", "status"],
    );
    assert_one_line_error(code, &err, &["TAPELOOM_FAULTS", "'stall=2hours@lbn=3'"]);
}
