//! A virtual cartridge whose index file is missing or damaged: no command that only
//! reads changes its data, and the index is rebuilt from the data so that the job
//! verifies and restores as before.

use crate::common::*;
use std::ffi::OsStr;
use std::path::Path;

/// Damages the index file `raw` (16 bytes an object) the way `what` says.
fn damage(what: &str, raw: &mut Vec<u8>) {
    let n = raw.len() / 16;
    // The last object is the job's closing filemark; the one before, its last block.
    let last_block = n - 2;
    let field = |raw: &mut Vec<u8>, i: usize, at: usize, len: usize| -> u64 {
        let mut v = [0u8; 8];
        v[..len].copy_from_slice(&raw[i * 16 + at..i * 16 + at + len]);
        u64::from_le_bytes(v)
    };
    let set = |raw: &mut Vec<u8>, i: usize, at: usize, len: usize, v: u64| {
        raw[i * 16 + at..i * 16 + at + len].copy_from_slice(&v.to_le_bytes()[..len])
    };
    match what {
        "missing" | "empty" => raw.clear(),
        "short" => raw.truncate(raw.len() - 16 - 5),
        "a bad entry" => set(raw, 3, 12, 4, 7),
        "offsets past the data" => {
            for i in 4..n {
                let o = field(raw, i, 0, 8);
                set(raw, i, 0, 8, o + (1 << 32));
            }
        }
        "the last length one more" | "the last length one less" => {
            let len = field(raw, last_block, 8, 4);
            let len = if what.ends_with("more") {
                len + 1
            } else {
                len - 1
            };
            set(raw, last_block, 8, 4, len);
        }
        "a middle length one more" => {
            let len = field(raw, 3, 8, 4);
            set(raw, 3, 8, 4, len + 1);
        }
        _ => unreachable!("{what}"),
    }
}

#[test]
fn reads_never_change_a_cartridge_whose_index_is_damaged() {
    let t = tempfile::tempdir().unwrap();
    let (base, src) = (t.path().join("base"), t.path().join("src"));
    write(&src.join("big.bin"), &noise(1, 3_000_000));
    write(&src.join("small.txt"), b"small");
    write(&src.join("dir/middle.bin"), &noise(2, 700_000));
    // Small blocks, so the job has many of them.
    let b = ok(
        &base,
        &["backup", src.to_str().unwrap(), "--block-size", "64K"],
    );
    assert_eq!(b["status"], "ok", "{b}");
    let tapes = |home: &Path| home.join("library/tapes");
    let good_idx = std::fs::read(tapes(&base).join("TL0001L9.idx")).unwrap();
    let data = std::fs::read(tapes(&base).join("TL0001L9.data")).unwrap();
    assert!(good_idx.len() / 16 > 10, "{} objects", good_idx.len() / 16);
    let damages = [
        "missing",
        "empty",
        "short",
        "a bad entry",
        "offsets past the data",
        "the last length one more",
        "the last length one less",
        "a middle length one more",
    ];
    let commands: [&[&str]; 4] = [
        &["verify", "1"],
        &["restore", "1", "--to", "OUT"],
        &["ls", "1"],
        &["catalog", "rebuild"],
    ];
    for what in damages {
        for cmd in commands {
            let home = t.path().join("home");
            let _ = std::fs::remove_dir_all(&home);
            copy_tree(&base, &home);
            let idx = tapes(&home).join("TL0001L9.idx");
            if what == "missing" {
                std::fs::remove_file(&idx).unwrap();
            } else {
                let mut raw = good_idx.clone();
                damage(what, &mut raw);
                std::fs::write(&idx, &raw).unwrap();
            }
            if cmd[0] == "catalog" {
                forget_catalog(&home);
            }
            let out = t.path().join("out");
            let _ = std::fs::remove_dir_all(&out);
            let args: Vec<&OsStr> = cmd
                .iter()
                .map(|a| match *a {
                    "OUT" => out.as_os_str(),
                    a => OsStr::new(a),
                })
                .collect();
            let (code, v, err) = run(&home, &args);
            let after = std::fs::read(tapes(&home).join("TL0001L9.data")).unwrap();
            assert!(
                after == data,
                "{what}, {cmd:?}: the data file changed ({} of {} bytes); exit {code}: {err}",
                after.len(),
                data.len()
            );
            // Each command did its work on the index rebuilt from the data, which is
            // the index as it was written (ls reads only the catalog).
            assert_eq!(code, 0, "{what}, {cmd:?}: {err} {v}");
            if cmd[0] != "ls" {
                assert!(std::fs::read(&idx).unwrap() == good_idx, "{what}, {cmd:?}");
            }
            if cmd[0] == "restore" {
                assert_same_tree(&src, &out);
            }
            if cmd[0] == "catalog" {
                assert_eq!(v["jobs_added"].as_array().map(|a| a.len()), Some(1), "{v}");
                let _ = std::fs::remove_dir_all(&out);
                restores_identical(&home, "1", &src, &out);
                assert_eq!(ok(&home, &["verify", "1"])["ok"], true);
            }
        }
    }
}
