//! `tapeloom restore JOB --server`: the server reads the job's blocks from its
//! library and streams them; the client checks, decodes and places them as a
//! local restore does. Only the job's client (or an admin) may restore it.

use crate::common::server_kit::{admin_token, client_job};
use crate::common::*;
use serde_json::Value;
use std::process::Command;
use std::time::Instant;

#[test]
fn a_job_restores_identical_through_the_server() {
    let s = client_job(source_tree);
    let out = s.t.path().join("net");
    let t0 = Instant::now();
    let doc = s.server.json(
        &s.alice,
        &["restore", &s.job, "--to", out.to_str().unwrap()],
    );
    let net_s = t0.elapsed().as_secs_f64();
    assert_same_tree(&s.src, &out);
    assert!(doc["blocks_read"].as_u64().unwrap() > 0, "{doc}");
    assert_eq!(doc["errors"], Value::Array(vec![]), "{doc}");
    assert_eq!(doc["mounts"].as_u64(), Some(1), "{doc}");
    // The same job restored on the server's machine, for the figure.
    let local = s.t.path().join("local");
    let t0 = Instant::now();
    let l = ok(
        &s.home,
        &["restore", &s.job, "--to", local.to_str().unwrap()],
    );
    let local_s = t0.elapsed().as_secs_f64();
    eprintln!(
        "restore of {} bytes: local {local_s:.2} s, through the server on loopback {net_s:.2} s",
        l["bytes"]
    );
    for k in [
        "files",
        "bytes",
        "blocks_read",
        "mounts",
        "source",
        "chains",
    ] {
        assert_eq!(doc[k], l[k], "{k}");
    }
    let (ns, ls) = (
        doc["streams"].as_array().unwrap(),
        l["streams"].as_array().unwrap(),
    );
    assert_eq!(ns.len(), ls.len(), "{doc}");
    for (n, m) in ns.iter().zip(ls) {
        for k in ["name", "bytes", "source"] {
            assert_eq!(n[k], m[k], "streams {k}");
        }
    }
    // The human form is a local restore's line.
    let again = s.t.path().join("again");
    let (code, text, err) = s.server.client(
        &s.alice,
        &["restore", &s.job, "--to", again.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    assert!(text.starts_with("restored "), "{text}");
}

#[test]
fn a_path_restores_just_its_subtree() {
    let s = client_job(source_tree);
    let out = s.t.path().join("part");
    let doc = s.server.json(
        &s.alice,
        &["restore", &s.job, "--to", out.to_str().unwrap(), "dir"],
    );
    assert_eq!(doc["errors"], Value::Array(vec![]), "{doc}");
    let names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["dir".to_string()]);
    // Just what a local restore of the path gives (a hard link's other name lies
    // outside the path, so the source's link counts differ).
    let local = s.t.path().join("local-part");
    ok(
        &s.home,
        &["restore", &s.job, "--to", local.to_str().unwrap(), "dir"],
    );
    assert_same_tree(&local.join("dir"), &out.join("dir"));
    // A path the job does not hold is refused, nothing made.
    let none = s.t.path().join("none");
    let (code, _, err) = s.server.client(
        &s.alice,
        &["restore", &s.job, "--to", none.to_str().unwrap(), "no/such"],
    );
    assert_ne!(code, 0);
    assert!(err.contains("404"), "{err}");
    assert!(!none.exists());
}

#[test]
fn another_clients_job_is_refused_with_nothing_written() {
    let s = client_job(source_tree);
    let out = s.t.path().join("bob");
    let (code, _, err) = s
        .server
        .client(&s.bob, &["restore", &s.job, "--to", out.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(err.contains("404"), "{err}");
    assert!(is_empty_or_absent(&out), "bob's restore wrote something");
    // An admin's token restores any client's job.
    let admin = &admin_token(&s.home, "ops");
    let by_admin = s.t.path().join("admin");
    s.server.json(
        admin,
        &["restore", &s.job, "--to", by_admin.to_str().unwrap()],
    );
    assert_same_tree(&s.src, &by_admin);
    // A set that is not there, through the server, is refused in one line.
    let (code, _, err) = s.server.client(
        &s.alice,
        &["restore", "--set", "x", "--to", out.to_str().unwrap()],
    );
    assert_ne!(code, 0);
    assert!(
        err.contains("404") && err.contains("no backup set x"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(is_empty_or_absent(&out));
}

#[test]
fn a_wrong_fingerprint_is_refused() {
    let s = client_job(source_tree);
    let out = s.t.path().join("wrong");
    let wrong = "00:".repeat(31) + "00";
    let o = Command::new(bin())
        .args(["restore", &s.job, "--to", out.to_str().unwrap()])
        .args(["--server", &s.server.url, "--fingerprint", &wrong])
        .args(["--token", &s.alice])
        .env_remove("TAPELOOM_SERVER")
        .output()
        .unwrap();
    assert_ne!(o.status.code(), Some(0));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("fingerprint"), "{err}");
    assert!(is_empty_or_absent(&out));
}
