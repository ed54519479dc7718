//! The generator source (`gen:PRESET:SIZE[:SEED]`) and the library that keeps no
//! payload (`library create --payload none`), the two parts of experiments at
//! full scale.

use crate::common::*;
use std::os::unix::fs::MetadataExt;

#[test]
fn a_generator_source_backs_up_the_tree_that_gen_writes() {
    let t = tempfile::tempdir().unwrap();
    let (home, gen, out) = (
        t.path().join("home"),
        t.path().join("gen"),
        t.path().join("out"),
    );
    library(&home, 1, 2, "1G");
    let b = ok(&home, &["backup", "gen:hp-typical:200M:7"]);
    assert_eq!(b["status"], "ok", "{b}");
    assert_eq!(b["source_files_opened"], 0, "{b}");
    let g = ok(
        &home,
        &[
            "gen",
            "--preset",
            "hp-typical",
            "--total",
            "200M",
            "--seed",
            "7",
            gen.to_str().unwrap(),
        ],
    );
    assert_eq!(b["bytes"], g["bytes"], "{b} {g}");
    let job = b["job_id"].to_string();
    restores_identical(&home, &job, &gen, &out);
    // Another seed makes other bytes.
    let b2 = ok(&home, &["backup", "gen:hp-typical:200M:8"]);
    let out2 = t.path().join("out2");
    ok(
        &home,
        &[
            "restore",
            &b2["job_id"].to_string(),
            "--to",
            out2.to_str().unwrap(),
        ],
    );
    let name = std::fs::read_dir(&out2)
        .unwrap()
        .filter_map(|e| e.ok())
        .find(|e| e.path().is_file())
        .unwrap()
        .file_name();
    assert_ne!(
        std::fs::read(out.join(&name)).unwrap(),
        std::fs::read(out2.join(&name)).unwrap()
    );
}

#[test]
fn a_generator_source_that_cannot_be_read_is_one_line() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    library(&home, 1, 2, "1G");
    for (spec, words) in [
        ("gen:bogus:1G", &["gen:bogus:1G", "bogus"][..]),
        ("gen:hp-typical", &["names no size"][..]),
        ("gen:hp-typical:lots", &["lots"][..]),
        ("gen:hp-typical:1G:x", &["seed 'x'"][..]),
    ] {
        let (code, _, err) = run(&home, &["backup".as_ref(), spec.as_ref()]);
        assert_one_line_error(code, &err, words);
    }
}

#[test]
fn a_library_without_payload_keeps_headers_only_and_makes_generated_blocks_again() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let made = ok(
        &home,
        &[
            "library",
            "create",
            "--drives",
            "1",
            "--slots",
            "2",
            "--capacity",
            "4G",
            "--payload",
            "none",
        ],
    );
    assert_eq!(made["payload"], "none", "{made}");
    let b = ok(&home, &["backup", "gen:hp-typical:512M"]);
    assert_eq!(b["status"], "ok", "{b}");
    let bytes = b["bytes"].as_u64().unwrap();
    assert!(bytes > 400 << 20, "{b}");
    // A second job appends after the first: the cartridge's end is where its
    // index says.
    let b2 = ok(&home, &["backup", "gen:small-files:16M:5"]);
    assert_eq!(b2["volumes"], b["volumes"], "{b2}");
    let data = home.join("library/tapes/TL0001L9.data");
    let m = std::fs::metadata(&data).unwrap();
    assert!(m.len() > bytes, "the data file is {} bytes long", m.len());
    let on_disk = m.blocks() * 512;
    assert!(
        on_disk < bytes / 16,
        "{on_disk} bytes on disk for {bytes} bytes written"
    );
    let jobs = ok(&home, &["jobs"]);
    assert_eq!(jobs["jobs"].as_array().map(|j| j.len()), Some(2), "{jobs}");
    // The generator's blocks are made again as they are read: the job verifies
    // and restores as `gen` writes the tree.
    let v = ok(&home, &["verify", &b["job_id"].to_string()]);
    assert_eq!(v["ok"], true, "{v}");
    assert!(v["blocks_checked"].as_u64().unwrap() > 1000, "{v}");
    let gen = t.path().join("gen");
    ok(
        &home,
        &[
            "gen",
            "--preset",
            "small-files",
            "--total",
            "16M",
            "--seed",
            "5",
            gen.to_str().unwrap(),
        ],
    );
    restores_identical(
        &home,
        &b2["job_id"].to_string(),
        &gen,
        &t.path().join("out2"),
    );
    // Files from disk are not: their restore is refused in one line.
    let src = t.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("a"), vec![7u8; 300_000]).unwrap();
    let b3 = ok(&home, &["backup", src.to_str().unwrap()]);
    let out = t.path().join("out");
    let job = b3["job_id"].to_string();
    let (code, _, err) = run(
        &home,
        &[
            "restore".as_ref(),
            job.as_ref(),
            "--to".as_ref(),
            out.as_os_str(),
        ],
    );
    assert_one_line_error(code, &err, &["keeps no payload", "TL0001L9"]);
}

#[test]
fn a_clients_generator_source_is_held_to_its_rate() {
    use crate::common::server_kit::{home_with_clients, Server};
    let (_t, home, alice, _) = home_with_clients();
    let s = Server::start(&home, None);
    // 16 MiB at 4 MB/s: about 4 s. Without the rate the client sends it in a
    // fraction of a second.
    let t0 = std::time::Instant::now();
    let doc = s.json(&alice, &["backup", "gen:hp-typical:16M:3@4MB"]);
    let secs = t0.elapsed().as_secs_f64();
    assert_eq!(doc["status"], "ok", "{doc}");
    let bytes = doc["bytes"].as_f64().unwrap();
    assert!(bytes > 15e6, "{doc}");
    assert!(secs >= 0.8 * bytes / 4e6, "{bytes} bytes in {secs:.2} s");
}

#[test]
fn a_job_of_two_drives_on_a_library_without_payload_restores_as_gen_writes_it() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    library_with(&home, 2, 4, "4G", &["--payload", "none"]);
    let b = ok(
        &home,
        &[
            "backup",
            "--drives",
            "2",
            "--stream",
            "a=gen:small-files:16M:5",
            "--stream",
            "b=gen:hp-typical:24M:6",
        ],
    );
    assert_eq!(b["status"], "ok", "{b}");
    // Each drive wrote one stream to a cartridge of its own: the second
    // cartridge opens with the job's continuation, then the second stream.
    assert_eq!(b["volumes"].as_array().map(|v| v.len()), Some(2), "{b}");
    let job = b["job_id"].to_string();
    let v = ok(&home, &["verify", &job]);
    assert_eq!(v["ok"], true, "{v}");
    let gen = t.path().join("gen");
    for (dir, preset, total, seed) in [
        ("a", "small-files", "16M", "5"),
        ("b", "hp-typical", "24M", "6"),
    ] {
        let to = gen.join(dir);
        ok(
            &home,
            &[
                "gen",
                "--preset",
                preset,
                "--total",
                total,
                "--seed",
                seed,
                to.to_str().unwrap(),
            ],
        );
    }
    // The job's root is made up by the restore; each stream's tree is as `gen`
    // writes it.
    let out = t.path().join("out");
    ok(&home, &["restore", &job, "--to", out.to_str().unwrap()]);
    for dir in ["a", "b"] {
        assert_same_tree(&gen.join(dir), &out.join(dir));
    }
}
