//! Encrypted backups (`key create`, `backup --encrypt`, `--key`): nothing of the
//! files' contents or names reaches the cartridge in clear, the key file restores
//! them (also after a catalog rebuilt from tapes alone), a wrong or missing key is
//! refused naming the job's key, and a changed ciphertext block is a bad block.

use crate::common::keyed::{cartridge_bytes, contains, flip, key_create, PASSPHRASE};
use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A recognisable line, repeated in a file that compresses well.
const SECRET: &[u8] = b"THE-PLAINTEXT-NOBODY-MAY-READ-ON-TAPE\n";
const NAMES: [&str; 3] = [
    "quarterly-figures.ods",
    "private-diary.txt",
    "holiday-photos",
];

/// The passphrase in the environment, for [`run_env`] and [`ok_env`].
const WITH_PASSPHRASE: [(&str, &str); 1] = [("TAPELOOM_PASSPHRASE", PASSPHRASE)];

/// Runs tapeloom with the passphrase in the environment.
fn tl(home: &Path, args: &[&str]) -> (i32, serde_json::Value, String) {
    run_env(home, &WITH_PASSPHRASE, args)
}

fn tl_ok(home: &Path, args: &[&str]) -> serde_json::Value {
    ok_env(home, &WITH_PASSPHRASE, args)
}

struct Setup {
    _t: tempfile::TempDir,
    home: PathBuf,
    src: PathBuf,
    key: PathBuf,
    fingerprint: String,
    root: PathBuf,
}

/// A home with a small library, a key file (cheap Argon2 cost) and a source tree.
fn setup() -> Setup {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().to_path_buf();
    let home = root.join("home");
    library(&home, 1, 4, "64M");
    let src = root.join("src");
    write(&src.join(NAMES[0]), &SECRET.repeat(5000));
    write(&src.join(NAMES[1]), &noise(3, 300_000));
    write(&src.join(NAMES[2]).join("beach.raw"), &noise(4, 700_000));
    let key = root.join("k.key");
    let fingerprint = key_create(PASSPHRASE, &home, &key).0;
    Setup {
        home,
        src,
        key,
        fingerprint,
        root,
        _t: t,
    }
}

fn backup(s: &Setup, extra: &[&str]) -> i64 {
    let mut args = vec!["backup", p(&s.src), "--encrypt", p(&s.key)];
    args.extend_from_slice(extra);
    tl_ok(&s.home, &args)["job_id"].as_i64().unwrap()
}

#[test]
fn an_encrypted_job_leaves_no_plaintext_or_file_name_on_the_cartridge() {
    let s = setup();
    // Both ways a payload is stored: compressed and as it is.
    backup(&s, &["--compress", "zstd"]);
    backup(&s, &["--compress", "none"]);
    let bytes = cartridge_bytes(&s.home);
    assert!(bytes.len() > 1_000_000, "{}", bytes.len());
    assert!(
        !contains(&bytes, &SECRET[..30]),
        "plaintext on the cartridge"
    );
    assert!(!contains(&bytes, &noise(3, 300_000)[1000..1064]));
    for n in NAMES {
        assert!(!contains(&bytes, n.as_bytes()), "{n} on the cartridge");
    }
    // The label stays readable.
    assert!(contains(&bytes, b"TAPELOOM"));
}

#[test]
fn an_encrypted_job_restores_identical_with_its_key_file() {
    let s = setup();
    let job = backup(&s, &[]);
    let out = s.root.join("out");
    let r = tl_ok(
        &s.home,
        &[
            "restore",
            &job.to_string(),
            "--to",
            p(&out),
            "--key",
            p(&s.key),
        ],
    );
    assert_eq!(r["files"], 5, "{r}");
    assert_same_tree(&s.src, &out);
    let v = tl_ok(&s.home, &["verify", &job.to_string(), "--key", p(&s.key)]);
    assert_eq!(v["ok"], true, "{v}");
    let jobs = ok(&s.home, &["jobs"]);
    assert_eq!(jobs["jobs"][0]["key"], s.fingerprint.as_str(), "{jobs}");
}

#[test]
fn a_compressed_encrypted_job_restores_verifies_and_rebuilds() {
    let s = setup();
    // Data over many blocks, each compressed (half text, half noise).
    let mut big = Vec::new();
    for i in 0..40u64 {
        big.extend_from_slice(&SECRET.repeat(400));
        big.extend_from_slice(&noise(i, 15_000));
    }
    write(&s.src.join("big"), &big);
    let job = backup(&s, &["--compress", "zstd", "--block-size", "64K"]).to_string();
    let v = tl_ok(&s.home, &["verify", &job, "--key", p(&s.key)]);
    assert_eq!(v["ok"], true, "{v}");
    let out = s.root.join("out");
    tl_ok(
        &s.home,
        &["restore", &job, "--to", p(&out), "--key", p(&s.key)],
    );
    assert_same_tree(&s.src, &out);
    forget_catalog(&s.home);
    let r = tl_ok(&s.home, &["catalog", "rebuild", "--key", p(&s.key)]);
    assert_eq!(r["bad_blocks"], 0, "{r}");
    let out2 = s.root.join("out2");
    tl_ok(
        &s.home,
        &["restore", &job, "--to", p(&out2), "--key", p(&s.key)],
    );
    assert_same_tree(&s.src, &out2);
}

#[test]
fn a_wrong_or_missing_key_is_refused_naming_the_fingerprint() {
    let s = setup();
    let job = backup(&s, &[]).to_string();
    let out = s.root.join("out");
    let (code, _, err) = tl(&s.home, &["restore", &job, "--to", p(&out)]);
    assert_eq!(code, 1);
    assert!(
        err.contains(&format!(
            "job {job} is encrypted with key {}; no key was given (give --key FILE)",
            s.fingerprint
        )),
        "{err}"
    );
    let other = s.root.join("other.key");
    let o = tl_ok(
        &s.home,
        &["key", "create", p(&other), "--kdf-memory", "64K"],
    );
    let (code, _, err) = tl(
        &s.home,
        &["restore", &job, "--to", p(&out), "--key", p(&other)],
    );
    assert_eq!(code, 1);
    assert!(
        err.contains(&format!(
            "job {job} is encrypted with key {}, not with the given key {}",
            s.fingerprint,
            o["short"].as_str().unwrap()
        )),
        "{err}"
    );
    let (code, _, err) = tl(&s.home, &["verify", &job]);
    assert_eq!(code, 1);
    assert!(err.contains(&s.fingerprint), "{err}");
    // A wrong passphrase is not a wrong key.
    let out2 = Command::new(bin())
        .env("TAPELOOM_PASSPHRASE", "not it")
        .args(["--home", p(&s.home), "restore", &job, "--to", p(&out)])
        .args(["--key", p(&s.key)])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out2.stderr);
    assert!(err.contains("wrong passphrase"), "{err}");
    assert!(!out.exists() || std::fs::read_dir(&out).unwrap().next().is_none());
}

#[test]
fn after_the_catalog_is_deleted_rebuild_and_the_key_file_restore_the_job() {
    let s = setup();
    backup(&s, &[]);
    forget_catalog(&s.home);
    let (code, _, err) = tl(&s.home, &["catalog", "rebuild"]);
    assert_eq!(code, 1);
    assert!(
        err.contains(&format!("is encrypted with key {}", s.fingerprint)),
        "{err}"
    );
    forget_catalog(&s.home);
    let r = tl_ok(&s.home, &["catalog", "rebuild", "--key", p(&s.key)]);
    assert_eq!(r["jobs_added"], serde_json::json!([1]), "{r}");
    assert_eq!(r["bad_blocks"], 0);
    let out = s.root.join("out");
    tl_ok(
        &s.home,
        &["restore", "1", "--to", p(&out), "--key", p(&s.key)],
    );
    assert_same_tree(&s.src, &out);
    // The rebuilt catalog knows the job's key too.
    let (code, _, err) = tl(&s.home, &["restore", "1", "--to", p(&s.root.join("o2"))]);
    assert_eq!(code, 1);
    assert!(err.contains(&s.fingerprint), "{err}");
}

#[test]
fn a_staged_encrypted_backup_restores() {
    let s = setup();
    let stage = s.root.join("stage");
    ok(&s.home, &["stage", "add", p(&stage), "--size", "8M"]);
    let job = backup(&s, &["--via", "stage", "--chunk-size", "1M"]);
    let bytes = cartridge_bytes(&s.home);
    assert!(!contains(&bytes, &SECRET[..30]));
    let out = s.root.join("out");
    tl_ok(
        &s.home,
        &[
            "restore",
            &job.to_string(),
            "--to",
            p(&out),
            "--key",
            p(&s.key),
        ],
    );
    assert_same_tree(&s.src, &out);
}

#[test]
fn a_flipped_byte_in_a_ciphertext_block_is_named_as_a_bad_block() {
    let s = setup();
    let job = backup(&s, &["--block-size", "64K", "--compress", "none"]).to_string();
    // LBN 2 is the job's clear first block; LBN 4 is a data block. The CRC is
    // kept right, so only the tag can tell.
    assert_eq!(flip(&s.home, 4, true), 65536);
    let (code, v, _) = tl(&s.home, &["verify", &job, "--key", p(&s.key)]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["ok"], false);
    assert_eq!(
        v["bad_blocks"],
        serde_json::json!([{"volume": "TL0001L9", "block": 4}]),
        "{v}"
    );
    assert!(!v["files_affected"].as_array().unwrap().is_empty(), "{v}");
}

#[test]
fn older_unencrypted_jobs_are_unaffected() {
    let s = setup();
    let plain = ok(&s.home, &["backup", p(&s.src)])["job_id"]
        .as_i64()
        .unwrap()
        .to_string();
    backup(&s, &[]);
    // The plain job's bytes are on the cartridge as before.
    assert!(contains(&cartridge_bytes(&s.home), NAMES[0].as_bytes()));
    let out = s.root.join("out");
    ok(&s.home, &["restore", &plain, "--to", p(&out)]);
    assert_same_tree(&s.src, &out);
    assert_eq!(ok(&s.home, &["verify", &plain])["ok"], true);
    forget_catalog(&s.home);
    let r = tl_ok(&s.home, &["catalog", "rebuild", "--key", p(&s.key)]);
    assert_eq!(r["jobs_added"], serde_json::json!([1, 2]), "{r}");
    let out2 = s.root.join("out2");
    ok(&s.home, &["restore", "1", "--to", p(&out2)]);
    assert_same_tree(&s.src, &out2);
}

#[test]
fn a_key_file_comes_back_from_its_paper_form() {
    let s = setup();
    let job = backup(&s, &[]).to_string();
    let (code, paper, err) = {
        let out = Command::new(bin())
            .env("TAPELOOM_PASSPHRASE", PASSPHRASE)
            .args(["key", "show", p(&s.key)])
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert_eq!(code, Some(0), "{err}");
    assert!(paper.contains(&s.fingerprint), "{paper}");
    // The paper form of `key create --paper`, typed back in.
    let kf = std::fs::read(&s.key).unwrap();
    let v = tl_ok(&s.home, &["key", "show", p(&s.key)]);
    assert_eq!(v["short"], s.fingerprint.as_str());
    let printed = Command::new(bin())
        .env("TAPELOOM_PASSPHRASE", PASSPHRASE)
        .args(["--json", "key", "create", p(&s.root.join("p.key"))])
        .args(["--kdf-memory", "64K", "--paper"])
        .output()
        .unwrap();
    let pv: serde_json::Value = serde_json::from_slice(&printed.stdout).unwrap();
    let text = pv["paper"].as_str().unwrap();
    let back = s.root.join("back.key");
    let mut child = Command::new(bin())
        .args(["key", "import", p(&back)])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(
        std::fs::read(&back).unwrap(),
        std::fs::read(s.root.join("p.key")).unwrap()
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&back).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(kf.len(), 116);
    let out = s.root.join("out");
    tl_ok(
        &s.home,
        &["restore", &job, "--to", p(&out), "--key", p(&s.key)],
    );
}

#[test]
fn an_encrypted_backup_killed_on_the_stage_is_finished_by_stage_resume_with_its_key() {
    let s = setup();
    let stage = s.root.join("stage");
    ok(&s.home, &["stage", "add", p(&stage), "--size", "2M"]);
    let src = s.root.join("many");
    // About 20 MB at 2 MB/s: the job is still on its way when it is killed, even
    // when this thread is slow to see its first chunk on a loaded machine.
    for f in 0..90u64 {
        write(
            &src.join(format!("secret-{f:02}")),
            &noise(100 + f, 200_000 + f as usize * 1000),
        );
    }
    let mut child = Command::new(bin())
        .env("TAPELOOM_PASSPHRASE", PASSPHRASE)
        .args(["--home", p(&s.home), "--json", "backup", p(&src)])
        .args([
            "--encrypt",
            p(&s.key),
            "--via",
            "stage",
            "--limit-rate",
            "2MB",
        ])
        .args(["--chunk-size", "256K", "--block-size", "64K"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t = std::time::Instant::now();
    while !holds_chunk_file(&stage) {
        assert!(t.elapsed().as_secs() < 30, "nothing staged in 30 s");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    std::thread::sleep(std::time::Duration::from_millis(900));
    child.kill().unwrap();
    child.wait().unwrap();
    let (code, out, err) = tl(&s.home, &["stage", "resume"]);
    assert_eq!(code, 1, "{out} {err}");
    assert!(
        err.contains(&format!("is encrypted with key {}", s.fingerprint)),
        "{err}"
    );
    let r = tl_ok(&s.home, &["stage", "resume", "--key", p(&s.key)]);
    let jobs = r["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1, "{r}");
    let job = jobs[0]["job_id"].to_string();
    let out = s.root.join("out");
    tl_ok(
        &s.home,
        &["restore", &job, "--to", p(&out), "--key", p(&s.key)],
    );
    let mut restored = 0;
    for e in std::fs::read_dir(&out).into_iter().flatten() {
        let f = e.unwrap().path();
        let want = std::fs::read(src.join(f.file_name().unwrap())).unwrap();
        assert_eq!(std::fs::read(&f).unwrap(), want, "{}", f.display());
        restored += 1;
    }
    assert!(restored > 0, "nothing of job {job} was restored");
    let v = tl_ok(&s.home, &["verify", &job, "--key", p(&s.key)]);
    assert_eq!(v["ok"], true, "{v}");
    assert!(!contains(&cartridge_bytes(&s.home), b"secret-0"));
}
