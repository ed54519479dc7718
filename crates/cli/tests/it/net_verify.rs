//! `tapeloom verify JOB --server`: the server reads the job on its own drives
//! and answers with a local verify's document; only the job's client (or an
//! admin) may ask, a damaged block is reported as a local verify reports it, and
//! an encrypted job whose key the server does not hold is refused. With `--key`,
//! the server reads the job's blocks as for a restore, sealed, and the client
//! checks them with the key, which it keeps: the same document as a local
//! `verify --key`.

use crate::common::keyed::*;
use crate::common::server_kit::{admin_token, client_job, get, Server};
use crate::common::*;
use serde_json::Value;
use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

/// The tree of the client's job: every kind of object and six files of 1.5 MB.
fn big_files(src: &Path) {
    rich_tree(src);
    for i in 0..6u64 {
        write(&src.join(format!("big/f{i}")), &noise(20 + i, 1_500_000));
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
    let s = client_job(big_files);
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
    // With a key file, this machine checks the blocks the server reads: the job
    // is not encrypted, and the figures are the same.
    let key = s.t.path().join("k.key");
    key_create(PASSPHRASE, &s.home, &key);
    let mut a = vec!["--json", "verify", &s.job, "--key", p(&key)];
    a.extend_from_slice(&["--server", &s.server.url]);
    a.extend_from_slice(&["--fingerprint", &s.server.fingerprint]);
    a.extend_from_slice(&["--token", &s.alice]);
    let keyed = tl_json(PASSPHRASE, &a);
    same_figures(&keyed, &local);
}

#[test]
fn another_clients_job_is_a_404_and_nothing_is_read() {
    let s = client_job(big_files);
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
    let admin = &admin_token(&s.home, "ops");
    assert_eq!(s.server.json(admin, &["verify", &s.job])["ok"], true);
}

#[test]
fn a_damaged_block_is_reported_as_a_local_verify_reports_it() {
    let s = client_job(big_files);
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
fn an_encrypted_job_whose_key_the_server_lacks_is_refused_in_one_line() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let src = t.path().join("src");
    write(&src.join("secret"), &noise(1, 100_000));
    let key = t.path().join("k.key");
    let with_pass =
        |args: &[&str]| ok_env(&home, &[("TAPELOOM_PASSPHRASE", "correct horse")], args);
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
    let admin = &admin_token(&home, "ops");
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
    if !need(program("flock", "util-linux")) {
        return;
    }
    let s = client_job(big_files);
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
    let admin = admin_token(&s.home, "ops");
    let (status, metrics) = get(&s.server.addr, "/metrics", Some(&admin));
    assert_eq!(status, 200);
    assert!(
        metrics.contains("tapeloom_http_requests_total{status=\"202\"} 1\n"),
        "{metrics}"
    );
}

/// `verify JOB --key KEY` through the server of `s` (an encrypted job of 64 KiB
/// blocks stored uncompressed, made on the server's machine: clients cannot
/// back up encrypted through the server) with `token`: (code, stdout, stderr).
fn verify_net(s: &SealedServer, token: &str, key: &Path, json: bool) -> (i32, String, String) {
    let mut a = vec!["verify", &s.job, "--key", p(key)];
    if json {
        a.insert(0, "--json");
    }
    a.extend_from_slice(&["--server", &s.server.url]);
    a.extend_from_slice(&["--fingerprint", &s.server.fingerprint]);
    a.extend_from_slice(&["--token", token]);
    tl(PASSPHRASE, &a)
}

/// The same verify on the server's machine: (code, document, stderr).
fn verify_local(s: &SealedServer) -> (i32, Value, String) {
    let (code, out, err) = tl(
        PASSPHRASE,
        &[
            "--home",
            p(&s.home),
            "--json",
            "verify",
            &s.job,
            "--key",
            p(&s.key),
        ],
    );
    let doc = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out} {err}"));
    (code, doc, err)
}

#[test]
fn an_encrypted_job_verifies_through_the_server_with_the_key_on_the_client() {
    let s = sealed_server(20);
    let (code, out, err) = verify_net(&s, &s.admin, &s.key, true);
    assert_eq!(code, 0, "{err}");
    let remote: Value = serde_json::from_str(&out).unwrap();
    let (lcode, local, lerr) = verify_local(&s);
    assert_eq!(lcode, 0, "{lerr}");
    assert_eq!(remote["ok"], true, "{remote}");
    assert_eq!(remote["files_checked"], 26, "{remote}");
    same_figures(&remote, &local);
    // The human form is a local verify's line.
    let (code, out, err) = verify_net(&s, &s.admin, &s.key, false);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with(&format!("job {}: ok — ", s.job)), "{out}");
    // The server was never given a key, and read nothing but sealed blocks.
    assert!(!s.server.log().contains("key"), "{}", s.server.log());
}

#[test]
fn a_damaged_encrypted_block_is_reported_as_a_local_verify_reports_it() {
    let s = sealed_server(20);
    // The block that holds the small notes whole.
    let ls = ok(&s.home, &["ls", &s.job, "notes/n5"]);
    let notes = ls["entries"][0]["block"].as_u64().unwrap() as usize;
    // The job's first block (LBN 2: its start and key) and last (its index's
    // end) hold no entry.
    let (_, local, _) = verify_local(&s);
    let last = 1 + local["blocks_checked"].as_u64().unwrap() as usize;
    let cases = [(4, false), (9, true), (notes, false), (notes, true)];
    for (lbn, crc) in cases.into_iter().chain([(2, false), (last, false)]) {
        flip(&s.home, lbn, crc);
        let (code, out, err) = verify_net(&s, &s.admin, &s.key, true);
        let remote: Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out} {err}"));
        let (lcode, local, _) = verify_local(&s);
        assert_eq!((lcode, code), (1, 1), "{err}");
        assert_eq!(remote["ok"], false, "{remote}");
        let bad = serde_json::json!([{"volume": "TL0001L9", "block": lbn}]);
        assert_eq!(remote["bad_blocks"], bad, "{remote}");
        same_figures(&remote, &local);
        let failed = format!("tapeloom: error: job {} failed verification", s.job);
        assert_eq!(err.trim(), failed);
        if lbn == notes {
            // Each small note the block holds whole is damaged, and missing.
            let affected = remote["files_affected"].as_array().unwrap();
            assert!(affected.len() > 10, "{remote}");
            assert!(remote["files_missing"].as_u64().unwrap() > 10, "{remote}");
        }
        if lbn == 2 || lbn == last {
            assert_eq!(remote["files_affected"], serde_json::json!([]), "{remote}");
            // A restore through the server, told of the block too, loses no entry.
            let to = s.t.path().join(format!("restored-{lbn}"));
            let mut a = vec!["--json", "restore", &s.job, "--to", p(&to)];
            a.extend_from_slice(&["--key", p(&s.key), "--server", &s.server.url]);
            a.extend_from_slice(&["--fingerprint", &s.server.fingerprint]);
            a.extend_from_slice(&["--token", &s.admin]);
            let restored = tl_json(PASSPHRASE, &a);
            assert_eq!(restored["errors"], serde_json::json!([]), "{restored}");
        }
        // People read the bad block.
        let (code, out, _) = verify_net(&s, &s.admin, &s.key, false);
        assert_eq!(code, 1);
        assert!(
            out.contains(&format!("bad block {lbn} on TL0001L9")),
            "{out}"
        );
        flip(&s.home, lbn, crc);
    }
    // Put right again, the job verifies.
    assert_eq!(verify_net(&s, &s.admin, &s.key, true).0, 0);
}

#[test]
fn a_wrong_key_file_is_refused_in_one_line() {
    let s = sealed_server(20);
    let other = s.t.path().join("other.key");
    let given = key_create(PASSPHRASE, &s.home, &other).0;
    let (code, out, err) = verify_net(&s, &s.admin, &other, true);
    assert_eq!(code, 1, "{err}");
    assert_eq!(out, "");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!(
            "job {} is encrypted with key {}, not with the given key {given}",
            s.job, s.fingerprint
        )),
        "{err}"
    );
    // A key file that is not there is named.
    let missing = s.t.path().join("missing.key");
    let (code, _, err) = verify_net(&s, &s.admin, &missing, true);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("missing.key"), "{err}");
    // The server's restore chooses its drives.
    let mut a = vec!["verify", &s.job, "--key", p(&s.key), "--drive", "0"];
    a.extend_from_slice(&["--server", &s.server.url]);
    a.extend_from_slice(&["--fingerprint", &s.server.fingerprint]);
    a.extend_from_slice(&["--token", &s.admin]);
    let (code, _, err) = tl(PASSPHRASE, &a);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("verify --key --drive"), "{err}");
    // No key at all: the server's own verify, which cannot open the job.
    let (code, _, err) = s.server.client(&s.admin, &["verify", &s.job]);
    assert_ne!(code, 0);
    assert!(err.contains("409") && err.contains("encrypted"), "{err}");
}

#[test]
fn another_clients_encrypted_job_is_a_404_and_nothing_is_read() {
    let s = sealed_server(20);
    ok(&s.home, &["library", "unload"]);
    let (code, out, err) = verify_net(&s, &s.bob, &s.key, true);
    assert_eq!(code, 1, "{err}");
    assert_eq!(out, "");
    assert!(
        err.contains("404") && err.contains(&format!("no job {}", s.job)),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        loaded(&s.home).is_empty(),
        "bob's verify loaded a cartridge"
    );
}
