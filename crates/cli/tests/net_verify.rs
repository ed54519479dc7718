//! `tapeloom verify JOB --server`: the server reads the job on its own drives
//! and answers with a local verify's document; only the job's client (or an
//! admin) may ask, a damaged block is reported as a local verify reports it, and
//! an encrypted job is refused.

mod common;
#[path = "common/server_kit.rs"]
mod server_kit;
use common::*;
use serde_json::Value;
use server_kit::{get, Server};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A home with the client tokens `alice` and `bob`, and a job alice backed up
/// through the server.
struct Setup {
    t: tempfile::TempDir,
    home: PathBuf,
    server: Server,
    alice: String,
    bob: String,
    job: String,
}

fn setup() -> Setup {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let token = |v: Value| v["token"].as_str().unwrap().to_string();
    let alice = token(ok(&home, &["server", "token", "add", "alice"]));
    let bob = token(ok(&home, &["server", "token", "add", "bob"]));
    let src = t.path().join("src");
    rich_tree(&src);
    for i in 0..6u64 {
        write(&src.join(format!("big/f{i}")), &noise(20 + i, 1_500_000));
    }
    let server = Server::start(&home, None);
    let doc = server.json(&alice, &["backup", src.to_str().unwrap()]);
    assert_eq!(doc["status"], "ok", "{doc}");
    let job = doc["job_id"].as_i64().unwrap().to_string();
    Setup {
        t,
        home,
        server,
        alice,
        bob,
        job,
    }
}

/// The same figures in both documents.
fn same_figures(remote: &Value, local: &Value) {
    for k in [
        "job_id",
        "ok",
        "blocks_checked",
        "bad_blocks",
        "files_checked",
        "files_affected",
        "files_missing",
        "bytes_read_from_tape",
    ] {
        assert_eq!(remote[k], local[k], "{k}: {remote} against {local}");
    }
}

/// The cartridges loaded in the home's drives.
fn loaded(home: &Path) -> Vec<Value> {
    let st = ok(home, &["library", "status"]);
    let drives = st["drives"].as_array().unwrap();
    drives
        .iter()
        .map(|d| d["loaded"].clone())
        .filter(|l| !l.is_null())
        .collect()
}

#[test]
fn a_clients_job_verifies_on_the_server_as_a_local_verify() {
    let s = setup();
    let remote = s.server.json(&s.alice, &["verify", &s.job]);
    assert_eq!(remote["ok"], true, "{remote}");
    assert!(remote["blocks_checked"].as_u64().unwrap() > 1, "{remote}");
    assert!(remote["files_checked"].as_u64().unwrap() > 6, "{remote}");
    let local = ok(&s.home, &["verify", &s.job]);
    same_figures(&remote, &local);
    // The human form is a local verify's line.
    let (code, out, err) = s.server.client(&s.alice, &["verify", &s.job]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with(&format!("job {}: ok — ", s.job)), "{out}");
    // A key file is the server's machine's business.
    let key = s.t.path().join("k.key");
    let (code, _, err) = (s.server).client(
        &s.alice,
        &["verify", &s.job, "--key", key.to_str().unwrap()],
    );
    assert_ne!(code, 0);
    assert!(err.contains("verify --key"), "{err}");
}

#[test]
fn another_clients_job_is_a_404_and_nothing_is_read() {
    let s = setup();
    ok(&s.home, &["library", "unload"]);
    assert!(loaded(&s.home).is_empty());
    let (code, _, err) = s.server.client(&s.bob, &["verify", &s.job]);
    assert_ne!(code, 0);
    assert!(
        err.contains("404") && err.contains(&format!("no job {}", s.job)),
        "{err}"
    );
    assert!(
        loaded(&s.home).is_empty(),
        "bob's verify loaded a cartridge"
    );
    let (code, _, err) = s.server.client(&s.bob, &["verify", "999"]);
    assert_ne!(code, 0);
    assert!(err.contains("404"), "{err}");
    // The same verify by alice reads: the drives' state was a fair witness.
    assert_eq!(s.server.json(&s.alice, &["verify", &s.job])["ok"], true);
    assert_eq!(loaded(&s.home).len(), 1);
    // Alice's verify (number 1) is hers alone.
    let (status, body) = get(&s.server.addr, "/api/verifies/1", Some(&s.bob));
    assert_eq!(status, 404, "{body}");
    let (status, body) = get(&s.server.addr, "/api/verifies/1", Some(&s.alice));
    assert_eq!(status, 200, "{body}");
    let (status, _) = get(&s.server.addr, "/api/verifies/1", None);
    assert_eq!(status, 401);
    // An admin verifies any client's job.
    let admin = ok(&s.home, &["server", "token", "add", "ops", "--admin"]);
    let admin = admin["token"].as_str().unwrap();
    assert_eq!(s.server.json(admin, &["verify", &s.job])["ok"], true);
}

#[test]
fn a_damaged_block_is_reported_as_a_local_verify_reports_it() {
    let s = setup();
    ok(&s.home, &["library", "unload"]);
    let tape = s.home.join("library/tapes/TL0001L9.data");
    let mut data = std::fs::read(&tape).unwrap();
    let mid = data.len() / 2;
    data[mid] ^= 0x40;
    std::fs::write(&tape, &data).unwrap();
    let (code, out, err) = s.server.client(&s.alice, &["--json", "verify", &s.job]);
    let remote: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out} {err}"));
    let (local_code, local, local_err) = run(&s.home, &["verify", &s.job].map(OsStr::new));
    assert_eq!(local_code, 1, "{local_err}");
    assert_eq!(code, local_code, "{err}");
    assert_eq!(remote["ok"], false, "{remote}");
    assert_eq!(
        remote["bad_blocks"].as_array().unwrap().len(),
        1,
        "{remote}"
    );
    assert_eq!(remote["files_affected"].as_array().unwrap().len(), 1);
    same_figures(&remote, &local);
    assert!(
        err.contains(&format!("job {} failed verification", s.job)),
        "{err}"
    );
    // People read the bad block and the damaged file.
    let (code, out, _) = s.server.client(&s.alice, &["verify", &s.job]);
    assert_eq!(code, 1);
    let block = remote["bad_blocks"][0]["block"].as_u64().unwrap();
    assert!(
        out.contains(&format!("bad block {block} on TL0001L9")),
        "{out}"
    );
    let damaged = remote["files_affected"][0].as_str().unwrap();
    assert!(out.contains(&format!("damaged: {damaged}")), "{out}");
}

#[test]
fn an_encrypted_job_is_refused_in_one_line() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let src = t.path().join("src");
    write(&src.join("secret"), &noise(1, 100_000));
    let key = t.path().join("k.key");
    let with_pass = |args: &[&str]| {
        let out = Command::new(bin())
            .env("TAPELOOM_PASSPHRASE", "correct horse")
            .arg("--home")
            .arg(&home)
            .arg("--json")
            .args(args)
            .output()
            .unwrap();
        let (code, v, err) = parse(out);
        assert_eq!(code, 0, "{args:?}: {err}");
        v
    };
    let key_arg = key.to_str().unwrap();
    with_pass(&[
        "key",
        "create",
        key_arg,
        "--kdf-memory",
        "64K",
        "--kdf-passes",
        "1",
    ]);
    let b = with_pass(&["backup", src.to_str().unwrap(), "--encrypt", key_arg]);
    let job = b["job_id"].as_i64().unwrap().to_string();
    let admin = ok(&home, &["server", "token", "add", "ops", "--admin"]);
    let admin = admin["token"].as_str().unwrap();
    let server = Server::start(&home, None);
    ok(&home, &["library", "unload"]);
    let (code, _, err) = server.client(admin, &["verify", &job]);
    assert_ne!(code, 0);
    assert!(err.contains("409") && err.contains("encrypted"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(loaded(&home).is_empty(), "the encrypted job was read");
}

#[test]
fn a_verify_that_waits_for_the_drives_is_asked_again_until_it_ends() {
    use std::io::BufRead;
    let s = setup();
    // A job on the drives holds the home's lock for longer than the server's
    // long poll (20 s): the verify's first answer is 202, then it is asked again.
    let lock = s.home.join("lock");
    let mut holder = Command::new("flock")
        .arg(&lock)
        .args(["-c", "echo locked; sleep 24"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(holder.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "locked");
    let t0 = std::time::Instant::now();
    let remote = s.server.json(&s.alice, &["verify", &s.job]);
    let waited = t0.elapsed().as_secs_f64();
    holder.wait().unwrap();
    assert_eq!(remote["ok"], true, "{remote}");
    assert!(
        waited > 20.0,
        "the verify did not wait for the lock: {waited} s"
    );
    let admin = ok(&s.home, &["server", "token", "add", "ops", "--admin"]);
    let (status, metrics) = get(&s.server.addr, "/metrics", admin["token"].as_str());
    assert_eq!(status, 200);
    assert!(
        metrics.contains("tapeloom_http_requests_total{status=\"202\"} 1\n"),
        "{metrics}"
    );
}
