//! What commands print: the `Output` trait every command's result implements, and
//! sizes and times for people.

use anyhow::{Context, Result};
use serde::Serialize;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use tapeloom_engine::escape_controls;

/// Set once stdout's reader has gone away (`tapeloom ls 1 | head -1`).
static CLOSED: AtomicBool = AtomicBool::new(false);

/// The first write error on stdout other than a closed pipe, reported by `finish`.
static FAILED: Mutex<Option<io::Error>> = Mutex::new(None);

/// Writes command output to stdout. A closed pipe ends the output quietly: this
/// and later writes are dropped and the command goes on to its own exit status, as
/// the work it was asked for is done; only its reader left. Any other write error
/// is kept for `finish`.
pub fn write_stdout(args: std::fmt::Arguments) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    if let Err(e) = io::stdout().lock().write_fmt(args) {
        failed(e);
    }
}

fn failed(e: io::Error) {
    if e.kind() == io::ErrorKind::BrokenPipe {
        CLOSED.store(true, Ordering::Relaxed);
        return;
    }
    let mut first = FAILED.lock().unwrap_or_else(|p| p.into_inner());
    if first.is_none() {
        *first = Some(e);
    }
}

/// Flushes stdout; the first write error other than a closed pipe, if any.
pub fn finish() -> Result<()> {
    if !CLOSED.load(Ordering::Relaxed) {
        if let Err(e) = io::stdout().lock().flush() {
            failed(e);
        }
    }
    let first = FAILED.lock().unwrap_or_else(|p| p.into_inner()).take();
    match first {
        Some(e) => Err(e).context("write to stdout"),
        None => Ok(()),
    }
}

/// Bytes as command output, quiet on a closed pipe as `write_stdout` is.
pub fn write_stdout_bytes(bytes: &[u8]) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    if let Err(e) = io::stdout().lock().write_all(bytes) {
        failed(e);
    }
}

/// `println!` for command output (`write_stdout`): quiet on a closed pipe.
macro_rules! outln {
    () => {
        $crate::output::write_stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// A command's result. `--json` prints its serialization; otherwise it prints itself
/// for people from the same values.
pub trait Output: Serialize {
    /// Prints the human form on stdout.
    fn print(&self);

    /// Why the command failed although it ran to its end (exit status 1), said on
    /// stderr after the output.
    fn failure(&self) -> Option<String> {
        None
    }

    /// The exit status.
    fn exit_code(&self) -> i32 {
        i32::from(self.failure().is_some())
    }
}

/// Prints `out` as one JSON document or for people, and returns its exit status.
pub fn emit<T: Output>(out: &T, json: bool) -> Result<i32> {
    if json {
        outln!("{}", serde_json::to_string_pretty(out)?);
    } else {
        out.print();
    }
    finish()?;
    if let Some(why) = out.failure() {
        eprintln!("tapeloom: error: {}", escape_controls(&why));
    }
    Ok(out.exit_code())
}

/// A size for people in binary units: `1.5 GiB`, `512 B`.
pub fn bytes(n: u64) -> String {
    bytesize::ByteSize(n).display().iec().to_string()
}

pub use tapeloom_proto::fmt::{mb_per_s, time, PathError};

/// Says on stderr, a line each after `prefix`, why each path of `errors` failed,
/// escaped for people (`escape_controls`).
pub fn path_errors(prefix: &str, errors: &[(String, String)]) {
    for (path, why) in errors {
        eprintln!(
            "{prefix}{}: {}",
            escape_controls(path),
            escape_controls(why)
        );
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes() {
        assert_eq!(super::bytes(0), "0 B");
        assert_eq!(super::bytes(1023), "1023 B");
        assert_eq!(super::bytes(1024), "1.0 KiB");
        assert_eq!(super::bytes(1536 << 20), "1.5 GiB");
        assert_eq!(super::bytes(256 << 20), "256.0 MiB");
        assert_eq!(super::bytes(1 << 40), "1.0 TiB");
    }
}
