//! A server given key files (`[[encryption_key]]`): it unlocks them at its start
//! (or refuses to start, in one line naming the key file), a client's backup into
//! a pool whose key it holds is encrypted by its drives as a local backup into
//! that pool is, the server verifies such a job and opens its blocks for a client
//! that brings no key file; a client given `--key` still opens them itself. A pool
//! whose key it does not hold is refused (409) naming the key.

use crate::common::keyed::*;
use crate::common::server_kit::{admin_token, fast_clock, token, Server};
use crate::common::*;
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PASSPHRASE: &str = "server side passphrase";

/// A plain marker of one source file, which must not be on the cartridges.
const MARKER: &[u8] = b"PLAIN-LEDGER-LINE\n";

/// Writes `text` to `path` with mode 0600.
fn secret(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// A configuration of one `[[encryption_key]]`, its passphrase in a file.
fn key_config(dir: &Path, key: &Path, passphrase: &str) -> PathBuf {
    let pass = dir.join("passphrase");
    secret(&pass, &format!("{passphrase}\n"));
    let config = dir.join("server.toml");
    let text = format!(
        "[[encryption_key]]\nfile = {:?}\npassphrase_file = {:?}\n",
        p(key),
        p(&pass)
    );
    std::fs::write(&config, text).unwrap();
    config
}

/// Makes pool `name` of `home`, encrypted with key file `key`.
fn pool_create(home: &Path, name: &str, key: &Path) {
    let a = [
        "--home",
        p(home),
        "--json",
        "pool",
        "create",
        name,
        "--key",
        p(key),
    ];
    tl_json(PASSPHRASE, &a);
}

/// A home with pool `sealed` (key `key`, which the server holds) and pool
/// `foreign` (key `other`, which it does not), the client `alice`, and the
/// server running.
struct Setup {
    t: tempfile::TempDir,
    home: PathBuf,
    src: PathBuf,
    key: PathBuf,
    short: String,
    other: PathBuf,
    other_short: String,
    alice: String,
    server: Server,
}

fn setup() -> Setup {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    library(&home, 1, 4, "64M");
    let src = t.path().join("src");
    write(&src.join("ledger.txt"), &MARKER.repeat(20_000));
    write(&src.join("diary.txt"), &noise(3, 300_000));
    write(&src.join("photos/beach.raw"), &noise(4, 700_000));
    let (key, other) = (t.path().join("k.key"), t.path().join("other.key"));
    let (short, long) = key_create(PASSPHRASE, &home, &key);
    let (other_short, _) = key_create(PASSPHRASE, &home, &other);
    pool_create(&home, "sealed", &key);
    pool_create(&home, "foreign", &other);
    let alice = token(&home, "alice");
    let config = key_config(t.path(), &key, PASSPHRASE);
    let server = Server::start(&home, Some(&config));
    let unlocked = format!("key {short} ({long}) unlocked from {}", p(&key));
    let log = server.log_with(&[&unlocked]);
    assert!(log.contains(&unlocked), "{log}");
    Setup {
        t,
        home,
        src,
        key,
        short,
        other,
        other_short,
        alice,
        server,
    }
}

impl Setup {
    /// A client command through the server as alice, the passphrase in the
    /// environment (for `--key`).
    fn net(&self, args: &[&str]) -> (i32, String, String) {
        let mut a = args.to_vec();
        a.extend_from_slice(&["--server", &self.server.url]);
        a.extend_from_slice(&["--fingerprint", &self.server.fingerprint]);
        a.extend_from_slice(&["--token", &self.alice]);
        tl(PASSPHRASE, &a)
    }

    fn net_json(&self, args: &[&str]) -> Value {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        let (code, out, err) = self.net(&a);
        assert_eq!(code, 0, "{args:?}: {err}\n{}", self.server.log());
        serde_json::from_str(&out).unwrap()
    }

    /// A command on the server's machine.
    fn local(&self, args: &[&str]) -> (i32, String, String) {
        let mut a = vec!["--home", p(&self.home)];
        a.extend_from_slice(args);
        tl(PASSPHRASE, &a)
    }

    fn dir(&self, name: &str) -> PathBuf {
        self.t.path().join(name)
    }

    /// Job `job` restores as the source is: on the server's machine with the key
    /// file, as a local job; through the server without a key file (the server
    /// opens the blocks), and with it (the client opens them itself).
    fn restores_every_way(&self, job: &str) {
        let local = self.dir("local");
        let (code, _, err) =
            self.local(&["restore", job, "--to", p(&local), "--key", p(&self.key)]);
        assert_eq!(code, 0, "{err}");
        assert_same_tree(&self.src, &local);
        let opened = self.dir("opened");
        let r = self.net_json(&["restore", job, "--to", p(&opened)]);
        assert_eq!(r["errors"], Value::Array(vec![]), "{r}");
        assert_same_tree(&self.src, &opened);
        let sealed = self.dir("sealed");
        let r = self.net_json(&["restore", job, "--to", p(&sealed), "--key", p(&self.key)]);
        assert_eq!(r["errors"], Value::Array(vec![]), "{r}");
        assert_same_tree(&self.src, &sealed);
    }
}

/// The job `id` as `jobs --json` lists it through the server.
fn listed(s: &Setup, id: &str) -> Value {
    let jobs = s.net_json(&["jobs"]);
    let id: i64 = id.parse().unwrap();
    (jobs["jobs"].as_array().unwrap().iter())
        .find(|j| j["job_id"].as_i64() == Some(id))
        .cloned()
        .unwrap_or_else(|| panic!("job {id} not in {jobs}"))
}

#[test]
fn a_clients_backup_into_a_pool_whose_key_the_server_holds_is_encrypted_on_tape() {
    let s = setup();
    let doc = s.net_json(&["backup", p(&s.src), "--pool", "sealed"]);
    assert_eq!(doc["status"], "ok", "{doc}");
    let job = doc["job_id"].as_i64().unwrap().to_string();
    assert_eq!(listed(&s, &job)["key"], s.short.as_str());
    // Encrypted on tape: no plaintext on the cartridges, and a local restore
    // without the key is refused naming it.
    assert!(
        !contains(&cartridge_bytes(&s.home), MARKER),
        "plaintext on tape"
    );
    let bare = s.dir("bare");
    let (code, _, err) = s.local(&["restore", &job, "--to", p(&bare)]);
    assert_ne!(code, 0);
    assert!(err.contains(&s.short), "{err}");
    // With it, on the server's machine, the tree comes back; through the server
    // too, without a key file and with it.
    s.restores_every_way(&job);
    // Given another key file, the client still opens the blocks itself, and
    // refuses naming both keys.
    let (code, _, err) = s.net(&[
        "restore",
        &job,
        "--to",
        p(&s.dir("x")),
        "--key",
        p(&s.other),
    ]);
    assert_ne!(code, 0);
    let both = format!(
        "encrypted with key {}, not with the given key {}",
        s.short, s.other_short
    );
    assert!(err.contains(&both), "{err}");
    // One path, opened on the server.
    let one = s.dir("one");
    s.net_json(&["restore", &job, "--to", p(&one), "diary.txt"]);
    assert_eq!(
        std::fs::read(one.join("diary.txt")).unwrap(),
        noise(3, 300_000)
    );
    assert!(!one.join("photos").exists());
    // The server verifies it with its key: the same document as a local verify.
    let v = s.net_json(&["verify", &job]);
    let (code, l, err) = s.local(&["--json", "verify", &job, "--key", p(&s.key)]);
    assert_eq!(code, 0, "{err}");
    let l: Value = serde_json::from_str(&l).unwrap();
    assert_eq!(v["ok"], true, "{v}");
    for k in [
        "job_id",
        "ok",
        "blocks_checked",
        "bad_blocks",
        "files_checked",
    ] {
        assert_eq!(v[k], l[k], "{k}: {v} against {l}");
    }
}

#[test]
fn a_pool_or_job_whose_key_the_server_lacks_is_refused_naming_the_key() {
    let s = setup();
    let (code, _, err) = s.net(&["backup", p(&s.src), "--pool", "foreign"]);
    assert_ne!(code, 0);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let why = format!(
        "pool foreign encrypts its jobs with key {}, which this server does not hold: \
         its configuration needs an [[encryption_key]] for that key file",
        s.other_short
    );
    assert!(err.contains("409") && err.contains(&why), "{err}");
    // A job encrypted on the server's machine with the other key: its verify is
    // refused, and a restore without --key stops naming the key, nothing made.
    let (code, out, err) = s.local(&["--json", "backup", p(&s.src), "--pool", "foreign"]);
    assert_eq!(code, 0, "{err}");
    let job = serde_json::from_str::<Value>(&out).unwrap()["job_id"].to_string();
    // Run on the server's machine, it is not alice's: an admin asks.
    let adm = &admin_token(&s.home, "ops");
    let (code, _, err) = s.server.client(adm, &["verify", &job]);
    assert_ne!(code, 0);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let why = format!(
        "job {job} is encrypted with key {}, which this server does not hold",
        s.other_short
    );
    assert!(err.contains("409") && err.contains(&why), "{err}");
    let out = s.dir("out");
    let (code, _, err) = s.server.client(adm, &["restore", &job, "--to", p(&out)]);
    assert_ne!(code, 0);
    assert!(err.contains("no key was given"), "{err}");
    assert!(!out.exists(), "the restore folder was made");
    // With the key file on the client, it restores.
    let mut a = vec!["restore", &job, "--to", p(&out), "--key", p(&s.other)];
    a.extend_from_slice(&["--server", &s.server.url]);
    a.extend_from_slice(&["--fingerprint", &s.server.fingerprint, "--token", adm]);
    let (code, _, err) = tl(PASSPHRASE, &a);
    assert_eq!(code, 0, "{err}");
    assert_same_tree(&s.src, &out);
}

/// Runs `server` on `home` with `config` and `env`, expecting it to refuse to
/// start: its exit code and stderr (it is killed after 60 s if it runs).
fn refused_start(home: &Path, config: &Path, env: &[(&str, &str)]) -> (i32, String) {
    let mut cmd = Command::new(bin());
    cmd.env_remove("TAPELOOM_PASSPHRASE")
        .envs(env.iter().copied());
    let mut child = cmd
        .arg("--home")
        .arg(home)
        .args(["server", "--listen", "127.0.0.1:0", "--config"])
        .arg(config)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > until {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "the server started: {}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().unwrap_or(-1), err)
}

#[test]
fn a_key_that_cannot_be_unlocked_refuses_the_start_in_one_line() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    library(&home, 1, 2, "64M");
    let key = t.path().join("k.key");
    key_create(PASSPHRASE, &home, &key);
    let one_line = |(code, err): (i32, String), says: &str| {
        assert_ne!(code, 0, "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(p(&key)), "{err}");
        assert!(err.contains(says), "{err}");
    };
    let wrong = key_config(t.path(), &key, "not the passphrase");
    one_line(refused_start(&home, &wrong, &[]), "wrong passphrase");
    // No passphrase file named, and none in the environment.
    let bare = t.path().join("bare.toml");
    std::fs::write(&bare, format!("[[encryption_key]]\nfile = {:?}\n", p(&key))).unwrap();
    one_line(
        refused_start(&home, &bare, &[]),
        "TAPELOOM_PASSPHRASE is not set",
    );
    one_line(
        refused_start(&home, &bare, &[("TAPELOOM_PASSPHRASE", "nope")]),
        "wrong passphrase",
    );
    // A passphrase file that is not there.
    let gone = t.path().join("gone.toml");
    let text = format!(
        "[[encryption_key]]\nfile = {:?}\npassphrase_file = \"/nonexistent/pass\"\n",
        p(&key)
    );
    std::fs::write(&gone, text).unwrap();
    one_line(refused_start(&home, &gone, &[]), "/nonexistent/pass");
    // A key file that is not there is named alone.
    let missing = t.path().join("missing.key");
    let text = format!("[[encryption_key]]\nfile = {:?}\n", p(&missing));
    std::fs::write(&gone, text).unwrap();
    let (code, err) = refused_start(&home, &gone, &[("TAPELOOM_PASSPHRASE", PASSPHRASE)]);
    assert_ne!(code, 0);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains(p(&missing)), "{err}");
    // The passphrase from the environment, for a key without a passphrase file.
    let env = [("TAPELOOM_PASSPHRASE", PASSPHRASE)];
    let s = Server::start_with_env(&home, Some(&bare), &env);
    let log = s.log_with(&["unlocked from"]);
    assert!(log.contains("unlocked from"), "{log}");
}

#[test]
fn a_scheduled_job_into_a_pool_whose_key_the_server_holds_is_encrypted() {
    if !test_hooks() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    library(&home, 1, 4, "64M");
    let src = t.path().join("src");
    write(&src.join("ledger.txt"), &MARKER.repeat(5_000));
    write(&src.join("dir/b.bin"), &noise(7, 100_000));
    let key = t.path().join("k.key");
    let (short, _) = key_create(PASSPHRASE, &home, &key);
    pool_create(&home, "sealed", &key);
    let c1 = token(&home, "c1");
    let config = key_config(t.path(), &key, PASSPHRASE);
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "[[schedule]]\nname = \"sealed-nightly\"\ncalendar = \"*:*\"\nclient = \"c1\"\n\
         sources = [{:?}]\npool = \"sealed\"\n",
        p(&src)
    ));
    std::fs::write(&config, text).unwrap();
    let env = fast_clock("2026-01-05T03:00:00Z");
    let s = Server::start_with_env(&home, Some(&config), &env);
    // 03:01 on the server's clock: about 2 s from its start.
    let deadline = Instant::now() + Duration::from_secs(60);
    let job = loop {
        let jobs = s.json(&c1, &["jobs"]);
        let done = (jobs["jobs"].as_array().unwrap().iter())
            .find(|j| j["name"] == "sealed-nightly" && j["status"] != "running")
            .cloned();
        if let Some(j) = done {
            break j;
        }
        assert!(Instant::now() < deadline, "{jobs}\n{}", s.log());
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(job["status"], "ok", "{job}\n{}", s.log());
    assert_eq!(job["key"], short.as_str(), "{job}");
    assert!(
        !contains(&cartridge_bytes(&home), MARKER),
        "plaintext on tape"
    );
    // Its client restores it through the server without a key file.
    let out = t.path().join("out");
    let id = job["job_id"].to_string();
    let r = s.json(&c1, &["restore", &id, "--to", p(&out)]);
    assert_eq!(r["errors"], Value::Array(vec![]), "{r}");
    assert_same_tree(&src, &out);
}

impl Setup {
    /// A client command through the server as alice, without any passphrase in
    /// its environment (nor a terminal to ask one on).
    fn net_bare(&self, args: &[&str]) -> (i32, String, String) {
        let out = Command::new(bin())
            .env_remove("TAPELOOM_PASSPHRASE")
            .env_remove("TAPELOOM_SERVER")
            .stdin(Stdio::null())
            .args(args)
            .args(["--server", &self.server.url])
            .args(["--fingerprint", &self.server.fingerprint])
            .args(["--token", &self.alice])
            .output()
            .expect("run tapeloom");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// `backup ARGS --encrypt KEY` through the server, no passphrase given: its
    /// document.
    fn encrypted_backup(&self, args: &[&str]) -> Value {
        let mut a = vec!["--json", "backup"];
        a.extend_from_slice(args);
        a.extend_from_slice(&["--encrypt", p(&self.key)]);
        let (code, out, err) = self.net_bare(&a);
        assert_eq!(code, 0, "{args:?}: {err}\n{}", self.server.log());
        let doc: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(doc["status"], "ok", "{doc}");
        doc
    }
}

#[test]
fn a_clients_backup_names_a_key_the_server_holds_and_the_server_encrypts_with_it() {
    let s = setup();
    // The default pool has no key: the job is encrypted because the client named
    // one, and its passphrase was not needed on the client.
    let doc = s.encrypted_backup(&[p(&s.src)]);
    let job = doc["job_id"].as_i64().unwrap().to_string();
    assert_eq!(listed(&s, &job)["key"], s.short.as_str());
    assert!(
        !contains(&cartridge_bytes(&s.home), MARKER),
        "plaintext on tape"
    );
    // On the server's machine it restores with the key file, as a local job;
    // through the server too, without a key file and with it.
    s.restores_every_way(&job);
    let v = s.net_json(&["verify", &job]);
    assert_eq!(v["ok"], true, "{v}");
    // Named over a pool's key, as a local --encrypt is: pool foreign's key is
    // not held, the named one is, and the job is encrypted with it.
    let doc = s.encrypted_backup(&[p(&s.src), "--pool", "foreign", "--name", "over"]);
    let job = doc["job_id"].as_i64().unwrap().to_string();
    assert_eq!(listed(&s, &job)["key"], s.short.as_str());
    let over = s.dir("over");
    s.net_json(&["restore", &job, "--to", p(&over)]);
    assert_same_tree(&s.src, &over);
}

#[test]
fn a_key_the_server_does_not_hold_or_an_unreadable_key_file_is_refused_in_one_line() {
    let s = setup();
    let shown = tl_json(PASSPHRASE, &["--json", "key", "show", p(&s.other)]);
    let long = shown["fingerprint"].as_str().unwrap();
    let (code, out, err) = s.net_bare(&["backup", p(&s.src), "--encrypt", p(&s.other)]);
    assert_ne!(code, 0);
    assert_eq!(out, "");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let why = format!(
        "this server does not hold key {} ({long}): its configuration needs an \
         [[encryption_key]] for that key file",
        s.other_short
    );
    assert!(err.contains("409") && err.contains(&why), "{err}");
    // Key files the client cannot read: named, nothing asked of the server.
    let garbage = s.dir("garbage.key");
    std::fs::write(&garbage, b"not a key file").unwrap();
    for bad in [s.dir("missing.key"), garbage] {
        let (code, out, err) = s.net_bare(&["backup", p(&s.src), "--encrypt", p(&bad)]);
        assert_ne!(code, 0);
        assert_eq!(out, "");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(p(&bad)), "{err}");
    }
    // No job was recorded, and nothing reached tape.
    let jobs = s.net_json(&["jobs"]);
    assert_eq!(jobs["jobs"], Value::Array(vec![]), "{jobs}");
    assert!(!contains(&cartridge_bytes(&s.home), MARKER));
}

#[test]
fn a_set_of_jobs_encrypted_by_the_server_restores_through_it_without_and_with_the_key() {
    let s = setup();
    write(&s.src.join("notes"), b"first");
    let set = ["--set", "vault", "--block-size", "64K"];
    let full = s.encrypted_backup(&[&[p(&s.src)][..], &set, &["--level", "full"]].concat());
    write(&s.src.join("notes"), b"second");
    write(&s.src.join("added.txt"), &noise(9, 50_000));
    std::fs::remove_file(s.src.join("photos/beach.raw")).unwrap();
    let incr = s.encrypted_backup(&[&[p(&s.src)][..], &set, &["--level", "incremental"]].concat());
    assert_eq!(incr["level"], "incremental", "{incr}");
    assert_eq!(incr["base_job"], full["job_id"], "{incr}");
    for j in [&full, &incr] {
        assert_eq!(
            listed(&s, &j["job_id"].to_string())["key"],
            s.short.as_str()
        );
    }
    assert!(
        !contains(&cartridge_bytes(&s.home), MARKER),
        "plaintext on tape"
    );
    // Without a key file the server opens each job's blocks with its own data key.
    let opened = s.dir("opened");
    let r = s.net_json(&["restore", "--set", "vault", "--to", p(&opened)]);
    assert_eq!(r["errors"], Value::Array(vec![]), "{r}");
    assert_eq!(r["jobs"].as_array().unwrap().len(), 2, "{r}");
    assert_same_tree(&s.src, &opened);
    // With it, the client opens them.
    let sealed = s.dir("sealed");
    let k = ["--key", p(&s.key)];
    let r = s.net_json(&[&["restore", "--set", "vault", "--to", p(&sealed)][..], &k].concat());
    assert_eq!(r["errors"], Value::Array(vec![]), "{r}");
    assert_same_tree(&s.src, &sealed);
    // A job of a set encrypted with a key the server lacks, and no --key: one
    // line naming it, the restore folder not made.
    let h = p(&s.home);
    for (level, key) in [("full", &s.key), ("incremental", &s.other)] {
        write(&s.src.join("notes"), level.as_bytes());
        let a = [
            "--home",
            h,
            "backup",
            p(&s.src),
            "--set",
            "mixed",
            "--level",
            level,
        ];
        let (code, _, err) = tl(PASSPHRASE, &[&a[..], &["--encrypt", p(key)]].concat());
        assert_eq!(code, 0, "{err}");
    }
    let adm = &admin_token(&s.home, "ops");
    let none = s.dir("none");
    let (code, _, err) = s
        .server
        .client(adm, &["restore", "--set", "mixed", "--to", p(&none)]);
    assert_ne!(code, 0);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(&s.other_short) && err.contains("no key was given"),
        "{err}"
    );
    assert!(!none.exists(), "the restore folder was made");
}

#[test]
fn an_encrypted_job_a_killed_server_left_on_its_stage_is_resumed_with_the_key_it_holds() {
    let mut s = setup();
    // Held to 300 KB/s, the job's first chunks are staged (a chunk is finished
    // within a second) long before its client is done.
    let args = [
        "backup",
        p(&s.src),
        "--pool",
        "sealed",
        "--limit-rate",
        "300KB",
    ];
    let (url, fp) = (&s.server.url, &s.server.fingerprint);
    let mut client = crate::common::server_kit::client_command(url, fp, &s.alice, &args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(30);
    while crate::common::server_kit::spooled_chunks(&s.home) < 2 {
        assert!(Instant::now() < until, "nothing staged: {}", s.server.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    s.server.kill9();
    let _ = client.wait();
    // Started again with its key, the server resumes the job: partial (its
    // stream was cut), encrypted, and what it holds restores as the source is.
    let config = s.t.path().join("server.toml");
    s.server = Server::start(&s.home, Some(&config));
    let until = Instant::now() + Duration::from_secs(60);
    let job = loop {
        let jobs = s.net_json(&["jobs"]);
        let j = jobs["jobs"].as_array().unwrap().first().cloned().unwrap();
        if j["status"] == "partial" || j["status"] == "ok" {
            break j;
        }
        assert!(
            Instant::now() < until,
            "not resumed: {jobs}\n{}",
            s.server.log()
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_eq!(job["status"], "partial", "{job}");
    assert_eq!(job["key"], s.short.as_str(), "{job}");
    assert!(
        !contains(&cartridge_bytes(&s.home), MARKER),
        "plaintext on tape"
    );
    let out = s.dir("resumed");
    let id = job["job_id"].to_string();
    let _ = s.net(&["restore", &id, "--to", p(&out)]);
    let mut restored = 0;
    for (rel, f) in tree(&out).into_iter().filter(|(_, f)| f.is_file()) {
        let rel = String::from_utf8(rel).unwrap();
        assert_eq!(
            std::fs::read(&f).unwrap(),
            std::fs::read(s.src.join(&rel)).unwrap(),
            "{rel}"
        );
        restored += 1;
    }
    assert!(restored > 0, "nothing of the resumed job restored");
}
