//! Helpers for the end-to-end tests: run the binary, make trees, compare trees,
//! and pass over (or, under `scripts/test.sh`, fail) a test whose outside part is
//! missing (`need`).

pub mod keyed;
mod keys;
pub mod numeric_table;
pub mod server_kit;
mod tree;

pub use keys::check_keys;
pub use tapeloom_testkit::need::{need, program};
pub use tree::{
    assert_same_tree, copy_tree, ino, is_empty_or_absent, meta, noise, numbered_files, rich_tree,
    set_times, source_tree, tree, write,
};

use serde_json::Value;
use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_tapeloom")
}

/// Whether the binary reads the test hooks (`TAPELOOM_FAULTS`, `TAPELOOM_NOW`,
/// `TAPELOOM_CLOCK_SPEED`, `TAPELOOM_TEST_DAMAGE_CHUNK`,
/// `TAPELOOM_TEST_WALK_DELAY_MS`, `TAPELOOM_TEST_PANIC_JOB`): it was built with
/// the cargo feature `test-hooks`, as scripts/test.sh builds it. When not, says
/// so in one line on stderr (past the test harness's capture, so a plain `cargo
/// test` shows it) and the calling test returns early: `if !test_hooks() { return; }`.
pub fn test_hooks() -> bool {
    if cfg!(feature = "test-hooks") {
        return true;
    }
    use std::io::Write;
    let name = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    let _ = writeln!(
        std::io::stderr(),
        "{name}: skipped, needs the cargo feature test-hooks (--features tapeloom/test-hooks)"
    );
    false
}

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// The path as text (the tests' paths are UTF-8).
pub fn p(x: &Path) -> &str {
    x.to_str().unwrap()
}

/// Runs tapeloom with `--home home --json` and returns (exit code, JSON, stderr).
pub fn run(home: &Path, args: &[&OsStr]) -> (i32, Value, String) {
    run_env(home, &[], args)
}

/// Runs tapeloom with `--home home --json` and the variables `env` (never set in
/// this process, which all the tests share); (exit code, JSON, stderr).
pub fn run_env<A: AsRef<OsStr>>(
    home: &Path,
    env: &[(&str, &str)],
    args: &[A],
) -> (i32, Value, String) {
    let out = Command::new(bin())
        .arg("--home")
        .arg(home)
        .arg("--json")
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run tapeloom");
    parse(out)
}

/// Runs tapeloom with `--home home` for people (no `--json`) and the variables
/// `env`; (exit code, stdout, stderr), both as the bytes printed.
pub fn run_human(home: &Path, args: &[&OsStr], env: &[(&str, &str)]) -> (i32, Vec<u8>, Vec<u8>) {
    let out = Command::new(bin())
        .arg("--home")
        .arg(home)
        .args(args)
        .envs(env.iter().copied())
        .env_remove("TAPELOOM_SERVER")
        .output()
        .expect("run tapeloom");
    (out.status.code().unwrap_or(-1), out.stdout, out.stderr)
}

/// Runs tapeloom with `--home home --json` and the fault spec `spec`
/// (`TAPELOOM_FAULTS`, docs/FAULTS.md); (exit code, JSON, stderr).
pub fn run_with(home: &Path, spec: &str, args: &[&str]) -> (i32, Value, String) {
    run_env(home, &[("TAPELOOM_FAULTS", spec)], args)
}

pub fn parse(out: Output) -> (i32, Value, String) {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = if out.stdout.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not one JSON document ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    };
    (out.status.code().unwrap_or(-1), v, stderr)
}

/// Runs and insists on success.
pub fn ok(home: &Path, args: &[&str]) -> Value {
    ok_env(home, &[], args)
}

/// Runs with the variables `env` ([`run_env`]) and insists on success.
pub fn ok_env(home: &Path, env: &[(&str, &str)], args: &[&str]) -> Value {
    let (code, v, err) = run_env(home, env, args);
    assert_eq!(code, 0, "tapeloom {args:?} failed: {err}");
    v
}

/// A virtual library in `home`: `drives` drives, `slots` slots of `capacity`
/// (`256M`, ...).
pub fn library(home: &Path, drives: u32, slots: u32, capacity: &str) {
    library_with(home, drives, slots, capacity, &[]);
}

/// [`library`] with more options of `library create` (`--model lto3`, ...).
pub fn library_with(home: &Path, drives: u32, slots: u32, capacity: &str, more: &[&str]) {
    let (d, s) = (drives.to_string(), slots.to_string());
    let mut args = vec!["library", "create", "--drives", &d, "--slots", &s];
    args.extend(["--capacity", capacity]);
    args.extend_from_slice(more);
    ok(home, &args);
}

/// Restores job `job` to `out` and insists it is identical to `src`.
pub fn restores_identical(home: &Path, job: &str, src: &Path, out: &Path) {
    ok(home, &["restore", job, "--to", out.to_str().unwrap()]);
    assert_same_tree(src, out);
}

/// Deletes the catalog, rebuilds it from the tapes alone, and restores job `job`
/// identical to `src` into `out`.
pub fn restores_identical_from_tapes_alone(home: &Path, job: &str, src: &Path, out: &Path) {
    forget_catalog(home);
    ok(home, &["catalog", "rebuild"]);
    restores_identical(home, job, src, out);
}

/// The job ids a `jobs --json` document lists.
pub fn job_ids(v: &Value) -> Vec<i64> {
    let jobs = v["jobs"].as_array().unwrap();
    jobs.iter().map(|j| j["job_id"].as_i64().unwrap()).collect()
}

/// Cartridge `barcode` of a `library status --json` document.
pub fn cartridge_in(status: &Value, barcode: &str) -> Value {
    (status["cartridges"].as_array().unwrap().iter())
        .find(|c| c["barcode"] == barcode)
        .unwrap_or_else(|| panic!("no {barcode} in {status}"))
        .clone()
}

/// Cartridge `barcode` as `library status` shows it now.
pub fn cartridge(home: &Path, barcode: &str) -> Value {
    cartridge_in(&ok(home, &["library", "status"]), barcode)
}

/// Size of the cartridges' data files in the home's virtual library.
pub fn tape_bytes(home: &Path) -> u64 {
    let dir = home.join("library").join("tapes");
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "data"))
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}

/// Runs tapeloom with `--home home` and `args` (a backup) in a child process and
/// kills it (SIGKILL) once the home's tapes have grown by `grown` bytes.
pub fn killed_once_tape_grew(home: &Path, args: &[&OsStr], grown: u64) {
    let before = tape_bytes(home);
    let mut child = Command::new(bin())
        .arg("--home")
        .arg(home)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while tape_bytes(home) < before + grown {
        assert!(t.elapsed().as_secs() < 60, "the tape did not grow");
        assert!(child.try_wait().unwrap().is_none(), "the backup ended");
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Whether a chunk file is anywhere under `dir` (a stage), which may change while
/// it is looked at.
pub fn holds_chunk_file(dir: &Path) -> bool {
    std::fs::read_dir(dir).into_iter().flatten().any(|e| {
        let p = e.unwrap().path();
        p.extension().is_some_and(|x| x == "tlc") || (p.is_dir() && holds_chunk_file(&p))
    })
}

/// Deletes a home's catalog (and its WAL files), as if it were lost; on
/// PostgreSQL, every table of its database.
pub fn forget_catalog(home: &Path) {
    if catalog_url(home).is_some() {
        sql_exec(home, "DROP SCHEMA public CASCADE; CREATE SCHEMA public");
        return;
    }
    for f in ["catalog.sqlite", "catalog.sqlite-wal", "catalog.sqlite-shm"] {
        let _ = std::fs::remove_file(home.join(f));
    }
}

/// The PostgreSQL catalog the home names in its `home.toml`, if any: under
/// `TAPELOOM_TEST_PG_URL` every new home has one (`scripts/test.sh` runs the
/// suite so a second time).
pub fn catalog_url(home: &Path) -> Option<String> {
    let text = std::fs::read_to_string(home.join("home.toml")).ok()?;
    let v: toml::Table = text.parse().ok()?;
    v.get("catalog")?.as_str().map(str::to_string)
}

/// The home's catalog, on whichever database it is; on PostgreSQL working for
/// the home's name, as the home's own commands do.
pub fn open_catalog(home: &Path) -> tapeloom_catalog::Catalog {
    match catalog_url(home) {
        Some(url) => {
            let mut c = tapeloom_catalog::Catalog::connect(&url).unwrap();
            c.set_host(&tapeloom_engine::home_name(home).unwrap());
            c
        }
        None => tapeloom_catalog::Catalog::open(&home.join("catalog.sqlite")).unwrap(),
    }
}

/// The rows `query` finds in the home's catalog (SQLite or PostgreSQL), each
/// value as text (NULL as none). Values are written into the query: the two
/// databases share no form of parameters here.
pub fn sql(home: &Path, query: &str) -> Vec<Vec<Option<String>>> {
    sql_try(home, query).unwrap_or_else(|e| panic!("{query}: {e}"))
}

/// [`sql`], or why it failed (a catalog not made yet, a busy one).
pub fn sql_try(home: &Path, query: &str) -> Result<Vec<Vec<Option<String>>>, String> {
    if let Some(url) = catalog_url(home) {
        let mut c = postgres::Client::connect(&url, postgres::NoTls).map_err(|e| e.to_string())?;
        let rows = c.simple_query(query).map_err(|e| e.to_string())?;
        return Ok((rows.iter())
            .filter_map(|m| match m {
                postgres::SimpleQueryMessage::Row(r) => {
                    Some((0..r.len()).map(|i| r.get(i).map(str::to_string)).collect())
                }
                _ => None,
            })
            .collect());
    }
    let file = home.join("catalog.sqlite");
    if !file.exists() {
        return Err(format!("{} does not exist", file.display()));
    }
    let c = rusqlite::Connection::open(file).map_err(|e| e.to_string())?;
    let mut st = c.prepare(query).map_err(|e| e.to_string())?;
    let n = st.column_count();
    let rows = st.query_map([], |r| {
        (0..n)
            .map(|i| {
                use rusqlite::types::ValueRef;
                Ok(match r.get_ref(i)? {
                    ValueRef::Null => None,
                    ValueRef::Integer(v) => Some(v.to_string()),
                    ValueRef::Real(v) => Some(v.to_string()),
                    ValueRef::Text(t) | ValueRef::Blob(t) => {
                        Some(String::from_utf8_lossy(t).into_owned())
                    }
                })
            })
            .collect::<rusqlite::Result<Vec<_>>>()
    });
    (rows.and_then(|r| r.collect::<rusqlite::Result<_>>())).map_err(|e| e.to_string())
}

/// A job's status and the reasons among its errors, from the home's catalog.
pub fn job_state(home: &Path, job: i64) -> (String, Vec<String>) {
    let status = sql(home, &format!("SELECT status FROM jobs WHERE id = {job}"));
    let status = status[0][0].clone().unwrap();
    let q = format!("SELECT reason FROM job_errors WHERE job_id = {job}");
    let reasons = sql(home, &q).into_iter().filter_map(|r| r[0].clone());
    (status, reasons.collect())
}

/// Every job of the home's catalog: (id, name, status), by id.
pub fn catalog_jobs(home: &Path) -> Vec<(i64, String, String)> {
    let rows = sql(home, "SELECT id, name, status FROM jobs ORDER BY id");
    (rows.into_iter())
        .map(|r| {
            let text = |i: usize| r[i].clone().unwrap_or_default();
            (text(0).parse().unwrap(), text(1), text(2))
        })
        .collect()
}

/// The one number `query` finds in the home's catalog.
pub fn sql_i64(home: &Path, query: &str) -> i64 {
    let rows = sql(home, query);
    let v = rows.first().and_then(|r| r.first().cloned().flatten());
    v.and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{query}: {rows:?}"))
}

/// Runs statements on the home's catalog (SQLite or PostgreSQL), as a damaged
/// catalog or another tool might have left it (SQLite's foreign keys off).
pub fn sql_exec(home: &Path, statements: &str) {
    if let Some(url) = catalog_url(home) {
        let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        // Foreign keys off, as for SQLite (the tests connect as a superuser).
        let all = format!("SET session_replication_role = replica; {statements}");
        c.batch_execute(&all).unwrap();
        return;
    }
    let c = rusqlite::Connection::open(home.join("catalog.sqlite")).unwrap();
    c.execute_batch(&format!("PRAGMA foreign_keys = OFF; {statements}"))
        .unwrap();
}

/// `bytes` as a literal of the home's catalog's SQL (a BLOB or a BYTEA).
pub fn blob(home: &Path, bytes: &[u8]) -> String {
    let hex = hex::encode(bytes);
    match catalog_url(home) {
        Some(_) => format!("'\\x{hex}'::bytea"),
        None => format!("x'{hex}'"),
    }
}

/// Writes chunk 0 of `stream` of `job` (`blocks` blocks) on the stage at `stage`, as
/// a backup spooling to it would, and records it in the home's catalog.
pub fn stage_chunk(
    home: &Path,
    stage: &Path,
    job: i64,
    stream: u16,
    blocks: usize,
) -> tapeloom_catalog::StagedChunk {
    use tapeloom_format::{Kind, StreamPacker};
    let c = open_catalog(home);
    let s = c.stage_by_path(stage).unwrap().expect("a stage");
    let mut p = StreamPacker::new(stream, job as u64, 4096);
    for _ in 0..blocks {
        p.record(Kind::Data, &[7u8; 4000]);
        p.finish_block();
    }
    let mut w =
        tapeloom_engine::stage::ChunkWriter::create(stage, job, job as u64, stream, 0, 0).unwrap();
    for b in &mut p.ready {
        w.push(b).unwrap();
    }
    let row = w.finish(s.id).unwrap();
    c.add_staged_chunk(&row).unwrap();
    row
}

/// Marks chunk 0 of `stream` of `job` as on tape in the home's catalog.
pub fn despool(home: &Path, job: i64, stream: u16) {
    let c = open_catalog(home);
    c.mark_chunk_despooled(job, stream, 0).unwrap();
}

/// A one-line error naming all of `words`, and a non-zero exit.
pub fn assert_one_line_error(code: i32, err: &str, words: &[&str]) {
    assert_ne!(code, 0, "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].starts_with("tapeloom: error: "), "{err}");
    for w in words {
        assert!(lines[0].contains(w), "{w:?} not in {err}");
    }
}

/// A virtual library of one drive and two cartridges of 64 MiB in `home`.
pub fn small_library(home: &Path) {
    let args = ["--drives", "1", "--slots", "2", "--capacity", "64M"];
    ok(home, &[&["library", "create"][..], &args].concat());
}
