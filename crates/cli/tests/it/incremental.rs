//! Backup sets and levels: an incremental holds what changed since the set's last
//! job, a differential what changed since its last full; changes are found from the
//! catalog without opening unchanged files; deletions and renames are recorded.

use crate::common::*;
use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// A library big enough for the tests.
fn home_in(t: &Path) -> std::path::PathBuf {
    let home = t.join("home");
    library(&home, 1, 4, "256M");
    home
}

/// `dirs` folders of `per` files each, of 1 to 3,000 bytes; file `i` of folder `d`
/// is `d{d:03}/f{i:03}`.
fn make_tree(src: &Path, dirs: usize, per: usize) {
    numbered_files(src, (dirs, per), 3000, |d, i| format!("d{d:03}/f{i:03}"));
}

/// The rows of job `job` in the home's catalog: (path, type, meta_only).
fn rows(home: &Path, job: i64) -> Vec<(String, i64, bool)> {
    let c = open_catalog(home);
    (c.files(job, None).unwrap().into_iter())
        .map(|r| {
            let path = String::from_utf8_lossy(&r.path).into_owned();
            (path, i64::from(r.kind), r.meta_only)
        })
        .collect()
}

fn size(p: &Path) -> u64 {
    std::fs::symlink_metadata(p).unwrap().len()
}

#[test]
fn an_incremental_holds_exactly_what_changed_and_reads_nothing_else() {
    let t = tempfile::tempdir().unwrap();
    let home = home_in(t.path());
    let src = t.path().join("src");
    // Over 20,000 rows: the base is read in two halves at once.
    make_tree(&src, 100, 201);
    let s = src.to_str().unwrap();
    let full = ok(&home, &["backup", "--set", "web", s]);
    assert_eq!(full["level"], "full");
    assert_eq!(full["set"], "web");
    assert_eq!(full["source_files_opened"], 20_100);
    let full_id = full["job_id"].as_i64().unwrap();

    // 200 modified, 50 deleted, 30 added, 20 renamed, 5 chmod, 5 xattr.
    let f = |d: usize, i: usize| src.join(format!("d{d:03}/f{i:03}"));
    let mut data = BTreeSet::new();
    let mut read_bytes = 0u64;
    for k in 0..200 {
        let p = f(k % 100, 10 + k / 100);
        write(&p, &noise(1_000_000 + k as u64, 500 + k));
        read_bytes += size(&p);
        data.insert(format!("d{:03}/f{:03}", k % 100, 10 + k / 100));
    }
    let mut deleted = BTreeSet::new();
    for k in 0..50 {
        std::fs::remove_file(f(k, 50)).unwrap();
        deleted.insert(format!("d{k:03}/f050"));
    }
    for k in 0..30 {
        let p = src.join(format!("d{k:03}/new{k}"));
        write(&p, &noise(2_000_000 + k as u64, 100 + k));
        read_bytes += size(&p);
        data.insert(format!("d{k:03}/new{k}"));
    }
    for k in 0..20 {
        let to = src.join(format!("d{:03}/moved{k}", 50 + k));
        std::fs::rename(f(50 + k, 60), &to).unwrap();
        read_bytes += size(&to);
        data.insert(format!("d{:03}/moved{k}", 50 + k));
        deleted.insert(format!("d{:03}/f060", 50 + k));
    }
    let mut meta = BTreeSet::new();
    for k in 0..5 {
        std::fs::set_permissions(f(80 + k, 70), std::fs::Permissions::from_mode(0o600)).unwrap();
        meta.insert(format!("d{:03}/f070", 80 + k));
        xattr::set(f(90 + k, 70), "user.note", b"changed").unwrap();
        meta.insert(format!("d{:03}/f070", 90 + k));
    }

    let inc = ok(
        &home,
        &["backup", "--set", "web", "--level", "incremental", s],
    );
    assert_eq!(inc["level"], "incremental");
    assert_eq!(inc["base_job"], full_id);
    assert_eq!(inc["promoted"], serde_json::Value::Null);
    // Only the 250 changed or added files were opened and read.
    assert_eq!(inc["source_files_opened"], 250, "{inc}");
    assert_eq!(inc["source_bytes_read"], read_bytes);
    assert_eq!(inc["bytes"], read_bytes);
    assert_eq!(inc["meta_only"], 10);
    assert_eq!(inc["deleted"], 70);
    let inc_id = inc["job_id"].as_i64().unwrap();
    let r = rows(&home, inc_id);
    let with_data: BTreeSet<String> = r
        .iter()
        .filter(|(_, k, m)| *k == 1 && !m)
        .map(|(p, _, _)| p.clone())
        .collect();
    assert_eq!(with_data, data);
    let meta_rows: BTreeSet<String> = r
        .iter()
        .filter(|(_, _, m)| *m)
        .map(|(p, _, _)| p.clone())
        .collect();
    assert_eq!(meta_rows, meta);
    // Besides those, only directories whose listing changed.
    assert!(r.iter().all(|(p, k, m)| *m || data.contains(p) || *k == 2));
    let gone: BTreeSet<String> = (open_catalog(&home).deletions(inc_id).unwrap().into_iter())
        .map(|(p, _)| String::from_utf8(p).unwrap())
        .collect();
    assert_eq!(gone, deleted);
    // The files unchanged since the base were neither opened nor stored.
    let dirs_unchanged = inc["unchanged"].as_u64().unwrap();
    assert!(dirs_unchanged >= 20_100 - 200 - 50 - 20 - 10, "{inc}");

    // Nothing changed since: the next incremental stores nothing and reads nothing.
    let again = ok(
        &home,
        &["backup", "--set", "web", "--level", "incremental", s],
    );
    assert_eq!(again["base_job"], inc_id);
    assert_eq!(
        (
            again["files"].as_u64(),
            again["source_files_opened"].as_u64()
        ),
        (Some(0), Some(0))
    );
    assert_eq!(again["deleted"], 0);
}

#[test]
fn a_set_without_a_full_gets_one_and_a_differential_goes_back_to_the_full() {
    let t = tempfile::tempdir().unwrap();
    let home = home_in(t.path());
    let src = t.path().join("src");
    make_tree(&src, 3, 10);
    let s = src.to_str().unwrap();
    let first = ok(
        &home,
        &["backup", "--set", "db", "--level", "incremental", s],
    );
    assert_eq!(first["level"], "full");
    let why = first["promoted"].as_str().unwrap();
    assert!(why.contains("set db has no full backup"), "{why}");
    // A differential with no full in its set runs as a full too.
    let other = ok(
        &home,
        &["backup", "--set", "logs", "--level", "differential", s],
    );
    assert_eq!(other["level"], "full");
    let full_id = first["job_id"].as_i64().unwrap();

    write(&src.join("d000/f000"), b"day one");
    let inc = ok(
        &home,
        &["backup", "--set", "db", "--level", "incremental", s],
    );
    assert_eq!(inc["base_job"], full_id);
    write(&src.join("d001/f000"), b"day two");
    let inc2 = ok(
        &home,
        &["backup", "--set", "db", "--level", "incremental", s],
    );
    assert_eq!(inc2["base_job"], inc["job_id"]);
    assert_eq!(inc2["source_files_opened"], 1);
    // The differential holds both days' changes, relative to the full.
    let diff = ok(
        &home,
        &["backup", "--set", "db", "--level", "differential", s],
    );
    assert_eq!(diff["level"], "differential");
    assert_eq!(diff["base_job"], full_id);
    assert_eq!(diff["source_files_opened"], 2);
    let paths: Vec<String> = rows(&home, diff["job_id"].as_i64().unwrap())
        .into_iter()
        .filter(|(_, k, _)| *k == 1)
        .map(|(p, _, _)| p)
        .collect();
    assert_eq!(paths, vec!["d000/f000", "d001/f000"]);
    // The job is named after its set; `jobs --json` shows set and level.
    let jobs = ok(&home, &["jobs"]);
    let j = jobs["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["job_id"] == diff["job_id"])
        .unwrap()
        .clone();
    assert_eq!(
        (&j["name"], &j["set"], &j["level"], &j["base_job"]),
        (
            &"db".into(),
            &"db".into(),
            &"differential".into(),
            &full_id.into()
        )
    );
    // A bad level is one clear line.
    let (code, _, err) = run(
        &home,
        &[
            "backup".as_ref(),
            "--level".as_ref(),
            "weekly".as_ref(),
            s.as_ref(),
        ],
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("--level takes full, incremental or differential"),
        "{err}"
    );
}

#[test]
fn a_hard_link_set_that_loses_its_first_name_is_stored_whole_under_the_next() {
    let t = tempfile::tempdir().unwrap();
    let home = home_in(t.path());
    let src = t.path().join("src");
    write(&src.join("a"), b"shared bytes");
    std::fs::hard_link(src.join("a"), src.join("b")).unwrap();
    std::fs::hard_link(src.join("a"), src.join("c")).unwrap();
    write(&src.join("plain"), b"plain");
    let s = src.to_str().unwrap();
    let full = ok(&home, &["backup", "--set", "h", s]);
    let r = rows(&home, full["job_id"].as_i64().unwrap());
    assert_eq!(
        r.iter()
            .map(|(p, k, _)| (p.as_str(), *k))
            .collect::<Vec<_>>(),
        vec![(".", 2), ("a", 1), ("b", 4), ("c", 4), ("plain", 1)]
    );
    std::fs::remove_file(src.join("a")).unwrap();
    let inc = ok(
        &home,
        &["backup", "--set", "h", "--level", "incremental", s],
    );
    let r = rows(&home, inc["job_id"].as_i64().unwrap());
    // b is now the first name and holds the data; c links to it; plain unchanged.
    assert_eq!(
        r.iter()
            .map(|(p, k, m)| (p.as_str(), *k, *m))
            .collect::<Vec<_>>(),
        vec![(".", 2, false), ("b", 1, false), ("c", 4, false)]
    );
    assert_eq!(inc["deleted"], 1);
    assert_eq!(inc["bytes"], 12);
}
