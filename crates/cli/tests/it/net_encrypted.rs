//! `tapeloom restore JOB --server URL --key FILE` of an encrypted job: the server
//! reads its blocks sealed, without any key, and sends them with the job's
//! wrapped data key; the client unwraps it with its key file and opens each
//! block. A wrong or missing key is refused in one line before anything is
//! written, and a damaged block is named as a local restore names it.

use crate::common::keyed::*;
use crate::common::*;
use serde_json::Value;
use std::path::Path;

/// `restore JOB --to out [extra]` through the server of `s` (an encrypted job of
/// 64 KiB blocks stored uncompressed), with the admin token.
fn restore_net(s: &SealedServer, out: &Path, extra: &[&str]) -> (i32, String, String) {
    let mut a = vec!["--json", "restore", &s.job, "--to", p(out)];
    a.extend_from_slice(extra);
    a.extend_from_slice(&["--server", &s.server.url]);
    a.extend_from_slice(&["--fingerprint", &s.server.fingerprint]);
    a.extend_from_slice(&["--token", &s.admin]);
    tl(PASSPHRASE, &a)
}

/// The same restore on the server's machine.
fn restore_local(s: &SealedServer, out: &Path, extra: &[&str]) -> (i32, String, String) {
    let mut a = vec!["--home", p(&s.home), "--json", "restore", &s.job];
    a.extend_from_slice(&["--to", p(out)]);
    a.extend_from_slice(extra);
    tl(PASSPHRASE, &a)
}

#[test]
fn an_encrypted_job_restores_identical_through_the_server_with_the_key_on_the_client() {
    let s = sealed_server(0);
    let out = s.t.path().join("net");
    let (code, doc, err) = restore_net(&s, &out, &["--key", p(&s.key)]);
    assert_eq!(code, 0, "{err}");
    assert_same_tree(&s.src, &out);
    let doc: Value = serde_json::from_str(&doc).unwrap();
    let local = s.t.path().join("local");
    let (code, l, err) = restore_local(&s, &local, &["--key", p(&s.key)]);
    assert_eq!(code, 0, "{err}");
    let l: Value = serde_json::from_str(&l).unwrap();
    for k in [
        "files",
        "bytes",
        "blocks_read",
        "mounts",
        "source",
        "errors",
    ] {
        assert_eq!(doc[k], l[k], "{k}: {doc} / {l}");
    }
    // One path of the job.
    let one = s.t.path().join("one");
    let (code, _, err) = restore_net(&s, &one, &["diary.txt", "--key", p(&s.key)]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        std::fs::read(one.join("diary.txt")).unwrap(),
        noise(3, 300_000)
    );
    assert!(!one.join("photos").exists());
    // The server was never given a key: its log holds no passphrase prompt or
    // key error, and the home has no key file.
    assert!(!s.server.log().contains("key"), "{}", s.server.log());
}

#[test]
fn a_missing_or_wrong_key_is_refused_in_one_line_with_nothing_written() {
    let s = sealed_server(0);
    let out = s.t.path().join("out");
    let (code, _, err) = restore_net(&s, &out, &[]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!(
            "job {} is encrypted with key {}; no key was given (give --key FILE)",
            s.job, s.fingerprint
        )),
        "{err}"
    );
    assert!(!out.exists(), "the restore folder was made");
    let other = s.t.path().join("other.key");
    let given = key_create(PASSPHRASE, &s.home, &other).0;
    let (code, _, err) = restore_net(&s, &out, &["--key", p(&other)]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!(
            "job {} is encrypted with key {}, not with the given key {given}",
            s.job, s.fingerprint
        )),
        "{err}"
    );
    assert!(!out.exists(), "the restore folder was made");
}

#[test]
fn a_damaged_encrypted_block_is_named_as_a_local_restore_names_it() {
    let s = sealed_server(0);
    // LBN 2 is the job's clear first block; LBN 4 a data block.
    assert_eq!(flip(&s.home, 4, false), 65536);
    let (local, net) = (s.t.path().join("local"), s.t.path().join("net"));
    let (lcode, l, _) = restore_local(&s, &local, &["--key", p(&s.key)]);
    let (ncode, n, err) = restore_net(&s, &net, &["--key", p(&s.key)]);
    assert_eq!((lcode, ncode), (1, 1), "{err}");
    let (le, ne) = (errors(&l), errors(&n));
    assert!(!le.is_empty(), "{l}");
    assert!(le
        .iter()
        .all(|(_, why)| why.contains("block 4 of TL0001L9 is bad")));
    assert_eq!(le, ne, "local {l}\nnet {n}");
    // The CRC set right (a change made on purpose): only the block's tag tells,
    // on the client, which refuses the block; the same files are named, as lost
    // with it.
    assert_eq!(flip(&s.home, 4, false), 65536);
    assert_eq!(flip(&s.home, 6, true), 65536);
    let (local, net) = (s.t.path().join("local2"), s.t.path().join("net2"));
    let (lcode, l, _) = restore_local(&s, &local, &["--key", p(&s.key)]);
    let (ncode, n, err) = restore_net(&s, &net, &["--key", p(&s.key)]);
    assert_eq!((lcode, ncode), (1, 1), "{err}");
    let (le, ne) = (errors(&l), errors(&n));
    assert!(!le.is_empty(), "{l}");
    assert!(
        le.iter().all(|(_, why)| why.contains("tag mismatch")),
        "{l}"
    );
    let refused = |(p, why): &&(String, String)| p == "?" && why.contains("tag mismatch");
    assert_eq!(ne.iter().filter(refused).count(), 1, "{n}");
    let paths = |e: &[(String, String)]| -> Vec<String> {
        (e.iter().filter(|(p, _)| p != "?"))
            .map(|(p, _)| p.clone())
            .collect()
    };
    assert_eq!(paths(&le), paths(&ne), "local {l}\nnet {n}");
    // What the block did not touch is restored.
    let same = std::fs::read(net.join("photos/beach.raw")).unwrap();
    assert_eq!(same, noise(4, 700_000));
}

#[test]
fn a_compressed_encrypted_job_restores_identical_through_the_server() {
    let s = sealed_server(0);
    let (k, src) = (p(&s.key), p(&s.src));
    let a = [
        "--home",
        p(&s.home),
        "--json",
        "backup",
        src,
        "--encrypt",
        k,
    ];
    let mut a = a.to_vec();
    a.extend_from_slice(&["--compress", "zstd"]);
    let job = tl_json(PASSPHRASE, &a)["job_id"]
        .as_i64()
        .unwrap()
        .to_string();
    let out = s.t.path().join("zstd");
    let mut a = vec!["--json", "restore", &job, "--to", p(&out), "--key", k];
    a.extend_from_slice(&["--server", &s.server.url]);
    a.extend_from_slice(&["--fingerprint", &s.server.fingerprint]);
    a.extend_from_slice(&["--token", &s.admin]);
    let doc = tl_json(PASSPHRASE, &a);
    assert_same_tree(&s.src, &out);
    assert_eq!(doc["errors"], Value::Array(vec![]), "{doc}");
    // And on the server's machine, as the client placed it.
    let local = s.t.path().join("local");
    let (code, _, err) = tl(
        PASSPHRASE,
        &[
            "--home",
            p(&s.home),
            "restore",
            &job,
            "--to",
            p(&local),
            "--key",
            k,
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_same_tree(&s.src, &local);
}
