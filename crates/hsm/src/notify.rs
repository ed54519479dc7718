//! The daemon's socket (`hsm.sock` in the home): while an `hsm daemon` runs,
//! `hsm release` asks it to mark each file it releases and `hsm recall` asks it
//! to take a file's mark off before writing its data back, each under the
//! file's write lease. A request is one line, `mark HEX` or `unmark HEX` (the
//! path in hexadecimal); the answer is `ok` or `error: WHY`.

use crate::error::{HsmError, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The socket of the home the daemon listens on.
pub const SOCKET: &str = "hsm.sock";

/// Asks the daemon of the home at `home_dir`, when one runs, to mark (`on`) or
/// unmark the file at `path`; nothing when none runs.
pub(crate) fn tell(home_dir: &Path, path: &Path, on: bool) -> Result<()> {
    use std::io::BufRead;
    use std::os::unix::ffi::OsStrExt;
    let sock = home_dir.join(SOCKET);
    let Ok(stream) = std::os::unix::net::UnixStream::connect(&sock) else {
        return Ok(());
    };
    let hex = hex::encode(path.as_os_str().as_bytes());
    let verb = if on { "mark" } else { "unmark" };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut line = String::new();
    let r = (&stream)
        .write_all(format!("{verb} {hex}\n").as_bytes())
        .and_then(|_| std::io::BufReader::new(&stream).read_line(&mut line));
    match r {
        Ok(_) if line.trim_end() == "ok" => Ok(()),
        Ok(_) => Err(HsmError::Daemon {
            request: verb,
            path: path.to_path_buf(),
            why: line.trim_end().to_string(),
        }),
        Err(e) => Err(HsmError::Daemon {
            request: verb,
            path: path.to_path_buf(),
            why: e.to_string(),
        }),
    }
}

/// The path `hex` spells in hexadecimal.
pub(crate) fn unhex(hex: &str) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = hex::decode(hex).ok().filter(|b| !b.is_empty())?;
    Some(PathBuf::from(std::ffi::OsStr::from_bytes(&bytes)))
}
