//! `tapeloom backup --server --level`: a client's incremental and differential
//! compare its sources with the base's tree the server sends, read only what
//! changed, and tell the server what was deleted; the set restores on the server
//! as the client's tree is now.

use crate::common::server_kit::{begin, get, post, token, Server};
use crate::common::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// `dirs` folders of `per` files each; file `i` of folder `d` is `d{d}/f{i}`.
fn make_tree(src: &Path, dirs: usize, per: usize) {
    numbered_files(src, (dirs, per), 5000, |d, i| format!("d{d}/f{i}"));
}

/// The paths `ls --set NAME` lists on the server's home.
fn listed(home: &Path, set: &str) -> BTreeSet<String> {
    let v = ok(home, &["ls", "--set", set]);
    let entries = v["entries"].as_array().unwrap();
    (entries.iter())
        .map(|e| e["path"].as_str().unwrap().to_string())
        .collect()
}

/// Backs up `src` as set `web` at `level` through the server, as client `token`.
fn backup(s: &Server, token: &str, src: &Path, level: &str) -> Value {
    let src = src.to_str().unwrap();
    let doc = s.json(token, &["backup", src, "--set", "web", "--level", level]);
    assert_eq!(doc["status"], "ok", "{doc}");
    doc
}

#[test]
fn a_clients_incremental_reads_what_changed_and_restores_its_tree() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let alice = token(&home, "alice");
    let src = t.path().join("src");
    make_tree(&src, 4, 10);
    let s = Server::start(&home, None);
    let full = backup(&s, &alice, &src, "full");
    assert_eq!(
        (&full["level"], &full["set"]),
        (&"full".into(), &"web".into())
    );
    assert_eq!(full["source_files_opened"], 40, "{full}");
    let full_id = full["job_id"].as_i64().unwrap();

    // 3 modified, 2 deleted, 1 added, 1 chmod.
    for (k, p) in ["d0/f1", "d1/f2", "d3/f9"].into_iter().enumerate() {
        write(&src.join(p), &noise(100 + k as u64, 7000 + k));
    }
    for p in ["d2/f0", "d2/f5"] {
        std::fs::remove_file(src.join(p)).unwrap();
    }
    write(&src.join("d1/new"), b"a file the full did not see");
    std::fs::set_permissions(src.join("d3/f0"), std::fs::Permissions::from_mode(0o600)).unwrap();

    let inc = backup(&s, &alice, &src, "incremental");
    assert_eq!(inc["level"], "incremental", "{inc}");
    assert_eq!(inc["base_job"], full_id, "{inc}");
    assert_eq!(inc["promoted"], Value::Null, "{inc}");
    assert_eq!(inc["source_files_opened"], 4, "{inc}");
    assert_eq!(inc["meta_only"], 1, "{inc}");
    assert_eq!(inc["deleted"], 2, "{inc}");
    // Neither opened nor stored: the 40 files but the 3 modified, 2 deleted, 1 chmod.
    assert!(inc["unchanged"].as_u64().unwrap() >= 34, "{inc}");
    let inc_id = inc["job_id"].as_i64().unwrap();

    // The set restores on the server as the client's tree is now.
    let out = t.path().join("out");
    ok(
        &home,
        &["restore", "--set", "web", "--to", out.to_str().unwrap()],
    );
    assert_same_tree(&src, &out);
    let now = listed(&home, "web");
    assert!(now.contains("d1/new") && now.contains("d2/f1"), "{now:?}");
    assert!(!now.contains("d2/f0") && !now.contains("d2/f5"), "{now:?}");
    // The client lists the set through the server as the server's home lists it,
    // at its latest job and at the full; another client's token gets a 404.
    let local = ok(&home, &["ls", "--set", "web"]);
    assert_eq!(s.json(&alice, &["ls", "--set", "web"]), local);
    let at_full = ["ls", "--set", "web", "--at", &full_id.to_string(), "d2"].map(String::from);
    let at_full: Vec<&str> = at_full.iter().map(String::as_str).collect();
    let remote_full = s.json(&alice, &at_full);
    assert_eq!(remote_full, ok(&home, &at_full));
    // d2 and its 10 files, d2/f0 and d2/f5 among them at the full.
    assert_eq!(
        remote_full["entries"].as_array().unwrap().len(),
        11,
        "{remote_full}"
    );
    let bob = token(&home, "bob");
    let (code, out_b, err) = s.client(&bob, &["ls", "--set", "web"]);
    assert_eq!((code, out_b.as_str()), (1, ""), "{err}");
    assert!(err.contains("404"), "{err}");
    // Nor may another client back up into alice's set (it would be sent her tree).
    let args = [
        "backup",
        src.to_str().unwrap(),
        "--set",
        "web",
        "--level",
        "incremental",
    ];
    let (code, out_b, err) = s.client(&bob, &args);
    assert_eq!((code, out_b.as_str()), (1, ""), "{err}");
    assert!(
        err.contains("not this client's") && err.trim().lines().count() == 1,
        "{err}"
    );

    // A second incremental is relative to the first; a differential to the full.
    write(&src.join("d0/f7"), b"day two");
    let inc2 = backup(&s, &alice, &src, "incremental");
    assert_eq!(inc2["base_job"], inc_id, "{inc2}");
    assert_eq!(inc2["source_files_opened"], 1, "{inc2}");
    assert_eq!(inc2["deleted"], 0, "{inc2}");
    let diff = backup(&s, &alice, &src, "differential");
    assert_eq!(diff["level"], "differential", "{diff}");
    assert_eq!(diff["base_job"], full_id, "{diff}");
    assert_eq!(diff["source_files_opened"], 5, "{diff}");
    assert_eq!(diff["meta_only"], 1, "{diff}");
    assert_eq!(diff["deleted"], 2, "{diff}");
    let out2 = t.path().join("out2");
    ok(
        &home,
        &["restore", "--set", "web", "--to", out2.to_str().unwrap()],
    );
    assert_same_tree(&src, &out2);
}

#[test]
fn a_first_incremental_runs_as_a_full_and_says_why() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let alice = token(&home, "alice");
    let src = t.path().join("src");
    make_tree(&src, 1, 5);
    let s = Server::start(&home, None);
    let doc = backup(&s, &alice, &src, "incremental");
    assert_eq!(doc["level"], "full", "{doc}");
    assert_eq!(doc["base_job"], Value::Null, "{doc}");
    assert!(
        doc["promoted"].as_str().unwrap().contains("no full"),
        "{doc}"
    );
    assert_eq!(doc["source_files_opened"], 5, "{doc}");
}

#[test]
fn the_base_goes_to_its_jobs_client_and_deletions_must_be_in_it() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let (alice, bob) = (token(&home, "alice"), token(&home, "bob"));
    let src = t.path().join("src");
    make_tree(&src, 1, 3);
    let s = Server::start(&home, None);
    let full = s.json(&alice, &["backup", src.to_str().unwrap(), "--set", "web"]);
    let b = begin(&s, &alice, "web", Some("incremental"));
    assert_eq!(
        (&b["level"], &b["base_job"]),
        (&"incremental".into(), &full["job_id"])
    );
    let id = b["backup"].as_u64().unwrap();
    let base = format!("/api/backups/{id}/base");
    let (status, tree) = get(&s.addr, &base, Some(&alice));
    assert_eq!(status, 200, "{tree}");
    let tree: Value = serde_json::from_str(&tree).unwrap();
    let paths: BTreeSet<String> = (tree["rows"].as_array().unwrap().iter())
        .map(|r| {
            let bytes: Vec<u8> = serde_json::from_value(r["path"].clone()).unwrap();
            String::from_utf8(bytes).unwrap()
        })
        .collect();
    assert!(paths.contains("d0/f2"), "{paths:?}");
    assert_eq!(get(&s.addr, &base, Some(&bob)).0, 404);
    let deletions = format!("/api/backups/{id}/deletions");
    let f2 = serde_json::to_string(&[(b"d0/f2".to_vec(), 1u8)]).unwrap();
    let elsewhere = serde_json::to_string(&[(b"etc/passwd".to_vec(), 1u8)]).unwrap();
    let (status, why) = post(&s.addr, &deletions, &alice, &elsewhere);
    assert_eq!(status, 400, "{why}");
    assert!(why.contains("not in the base"), "{why}");
    assert_eq!(post(&s.addr, &deletions, &bob, &f2).0, 404);
    assert_eq!(post(&s.addr, &deletions, &alice, &f2).0, 200);
    let (status, why) = post(&s.addr, &deletions, &alice, &f2);
    assert_eq!(status, 409, "{why}");
    // A full has none.
    let f = begin(&s, &alice, "web", Some("full"));
    assert_eq!(f["base_job"], Value::Null);
    let path = format!("/api/backups/{}/deletions", f["backup"]);
    assert_eq!(post(&s.addr, &path, &alice, &f2).0, 409);
    // An unknown level is refused before the job joins the queue.
    let bad = r#"{"name":"web","set":null,"pool":null,"block_size":65536,"level":"weekly","streams":[{"name":"s","source":"/x/s","root":"."}]}"#;
    let (status, why) = post(&s.addr, "/api/backups", &alice, bad);
    assert_eq!(status, 400, "{why}");
}
