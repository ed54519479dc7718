//! A job whose start record cannot be used is salvaged by `catalog rebuild`: the
//! rebuild says so in one line and exits 1, and adds the job from its blocks
//! alone (`salvaged`), whose files restore identical. Its index is used when
//! stream 0 still holds it; else its files are read from its data streams.

use crate::common::*;
use crate::rebuild_streams::reseal;
use std::ffi::OsStr;

/// Where the job's first block begins on its cartridge: after the 1024-byte label
/// (and the filemark, which takes no bytes). Its payload begins with the
/// `JobStart` record: a 16-byte header, then the body.
const FIRST_BLOCK: usize = 1024;
const RECORD: usize = FIRST_BLOCK + 64;
const BODY: usize = RECORD + 16;

#[test]
fn a_job_whose_start_is_unusable_is_salvaged_and_its_files_restore_identical() {
    let t = tempfile::tempdir().unwrap();
    let (base, src) = (t.path().join("base"), t.path().join("src"));
    source_tree(&src);
    let b = ok(
        &base,
        &["backup", src.to_str().unwrap(), "--block-size", "64K"],
    );
    let files = b["files"].as_u64().unwrap();
    let data = std::fs::read(base.join("library/tapes/TL0001L9.data")).unwrap();
    // The damage, and where the salvaged job's files come from: the body's
    // block size makes the record unusable and leaves the index after it
    // readable; a reserved bit of the record's header hides every record of
    // stream 0, so the files are read from the data streams.
    let cases: [(&str, usize, &[u8], &str); 2] = [
        (
            "a block size of 4 GiB",
            BODY + 20,
            &u32::MAX.to_le_bytes(),
            "index",
        ),
        ("a reserved field set", RECORD + 2, &[1], "data streams"),
    ];
    for (what, at, bytes, from) in cases {
        let home = t.path().join("home");
        let _ = std::fs::remove_dir_all(&home);
        copy_tree(&base, &home);
        let mut d = data.clone();
        d[at..at + bytes.len()].copy_from_slice(bytes);
        reseal(&mut d[FIRST_BLOCK..FIRST_BLOCK + 65536]);
        std::fs::write(home.join("library/tapes/TL0001L9.data"), &d).unwrap();
        // Into a new catalog.
        forget_catalog(&home);
        let (code, v, err) = run(&home, &[OsStr::new("catalog"), OsStr::new("rebuild")]);
        assert_eq!(code, 1, "{what}: {err}");
        assert_one_line_error(code, &err, &["could not use", "salvaged", "job 1"]);
        assert_eq!(v["unusable"][0]["volume"], "TL0001L9", "{what}: {v}");
        assert_eq!(v["unusable"][0]["block"], 2, "{what}: {v}");
        assert_eq!(v["jobs_salvaged"], serde_json::json!([1]), "{what}: {v}");
        let jobs = ok(&home, &["jobs"]);
        let list = jobs["jobs"].as_array().unwrap();
        assert_eq!(list.len(), 1, "{what}: {jobs}");
        let job = &list[0];
        assert_eq!(job["status"], "salvaged", "{what}: {job}");
        assert_eq!(job["files"], files, "{what}: {job}");
        assert_eq!(job["block_size"], 65536, "{what}: {job}");
        let why = job["why"].as_str().unwrap_or_default();
        assert!(why.contains("TL0001L9 block 2"), "{what}: {why}");
        assert!(why.contains(from), "{what}: {why}");
        let (code, human, _) = run_human(&home, &[OsStr::new("jobs")], &[]);
        assert_eq!(code, 0);
        assert!(
            String::from_utf8_lossy(&human).contains("salvaged"),
            "{what}: {}",
            String::from_utf8_lossy(&human)
        );
        let out = t.path().join("out");
        let _ = std::fs::remove_dir_all(&out);
        restores_identical(&home, "1", &src, &out);
    }
}
