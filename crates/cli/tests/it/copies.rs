//! Further copies of jobs (`tapeloom copy`, docs/COPIES.md): written block for
//! block onto another pool's cartridges, read when the job's own cartridges are
//! away, forced with `restore --copy N`, and read a bad block from when the
//! job's own cartridge gives one.

use crate::common::*;
use std::ffi::OsStr;
use std::path::PathBuf;

/// `args` refused with a one-line error naming all of `words`.
fn refused(home: &std::path::Path, args: &[&str], words: &[&str]) {
    let args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    let (code, _, err) = run(home, &args);
    assert_one_line_error(code, &err, words);
}

/// A tree of a few MB: the rich tree and a file of noise.
fn tree(src: &std::path::Path, mb: usize) {
    rich_tree(src);
    write(&src.join("noise.bin"), &noise(7, mb << 20));
}

#[test]
fn a_copy_is_read_when_the_jobs_own_cartridge_is_away_and_gives_its_bad_blocks_back() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    library_with(&home, 2, 6, "64M", &["--mail-slots", "2"]);
    ok(&home, &["pool", "create", "main"]);
    ok(&home, &["pool", "create", "vault"]);
    let src = t.path().join("src");
    tree(&src, 2);
    let b = ok(
        &home,
        &["backup", p(&src), "--pool", "main", "--block-size", "64K"],
    );
    let job = b["job_id"].to_string();
    let tape = b["volumes"][0].as_str().unwrap().to_string();

    let c = ok(&home, &["copy", &job, "--to-pool", "vault"]);
    let copy = &c["copies"][0];
    assert_eq!(copy["copy_no"], 2, "{c}");
    assert_eq!(copy["pool"], "vault", "{c}");
    assert!(copy["blocks"].as_u64().unwrap() > 40, "{c}");
    let copy_tape = copy["cartridges"][0].as_str().unwrap().to_string();
    assert_ne!(copy_tape, tape, "{c}");
    // Its drives read and wrote at once.
    assert_ne!(copy["drives"][0], copy["drives"][1], "{c}");

    // `jobs` and `ls` show the copy.
    let jobs = ok(&home, &["jobs"]);
    let shown = &jobs["jobs"][0]["copies"][0];
    assert_eq!(shown["copy_no"], 2, "{jobs}");
    assert_eq!(shown["state"], "ok", "{jobs}");
    assert_eq!(shown["volumes"][0], copy_tape.as_str(), "{jobs}");
    let ls = ok(&home, &["ls", &job, "dir/sub/big.bin"]);
    let entry = &ls["entries"][0];
    assert_eq!(entry["copies"][0]["volume"], copy_tape.as_str(), "{ls}");
    assert!(entry["copies"][0]["block"].as_u64().unwrap() > 0, "{ls}");

    // Refusals, in one line each.
    refused(
        &home,
        &["copy", &job, "--to-pool", "main"],
        &[&job, "main", "another pool"],
    );
    refused(&home, &["copy", &job, "--to-pool", "nowhere"], &["nowhere"]);
    refused(
        &home,
        &[
            "restore",
            &job,
            "--copy",
            "9",
            "--to",
            p(&t.path().join("x")),
        ],
        &["copy 9"],
    );

    // Forced onto the copy.
    let out = t.path().join("forced");
    let r = ok(&home, &["restore", &job, "--copy", "2", "--to", p(&out)]);
    assert_eq!(r["copy"], 2, "{r}");
    assert_same_tree(&src, &out);

    // 20 blocks of the job's own cartridge unreadable: exactly those are read
    // from the copy.
    if test_hooks() {
        let spec: Vec<String> = (10..30)
            .map(|lbn| format!("read-error@lbn={lbn},barcode={tape}"))
            .collect();
        let out = t.path().join("fallback");
        let (code, r, err) = run_with(&home, &spec.join(";"), &["restore", &job, "--to", p(&out)]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(r["copy"], 1, "{r}");
        assert_eq!(r["from_other_copy"], 20, "{r}");
        assert_eq!(r["errors"].as_array().unwrap().len(), 0, "{r}");
        assert_same_tree(&src, &out);
    }

    // The job's own cartridge leaves the library: the copy is read, whole and
    // for one file.
    ok(&home, &["library", "export", &tape]);
    let out = t.path().join("away");
    let r = ok(&home, &["restore", &job, "--to", p(&out)]);
    assert_eq!(r["copy"], 2, "{r}");
    assert_same_tree(&src, &out);
    let one = t.path().join("one");
    let r = ok(
        &home,
        &["restore", &job, "dir/sub/big.bin", "--to", p(&one)],
    );
    assert_eq!(r["copy"], 2, "{r}");
    assert_eq!(
        std::fs::read(one.join("dir/sub/big.bin")).unwrap(),
        std::fs::read(src.join("dir/sub/big.bin")).unwrap()
    );
    // A restore of the job's set reads the copy too.
    let set = b["set"].as_str().unwrap().to_string();
    let out = t.path().join("set");
    let r = ok(&home, &["restore", "--set", &set, "--to", p(&out)]);
    assert_eq!(r["copy"], 2, "{r}");
    assert_same_tree(&src, &out);
    // Forced onto the copy that is away: refused in one line naming it.
    refused(
        &home,
        &[
            "restore",
            &job,
            "--copy",
            "1",
            "--to",
            p(&t.path().join("y")),
        ],
        &[&tape, "library import"],
    );
    // Back in the library: the import leaves free the slot of the copy's
    // cartridge, which is in a drive, and the job's own cartridge reads again.
    ok(&home, &["library", "import", &tape]);
    let out = t.path().join("back");
    let r = ok(&home, &["restore", &job, "--copy", "1", "--to", p(&out)]);
    assert_eq!(r["copy"], 1, "{r}");
    assert_same_tree(&src, &out);
}

#[test]
fn a_copy_with_one_drive_goes_through_a_spool_and_spans_cartridges_with_its_filemarks() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    library(&home, 1, 6, "4M");
    ok(&home, &["pool", "create", "main"]);
    ok(&home, &["pool", "create", "vault"]);
    let src = t.path().join("src");
    tree(&src, 3);
    let b = ok(
        &home,
        &[
            "backup",
            p(&src),
            "--pool",
            "main",
            "--block-size",
            "64K",
            "--segment-size",
            "512K",
        ],
    );
    let job = b["job_id"].to_string();
    assert!(b["volumes"].as_array().unwrap().len() >= 2, "{b}");

    let c = ok(
        &home,
        &["copy", "--pool", "main", "--uncopied", "--to-pool", "vault"],
    );
    let copy = &c["copies"][0];
    assert_eq!(copy["job_id"].to_string(), job, "{c}");
    assert!(copy["spool_peak_bytes"].as_u64().unwrap() > 64 << 10, "{c}");
    assert!(copy["filemarks"].as_u64().unwrap() > 0, "{c}");
    assert!(copy["cartridges"].as_array().unwrap().len() >= 2, "{c}");
    assert_eq!(copy["drives"][0], copy["drives"][1], "{c}");
    // Copied once: --uncopied leaves it alone now.
    let again = ok(
        &home,
        &["copy", "--pool", "main", "--uncopied", "--to-pool", "vault"],
    );
    assert_eq!(again["copies"].as_array().unwrap().len(), 0, "{again}");
    assert_eq!(again["skipped"][0].to_string(), job, "{again}");
    // No spool file is left in the home.
    let left: Vec<_> = std::fs::read_dir(&home)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("copy-spool"))
        .collect();
    assert!(left.is_empty());

    let out = t.path().join("out");
    let r = ok(&home, &["restore", &job, "--copy", "2", "--to", p(&out)]);
    assert_eq!(r["copy"], 2, "{r}");
    assert_same_tree(&src, &out);
    let out = t.path().join("own");
    let r = ok(&home, &["restore", &job, "--to", p(&out)]);
    assert_eq!(r["copy"], 1, "{r}");
    assert_same_tree(&src, &out);

    // The catalog rebuilt from the tapes alone knows the copy, on the same
    // cartridges, and reads it.
    let before = ok(&home, &["jobs"])["jobs"][0]["copies"].clone();
    forget_catalog(&home);
    let rebuilt = ok(&home, &["catalog", "rebuild"]);
    assert_eq!(rebuilt["copies_added"][0]["copy_no"], 2, "{rebuilt}");
    assert_eq!(
        rebuilt["unusable"].as_array().unwrap().len(),
        0,
        "{rebuilt}"
    );
    let after = ok(&home, &["jobs"])["jobs"][0]["copies"].clone();
    assert_eq!(after[0]["volumes"], before[0]["volumes"], "{after}");
    assert_eq!(after[0]["state"], "ok", "{after}");
    let out = t.path().join("rebuilt");
    let r = ok(&home, &["restore", &job, "--copy", "2", "--to", p(&out)]);
    assert_eq!(r["copy"], 2, "{r}");
    assert_same_tree(&src, &out);

    // A read-back of the copy reads its cartridges.
    let v = ok(&home, &["verify", &job, "--copy", "2"]);
    assert_eq!(v["ok"], true, "{v}");
    let jobs = ok(&home, &["jobs"]);
    assert_eq!(
        jobs["jobs"][0]["last_verified"]["how"], "verify --copy 2",
        "{jobs}"
    );
    refused(&home, &["verify", &job, "--copy", "3"], &["copy 3"]);

    // One drive: each bad block's copy takes the drive for its read, and the
    // job's own cartridge comes back after it.
    if test_hooks() {
        let tape = b["volumes"][0].as_str().unwrap();
        let spec = format!("read-error@lbn=12,barcode={tape};read-error@lbn=30,barcode={tape}");
        let out = t.path().join("fallback");
        let (code, r, err) = run_with(&home, &spec, &["restore", &job, "--to", p(&out)]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(r["from_other_copy"], 2, "{r}");
        assert_same_tree(&src, &out);
    }
}

#[test]
fn a_pool_that_names_a_copy_pool_has_each_job_copied_once_it_ends() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    library(&home, 2, 4, "64M");
    refused(
        &home,
        &["pool", "create", "main", "--copy-to", "vault"],
        &["vault", "pool create vault"],
    );
    ok(&home, &["pool", "create", "vault"]);
    let pool = ok(&home, &["pool", "create", "main", "--copy-to", "vault"]);
    assert_eq!(pool["copy_to"], "vault", "{pool}");
    let src = t.path().join("src");
    rich_tree(&src);
    let b = ok(&home, &["backup", p(&src), "--pool", "main"]);
    assert_eq!(b["copy"]["copy_no"], 2, "{b}");
    assert_eq!(b["copy"]["pool"], "vault", "{b}");
    let job = b["job_id"].to_string();
    let jobs = ok(&home, &["jobs"]);
    assert_eq!(jobs["jobs"][0]["copies"][0]["state"], "ok", "{jobs}");
    let out = t.path().join("out");
    let r = ok(&home, &["restore", &job, "--copy", "2", "--to", p(&out)]);
    assert_eq!(r["copy"], 2, "{r}");
    assert_same_tree(&src, &out);
}

#[test]
fn a_clients_job_in_a_pool_with_a_copy_pool_is_copied_by_the_server_as_a_queued_job() {
    use crate::common::server_kit::{admin_token, home_with_clients, Server};
    let (t, home, alice, _bob) = home_with_clients();
    let admin = admin_token(&home, "admin");
    ok(&home, &["pool", "create", "vault"]);
    ok(&home, &["pool", "create", "main", "--copy-to", "vault"]);
    let src = t.path().join("src");
    tree(&src, 1);
    let s = Server::start(&home, None);
    let doc = s.json(&alice, &["backup", p(&src), "--pool", "main"]);
    assert_eq!(doc["status"], "ok", "{doc}");
    let job = doc["job_id"].as_i64().unwrap();
    // The copy is a job of the server's queue, for the job's client: it ends
    // with the copy whole in the catalog.
    let name = format!("copy of job {job}");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let (entry, state) = loop {
        let q = s.json(&admin, &["queue"]);
        let done = (q["recent"].as_array().unwrap().iter()).find(|e| e["name"] == name.as_str());
        let query = format!("SELECT state FROM job_copies WHERE job_id = {job} AND copy_no = 2");
        let state: Option<String> = sql(&home, &query).first().and_then(|r| r[0].clone());
        if let Some(e) = done {
            break (e.clone(), state);
        }
        assert!(std::time::Instant::now() < until, "no copy ended: {q}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert_eq!(entry["state"], "ended", "{entry}");
    assert_eq!(entry["client"], "alice", "{entry}");
    assert_eq!(state.as_deref(), Some("ok"));
    drop(s);
    let out = t.path().join("out");
    let r = ok(
        &home,
        &["restore", &job.to_string(), "--copy", "2", "--to", p(&out)],
    );
    assert_eq!(r["copy"], 2, "{r}");
    assert_same_tree(&src, &out);
}

/// What happens to a job's own cartridge before a restore that must then read
/// the job's copy.
#[derive(Debug, Clone, Copy)]
enum Damage {
    /// Taken out of the library through a mail slot.
    Removed,
    /// Erased: the library shows a cartridge with no data.
    Blank,
    /// Holding another cartridge's data (another label).
    Foreign,
    /// Its load fails (a fault plan).
    LoadFails,
}

/// A job of pool `main`, copied to `vault`, on a library of two drives, six
/// slots and a mail slot, its cartridges unloaded: (home, its source, the job,
/// its own cartridge, its copy's cartridge).
fn copied_job(t: &std::path::Path) -> (PathBuf, PathBuf, String, String, String) {
    let home = t.join("home");
    library_with(&home, 2, 6, "64M", &["--mail-slots", "1"]);
    ok(&home, &["pool", "create", "vault"]);
    ok(&home, &["pool", "create", "main", "--copy-to", "vault"]);
    let src = t.join("src");
    tree(&src, 1);
    let b = ok(&home, &["backup", p(&src), "--pool", "main"]);
    let job = b["job_id"].to_string();
    let own = b["volumes"][0].as_str().unwrap().to_string();
    let copy = b["copy"]["cartridges"][0].as_str().unwrap().to_string();
    ok(&home, &["library", "unload"]);
    (home, src, job, own, copy)
}

/// A job in pool `main` copied to `vault`, its own cartridge then damaged as
/// `how`; the restore reads copy 2, identical, and its JSON names the
/// cartridge passed over and why.
fn restore_past(how: Damage) {
    let t = tempfile::tempdir().unwrap();
    let (home, src, job, own, _) = copied_job(t.path());
    let other = t.path().join("other");
    write(&other.join("x"), b"another job on another cartridge");
    let tapes = home.join("library/tapes");
    let files = |b: &str| [format!("{b}.data"), format!("{b}.idx")];
    let mut env = Vec::new();
    let why = match how {
        Damage::Removed => {
            ok(&home, &["library", "export", &own]);
            "not in the library"
        }
        Damage::Blank => {
            for f in files(&own) {
                std::fs::remove_file(tapes.join(f)).unwrap();
            }
            "does not carry the label"
        }
        Damage::Foreign => {
            let o = ok(&home, &["backup", p(&other)]);
            let theirs = o["volumes"][0].as_str().unwrap().to_string();
            assert_ne!(theirs, own);
            ok(&home, &["library", "unload"]);
            for (from, to) in files(&theirs).iter().zip(files(&own)) {
                std::fs::copy(tapes.join(from), tapes.join(to)).unwrap();
            }
            "does not carry the label"
        }
        Damage::LoadFails => {
            env.push(("TAPELOOM_FAULTS", "move-fail@n=1"));
            "mechanical positioning error"
        }
    };
    let out = t.path().join("out");
    let r = ok_env(&home, &env, &["restore", &job, "--to", p(&out)]);
    assert_eq!(r["copy"], 2, "{how:?}: {r}");
    assert_same_tree(&src, &out);
    let passed = &r["passed_over"][0];
    assert_eq!(passed["barcode"], own.as_str(), "{how:?}: {r}");
    let said = passed["why"].as_str().unwrap();
    assert!(said.contains(why), "{how:?}: {said}");
}

#[test]
fn a_restore_reads_the_copy_past_a_removed_cartridge() {
    restore_past(Damage::Removed);
}

#[test]
fn a_restore_reads_the_copy_past_a_blank_cartridge() {
    restore_past(Damage::Blank);
}

#[test]
fn a_restore_reads_the_copy_past_a_cartridge_holding_another_label() {
    restore_past(Damage::Foreign);
}

#[test]
fn a_restore_reads_the_copy_past_a_cartridge_that_fails_to_load() {
    if !test_hooks() {
        return;
    }
    restore_past(Damage::LoadFails);
}

/// When no copy can serve, the restore fails in one line naming every
/// cartridge it tried and why.
#[test]
fn a_restore_no_copy_can_serve_names_every_cartridge_tried() {
    let t = tempfile::tempdir().unwrap();
    let (home, _, job, own, copy) = copied_job(t.path());
    let tapes = home.join("library/tapes");
    for bc in [&own, &copy] {
        for ext in ["data", "idx"] {
            std::fs::remove_file(tapes.join(format!("{bc}.{ext}"))).unwrap();
        }
    }
    let out = t.path().join("out");
    let (code, _, err) = run(
        &home,
        &[
            OsStr::new("restore"),
            OsStr::new(&job),
            OsStr::new("--to"),
            out.as_os_str(),
        ],
    );
    assert_one_line_error(
        code,
        &err,
        &["no copy of the job could be read", &own, &copy],
    );
}
