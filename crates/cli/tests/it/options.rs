//! Every numeric option of every command (the table `numeric-options.txt`, which
//! a unit test of the binary checks against the options the command line has) is
//! given 0, -1, a number past 64 bits, 16E, 2^64 and 2^63. A value the table does
//! not list as valid is refused in one line on stderr before any work is done:
//! exit 2 from the argument parser (1 for a JOB that may also be a path, which
//! the command reads first). A valid one runs the command, which ends in success
//! or in a one-line error. Never a panic (exit 101), never past a timeout.

use crate::common::numeric_table::{rows, Row, PROBES};
use crate::common::*;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The most one run may take: a refused value takes milliseconds, a valid one
/// runs its command on a tiny tree or a fresh library.
const TIMEOUT: Duration = Duration::from_secs(60);

/// What one run ended with.
struct Ran {
    argv: Vec<String>,
    code: i32,
    stderr: String,
}

/// Runs tapeloom with `--home home` and `argv`, killing it past `TIMEOUT`.
fn run_bounded(home: &Path, argv: &[String]) -> Ran {
    let mut child = Command::new(bin())
        .arg("--home")
        .arg(home)
        .args(argv)
        .env("TAPELOOM_PASSPHRASE", "not asked")
        .env_remove("TAPELOOM_SERVER")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tapeloom");
    let start = Instant::now();
    while child.try_wait().expect("wait for tapeloom").is_none() {
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{argv:?} ran past {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = child.wait_with_output().expect("wait for tapeloom");
    Ran {
        argv: argv.to_vec(),
        code: out.status.code().unwrap_or(-1),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Whether `ran` refused `probe` the way a bad value must be: one line on stderr
/// naming the value, and exit 2 (or 1 for a JOB the command reads itself).
fn refused(row: &Row, probe: &str, ran: &Ran) -> Result<(), String> {
    let lines: Vec<&str> = ran.stderr.lines().collect();
    let codes: &[i32] = if row.option == "<args>" { &[1] } else { &[2] };
    if !codes.contains(&ran.code) {
        return Err(format!("exit {} (want {codes:?})", ran.code));
    }
    let value = format!("'{}'", row.form.replace("{}", probe));
    match lines.as_slice() {
        [line] if line.starts_with("tapeloom: error: ") && line.contains(&value) => Ok(()),
        _ => Err(format!("not one error line naming {value}")),
    }
}

/// Whether `ran`, given a valid value, ended as a command may: done, or one line
/// saying why not (exit 1).
fn ended(ran: &Ran) -> Result<(), String> {
    match ran.code {
        0 => Ok(()),
        1 if ran
            .stderr
            .lines()
            .filter(|l| l.starts_with("tapeloom: error: "))
            .count()
            == 1 =>
        {
            Ok(())
        }
        c => Err(format!("exit {c}")),
    }
}

#[test]
fn every_numeric_option_refuses_bad_values_in_one_line_and_never_panics() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    write(&src.join("file"), b"a small file");
    let src = src.to_str().unwrap();
    let mut failures = Vec::new();
    let (mut runs, mut refusals) = (0, 0);
    for (r, row) in rows().iter().enumerate() {
        for (p, probe) in PROBES.iter().enumerate() {
            // A home and a new path of its own for every run.
            let home = t.path().join(format!("home-{r}-{p}"));
            let new = t.path().join(format!("new-{r}-{p}"));
            let argv = row.argv(probe, src, new.to_str().unwrap());
            let ran = run_bounded(&home, &argv);
            runs += 1;
            let verdict = if ran.code == 101 || ran.stderr.contains("panicked") {
                Err("panicked".to_string())
            } else if row.takes(probe) {
                ended(&ran)
            } else {
                refusals += 1;
                refused(row, probe, &ran)
            };
            if let Err(why) = verdict {
                failures.push(format!("{:?}: {why}: {}", ran.argv, ran.stderr.trim_end()));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The table is not empty, and most of what it gives is refused.
    assert!(
        runs >= 6 * 50 && refusals > runs * 3 / 4,
        "{runs} runs, {refusals} refusals"
    );
}
