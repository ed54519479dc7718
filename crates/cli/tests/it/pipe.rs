//! Output into a pipe whose reader goes away (`tapeloom ls 1 | head -1`): the command
//! ends quietly with its own exit status, in human and JSON output alike.

use crate::common::*;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

/// A job of 3,000 files: its listing is far larger than a pipe's buffer.
fn many_files_job(root: &Path) -> std::path::PathBuf {
    let (home, src) = (root.join("home"), root.join("src"));
    for i in 0..3000 {
        write(
            &src.join(format!("d{}/file-with-a-longish-name-{i:05}", i % 10)),
            b"x",
        );
    }
    let b = ok(&home, &["backup", src.to_str().unwrap()]);
    assert_eq!(b["job_id"], 1, "{b}");
    home
}

/// Runs tapeloom with its stdout into a pipe, reads one line, closes the read end,
/// and returns the exit code and stderr.
fn read_one_line_and_close(home: &Path, args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(bin())
        .arg("--home")
        .arg(home)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(!line.is_empty());
    drop(out);
    let done = child.wait_with_output().unwrap();
    (
        done.status.code(),
        String::from_utf8_lossy(&done.stderr).into_owned(),
    )
}

#[test]
fn ls_into_a_closed_pipe_ends_quietly() {
    let t = tempfile::tempdir().unwrap();
    let home = many_files_job(t.path());
    let (code, err) = read_one_line_and_close(&home, &["ls", "1"]);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err, "");
    assert_eq!(code, Some(0));
    let (code, err) = read_one_line_and_close(&home, &["--json", "ls", "1"]);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err, "");
    assert_eq!(code, Some(0));
}

#[test]
fn a_shell_pipe_into_head_ends_quietly() {
    let t = tempfile::tempdir().unwrap();
    let home = many_files_job(t.path());
    for cmd in [
        "ls 1",
        "--json ls 1",
        "--json jobs",
        "man",
        "completions bash",
    ] {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "{{ \"$0\" --home \"$1\" {cmd}; echo \"status $?\" >&2; }} | head -c 1 >/dev/null"
            ))
            .arg(bin())
            .arg(&home)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{cmd}: {err}");
        assert_eq!(err, "status 0\n", "{cmd}");
    }
}
