//! A pool's rules hold for every way a job starts: a local `backup`, a client's
//! backup through the server, a job the server's scheduler starts, and `hsm
//! migrate`. Each writes into a pool with a key, a copy pool and a retention,
//! and each job must come out encrypted with the pool's key, copied to the copy
//! pool, and on cartridges that expire by the pool's retention
//! (`tapeloom_ops::backup` applies the rules for all of them).

use crate::common::keyed::{key_create, PASSPHRASE};
use crate::common::server_kit::{token, Server};
use crate::common::*;
use serde_json::Value;
use std::ffi::OsStr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The pool's retention: 30 days.
const RETENTION_S: u64 = 30 * 86_400;

/// How a job starts.
#[derive(Debug, Clone, Copy)]
enum Entry {
    Local,
    Client,
    Schedule,
    HsmMigrate,
}

/// A home with pools `vault` and `arch` (key `key`, copied to `vault`, kept 30
/// days), a source tree `src`, and the key's short fingerprint.
struct Site {
    t: tempfile::TempDir,
    home: PathBuf,
    key: PathBuf,
    src: PathBuf,
    short: String,
}

fn site(with_key: bool) -> Site {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    library_with(&home, 2, 6, "256M", &["--mail-slots", "2"]);
    let key = t.path().join("arch.key");
    let (short, _) = key_create(PASSPHRASE, &home, &key);
    ok(&home, &["pool", "create", "vault"]);
    let mut args = vec!["pool", "create", "arch", "--copy-to", "vault"];
    args.extend(["--retention", "30d"]);
    if with_key {
        args.extend(["--key", p(&key)]);
    }
    ok(&home, &args);
    let src = t.path().join("src");
    write(&src.join("a.txt"), b"kept by the pool's rules");
    write(&src.join("dir/b.bin"), &noise(3, 300_000));
    Site {
        t,
        home,
        key,
        src,
        short,
    }
}

/// The variables that unlock the key on the command line.
fn passphrase() -> [(&'static str, &'static str); 1] {
    [("TAPELOOM_PASSPHRASE", PASSPHRASE)]
}

/// A server configuration that holds the key, with `more` after it.
fn server_config(s: &Site, more: &str) -> PathBuf {
    let pass = s.t.path().join("passphrase");
    std::fs::write(&pass, format!("{PASSPHRASE}\n")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&pass, std::fs::Permissions::from_mode(0o600)).unwrap();
    let config = s.t.path().join("server.toml");
    let text = format!(
        "[[encryption_key]]\nfile = {:?}\npassphrase_file = {:?}\n{more}",
        p(&s.key),
        p(&pass)
    );
    std::fs::write(&config, text).unwrap();
    config
}

/// Waits (up to 90 s) until the catalog holds a whole copy of some job: the
/// server copies a job as a queued job of its own once the job ends.
fn wait_for_a_copy(s: &Site, server: &Server) {
    let until = Instant::now() + Duration::from_secs(90);
    loop {
        let copies = sql_i64(
            &s.home,
            "SELECT count(*) FROM job_copies WHERE state = 'ok'",
        );
        if copies > 0 {
            return;
        }
        assert!(Instant::now() < until, "no copy was made\n{}", server.log());
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Runs one job into pool `arch` the way `entry` starts it.
fn start(entry: Entry, s: &Site) {
    match entry {
        Entry::Local => {
            ok_env(
                &s.home,
                &passphrase(),
                &["backup", p(&s.src), "--pool", "arch"],
            );
        }
        Entry::Client => {
            let c1 = token(&s.home, "c1");
            let server = Server::start(&s.home, Some(&server_config(s, "")));
            let doc = server.json(&c1, &["backup", p(&s.src), "--pool", "arch"]);
            assert_eq!(doc["status"], "ok", "{doc}");
            wait_for_a_copy(s, &server);
        }
        Entry::Schedule => {
            token(&s.home, "c1");
            let schedule = format!(
                "[[schedule]]\nname = \"nightly\"\ncalendar = \"*-*-* 03:01:00\"\n\
                 client = \"c1\"\npool = \"arch\"\nsources = [{:?}]\n",
                p(&s.src)
            );
            let env = crate::common::server_kit::fast_clock("2026-01-05T03:00:30Z");
            let config = server_config(s, &schedule);
            let server = Server::start_with_env(&s.home, Some(&config), &env);
            wait_for_a_copy(s, &server);
        }
        Entry::HsmMigrate => {
            ok(&s.home, &["hsm", "manage", p(&s.src), "--pool", "arch"]);
            let m = ok_env(&s.home, &passphrase(), &["hsm", "migrate"]);
            assert_eq!(m["files"], 2, "{m}");
        }
    }
}

/// The one job of the home, checked against the pool's rules.
fn check_rules(entry: Entry, s: &Site) -> Vec<String> {
    let jobs = ok(&s.home, &["jobs"]);
    let list = jobs["jobs"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{entry:?}: {jobs}");
    let job = &list[0];
    let mut broken = Vec::new();
    if job["key"] != s.short.as_str() {
        broken.push(format!("not encrypted with the pool's key: {}", job["key"]));
    }
    let copied = (job["copies"].as_array().unwrap().iter())
        .any(|c| c["pool"] == "vault" && c["state"] == "ok");
    if !copied {
        broken.push(format!("no copy in pool vault: {}", job["copies"]));
    }
    let pools = ok(&s.home, &["pool", "list"]);
    let arch = (pools["pools"].as_array().unwrap().iter())
        .find(|p| p["name"] == "arch")
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(arch["retention_s"], RETENTION_S, "{arch}");
    for v in job["volumes"].as_array().unwrap() {
        let c = (arch["cartridges"].as_array().unwrap().iter()).find(|c| &c["barcode"] == v);
        match c {
            Some(c) if c["expires"].is_string() => {}
            Some(c) => broken.push(format!("cartridge {v} never expires: {c}")),
            None => broken.push(format!("cartridge {v} is not in pool arch")),
        }
    }
    broken
}

/// The whole table: each entry point, its job, and the rules it broke.
#[test]
fn every_way_a_job_starts_keeps_its_pools_key_copy_pool_and_retention() {
    if !test_hooks() {
        return;
    }
    let mut failures = Vec::new();
    for entry in [
        Entry::Local,
        Entry::Client,
        Entry::Schedule,
        Entry::HsmMigrate,
    ] {
        let s = site(true);
        start(entry, &s);
        for why in check_rules(entry, &s) {
            failures.push(format!("{entry:?}: {why}"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// `hsm release` frees a file's disk blocks only once every copy its pool asks
/// for is on tape; `hsm status` says how many copies are; with the job's own
/// cartridge out of the library, a restore of the job reads copy 2.
#[test]
fn a_released_file_has_every_copy_its_pool_asks_for() {
    let s = site(false);
    ok(&s.home, &["hsm", "manage", p(&s.src), "--pool", "arch"]);
    let kept = s.t.path().join("kept");
    copy_tree(&s.src, &kept);
    ok(&s.home, &["hsm", "migrate"]);
    let status = ok(&s.home, &["hsm", "status"]);
    assert_eq!(status["roots"][0]["tape_copies"]["2"], 2, "{status}");
    let r = ok(&s.home, &["hsm", "release"]);
    assert_eq!(r["files"], 2, "{r}");
    let jobs = ok(&s.home, &["jobs"]);
    let job = jobs["jobs"][0]["job_id"].to_string();
    let first = jobs["jobs"][0]["volumes"][0].as_str().unwrap().to_string();
    ok(&s.home, &["library", "export", &first]);
    let out = s.t.path().join("out");
    let r = ok(&s.home, &["restore", &job, "--to", p(&out)]);
    assert_eq!(r["copy"], 2, "{r}");
    assert_same_tree(&kept, &out);
}

/// Without its copy, no file is marked as on tape nor released: here every
/// blank cartridge left is reserved for another pool, so the copy pool finds
/// none, and `hsm migrate` says so and exits 1.
#[test]
fn a_file_whose_copy_failed_stays_on_disk() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    library(&home, 2, 3, "256M");
    ok(&home, &["pool", "create", "vault"]);
    ok(&home, &["pool", "create", "arch", "--copy-to", "vault"]);
    ok(
        &home,
        &[
            "pool",
            "create",
            "other",
            "--cartridges",
            "TL0002L9",
            "TL0003L9",
        ],
    );
    let src = t.path().join("src");
    write(&src.join("a.txt"), b"only one copy");
    ok(&home, &["hsm", "manage", p(&src), "--pool", "arch"]);
    let (code, _, err) = run(&home, &[OsStr::new("hsm"), OsStr::new("migrate")]);
    assert_eq!(code, 1, "{err}");
    assert_one_line_error(code, &err, &["could not be copied to pool vault"]);
    let status = ok(&home, &["hsm", "status"]);
    assert_eq!(status["roots"][0]["files"]["resident"], 1, "{status}");
    let r = ok(&home, &["hsm", "release"]);
    assert_eq!(r["files"], 0, "{r}");
}
