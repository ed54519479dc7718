//! Jobs moved to other cartridges (docs/COPIES.md): `tapeloom migrate` to
//! another pool, `tapeloom repack` within a pool. A moved job keeps its id, set
//! and chain, is read from its new place only, and a rebuild from the tapes
//! alone finds it there.

use crate::common::*;
use serde_json::Value;
use std::ffi::OsStr;

/// `args` refused with a one-line error naming all of `words`.
fn refused(home: &std::path::Path, args: &[&str], words: &[&str]) {
    let args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    let (code, _, err) = run(home, &args);
    assert_one_line_error(code, &err, words);
}

/// Job `id` of a `jobs` listing.
fn job(jobs: &Value, id: &str) -> Value {
    let all = jobs["jobs"].as_array().unwrap();
    (all.iter())
        .find(|j| j["job_id"].as_i64().map(|n| n.to_string()).as_deref() == Some(id))
        .cloned()
        .unwrap_or_else(|| panic!("no job {id}: {jobs}"))
}

/// Copies the tree at `from` to `to` (a snapshot of a source between backups).
fn snapshot(from: &std::path::Path, to: &std::path::Path) {
    let st = std::process::Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(st.success());
}

#[test]
fn migrated_jobs_keep_their_ids_and_sets_and_read_from_their_new_pool() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    // An LTO-5 drive and an LTO-9 one: with a drive model, a restore reads
    // through short gaps rather than locating, across the jobs of a cartridge.
    library_with(&home, 2, 8, "64M", &["--model", "lto5,lto9"]);
    for pool in ["old", "new", "vault"] {
        ok(&home, &["pool", "create", pool]);
    }
    let src = t.path().join("src");
    rich_tree(&src);
    write(&src.join("noise.bin"), &noise(3, 2 << 20));
    let common = ["--pool", "old", "--block-size", "64K", "--set", "s"];
    let mut args = vec!["backup", p(&src)];
    args.extend(common);
    let full = ok(&home, &args)["job_id"].to_string();
    let first = t.path().join("first");
    snapshot(&src, &first);
    write(&src.join("later.txt"), b"written after the full\n");
    args.extend(["--level", "incremental"]);
    let incr = ok(&home, &args)["job_id"].to_string();
    let old_tape = job(&ok(&home, &["jobs"]), &full)["volumes"][0]
        .as_str()
        .unwrap()
        .to_string();

    refused(
        &home,
        &["migrate", &full, "--to-pool", "nowhere"],
        &["nowhere"],
    );

    // The full moves; the incremental stays.
    let m = ok(&home, &["migrate", &full, "--to-pool", "new"]);
    let moved = &m["moved"][0];
    assert_eq!(moved["from"][0], old_tape.as_str(), "{m}");
    let new_tape = moved["to"][0].as_str().unwrap().to_string();
    assert_ne!(new_tape, old_tape, "{m}");
    assert!(moved["verified_blocks"].as_u64().unwrap() > 30, "{m}");
    // The incremental is still on the old cartridge: it is not emptied.
    assert_eq!(moved["emptied"].as_array().unwrap().len(), 0, "{m}");
    let jobs = ok(&home, &["jobs"]);
    let f = job(&jobs, &full);
    assert_eq!(f["moved_to"], moved["copy_no"], "{jobs}");
    assert_eq!(f["volumes"][0], new_tape.as_str(), "{jobs}");
    assert_eq!(f["copies"].as_array().unwrap().len(), 0, "{jobs}");
    assert_eq!(f["set"], "s", "{jobs}");
    assert_eq!(job(&jobs, &incr)["volumes"][0], old_tape.as_str(), "{jobs}");
    let ls = ok(&home, &["ls", &full, "noise.bin"]);
    assert_eq!(ls["entries"][0]["volume"], new_tape.as_str(), "{ls}");

    // Whole, and the set at its last job across a moved and an unmoved job.
    let out = t.path().join("full");
    let r = ok(&home, &["restore", &full, "--to", p(&out)]);
    assert_eq!(r["copy"], moved["copy_no"], "{r}");
    assert_same_tree(&first, &out);
    let out = t.path().join("set1");
    ok(&home, &["restore", "--set", "s", "--to", p(&out)]);
    assert_same_tree(&src, &out);
    let v = ok(&home, &["verify", &full]);
    assert_eq!(v["ok"], true, "{v}");

    // Everything read from the old cartridge moves: it holds no job then.
    let m = ok(
        &home,
        &["migrate", "--volume", &old_tape, "--to-pool", "new"],
    );
    assert_eq!(m["moved"].as_array().unwrap().len(), 1, "{m}");
    assert_eq!(m["moved"][0]["job_id"].to_string(), incr, "{m}");
    assert_eq!(m["moved"][0]["emptied"][0], old_tape.as_str(), "{m}");
    let out = t.path().join("set2");
    ok(&home, &["restore", "--set", "s", "--to", p(&out)]);
    assert_same_tree(&src, &out);
    let pools = ok(&home, &["pool", "list"]);
    let old = (pools["pools"].as_array().unwrap().iter())
        .find(|p| p["name"] == "old")
        .cloned()
        .unwrap();
    assert_eq!(old["jobs"], 0, "{pools}");

    // A moved job is copied as any other, from its new place.
    let c = ok(&home, &["copy", &full, "--to-pool", "vault"]);
    let copy_no = c["copies"][0]["copy_no"].to_string();
    let out = t.path().join("vault");
    ok(
        &home,
        &["restore", &full, "--copy", &copy_no, "--to", p(&out)],
    );
    assert_same_tree(&first, &out);
    let f = job(&ok(&home, &["jobs"]), &full);
    assert_eq!(f["copies"].as_array().unwrap().len(), 1, "{f}");
    // And moved again, to its first pool: its place is the new copy only.
    let m = ok(&home, &["migrate", &full, "--to-pool", "old"]);
    assert_eq!(m["moved"][0]["from"][0], new_tape.as_str(), "{m}");
    let out = t.path().join("back");
    ok(&home, &["restore", &full, "--to", p(&out)]);
    assert_same_tree(&first, &out);

    // A repack of the copy pool's cartridge moves the further copy within its
    // pool, and labels the cartridge anew.
    let vault_tape = c["copies"][0]["cartridges"][0]
        .as_str()
        .unwrap()
        .to_string();
    let r = ok(&home, &["repack", &vault_tape]);
    let rp = &r["repacked"][0];
    assert_eq!(rp["freed"], true, "{r}");
    let m = &rp["moved"][0];
    assert_eq!(m["from"][0], vault_tape.as_str(), "{r}");
    assert_ne!(m["to"][0], vault_tape.as_str(), "{r}");
    let f = job(&ok(&home, &["jobs"]), &full);
    let copies = f["copies"].as_array().unwrap();
    assert_eq!(copies.len(), 1, "{f}");
    assert_eq!(copies[0]["pool"], "vault", "{f}");
    assert_eq!(copies[0]["copy_no"], m["copy_no"], "{f}");
    let out = t.path().join("vault2");
    let n = m["copy_no"].to_string();
    ok(&home, &["restore", &full, "--copy", &n, "--to", p(&out)]);
    assert_same_tree(&first, &out);
}

/// Backs `src` up to pool `main` on the test clock at `now`; its job id.
fn backup_at(home: &std::path::Path, src: &std::path::Path, now: &str) -> String {
    let b = ok_env(
        home,
        &[("TAPELOOM_NOW", now)],
        &["backup", p(src), "--pool", "main", "--block-size", "64K"],
    );
    b["job_id"].to_string()
}

/// What a rebuild is to give back of a `jobs` listing: each job's name, set,
/// files, bytes, cartridges, the copy it moved to and its copies.
fn shape(jobs: &Value) -> Vec<String> {
    let mut out: Vec<String> = (jobs["jobs"].as_array().unwrap().iter())
        .map(|j| {
            let copies: Vec<String> = (j["copies"].as_array().unwrap().iter())
                .map(|c| format!("{}:{}:{}", c["copy_no"], c["state"], c["volumes"]))
                .collect();
            format!(
                "{} {} {} {} {} moved={} copies={:?}",
                j["name"], j["set"], j["files"], j["bytes"], j["volumes"], j["moved_to"], copies
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn repack_frees_cartridges_of_expired_jobs_and_a_rebuild_finds_the_moved_jobs() {
    if !test_hooks() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    library(&home, 2, 8, "64M");
    ok(
        &home,
        &[
            "pool",
            "create",
            "main",
            "--retention",
            "30d",
            "--reclaim",
            "60%",
            "--max-jobs-per-volume",
            "2",
        ],
    );
    // Two cartridges, each with a big job of January (expired by June) and a
    // small one of June.
    let mut live = Vec::new();
    for i in 0..2u64 {
        let big = t.path().join(format!("big{i}"));
        write(&big.join("b.bin"), &noise(10 + i, 3 << 20));
        backup_at(&home, &big, "2026-01-05T00:00:00Z");
        let small = t.path().join(format!("small{i}"));
        write(&small.join(format!("own{i}.txt")), b"kept\n");
        write(&small.join("dir/some.bin"), &noise(20 + i, 200 << 10));
        live.push((backup_at(&home, &small, "2026-06-01T00:00:00Z"), small));
    }
    let june = [("TAPELOOM_NOW", "2026-06-05T00:00:00Z")];
    let before = ok_env(&home, &june, &["jobs"]);
    let tapes: Vec<String> = (live.iter())
        .map(|(id, _)| job(&before, id)["volumes"][0].as_str().unwrap().to_string())
        .collect();
    assert_ne!(tapes[0], tapes[1], "{before}");

    refused(&home, &["repack", "--pool", "nowhere"], &["nowhere"]);
    let r = ok_env(&home, &june, &["repack", "--pool", "main"]);
    let cands = r["candidates"].as_array().unwrap();
    assert_eq!(cands.len(), 2, "{r}");
    for c in cands {
        assert!(c["expired_percent"].as_f64().unwrap() >= 70.0, "{r}");
        assert!(
            tapes.contains(&c["barcode"].as_str().unwrap().to_string()),
            "{r}"
        );
    }
    for rp in r["repacked"].as_array().unwrap() {
        assert_eq!(rp["freed"], true, "{r}");
        assert_eq!(rp["expired_jobs"].as_array().unwrap().len(), 1, "{r}");
    }
    // The big jobs are forgotten; the small ones moved off both cartridges.
    let after = ok_env(&home, &june, &["jobs"]);
    assert_eq!(after["jobs"].as_array().unwrap().len(), 2, "{after}");
    for (id, small) in &live {
        let j = job(&after, id);
        assert!(j["moved_to"].as_u64().is_some(), "{after}");
        for v in j["volumes"].as_array().unwrap() {
            assert!(!tapes.contains(&v.as_str().unwrap().to_string()), "{after}");
        }
        let out = t.path().join(format!("out{id}"));
        ok(&home, &["restore", id, "--to", p(&out)]);
        assert_same_tree(small, &out);
        assert_eq!(ok(&home, &["verify", id])["ok"], true);
    }
    // A second repack finds nothing to do.
    let again = ok_env(&home, &june, &["repack", "--pool", "main"]);
    assert_eq!(again["repacked"].as_array().unwrap().len(), 0, "{again}");

    // From the tapes alone: the same jobs, in their new places.
    forget_catalog(&home);
    let rb = ok(&home, &["catalog", "rebuild"]);
    assert_eq!(rb["jobs_moved"].as_array().unwrap().len(), 2, "{rb}");
    let rebuilt = ok_env(&home, &june, &["jobs"]);
    assert_eq!(shape(&rebuilt), shape(&after), "{rebuilt}\n{after}");
    for j in rebuilt["jobs"].as_array().unwrap() {
        let id = j["job_id"].to_string();
        let name = j["name"].as_str().unwrap();
        let (_, small) = live
            .iter()
            .find(|(_, s)| name.contains(s.file_name().unwrap().to_str().unwrap()))
            .unwrap_or_else(|| panic!("{name}"));
        let out = t.path().join(format!("rebuilt{id}"));
        ok(&home, &["restore", &id, "--to", p(&out)]);
        assert_same_tree(small, &out);
    }
}
