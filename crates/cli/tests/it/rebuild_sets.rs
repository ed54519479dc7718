//! A backup set rebuilt from tapes alone: every job's set, level and base, and the
//! set's tree at every job (metadata-only rows, change facts, deletions), are what
//! the catalog held before it was lost; a later incremental finds nothing changed.

use crate::common;
use crate::common::{forget_catalog, ok, open_catalog, write};
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use tapeloom_catalog::{Catalog, FileRow};

/// One object of a tree at a job, with jobs named by tag (ids may differ after a
/// rebuild): the row, the job holding it, and the job and row holding its data.
type TreeByTag = BTreeMap<Vec<u8>, (u64, FileRow, Option<(u64, FileRow)>)>;

/// What the catalog says of one job: its set, level, base (by tag), deletions and
/// the set's tree at it.
#[derive(Debug, PartialEq)]
struct JobView {
    set: String,
    level: &'static str,
    base: Option<u64>,
    deletions: Vec<(Vec<u8>, u8)>,
    tree: TreeByTag,
}

fn open(home: &Path) -> Catalog {
    open_catalog(home)
}

/// Every job of the catalog, by tag.
fn views(home: &Path) -> BTreeMap<u64, JobView> {
    let cat = open(home);
    let jobs = cat.jobs().expect("list jobs");
    let tag_of = |id: i64| jobs.iter().find(|j| j.id == id).map(|j| j.tag);
    let mut out = BTreeMap::new();
    for j in &jobs {
        let tree = cat
            .tree_at(j.id)
            .expect("tree at a job")
            .into_iter()
            .map(|(p, f)| {
                let data = f.data.map(|(d, r)| (tag_of(d).expect("data job"), r));
                (p, (tag_of(f.job).expect("row job"), f.row, data))
            })
            .collect();
        let view = JobView {
            set: j.set.clone(),
            level: j.level.name(),
            base: j.base.map(|b| tag_of(b).expect("base job")),
            deletions: cat.deletions(j.id).expect("deletions"),
            tree,
        };
        out.insert(j.tag, view);
    }
    out
}

fn backup(home: &Path, src: &Path, level: &str) -> serde_json::Value {
    let src = src.to_str().unwrap();
    ok(home, &["backup", "--set", "s", "--level", level, src])
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// The source of the full: files that later change in each way, a directory, a
/// symlink and a hard link.
fn first_tree(src: &Path) {
    std::fs::create_dir_all(src.join("dir/sub")).unwrap();
    for (name, seed) in [
        ("same", 1),
        ("modified", 2),
        ("deleted", 3),
        ("renamed-from", 4),
        ("chmod-only", 5),
        ("dir/sub/deep", 6),
        ("dir/later", 7),
    ] {
        write(&src.join(name), &common::noise(seed, 3000 + seed as usize));
    }
    std::os::unix::fs::symlink("same", src.join("link")).unwrap();
    std::fs::hard_link(src.join("same"), src.join("hard")).unwrap();
}

#[test]
fn a_set_rebuilt_from_tapes_has_every_jobs_tree_and_place() {
    let t = tempfile::tempdir().unwrap();
    let (home, src) = (t.path().join("home"), t.path().join("src"));
    first_tree(&src);
    backup(&home, &src, "full");

    // First incremental: modified, deleted, added, renamed and chmod-only files.
    write(&src.join("modified"), b"new contents");
    std::fs::remove_file(src.join("deleted")).unwrap();
    write(&src.join("added"), &common::noise(9, 5000));
    std::fs::rename(src.join("renamed-from"), src.join("renamed-to")).unwrap();
    chmod(&src.join("chmod-only"), 0o600);
    let inc1 = backup(&home, &src, "incremental");
    assert_eq!(inc1["level"], "incremental");
    assert!(inc1["meta_only"].as_u64().unwrap() >= 1, "{inc1}");
    assert!(inc1["deleted"].as_u64().unwrap() >= 2, "{inc1}");

    // Second incremental: a directory's file goes, another changes mode again.
    std::fs::remove_file(src.join("dir/later")).unwrap();
    chmod(&src.join("chmod-only"), 0o640);
    write(&src.join("dir/sub/deep"), b"deeper");
    backup(&home, &src, "incremental");

    // A differential: everything since the full.
    write(&src.join("added"), b"added, then changed");
    let diff = backup(&home, &src, "differential");
    assert_eq!(diff["level"], "differential");

    let before = views(&home);
    assert_eq!(before.len(), 4);
    // `ls --set --at` each job's start, before and after: the same listing.
    let listings = |home: &Path| -> Vec<serde_json::Value> {
        ok(home, &["jobs"])["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| {
                let at = j["started"].as_str().unwrap();
                ok(home, &["ls", "--set", "s", "--at", at])
            })
            .collect()
    };
    let listed = listings(&home);
    assert_eq!(listed.len(), 4);
    forget_catalog(&home);
    let rebuilt = ok(&home, &["catalog", "rebuild"]);
    assert_eq!(
        rebuilt["jobs_added"].as_array().unwrap().len(),
        4,
        "{rebuilt}"
    );
    let after = views(&home);
    for (tag, view) in &before {
        let again = after.get(tag).expect("every job is rebuilt");
        assert_eq!(again, view, "job {tag:016x} differs after the rebuild");
    }
    assert_eq!(listings(&home), listed);
    let levels: Vec<&str> = after.values().map(|v| v.level).collect();
    assert_eq!(levels.iter().filter(|l| **l == "incremental").count(), 2);

    // A further incremental finds nothing changed since the differential.
    let last = open(&home).last_in_set("s", false).unwrap().unwrap();
    let objects = open(&home).tree_at(last.id).unwrap().len() as u64;
    let inc3 = backup(&home, &src, "incremental");
    assert_eq!(inc3["base_job"].as_i64(), Some(last.id), "{inc3}");
    assert_eq!(inc3["files"], 0, "{inc3}");
    assert_eq!(inc3["unchanged"].as_u64(), Some(objects), "{inc3}");
}

/// Runs an incremental of set `s` in a child process, slowed down, and kills it
/// (SIGKILL) once the tape has grown by `grown` bytes.
fn killed_incremental(home: &Path, src: &Path, grown: u64) {
    let mut args = ["backup", "--set", "s", "--level", "incremental"]
        .map(OsStr::new)
        .to_vec();
    args.extend(["--limit-rate", "2MB", "--block-size", "64K"].map(OsStr::new));
    args.push(src.as_os_str());
    common::killed_once_tape_grew(home, &args, grown);
}

#[test]
fn an_incremental_killed_before_its_index_is_recovered_with_its_metadata_only_rows() {
    let t = tempfile::tempdir().unwrap();
    let (home, src) = (t.path().join("home"), t.path().join("src"));
    for k in 0..20u64 {
        write(&src.join(format!("a{k:02}")), &common::noise(k, 1000));
    }
    for k in 0..4u64 {
        write(
            &src.join(format!("z{k}")),
            &common::noise(100 + k, 1_000_000),
        );
    }
    backup(&home, &src, "full");
    // Metadata alone first in the stream (a*), then a lot of data (z*).
    for k in 0..20u64 {
        chmod(&src.join(format!("a{k:02}")), 0o600);
    }
    for k in 0..4u64 {
        write(
            &src.join(format!("z{k}")),
            &common::noise(200 + k, 1_000_000),
        );
    }
    killed_incremental(&home, &src, 1_000_000);
    forget_catalog(&home);
    let r = ok(&home, &["catalog", "rebuild"]);
    assert_eq!(r["jobs_recovered"], serde_json::json!([2]), "{r}");
    let cat = open(&home);
    let inc = cat.job(2).unwrap().unwrap();
    assert_eq!(inc.status.as_str(), "partial");
    assert_eq!((inc.set.as_str(), inc.level.name()), ("s", "incremental"));
    assert_eq!(inc.base, Some(1));
    let tree = cat.tree_at(2).unwrap();
    for k in 0..20u64 {
        let f = &tree[format!("a{k:02}").as_bytes()];
        assert_eq!((f.job, f.row.meta_only, f.row.mode), (2, true, 0o600));
        let (dj, d) = f.data.as_ref().expect("data in the full");
        assert_eq!((*dj, d.size, d.meta_only), (1, 1000, false));
    }
    // The full's rows of what the killed job did not reach stay in the tree.
    assert_eq!(tree[&b"z3".to_vec()].job, 1);
}

#[test]
fn a_job_whose_base_is_on_no_cartridge_read_keeps_a_broken_chain() {
    let t = tempfile::tempdir().unwrap();
    let (home, src) = (t.path().join("home"), t.path().join("src"));
    write(&src.join("f"), b"first");
    let full = backup(&home, &src, "full");
    let full_tape = full["volumes"][0].as_str().unwrap().to_string();
    // The incremental goes to another pool's cartridge, the full's is then lost.
    ok(&home, &["pool", "create", "other"]);
    write(&src.join("g"), b"second");
    let s = src.to_str().unwrap();
    let inc = ok(
        &home,
        &[
            "backup",
            "--set",
            "s",
            "--level",
            "incremental",
            "--pool",
            "other",
            s,
        ],
    );
    assert_ne!(inc["volumes"][0].as_str(), Some(full_tape.as_str()));
    forget_catalog(&home);
    for ext in ["data", "idx"] {
        let f = home.join(format!("library/tapes/{full_tape}.{ext}"));
        std::fs::remove_file(f).unwrap();
    }
    let r = ok(&home, &["catalog", "rebuild"]);
    assert_eq!(r["jobs_added"], serde_json::json!([1]), "{r}");
    assert_eq!(r["bases_missing"], serde_json::json!([1]), "{r}");
    let cat = open(&home);
    let j = cat.job(1).unwrap().unwrap();
    assert_eq!((j.set.as_str(), j.level.name()), ("s", "incremental"));
    assert!(matches!(
        cat.tree_at(1),
        Err(tapeloom_catalog::CatalogError::BrokenChain { .. })
    ));
    drop(cat);
    // The set's next incremental does not trust the partial tree: it runs as a full.
    let next = backup(&home, &src, "incremental");
    assert_eq!(next["level"], "full", "{next}");
    assert!(next["promoted"].is_string(), "{next}");
}
