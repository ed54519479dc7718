//! A home's catalog in PostgreSQL: `catalog copy --to URL` moves every row of a
//! home's SQLite catalog there, and the home then lists and restores every job
//! from it (`--catalog URL`, or `catalog = "URL"` in the home's home.toml).

use crate::common::keyed::{key_create, PASSPHRASE};
use crate::common::*;
use serde_json::Value;
use std::path::Path;
use tapeloom_testkit::{need::need, postgres};

const WITH_PASSPHRASE: [(&str, &str); 1] = [("TAPELOOM_PASSPHRASE", PASSPHRASE)];

/// `args` run on `home` with its catalog at `url`.
fn on(home: &Path, url: &str, args: &[&str]) -> Value {
    let mut all = vec!["--catalog", url];
    all.extend_from_slice(args);
    ok_env(home, &WITH_PASSPHRASE, &all)
}

#[test]
fn a_homes_catalog_copied_to_postgresql_lists_and_restores_every_job() {
    if !need(postgres::server().map(|_| ())) {
        return;
    }
    let url = postgres::server().unwrap().database().unwrap();
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    library(&home, 1, 8, "256M");
    let src = t.path().join("src");
    write(&src.join("a.txt"), b"alpha");
    write(&src.join("d/b.bin"), &noise(1, 300_000));
    // A set of a full and an incremental, a pool, a token, a stage, and an
    // encrypted job spooled through the stage.
    ok(&home, &["backup", p(&src), "--set", "s"]);
    write(&src.join("d/c.bin"), &noise(2, 100_000));
    ok(
        &home,
        &["backup", "--set", "s", "--level", "incremental", p(&src)],
    );
    ok(&home, &["pool", "create", "weekly", "--retention", "7d"]);
    ok(&home, &["server", "token", "add", "alice"]);
    let stage = t.path().join("stage");
    ok(&home, &["stage", "add", p(&stage), "--size", "64M"]);
    let key = t.path().join("k.key");
    key_create(PASSPHRASE, &home, &key);
    let secret = t.path().join("secret");
    write(&secret.join("s.txt"), b"nobody reads this on tape");
    ok_env(
        &home,
        &WITH_PASSPHRASE,
        &["backup", "--via", "stage", p(&secret), "--encrypt", p(&key)],
    );
    let before = ok(&home, &["jobs"]);
    let ids = job_ids(&before);
    assert_eq!(ids.len(), 3, "{before}");

    let copied = ok(&home, &["catalog", "copy", "--to", &url]);
    assert_eq!(copied["rows"]["jobs"], 3, "{copied}");
    assert!(copied["rows"]["files"].as_u64() > Some(3), "{copied}");
    assert_eq!(copied["problems"].as_array().unwrap().len(), 0, "{copied}");
    // A password on the command line is refused, and nothing is copied.
    let with_password = url.replace("postgres@", "postgres:secret@");
    let (code, _, err) = run(
        &home,
        &[
            "catalog".as_ref(),
            "copy".as_ref(),
            "--to".as_ref(),
            with_password.as_ref(),
        ],
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("password"), "{err}");

    // The home's SQLite catalog goes away: only PostgreSQL's is left to read.
    std::fs::remove_file(home.join("catalog.sqlite")).unwrap();
    let after = on(&home, &url, &["jobs"]);
    assert_eq!(after["jobs"], before["jobs"]);
    assert_eq!(on(&home, &url, &["catalog", "check"])["ok"], true);
    let ls = on(&home, &url, &["ls", "--set", "s"]);
    assert!(ls.to_string().contains("c.bin"), "{ls}");
    let pools = on(&home, &url, &["pool", "list"]);
    assert!(pools.to_string().contains("weekly"), "{pools}");
    // The set's newest state: its full and its incremental, merged.
    let out = t.path().join("out-set");
    on(&home, &url, &["restore", "--set", "s", "--to", p(&out)]);
    assert_same_tree(&src, &out);
    let out = t.path().join("out-secret");
    on(
        &home,
        &url,
        &[
            "restore",
            &ids[2].to_string(),
            "--to",
            p(&out),
            "--key",
            p(&key),
        ],
    );
    assert_same_tree(&secret, &out);
    // Named in home.toml, the catalog needs no flag; a new job goes there.
    std::fs::write(home.join("home.toml"), format!("catalog = \"{url}\"\n")).unwrap();
    let more = t.path().join("more");
    write(&more.join("m.txt"), b"more");
    let job = ok(&home, &["backup", p(&more)])["job_id"].as_i64().unwrap();
    assert_eq!(job, ids[2] + 1);
    assert_eq!(job_ids(&ok(&home, &["jobs"])).len(), 4);
    assert!(!home.join("catalog.sqlite").exists());
    // `catalog rebuild` writes into an empty PostgreSQL catalog from the tapes
    // alone, and the encrypted job restores from it.
    let empty = postgres::server().unwrap().database().unwrap();
    let rebuilt = on(&home, &empty, &["catalog", "rebuild", "--key", p(&key)]);
    assert_eq!(
        rebuilt["jobs_added"].as_array().unwrap().len(),
        4,
        "{rebuilt}"
    );
    let out = t.path().join("out-rebuilt");
    on(
        &home,
        &empty,
        &[
            "restore",
            &ids[2].to_string(),
            "--to",
            p(&out),
            "--key",
            p(&key),
        ],
    );
    assert_same_tree(&secret, &out);
}
