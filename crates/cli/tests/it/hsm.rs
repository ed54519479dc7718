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
    // The recall's seconds are kept with its job: files back and waiting.
    let job = back["jobs"][0].to_string();
    let svg = t.path().join("recall.svg");
    let r = ok(&home, &["report", &job, "--op", "recall", "--out", p(&svg)]);
    let rc = &r["recall"];
    assert_eq!(
        (rc["files"].as_u64(), rc["peak_waiting"].as_u64()),
        (Some(5), Some(5)),
        "{r}"
    );
    let last = rc["samples"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (last["files"].as_u64(), last["waiting"].as_u64()),
        (Some(5), Some(0)),
        "{r}"
    );
    assert!(std::fs::read_to_string(&svg)
        .unwrap()
        .contains("written back"));
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

/// Whether this process may watch with fanotify's pre-content events: root, on
/// Linux 6.14 or later.
fn can_watch() -> Result<(), String> {
    if !is_root() {
        return Err("the hsm daemon needs root (fanotify)".into());
    }
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut n = release
        .split(['.', '-'])
        .map(|x| x.parse::<u32>().unwrap_or(0));
    let (major, minor) = (n.next().unwrap_or(0), n.next().unwrap_or(0));
    if (major, minor) < (6, 14) {
        return Err(format!(
            "pre-content events need Linux 6.14, this is {}",
            release.trim()
        ));
    }
    Ok(())
}

/// A running `hsm daemon` of `home`, its counters in `status`; killed when dropped.
struct Daemon {
    child: std::process::Child,
    status: std::path::PathBuf,
}

impl Daemon {
    fn start(home: &Path, args: &[&str]) -> Daemon {
        let status = home.join("daemon-status.json");
        let _ = std::fs::remove_file(&status);
        let child = std::process::Command::new(bin())
            .arg("--home")
            .arg(home)
            .args(["hsm", "daemon", "--status", p(&status)])
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let d = Daemon { child, status };
        d.until(|c| c["marked"].as_u64().is_some());
        d
    }

    fn counters(&self) -> serde_json::Value {
        let text = std::fs::read_to_string(&self.status).unwrap_or_default();
        serde_json::from_str(&text).unwrap_or(serde_json::Value::Null)
    }

    fn until(&self, ok: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
        let t0 = std::time::Instant::now();
        loop {
            let c = self.counters();
            if ok(&c) {
                return c;
            }
            assert!(t0.elapsed().as_secs() < 60, "the daemon's counters: {c}");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_daemon_recalls_on_read_and_tools_that_only_look_recall_nothing() {
    if !crate::common::need(can_watch()) {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let (home, dir) = managed(t.path());
    let names = ["f0", "f1", "f2", "f3", "sub/small"];
    let before: Vec<Vec<u8>> = names
        .iter()
        .map(|n| std::fs::read(dir.join(n)).unwrap())
        .collect();
    ok(&home, &["hsm", "migrate"]);
    ok(&home, &["hsm", "release", p(&dir.join("f0"))]);
    let d = Daemon::start(&home, &["--window", "1s"]);
    d.until(|c| c["marked"] == 1);
    // Released while the daemon runs: marked before the lease is given back.
    ok(&home, &["hsm", "release"]);
    d.until(|c| c["marked"] == 5);
    for cmd in [
        vec!["ls", "-lR"],
        vec!["find", ".", "-newer", "f0"],
        vec!["du", "-s", "."],
        vec!["stat", "f0", "f1", "f2", "f3", "sub/small"],
    ] {
        let st = std::process::Command::new(cmd[0])
            .args(&cmd[1..])
            .current_dir(&dir)
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "{cmd:?}");
    }
    std::fs::rename(dir.join("f3"), dir.join("f3-renamed")).unwrap();
    std::fs::rename(dir.join("f3-renamed"), dir.join("f3")).unwrap();
    // A backup of the managed tree stores the stubs without reading their data.
    let b = ok(&home, &["backup", p(&dir), "--name", "stubs"]);
    assert_eq!(b["status"], "ok", "{b}");
    assert_eq!(b["source_bytes_read"], 0, "{b}");
    assert_eq!(d.counters()["events"], 0, "{}", d.counters());

    // Every file read at once: recalled in one batch (two when a reader starts
    // late on a loaded machine), the data identical.
    let readers: Vec<_> = (names.iter())
        .map(|n| {
            let f = dir.join(n);
            std::thread::spawn(move || std::fs::read(f).unwrap())
        })
        .collect();
    for (r, want) in readers.into_iter().zip(&before) {
        assert_eq!(&r.join().unwrap(), want);
    }
    let c = d.until(|c| c["recalled_files"] == 5);
    let batches = c["batches"].as_u64().unwrap();
    assert!((1..=2).contains(&batches), "{c}");
    assert!(c["mounts"].as_u64().unwrap() <= batches, "{c}");
    assert_eq!(
        (c["failed"].as_u64(), c["timed_out"].as_u64()),
        (Some(0), Some(0)),
        "{c}"
    );
    let s = ok(&home, &["hsm", "status"]);
    assert_eq!(files_in(&s, "premigrated"), 5, "{s}");
    // A server of the home shows the daemon's recalls and the bytes by state.
    let root = crate::common::server_kit::admin_token(&home, "root");
    let server = crate::common::server_kit::Server::start(&home, None);
    let (status, text) = crate::common::server_kit::get(&server.addr, "/metrics", Some(&root));
    assert_eq!(status, 200, "{text}");
    for line in [
        "tapeloom_hsm_files{state=\"premigrated\"} 5",
        "tapeloom_hsm_recalled_files_total 5",
        "tapeloom_hsm_recalls_waiting 0",
        "tapeloom_hsm_recall_seconds_count 5",
    ] {
        assert!(text.lines().any(|l| l == line), "{line}:\n{text}");
    }
    if crate::common::need(program("promtool", "prometheus")) {
        crate::metrics::promtool_check(&text);
    }
    drop(server);
    // Read again: no more events, the files are not marked.
    for n in names {
        std::fs::read(dir.join(n)).unwrap();
    }
    assert_eq!(d.counters()["events"], c["events"], "{}", d.counters());
}

#[test]
fn a_read_the_daemon_cannot_serve_fails_with_eio_and_never_hangs() {
    if !crate::common::need(can_watch()) {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let (home, dir) = managed(t.path());
    ok(&home, &["hsm", "migrate"]);
    ok(&home, &["hsm", "release"]);
    let eio = |r: std::io::Result<Vec<u8>>| r.err().and_then(|e| e.raw_os_error()) == Some(5);

    // The library unreachable: the recall fails, and the reader gets EIO.
    let library = home.join("library");
    let away = home.join("library-away");
    std::fs::rename(&library, &away).unwrap();
    let d = Daemon::start(&home, &["--window", "1s"]);
    let t0 = std::time::Instant::now();
    assert!(eio(std::fs::read(dir.join("f0"))), "f0 was read");
    assert!(t0.elapsed().as_secs() < 30, "{:?}", t0.elapsed());
    d.until(|c| c["failed"] == 1);
    drop(d);
    // Opening the home made an empty library in its place.
    let _ = std::fs::remove_dir_all(&library);
    std::fs::rename(&away, &library).unwrap();

    // A recall that takes longer than the timeout (another command holds the
    // home for 5 s): EIO at the timeout.
    let d = Daemon::start(&home, &["--window", "30s", "--timeout", "1s"]);
    let mut busy = std::process::Command::new("flock")
        .arg(home.join("lock"))
        .args(["sleep", "5"])
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let t0 = std::time::Instant::now();
    assert!(eio(std::fs::read(dir.join("f1"))), "f1 was read");
    let waited = t0.elapsed();
    assert!(
        waited.as_millis() >= 900 && waited.as_secs() < 5,
        "{waited:?}"
    );
    d.until(|c| c["timed_out"] == 1);
    busy.wait().unwrap();
    drop(d);

    // The daemon killed while a reader waits: its guardian answers EIO.
    let mut d = Daemon::start(&home, &["--window", "30s"]);
    let f2 = dir.join("f2");
    let reader = std::thread::spawn(move || std::fs::read(f2));
    d.until(|c| c["waiting"] == 1);
    d.child.kill().unwrap();
    let t0 = std::time::Instant::now();
    assert!(eio(reader.join().unwrap()), "f2 was read");
    assert!(t0.elapsed().as_secs() < 10, "{:?}", t0.elapsed());
    drop(d);
    // Nothing was lost: each file comes back identical.
    let back = ok(&home, &["hsm", "recall", p(&dir)]);
    assert_eq!(back["files"], 5, "{back}");
    assert_eq!(std::fs::read(dir.join("f2")).unwrap(), noise(2, 300_000));
}

#[test]
fn a_backup_of_stubs_reads_no_data_and_restores_stubs_that_recall_identical() {
    let t = tempfile::tempdir().unwrap();
    let (home, dir) = managed(t.path());
    let want = std::fs::read(dir.join("f2")).unwrap();
    ok(&home, &["hsm", "migrate"]);
    ok(&home, &["hsm", "release"]);
    let b = ok(&home, &["backup", p(&dir), "--name", "stubs"]);
    assert_eq!(b["status"], "ok", "{b}");
    assert_eq!(b["source_bytes_read"], 0, "{b}");
    let job = b["job_id"].to_string();
    // Restored into the managed folder: stubs, released, with their records.
    let back = dir.join("restored");
    ok(&home, &["restore", &job, "--to", p(&back)]);
    assert_eq!(std::fs::metadata(back.join("f2")).unwrap().blocks(), 0);
    assert_eq!(
        std::fs::metadata(back.join("f2")).unwrap().len(),
        want.len() as u64
    );
    let s = ok(&home, &["hsm", "status", p(&back)]);
    assert_eq!(files_in(&s, "released"), 5, "{s}");
    let r = ok(&home, &["hsm", "recall", p(&back)]);
    assert_eq!(r["files"], 5, "{r}");
    assert_eq!(std::fs::read(back.join("f2")).unwrap(), want);
    // With --recall, outside any managed folder: the data, not stubs.
    let out = t.path().join("elsewhere");
    let r = ok(&home, &["restore", &job, "--to", p(&out), "--recall"]);
    assert_eq!(r["recalled"], 5, "{r}");
    assert_eq!(std::fs::read(out.join("f2")).unwrap(), want);
    assert!(std::fs::metadata(out.join("f2")).unwrap().blocks() > 0);
    // The catalog records only the managed folders' files.
    let s = ok(&home, &["hsm", "reconcile", "--check"]);
    assert_eq!(s["clean"], true, "{s}");
}

/// Files spread over a whole cartridge of LTO-9 geometry (280 wraps) at a scale
/// of a few megabytes, recalled at once: the planned order is modeled faster
/// than the block order, each cartridge mounted once, every file identical; and
/// a restore of the same paths plans the same way.
#[test]
fn a_recall_of_many_files_reads_each_cartridge_once_in_the_planned_order() {
    let t = tempfile::tempdir().unwrap();
    let (home, dir) = (t.path().join("home"), t.path().join("m"));
    let cap = 48u64 << 20;
    let scale = format!("{}", cap as f64 / 18e12);
    ok(
        &home,
        &[
            "library",
            "create",
            "--drives",
            "1",
            "--slots",
            "2",
            "--capacity",
            "48M",
            "--model",
            "lto9",
            "--clock",
            "virtual",
            "--scale",
            &scale,
        ],
    );
    // Small files, each followed by filler, so they lie along the whole tape.
    let mut picks = Vec::new();
    for i in 0..60u64 {
        let f = dir.join(format!("d{:02}/f", i));
        write(&f, &noise(i, 3000));
        write(&dir.join(format!("d{:02}/g", i)), &noise(1000 + i, 640_000));
        if i % 3 == 0 {
            picks.push(f);
        }
    }
    ok(&home, &["hsm", "manage", p(&dir)]);
    ok(&home, &["hsm", "migrate", "--block-size", "64K"]);
    let want: Vec<Vec<u8>> = picks.iter().map(|f| std::fs::read(f).unwrap()).collect();
    let mut modeled = Vec::new();
    for order in ["block", "planned"] {
        ok(&home, &["hsm", "release"]);
        ok(&home, &["library", "unload"]);
        let mut args = vec!["hsm", "recall", "--order", order];
        args.extend(picks.iter().map(|f| p(f)));
        let r = ok(&home, &args);
        assert_eq!(r["files"], picks.len(), "{r}");
        assert_eq!(r["loads"], 1, "{r}");
        for (f, w) in picks.iter().zip(&want) {
            assert_eq!(&std::fs::read(f).unwrap(), w, "{}", f.display());
        }
        modeled.push(r["modeled_seconds"].as_f64().expect("modeled"));
        if order == "planned" {
            assert_eq!(r["reordered"], 1, "{r}");
            assert!(r["planned_seconds"].as_f64().is_some(), "{r}");
        }
    }
    assert!(
        modeled[1] < modeled[0] * 0.8,
        "planned {} vs block {}",
        modeled[1],
        modeled[0]
    );
    // The same paths restored from their job: planned too.
    let job = ok(&home, &["jobs"])["jobs"][0]["job_id"].to_string();
    let mut args = vec![
        "restore".to_string(),
        job,
        "--to".into(),
        p(&t.path().join("out")).into(),
    ];
    args.extend((0..60).step_by(3).map(|i| format!("d{i:02}/f")));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = ok(&home, &args);
    assert_eq!(r["reordered"], 1, "{r}");
    assert_eq!(r["files"], picks.len(), "{r}");
    // A drive with no model that gives its own order (a SCSI drive's
    // Recommended Access Order; here the pieces from the last to the first):
    // the restore reads in that order, and the files are the same.
    let rao = [("TAPELOOM_FAULTS", "rao-reversed")];
    let mut again = args.clone();
    let rao_out = t.path().join("rao");
    again[3] = p(&rao_out);
    let r = ok_env(&home, &rao, &again);
    assert_eq!(r["reordered"], 1, "{r}");
    assert!(r["planned_seconds"].is_null(), "{r}");
    for i in (0..60).step_by(3) {
        let f = format!("d{i:02}/f");
        let got = std::fs::read(rao_out.join(&f)).unwrap();
        assert_eq!(got, noise(i, 3000), "{f}");
    }
}
