//! Media pools: backups with `--pool` write only to their pool's cartridges, pool
//! rules (jobs per volume, append) decide when a job takes a new cartridge, and
//! write-protected cartridges are never written.

use crate::common::*;
use serde_json::Value;
use std::ffi::OsStr;
use std::path::Path;

/// A small tree of its own for each backup.
fn tree(root: &Path, seed: u64) {
    write(&root.join("a.bin"), &noise(seed, 200_000));
    write(&root.join("d/b.txt"), format!("tree {seed}\n").as_bytes());
}

/// Backs up `src` to `pool` and returns the backup's JSON.
fn backup(home: &Path, src: &Path, pool: &str) -> Value {
    let b = ok(home, &["backup", src.to_str().unwrap(), "--pool", pool]);
    assert_eq!(b["status"], "ok", "{b}");
    b
}

/// Restores the job of backup `b` and compares it with `src`.
fn restores(home: &Path, b: &Value, src: &Path, out: &Path) {
    restores_identical(home, &b["job_id"].to_string(), src, out);
}

fn volumes(b: &Value) -> Vec<String> {
    b["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

/// The pool `name` of `pool list --json`.
fn pool(home: &Path, name: &str) -> Value {
    let l = ok(home, &["pool", "list"]);
    l["pools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no pool {name} in {l}"))
        .clone()
}

/// Runs a command that must fail with one line on stderr; returns that line.
fn fails(home: &Path, args: &[&str]) -> String {
    let a: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    let (code, _, err) = run(home, &a);
    assert_ne!(code, 0, "tapeloom {args:?} succeeded");
    assert_eq!(err.lines().count(), 1, "not one line: {err}");
    assert!(err.starts_with("tapeloom: error: "), "{err}");
    err
}

/// Bytes on each cartridge, from `library status --json`.
fn bytes_used(home: &Path, barcode: &str) -> u64 {
    cartridge(home, barcode)["bytes_used"].as_u64().unwrap()
}

#[test]
fn backups_land_only_on_their_pools_cartridges() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    ok(
        &home,
        &[
            "pool",
            "create",
            "weekly",
            "--retention",
            "4w",
            "--cartridges",
            "TL0005L9",
            "TL0006L9",
        ],
    );
    ok(&home, &["pool", "create", "daily", "--retention", "7d"]);
    let mut jobs = Vec::new();
    for (i, p) in ["weekly", "daily", "weekly", "daily"].iter().enumerate() {
        let src = t.path().join(format!("src{i}"));
        tree(&src, i as u64 + 1);
        let b = backup(&home, &src, p);
        restores(&home, &b, &src, &t.path().join(format!("out{i}")));
        jobs.push(volumes(&b));
    }
    // The weekly jobs went to its assigned cartridge, and the second appended there.
    assert_eq!(jobs[0], ["TL0005L9"]);
    assert_eq!(jobs[2], ["TL0005L9"]);
    // The daily ones took a blank cartridge assigned to no pool, and appended too.
    assert_eq!(jobs[1], jobs[3]);
    assert!(!["TL0005L9", "TL0006L9"].contains(&jobs[1][0].as_str()));

    let w = pool(&home, "weekly");
    assert_eq!(w["retention_s"], 28 * 86400, "{w}");
    assert_eq!(
        (w["append"].clone(), w["jobs"].clone()),
        (true.into(), 2.into())
    );
    let carts = w["cartridges"].as_array().unwrap();
    assert_eq!(carts.len(), 2, "{w}");
    assert_eq!(carts[0]["barcode"], "TL0005L9");
    assert_eq!(carts[0]["jobs"], 2);
    assert_eq!(carts[1]["barcode"], "TL0006L9");
    assert_eq!(carts[1]["state"], "assigned");
    assert_eq!(carts[1]["bytes_used"], 0);
    assert!(w["bytes_used"].as_u64().unwrap() > 400_000, "{w}");
    assert_eq!(w["bytes_used"], carts[0]["bytes_used"]);
    let d = pool(&home, "daily");
    assert_eq!(
        (d["retention_s"].clone(), d["jobs"].clone()),
        (604800.into(), 2.into())
    );
    assert_eq!(d["cartridges"][0]["barcode"], jobs[1][0].as_str());
    // The default pool is listed though nothing was written to it.
    let def = pool(&home, "default");
    assert_eq!(
        (def["jobs"].clone(), def["retention_s"].clone()),
        (0.into(), Value::Null)
    );
}

#[test]
fn a_cartridge_assigned_to_one_pool_is_never_taken_by_another() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    ok(&home, &["library", "create", "--slots", "3"]);
    ok(
        &home,
        &[
            "pool",
            "create",
            "a",
            "--cartridges",
            "TL0001L9",
            "TL0002L9",
        ],
    );
    ok(
        &home,
        &["pool", "create", "b", "--max-jobs-per-volume", "1"],
    );
    let src = t.path().join("src");
    tree(&src, 7);
    let b = backup(&home, &src, "b");
    assert_eq!(volumes(&b), ["TL0003L9"]);
    restores(&home, &b, &src, &t.path().join("out"));
    // Pool b's only volume holds its one job; a's blank cartridges are not b's.
    let err = fails(&home, &["backup", src.to_str().unwrap(), "--pool", "b"]);
    assert!(err.contains("pool b"), "{err}");
    assert_eq!(bytes_used(&home, "TL0001L9"), 0);
    assert_eq!(bytes_used(&home, "TL0002L9"), 0);
    // Nor labelled into another, forced or not, nor into a pool that does not exist.
    for force in [&[][..], &["--force"][..]] {
        let mut args = vec!["library", "label", "TL0001L9", "--pool", "b"];
        args.extend(force);
        let err = fails(&home, &args);
        assert!(err.contains("TL0001L9") && err.contains("pool a"), "{err}");
    }
    let err = fails(&home, &["library", "label", "TL0001L9", "--pool", "nope"]);
    assert!(err.contains("no pool nope"), "{err}");
    assert_eq!(bytes_used(&home, "TL0001L9"), 0);
    let l = ok(&home, &["library", "label", "TL0001L9", "--pool", "a"]);
    assert_eq!(l["pool"], "a", "{l}");
    assert_eq!(pool(&home, "a")["cartridges"][0]["state"], "labelled");
    // A cartridge of one pool cannot be assigned to another.
    let err = fails(&home, &["pool", "create", "c", "--cartridges", "TL0003L9"]);
    assert!(err.contains("TL0003L9") && err.contains("pool b"), "{err}");
    let err = fails(&home, &["pool", "create", "a"]);
    assert!(err.contains("pool a exists"), "{err}");
}

#[test]
fn max_jobs_per_volume_and_no_append_take_a_new_cartridge_per_job() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    ok(
        &home,
        &["pool", "create", "one", "--max-jobs-per-volume", "1"],
    );
    ok(&home, &["pool", "create", "fresh", "--append", "false"]);
    let mut seen = Vec::new();
    for (i, p) in ["one", "one", "fresh", "fresh"].iter().enumerate() {
        let src = t.path().join(format!("src{i}"));
        tree(&src, 10 + i as u64);
        let b = backup(&home, &src, p);
        restores(&home, &b, &src, &t.path().join(format!("out{i}")));
        let v = volumes(&b);
        assert_eq!(v.len(), 1, "{b}");
        assert!(!seen.contains(&v[0]), "{} written twice: {seen:?}", v[0]);
        seen.push(v[0].clone());
    }
    for name in ["one", "fresh"] {
        let p = pool(&home, name);
        let carts = p["cartridges"].as_array().unwrap();
        assert_eq!(carts.len(), 2, "{p}");
        assert!(carts.iter().all(|c| c["jobs"] == 1), "{p}");
        assert_eq!(p["jobs"], 2);
    }
    assert_eq!(pool(&home, "fresh")["append"], false);
    assert_eq!(pool(&home, "one")["max_jobs_per_volume"], 1);
}

#[test]
fn protected_cartridges_are_never_written() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    ok(&home, &["library", "create", "--slots", "2"]);
    ok(
        &home,
        &[
            "pool",
            "create",
            "vault",
            "--cartridges",
            "TL0001L9",
            "TL0002L9",
        ],
    );
    let p = ok(&home, &["library", "protect", "TL0001L9", "TL0002L9"]);
    assert_eq!(p["write_protected"], true, "{p}");
    let s = ok(&home, &["library", "status"]);
    assert!(
        s["cartridges"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["write_protected"] == true),
        "{s}"
    );
    let src = t.path().join("src");
    tree(&src, 21);
    let err = fails(&home, &["backup", src.to_str().unwrap(), "--pool", "vault"]);
    assert!(err.contains("pool vault"), "{err}");
    assert_eq!(bytes_used(&home, "TL0001L9"), 0);
    assert_eq!(bytes_used(&home, "TL0002L9"), 0);
    // Writable again: the next backup goes to the pool's cartridge.
    ok(
        &home,
        &["library", "protect", "--off", "TL0001L9", "TL0002L9"],
    );
    let b = backup(&home, &src, "vault");
    assert_eq!(volumes(&b), ["TL0001L9"]);
    restores(&home, &b, &src, &t.path().join("out"));
    assert!(bytes_used(&home, "TL0001L9") > 0);
    let err = fails(&home, &["library", "protect", "NOPE01L9"]);
    assert!(err.contains("NOPE01L9"), "{err}");
}

#[test]
fn an_unknown_pool_is_refused_before_anything_is_written() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let src = t.path().join("src");
    tree(&src, 31);
    let err = fails(&home, &["backup", src.to_str().unwrap(), "--pool", "nope"]);
    assert!(err.contains("no pool nope"), "{err}");
    let jobs = ok(&home, &["jobs"]);
    assert_eq!(jobs["jobs"].as_array().map_or(0, Vec::len), 0, "{jobs}");
    assert_eq!(bytes_used(&home, "TL0001L9"), 0);
    let err = fails(&home, &["pool", "create", "bad name"]);
    assert!(err.contains("bad name"), "{err}");
    // The default pool is there without being created.
    let b = backup(&home, &src, "default");
    assert_eq!(volumes(&b), ["TL0001L9"]);
    restores(&home, &b, &src, &t.path().join("out"));
}

#[test]
fn a_pools_key_encrypts_its_jobs() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let key = t.path().join("pool.key");
    let tl = |args: &[&str]| run_env(&home, &[("TAPELOOM_PASSPHRASE", "pool passphrase")], args);
    let (code, k, err) = tl(&[
        "key",
        "create",
        key.to_str().unwrap(),
        "--kdf-memory",
        "64K",
        "--kdf-passes",
        "1",
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, p, err) = tl(&["pool", "create", "sealed", "--key", key.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(p["key"]["fingerprint"], k["fingerprint"], "{p}");
    let src = t.path().join("src");
    tree(&src, 7);
    let (code, b, err) = tl(&["backup", src.to_str().unwrap(), "--pool", "sealed"]);
    assert_eq!(code, 0, "{err}");
    let job = b["job_id"].as_i64().unwrap().to_string();
    // Encrypted: without the key the restore is refused, naming the key.
    let out = t.path().join("out");
    let (code, _, err) = tl(&["restore", &job, "--to", out.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(err.contains(k["short"].as_str().unwrap()), "{err}");
    let (code, _, err) = tl(&[
        "restore",
        &job,
        "--to",
        out.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_same_tree(&src, &out);
    // A pool without a key encrypts nothing.
    ok(&home, &["pool", "create", "plain"]);
    let b = backup(&home, &src, "plain");
    let plain = t.path().join("plain");
    restores(&home, &b, &src, &plain);
}
