//! Helpers for the end-to-end tests: run the binary, make trees, compare trees.

pub mod keyed;
pub mod numeric_table;
pub mod server_kit;

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_tapeloom")
}

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Runs tapeloom with `--home home --json` and returns (exit code, JSON, stderr).
pub fn run(home: &Path, args: &[&OsStr]) -> (i32, Value, String) {
    run_env(home, &[], args)
}

/// Runs tapeloom with `--home home --json` and the variables `env` (never set in
/// this process, which all the tests share); (exit code, JSON, stderr).
pub fn run_env<A: AsRef<OsStr>>(
    home: &Path,
    env: &[(&str, &str)],
    args: &[A],
) -> (i32, Value, String) {
    let out = Command::new(bin())
        .arg("--home")
        .arg(home)
        .arg("--json")
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run tapeloom");
    parse(out)
}

/// Runs tapeloom with `--home home` for people (no `--json`) and the variables
/// `env`; (exit code, stdout, stderr), both as the bytes printed.
pub fn run_human(home: &Path, args: &[&OsStr], env: &[(&str, &str)]) -> (i32, Vec<u8>, Vec<u8>) {
    let out = Command::new(bin())
        .arg("--home")
        .arg(home)
        .args(args)
        .envs(env.iter().copied())
        .env_remove("TAPELOOM_SERVER")
        .output()
        .expect("run tapeloom");
    (out.status.code().unwrap_or(-1), out.stdout, out.stderr)
}

/// Runs tapeloom with `--home home --json` and the fault spec `spec`
/// (`TAPELOOM_FAULTS`, docs/FAULTS.md); (exit code, JSON, stderr).
pub fn run_with(home: &Path, spec: &str, args: &[&str]) -> (i32, Value, String) {
    run_env(home, &[("TAPELOOM_FAULTS", spec)], args)
}

pub fn parse(out: Output) -> (i32, Value, String) {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = if out.stdout.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not one JSON document ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    };
    (out.status.code().unwrap_or(-1), v, stderr)
}

/// Runs and insists on success.
pub fn ok(home: &Path, args: &[&str]) -> Value {
    ok_env(home, &[], args)
}

/// Runs with the variables `env` ([`run_env`]) and insists on success.
pub fn ok_env(home: &Path, env: &[(&str, &str)], args: &[&str]) -> Value {
    let (code, v, err) = run_env(home, env, args);
    assert_eq!(code, 0, "tapeloom {args:?} failed: {err}");
    v
}

/// A virtual library in `home`: `drives` drives, `slots` slots of `capacity`
/// (`256M`, ...).
pub fn library(home: &Path, drives: u32, slots: u32, capacity: &str) {
    let (d, s) = (drives.to_string(), slots.to_string());
    ok(
        home,
        &[
            "library",
            "create",
            "--drives",
            &d,
            "--slots",
            &s,
            "--capacity",
            capacity,
        ],
    );
}

/// Deterministic pseudo-random bytes (xorshift), fast enough for hundreds of MB.
pub fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    v
}

pub fn write(path: &Path, data: &[u8]) {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p).unwrap();
    }
    std::fs::write(path, data).unwrap();
}

/// Sets a file's times with nanoseconds, without following symlinks.
pub fn set_times(path: &Path, secs: i64, nanos: i64) {
    let t = nix::sys::time::TimeSpec::new(secs, nanos);
    nix::sys::stat::utimensat(
        None,
        path,
        &t,
        &t,
        nix::sys::stat::UtimensatFlags::NoFollowSymlink,
    )
    .unwrap();
}

/// A tree with every kind of object tapeloom promises to restore.
pub fn rich_tree(root: &Path) {
    std::fs::create_dir_all(root.join("dir/sub")).unwrap();
    std::fs::create_dir_all(root.join("empty")).unwrap();
    write(&root.join("dir/plain.txt"), b"hello tape\n");
    write(&root.join("dir/sub/big.bin"), &noise(1, 3_000_000));
    write(&root.join("with space"), b"space");
    write(&root.join("new\nline"), b"newline");
    write(&root.join("-leading-dash"), b"dash");
    write(
        &root.join(OsStr::from_bytes(b"latin1-\xe9t\xe9")),
        b"not utf-8",
    );
    write(&root.join("zero"), b"");
    std::os::unix::fs::symlink("plain.txt", root.join("dir/link")).unwrap();
    std::os::unix::fs::symlink("/nonexistent/target", root.join("dangling")).unwrap();
    std::fs::hard_link(root.join("dir/plain.txt"), root.join("hardlink")).unwrap();
    nix::unistd::mkfifo(
        &root.join("fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o640),
    )
    .unwrap();
    // A sparse file: 16 MiB with two small data islands.
    let f = std::fs::File::create(root.join("sparse")).unwrap();
    f.set_len(16 << 20).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, b"island one", 4096 * 10).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &noise(3, 70_000), 8 << 20).unwrap();
    drop(f);
    xattr::set(root.join("dir/plain.txt"), "user.tapeloom", b"xattr value").unwrap();
    std::fs::set_permissions(
        root.join("dir/sub"),
        std::fs::Permissions::from_mode(0o2750),
    )
    .unwrap();
    std::fs::set_permissions(
        root.join("with space"),
        std::fs::Permissions::from_mode(0o4711),
    )
    .unwrap();
    if is_root() {
        nix::sys::stat::mknod(
            &root.join("null-dev"),
            nix::sys::stat::SFlag::S_IFCHR,
            nix::sys::stat::Mode::from_bits_truncate(0o666),
            nix::sys::stat::makedev(1, 3),
        )
        .unwrap();
        std::os::unix::fs::lchown(root.join("dir/plain.txt"), Some(4321), Some(8765)).unwrap();
        std::os::unix::fs::lchown(root.join("dangling"), Some(1), Some(2)).unwrap();
    }
    set_times(&root.join("dir/plain.txt"), 1_000_000_000, 123_456_789);
    set_times(&root.join("dangling"), 1_100_000_000, 987_654_321);
    set_times(&root.join("dir/sub"), 1_200_000_000, 5);
    set_times(&root.join("empty"), 1_300_000_000, 6);
}

/// Everything compared about one object.
#[derive(Debug, PartialEq, Eq)]
pub struct Meta {
    pub kind: &'static str,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub mtime: (i64, i64),
    pub size: u64,
    pub content: Option<u64>,
    pub sparse: bool,
    pub link: Option<Vec<u8>>,
    pub rdev: u64,
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    pub nlink: u64,
}

fn hash(data: &[u8]) -> u64 {
    crc32c::crc32c(data) as u64 | ((data.len() as u64) << 32)
}

pub fn meta(p: &Path, with_dir_mtime: bool) -> Meta {
    let m = std::fs::symlink_metadata(p).unwrap();
    let ft = m.file_type();
    let kind = if ft.is_file() {
        "file"
    } else if ft.is_dir() {
        "dir"
    } else if ft.is_symlink() {
        "symlink"
    } else if ft.is_fifo() {
        "fifo"
    } else if ft.is_char_device() {
        "chardev"
    } else if ft.is_block_device() {
        "blockdev"
    } else {
        "other"
    };
    let mut xattrs: Vec<(Vec<u8>, Vec<u8>)> = xattr::list(p)
        .map(|l| {
            l.filter_map(|n| {
                xattr::get(p, &n)
                    .ok()
                    .flatten()
                    .map(|v| (n.as_bytes().to_vec(), v))
            })
            .collect()
        })
        .unwrap_or_default();
    xattrs.sort();
    Meta {
        kind,
        mode: m.mode(),
        uid: m.uid(),
        gid: m.gid(),
        mtime: if ft.is_dir() && !with_dir_mtime {
            (0, 0)
        } else {
            (m.mtime(), m.mtime_nsec())
        },
        size: if ft.is_file() { m.size() } else { 0 },
        content: ft.is_file().then(|| hash(&std::fs::read(p).unwrap())),
        sparse: ft.is_file() && m.blocks() * 512 < m.size(),
        link: ft.is_symlink().then(|| {
            std::fs::read_link(p)
                .unwrap()
                .as_os_str()
                .as_bytes()
                .to_vec()
        }),
        rdev: if ft.is_char_device() || ft.is_block_device() {
            m.rdev()
        } else {
            0
        },
        xattrs,
        nlink: if ft.is_dir() { 0 } else { m.nlink() },
    }
}

/// Every object below `root` (and `root` itself as ""), by relative path.
pub fn tree(root: &Path) -> BTreeMap<Vec<u8>, PathBuf> {
    let mut out = BTreeMap::new();
    out.insert(Vec::new(), root.to_path_buf());
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p
                .strip_prefix(root)
                .unwrap()
                .as_os_str()
                .as_bytes()
                .to_vec();
            if e.file_type().unwrap().is_dir() {
                stack.push(p.clone());
            }
            out.insert(rel, p);
        }
    }
    out
}

/// Asserts two trees are equal in names, content and metadata. `root_mtime` says
/// whether the roots' own mtimes must match too.
pub fn assert_same_tree(a: &Path, b: &Path) {
    let ta = tree(a);
    let tb = tree(b);
    let na: Vec<_> = ta.keys().collect();
    let nb: Vec<_> = tb.keys().collect();
    assert_eq!(na, nb, "the trees hold different names");
    for (rel, pa) in &ta {
        let pb = &tb[rel];
        let ma = meta(pa, true);
        let mb = meta(pb, true);
        assert_eq!(ma, mb, "{:?} differs", String::from_utf8_lossy(rel));
    }
}

/// The inode of a path (for hard-link checks).
pub fn ino(p: &Path) -> u64 {
    std::fs::symlink_metadata(p).unwrap().ino()
}

/// Deletes a home's catalog (and its WAL files), as if it were lost.
/// Restores job `job` to `out` and insists it is identical to `src`.
pub fn restores_identical(home: &Path, job: &str, src: &Path, out: &Path) {
    ok(home, &["restore", job, "--to", out.to_str().unwrap()]);
    assert_same_tree(src, out);
}

/// Deletes the catalog, rebuilds it from the tapes alone, and restores job `job`
/// identical to `src` into `out`.
pub fn restores_identical_from_tapes_alone(home: &Path, job: &str, src: &Path, out: &Path) {
    forget_catalog(home);
    ok(home, &["catalog", "rebuild"]);
    restores_identical(home, job, src, out);
}

/// Copies a folder and all it holds (`cp -a`), for a fresh copy of a home per case.
pub fn copy_tree(from: &Path, to: &Path) {
    let s = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(s.success(), "cp -a {} {}", from.display(), to.display());
}

pub fn forget_catalog(home: &Path) {
    for f in ["catalog.sqlite", "catalog.sqlite-wal", "catalog.sqlite-shm"] {
        let _ = std::fs::remove_file(home.join(f));
    }
}

/// The key paths of a JSON document: `a`, `a.b`, `a[].c`, ...
pub fn key_paths(v: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                out.insert(p.clone());
                key_paths(x, &p, out);
            }
        }
        Value::Array(a) => {
            for x in a {
                key_paths(x, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

pub fn keys_fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/json-keys")
        .join(format!("{name}.txt"))
}

/// Records (with TAPELOOM_RECORD_JSON_KEYS set) or checks the key paths of one
/// command's output; a recorded key that is missing now is added to `missing`.
pub fn check_keys(name: &str, v: &Value, missing: &mut Vec<String>) {
    let mut now = BTreeSet::new();
    key_paths(v, "", &mut now);
    assert!(!now.is_empty(), "{name}: no keys in {v}");
    let path = keys_fixture(name);
    if std::env::var_os("TAPELOOM_RECORD_JSON_KEYS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let text: String = now.iter().map(|k| format!("{k}\n")).collect();
        std::fs::write(&path, text).unwrap();
        return;
    }
    let recorded = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (record with TAPELOOM_RECORD_JSON_KEYS=1)",
            path.display()
        )
    });
    for k in recorded.lines().filter(|l| !l.is_empty()) {
        if !now.contains(k) {
            missing.push(format!("{name}: {k}"));
        }
    }
}

/// Writes chunk 0 of `stream` of `job` (`blocks` blocks) on the stage at `stage`, as
/// a backup spooling to it would, and records it in the home's catalog.
pub fn stage_chunk(
    home: &Path,
    stage: &Path,
    job: i64,
    stream: u16,
    blocks: usize,
) -> tapeloom_catalog::StagedChunk {
    use tapeloom_format::{Kind, StreamPacker};
    let c = tapeloom_catalog::Catalog::open(&home.join("catalog.sqlite")).unwrap();
    let s = c.stage_by_path(stage).unwrap().expect("a stage");
    let mut p = StreamPacker::new(stream, job as u64, 4096);
    for _ in 0..blocks {
        p.record(Kind::Data, &[7u8; 4000]);
        p.finish_block();
    }
    let mut w =
        tapeloom_engine::stage::ChunkWriter::create(stage, job, job as u64, stream, 0, 0).unwrap();
    for b in &mut p.ready {
        w.push(b).unwrap();
    }
    let row = w.finish(s.id).unwrap();
    c.add_staged_chunk(&row).unwrap();
    row
}

/// Marks chunk 0 of `stream` of `job` as on tape in the home's catalog.
pub fn despool(home: &Path, job: i64, stream: u16) {
    let c = tapeloom_catalog::Catalog::open(&home.join("catalog.sqlite")).unwrap();
    c.mark_chunk_despooled(job, stream, 0).unwrap();
}
