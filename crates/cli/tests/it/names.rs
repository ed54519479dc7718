//! Names from a tape, a catalog or a client are printed for people with their
//! control characters escaped (`\x1b`, `\n`, `\t`, ...) and bytes that are not
//! UTF-8 as `\xNN`, so a file named with an escape sequence never reaches the
//! terminal as one; `--json` keeps each name as it was.

use crate::common::*;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The names of the tree: raw bytes, and how people see them.
const NAMES: [(&[u8], &str); 4] = [
    (b"\x1b[2Jclear", "\\x1b[2Jclear"),
    (b"new\nline", "new\\nline"),
    (b"\xff\xfebad", "\\xff\\xfebad"),
    (b"plain name", "plain name"),
];

/// A job name holding an escape sequence that would set the terminal's title.
const JOB_NAME: &str = "nightly\x1b]0;owned\x07";

/// Backs up a tree of the names; the job's id.
fn job_of_names(root: &Path, home: &Path) -> String {
    let src = root.join("src");
    for (i, (name, _)) in NAMES.iter().enumerate() {
        write(
            &src.join(OsStr::from_bytes(name)),
            format!("{i}").as_bytes(),
        );
    }
    library(home, 1, 2, "256M");
    let args = ["backup", src.to_str().unwrap(), "--name", JOB_NAME];
    let b = ok(home, &args);
    b["job_id"].as_i64().unwrap().to_string()
}

/// Runs for people; (exit code, stdout, stderr) as text, after checking that
/// neither holds a control character other than the newlines ending lines.
fn people(home: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let a: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    let (code, out, err) = run_human(home, &a, env);
    for (what, bytes) in [("stdout", &out), ("stderr", &err)] {
        let text = std::str::from_utf8(bytes)
            .unwrap_or_else(|e| panic!("{args:?}: {what} is not UTF-8 ({e}): {bytes:?}"));
        let raw = text.chars().find(|c| c.is_control() && *c != '\n');
        assert_eq!(
            raw, None,
            "{args:?}: a raw control character on {what}: {text:?}"
        );
    }
    let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
    (code, text(out), text(err))
}

#[test]
fn ls_and_jobs_print_names_escaped_and_json_keeps_them() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let job = job_of_names(t.path(), &home);

    let (code, out, err) = people(&home, &["ls", &job], &[]);
    assert_eq!(code, 0, "{err}");
    // One line per entry (the names and the root): a newline in a name is no line
    // break.
    assert_eq!(out.lines().count(), NAMES.len() + 1, "{out}");
    for (_, shown) in NAMES {
        let line = out.lines().find(|l| l.ends_with(&format!(" {shown}")));
        assert!(line.is_some(), "no line ends with {shown:?}: {out}");
    }

    // JSON keeps each name as before: UTF-8 as it is (control characters too),
    // bytes that are not UTF-8 as \xNN.
    let v = ok(&home, &["ls", &job]);
    let paths: Vec<&str> = (v["entries"].as_array().unwrap().iter())
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    for want in ["\x1b[2Jclear", "new\nline", "\\xff\\xfebad", "plain name"] {
        assert!(paths.contains(&want), "{want:?} not in {paths:?}");
    }

    // A path asked for that the job lacks is refused in one line, escaped.
    let (code, _, err) = people(&home, &["ls", &job, "\x1b[2Jnone"], &[]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("has no path \\x1b[2Jnone"), "{err}");

    let (code, out, err) = people(&home, &["jobs"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("nightly\\x1b]0;owned\\x07"), "{out}");
    let v = ok(&home, &["jobs"]);
    assert_eq!(v["jobs"][0]["name"], JOB_NAME, "{v}");
}

#[test]
fn restore_and_verify_print_names_escaped() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let job = job_of_names(t.path(), &home);
    // Files already there that differ are kept, and named: a file of other
    // contents at each name, but a directory in the way of the first one.
    let out = t.path().join("out");
    for (name, _) in &NAMES[1..] {
        write(&out.join(OsStr::from_bytes(name)), b"other contents");
    }
    std::fs::create_dir_all(out.join(OsStr::from_bytes(NAMES[0].0))).unwrap();
    let to = out.to_str().unwrap();

    let (code, stdout, err) = people(&home, &["restore", &job, "--to", to], &[]);
    assert_eq!(code, 0, "{err}");
    for (_, shown) in NAMES {
        assert!(
            stdout.contains(&format!("kept {shown}: it differs")),
            "{stdout}"
        );
    }

    // Overwritten, the directory is in the way: an error line on stderr names it.
    let args = ["restore", &job, "--to", to, "--overwrite", "always"];
    let (code, _, err) = people(&home, &args, &[]);
    assert_eq!(code, 1, "{err}");
    let shown = NAMES[0].1;
    let want = format!("tapeloom: {shown}: cannot restore {shown}: a directory is in the way");
    assert!(err.lines().any(|l| l == want), "{err}");
    // ... while --json keeps the path as it was.
    let a: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    let (code, r, _) = run(&home, &a);
    assert_eq!(code, 1);
    assert_eq!(r["errors"][0]["path"], "\x1b[2Jclear", "{r}");

    // Every block unreadable (TAPELOOM_FAULTS): verify names each damaged entry.
    if !test_hooks() {
        return;
    }
    let faults = [("TAPELOOM_FAULTS", "read-error-rate=1")];
    let (code, stdout, err) = people(&home, &["verify", &job], &faults);
    assert_eq!(code, 1, "{err}");
    for (_, shown) in NAMES {
        assert!(
            stdout.lines().any(|l| l == format!("damaged: {shown}")),
            "{stdout}"
        );
    }
}
