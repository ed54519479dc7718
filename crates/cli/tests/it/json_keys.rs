//! Every command's `--json` keeps its keys: each run's key paths (`drives[].bytes`)
//! must include those recorded in `tests/json-keys/` (new keys may be added).
//! `TAPELOOM_RECORD_JSON_KEYS=1 cargo test -p tapeloom --test it json_keys::` records
//! them anew.

use crate::common;
use crate::common::*;
use std::path::Path;

#[test]
fn every_commands_json_keeps_its_keys() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let mut missing = Vec::new();
    let mut c = |name: &str, args: &[&str]| {
        let v = ok(&home, args);
        check_keys(name, &v, &mut missing);
        v
    };

    // Tools that need no home.
    let gen = t.path().join("gen");
    c(
        "gen",
        &[
            "gen",
            &s(&gen),
            "--min",
            "4K",
            "--max",
            "64K",
            "--depth",
            "1",
            "--breadth",
            "2",
            "--files-per-dir",
            "2",
        ],
    );
    c("readrate", &["readrate", &s(&gen), "--model", "lto3"]);
    c("drive_models", &["drive", "models"]);
    c(
        "bench_locate",
        &[
            "bench", "locate", "--model", "lto3", "--from", "0", "--to", "10G",
        ],
    );
    c(
        "bench_drive",
        &[
            "bench",
            "drive",
            "--model",
            "lto3",
            "--block-sizes",
            "256K",
            "--size",
            "64M",
        ],
    );
    c("devices", &["devices"]);

    // A modeled library, so that modeled figures are numbers, not null.
    c(
        "library_create",
        &[
            "library",
            "create",
            "--drives",
            "2",
            "--slots",
            "4",
            "--capacity",
            "256M",
            "--model",
            "lto3",
            "--clock",
            "virtual",
            "--scale",
            "0.05",
        ],
    );
    let src = t.path().join("src");
    rich_tree(&src.join("a"));
    write(&src.join("b/data.bin"), &noise(7, 2_000_000));
    c(
        "backup",
        &[
            "backup",
            &s(&src.join("a")),
            &s(&src.join("b")),
            "--drives",
            "2",
            "--name",
            "keys",
        ],
    );
    c("jobs", &["jobs"]);
    c("server_token_add", &["server", "token", "add", "alice"]);
    c("server_token_list", &["server", "token", "list"]);
    c(
        "server_token_revoke",
        &["server", "token", "revoke", "alice"],
    );
    c("ls", &["ls", "1"]);
    let out = t.path().join("out");
    c("restore", &["restore", "1", "--to", &s(&out)]);
    let one = t.path().join("one");
    c(
        "restore_stream",
        &["restore", "1", "--to", &s(&one), "--stream", "b"],
    );
    c("verify", &["verify", "1"]);
    c(
        "report",
        &["report", "1", "--out", &s(&t.path().join("r.html"))],
    );
    c(
        "report_restore",
        &[
            "report",
            "1",
            "--op",
            "restore",
            "--out",
            &s(&t.path().join("r.svg")),
        ],
    );
    c("library_status", &["library", "status"]);
    c(
        "pool_create",
        &[
            "pool",
            "create",
            "keys",
            "--retention",
            "30d",
            "--max-jobs-per-volume",
            "2",
            "--cartridges",
            "TL0099L9",
        ],
    );
    c("pool_list", &["pool", "list"]);
    c("expire", &["expire", "--dry-run"]);
    let inv = c("library_inventory", &["library", "inventory"]);
    let slots = inv["slots"].as_array().unwrap();
    let home_slot = slots.iter().rfind(|x| x["barcode"].is_string()).unwrap();
    let blank = home_slot["barcode"].as_str().unwrap().to_string();
    let addr = home_slot["address"].to_string();
    c("library_protect", &["library", "protect", &blank]);
    ok(&home, &["library", "protect", "--off", &blank]);
    c("library_label", &["library", "label", &blank]);
    c("library_load", &["library", "load", &blank, "--drive", "0"]);
    c("library_unload", &["library", "unload"]);
    ok(&home, &["library", "load", &blank, "--drive", "0"]);
    c("library_move", &["library", "move", &blank, &addr]);
    c(
        "library_exercise",
        &["library", "exercise", "--cycles", "2"],
    );
    c(
        "bench_library_drive",
        &[
            "bench",
            "drive",
            "--drive",
            "0",
            "--block-sizes",
            "256K",
            "--size",
            "8M",
        ],
    );
    common::forget_catalog(&home);
    c("catalog_rebuild", &["catalog", "rebuild"]);
    c("catalog_check", &["catalog", "check"]);

    // A disk stage holding one chunk, so that status lists a stream.
    let stage = t.path().join("stage");
    c("stage_add", &["stage", "add", &s(&stage), "--size", "1G"]);
    let stage = stage.canonicalize().unwrap();
    common::stage_chunk(&home, &stage, 1, 0, 2);
    c("stage_list", &["stage", "list"]);
    c("stage_status", &["stage", "status"]);
    common::despool(&home, 1, 0);
    c("stage_remove", &["stage", "remove", &s(&stage)]);

    // Hierarchical storage.
    let managed = t.path().join("managed");
    write(&managed.join("a"), &noise(1, 10_000));
    c("hsm_manage", &["hsm", "manage", &s(&managed)]);
    c("hsm_migrate", &["hsm", "migrate"]);
    c(
        "hsm_release_marks",
        &["hsm", "release", "--high", "99%", "--low", "98%"],
    );
    c("hsm_release", &["hsm", "release"]);
    c("hsm_status", &["hsm", "status", "--by-folder"]);
    c("hsm_recall", &["hsm", "recall", &s(&managed)]);
    c("hsm_reconcile", &["hsm", "reconcile", "--check"]);
    assert!(
        missing.is_empty(),
        "keys gone from --json output:\n{}",
        missing.join("\n")
    );
}
