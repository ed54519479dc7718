//! Key files, a passphrase in the environment and the bytes of virtual
//! cartridges, for the end-to-end tests of encrypted jobs.

use crate::common::server_kit::{admin_token, token, Server};
use crate::common::{bin, library, noise, p, write};
use serde_json::Value;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The passphrase of the tests' key files.
pub const PASSPHRASE: &str = "correct horse battery staple";

/// Runs tapeloom with `passphrase` in the environment and no server named
/// there: (code, stdout, stderr).
pub fn tl(passphrase: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin())
        .env("TAPELOOM_PASSPHRASE", passphrase)
        .env_remove("TAPELOOM_SERVER")
        .args(args)
        .output()
        .expect("run tapeloom");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// [`tl`], which must succeed: its stdout as JSON.
pub fn tl_json(passphrase: &str, args: &[&str]) -> Value {
    let (code, out, err) = tl(passphrase, args);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap()
}

/// A key file at `key` sealed with `passphrase` at a cheap Argon2 cost: its
/// short and long fingerprints.
pub fn key_create(passphrase: &str, home: &Path, key: &Path) -> (String, String) {
    let v = tl_json(
        passphrase,
        &[
            "--home",
            p(home),
            "--json",
            "key",
            "create",
            p(key),
            "--kdf-memory",
            "64K",
            "--kdf-passes",
            "1",
        ],
    );
    let s = |k: &str| v[k].as_str().unwrap().to_string();
    (s("short"), s("fingerprint"))
}

/// A home with an encrypted job ([`sealed_job`]).
pub struct SealedJob {
    pub home: PathBuf,
    pub src: PathBuf,
    /// The key file that made the job.
    pub key: PathBuf,
    /// Its short fingerprint.
    pub fingerprint: String,
    /// The job's id.
    pub job: String,
}

/// In `t`: a home (one drive, four 64 MiB slots), a source tree (a plain,
/// compressible file, two of noise and `notes` small ones), a key file sealed
/// with `passphrase` and an encrypted job of the tree made with it, of 64 KiB
/// blocks stored uncompressed.
pub fn sealed_job(passphrase: &str, t: &Path, notes: u64) -> SealedJob {
    let home = t.join("home");
    library(&home, 1, 4, "64M");
    let src = t.join("src");
    write(&src.join("figures.ods"), &b"PLAIN-FIGURES\n".repeat(20_000));
    write(&src.join("diary.txt"), &noise(3, 300_000));
    write(&src.join("photos/beach.raw"), &noise(4, 700_000));
    for i in 0..notes {
        write(&src.join(format!("notes/n{i}")), &noise(40 + i, 3_000));
    }
    let key = t.join("k.key");
    let fingerprint = key_create(passphrase, &home, &key).0;
    let mut a = vec!["--home", p(&home), "--json", "backup", p(&src)];
    a.extend_from_slice(&["--encrypt", p(&key), "--block-size", "64K"]);
    a.extend_from_slice(&["--compress", "none"]);
    let job = tl_json(passphrase, &a)["job_id"]
        .as_i64()
        .unwrap()
        .to_string();
    SealedJob {
        home,
        src,
        key,
        fingerprint,
        job,
    }
}

/// [`sealed_job`] made with [`PASSPHRASE`] in a temporary folder, with an admin
/// token `ops`, the client token `bob` and the server running on its home.
pub struct SealedServer {
    pub t: tempfile::TempDir,
    pub home: PathBuf,
    pub src: PathBuf,
    pub key: PathBuf,
    pub fingerprint: String,
    pub admin: String,
    pub bob: String,
    pub server: Server,
    pub job: String,
}

/// A [`SealedServer`] whose job holds `notes` small notes besides its files.
pub fn sealed_server(notes: u64) -> SealedServer {
    let t = tempfile::tempdir().unwrap();
    let SealedJob {
        home,
        src,
        key,
        fingerprint,
        job,
    } = sealed_job(PASSPHRASE, t.path(), notes);
    let admin = admin_token(&home, "ops");
    let bob = token(&home, "bob");
    let server = Server::start(&home, None);
    SealedServer {
        t,
        home,
        src,
        key,
        fingerprint,
        admin,
        bob,
        server,
        job,
    }
}

/// Where block `lbn` of a virtual cartridge lies in its `.data` file.
pub fn block_offset(idx: &[u8], lbn: usize) -> (usize, usize) {
    let e = &idx[lbn * 16..lbn * 16 + 16];
    (
        u64::from_le_bytes(e[..8].try_into().unwrap()) as usize,
        u32::from_le_bytes(e[8..12].try_into().unwrap()) as usize,
    )
}

/// Flips a byte of the payload of block `lbn` of the home's first cartridge;
/// with `crc`, sets the block's CRC right again (only a tag can tell then).
/// The block's length.
pub fn flip(home: &Path, lbn: usize, crc: bool) -> usize {
    let tapes = home.join("library/tapes");
    let idx = std::fs::read(tapes.join("TL0001L9.idx")).unwrap();
    let data_path = tapes.join("TL0001L9.data");
    let mut data = std::fs::read(&data_path).unwrap();
    let (off, len) = block_offset(&idx, lbn);
    assert!(len >= 1000 + 64);
    data[off + 64 + 1000] ^= 0x40;
    if crc {
        let b = &data[off..off + len];
        let c = crc32c::crc32c_append(crc32c::crc32c(&b[..60]), &b[64..]);
        data[off + 60..off + 64].copy_from_slice(&c.to_le_bytes());
    }
    std::fs::write(&data_path, &data).unwrap();
    len
}

/// A restore's errors (its JSON document `doc`) as (path, reason), sorted.
pub fn errors(doc: &str) -> Vec<(String, String)> {
    let v: Value = serde_json::from_str(doc).unwrap();
    let mut e: Vec<(String, String)> = (v["errors"].as_array().unwrap().iter())
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap().to_string();
            (s("path"), s("reason"))
        })
        .collect();
    e.sort();
    e
}

/// Every byte of the home's virtual cartridges.
pub fn cartridge_bytes(home: &Path) -> Vec<u8> {
    let mut all = Vec::new();
    for e in std::fs::read_dir(home.join("library/tapes")).unwrap() {
        let e = e.unwrap().path();
        if e.extension() == Some(OsStr::new("data")) {
            all.extend(std::fs::read(e).unwrap());
        }
    }
    all
}

/// Whether `needle` stands anywhere in `hay`.
pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}
