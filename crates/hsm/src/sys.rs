//! File-system calls that no safe crate offers: a file lease (`F_SETLEASE`).
//! Neither `nix` 0.29 nor `rustix` 1 wraps leases, so this module calls `fcntl`
//! itself; it is the crate's only unsafe code.
//!
//! A release punches a file's data out only while it holds a write lease on it.
//! The kernel grants a write lease only when no other open file description has
//! the file open (for reading or for writing, a mapping included), and while it
//! is held another open waits for the holder (which the kernel tells by SIGIO;
//! this process ignores SIGIO). So a file in use is never released, and nobody
//! opens one halfway through its release.

#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, BorrowedFd};

/// Takes a write lease on `fd` (opened for reading and writing): refused
/// (`EAGAIN`) when anyone else has the file open.
pub fn write_lease(fd: BorrowedFd<'_>) -> std::io::Result<()> {
    ignore_sigio();
    lease(fd, nix::libc::F_WRLCK)
}

/// Gives the lease on `fd` back.
pub fn unlease(fd: BorrowedFd<'_>) -> std::io::Result<()> {
    lease(fd, nix::libc::F_UNLCK)
}

fn lease(fd: BorrowedFd<'_>, kind: nix::libc::c_int) -> std::io::Result<()> {
    // SAFETY: F_SETLEASE takes an integer argument and touches no memory; the
    // descriptor is borrowed, so it is open for the call.
    let r = unsafe { nix::libc::fcntl(fd.as_raw_fd(), nix::libc::F_SETLEASE, kind) };
    match r {
        -1 => Err(std::io::Error::last_os_error()),
        _ => Ok(()),
    }
}

/// Ignores SIGIO, by which the kernel tells a lease holder that someone opens
/// the file (its default action would end the process).
fn ignore_sigio() {
    static DONE: std::sync::Once = std::sync::Once::new();
    DONE.call_once(|| {
        // SAFETY: setting a signal's disposition to ignore installs no handler
        // code, so nothing runs in signal context.
        let _ = unsafe {
            nix::sys::signal::signal(
                nix::sys::signal::Signal::SIGIO,
                nix::sys::signal::SigHandler::SigIgn,
            )
        };
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_lease_is_refused_while_another_has_the_file_open() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"data").unwrap();
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&p)
            .unwrap();
        write_lease(f.as_fd()).unwrap();
        unlease(f.as_fd()).unwrap();
        let other = std::fs::File::open(&p).unwrap();
        let e = write_lease(f.as_fd()).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(nix::libc::EAGAIN));
        drop(other);
        write_lease(f.as_fd()).unwrap();
        unlease(f.as_fd()).unwrap();
    }
}
