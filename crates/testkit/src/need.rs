//! What a test needs from outside the workspace: a program (tgt's daemons,
//! promtool, Chromium, ...), a library loaded at run time (libiscsi) or a
//! permission of the machine (a mount namespace).
//!
//! One rule for all of them. Under a plain `cargo test`, a test whose part is
//! missing writes one line naming it and what to install, and passes over what
//! needs it. With `TAPELOOM_TEST_REQUIRE_ALL=1`, which `scripts/test.sh` sets, it
//! fails instead: the full run never passes by skipping.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The variable that turns a missing part into a failed test.
pub const REQUIRE_ALL: &str = "TAPELOOM_TEST_REQUIRE_ALL";

/// Whether the part a test needs is there: `found` is `Ok`, or says in one line
/// what is missing. Missing, the test's name and why are written to the
/// terminal as `skipped: TEST: WHY` and this returns false (the test returns
/// at once), or, when [`REQUIRE_ALL`] is `1`, it panics with that line, at the
/// test's call.
#[track_caller]
pub fn need(found: Result<(), String>) -> bool {
    let Err(why) = found else { return true };
    // libtest names each test's thread after the test.
    let test = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    if std::env::var_os(REQUIRE_ALL).is_some_and(|v| v == "1") {
        panic!("{test}: {why} ({REQUIRE_ALL}=1: a missing part fails the test)");
    }
    // Past the test harness's capture of `eprintln!`, so that the line shows
    // among the results of a plain `cargo test`.
    let _ = writeln!(std::io::stderr(), "skipped: {test}: {why}");
    false
}

/// The program `name`, found on PATH or in the sbin directories (often not on
/// a user's PATH, and where daemons' tools are); missing, the package that
/// brings it (Debian's name) is named.
pub fn program(name: &str, package: &str) -> Result<(), String> {
    match find_program(name) {
        Some(_) => Ok(()),
        None => Err(format!(
            "{name} is not installed (install the package {package})"
        )),
    }
}

/// Where `name` is, on PATH or in the sbin directories.
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(
            ["/usr/sbin", "/sbin", "/usr/local/sbin"]
                .iter()
                .map(PathBuf::from),
        )
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_is_found_or_named_with_its_package() {
        assert!(program("sh", "dash").is_ok());
        let e = program("no-such-program-here", "nothing").unwrap_err();
        assert_eq!(
            e,
            "no-such-program-here is not installed (install the package nothing)"
        );
        assert!(need(Ok(())));
    }
}
