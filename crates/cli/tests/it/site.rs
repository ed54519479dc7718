//! Several servers, one catalog: two homes on one PostgreSQL catalog, each with
//! its own library, each with a server. A client's backup is queued in the site
//! and written by the server that claims it; a restore or a verify asked of the
//! other server is sent on to the one whose library holds the cartridges; with
//! that one down, the restore fails in one line naming it and its cartridges.
//! A job whose cartridges sit in two libraries is read by both servers, each
//! its own part.
//! And a server goes on when PostgreSQL restarts under it.

use crate::common::server_kit::{admin_token, client_tree, get, token, Server};
use crate::common::*;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tapeloom_testkit::{need::need, postgres};

/// A home named `name` on catalog `url`, its library of one drive with
/// barcodes starting `prefix`, and a server configuration with a heartbeat
/// timeout of two seconds.
fn site_home(t: &Path, url: &str, (name, prefix): (&str, &str)) -> (PathBuf, PathBuf) {
    let home = t.join(name);
    std::fs::create_dir_all(&home).unwrap();
    write(
        &home.join("home.toml"),
        format!("name = \"{name}\"\ncatalog = \"{url}\"\n").as_bytes(),
    );
    library_with(&home, 1, 4, "256M", &["--prefix", prefix]);
    let config = t.join(format!("{name}.toml"));
    write(&config, b"[site]\nheartbeat_timeout_seconds = 2\n");
    (home, config)
}

#[test]
fn a_sites_servers_claim_backups_and_send_reads_to_the_library_holding_the_tapes() {
    if !need(postgres::server().map(|_| ())) {
        return;
    }
    let url = postgres::server().unwrap().database().unwrap();
    let t = tempfile::tempdir().unwrap();
    let (home_a, config_a) = site_home(t.path(), &url, ("a", "TA"));
    let (home_b, config_b) = site_home(t.path(), &url, ("b", "TB"));
    // Tokens live in the shared catalog: made on one home, known to both servers.
    let alice = token(&home_a, "alice");
    let admin = admin_token(&home_b, "admin");
    let mut a = Server::start(&home_a, Some(&config_a));
    let mut b = Server::start(&home_b, Some(&config_b));

    let src = t.path().join("src");
    client_tree(&src, 1, 300_000);
    let doc = b.json(&alice, &["backup", p(&src), "--set", "s"]);
    assert_eq!(doc["status"], "ok", "{doc}");
    let job = doc["job_id"].as_i64().unwrap().to_string();
    let barcode = doc["volumes"][0].as_str().unwrap().to_string();
    // Whichever server claimed it wrote it on its own library.
    let (writer, other, holder) = if barcode.starts_with("TA") {
        (&mut a, &b, "a")
    } else {
        assert!(barcode.starts_with("TB"), "{doc}");
        (&mut b, &a, "b")
    };

    // Both servers list the job, and the site's queue and servers.
    for s in [&*writer, other] {
        let jobs = s.json(&admin, &["jobs"]);
        assert_eq!(job_ids(&jobs).len(), 1, "{jobs}");
        let q = s.json(&admin, &["queue"]);
        let servers = q["site"]["servers"].as_array().unwrap();
        assert_eq!(servers.len(), 2, "{q}");
        assert!(servers.iter().all(|s| s["alive"] == true), "{q}");
    }

    // The status page's document shows the site too.
    let (status, page) = get(&other.addr, "/api/status", Some(&admin));
    assert_eq!(status, 200, "{page}");
    let page: serde_json::Value = serde_json::from_str(&page).unwrap();
    assert_eq!(
        page["site"]["servers"].as_array().unwrap().len(),
        2,
        "{page}"
    );

    // A restore and a verify asked of the other server are sent on.
    let out = t.path().join("out");
    let (code, _, err) = other.client(&alice, &["restore", &job, "--to", p(&out)]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(&format!("sent on to server {holder}")),
        "{err}"
    );
    assert_same_tree(&src, &out);
    let v = other.json(&admin, &["verify", &job]);
    assert_eq!(v["ok"], true, "{v}");
    // So is a set's restore.
    let set_out = t.path().join("set-out");
    let (code, _, err) = other.client(&alice, &["restore", "--set", "s", "--to", p(&set_out)]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(&format!("sent on to server {holder}")),
        "{err}"
    );
    assert_same_tree(&src, &set_out);
    let metrics = get(&other.addr, "/metrics", Some(&admin)).1;
    assert!(
        metrics.contains("tapeloom_site_servers{state=\"up\"} 2"),
        "{metrics}"
    );

    // The server holding the cartridge dies: after the heartbeat timeout the
    // other takes it for dead, and a restore asked of it fails in one line.
    writer.kill9();
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let q = other.json(&admin, &["queue"]);
        let down = (q["site"]["servers"].as_array().unwrap().iter())
            .any(|s| s["name"] == holder && s["alive"] == false);
        if down {
            break;
        }
        assert!(Instant::now() < until, "{holder} never taken for dead: {q}");
        std::thread::sleep(Duration::from_millis(250));
    }
    let out2 = t.path().join("out2");
    let (code, _, err) = other.client(&alice, &["restore", &job, "--to", p(&out2)]);
    assert_eq!(code, 1, "{err}");
    let line = err.trim();
    assert_eq!(line.lines().count(), 1, "{err}");
    assert!(line.contains(&format!("server {holder} is down")), "{err}");
    assert!(line.contains(&barcode), "{err}");
    // A new backup asked of the survivor is written there.
    let src2 = t.path().join("src2");
    client_tree(&src2, 2, 100_000);
    let doc = other.json(&alice, &["backup", p(&src2), "--set", "s2"]);
    assert_eq!(doc["status"], "ok", "{doc}");
    let v2 = doc["volumes"][0].as_str().unwrap();
    assert!(!v2.starts_with(&barcode[..2]), "{doc}");
    // The survivor marks it dead at its next heartbeat after the timeout.
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let metrics = get(&other.addr, "/metrics", Some(&admin)).1;
        if metrics.contains("tapeloom_site_servers{state=\"dead\"} 1") {
            break;
        }
        assert!(Instant::now() < until, "{metrics}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn a_server_goes_on_when_postgresql_restarts_under_it() {
    if !need(postgres::server().map(|_| ())) {
        return;
    }
    let pg = postgres::Server::start_new().unwrap();
    let url = pg.database().unwrap();
    let t = tempfile::tempdir().unwrap();
    let (home, config) = site_home(t.path(), &url, ("solo", "TS"));
    let alice = token(&home, "alice");
    let s = Server::start(&home, Some(&config));
    let src = t.path().join("src");
    client_tree(&src, 3, 200_000);
    let first = s.json(&alice, &["backup", p(&src), "--set", "s"]);
    assert_eq!(first["status"], "ok", "{first}");
    pg.stop().unwrap();
    pg.restart().unwrap();
    // The server connects again to the URL it was given: the next job succeeds.
    let next = s.json(&alice, &["backup", p(&src), "--set", "s"]);
    assert_eq!(next["status"], "ok", "{next}");
    assert!(next["job_id"].as_i64() > first["job_id"].as_i64(), "{next}");
    let out = t.path().join("out");
    let job = next["job_id"].as_i64().unwrap().to_string();
    let (code, _, err) = s.client(&alice, &["restore", &job, "--to", p(&out)]);
    assert_eq!(code, 0, "{err}");
    assert_same_tree(&src, &out);
    pg.stop().unwrap();
}

/// Carries cartridge `barcode` from the virtual library of `from` to that of
/// `to`, as a person carries a cartridge between two libraries: it leaves its
/// slot or drive in one and takes the place of an unwritten cartridge in the
/// other. Both libraries' servers are stopped.
fn carry(barcode: &str, from: &Path, to: &Path) {
    let state = |home: &Path| home.join("library/library.json");
    let tapes = |home: &Path| home.join("library/tapes");
    let read = |home: &Path| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(state(home)).unwrap()).unwrap()
    };
    let mut a = read(from);
    for slot in a["slots"].as_array_mut().unwrap() {
        if slot == barcode {
            *slot = serde_json::Value::Null;
        }
    }
    for drive in a["drives"].as_array_mut().unwrap() {
        if drive["barcode"] == barcode {
            *drive = serde_json::Value::Null;
        }
    }
    std::fs::write(state(from), a.to_string()).unwrap();
    let mut b = read(to);
    let slots = b["slots"].as_array_mut().unwrap();
    let unwritten = slots.iter_mut().rev().find(|s| {
        s.as_str()
            .is_some_and(|b| !tapes(to).join(format!("{b}.data")).exists())
    });
    *unwritten.expect("an unwritten cartridge to take the place of") = barcode.into();
    std::fs::write(state(to), b.to_string()).unwrap();
    for ext in ["data", "idx"] {
        let name = format!("{barcode}.{ext}");
        std::fs::rename(tapes(from).join(&name), tapes(to).join(&name)).unwrap();
    }
}

#[test]
fn a_job_whose_cartridges_sit_in_two_libraries_is_read_by_both_servers_each_its_part() {
    if !need(postgres::server().map(|_| ())) {
        return;
    }
    let url = postgres::server().unwrap().database().unwrap();
    let t = tempfile::tempdir().unwrap();
    let (home_a, config_a) = site_home(t.path(), &url, ("ca", "TC"));
    let (home_b, config_b) = site_home(t.path(), &url, ("cb", "TD"));
    // Cartridges of 8 MB: a 12 MB file fills the first and goes on to the next.
    library_with(&home_a, 1, 4, "8M", &["--prefix", "TC"]);
    let alice = token(&home_a, "alice");
    let admin = admin_token(&home_a, "admin");
    let mut a = Server::start(&home_a, Some(&config_a));
    let src = t.path().join("src");
    client_tree(&src, 5, 12_000_000);
    let doc = a.json(&alice, &["backup", p(&src), "--set", "s"]);
    assert_eq!(doc["status"], "ok", "{doc}");
    let job = doc["job_id"].as_i64().unwrap().to_string();
    let vols: Vec<String> = (doc["volumes"].as_array().unwrap().iter())
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(vols.len(), 2, "{doc}");
    assert!(a.term(Duration::from_secs(30)).is_some());
    drop(a);
    // The second cartridge is carried to the other library.
    carry(&vols[1], &home_a, &home_b);
    let a = Server::start(&home_a, Some(&config_a));
    let mut b = Server::start(&home_b, Some(&config_b));
    let parts = format!("read in 2 parts (ca: {}; cb: {})", vols[0], vols[1]);

    // Asked of either server, the job is read by both, each its own cartridge.
    for (s, name) in [(&b, "b"), (&a, "a")] {
        let out = t.path().join(format!("out-{name}"));
        let (code, _, err) = s.client(&alice, &["restore", &job, "--to", p(&out)]);
        assert_eq!(code, 0, "{err}");
        assert!(err.contains(&parts), "{err}");
        assert_same_tree(&src, &out);
    }
    // One file that lies on both cartridges.
    let one = t.path().join("one");
    let (code, _, err) = a.client(&alice, &["restore", &job, "big", "--to", p(&one)]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        std::fs::read(one.join("big")).unwrap(),
        std::fs::read(src.join("big")).unwrap()
    );
    assert!(!one.join("small").exists());
    // A verify reads both parts and checks every file.
    let v = b.json(&admin, &["verify", &job]);
    assert_eq!(v["ok"], true, "{v}");
    // The root, small/, big and the three small files.
    assert_eq!(v["files_checked"], 6, "{v}");
    // A set is not read in parts: its restore is refused in one line naming
    // each library's cartridges.
    let (code, _, err) = a.client(&alice, &["restore", "--set", "s", "--to", p(&one)]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("more than one library"), "{err}");
    assert!(err.contains(&format!("cb: {}", vols[1])), "{err}");

    // With one of the two servers down, the reading fails in one line naming it.
    b.kill9();
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let q = a.json(&admin, &["queue"]);
        let down = (q["site"]["servers"].as_array().unwrap().iter())
            .any(|s| s["name"] == "cb" && s["alive"] == false);
        if down {
            break;
        }
        assert!(Instant::now() < until, "cb never taken for dead: {q}");
        std::thread::sleep(Duration::from_millis(250));
    }
    let out = t.path().join("out-down");
    let (code, _, err) = a.client(&alice, &["restore", &job, "--to", p(&out)]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("server cb is down"), "{err}");
    assert!(err.contains(&vols[1]), "{err}");
}
