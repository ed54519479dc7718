//! File-system calls that no safe crate offers: a file lease (`F_SETLEASE`) and
//! fanotify's pre-content events (`FAN_PRE_ACCESS`, Linux 6.14). Neither `nix`
//! 0.29 nor `rustix` 1 wraps leases, and `nix`'s fanotify knows neither the
//! pre-content class's events nor an answer with an errno, nor an answer by the
//! number of a descriptor another process holds (the guardian's). So this
//! module calls `fcntl`, `fanotify_init` and `fanotify_mark` itself; it is the
//! crate's only unsafe code.
//!
//! A release punches a file's data out only while it holds a write lease on it.
//! The kernel grants a write lease only when no other open file description has
//! the file open (for reading or for writing, a mapping included), and while it
//! is held another open waits for the holder (which the kernel tells by SIGIO;
//! this process ignores SIGIO). So a file in use is never released, and nobody
//! opens one halfway through its release.

#![allow(unsafe_code)]

use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

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

const FAN_CLOEXEC: u32 = 0x0000_0001;
const FAN_NONBLOCK: u32 = 0x0000_0002;
const FAN_CLASS_PRE_CONTENT: u32 = 0x0000_0008;
const FAN_UNLIMITED_QUEUE: u32 = 0x0000_0010;
const FAN_MARK_ADD: u32 = 0x0000_0001;
const FAN_MARK_REMOVE: u32 = 0x0000_0002;
const FAN_MARK_FLUSH: u32 = 0x0000_0080;
const FAN_OPEN_PERM: u64 = 0x0001_0000;
const FAN_PRE_ACCESS: u64 = 0x0010_0000;
const FAN_Q_OVERFLOW: u64 = 0x0000_4000;
const FAN_ALLOW: u32 = 0x01;
const FAN_DENY: u32 = 0x02;
/// `FAN_DENY_ERRNO(errno)`: the errno's place in an answer.
const FAN_ERRNO_SHIFT: u32 = 24;
const METADATA_VERSION: u8 = 3;
/// Bytes of `struct fanotify_event_metadata`.
const METADATA_LEN: usize = 24;

/// Which events a group's marks ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watch {
    /// Before a file's content is read, written or mapped (Linux 6.14 and later).
    PreAccess,
    /// When a file is opened (older kernels).
    OpenPerm,
}

/// A fanotify group of the pre-content class, whose events wait for an answer.
pub struct Group {
    fd: OwnedFd,
    /// What its marks ask for.
    pub watch: Watch,
}

/// One event: the file, as a descriptor opened for reading and writing that
/// raises no events of its own; its number is what the answer names.
pub struct Event {
    /// The file, open.
    pub fd: OwnedFd,
    /// The process whose access waits.
    pub pid: i32,
}

impl Group {
    /// A new group (needs CAP_SYS_ADMIN), non-blocking.
    pub fn new() -> std::io::Result<Group> {
        let flags = FAN_CLASS_PRE_CONTENT | FAN_CLOEXEC | FAN_NONBLOCK | FAN_UNLIMITED_QUEUE;
        let event_flags =
            (nix::libc::O_RDWR | nix::libc::O_LARGEFILE | nix::libc::O_CLOEXEC) as u32;
        // SAFETY: fanotify_init takes two integers and returns a new descriptor
        // (or -1), which is owned here from then on.
        let fd = unsafe { nix::libc::fanotify_init(flags, event_flags) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by fanotify_init and nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Group {
            fd,
            watch: Watch::PreAccess,
        })
    }

    /// The group a guardian inherited as descriptor `n`: refused unless `n` is
    /// an open fanotify descriptor.
    pub fn adopt(n: RawFd) -> std::io::Result<Group> {
        let what = std::fs::read_link(format!("/proc/self/fd/{n}"))?;
        if what.as_os_str() != "anon_inode:[fanotify]" {
            return Err(std::io::Error::other(format!(
                "descriptor {n} is {}, not a fanotify group",
                what.display()
            )));
        }
        // SAFETY: `n` is open and is a fanotify group (checked above); it was
        // inherited for this process to own, and nothing else here owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(n) };
        Ok(Group {
            fd,
            watch: Watch::PreAccess,
        })
    }

    /// Marks (`on`) or unmarks the file at `path`, so that reads, writes and
    /// mappings of it (or, on an older kernel, opens) wait for an answer. The
    /// file is not opened: opening a file another process holds a lease on would
    /// wait for that process. The first mark finds out which event the kernel
    /// knows.
    pub fn mark_path(&mut self, path: &std::path::Path, on: bool) -> std::io::Result<()> {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::from_raw_os_error(nix::libc::EINVAL))?;
        let how = if on { FAN_MARK_ADD } else { FAN_MARK_REMOVE };
        match self.mark(nix::libc::AT_FDCWD, Some(&c), how, self.watch) {
            Err(e)
                if on
                    && e.raw_os_error() == Some(nix::libc::EINVAL)
                    && self.watch == Watch::PreAccess =>
            {
                self.watch = Watch::OpenPerm;
                self.mark(nix::libc::AT_FDCWD, Some(&c), how, Watch::OpenPerm)
            }
            Err(e) if !on && e.raw_os_error() == Some(nix::libc::ENOENT) => Ok(()),
            r => r,
        }
    }

    /// Takes every mark of the group off: no access raises an event any more.
    pub fn flush_marks(&self) -> std::io::Result<()> {
        // SAFETY: with FAN_MARK_FLUSH the kernel reads no path; the group's
        // descriptor is open.
        let r = unsafe {
            nix::libc::fanotify_mark(
                self.fd.as_raw_fd(),
                FAN_MARK_FLUSH,
                0,
                nix::libc::AT_FDCWD,
                std::ptr::null(),
            )
        };
        match r {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        }
    }

    /// Takes the mark off the file open as `fd`: it raises no more events.
    pub fn unmark_file(&self, fd: BorrowedFd<'_>) -> std::io::Result<()> {
        match self.mark(fd.as_raw_fd(), None, FAN_MARK_REMOVE, self.watch) {
            Err(e) if e.raw_os_error() == Some(nix::libc::ENOENT) => Ok(()),
            r => r,
        }
    }

    fn mark(
        &self,
        dirfd: RawFd,
        path: Option<&std::ffi::CStr>,
        how: u32,
        watch: Watch,
    ) -> std::io::Result<()> {
        // An open waits too: a copy tool looks for a file's data (`SEEK_DATA`)
        // after opening it and before reading, and that look raises no event.
        let what = match watch {
            Watch::PreAccess => FAN_PRE_ACCESS | FAN_OPEN_PERM,
            Watch::OpenPerm => FAN_OPEN_PERM,
        };
        let path = path.map_or(std::ptr::null(), |p| p.as_ptr());
        // SAFETY: `path` is null (the descriptor's own inode is marked; it is open
        // for the call) or a NUL-terminated string that outlives the call.
        let r = unsafe { nix::libc::fanotify_mark(self.fd.as_raw_fd(), how, what, dirfd, path) };
        match r {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        }
    }

    /// Waits up to `timeout` for events.
    pub fn wait(&self, timeout: std::time::Duration) {
        let mut fds = [nix::poll::PollFd::new(
            self.fd.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
        let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(ms));
    }

    /// The events waiting (none when there are none now). An overflow of the
    /// queue, which a group of unlimited queue never has, is an error.
    pub fn events(&self) -> std::io::Result<Vec<Event>> {
        let mut buf = vec![0u8; 64 * 1024];
        let n = match (&std::fs::File::from(self.fd.try_clone()?)).read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut out = Vec::new();
        let mut at = 0;
        while n - at >= METADATA_LEN {
            let m = &buf[at..at + METADATA_LEN];
            let len = u32::from_ne_bytes([m[0], m[1], m[2], m[3]]) as usize;
            let mask = u64::from_ne_bytes([m[8], m[9], m[10], m[11], m[12], m[13], m[14], m[15]]);
            let fd = i32::from_ne_bytes([m[16], m[17], m[18], m[19]]);
            let pid = i32::from_ne_bytes([m[20], m[21], m[22], m[23]]);
            if m[4] != METADATA_VERSION || len < METADATA_LEN || mask & FAN_Q_OVERFLOW != 0 {
                return Err(std::io::Error::other(
                    "fanotify: an event of another version, or the queue overflowed",
                ));
            }
            if fd >= 0 {
                // SAFETY: the kernel installed `fd` in this process for this event;
                // nothing else owns it.
                let fd = unsafe { OwnedFd::from_raw_fd(fd) };
                out.push(Event { fd, pid });
            }
            at += len;
        }
        Ok(out)
    }

    /// Answers the event whose descriptor is number `fd`: the access goes on, or
    /// fails with EIO.
    pub fn answer(&self, fd: RawFd, allow: bool) -> std::io::Result<()> {
        let response = match allow {
            true => FAN_ALLOW,
            false => FAN_DENY | ((nix::libc::EIO as u32) << FAN_ERRNO_SHIFT),
        };
        let mut bytes = [0u8; 8];
        bytes[..4].copy_from_slice(&fd.to_ne_bytes());
        bytes[4..].copy_from_slice(&response.to_ne_bytes());
        match (&std::fs::File::from(self.fd.try_clone()?)).write(&bytes) {
            Ok(8) => Ok(()),
            Ok(_) => Err(std::io::Error::other("fanotify: a short answer")),
            // The event was answered already (the guardian, or a timeout).
            Err(e) if e.raw_os_error() == Some(nix::libc::ENOENT) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// A descriptor of the group that a child process inherits (no
    /// close-on-exec); the caller closes it once the child is started.
    pub fn inheritable(&self) -> std::io::Result<OwnedFd> {
        let fd = nix::fcntl::fcntl(self.fd.as_raw_fd(), nix::fcntl::FcntlArg::F_DUPFD(3))
            .map_err(std::io::Error::from)?;
        // SAFETY: F_DUPFD returned a new descriptor nothing else owns; it has
        // no close-on-exec flag.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }
}

impl AsFd for Group {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Set when SIGTERM or SIGINT came.
pub static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_stop(_: nix::libc::c_int) {
    STOP.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Sets [`STOP`] on SIGTERM and SIGINT.
pub fn stop_on_signals() {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    let act = SigAction::new(
        SigHandler::Handler(on_stop),
        SaFlags::empty(),
        SigSet::empty(),
    );
    for s in [Signal::SIGTERM, Signal::SIGINT] {
        // SAFETY: the handler only stores to an atomic, which is
        // async-signal-safe.
        let _ = unsafe { sigaction(s, &act) };
    }
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
