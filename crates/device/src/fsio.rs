//! File system helpers for state files.

use std::io::Write;
use std::path::Path;

/// Replaces the file at `path` with `bytes`, atomically and durably: after a crash
/// the file holds either its old contents or all of `bytes`, never a mix, and once
/// this returns the new contents survive a power loss.
///
/// The bytes go to a temporary file in the same folder (so the rename cannot cross
/// file systems), which is flushed to disk (`fsync`) and renamed over `path`; then
/// the folder is flushed too, so that the rename itself is on disk. The new file
/// gets the permissions a plain create would (0666 less the umask). On error the
/// temporary file is removed and `path` is unchanged.
///
/// Every state file tapeloom keeps (a virtual library's `library.json`, a home's
/// `devices.json`) is written with this.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut builder = tempfile::Builder::new();
    builder.prefix(".tmp-").suffix(".partial");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let mut tmp = builder.tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    sync_dir(dir)
}

/// Flushes a folder's entries (a rename in it) to disk.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        std::fs::File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

/// Starts writing the dirty pages of `file` in `offset..offset + len` to disk,
/// without waiting for them (`sync_file_range` with `SYNC_FILE_RANGE_WRITE`).
pub fn start_writeback(file: &std::fs::File, offset: u64, len: u64) -> std::io::Result<()> {
    sync_range(file, offset, len, libc::SYNC_FILE_RANGE_WRITE)
}

/// Writes the dirty pages of `file` in `offset..offset + len` to disk and waits until
/// they are written. Only the data: unlike `fdatasync`, this makes no promise about
/// the file's size or the disk's cache, so it orders page-cache use, not durability.
pub fn wait_writeback(file: &std::fs::File, offset: u64, len: u64) -> std::io::Result<()> {
    sync_range(
        file,
        offset,
        len,
        libc::SYNC_FILE_RANGE_WAIT_BEFORE
            | libc::SYNC_FILE_RANGE_WRITE
            | libc::SYNC_FILE_RANGE_WAIT_AFTER,
    )
}

fn sync_range(file: &std::fs::File, offset: u64, len: u64, flags: u32) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let (Ok(off), Ok(n)) = (i64::try_from(offset), i64::try_from(len)) else {
        return Err(std::io::Error::from(std::io::ErrorKind::InvalidInput));
    };
    // SAFETY: sync_file_range reads no memory of this process; the descriptor is
    // borrowed from a live File for the duration of the call.
    let r = unsafe { libc::sync_file_range(file.as_raw_fd(), off, n, flags) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_file_and_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("state.json");
        write_atomic(&p, b"first").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"first");
        write_atomic(&p, b"second, longer").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"second, longer");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("state.json")]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let plain = dir.path().join("plain");
            std::fs::write(&plain, b"x").unwrap();
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode();
            assert_eq!(mode(&p), mode(&plain), "the mode a plain create gives");
        }
    }

    #[test]
    fn a_missing_folder_is_an_error_and_creates_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("no/such/state.json");
        let e = write_atomic(&p, b"x").unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
        assert!(!p.exists());
    }
}
