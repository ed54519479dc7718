//! `tapeloom restore --set NAME [--at TIME] [PATH...] --server URL`: the server
//! reads every job the set's tree needs as a local `restore --set` reads them,
//! and streams their blocks; the client checks each against its job and places
//! the tree as the local restore does. Each restore is compared, object by
//! object, with the same restore on the server's home and with a copy of the
//! source taken when the job ran. Only the set's client (or an admin) may
//! restore it; an encrypted set's jobs are opened with the client's key file.

use crate::common::keyed::*;
use crate::common::server_kit::{admin_token, home_with_clients, Server};
use crate::common::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// `restore --set SET --to OUT [extra]` through `server` with `token`.
fn net(
    server: &Server,
    token: &str,
    set: &str,
    out: &Path,
    extra: &[&str],
) -> (i32, String, String) {
    let mut a = vec!["--json", "restore", "--set", set, "--to", p(out)];
    a.extend_from_slice(extra);
    a.extend_from_slice(&[
        "--server",
        &server.url,
        "--fingerprint",
        &server.fingerprint,
    ]);
    a.extend_from_slice(&["--token", token]);
    tl(PASSPHRASE, &a)
}

/// The same restore on the server's home.
fn local(home: &Path, set: &str, out: &Path, extra: &[&str]) -> (i32, String, String) {
    let mut a = vec!["--home", p(home), "--json", "restore", "--set", set];
    a.extend_from_slice(&["--to", p(out)]);
    a.extend_from_slice(extra);
    tl(PASSPHRASE, &a)
}

/// Both restores, which must succeed alike; their documents, once the trees they
/// placed were found identical (`extra`: options, then at most one path).
fn both(s: &Setup, token: &str, set: &str, name: &str, extra: &[&str]) -> (Value, Value) {
    let (l, n) = (
        s.t.path().join(format!("{name}-local")),
        s.t.path().join(format!("{name}-net")),
    );
    let (lcode, ldoc, lerr) = local(&s.home, set, &l, extra);
    let (ncode, ndoc, nerr) = net(&s.server, token, set, &n, extra);
    assert_eq!((lcode, ncode), (0, 0), "local: {lerr}\nnet: {nerr}");
    // A path's restore leaves the root's metadata alone.
    match extra
        .iter()
        .rfind(|a| !a.starts_with("--") && !a.starts_with(char::is_numeric))
    {
        Some(path) => assert_same_tree(&l.join(path), &n.join(path)),
        None => assert_same_tree(&l, &n),
    }
    let names = |d: &Path| -> BTreeSet<_> {
        let r = std::fs::read_dir(d).unwrap();
        r.map(|e| e.unwrap().file_name()).collect()
    };
    assert_eq!(names(&l), names(&n));
    let (l, n): (Value, Value) = (
        serde_json::from_str(&ldoc).unwrap(),
        serde_json::from_str(&ndoc).unwrap(),
    );
    same_doc(&l, &n);
    (l, n)
}

/// The documents of a local restore and of the same restore through the server
/// hold the same keys and say the same of what was placed and read.
fn same_doc(l: &Value, n: &Value) {
    let keys = |v: &Value| {
        v.as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect::<BTreeSet<_>>()
    };
    assert_eq!(keys(l), keys(n));
    for k in [
        "job_id",
        "set",
        "jobs",
        "blocks_planned",
        "chains",
        "files",
        "bytes",
        "blocks_read",
        "mounts",
        "source",
        "errors",
        "meta_only",
    ] {
        assert_eq!(l[k], n[k], "{k}: local {l}\nnet {n}");
    }
}

struct Setup {
    t: tempfile::TempDir,
    home: PathBuf,
    src: PathBuf,
    server: Server,
    alice: String,
    bob: String,
    /// The jobs of set `web`, with a copy of the source taken as each ran.
    jobs: Vec<(i64, PathBuf)>,
}

/// A small tree: files in two folders, a symlink, a hard link.
fn make_tree(src: &Path) {
    numbered_files(src, (2, 6), 90_000, |d, i| format!("d{d}/f{i}"));
    std::os::unix::fs::symlink("f1", src.join("d0/link")).unwrap();
    std::fs::hard_link(src.join("d1/f0"), src.join("d0/hard")).unwrap();
    set_times(&src.join("d0/f4"), 1_400_000_000, 123_456_789);
}

/// Set `web` of client alice: a full, an incremental (a file modified, one
/// deleted, one added, one chmod), a differential (more of each).
fn setup() -> Setup {
    let (t, home, alice, bob) = home_with_clients();
    let src = t.path().join("src");
    make_tree(&src);
    let server = Server::start(&home, None);
    let mut jobs = Vec::new();
    for (day, level) in ["full", "incremental", "differential"]
        .into_iter()
        .enumerate()
    {
        match day {
            1 => {
                write(&src.join("d0/f0"), b"day one");
                std::fs::remove_file(src.join("d1/f3")).unwrap();
                write(&src.join("d1/new"), &noise(77, 5000));
                let mode = std::fs::Permissions::from_mode(0o600);
                std::fs::set_permissions(src.join("d0/f2"), mode).unwrap();
            }
            2 => {
                write(&src.join("d1/f1"), b"day two");
                std::fs::remove_file(src.join("d0/f5")).unwrap();
                let mode = std::fs::Permissions::from_mode(0o640);
                std::fs::set_permissions(src.join("d1/f4"), mode).unwrap();
            }
            _ => {}
        }
        let args = ["backup", p(&src), "--set", "web", "--level", level];
        let doc = server.json(&alice, &args);
        assert_eq!(
            (&doc["status"], &doc["level"]),
            (&"ok".into(), &level.into()),
            "{doc}"
        );
        // The chmods since the full.
        assert_eq!(doc["meta_only"], day, "{doc}");
        let snap = t.path().join(format!("snap{day}"));
        copy_tree(&src, &snap);
        jobs.push((doc["job_id"].as_i64().unwrap(), snap));
    }
    Setup {
        t,
        home,
        src,
        server,
        alice,
        bob,
        jobs,
    }
}

#[test]
fn a_set_restores_through_the_server_as_on_its_home_at_each_point_in_time() {
    let s = setup();
    // The latest job: the tree as it is now, read from the three jobs.
    let (_, doc) = both(&s, &s.alice, "web", "now", &[]);
    assert_same_tree(&s.src, &s.t.path().join("now-net"));
    let ids: Vec<i64> = s.jobs.iter().map(|j| j.0).collect();
    assert_eq!(doc["job_id"], ids[2], "{doc}");
    assert_eq!(doc["set"], "web", "{doc}");
    assert_eq!(doc["jobs"], serde_json::json!([ids[0], ids[2]]), "{doc}");
    let now = s.t.path().join("now-net");
    assert!(!now.join("d1/f3").exists() && !now.join("d0/f5").exists());
    let mode = |f: &str| std::fs::metadata(now.join(f)).unwrap().permissions().mode() & 0o777;
    assert_eq!((mode("d0/f2"), mode("d1/f4")), (0o600, 0o640));
    assert_eq!(ino(&now.join("d0/hard")), ino(&now.join("d1/f0")));
    // Each earlier job by id, as the source was then.
    for (day, (id, snap)) in s.jobs.iter().enumerate().take(2) {
        let name = format!("day{day}");
        let (_, doc) = both(&s, &s.alice, "web", &name, &["--at", &id.to_string()]);
        assert_same_tree(snap, &s.t.path().join(format!("{name}-net")));
        assert_eq!(doc["job_id"], *id, "{doc}");
    }
    assert!(s.t.path().join("day0-net/d1/f3").exists());
    // A path of the tree, at the incremental: just its subtree.
    let at = ids[1].to_string();
    let (_, doc) = both(&s, &s.alice, "web", "d1", &["--at", &at, "d1"]);
    let d1 = s.t.path().join("d1-net");
    assert!(
        d1.join("d1/new").exists() && !d1.join("d0/f0").exists(),
        "{doc}"
    );
    assert_eq!(std::fs::read(d1.join("d1/f0")).unwrap(), noise(6, 7920));
    // The hard link's other name, outside the path, comes with it.
    assert_eq!(ino(&d1.join("d0/hard")), ino(&d1.join("d1/f0")));
}

#[test]
fn another_clients_set_or_none_is_refused_with_nothing_written() {
    let s = setup();
    for (token, set) in [(&s.bob, "web"), (&s.alice, "nothing")] {
        let out = s.t.path().join(format!("refused-{set}"));
        let (code, doc, err) = net(&s.server, token, set, &out, &[]);
        assert_eq!((code, doc.as_str()), (1, ""), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(
            err.contains("404") && err.contains(&format!("no backup set {set}")),
            "{err}"
        );
        assert!(!out.exists(), "the restore folder was made");
    }
    // Nor with a point in time or a path that would tell the set is there.
    let out = s.t.path().join("refused-at");
    let (code, _, err) = net(&s.server, &s.bob, "web", &out, &["--at", "junk", "d0"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no backup set web"), "{err}");
    assert!(!out.exists(), "the restore folder was made");
    // The client's own set at a time before any of its jobs: refused as locally.
    let (code, _, err) = net(
        &s.server,
        &s.alice,
        "web",
        &out,
        &["--at", "2001-01-01T00:00:00Z"],
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no job that ended ok or partial"), "{err}");
    assert!(!out.exists(), "the restore folder was made");
}

#[test]
fn an_encrypted_set_restores_with_the_key_on_the_client_and_names_a_bad_block_as_locally() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    library(&home, 1, 4, "64M");
    let src = t.path().join("src");
    write(&src.join("diary.txt"), &noise(3, 300_000));
    write(&src.join("photos/beach.raw"), &noise(4, 700_000));
    write(&src.join("notes"), b"first");
    let key = t.path().join("k.key");
    key_create(PASSPHRASE, &home, &key);
    // Two jobs of the server's own, each with its data key under one master key.
    for (level, change) in [("full", false), ("incremental", true)] {
        if change {
            write(&src.join("notes"), b"second");
            let mode = std::fs::Permissions::from_mode(0o600);
            std::fs::set_permissions(src.join("diary.txt"), mode).unwrap();
        }
        let a = [
            "--home",
            p(&home),
            "backup",
            p(&src),
            "--set",
            "vault",
            "--level",
            level,
        ];
        let b = [
            "--encrypt",
            p(&key),
            "--block-size",
            "64K",
            "--compress",
            "none",
        ];
        let (code, _, err) = tl(PASSPHRASE, &[&a[..], &b[..]].concat());
        assert_eq!(code, 0, "{err}");
    }
    let admin = admin_token(&home, "ops");
    let server = Server::start(&home, None);
    let (out, loc) = (t.path().join("net"), t.path().join("local"));
    let k = ["--key", p(&key)];
    let (lcode, l, err) = local(&home, "vault", &loc, &k);
    assert_eq!(lcode, 0, "{err}");
    let (ncode, n, err) = net(&server, &admin, "vault", &out, &k);
    assert_eq!(ncode, 0, "{err}");
    assert_same_tree(&src, &out);
    let (l, n): (Value, Value) = (
        serde_json::from_str(&l).unwrap(),
        serde_json::from_str(&n).unwrap(),
    );
    same_doc(&l, &n);
    assert_eq!(n["jobs"].as_array().unwrap().len(), 2, "{n}");
    assert!(!server.log().contains("key"), "{}", server.log());
    // Without the key: one line, nothing written.
    let none = t.path().join("none");
    let (code, _, err) = net(&server, &admin, "vault", &none, &[]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("is encrypted with key") && err.contains("no key was given"),
        "{err}"
    );
    assert!(!none.exists(), "the restore folder was made");
    // A damaged block of the full (LBN 2 is its clear first block): the files it
    // held are named as the local restore names them.
    // The server is done with the home first (after the refused restore its
    // reading went on until a write to the client failed): a byte flipped under
    // its reader would race it.
    ok(&home, &["jobs"]);
    assert_eq!(flip(&home, 4, false), 65536);
    let (out, loc) = (t.path().join("net-bad"), t.path().join("local-bad"));
    let (lcode, l, lerr) = local(&home, "vault", &loc, &k);
    let (ncode, n, err) = net(&server, &admin, "vault", &out, &k);
    assert_eq!((lcode, ncode), (1, 1), "local: {lerr}\nnet: {err}");
    assert!(!l.is_empty() && !n.is_empty(), "local: {lerr}\nnet: {err}");
    let (le, ne) = (errors(&l), errors(&n));
    assert!(!le.is_empty(), "{l}");
    assert!(
        le.iter()
            .all(|(_, why)| why.contains("block 4 of TL0001L9 is bad")),
        "{l}"
    );
    assert_eq!(le, ne, "local {l}\nnet {n}");
    assert_eq!(std::fs::read(out.join("notes")).unwrap(), b"second");
}

#[test]
fn a_set_read_by_two_drives_at_once_restores_through_the_server_as_on_its_home() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    library(&home, 3, 6, "64M");
    // One job per cartridge: the restore reads the full's and the
    // incremental's on two drives at once.
    ok(&home, &["pool", "create", "solo", "--append", "false"]);
    let srcs: Vec<PathBuf> = (0..2).map(|i| t.path().join(format!("src/s{i}"))).collect();
    for (i, d) in srcs.iter().enumerate() {
        for f in 0..3 {
            write(&d.join(format!("f{f}")), &noise(10 * i as u64 + f, 400_000));
        }
    }
    let srcs: Vec<&str> = srcs.iter().map(|s| p(s)).collect();
    for (level, drive) in [("full", "0"), ("incremental", "1")] {
        if level == "incremental" {
            write(&t.path().join("src/s1/f1"), b"changed");
            std::fs::remove_file(t.path().join("src/s0/f2")).unwrap();
        }
        let mut a = vec!["backup", "--set", "two", "--level", level, "--pool", "solo"];
        a.extend_from_slice(&["--drive", drive]);
        a.extend_from_slice(&srcs);
        ok(&home, &a);
    }
    let admin = admin_token(&home, "ops");
    let server = Server::start(&home, None);
    let (l, n) = (t.path().join("local"), t.path().join("net"));
    let (lcode, ldoc, err) = local(&home, "two", &l, &[]);
    assert_eq!(lcode, 0, "{err}");
    let ldoc: Value = serde_json::from_str(&ldoc).unwrap();
    assert!(ldoc["drives"].as_array().unwrap().len() >= 2, "{ldoc}");
    let (ncode, ndoc, err) = net(&server, &admin, "two", &n, &[]);
    assert_eq!(ncode, 0, "{err}");
    // Each source is a stream of its own, restored under its name.
    for i in 0..2 {
        let name = format!("s{i}");
        assert_same_tree(&l.join(&name), &n.join(&name));
        assert_same_tree(&t.path().join("src").join(&name), &n.join(&name));
    }
    assert_eq!(tree(&l).len(), tree(&n).len());
    let ndoc: Value = serde_json::from_str(&ndoc).unwrap();
    for k in [
        "job_id",
        "jobs",
        "files",
        "bytes",
        "errors",
        "blocks_planned",
    ] {
        assert_eq!(ldoc[k], ndoc[k], "{k}: local {ldoc}\nnet {ndoc}");
    }
}
