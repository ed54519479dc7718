//! A restore restores every entry whole or names it: entries whose records do not
//! decode, whose data is longer or shorter than their entry says, or that are not
//! on tape where the catalog has them. Files appear under their names only once
//! whole (a killed restore leaves temporary files, which the next one removes),
//! and a failure of the file system reads the same for every kind of object.

use crate::common::server_kit;
use crate::common::*;
use serde_json::Value;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The files of the job the crafted cartridges hold: 15 of them, the damaged one
/// `f07`; the others are larger than a block, so that each entry after the damaged
/// one starts in a block of its own.
const DAMAGED: &str = "f07";

fn names() -> Vec<String> {
    (0..15).map(|i| format!("f{i:02}")).collect()
}

/// A source of 15 files, `f07` of `damaged_len` bytes, backed up with 64 KiB
/// blocks and `more` options: (home, source, job).
fn job_with(root: &Path, damaged_len: usize, more: &[&str]) -> (PathBuf, PathBuf, String) {
    let (home, src) = (root.join("home"), root.join("src"));
    for (i, name) in names().iter().enumerate() {
        let len = if name == DAMAGED {
            damaged_len
        } else {
            150_000
        };
        write(&src.join(name), &noise(i as u64 + 1, len));
    }
    let mut args = vec!["backup", "--block-size", "64K"];
    args.extend_from_slice(more);
    args.push(src.to_str().unwrap());
    let b = ok(&home, &args);
    assert_eq!(b["status"], "ok", "{b}");
    (home, src, b["job_id"].to_string())
}

/// A forgery of an entry's record: its header at 0, its body at 16.
type Forgery<'a> = &'a dyn Fn(&mut [u8]);
/// A forgery kept.
type Forge = Box<dyn Fn(&mut [u8])>;

/// The parts of `data` at `spans` (offset and length, in order).
fn cut(mut data: &mut [u8], spans: impl Iterator<Item = (usize, usize)>) -> Vec<&mut [u8]> {
    let (mut out, mut at) = (Vec::new(), 0);
    for (off, len) in spans {
        let (_, tail) = std::mem::take(&mut data).split_at_mut(off - at);
        let (part, tail) = tail.split_at_mut(len);
        (data, at) = (tail, off + len);
        out.push(part);
    }
    out
}

/// Rewrites, in every block of `blocks`, the record that starts the entry of
/// `path` (`forge` sees the record from its header on), with the block's CRC
/// computed again (FORMAT.md 4.2) so that the change reaches the record decoder:
/// a tape or stage written by a broken or hostile writer. Returns how many
/// entries it forged.
fn forge_blocks<'a>(
    blocks: impl Iterator<Item = &'a mut [u8]>,
    path: &str,
    forge: Forgery,
) -> usize {
    // The entry's body holds its path after 56 bytes of fields, as bytes32.
    let named = [&(path.len() as u32).to_le_bytes()[..], path.as_bytes()].concat();
    let mut forged = 0;
    for block in blocks.filter(|b| b.len() > 64 && b.starts_with(b"TLBK")) {
        let payload_len = u32::from_le_bytes(block[44..48].try_into().unwrap()) as usize;
        let payload = 64..64 + payload_len;
        let Some(at) = (block[payload.clone()].windows(named.len()))
            .position(|w| w == named.as_slice())
            .and_then(|i| i.checked_sub(72))
        else {
            continue;
        };
        let record = &mut block[64 + at..payload.end];
        // An entry record's header: kind 3, reserved zero, a short body.
        let len = u64::from_le_bytes(record[8..16].try_into().unwrap());
        if record[0..8] != [3, 0, 0, 0, 0, 0, 0, 0] || len > 4096 {
            continue;
        }
        forge(record);
        let crc = crc32c::crc32c_append(crc32c::crc32c(&block[..60]), &block[64..]);
        block[60..64].copy_from_slice(&crc.to_le_bytes());
        forged += 1;
    }
    forged
}

/// Forges entry `path` on the virtual cartridge `barcode` ([`forge_blocks`]); its
/// blocks as the index file places them (FORMAT.md 8).
fn forge_tape(home: &Path, barcode: &str, path: &str, forge: Forgery) {
    let tapes = home.join("library/tapes");
    let idx = std::fs::read(tapes.join(format!("{barcode}.idx"))).unwrap();
    let file = tapes.join(format!("{barcode}.data"));
    let mut data = std::fs::read(&file).unwrap();
    let spans = idx.chunks_exact(16).map(|e| {
        let off = u64::from_le_bytes(e[0..8].try_into().unwrap()) as usize;
        (
            off,
            u32::from_le_bytes(e[8..12].try_into().unwrap()) as usize,
        )
    });
    let blocks = cut(&mut data, spans);
    assert_eq!(
        forge_blocks(blocks.into_iter(), path, forge),
        1,
        "{path} on tape"
    );
    std::fs::write(&file, &data).unwrap();
}

/// Forges entry `path` in the chunk files under `stage` ([`forge_blocks`]); each
/// file's blocks after its 72-byte header, each after its length (STAGE.md 3).
fn forge_stage(stage: &Path, path: &str, forge: Forgery) {
    let mut forged = 0;
    for (_, file) in tree(stage).into_iter().filter(|(_, p)| p.is_file()) {
        let mut data = std::fs::read(&file).unwrap();
        let mut spans = Vec::new();
        let mut at = 72;
        while at + 4 <= data.len() {
            let len = u32::from_le_bytes(data[at..at + 4].try_into().unwrap()) as usize;
            spans.push((at + 4, len));
            at += 4 + len;
        }
        let blocks = cut(&mut data, spans.into_iter());
        forged += forge_blocks(blocks.into_iter(), path, forge);
        std::fs::write(&file, &data).unwrap();
    }
    assert_eq!(forged, 1, "{path} on the stage");
}

/// Sets the size an entry gives (its body's bytes 16..24).
fn declare(size: u64) -> impl Fn(&mut [u8]) {
    move |r: &mut [u8]| r[32..40].copy_from_slice(&size.to_le_bytes())
}

/// The record forgeries: a kind no version knows, a reserved field set, a body
/// of 2^63 bytes.
fn undecodable() -> [(&'static str, Forge); 3] {
    [
        (
            "unknown kind",
            Box::new(|r: &mut [u8]| r[0..2].copy_from_slice(&77u16.to_le_bytes())),
        ),
        ("reserved field", Box::new(|r: &mut [u8]| r[4] = 1)),
        (
            "length 2^63",
            Box::new(|r: &mut [u8]| r[8..16].copy_from_slice(&(1u64 << 63).to_le_bytes())),
        ),
    ]
}

/// Sets the size the catalog's row of `path` gives, as a catalog written from
/// such a tape would.
fn catalog_size(home: &Path, job: &str, path: &str, size: u64) {
    let (job, path) = (job.parse::<i64>().unwrap(), blob(home, path.as_bytes()));
    let row = format!("job_id = {job} AND path = {path}");
    assert_eq!(
        sql_i64(home, &format!("SELECT count(*) FROM files WHERE {row}")),
        1
    );
    // As the catalog keeps a size: a signed 64-bit number.
    let size = size as i64;
    sql_exec(home, &format!("UPDATE files SET size = {size} WHERE {row}"));
}

/// Runs `restore JOB --to OUT` and `more` arguments: (exit code, document,
/// standard error).
fn run_restore(home: &Path, job: &str, out: &Path, more: &[&str]) -> (i32, Value, String) {
    let mut args: Vec<&OsStr> = vec!["restore".as_ref(), job.as_ref(), "--to".as_ref()];
    args.push(out.as_os_str());
    args.extend(more.iter().map(OsStr::new));
    run(home, &args)
}

/// The reasons the restore document gives for `path`.
fn reasons(r: &Value, path: &str) -> Vec<String> {
    (r["errors"].as_array().unwrap().iter())
        .filter(|e| e["path"] == path)
        .map(|e| e["reason"].as_str().unwrap().to_string())
        .collect()
}

/// Every name below `root` that is a restore's temporary name.
fn temporary_files(root: &Path) -> Vec<PathBuf> {
    (tree(root).into_iter())
        .filter(|(rel, _)| {
            let name = rel.rsplit(|&b| b == b'/').next().unwrap_or(&[]);
            name.starts_with(b".") && name.windows(10).any(|w| w == b".tapeloom-")
        })
        .map(|(_, p)| p)
        .collect()
}

/// A whole restore of `job` exits 1 and names `f07` alone, with a reason that
/// contains `why`; the other 14 files are restored identical, `f07` is not
/// there, and no temporary file is left. Returns the restore's document.
fn restore_names_the_damaged_one(
    home: &Path,
    src: &Path,
    job: &str,
    out: &Path,
    why: &str,
) -> Value {
    let (code, r, err) = run_restore(home, job, out, &[]);
    named_alone((code, &r, &err), src, out, why);
    r
}

/// Checks what a restore into `out` did ([`restore_names_the_damaged_one`]):
/// its exit code, document and standard error.
fn named_alone((code, r, err): (i32, &Value, &str), src: &Path, out: &Path, why: &str) {
    assert_eq!(code, 1, "{r} {err}");
    let named: Vec<&str> = (r["errors"].as_array().unwrap().iter())
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(named, [DAMAGED], "{r}");
    let said = reasons(r, DAMAGED);
    assert!(
        said.iter().any(|s| s.contains(why)),
        "{said:?} lacks {why:?}"
    );
    assert!(err.contains(DAMAGED), "stderr names it: {err}");
    assert_eq!(r["files"], 15, "the root and the 14 others: {r}");
    for name in names().iter().filter(|n| *n != DAMAGED) {
        assert_eq!(
            meta(&src.join(name), true),
            meta(&out.join(name), true),
            "{name}"
        );
    }
    assert!(
        !out.join(DAMAGED).exists(),
        "a file not restored whole is absent"
    );
    assert_eq!(temporary_files(out), Vec::<PathBuf>::new());
}

fn verify(home: &Path, job: &str) -> (i32, Value) {
    let (code, v, err) = run(home, &["verify", job].map(OsStr::new));
    assert!(v.is_object(), "{err}");
    (code, v)
}

/// One entry's record header forged three ways: a record kind no version knows, a
/// reserved field set, a body of 2^63 bytes. Restore names the entry it never met
/// and restores the others; verify fails.
#[test]
fn an_entry_whose_record_does_not_decode_is_named() {
    for (what, forge) in undecodable() {
        let t = tempfile::tempdir().unwrap();
        let (home, src, job) = job_with(t.path(), 150_000, &[]);
        forge_tape(&home, "TL0001L9", DAMAGED, &forge);
        let out = t.path().join("out");
        eprintln!("forged: {what}");
        restore_names_the_damaged_one(&home, &src, &job, &out, "not found on tape");
        let (code, v) = verify(&home, &job);
        assert_eq!((code, &v["ok"]), (1, &Value::Bool(false)), "{what}: {v}");
        assert_eq!(v["files_missing"], 1, "{what}: {v}");
        // Asked for by path, it is named too.
        let one = t.path().join("one");
        let (code, r, _) = run_restore(&home, &job, &one, &[DAMAGED, "f08"]);
        assert_eq!(code, 1, "{what}: {r}");
        assert_eq!(reasons(&r, DAMAGED).len(), 1, "{what}: {r}");
        assert_eq!(r["errors"].as_array().unwrap().len(), 1, "{what}: {r}");
        assert_eq!(meta(&src.join("f08"), true), meta(&one.join("f08"), true));
    }
}

/// Why a restore names an entry whose data is `on_tape` bytes where it says
/// `declared`.
fn data_says(on_tape: usize, declared: u64) -> String {
    format!("its data on tape is {on_tape} bytes, its entry's size {declared} bytes")
}

/// Entries whose data on tape is shorter or longer than their size: 1,000 bytes
/// declared and 10 on tape; 307,200 and 614,400; 2^63 and 100. With the catalog's
/// row as the backup wrote it, the entry disagrees with the catalog; with the row
/// made to agree (as a catalog rebuilt from such a tape would), the data
/// disagrees with the entry. Either way restore names the entry and verify flags
/// it.
#[test]
fn an_entry_whose_data_is_not_its_size_is_named() {
    for (declared, on_tape) in [(1_000u64, 10usize), (307_200, 614_400), (1 << 63, 100)] {
        let t = tempfile::tempdir().unwrap();
        let (home, src, job) = job_with(t.path(), on_tape, &[]);
        forge_tape(&home, "TL0001L9", DAMAGED, &declare(declared));
        let catalog_says = format!("the catalog {on_tape} bytes");
        let out = t.path().join("out");
        restore_names_the_damaged_one(&home, &src, &job, &out, &catalog_says);
        let (code, v) = verify(&home, &job);
        assert_eq!(code, 1, "{declared}: {v}");
        assert_eq!(v["files_affected"], serde_json::json!([DAMAGED]), "{v}");

        catalog_size(&home, &job, DAMAGED, declared);
        let again = t.path().join("again");
        let data_says = data_says(on_tape, declared);
        restore_names_the_damaged_one(&home, &src, &job, &again, &data_says);
        let (code, v) = verify(&home, &job);
        assert_eq!(code, 1, "{declared}: {v}");
        assert_eq!(v["files_affected"], serde_json::json!([DAMAGED]), "{v}");
        assert_eq!(v["files_missing"], 0, "{v}");
        // Restored alone, by path, the same.
        let one = t.path().join("one");
        let (code, r, _) = run_restore(&home, &job, &one, &[DAMAGED]);
        assert_eq!(code, 1, "{declared}: {r}");
        assert!(reasons(&r, DAMAGED)[0].contains(&data_says), "{r}");
        assert!(!one.join(DAMAGED).exists());
    }
}

/// The same on every way a restore goes: from the disk stage where the job's
/// chunks are kept, a set's point-in-time restore, and both through the server
/// to a client (the server reads, the client places).
#[test]
fn every_way_of_restoring_names_it() {
    let (unknown, forge) = undecodable().into_iter().next().unwrap();
    let cases: [(&str, Forge, usize, String); 2] = [
        (
            "data longer than its size",
            Box::new(declare(1_000)),
            10,
            data_says(10, 1_000),
        ),
        (unknown, forge, 150_000, "not found on tape".to_string()),
    ];
    for (what, forge, on_tape, why) in cases {
        eprintln!("forged: {what}");
        let t = tempfile::tempdir().unwrap();
        let (home, stage) = (t.path().join("home"), t.path().join("stage"));
        ok(
            &home,
            &["stage", "add", stage.to_str().unwrap(), "--size", "64M"],
        );
        let staged = [
            "--via",
            "stage",
            "--keep-staged",
            "1h",
            "--chunk-size",
            "256K",
        ];
        let (home, src, job) = job_with(t.path(), on_tape, &staged);
        forge_tape(&home, "TL0001L9", DAMAGED, &forge);
        forge_stage(&stage, DAMAGED, &forge);
        if on_tape == 10 {
            catalog_size(&home, &job, DAMAGED, 1_000);
        }
        let out = t.path().join("from-stage");
        let r = restore_names_the_damaged_one(&home, &src, &job, &out, &why);
        assert_eq!(r["source"], "stage", "{r}");
        let set = |out: &Path| {
            let args = ["restore", "--set", "src", "--to", out.to_str().unwrap()];
            args.map(String::from)
        };
        let out = t.path().join("set");
        let (code, r, err) = run(&home, &set(&out).each_ref().map(OsStr::new));
        named_alone((code, &r, &err), &src, &out, &why);
        assert_eq!(r["set"], "src", "{r}");

        let server = server_kit::Server::start(&home, None);
        let token = server_kit::admin_token(&home, "admin");
        let client = |args: &[String]| {
            let mut a = vec!["--json"];
            a.extend(args.iter().map(String::as_str));
            let (code, out, err) = server.client(&token, &a);
            (code, serde_json::from_str::<Value>(&out).unwrap(), err)
        };
        let out = t.path().join("client");
        let args = ["restore", &job, "--to", out.to_str().unwrap()].map(String::from);
        let (code, r, err) = client(&args);
        named_alone((code, &r, &err), &src, &out, &why);
        assert_eq!(r["source"], "stage", "{r}");
        let out = t.path().join("client-set");
        let (code, r, err) = client(&set(&out));
        named_alone((code, &r, &err), &src, &out, &why);
    }
}

/// A restore killed partway leaves its files under temporary names, never a cut
/// file under a real name; the next restore into the same folder removes them,
/// with default options, and completes the tree. A name that only looks alike is
/// left alone.
#[test]
fn a_restore_run_again_removes_what_a_killed_one_left() {
    let t = tempfile::tempdir().unwrap();
    let (home, src, out) = (
        t.path().join("home"),
        t.path().join("src"),
        t.path().join("out"),
    );
    rich_tree(&src);
    write(&src.join("dir/sub/large.bin"), &noise(9, 1_808_917));
    let b = ok(&home, &["backup", src.to_str().unwrap()]);
    let job = b["job_id"].to_string();
    ok(&home, &["restore", &job, "--to", out.to_str().unwrap()]);
    assert_same_tree(&src, &out);
    // What a restore killed while writing leaves: the files it had not placed
    // absent, their temporary files cut short.
    for (rel, len) in [
        ("dir/sub/large.bin", 1_736_704),
        ("with space", 0),
        ("zero", 3),
    ] {
        let p = out.join(rel);
        std::fs::remove_file(&p).unwrap();
        let name = p.file_name().unwrap().as_bytes();
        // Left by a process that is gone (no process has so large an id).
        let temp = [b".", name, b".tapeloom-ffffff0000000007"].concat();
        write(&p.with_file_name(OsStr::from_bytes(&temp)), &noise(4, len));
    }
    // Not a temporary name (too few digits): someone's file, kept.
    let lookalike = out.join("dir/.plain.txt.tapeloom-0000abcd");
    write(&lookalike, b"mine");
    let r = ok(&home, &["restore", &job, "--to", out.to_str().unwrap()]);
    assert_eq!(r["skipped_count"], 0, "{r}");
    assert_eq!(temporary_files(&out), std::slice::from_ref(&lookalike));
    // Taken away again, with the folder's time as the restore set it.
    std::fs::remove_file(&lookalike).unwrap();
    use std::os::unix::fs::MetadataExt;
    let d = std::fs::symlink_metadata(src.join("dir")).unwrap();
    set_times(&out.join("dir"), d.mtime(), d.mtime_nsec());
    assert_same_tree(&src, &out);
}

/// Unmounts a bind mount when dropped.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// A restore onto a file system that refuses writes: a fifo's failure and a
/// file's read alike, `create PATH: WHY (os error N)`.
#[test]
fn a_fifo_and_a_file_fail_in_the_same_words() {
    let t = tempfile::tempdir().unwrap();
    let (home, src, out) = (
        t.path().join("home"),
        t.path().join("src"),
        t.path().join("out"),
    );
    write(&src.join("big0.bin"), &noise(1, 400_000));
    write(&src.join("small.txt"), b"small");
    nix::unistd::mkfifo(
        &src.join("a.fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    let job = ok(&home, &["backup", src.to_str().unwrap()])["job_id"].to_string();
    std::fs::create_dir_all(&out).unwrap();
    let _mounted = if is_root() {
        let mount = |args: &[&str]| {
            std::process::Command::new("mount")
                .args(args)
                .arg(&out)
                .arg(&out)
                .status()
                .is_ok_and(|s| s.success())
        };
        if !mount(&["--bind"]) {
            need(Err("this root may not bind-mount a folder".to_string()));
            return;
        }
        let m = Mounted(out.clone());
        let ro = std::process::Command::new("mount")
            .args(["-o", "remount,bind,ro"])
            .arg(&out)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ro, "remount read-only");
        Some(m)
    } else {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o555)).unwrap();
        None
    };
    let (code, r, err) = run_restore(&home, &job, &out, &[]);
    assert_eq!(code, 1, "{r} {err}");
    let worded = |name: &str| {
        let p = out.join(name).display().to_string();
        let said = reasons(&r, name);
        assert_eq!(said.len(), 1, "{name}: {r}");
        let why = (said[0].strip_prefix(&format!("create {p}: ")))
            .unwrap_or_else(|| panic!("{name}: {}", said[0]))
            .to_string();
        assert!(
            why.ends_with(" (os error 30)") || why.ends_with(" (os error 13)"),
            "{why}"
        );
        why
    };
    let fifo = worded("a.fifo");
    assert_eq!(fifo, worded("big0.bin"));
    assert_eq!(fifo, worded("small.txt"));
}
