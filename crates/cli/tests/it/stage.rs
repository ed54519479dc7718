//! `tapeloom stage ...` end to end: adding, listing, status figures and refusals.

use crate::common::*;
use std::ffi::OsStr;
use std::path::Path;

/// Runs and insists on failure with `code`; returns stderr.
fn refused(home: &Path, args: &[&str], code: i32) -> String {
    let a: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    let (c, v, err) = run(home, &a);
    assert_eq!(c, code, "tapeloom {args:?}: {v} {err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    err
}

#[test]
fn stages_are_added_listed_and_refused_as_they_should_be() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let s1 = t.path().join("s1");
    let s2 = t.path().join("new/s2");
    let p = |p: &Path| p.to_str().unwrap().to_string();
    let v = ok(&home, &["stage", "add", &p(&s1), "--size", "1M"]);
    assert_eq!(v["size"], 1 << 20);
    assert_eq!(v["path"], p(&s1.canonicalize().unwrap()));
    ok(&home, &["stage", "add", &p(&s2), "--size", "2M"]);
    assert!(s2.is_dir());
    let s1 = s1.canonicalize().unwrap();
    let s2 = s2.canonicalize().unwrap();

    let e = refused(&home, &["stage", "add", &p(&s1), "--size", "5M"], 1);
    assert!(e.contains("in the catalog already"), "{e}");
    // Refused when parsed, as every numeric flag's bad value is (exit 2).
    let e = refused(
        &home,
        &["stage", "add", &p(&t.path().join("z")), "--size", "0"],
        2,
    );
    assert!(e.contains("'0' is out of range"), "{e}");
    let file = t.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    let e = refused(&home, &["stage", "add", &p(&file), "--size", "1M"], 1);
    assert!(e.contains("not a directory"), "{e}");
    refused(&home, &["stage", "add", &p(&s1), "--size", "lots"], 2);
    let e = refused(&home, &["stage", "remove", &p(&t.path().join("z"))], 1);
    assert!(e.contains("no stage at"), "{e}");

    let a = stage_chunk(&home, &s1, 7, 0, 3);
    let b = stage_chunk(&home, &s1, 7, 1, 2);
    let c = stage_chunk(&home, &s1, 9, 0, 1);
    despool(&home, 9, 0);

    let v = ok(&home, &["stage", "list"]);
    let stages = v["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 2);
    assert_eq!(stages[0]["path"], p(&s1));
    assert_eq!(stages[0]["used"], a.bytes + b.bytes);
    assert_eq!(stages[0]["free"], (1 << 20) - a.bytes - b.bytes);
    assert_eq!(stages[1]["used"], 0);

    let v = ok(&home, &["stage", "status"]);
    let st = &v["stages"][0];
    assert_eq!(st["used"], a.bytes + b.bytes);
    let streams = st["streams"].as_array().unwrap();
    let fig = |i: usize| {
        let s = &streams[i];
        (
            s["job_id"].as_i64().unwrap(),
            s["stream"].as_u64().unwrap(),
            s["staged_bytes"].as_u64().unwrap(),
            s["staged_chunks"].as_u64().unwrap(),
            s["despooled_bytes"].as_u64().unwrap(),
            s["despooled_chunks"].as_u64().unwrap(),
        )
    };
    assert_eq!(streams.len(), 3);
    assert_eq!(fig(0), (7, 0, a.bytes, 1, 0, 0));
    assert_eq!(fig(1), (7, 1, b.bytes, 1, 0, 0));
    assert_eq!(fig(2), (9, 0, 0, 0, c.bytes, 1));
    assert!(v["stages"][1]["streams"].as_array().unwrap().is_empty());

    let e = refused(&home, &["stage", "remove", &p(&s1)], 1);
    assert!(e.contains("2 chunks not yet on tape, of jobs 7"), "{e}");
    despool(&home, 7, 0);
    despool(&home, 7, 1);
    let v = ok(&home, &["stage", "remove", &p(&s1)]);
    assert_eq!(v["chunk_files_deleted"], 3);
    assert!(!s1.join("tapeloom-stage").exists());
    let v = ok(&home, &["stage", "list"]);
    assert_eq!(v["stages"].as_array().unwrap().len(), 1);
    assert_eq!(v["stages"][0]["path"], p(&s2));
}

#[test]
fn stage_status_prints_for_people() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let s1 = t.path().join("s1");
    ok(
        &home,
        &["stage", "add", s1.to_str().unwrap(), "--size", "1G"],
    );
    stage_chunk(&home, &s1.canonicalize().unwrap(), 4, 2, 2);
    let out = std::process::Command::new(bin())
        .arg("--home")
        .arg(&home)
        .args(["stage", "status"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("of 1.0 GiB used"), "{text}");
    assert!(text.contains("job     4 stream   2: staged"), "{text}");
    assert!(text.contains("in    1 chunks"), "{text}");
}

/// Backs up `sources` through the home's stage; returns the backup's JSON.
fn staged_backup(home: &Path, sources: &[&Path], extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["backup", "--via", "stage"];
    args.extend(sources.iter().map(|p| p.to_str().unwrap()));
    args.extend(extra);
    ok(home, &args)
}

#[test]
fn a_backup_through_the_stage_restores_identical_and_leaves_the_stage_empty() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    rich_tree(&a);
    for i in 0..6 {
        write(
            &b.join(format!("f{i}")),
            &noise(i, 300_000 + 7 * i as usize),
        );
    }
    let stage = t.path().join("stage");
    ok(
        &home,
        &["stage", "add", stage.to_str().unwrap(), "--size", "64M"],
    );
    // Compressed blocks too: the despooler reads their records from the frames.
    let v = staged_backup(
        &home,
        &[&a, &b],
        &[
            "--chunk-size",
            "256K",
            "--block-size",
            "64K",
            "--compress",
            "zstd",
        ],
    );
    assert_eq!(v["via"], "stage", "{v}");
    assert!(
        v["compression"]["compressed_blocks"].as_u64().unwrap() > 0,
        "{v}"
    );
    assert_eq!(v["status"], "ok", "{v}");
    for s in v["streams"].as_array().unwrap() {
        assert!(s["spool_mb_per_s"].as_f64().unwrap() > 0.0, "{s}");
    }
    assert!(
        v["drives"][0]["despool_mb_per_s"].as_f64().unwrap() > 0.0,
        "{v}"
    );
    // Everything reached tape: nothing is left on the stage, every chunk despooled.
    let st = ok(&home, &["stage", "status"]);
    let s0 = &st["stages"][0];
    assert_eq!(s0["used"], 0, "{st}");
    let streams = s0["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 2, "{st}");
    for s in streams {
        assert_eq!(s["staged_chunks"], 0, "{st}");
        assert!(s["despooled_chunks"].as_u64().unwrap() >= 2, "{st}");
    }
    let leftover: Vec<_> = walk_files(&stage);
    assert!(leftover.is_empty(), "{leftover:?}");
    let job = v["job_id"].to_string();
    let out = t.path().join("out");
    ok(&home, &["restore", &job, "--to", out.to_str().unwrap()]);
    assert_same_tree(&a, &out.join("a"));
    assert_same_tree(&b, &out.join("b"));
    let x = ok(&home, &["verify", &job]);
    assert_eq!(x["ok"], true, "{x}");
    assert!(x["files_checked"].as_u64().unwrap() > 6, "{x}");
}

#[test]
fn a_job_larger_than_its_stage_waits_for_space_and_completes() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let src = t.path().join("src");
    // 24 MB of incompressible data through a stage of 4 MiB in chunks of 512 KiB.
    for i in 0..12 {
        write(&src.join(format!("f{i:02}")), &noise(100 + i, 2_000_000));
    }
    let stage = t.path().join("stage");
    ok(
        &home,
        &["stage", "add", stage.to_str().unwrap(), "--size", "4M"],
    );
    let v = staged_backup(
        &home,
        &[&src],
        &["--chunk-size", "512K", "--block-size", "64K"],
    );
    assert_eq!(v["status"], "ok", "{v}");
    assert!(v["stage_waits"]["count"].as_u64().unwrap() > 0, "{v}");
    let st = ok(&home, &["stage", "status"]);
    assert_eq!(st["stages"][0]["used"], 0, "{st}");
    let out = t.path().join("out");
    let job = v["job_id"].to_string();
    ok(&home, &["restore", &job, "--to", out.to_str().unwrap()]);
    assert_same_tree(&src, &out);
}

/// The report of a backup through the stage draws how full the stage was under the
/// drive's throughput and gives the peak; a direct job's report has no stage panel.
#[test]
fn the_report_draws_the_stage_fill_of_a_staged_backup_only() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let src = t.path().join("src");
    // 24 MB at 8 MB/s: about three seconds, so a few samples.
    for i in 0..8 {
        write(&src.join(format!("f{i}")), &noise(200 + i, 3_000_000));
    }
    let stage = t.path().join("stage");
    ok(
        &home,
        &["stage", "add", stage.to_str().unwrap(), "--size", "8M"],
    );
    let v = staged_backup(
        &home,
        &[&src],
        &[
            "--chunk-size",
            "512K",
            "--block-size",
            "64K",
            "--limit-rate",
            "8MB",
        ],
    );
    assert_eq!(v["status"], "ok", "{v}");
    let job = v["job_id"].to_string();
    let size = 8u64 << 20;
    for ext in ["svg", "html"] {
        let out = t.path().join(format!("staged.{ext}"));
        let x = ok(&home, &["report", &job, "--out", out.to_str().unwrap()]);
        assert_eq!(x["staged"], true, "{x}");
        let fill = &x["stage_fill"];
        let peak = fill["peak_bytes"].as_u64().unwrap();
        assert!(peak > 0 && peak <= size, "{x}");
        let share = fill["peak_share"].as_f64().unwrap();
        assert!(share > 0.0 && share <= 1.0, "{x}");
        assert_eq!(fill["size_bytes"], size, "{x}");
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(text.contains("Stage fill"), "{ext}: no stage panel");
        // The legend's row, a text element of its own.
        assert!(text.contains("\nstage fill\n"), "{ext}: no stage legend");
    }
    let html = std::fs::read_to_string(t.path().join("staged.html")).unwrap();
    assert!(
        html.contains("<th scope=\"row\">stage fill</th>"),
        "no summary row"
    );

    let direct = ok(&home, &["backup", src.to_str().unwrap()]);
    let job = direct["job_id"].to_string();
    let out = t.path().join("direct.svg");
    let x = ok(&home, &["report", &job, "--out", out.to_str().unwrap()]);
    assert_eq!(x["staged"], false, "{x}");
    assert!(x["stage_fill"].is_null(), "{x}");
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(
        !text.to_lowercase().contains("stage"),
        "a direct job has no stage panel"
    );
}

/// The files under `dir`, at any depth.
fn walk_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// Bytes of a chunk file before its first block, and of each block's length.
const CHUNK_HEAD: u64 = 72;
const BLOCK_LEN: u64 = 4;
/// Bytes of a data block's header.
const BLOCK_HEAD: u64 = 64;

/// Backs `src` up through the home's stage in chunks of three 64 KiB blocks, with
/// the byte `at` of chunk `chunk` of stream 1 flipped on the stage before it is
/// despooled; returns the backup's JSON.
fn backup_with_damage(home: &Path, src: &Path, chunk: u64, at: u64) -> serde_json::Value {
    let out = std::process::Command::new(bin())
        .arg("--home")
        .arg(home)
        .arg("--json")
        .args(["backup", "--via", "stage", "--chunk-size", "256K"])
        .args(["--block-size", "64K"])
        .arg(src)
        .env("TAPELOOM_TEST_DAMAGE_CHUNK", format!("1:{chunk}:{at}"))
        .output()
        .unwrap();
    let (code, v, err) = parse(out);
    // A job that lost bytes on the stage is partial, and says so with exit 1.
    let want = if v["status"] == "partial" { 1 } else { 0 };
    assert_eq!(code, want, "{err}");
    if want == 1 {
        // A line for each problem as it is met, then the job's.
        let last = err.lines().last().unwrap_or_default();
        assert!(last.contains("is partial"), "{err}");
    }
    v
}

/// Offset in a chunk file of byte `k` of the payload of its block `i` (uncompressed
/// blocks of 64 KiB).
fn payload_byte(i: u64, k: u64) -> u64 {
    CHUNK_HEAD + i * (BLOCK_LEN + (64 << 10)) + BLOCK_LEN + BLOCK_HEAD + k
}

/// Restores `job` to `out` and checks each file restored is its source's twin;
/// returns the names of the files of `src` that were not restored.
fn restore_and_compare(home: &Path, job: &str, src: &Path, out: &Path) -> Vec<String> {
    ok(home, &["restore", job, "--to", out.to_str().unwrap()]);
    let mut missing = Vec::new();
    for e in std::fs::read_dir(src).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        let back = out.join(&name);
        match std::fs::read(&back) {
            Ok(b) => assert!(b == std::fs::read(src.join(&name)).unwrap(), "{name}"),
            Err(_) => missing.push(name),
        }
    }
    missing.sort();
    missing
}

#[test]
fn a_block_damaged_on_the_stage_drops_only_the_file_it_holds() {
    if !test_hooks() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let src = t.path().join("src");
    write(&src.join("a0"), &noise(1, 50_000));
    // Blocks 1 to 15 of the stream hold nothing but its data.
    write(&src.join("big"), &noise(2, 1_000_000));
    for i in 0..4 {
        write(&src.join(format!("z{i}")), &noise(10 + i, 30_000));
    }
    let stage = t.path().join("stage");
    ok(
        &home,
        &["stage", "add", stage.to_str().unwrap(), "--size", "64M"],
    );
    // Block 4 of the stream: the second block of its second chunk.
    let v = backup_with_damage(&home, &src, 1, payload_byte(1, 1000));
    assert_eq!(v["status"], "partial", "{v}");
    let errors = v["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{v}");
    assert_eq!(errors[0]["path"], "big", "{v}");
    let why = errors[0]["reason"].as_str().unwrap();
    assert!(
        why.starts_with("damaged on the disk stage (stream bytes "),
        "{why}"
    );
    assert!(
        why.ends_with("before it reached tape; not backed up"),
        "{why}"
    );
    // Nothing is left on the stage.
    let st = ok(&home, &["stage", "status"]);
    assert_eq!(st["stages"][0]["used"], 0, "{st}");
    assert!(walk_files(&stage).is_empty());
    let job = v["job_id"].to_string();
    let missing = restore_and_compare(&home, &job, &src, &t.path().join("out"));
    assert_eq!(missing, vec!["big"]);
    let x = ok(&home, &["verify", &job]);
    assert_eq!(x["ok"], true, "{x}");
}

#[test]
fn a_damaged_block_holding_entries_is_reported_by_its_stream_bytes() {
    if !test_hooks() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let src = t.path().join("src");
    // About 1.1 KB of records each: some sixty entries start in every block.
    for i in 0..300 {
        write(&src.join(format!("f{i:03}")), &noise(i, 1000));
    }
    let stage = t.path().join("stage");
    ok(
        &home,
        &["stage", "add", stage.to_str().unwrap(), "--size", "64M"],
    );
    // Block 3 of the stream: the first of its second chunk.
    let v = backup_with_damage(&home, &src, 1, payload_byte(0, 500));
    assert_eq!(v["status"], "partial", "{v}");
    let errors = v["errors"].as_array().unwrap();
    let paths: Vec<&str> = errors.iter().map(|e| e["path"].as_str().unwrap()).collect();
    let nameless: Vec<&str> = paths
        .iter()
        .copied()
        .filter(|p| p.starts_with("<stream "))
        .collect();
    assert_eq!(nameless.len(), 1, "{v}");
    assert!(nameless[0].contains(", bytes "), "{v}");
    assert!(errors.len() <= 2, "{v}");
    let job = v["job_id"].to_string();
    let missing = restore_and_compare(&home, &job, &src, &t.path().join("out"));
    // The files missing are those of one block, the files named among them.
    assert!((50..=70).contains(&missing.len()), "{missing:?}");
    for p in paths.iter().filter(|p| !p.starts_with('<')) {
        let name = p.rsplit('/').next().unwrap();
        assert!(missing.iter().any(|m| m == name), "{p}: {missing:?}");
    }
    let x = ok(&home, &["verify", &job]);
    assert_eq!(x["ok"], true, "{x}");
    assert_eq!(
        x["files_checked"].as_u64().unwrap(),
        301 - missing.len() as u64,
        "{x}"
    );
}

/// Backs up `srcs` through the stage in a child process and kills it (SIGKILL)
/// `after` its first stream's first file is whole in `stage`: chunks of the
/// stream holding more than that file are recorded in the catalog. (A chunk is
/// finished after a second whatever it holds, so on a loaded machine the first
/// chunks may hold only part of a file.)
fn killed_backup(home: &Path, stage: &Path, srcs: &[&Path], after: std::time::Duration) {
    let mut cmd = std::process::Command::new(bin());
    cmd.arg("--home").arg(home).arg("--json").arg("backup");
    cmd.args(srcs);
    cmd.args([
        "--via",
        "stage",
        "--limit-rate",
        "2MB",
        "--chunk-size",
        "256K",
        "--block-size",
        "64K",
    ]);
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let t = std::time::Instant::now();
    while !holds_chunk_file(stage) || staged_bytes(home) < FIRST_FILE_STAGED {
        assert!(t.elapsed().as_secs() < 30, "nothing staged in 30 s");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    std::thread::sleep(after);
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Every path under `dir`, relative to it.
fn walkdir_names(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            out.push(p.strip_prefix(dir).unwrap_or(&p).display().to_string());
            if p.is_dir() {
                todo.push(p);
            }
        }
    }
    out
}

/// Staged bytes of the first stream beyond which its first file (at most
/// 219,000 bytes) is whole on the stage.
const FIRST_FILE_STAGED: i64 = 300_000;

/// Bytes the catalog of `home` records on its stages for the first stream of its
/// running job (read beside the running backup: the catalog is in WAL mode).
fn staged_bytes(home: &Path) -> i64 {
    let q = "SELECT coalesce(sum(bytes), 0) FROM staged_chunks WHERE stream = 1 AND job_id IN \
             (SELECT id FROM jobs WHERE status = 'running')";
    let rows = sql_try(home, q).unwrap_or_default();
    let n = rows.first().and_then(|r| r[0].as_deref()?.parse().ok());
    n.unwrap_or(0)
}

#[test]
fn a_backup_killed_while_spooling_or_despooling_is_finished_by_stage_resume() {
    let t = tempfile::tempdir().unwrap();
    let srcs: Vec<std::path::PathBuf> = (0..2).map(|i| t.path().join(format!("s{i}"))).collect();
    for (k, s) in srcs.iter().enumerate() {
        for f in 0..20u64 {
            write(
                &s.join(format!("f{f:02}")),
                &noise(k as u64 * 100 + f, 200_000 + f as usize * 1000),
            );
        }
    }
    let src: Vec<&Path> = srcs.iter().map(|p| p.as_path()).collect();
    // Killed early (spooling, the drive not started), in the middle (the small stage
    // makes the drive despool while the sources spool) and late.
    for (n, ms) in [100u64, 900, 1600].into_iter().enumerate() {
        let home = t.path().join(format!("home{n}"));
        let stage = t.path().join(format!("stage{n}"));
        ok(
            &home,
            &["stage", "add", stage.to_str().unwrap(), "--size", "2M"],
        );
        // An earlier job, whole: it must come out untouched.
        let first = staged_backup(&home, &src, &["--block-size", "64K"]);
        killed_backup(&home, &stage, &src, std::time::Duration::from_millis(ms));
        let r = ok(&home, &["stage", "resume"]);
        let jobs = r["jobs"].as_array().unwrap();
        assert_eq!(jobs.len(), 1, "{r}");
        let job = jobs[0]["job_id"].to_string();
        let st = ok(&home, &["stage", "status"]);
        assert_eq!(st["stages"][0]["used"], 0, "{st}");
        // Every file the resumed job holds restores identical; verify passes.
        let out = t.path().join(format!("out{n}"));
        ok(&home, &["restore", &job, "--to", out.to_str().unwrap()]);
        let mut restored = 0;
        for (k, s) in srcs.iter().enumerate() {
            let dir = out.join(format!("s{k}"));
            for e in std::fs::read_dir(&dir).into_iter().flatten() {
                let p = e.unwrap().path();
                let want = std::fs::read(s.join(p.file_name().unwrap())).unwrap();
                assert_eq!(std::fs::read(&p).unwrap(), want, "{}", p.display());
                restored += 1;
            }
        }
        let listing: Vec<_> = (walkdir_names(&out).into_iter()).collect();
        assert!(
            restored > 0,
            "nothing of job {job} was restored (kill {n}, after {ms} ms): resume {r}, restored {listing:?}"
        );
        assert_eq!(ok(&home, &["verify", &job])["ok"], true);
        let earlier = first["job_id"].to_string();
        assert_eq!(ok(&home, &["verify", &earlier])["ok"], true);
        let check = ok(&home, &["catalog", "check"]);
        assert_eq!(check["ok"], true, "{check}");
        let again = t.path().join(format!("again{n}"));
        ok(
            &home,
            &["restore", &earlier, "--to", again.to_str().unwrap()],
        );
        assert_same_tree(&srcs[0], &again.join("s0"));
        assert_same_tree(&srcs[1], &again.join("s1"));
    }
}

/// A home with a 64 MiB stage and two sources, `a` (every kind of entry) and `b`
/// (incompressible files filling several chunks); returns (home, stage, a, b).
fn home_with_stage_and_sources(
    t: &Path,
) -> (
    std::path::PathBuf,
    std::path::PathBuf,
    std::path::PathBuf,
    std::path::PathBuf,
) {
    let home = t.join("home");
    let (a, b) = (t.join("a"), t.join("b"));
    rich_tree(&a);
    for i in 0..5 {
        write(
            &b.join(format!("f{i}")),
            &noise(40 + i, 200_000 + 11 * i as usize),
        );
    }
    let stage = t.join("stage");
    ok(
        &home,
        &["stage", "add", stage.to_str().unwrap(), "--size", "64M"],
    );
    (home, stage, a, b)
}

const SMALL_CHUNKS: [&str; 4] = ["--chunk-size", "256K", "--block-size", "64K"];

#[test]
fn a_job_kept_on_the_stage_restores_from_it_without_a_cartridge() {
    let t = tempfile::tempdir().unwrap();
    let (home, stage, a, b) = home_with_stage_and_sources(t.path());
    let mut args = SMALL_CHUNKS.to_vec();
    args.extend(["--keep-staged", "1h"]);
    let kept = staged_backup(&home, &[&a, &b], &args);
    assert_eq!(kept["status"], "ok", "{kept}");
    let plain = staged_backup(&home, &[&a, &b], &SMALL_CHUNKS);
    assert_eq!(plain["status"], "ok", "{plain}");

    // The kept job's chunks are on the stage and count as used; the other job's are
    // deleted.
    let st = ok(&home, &["stage", "status"]);
    let s0 = &st["stages"][0];
    let kept_job = kept["job_id"].as_i64().unwrap();
    let mut kept_bytes = 0;
    for s in s0["streams"].as_array().unwrap() {
        assert_eq!(s["staged_chunks"], 0, "{st}");
        let k = s["kept_bytes"].as_u64().unwrap();
        if s["job_id"] == kept_job {
            assert!(k > 0 && s["kept_chunks"] == s["despooled_chunks"], "{st}");
        } else {
            assert_eq!((k, s["kept_chunks"].as_u64()), (0, Some(0)), "{st}");
        }
        kept_bytes += k;
    }
    assert_eq!(s0["used"], kept_bytes, "{st}");
    assert_eq!(walk_files(&stage).len() as u64, {
        let n: u64 = (s0["streams"].as_array().unwrap().iter())
            .map(|s| s["kept_chunks"].as_u64().unwrap())
            .sum();
        n
    });

    let job = kept["job_id"].to_string();
    let out = t.path().join("whole");
    let r = ok(&home, &["restore", &job, "--to", out.to_str().unwrap()]);
    assert_eq!(r["source"], "stage", "{r}");
    assert_eq!(
        (r["mounts"].as_u64(), r["blocks_read"].as_u64()),
        (Some(0), Some(0)),
        "{r}"
    );
    assert!(r["blocks_read_from_stage"].as_u64().unwrap() > 2, "{r}");
    for s in r["streams"].as_array().unwrap() {
        assert_eq!(s["source"], "stage", "{r}");
    }
    assert_same_tree(&a, &out.join("a"));
    assert_same_tree(&b, &out.join("b"));

    let one = t.path().join("one");
    let r = ok(
        &home,
        &[
            "restore",
            &job,
            "--to",
            one.to_str().unwrap(),
            "--stream",
            "b",
        ],
    );
    assert_eq!(
        (r["source"].as_str(), r["mounts"].as_u64()),
        (Some("stage"), Some(0)),
        "{r}"
    );
    assert_eq!(r["streams"][0]["name"], "b", "{r}");
    assert_eq!(r["streams"][0]["source"], "stage", "{r}");
    assert_same_tree(&b, &one.join("b"));
    assert!(!one.join("a").exists());

    // The job whose chunks were not kept comes from tape.
    let job = plain["job_id"].to_string();
    let out = t.path().join("tape");
    let r = ok(&home, &["restore", &job, "--to", out.to_str().unwrap()]);
    assert_eq!(r["source"], "tape", "{r}");
    assert!(r["blocks_read"].as_u64().unwrap() > 2, "{r}");
    assert_eq!(r["blocks_read_from_stage"], 0, "{r}");
    assert_same_tree(&a, &out.join("a"));
    assert_same_tree(&b, &out.join("b"));
}

#[test]
fn chunks_kept_past_their_time_are_deleted_when_the_stages_are_opened() {
    let t = tempfile::tempdir().unwrap();
    let (home, stage, a, b) = home_with_stage_and_sources(t.path());
    let mut args = SMALL_CHUNKS.to_vec();
    args.extend(["--keep-staged", "1s"]);
    let v = staged_backup(&home, &[&a, &b], &args);
    assert_eq!(v["status"], "ok", "{v}");
    assert!(!walk_files(&stage).is_empty());
    std::thread::sleep(std::time::Duration::from_secs(2));
    let st = ok(&home, &["stage", "status"]);
    let s0 = &st["stages"][0];
    assert_eq!(s0["used"], 0, "{st}");
    for s in s0["streams"].as_array().unwrap() {
        assert_eq!(s["kept_chunks"], 0, "{st}");
        assert!(s["despooled_chunks"].as_u64().unwrap() > 0, "{st}");
    }
    let left: Vec<_> = walk_files(&stage);
    assert!(left.is_empty(), "{left:?}");
    let out = t.path().join("out");
    let r = ok(
        &home,
        &[
            "restore",
            &v["job_id"].to_string(),
            "--to",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(r["source"], "tape", "{r}");
    assert_same_tree(&a, &out.join("a"));
    assert_same_tree(&b, &out.join("b"));
}

#[test]
fn keep_staged_takes_a_number_and_a_unit() {
    let t = tempfile::tempdir().unwrap();
    let (home, _stage, a, _b) = home_with_stage_and_sources(t.path());
    let a = a.to_str().unwrap();
    for bad in ["2", "2y", "0h", "h"] {
        let e = refused(
            &home,
            &["backup", "--via", "stage", a, "--keep-staged", bad],
            2,
        );
        assert!(e.contains(bad), "{e}");
    }
}

#[test]
fn a_stream_partly_on_the_stage_comes_from_tape_and_the_others_from_the_stage() {
    let t = tempfile::tempdir().unwrap();
    let (home, stage, a, b) = home_with_stage_and_sources(t.path());
    let mut args = SMALL_CHUNKS.to_vec();
    args.extend(["--keep-staged", "1h"]);
    let v = staged_backup(&home, &[&a, &b], &args);
    assert_eq!(v["status"], "ok", "{v}");
    // One chunk of stream a (the job's stream 1) is gone from the disk.
    let job = v["job_id"].as_i64().unwrap();
    let gone = stage.canonicalize().unwrap().join(format!(
        "tapeloom-stage/job-{job:08}/stream-0001/chunk-000001.tlc"
    ));
    std::fs::remove_file(&gone).unwrap();
    let out = t.path().join("out");
    let r = ok(
        &home,
        &["restore", &job.to_string(), "--to", out.to_str().unwrap()],
    );
    assert_eq!(r["source"], "stage+tape", "{r}");
    let source = |name: &str| {
        let s = r["streams"].as_array().unwrap().iter();
        s.filter(|s| s["name"] == name)
            .map(|s| s["source"].clone())
            .next()
    };
    assert_eq!(source("a"), Some("tape".into()), "{r}");
    assert_eq!(source("b"), Some("stage".into()), "{r}");
    assert!(r["blocks_read"].as_u64().unwrap() > 0, "{r}");
    assert_same_tree(&a, &out.join("a"));
    assert_same_tree(&b, &out.join("b"));
}

#[test]
fn a_backup_that_finds_the_stage_full_of_kept_chunks_evicts_the_oldest() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let (one, two) = (t.path().join("one"), t.path().join("two"));
    for i in 0..3 {
        write(&one.join(format!("f{i}")), &noise(60 + i, 1_000_000));
        write(&two.join(format!("f{i}")), &noise(70 + i, 1_000_000));
    }
    let stage = t.path().join("stage");
    ok(
        &home,
        &["stage", "add", stage.to_str().unwrap(), "--size", "4M"],
    );
    let keep = [
        "--chunk-size",
        "512K",
        "--block-size",
        "64K",
        "--keep-staged",
        "1h",
    ];
    let first = staged_backup(&home, &[&one], &keep);
    let kept = |st: &serde_json::Value, job: &serde_json::Value| -> u64 {
        (st["stages"][0]["streams"].as_array().unwrap().iter())
            .filter(|s| &s["job_id"] == job)
            .map(|s| s["kept_bytes"].as_u64().unwrap())
            .sum()
    };
    let before = kept(&ok(&home, &["stage", "status"]), &first["job_id"]);
    assert!(before > 2_500_000, "{before}");
    let second = staged_backup(&home, &[&two], &keep);
    assert_eq!(second["status"], "ok", "{second}");
    let st = ok(&home, &["stage", "status"]);
    assert!(kept(&st, &first["job_id"]) < before, "{st}");
    assert!(st["stages"][0]["used"].as_u64().unwrap() <= 4 << 20, "{st}");
    // The first job lost its oldest chunks from the stage: it comes from tape.
    let out = t.path().join("out");
    let r = ok(
        &home,
        &[
            "restore",
            &first["job_id"].to_string(),
            "--to",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(r["source"], "tape", "{r}");
    assert_same_tree(&one, &out);
}

#[test]
fn a_backup_through_the_stage_without_one_is_refused_and_records_no_job() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let src = t.path().join("src");
    write(&src.join("f"), b"data");
    let e = refused(
        &home,
        &["backup", "--via", "stage", src.to_str().unwrap()],
        1,
    );
    assert!(e.contains("no disk stage"), "{e}");
    let jobs = ok(&home, &["jobs"]);
    assert_eq!(jobs["jobs"].as_array().unwrap().len(), 0, "{jobs}");
}

/// Four rate-limited sources of `files` noise files each, under `t`.
fn four_sources(t: &Path, files: u64) -> Vec<std::path::PathBuf> {
    (0..4u64)
        .map(|k| {
            let d = t.join(format!("s{k}"));
            for f in 0..files {
                write(&d.join(format!("f{f}")), &noise(k * 1000 + f, 1_000_000));
            }
            d
        })
        .collect()
}

#[test]
fn two_drives_despool_different_streams_each_in_one_run() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    ok(
        &home,
        &[
            "library", "create", "--drives", "2", "--slots", "4", "--model", "lto3", "--clock",
            "virtual", "--scale", "0.05",
        ],
    );
    let stage = t.path().join("stage");
    ok(
        &home,
        &["stage", "add", stage.to_str().unwrap(), "--size", "256M"],
    );
    let srcs = four_sources(t.path(), 6);
    let src: Vec<&Path> = srcs.iter().map(|p| p.as_path()).collect();
    let v = staged_backup(
        &home,
        &src,
        &[
            "--drives",
            "2",
            "--limit-rate",
            "4MB",
            "--chunk-size",
            "1M",
            "--block-size",
            "256K",
        ],
    );
    assert_eq!(v["status"], "ok", "{v}");
    assert_eq!(v["despool"], "whole", "{v}");
    // Both drives wrote, each its own streams; every stream lies in one extent.
    let drives = v["drives"].as_array().unwrap();
    assert_eq!(drives.len(), 2, "{v}");
    let mut by_drive = std::collections::HashMap::new();
    for s in v["streams"].as_array().unwrap() {
        *by_drive.entry(s["drive"].as_u64().unwrap()).or_insert(0) += 1;
    }
    assert_eq!(by_drive.len(), 2, "{v}");
    assert_eq!(v["extents"], 4, "{v}");
    let job = v["job_id"].to_string();
    let out = t.path().join("out");
    ok(&home, &["restore", &job, "--to", out.to_str().unwrap()]);
    for (k, s) in srcs.iter().enumerate() {
        assert_same_tree(s, &out.join(format!("s{k}")));
    }
    assert_eq!(ok(&home, &["verify", &job])["ok"], true);
    let st = ok(&home, &["stage", "status"]);
    assert_eq!(st["stages"][0]["used"], 0, "{st}");
}

#[test]
fn despool_early_is_recorded_and_restores_identical() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let stage = t.path().join("stage");
    ok(
        &home,
        &["stage", "add", stage.to_str().unwrap(), "--size", "64M"],
    );
    let srcs = four_sources(t.path(), 2);
    let src: Vec<&Path> = srcs.iter().map(|p| p.as_path()).collect();
    let v = staged_backup(
        &home,
        &src,
        &[
            "--despool",
            "early",
            "--chunk-size",
            "512K",
            "--block-size",
            "64K",
        ],
    );
    assert_eq!(v["despool"], "early", "{v}");
    let out = t.path().join("out");
    let job = v["job_id"].to_string();
    ok(&home, &["restore", &job, "--to", out.to_str().unwrap()]);
    for (k, s) in srcs.iter().enumerate() {
        assert_same_tree(s, &out.join(format!("s{k}")));
    }
    let bad = refused(&home, &["backup", "--via", "stage", "--despool", "soon"], 2);
    assert!(bad.contains("soon"), "{bad}");
}
