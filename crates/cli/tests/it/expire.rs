//! Retention and recycling: `expire` marks expired the cartridges of a pool whose
//! jobs all ended more than the pool's retention ago (`TAPELOOM_NOW` dates the
//! runs), forgets those jobs, and a backup of the pool with no blank cartridge left
//! labels the oldest expired one anew, one generation up.

use crate::common::*;
use serde_json::Value;
use std::path::Path;

/// Runs tapeloom `args` (with `--json`) as if at `now`; returns (code, JSON, stderr).
fn run_at(home: &Path, now: &str, args: &[&str]) -> (i32, Value, String) {
    run_env(home, &[("TAPELOOM_NOW", now)], args)
}

/// As [`run_at`], and it must succeed.
fn ok_at(home: &Path, now: &str, args: &[&str]) -> Value {
    ok_env(home, &[("TAPELOOM_NOW", now)], args)
}

/// Backs up a fresh tree `name` to `pool` at `now`; returns (source, backup JSON).
fn backup_at(
    home: &Path,
    t: &Path,
    name: &str,
    pool: &str,
    now: &str,
) -> (std::path::PathBuf, Value) {
    let src = t.join(name);
    write(
        &src.join("a.bin"),
        &noise(name.len() as u64 + now.len() as u64, 150_000),
    );
    write(
        &src.join("d/b.txt"),
        format!("{name} at {now}\n").as_bytes(),
    );
    let b = ok_at(
        home,
        now,
        &["backup", src.to_str().unwrap(), "--pool", pool],
    );
    assert_eq!(b["status"], "ok", "{b}");
    (src, b)
}

/// The barcodes `expire --json` lists.
fn listed(e: &Value) -> Vec<String> {
    e["cartridges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["barcode"].as_str().unwrap().to_string())
        .collect()
}

/// Every job's start time, from `jobs --json`.
fn starts(home: &Path) -> Vec<String> {
    ok(home, &["jobs"])["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["started"].as_str().unwrap().to_string())
        .collect()
}

const DEFAULT_AT: &str = "2026-01-01T01:00:00Z";
const A_AT: &str = "2026-01-01T03:00:00Z";
const M_AT: &str = "2026-01-01T04:00:00Z";
const B_AT: &str = "2026-01-02T03:00:00Z";
const EXPIRE_AT: &str = "2026-01-02T12:00:00Z";
const C_AT: &str = "2026-01-02T12:30:00Z";

#[test]
fn expired_daily_cartridges_are_recycled_one_generation_up() {
    if !test_hooks() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    library(&home, 1, 4, "16M");
    ok(
        &home,
        &[
            "pool",
            "create",
            "daily",
            "--retention",
            "1d",
            "--append",
            "false",
            "--cartridges",
            "TL0001L9",
            "TL0002L9",
        ],
    );
    ok(
        &home,
        &[
            "pool",
            "create",
            "monthly",
            "--retention",
            "30d",
            "--cartridges",
            "TL0003L9",
        ],
    );
    // The default pool's job takes the one blank cartridge assigned to no pool.
    let (_, d) = backup_at(&home, t.path(), "dflt", "default", DEFAULT_AT);
    assert_eq!(d["volumes"], serde_json::json!(["TL0004L9"]));
    let (_, a) = backup_at(&home, t.path(), "a", "daily", A_AT);
    assert_eq!(a["volumes"], serde_json::json!(["TL0001L9"]));
    let (_, m) = backup_at(&home, t.path(), "m", "monthly", M_AT);
    assert_eq!(m["volumes"], serde_json::json!(["TL0003L9"]));
    let (_, b) = backup_at(&home, t.path(), "b", "daily", B_AT);
    assert_eq!(b["volumes"], serde_json::json!(["TL0002L9"]));
    // Job dates come from TAPELOOM_NOW.
    assert_eq!(
        starts(&home),
        [
            "2026-01-01T01:00:00.000000000Z",
            "2026-01-01T03:00:00.000000000Z",
            "2026-01-01T04:00:00.000000000Z",
            "2026-01-02T03:00:00.000000000Z"
        ]
    );

    // `pool list` says when each cartridge expires: a day, or thirty, after its
    // last job; never in the default pool.
    let pools = ok(&home, &["pool", "list"]);
    let expires = |pool: &str, barcode: &str| {
        let p = pools["pools"].as_array().unwrap().iter();
        let p = p.clone().find(|p| p["name"] == pool).unwrap();
        let c = p["cartridges"].as_array().unwrap().iter();
        c.clone().find(|c| c["barcode"] == barcode).unwrap()["expires"].clone()
    };
    assert_eq!(
        expires("daily", "TL0001L9"),
        "2026-01-02T03:00:00.000000001Z"
    );
    assert_eq!(
        expires("daily", "TL0002L9"),
        "2026-01-03T03:00:00.000000001Z"
    );
    assert_eq!(
        expires("monthly", "TL0003L9"),
        "2026-01-31T04:00:00.000000001Z"
    );
    assert_eq!(expires("default", "TL0004L9"), serde_json::Value::Null);

    // Only job a ended more than a day before: only its cartridge expires.
    let status_before = ok(&home, &["library", "status"]);
    let jobs_before = ok(&home, &["jobs"]);
    let dry = ok_at(&home, EXPIRE_AT, &["expire", "--dry-run"]);
    assert_eq!(dry["dry_run"], true);
    assert_eq!(listed(&dry), ["TL0001L9"], "{dry}");
    assert_eq!(dry["cartridges"][0]["pool"], "daily");
    assert_eq!(
        dry["cartridges"][0]["jobs"],
        serde_json::json!([a["job_id"]])
    );
    assert_eq!(
        dry["cartridges"][0]["expired"],
        "2026-01-02T03:00:00.000000001Z"
    );
    assert_eq!(dry["jobs_forgotten"], serde_json::json!([a["job_id"]]));
    // The dry run changed nothing.
    assert_eq!(ok(&home, &["library", "status"]), status_before);
    assert_eq!(ok(&home, &["jobs"]), jobs_before);

    let done = ok_at(&home, EXPIRE_AT, &["expire"]);
    assert_eq!(done["dry_run"], false);
    assert_eq!(listed(&done), ["TL0001L9"]);
    let st = ok(&home, &["library", "status"]);
    let tl1 = cartridge_in(&st, "TL0001L9");
    assert_eq!(
        (tl1["state"].clone(), tl1["jobs"].clone()),
        ("expired".into(), 0.into())
    );
    assert_eq!(tl1["generation"], 0);
    assert_eq!(cartridge_in(&st, "TL0002L9")["state"], "append");
    assert!(!starts(&home).contains(&"2026-01-01T03:00:00.000000000Z".to_string()));
    assert_eq!(starts(&home).len(), 3);
    // Nothing more expires at the same time.
    assert!(listed(&ok_at(&home, EXPIRE_AT, &["expire", "--dry-run"])).is_empty());

    // No blank cartridge is left for daily, TL0002 holds its job: TL0001 is taken
    // and labelled anew.
    let (src_c, c) = backup_at(&home, t.path(), "c", "daily", C_AT);
    assert_eq!(c["volumes"], serde_json::json!(["TL0001L9"]));
    let st = ok(&home, &["library", "status"]);
    let tl1 = cartridge_in(&st, "TL0001L9");
    assert_eq!(tl1["generation"], 1, "{st}");
    assert_eq!(
        (tl1["state"].clone(), tl1["jobs"].clone()),
        ("append".into(), 1.into())
    );
    let out = t.path().join("out-c");
    let job_c = c["job_id"].as_i64().unwrap().to_string();
    ok(&home, &["restore", &job_c, "--to", out.to_str().unwrap()]);
    assert_same_tree(&src_c, &out);

    // Much later every daily and monthly cartridge expires; the default pool's
    // never. (Pools live in the catalog only: this is asked before the rebuild.)
    let later = ok_at(&home, "2027-01-01T00:00:00Z", &["expire", "--dry-run"]);
    assert_eq!(
        listed(&later),
        ["TL0001L9", "TL0002L9", "TL0003L9"],
        "{later}"
    );

    // From the tapes alone, the old generation's job does not come back.
    forget_catalog(&home);
    let r = ok(&home, &["catalog", "rebuild"]);
    assert_eq!(r["jobs_added"].as_array().unwrap().len(), 4, "{r}");
    assert_eq!(
        starts(&home),
        [
            "2026-01-01T01:00:00.000000000Z",
            "2026-01-01T04:00:00.000000000Z",
            "2026-01-02T03:00:00.000000000Z",
            "2026-01-02T12:30:00.000000000Z"
        ]
    );
    let st = ok(&home, &["library", "status"]);
    assert_eq!(cartridge_in(&st, "TL0001L9")["generation"], 1);
    assert_eq!(cartridge_in(&st, "TL0002L9")["generation"], 0);
}

#[test]
fn a_write_protected_expired_cartridge_is_not_recycled() {
    if !test_hooks() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    library(&home, 1, 2, "16M");
    ok(
        &home,
        &[
            "pool",
            "create",
            "daily",
            "--retention",
            "1d",
            "--append",
            "false",
            "--cartridges",
            "TL0001L9",
            "TL0002L9",
        ],
    );
    backup_at(&home, t.path(), "a", "daily", A_AT);
    backup_at(&home, t.path(), "b", "daily", B_AT);
    let e = ok_at(&home, "2026-01-10T00:00:00Z", &["expire"]);
    assert_eq!(listed(&e), ["TL0001L9", "TL0002L9"]);
    ok(&home, &["library", "protect", "TL0001L9"]);
    // The oldest is protected: the other is taken.
    let (_, c) = backup_at(&home, t.path(), "c", "daily", "2026-01-10T01:00:00Z");
    assert_eq!(c["volumes"], serde_json::json!(["TL0002L9"]));
    let st = ok(&home, &["library", "status"]);
    assert_eq!(cartridge_in(&st, "TL0001L9")["generation"], 0);
    assert_eq!(cartridge_in(&st, "TL0001L9")["state"], "expired");
    assert_eq!(cartridge_in(&st, "TL0002L9")["generation"], 1);
    // Then none is left.
    let (code, _, err) = run_at(
        &home,
        "2026-01-10T02:00:00Z",
        &[
            "backup",
            t.path().join("a").to_str().unwrap(),
            "--pool",
            "daily",
        ],
    );
    assert_ne!(code, 0);
    assert!(err.contains("no writable cartridge"), "{err}");
}

#[test]
fn an_unparsable_tapeloom_now_is_a_one_line_error() {
    if !test_hooks() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    ok(
        &home,
        &["library", "create", "--drives", "1", "--slots", "2"],
    );
    for args in [&["expire"][..], &["expire", "--dry-run"][..]] {
        let (code, _, err) = run_at(&home, "last tuesday", args);
        assert_eq!(code, 1);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("TAPELOOM_NOW"), "{err}");
    }
    let src = t.path().join("src");
    write(&src.join("f"), b"x");
    let (code, _, err) = run_at(
        &home,
        "2026-13-01T00:00:00Z",
        &["backup", src.to_str().unwrap()],
    );
    assert_eq!(code, 1);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("tapeloom: error: TAPELOOM_NOW"), "{err}");
}

#[test]
fn a_cartridge_an_unexpired_incremental_depends_on_is_kept() {
    if !test_hooks() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    library(&home, 1, 4, "16M");
    let daily = [
        "pool",
        "create",
        "daily",
        "--retention",
        "1d",
        "--append",
        "false",
        "--cartridges",
        "TL0001L9",
        "TL0002L9",
        "TL0003L9",
    ];
    ok(&home, &daily);
    let monthly = [
        "pool",
        "create",
        "monthly",
        "--retention",
        "30d",
        "--cartridges",
        "TL0004L9",
    ];
    ok(&home, &monthly);
    let src = t.path().join("s");
    write(&src.join("a"), &noise(1, 100_000));
    write(&src.join("b"), b"b");
    let s = src.to_str().unwrap();
    let back = |set: &str, level: &str, pool: &str, now: &str| {
        let j = ok_at(
            &home,
            now,
            &["backup", s, "--set", set, "--level", level, "--pool", pool],
        );
        (
            j["job_id"].as_i64().unwrap(),
            j["volumes"][0].as_str().unwrap().to_string(),
        )
    };
    let (s_full, v1) = back("s", "full", "daily", "2026-01-01T01:00:00Z");
    let (_, v4) = back("t", "full", "monthly", "2026-01-01T02:00:00Z");
    write(&src.join("b"), b"bb");
    let (s_inc, v2) = back("s", "incremental", "daily", "2026-01-02T03:00:00Z");
    let (u_full, v3) = back("u", "full", "daily", "2026-01-01T04:00:00Z");
    assert_eq!(
        [&v1, &v2, &v3, &v4],
        ["TL0001L9", "TL0002L9", "TL0003L9", "TL0004L9"]
    );

    // s's full is past its day, but s's incremental of the second day is not: the
    // full's cartridge is kept. u's full stands alone and goes.
    let e = ok_at(&home, "2026-01-03T00:00:00Z", &["expire"]);
    assert_eq!(listed(&e), ["TL0003L9"], "{e}");
    assert_eq!(e["jobs_forgotten"], serde_json::json!([u_full]));
    let pools = ok(&home, &["pool", "list"]);
    let daily = pools["pools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "daily")
        .unwrap()
        .clone();
    let expires = |b: &str| {
        daily["cartridges"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["barcode"] == b)
            .unwrap()["expires"]
            .clone()
    };
    // The full's cartridge expires with the incremental that needs it.
    assert_eq!(expires("TL0001L9"), "2026-01-03T03:00:00.000000001Z");
    assert_eq!(expires("TL0001L9"), expires("TL0002L9"));

    // The next incremental recycles u's cartridge, one generation up; it depends
    // on s's incremental, which now stays too.
    write(&src.join("b"), b"bbb");
    let (s_inc2, v) = back("s", "incremental", "daily", "2026-01-03T01:00:00Z");
    assert_eq!(v, "TL0003L9");
    let st = ok(&home, &["library", "status"]);
    assert_eq!(cartridge_in(&st, "TL0003L9")["generation"], 1);
    let e = ok_at(&home, "2026-01-03T12:00:00Z", &["expire", "--dry-run"]);
    assert!(listed(&e).is_empty(), "{e}");
    // u's job is gone from the catalog and does not come back from the tapes: its
    // blocks name the old generation's volume.
    let ids: Vec<i64> = ok(&home, &["jobs"])["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["job_id"].as_i64().unwrap())
        .collect();
    assert!(!ids.contains(&u_full));
    // Once the last incremental is past its day, the whole chain goes at once.
    let e = ok_at(&home, "2026-01-05T00:00:00Z", &["expire", "--dry-run"]);
    assert_eq!(listed(&e), ["TL0001L9", "TL0002L9", "TL0003L9"], "{e}");
    let mut gone = vec![s_full, s_inc, s_inc2];
    gone.sort();
    assert_eq!(e["jobs_forgotten"], serde_json::json!(gone));
    forget_catalog(&home);
    ok(&home, &["catalog", "rebuild"]);
    let names: Vec<String> = ok(&home, &["jobs"])["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names.iter().filter(|n| *n == "u").count(), 0, "{names:?}");
    assert_eq!(names.iter().filter(|n| *n == "s").count(), 3, "{names:?}");
}
