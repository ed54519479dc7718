//! Critical TapeAlert flags raised with `TAPELOOM_FAULTS` (`alert=CODE@lbn=N`,
//! docs/FAULTS.md), through the binary: a cartridge flag leaves the cartridge
//! suspect, a cleaning flag has the drive cleaned with a CLN cartridge, a drive flag
//! stops the drive; and `library clean`.

use crate::common::*;
use std::path::Path;

/// Twenty-four files of 2 MB: about 190 blocks, so the writer looks at the flags
/// (every 64 blocks) a few times.
fn source(dir: &Path) {
    for i in 0..24 {
        write(&dir.join(format!("f{i:02}")), &noise(i, 2_000_000));
    }
}

/// A home whose library has one cleaning cartridge.
fn home_with_cleaning(dir: &Path) -> std::path::PathBuf {
    let home = dir.join("home");
    ok(
        &home,
        &[
            "library",
            "create",
            "--drives",
            "2",
            "--slots",
            "6",
            "--cleaning",
            "1",
        ],
    );
    home
}

#[test]
fn a_cartridge_alert_leaves_the_cartridge_suspect_and_the_job_goes_on() {
    if !test_hooks() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let (home, src) = (t.path().join("home"), t.path().join("src"));
    source(&src);
    let (code, b, err) = run_with(
        &home,
        "alert=04h@lbn=10",
        &["backup", src.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(b["status"], "ok", "{b}");
    assert_eq!(
        b["volumes"],
        serde_json::json!(["TL0001L9", "TL0002L9"]),
        "{b}"
    );
    assert!(
        err.contains("TL0001L9: TapeAlert 04h Media: marked suspect"),
        "{err}"
    );
    let c = cartridge(&home, "TL0001L9");
    assert_eq!(c["state"], "suspect", "{c}");
    let note = c["notes"][0].as_str().unwrap_or_default();
    assert!(
        note.starts_with("suspect: TapeAlert 04h Media at block "),
        "{c}"
    );
    // The flag is in the job's report of the mount, too.
    let alerts = b["drives"].to_string();
    assert!(alerts.contains("04h Media"), "{b}");
    let job = b["job_id"].to_string();
    assert_eq!(ok(&home, &["verify", &job])["ok"], true);
    restores_identical(&home, &job, &src, &t.path().join("out"));
    restores_identical_from_tapes_alone(&home, &job, &src, &t.path().join("again"));
}

#[test]
fn a_drive_asking_to_be_cleaned_is_cleaned_and_the_job_goes_on() {
    if !test_hooks() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let home = home_with_cleaning(t.path());
    let src = t.path().join("src");
    source(&src);
    let (code, b, err) = run_with(
        &home,
        "alert=14h@lbn=10",
        &["backup", src.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(b["status"], "ok", "{b}");
    assert!(
        err.contains("TapeAlert 14h Clean now: cleaned with CLN001L1; 49 cleanings left"),
        "{err}"
    );
    // The job went on on the next cartridge; the first stays appendable.
    let vols = b["volumes"].as_array().unwrap();
    assert_eq!(vols.len(), 2, "{b}");
    assert!(!vols.contains(&"CLN001L1".into()), "{b}");
    assert_eq!(cartridge(&home, "TL0001L9")["state"], "append");
    let cln = cartridge(&home, "CLN001L1");
    assert_eq!(
        (cln["state"].as_str(), cln["jobs"].as_u64()),
        (Some("cleaning"), Some(0)),
        "{cln}"
    );
    assert!(
        cln["location"].as_str().unwrap().starts_with("slot"),
        "{cln}"
    );
    let job = b["job_id"].to_string();
    restores_identical(&home, &job, &src, &t.path().join("out"));
    // By hand, with a cartridge in the drive: it goes back first.
    ok(&home, &["library", "load", "TL0003L9", "--drive", "1"]);
    let c = ok(&home, &["library", "clean", "1"]);
    assert_eq!(c["put_back"], "TL0003L9", "{c}");
    assert_eq!(
        (
            c["barcode"].as_str(),
            c["uses"].as_u64(),
            c["uses_left"].as_u64()
        ),
        (Some("CLN001L1"), Some(2), Some(48)),
        "{c}"
    );
}

#[test]
fn a_drive_asking_to_be_cleaned_without_a_cleaning_cartridge_fails_with_one_line() {
    if !test_hooks() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let (home, src) = (t.path().join("home"), t.path().join("src"));
    source(&src);
    let (code, _, err) = run_with(
        &home,
        "alert=14h@lbn=10",
        &["backup", src.to_str().unwrap()],
    );
    assert_ne!(code, 0);
    assert_eq!(err.lines().count(), 1, "{err}");
    for w in [
        "drive 0 asks to be cleaned",
        "14h Clean now",
        "no cleaning cartridge",
    ] {
        assert!(err.contains(w), "{w:?} not in {err}");
    }
    // What was written before is on record and checks; the cartridge is not blamed.
    assert_eq!(cartridge(&home, "TL0001L9")["state"], "append");
    let check = ok(&home, &["catalog", "check"]);
    assert_eq!(check["problems"], serde_json::json!([]), "{check}");
    let (code, _, err) = run(&home, &["library".as_ref(), "clean".as_ref(), "0".as_ref()]);
    assert_ne!(code, 0);
    assert!(err.contains("no cleaning cartridge"), "{err}");
}

#[test]
fn a_drive_hardware_alert_stops_the_drive_with_one_line() {
    if !test_hooks() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let (home, src) = (t.path().join("home"), t.path().join("src"));
    source(&src);
    let (code, _, err) = run_with(
        &home,
        "alert=1Eh@lbn=10",
        &["backup", src.to_str().unwrap()],
    );
    assert_ne!(code, 0);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("drive 0: TapeAlert 1Eh Hardware A"), "{err}");
    let jobs = ok(&home, &["jobs"]);
    assert_eq!(jobs["jobs"][0]["status"], "failed", "{jobs}");
    // The cartridge is fine and back in its slot; the next job on a sound drive
    // works.
    let c = cartridge(&home, "TL0001L9");
    assert_eq!(c["state"], "append", "{c}");
    assert!(c["location"].as_str().unwrap().starts_with("slot"), "{c}");
    let b = ok(&home, &["backup", src.to_str().unwrap()]);
    assert_eq!(b["status"], "ok", "{b}");
    let check = ok(&home, &["catalog", "check"]);
    assert_eq!(check["problems"], serde_json::json!([]), "{check}");
}
