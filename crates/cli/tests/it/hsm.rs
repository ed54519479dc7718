//! Hierarchical storage through the binary: a managed folder's files migrate to
//! tape, are released to stubs of the same size and times with no block on
//! disk, and are recalled identical; a file in use or changed since its copy is
//! never released; the catalog and the files' records agree.

use crate::common::*;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// A managed folder of a few files of noise under `t`, and its home.
fn managed(t: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let home = t.join("home");
    let dir = t.join("m");
    library(&home, 1, 4, "256M");
    for i in 0..4u64 {
        write(
            &dir.join(format!("f{i}")),
            &noise(i, 100_000 * (i as usize + 1)),
        );
    }
    write(&dir.join("sub/small"), b"hello");
    std::fs::create_dir_all(dir.join("empty")).unwrap();
    let m = ok(&home, &["hsm", "manage", p(&dir)]);
    assert_eq!(m["pool"], "hsm", "{m}");
    (home, dir)
}

fn files_in(status: &serde_json::Value, state: &str) -> u64 {
    status["roots"][0]["files"][state].as_u64().unwrap()
}

#[test]
fn files_migrate_release_to_stubs_and_come_back_identical() {
    let t = tempfile::tempdir().unwrap();
    let (home, dir) = managed(t.path());
    let before: Vec<(String, Vec<u8>, std::fs::Metadata)> = ["f0", "f1", "f2", "f3", "sub/small"]
        .iter()
        .map(|n| {
            let f = dir.join(n);
            (
                n.to_string(),
                std::fs::read(&f).unwrap(),
                std::fs::metadata(&f).unwrap(),
            )
        })
        .collect();
    let s = ok(&home, &["hsm", "status"]);
    assert_eq!(files_in(&s, "resident"), 5, "{s}");

    let m = ok(&home, &["hsm", "migrate"]);
    assert_eq!(m["files"], 5, "{m}");
    assert_eq!(m["jobs"].as_array().unwrap().len(), 1, "{m}");
    let s = ok(&home, &["hsm", "status"]);
    assert_eq!(files_in(&s, "premigrated"), 5, "{s}");
    // Nothing is left to migrate.
    assert_eq!(ok(&home, &["hsm", "migrate"])["files"], 0);

    let r = ok(&home, &["hsm", "release"]);
    assert_eq!(r["files"], 5, "{r}");
    for (n, _, md) in &before {
        let now = std::fs::metadata(dir.join(n)).unwrap();
        assert_eq!(now.blocks(), 0, "{n} keeps blocks");
        assert_eq!(
            (
                now.len(),
                now.mode(),
                now.uid(),
                now.mtime(),
                now.mtime_nsec()
            ),
            (md.len(), md.mode(), md.uid(), md.mtime(), md.mtime_nsec()),
            "{n}"
        );
    }
    let s = ok(&home, &["hsm", "status", "--by-folder"]);
    assert_eq!(files_in(&s, "released"), 5, "{s}");
    assert_eq!(s["roots"][0]["disk_bytes"], 0, "{s}");
    assert_eq!(s["folders"].as_array().unwrap().len(), 2, "{s}");
    assert_eq!(ok(&home, &["hsm", "reconcile", "--check"])["clean"], true);

    // A rename keeps the stub and its copy.
    std::fs::rename(dir.join("f3"), dir.join("sub/f3")).unwrap();
    let (code, c, _) = run(
        &home,
        &["hsm".as_ref(), "reconcile".as_ref(), "--check".as_ref()],
    );
    assert_eq!((code, &c["clean"]), (1, &serde_json::json!(false)), "{c}");
    ok(&home, &["hsm", "reconcile"]);
    assert_eq!(ok(&home, &["hsm", "reconcile", "--check"])["clean"], true);

    let back = ok(&home, &["hsm", "recall", p(&dir)]);
    assert_eq!(back["files"], 5, "{back}");
    assert_eq!(back["mounts"], 1, "{back}");
    for (n, data, _) in &before {
        let at = if n == "f3" {
            "sub/f3".to_string()
        } else {
            n.clone()
        };
        assert_eq!(&std::fs::read(dir.join(&at)).unwrap(), data, "{at}");
    }
    let s = ok(&home, &["hsm", "status"]);
    assert_eq!(files_in(&s, "premigrated"), 5, "{s}");
}

#[test]
fn a_file_in_use_or_changed_since_its_copy_is_never_released() {
    let t = tempfile::tempdir().unwrap();
    let (home, dir) = managed(t.path());
    ok(&home, &["hsm", "migrate"]);
    let open = std::fs::File::open(dir.join("f0")).unwrap();
    std::fs::OpenOptions::new()
        .append(true)
        .open(dir.join("f1"))
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"more"))
        .unwrap();
    let r = ok(&home, &["hsm", "release"]);
    assert_eq!(r["files"], 3, "{r}");
    let kept = r["kept"].as_array().unwrap();
    assert!(
        kept.iter()
            .any(|k| k["path"].as_str().unwrap().ends_with("/f0") && k["why"] == "it is open"),
        "{r}"
    );
    assert!(std::fs::metadata(dir.join("f0")).unwrap().blocks() > 0);
    drop(open);
    // The changed file is dirty, never released, and migrates again.
    let s = ok(&home, &["hsm", "status"]);
    assert_eq!(files_in(&s, "dirty"), 1, "{s}");
    assert!(std::fs::metadata(dir.join("f1")).unwrap().blocks() > 0);
    let m = ok(&home, &["hsm", "migrate"]);
    assert_eq!(m["files"], 1, "{m}");
    let r = ok(&home, &["hsm", "release"]);
    assert_eq!(r["files"], 2, "{r}");
    let back = ok(&home, &["hsm", "recall", p(&dir.join("f1"))]);
    assert_eq!(back["files"], 1, "{back}");
    let mut want = noise(1, 200_000);
    want.extend_from_slice(b"more");
    assert_eq!(std::fs::read(dir.join("f1")).unwrap(), want);
}

#[test]
fn a_path_outside_the_managed_folders_is_refused_in_one_line() {
    let t = tempfile::tempdir().unwrap();
    let (home, _dir) = managed(t.path());
    let (code, _, err) = run(
        &home,
        &["hsm".as_ref(), "migrate".as_ref(), t.path().as_os_str()],
    );
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("is in no managed folder"), "{err}");
}
