//! Several servers, one catalog: two homes on one PostgreSQL catalog, each with
//! its own library, each with a server. A client's backup is queued in the site
//! and written by the server that claims it; a restore or a verify asked of the
//! other server is sent on to the one whose library holds the cartridges; with
//! that one down, the restore fails in one line naming it and its cartridges.
//! And a server goes on when PostgreSQL restarts under it.

use crate::common::server_kit::{admin_token, client_tree, get, token, Server};
use crate::common::*;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tapeloom_device::testkit::{need::need, postgres};

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
