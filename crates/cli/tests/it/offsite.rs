//! Cartridges leave the library through its mail slots and come back
//! (`library export`, `library import`): a restore that needs an exported
//! cartridge says which to bring back, in one line; writers never choose one.

use crate::common::*;
use std::ffi::OsStr;

/// `args` refused with a one-line error naming all of `words`.
fn refused(home: &std::path::Path, args: &[&str], words: &[&str]) {
    let args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    let (code, _, err) = run(home, &args);
    assert_one_line_error(code, &err, words);
}

#[test]
fn an_exported_cartridge_is_named_by_the_restore_that_needs_it_and_reads_again_once_imported() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let lib = ["library", "create", "--drives", "1", "--slots", "3"];
    ok(
        &home,
        &[&lib[..], &["--capacity", "64M", "--mail-slots", "2"]].concat(),
    );
    let inv = ok(&home, &["library", "inventory"]);
    let mail = inv["import_export"].as_array().unwrap();
    assert_eq!(mail.len(), 2, "{inv}");
    assert!(mail.iter().all(|m| m["barcode"].is_null()), "{inv}");

    let src = t.path().join("src");
    rich_tree(&src);
    let b = ok(&home, &["backup", src.to_str().unwrap()]);
    let job = b["job_id"].to_string();
    let tape = b["volumes"][0].as_str().unwrap().to_string();

    let e = ok(&home, &["library", "export", &tape]);
    assert_eq!(e["cartridges"][0]["barcode"], tape.as_str(), "{e}");
    let slot = e["cartridges"][0]["slot"].as_u64().unwrap();
    let inv = ok(&home, &["library", "inventory"]);
    let held: Vec<&serde_json::Value> = (inv["import_export"].as_array().unwrap().iter())
        .filter(|m| m["barcode"] == tape.as_str())
        .collect();
    assert_eq!(held.len(), 1, "{inv}");
    assert_eq!(held[0]["address"].as_u64(), Some(slot), "{inv}");
    let s = ok(&home, &["library", "status"]);
    assert_eq!(s["offsite"][0]["barcode"], tape.as_str(), "{s}");
    assert_eq!(s["offsite"][0]["mail_slot"].as_u64(), Some(slot), "{s}");

    // The restore names the cartridge and how to bring it back, and moves nothing.
    let out = t.path().join("out");
    let restore = ["restore", &job, "--to", out.to_str().unwrap()];
    refused(&home, &restore, &[&tape, "mail slot", "library import"]);
    // Writers never choose it: the next backup goes to another cartridge.
    let b2 = ok(&home, &["backup", src.to_str().unwrap()]);
    assert_ne!(b2["volumes"][0], tape.as_str(), "{b2}");

    // Importing what is in no mail slot, or exporting past the mail slots, is
    // refused in one line.
    let other = b2["volumes"][0].as_str().unwrap().to_string();
    refused(
        &home,
        &["library", "import", &other],
        &[&other, "no mail slot"],
    );

    let i = ok(&home, &["library", "import"]);
    assert_eq!(i["cartridges"][0]["barcode"], tape.as_str(), "{i}");
    let inv = ok(&home, &["library", "inventory"]);
    assert!(
        inv["import_export"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["barcode"].is_null()),
        "{inv}"
    );
    let s = ok(&home, &["library", "status"]);
    assert_eq!(s["offsite"].as_array().map(Vec::len), Some(0), "{s}");
    ok(&home, &restore);
    assert_same_tree(&src, &out);

    let all: Vec<String> = (1..=3).map(|i| format!("TL{i:04}L9")).collect();
    let mut args = vec!["library", "export"];
    args.extend(all.iter().map(String::as_str));
    refused(&home, &args, &["TL0003L9", "no empty mail slot"]);
}
