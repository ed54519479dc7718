//! `tapeloom catalog check` on a real backup's catalog, sound and then broken.

use crate::common::*;
use serde_json::Value;
use std::ffi::OsStr;
use std::path::Path;

fn check(home: &Path) -> (i32, Value, String) {
    run(home, &[OsStr::new("catalog"), OsStr::new("check")])
}

/// What the foreign keys would refuse is what the check must find: `sql` with
/// them off.
fn corrupt(home: &Path, sql: &str) {
    sql_exec(home, sql);
}

fn kinds(v: &Value) -> Vec<(String, Value)> {
    (v["problems"].as_array().unwrap().iter())
        .map(|p| (p["kind"].as_str().unwrap().to_string(), p["job"].clone()))
        .collect()
}

#[test]
fn a_sound_catalog_passes_and_a_broken_one_is_named() {
    let t = tempfile::tempdir().unwrap();
    let (home, src) = (t.path().join("home"), t.path().join("src"));
    write(&src.join("a/one"), &noise(1, 700_000));
    write(&src.join("a/two"), b"two");
    write(&src.join("b"), &noise(2, 100_000));
    ok(&home, &["backup", src.to_str().unwrap()]);
    let v = ok(&home, &["catalog", "check"]);
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(
        (v["jobs"].as_u64(), v["volumes"].as_u64()),
        (Some(1), Some(1))
    );
    assert!(v["files"].as_u64().unwrap() >= 4, "{v}");
    assert_eq!(v["problems"].as_array().unwrap().len(), 0);

    // A file row moved past the end of its segment.
    let path = blob(&home, b"a/two");
    corrupt(
        &home,
        &format!("UPDATE files SET start_lbn = 100000, end_lbn = 100001 WHERE path = {path}"),
    );
    let (code, v, err) = check(&home);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["ok"], false);
    assert_eq!(kinds(&v), [("file-outside-segment".to_string(), 1.into())]);
    let detail = v["problems"][0]["detail"].as_str().unwrap();
    assert!(detail.starts_with("a/two: "), "{detail}");
    assert_eq!(err, "tapeloom: error: the catalog has 1 problems\n");

    // The volume the job's segment is on, gone.
    corrupt(&home, "DELETE FROM volumes");
    let (code, v, _) = check(&home);
    assert_eq!(code, 1, "{v}");
    let k = kinds(&v);
    assert!(k.contains(&("missing-volume".to_string(), 1.into())), "{v}");

    // For people: the problems, one a line, and the exit status.
    let out = std::process::Command::new(bin())
        .arg("--home")
        .arg(&home)
        .args(["catalog", "check"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("missing-volume (job 1): segment 0 is on volume 1"),
        "{text}"
    );
    assert!(
        text.contains("file-outside-segment (job 1): a/two"),
        "{text}"
    );
}

#[test]
fn rows_of_a_deleted_job_are_orphans() {
    let t = tempfile::tempdir().unwrap();
    let (home, src) = (t.path().join("home"), t.path().join("src"));
    write(&src.join("f"), b"data");
    ok(&home, &["backup", src.to_str().unwrap()]);
    corrupt(&home, "DELETE FROM jobs");
    let (code, v, _) = check(&home);
    assert_eq!(code, 1, "{v}");
    let k = kinds(&v);
    assert!(
        k.iter().all(|(kind, job)| kind == "orphan" && *job == 1),
        "{v}"
    );
    let details: Vec<&str> = (v["problems"].as_array().unwrap().iter())
        .map(|p| p["detail"].as_str().unwrap())
        .collect();
    for table in ["files", "job_volumes", "streams", "samples"] {
        assert!(
            details.iter().any(|d| d.contains(&format!(" of {table} "))),
            "{table}: {details:?}"
        );
    }
}

#[test]
fn an_unreadable_catalog_is_one_line_of_error() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    ok(&home, &["jobs"]);
    for f in ["catalog.sqlite-wal", "catalog.sqlite-shm"] {
        let _ = std::fs::remove_file(home.join(f));
    }
    std::fs::write(home.join("catalog.sqlite"), noise(3, 64 * 1024)).unwrap();
    let (code, v, err) = check(&home);
    assert_eq!(code, 1);
    assert_eq!(v, Value::Null);
    assert!(err.starts_with("tapeloom: error: "), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
