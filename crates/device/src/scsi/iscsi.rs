//! iSCSI through libiscsi, loaded at run time.
//!
//! The address is `iscsi://HOST[:PORT]/TARGET-IQN/LUN` (port 3260 by default; an
//! IPv6 host is written in brackets). libiscsi (`libiscsi.so.7`) is loaded with
//! `libloading` the first time a transport is opened, so tapeloom runs without it
//! when no iSCSI device is used.
//!
//! Each transport owns one iSCSI session (one libiscsi context) and drives it with
//! libiscsi's asynchronous calls and its own poll loop, so that every command and
//! the login have a deadline, and so that no libiscsi callback can outlive the
//! memory it writes to. Automatic reconnection inside libiscsi is switched off (it
//! would resend commands in flight, and a resent tape WRITE writes a block twice).
//! When a command fails at the transport level (timeout, connection lost) the
//! session is closed; the next command logs in again, and the device then reports
//! the new I_T nexus with a UNIT ATTENTION, as after a reset.
//!
//! Data-in goes straight into the caller's buffer (`scsi_task_set_iov_in`), also
//! when the command ends in CHECK CONDITION: a tape READ of a block shorter than
//! the buffer transfers the block and then reports ILI.
//!
//! libiscsi delivers the sense data of a CHECK CONDITION in the task's data-in
//! area as the iSCSI SCSI Response data segment: a 2-byte big-endian SenseLength
//! followed by the sense bytes (seen with libiscsi 1.19 against tgt: TEST UNIT
//! READY on an empty drive gives `00 12 70 00 02 ... 3a 00 ...`). The prefix is
//! removed; [`CmdOutcome::sense`] holds the raw sense bytes.
//!
//! Residual: the target's value is taken as it comes (an underflow residual, or 0),
//! with one correction. tgt 1.0.85 gets the residual wrong on tape reads that end
//! in CHECK CONDITION: for a block shorter than the buffer it reports the block
//! length instead of the bytes missing, and at a filemark or end of data it reports
//! 0 although it sends no block (the buffer then holds whatever tgt's own buffer
//! held). For a variable-length READ(6) or READ(16) (FIXED bit clear) that ends in
//! CHECK CONDITION with fixed-format sense the residual is therefore taken from the
//! sense: with VALID and one of FILEMARK, EOM or ILI set, a non-negative
//! INFORMATION field is the residue in bytes (SSC); without that, BLANK CHECK
//! means nothing was read (residual = buffer length). Beyond `len - residual` the
//! buffer contents are undefined.
use super::{AddressProblem, ConnectFailure, ScsiError, SessionFailure, TransportError};
use super::{CmdOutcome, DataDir, ScsiTransport, STATUS_CHECK_CONDITION};
use crate::{DeviceError, Result};
use std::ffi::{c_char, c_int, c_short, c_uchar, c_void, CStr, CString};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// iSCSI port used when the address has none.
const DEFAULT_PORT: u16 = 3260;
/// Deadline of the login (TCP connect, iSCSI login, LUN check).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Deadline of the logout when a transport is dropped.
const LOGOUT_TIMEOUT: Duration = Duration::from_secs(5);
/// Time added to a command's timeout before the poll loop gives up by itself;
/// libiscsi's own timeout (set to the command's timeout) normally ends it first.
const GRACE: Duration = Duration::from_secs(2);
/// Longest CDB libiscsi carries (`SCSI_CDB_MAX_SIZE`).
const MAX_CDB_LEN: usize = 16;
/// Highest LUN accepted in an address (single-level LUN, flat space).
const MAX_LUN: u16 = 16383;

/// `enum iscsi_session_type`: ISCSI_SESSION_NORMAL.
const ISCSI_SESSION_NORMAL: c_int = 2;
/// `enum iscsi_header_digest`: ISCSI_HEADER_DIGEST_NONE_CRC32C (prefer none,
/// accept CRC32C).
const ISCSI_HEADER_DIGEST_NONE_CRC32C: c_int = 1;
/// `enum scsi_xfer_dir`.
const SCSI_XFER_NONE: c_int = 0;
const SCSI_XFER_READ: c_int = 1;
const SCSI_XFER_WRITE: c_int = 2;
/// `enum scsi_residual`: SCSI_RESIDUAL_UNDERFLOW.
const SCSI_RESIDUAL_UNDERFLOW: c_int = 1;
/// libiscsi's status for a task that ran into its timeout (SCSI_STATUS_TIMEOUT).
const SCSI_STATUS_TIMEOUT: c_int = 0x0f00_0002;
/// libiscsi's status for a task cancelled before completion (SCSI_STATUS_CANCELLED).
const SCSI_STATUS_CANCELLED: c_int = 0x0f00_0000;

/// `struct scsi_sense` of scsi-lowlevel.h (the bit fields share one byte here;
/// only the size and alignment matter, the fields are not read).
#[repr(C)]
#[allow(dead_code)]
struct ScsiSense {
    error_type: c_uchar,
    key: c_int,
    ascq: c_int,
    bits: c_uchar,
    bit_pointer: c_uchar,
    field_pointer: u16,
}

/// `struct scsi_data` of scsi-lowlevel.h.
#[repr(C)]
struct ScsiData {
    size: c_int,
    data: *mut c_uchar,
}

/// The leading fields of `struct scsi_task` of scsi-lowlevel.h, up to `datain`.
/// Tasks are allocated by `scsi_create_task`; only these fields are read.
#[repr(C)]
#[allow(dead_code)]
struct ScsiTask {
    status: c_int,
    cdb_size: c_int,
    xfer_dir: c_int,
    expxferlen: c_int,
    cdb: [c_uchar; 16],
    residual_status: c_int,
    residual: usize,
    sense: ScsiSense,
    datain: ScsiData,
}

/// `struct scsi_iovec` of scsi-lowlevel.h.
#[repr(C)]
struct ScsiIovec {
    iov_base: *mut c_void,
    iov_len: usize,
}

/// `struct iscsi_data` of iscsi.h.
#[repr(C)]
struct IscsiData {
    size: usize,
    data: *mut c_uchar,
}

#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
const _: () = {
    assert!(std::mem::size_of::<ScsiSense>() == 16);
    assert!(std::mem::offset_of!(ScsiTask, cdb) == 16);
    assert!(std::mem::offset_of!(ScsiTask, residual_status) == 32);
    assert!(std::mem::offset_of!(ScsiTask, residual) == 40);
    assert!(std::mem::offset_of!(ScsiTask, sense) == 48);
    assert!(std::mem::offset_of!(ScsiTask, datain) == 64);
    assert!(std::mem::size_of::<IscsiData>() == 16);
};

/// `iscsi_command_cb`.
type Callback = extern "C" fn(*mut c_void, c_int, *mut c_void, *mut c_void);

type CreateContextFn = unsafe extern "C" fn(*const c_char) -> *mut c_void;
type ContextFn = unsafe extern "C" fn(*mut c_void) -> c_int;
type ContextStrFn = unsafe extern "C" fn(*mut c_void, *const c_char) -> c_int;
type ContextIntFn = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;
type ContextFlagFn = unsafe extern "C" fn(*mut c_void, c_int);
type GetErrorFn = unsafe extern "C" fn(*mut c_void) -> *const c_char;
type FullConnectFn =
    unsafe extern "C" fn(*mut c_void, *const c_char, c_int, Callback, *mut c_void) -> c_int;
type LogoutFn = unsafe extern "C" fn(*mut c_void, Callback, *mut c_void) -> c_int;
type CommandFn = unsafe extern "C" fn(
    *mut c_void,
    c_int,
    *mut ScsiTask,
    Callback,
    *mut IscsiData,
    *mut c_void,
) -> c_int;
type CreateTaskFn = unsafe extern "C" fn(c_int, *mut c_uchar, c_int, c_int) -> *mut ScsiTask;
type FreeTaskFn = unsafe extern "C" fn(*mut ScsiTask);
type SetIovFn = unsafe extern "C" fn(*mut ScsiTask, *mut ScsiIovec, c_int);

/// The libiscsi functions used, resolved once per process. The library is kept
/// in the process-wide [`LIB`] and never unloaded, so the function pointers copied
/// out of it stay valid.
struct Lib {
    create_context: CreateContextFn,
    destroy_context: ContextFn,
    set_targetname: ContextStrFn,
    set_session_type: ContextIntFn,
    set_header_digest: ContextIntFn,
    set_timeout: ContextIntFn,
    set_noautoreconnect: Option<ContextFlagFn>,
    get_error: GetErrorFn,
    full_connect_async: FullConnectFn,
    logout_async: LogoutFn,
    scsi_command_async: CommandFn,
    get_fd: ContextFn,
    which_events: ContextFn,
    service: ContextIntFn,
    create_task: CreateTaskFn,
    free_task: FreeTaskFn,
    set_iov_in: SetIovFn,
    _library: libloading::Library,
}

/// Why libiscsi could not be used, kept for every later attempt.
#[derive(Clone)]
enum LoadFailure {
    /// No libiscsi: the loader's error for the last name tried.
    Missing(Arc<libloading::Error>),
    /// A libiscsi without this function.
    TooOld(&'static str, Arc<libloading::Error>),
}

static LIB: OnceLock<std::result::Result<Lib, LoadFailure>> = OnceLock::new();

/// libiscsi, loaded on first use.
fn library() -> std::result::Result<&'static Lib, TransportError> {
    LIB.get_or_init(load_library)
        .as_ref()
        .map_err(|failure| match failure.clone() {
            LoadFailure::Missing(source) => TransportError::LibiscsiMissing { source },
            LoadFailure::TooOld(symbol, source) => {
                TransportError::LibiscsiTooOld { symbol, source }
            }
        })
}

/// Loads libiscsi now (it is otherwise loaded by the first transport opened): an
/// error when it is missing or too old, naming the package to install.
pub fn load() -> std::result::Result<(), TransportError> {
    library().map(|_| ())
}

/// The library names tried, in order.
const NAMES: [&str; 2] = ["libiscsi.so.7", "libiscsi.so"];

fn load_library() -> std::result::Result<Lib, LoadFailure> {
    let mut last = None;
    let mut library = None;
    for name in NAMES {
        // SAFETY: loading libiscsi runs no initialisers with effects on this
        // process; RTLD_NOW resolves all its symbols at once, as before any use.
        match unsafe {
            libloading::os::unix::Library::open(Some(name), libloading::os::unix::RTLD_NOW)
        } {
            Ok(l) => {
                library = Some(libloading::Library::from(l));
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let Some(library) = library else {
        let e = last.unwrap_or(libloading::Error::DlOpenUnknown);
        return Err(LoadFailure::Missing(Arc::new(e)));
    };
    /// Copies the function `name` out of the library as type `T`.
    ///
    /// # Safety
    ///
    /// `T` must be the function pointer type of the C declaration of `name`.
    unsafe fn get<T: Copy>(
        library: &libloading::Library,
        name: &'static str,
    ) -> std::result::Result<T, LoadFailure> {
        // SAFETY: the caller gives the C declaration's type; the pointer is used
        // only while the library stays loaded (for the life of the process).
        unsafe { library.get::<T>(name.as_bytes()) }
            .map(|symbol| *symbol)
            .map_err(|e| LoadFailure::TooOld(name, Arc::new(e)))
    }
    // SAFETY: each type is that of the function's C declaration in
    // /usr/include/iscsi/iscsi.h and scsi-lowlevel.h (enums are `int`, `struct
    // iscsi_context *` is an opaque pointer).
    unsafe {
        Ok(Lib {
            create_context: get(&library, "iscsi_create_context")?,
            destroy_context: get(&library, "iscsi_destroy_context")?,
            set_targetname: get(&library, "iscsi_set_targetname")?,
            set_session_type: get(&library, "iscsi_set_session_type")?,
            set_header_digest: get(&library, "iscsi_set_header_digest")?,
            set_timeout: get(&library, "iscsi_set_timeout")?,
            set_noautoreconnect: get(&library, "iscsi_set_noautoreconnect").ok(),
            get_error: get(&library, "iscsi_get_error")?,
            full_connect_async: get(&library, "iscsi_full_connect_async")?,
            logout_async: get(&library, "iscsi_logout_async")?,
            scsi_command_async: get(&library, "iscsi_scsi_command_async")?,
            get_fd: get(&library, "iscsi_get_fd")?,
            which_events: get(&library, "iscsi_which_events")?,
            service: get(&library, "iscsi_service")?,
            create_task: get(&library, "scsi_create_task")?,
            free_task: get(&library, "scsi_free_scsi_task")?,
            set_iov_in: get(&library, "scsi_task_set_iov_in")?,
            _library: library,
        })
    }
}

/// A parsed `iscsi://` address.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Address {
    /// `host:port` as libiscsi takes it (`[v6]:port` for IPv6).
    portal: String,
    /// Target name (IQN).
    target: String,
    /// Logical unit number.
    lun: u16,
}

/// Parses `iscsi://HOST[:PORT]/TARGET/LUN`.
fn parse_address(url: &str) -> std::result::Result<Address, ScsiError> {
    let bad = |problem: AddressProblem| {
        Err(ScsiError::Transport {
            device: url.to_string(),
            source: TransportError::BadIscsiAddress { problem },
        })
    };
    let Some(rest) = url.strip_prefix("iscsi://") else {
        return bad(AddressProblem::Scheme);
    };
    if rest.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return bad(AddressProblem::Blanks);
    }
    let parts: Vec<&str> = rest.split('/').collect();
    let [hostport, target, lun] = parts[..] else {
        return bad(AddressProblem::Parts);
    };
    if hostport.contains('@') {
        return bad(AddressProblem::Credentials);
    }
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let Some((addr, after)) = v6.split_once(']') else {
            return bad(AddressProblem::UnclosedIpv6);
        };
        let port = match after {
            "" => None,
            p => match p.strip_prefix(':') {
                Some(p) => Some(p),
                None => return bad(AddressProblem::AfterIpv6),
            },
        };
        (format!("[{addr}]"), port)
    } else {
        match hostport.split_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (hostport.to_string(), None),
        }
    };
    if host.is_empty() || host == "[]" {
        return bad(AddressProblem::EmptyHost);
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 => n,
            _ => {
                return bad(AddressProblem::Port {
                    port: p.to_string(),
                })
            }
        },
    };
    if target.is_empty() {
        return bad(AddressProblem::EmptyTarget);
    }
    let lun = match lun.parse::<u16>() {
        Ok(n) if n <= MAX_LUN => n,
        _ => {
            return bad(AddressProblem::Lun {
                lun: lun.to_string(),
                max: MAX_LUN,
            })
        }
    };
    Ok(Address {
        portal: format!("{host}:{port}"),
        target: target.to_string(),
        lun,
    })
}

/// Where a libiscsi callback reports completion. Allocated on the heap and owned
/// by its [`Session`], freed only after the context is destroyed (destroying a
/// context runs the callbacks of requests still queued).
#[repr(C)]
struct Completion {
    finished: c_int,
    status: c_int,
}

/// The callback of every asynchronous request: records the status.
extern "C" fn on_complete(
    _ctx: *mut c_void,
    status: c_int,
    _data: *mut c_void,
    private: *mut c_void,
) {
    let c = private.cast::<Completion>();
    if !c.is_null() {
        // SAFETY: every request is queued with `private` pointing to the session's
        // Completion, which stays allocated until after the context is destroyed,
        // and no Rust reference to it exists while libiscsi runs.
        unsafe {
            (*c).status = status;
            (*c).finished = 1;
        }
    }
}

/// How waiting for a request ended.
enum Waited {
    /// The callback ran with this status.
    Done(c_int),
    /// The deadline passed first.
    TimedOut,
    /// The connection failed.
    Failed(SessionFailure),
}

/// One iSCSI session: a libiscsi context and its completion record.
struct Session {
    lib: &'static Lib,
    ctx: NonNull<c_void>,
    done: NonNull<Completion>,
    /// Set when libiscsi reported a connection error; the session is then closed
    /// after the command at hand.
    broken: bool,
    /// Strings handed to libiscsi, kept alive with the context.
    _names: Vec<CString>,
}

// SAFETY: a Session owns its libiscsi context and completion record exclusively;
// libiscsi keeps no thread-local state and runs callbacks only inside calls made
// through the session, so the session may move to another thread. It is not Sync
// (raw pointers), and every use goes through `&mut self`.
unsafe impl Send for Session {}

impl Session {
    /// The last error text of the context.
    fn error(&self) -> String {
        // SAFETY: `ctx` is a live context; iscsi_get_error returns NULL or a
        // NUL-terminated string owned by the context, copied here at once.
        let p = unsafe { (self.lib.get_error)(self.ctx.as_ptr()) };
        if p.is_null() {
            return "no reason given".to_string();
        }
        // SAFETY: `p` is non-null and NUL-terminated (see above).
        let s = unsafe { CStr::from_ptr(p) }
            .to_string_lossy()
            .trim()
            .to_string();
        if s.is_empty() {
            "no reason given".to_string()
        } else {
            s
        }
    }

    /// Clears the completion record before a request.
    fn arm(&mut self) {
        // SAFETY: `done` is the session's live allocation; no request is pending.
        unsafe {
            self.done.as_ptr().write(Completion {
                finished: 0,
                status: 0,
            })
        };
    }

    fn completion(&self) -> Option<c_int> {
        // SAFETY: `done` is live; libiscsi writes it only inside calls made below,
        // never concurrently with this read.
        let c = unsafe { self.done.as_ptr().read() };
        (c.finished != 0).then_some(c.status)
    }

    /// Sets libiscsi's timeout for requests queued from now on.
    fn set_timeout(&mut self, timeout: Duration) {
        let secs = c_int::try_from(timeout.as_secs() + u64::from(timeout.subsec_nanos() > 0))
            .unwrap_or(c_int::MAX)
            .max(1);
        // SAFETY: `ctx` is a live context.
        unsafe { (self.lib.set_timeout)(self.ctx.as_ptr(), secs) };
    }

    /// Runs libiscsi until the armed request completes or `deadline` passes.
    fn wait(&mut self, deadline: Option<Instant>) -> Waited {
        loop {
            if let Some(status) = self.completion() {
                return Waited::Done(status);
            }
            let slice = match deadline {
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => left.min(Duration::from_secs(1)),
                    _ => return Waited::TimedOut,
                },
                None => Duration::from_secs(1),
            };
            // SAFETY: `ctx` is a live context.
            let (fd, events) = unsafe {
                (
                    (self.lib.get_fd)(self.ctx.as_ptr()),
                    (self.lib.which_events)(self.ctx.as_ptr()),
                )
            };
            let revents = if events == 0 || fd < 0 {
                // libiscsi asks for a pause (for instance between connect attempts).
                std::thread::sleep(slice.min(Duration::from_millis(100)));
                0
            } else {
                let mut pfd = libc::pollfd {
                    fd,
                    events: events as c_short,
                    revents: 0,
                };
                let ms = c_int::try_from(slice.as_millis().max(1)).unwrap_or(1000);
                // SAFETY: `pfd` is one valid pollfd, exclusively borrowed.
                let n = unsafe { libc::poll(&mut pfd, 1, ms) };
                if n < 0 {
                    let e = std::io::Error::last_os_error();
                    if e.kind() == std::io::ErrorKind::Interrupted {
                        continue;
                    }
                    self.broken = true;
                    return Waited::Failed(SessionFailure::Poll { source: e });
                }
                if n == 0 {
                    0
                } else {
                    c_int::from(pfd.revents)
                }
            };
            // SAFETY: `ctx` is a live context; iscsi_service may run callbacks,
            // which write only the completion record.
            if unsafe { (self.lib.service)(self.ctx.as_ptr(), revents) } < 0 {
                self.broken = true;
                if let Some(status) = self.completion() {
                    return Waited::Done(status);
                }
                return Waited::Failed(SessionFailure::Library {
                    message: self.error(),
                });
            }
        }
    }

    /// Logs out, waiting at most [`LOGOUT_TIMEOUT`].
    fn logout(&mut self) {
        self.arm();
        self.set_timeout(LOGOUT_TIMEOUT);
        // SAFETY: `ctx` is a live, logged-in context; the callback's private
        // pointer is the session's completion record.
        let rc = unsafe {
            (self.lib.logout_async)(self.ctx.as_ptr(), on_complete, self.done.as_ptr().cast())
        };
        if rc == 0 {
            let _ = self.wait(Instant::now().checked_add(LOGOUT_TIMEOUT));
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // SAFETY: `ctx` is live and destroyed exactly once, here. Destroying it may
        // run callbacks of queued requests, which write the completion record; that
        // record is freed only afterwards.
        unsafe { (self.lib.destroy_context)(self.ctx.as_ptr()) };
        // SAFETY: `done` came from Box::into_raw in `connect` and is freed once.
        drop(unsafe { Box::from_raw(self.done.as_ptr()) });
    }
}

/// Counter that makes initiator names unique within the process.
static INITIATOR_SEQ: AtomicU64 = AtomicU64::new(1);

/// Logs in to `addr`.
fn connect(lib: &'static Lib, addr: &Address, url: &str) -> Result<Session> {
    let fail = |reason: ConnectFailure| -> DeviceError {
        ScsiError::Transport {
            device: url.to_string(),
            source: TransportError::Connect { reason },
        }
        .into()
    };
    let initiator = format!(
        "iqn.2026-11.org.tapeloom:initiator-{}-{}",
        std::process::id(),
        INITIATOR_SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let cstr = |s: &str| {
        CString::new(s).map_err(|_| {
            fail(ConnectFailure::NulByte {
                text: s.to_string(),
            })
        })
    };
    let initiator = cstr(&initiator)?;
    let target = cstr(&addr.target)?;
    let portal = cstr(&addr.portal)?;
    // SAFETY: `initiator` is NUL-terminated; libiscsi copies it.
    let ctx = unsafe { (lib.create_context)(initiator.as_ptr()) };
    let ctx = NonNull::new(ctx).ok_or_else(|| fail(ConnectFailure::NoContext))?;
    let done = NonNull::from(Box::leak(Box::new(Completion {
        finished: 0,
        status: 0,
    })));
    let mut s = Session {
        lib,
        ctx,
        done,
        broken: false,
        _names: Vec::new(),
    };
    // SAFETY: `ctx` is the live context just created; the strings are
    // NUL-terminated and kept alive in the session.
    let rc = unsafe { (lib.set_targetname)(ctx.as_ptr(), target.as_ptr()) };
    if rc != 0 {
        return Err(fail(ConnectFailure::TargetNameRejected {
            message: s.error(),
        }));
    }
    // SAFETY: as above; the values are members of the C enums.
    unsafe {
        (lib.set_session_type)(ctx.as_ptr(), ISCSI_SESSION_NORMAL);
        (lib.set_header_digest)(ctx.as_ptr(), ISCSI_HEADER_DIGEST_NONE_CRC32C);
        if let Some(f) = lib.set_noautoreconnect {
            f(ctx.as_ptr(), 1);
        }
    }
    s.set_timeout(CONNECT_TIMEOUT);
    s.arm();
    // SAFETY: live context, NUL-terminated portal kept alive in the session, and
    // the session's completion record as the callback's private pointer.
    let rc = unsafe {
        (lib.full_connect_async)(
            ctx.as_ptr(),
            portal.as_ptr(),
            c_int::from(addr.lun),
            on_complete,
            done.as_ptr().cast(),
        )
    };
    s._names = vec![initiator, target, portal];
    if rc != 0 {
        return Err(fail(refused(&addr.portal, &s)));
    }
    match s.wait(Instant::now().checked_add(CONNECT_TIMEOUT + GRACE)) {
        Waited::Done(0) if !s.broken => Ok(s),
        Waited::Done(_) | Waited::Failed(_) => Err(fail(refused(&addr.portal, &s))),
        Waited::TimedOut => Err(fail(ConnectFailure::Timeout {
            waited: CONNECT_TIMEOUT,
            message: s.error(),
        })),
    }
}

/// Why a login failed: the TCP connection's error where the portal cannot be
/// reached, else libiscsi's message.
fn refused(portal: &str, s: &Session) -> ConnectFailure {
    unreachable(portal).unwrap_or_else(|| ConnectFailure::Refused { message: s.error() })
}

/// Why a TCP connection to `portal` fails, if it does: libiscsi's own message for a
/// refused or unreachable portal does not say so.
fn unreachable(portal: &str) -> Option<ConnectFailure> {
    use std::net::{TcpStream, ToSocketAddrs};
    let down = |source| ConnectFailure::Unreachable {
        portal: portal.to_string(),
        source,
    };
    let addrs = match portal.to_socket_addrs() {
        Ok(a) => a.collect::<Vec<_>>(),
        Err(e) => return Some(down(e)),
    };
    let mut last = None;
    for a in &addrs {
        match TcpStream::connect_timeout(a, Duration::from_secs(5)) {
            Ok(_) => return None,
            Err(e) => last = Some(down(e)),
        }
    }
    last.or_else(|| {
        Some(ConnectFailure::NoAddress {
            portal: portal.to_string(),
        })
    })
}

/// Raw sense bytes from the data-in area of a CHECK CONDITION: libiscsi stores
/// the SCSI Response data segment there, a 2-byte big-endian length and the sense.
fn sense_from_response(data: &[u8]) -> Vec<u8> {
    match data {
        [hi, lo, rest @ ..] => {
            let n = usize::from(u16::from_be_bytes([*hi, *lo])).min(rest.len());
            rest[..n].to_vec()
        }
        _ => Vec::new(),
    }
}

/// The residual reported for a data-in command (see the module documentation).
fn data_in_residual(
    cdb: &[u8],
    len: usize,
    status: u8,
    target_residual: Option<usize>,
    sense: &[u8],
) -> usize {
    let reported = target_residual.unwrap_or(0).min(len);
    let variable_read =
        matches!(cdb.first(), Some(0x08) | Some(0x88)) && cdb.get(1).is_some_and(|b| b & 1 == 0);
    if status != STATUS_CHECK_CONDITION || !variable_read || sense.len() < 7 {
        return reported;
    }
    if !matches!(sense[0] & 0x7f, 0x70 | 0x71) {
        return reported;
    }
    let valid = sense[0] & 0x80 != 0;
    let flags = sense[2] & 0xe0;
    let key = sense[2] & 0x0f;
    if valid && flags != 0 {
        let info = i32::from_be_bytes([sense[3], sense[4], sense[5], sense[6]]);
        if let Ok(residue) = usize::try_from(info) {
            return residue.min(len);
        }
        return reported;
    }
    if key == 0x08 {
        return len;
    }
    reported
}

/// What a completed task reports: status, sense (from the data-in area of a CHECK
/// CONDITION) and residual (see the module documentation).
fn completed(t: &ScsiTask, status: u8, cdb: &[u8], data_in: bool, len: usize) -> CmdOutcome {
    let sense = if status == STATUS_CHECK_CONDITION && !t.datain.data.is_null() {
        let n = usize::try_from(t.datain.size).unwrap_or(0);
        // SAFETY: libiscsi allocated `datain.size` bytes at `datain.data`, which
        // stay allocated until the task is freed, after this returns.
        sense_from_response(unsafe { std::slice::from_raw_parts(t.datain.data, n) })
    } else {
        Vec::new()
    };
    let target_residual = (t.residual_status == SCSI_RESIDUAL_UNDERFLOW).then_some(t.residual);
    let residual = if data_in {
        data_in_residual(cdb, len, status, target_residual, &sense)
    } else {
        target_residual.unwrap_or(0).min(len)
    };
    CmdOutcome {
        status,
        residual,
        sense,
    }
}

/// A logical unit reached over iSCSI.
pub(crate) struct IscsiTransport {
    url: String,
    addr: Address,
    lib: &'static Lib,
    session: Option<Session>,
}

impl IscsiTransport {
    /// Parses `url`, loads libiscsi and logs in.
    pub(crate) fn open(url: &str) -> Result<Self> {
        let addr = parse_address(url)?;
        let lib = library().map_err(|source| ScsiError::Transport {
            device: url.to_string(),
            source,
        })?;
        let session = connect(lib, &addr, url)?;
        Ok(IscsiTransport {
            url: url.to_string(),
            addr,
            lib,
            session: Some(session),
        })
    }

    /// Closes the session after a transport failure and builds the error.
    fn fail(&mut self, op: u8, reason: SessionFailure) -> DeviceError {
        self.session = None;
        self.error(TransportError::Session { op, reason })
    }

    fn error(&self, source: TransportError) -> DeviceError {
        ScsiError::Transport {
            device: self.url.clone(),
            source,
        }
        .into()
    }
}

/// A command's data phase as libiscsi takes it: the direction (none when there is
/// no data), the length, and the data-in or data-out buffer (null for the other).
fn transfer(data: DataDir<'_>) -> (c_int, usize, *mut c_uchar, *mut c_uchar) {
    let (dir, len, in_ptr, out_ptr) = match data {
        DataDir::None => (
            SCSI_XFER_NONE,
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        ),
        DataDir::In(b) => (
            SCSI_XFER_READ,
            b.len(),
            b.as_mut_ptr(),
            std::ptr::null_mut(),
        ),
        // libiscsi only reads data-out; the pointer is mutable in its type only.
        DataDir::Out(b) => (
            SCSI_XFER_WRITE,
            b.len(),
            std::ptr::null_mut(),
            b.as_ptr() as *mut c_uchar,
        ),
    };
    let dir = if len == 0 { SCSI_XFER_NONE } else { dir };
    (dir, len, in_ptr, out_ptr)
}

impl ScsiTransport for IscsiTransport {
    fn execute(&mut self, cdb: &[u8], data: DataDir<'_>, timeout: Duration) -> Result<CmdOutcome> {
        let op = cdb.first().copied().unwrap_or(0);
        if cdb.is_empty() || cdb.len() > MAX_CDB_LEN {
            return Err(self.error(TransportError::CdbLength {
                len: cdb.len(),
                max: MAX_CDB_LEN,
            }));
        }
        let (dir, len, in_ptr, out_ptr) = transfer(data);
        let expxferlen =
            c_int::try_from(len).map_err(|_| self.error(TransportError::DataTooLarge { len }))?;
        if self.session.is_none() {
            self.session = Some(connect(self.lib, &self.addr, &self.url)?);
        }
        let lun = c_int::from(self.addr.lun);
        let Some(session) = self.session.as_mut() else {
            return Err(self.error(TransportError::NoSession));
        };
        session.set_timeout(timeout);
        let mut cdb_buf = [0u8; MAX_CDB_LEN];
        cdb_buf[..cdb.len()].copy_from_slice(cdb);
        // SAFETY: scsi_create_task copies `cdb.len()` (1..=16) bytes of the CDB.
        let task = unsafe {
            (self.lib.create_task)(cdb.len() as c_int, cdb_buf.as_mut_ptr(), dir, expxferlen)
        };
        let Some(task) = NonNull::new(task) else {
            return Err(self.error(TransportError::TaskAllocation));
        };
        let mut iov = ScsiIovec {
            iov_base: in_ptr.cast(),
            iov_len: len,
        };
        if dir == SCSI_XFER_READ {
            // SAFETY: live task; `iov` describes the caller's buffer, and both
            // outlive the task (it is freed, or the context destroyed, before this
            // function returns).
            unsafe { (self.lib.set_iov_in)(task.as_ptr(), &mut iov, 1) };
        }
        let mut out = IscsiData {
            size: len,
            data: out_ptr,
        };
        let out_arg: *mut IscsiData = if dir == SCSI_XFER_WRITE {
            &mut out
        } else {
            std::ptr::null_mut()
        };
        session.arm();
        // SAFETY: live context and task; the data-out buffer, the iovec and the
        // completion record stay valid until the request has completed or the
        // context is destroyed (both happen before this function returns).
        let rc = unsafe {
            (self.lib.scsi_command_async)(
                session.ctx.as_ptr(),
                lun,
                task.as_ptr(),
                on_complete,
                out_arg,
                session.done.as_ptr().cast(),
            )
        };
        let waited = if rc != 0 {
            Waited::Failed(SessionFailure::Library {
                message: session.error(),
            })
        } else {
            let limit = timeout.min(Duration::from_secs(u64::from(u32::MAX))) + GRACE;
            session.wait(Instant::now().checked_add(limit))
        };
        let result = match waited {
            Waited::Done(status) if (0..=0xff).contains(&status) => {
                // SAFETY: the task has completed; libiscsi no longer writes it, and
                // the fields read lie within the prefix mirrored by ScsiTask.
                let t = unsafe { task.as_ref() };
                Ok(completed(t, status as u8, cdb, dir == SCSI_XFER_READ, len))
            }
            Waited::Done(SCSI_STATUS_TIMEOUT) | Waited::TimedOut => {
                Err(SessionFailure::Timeout { timeout })
            }
            Waited::Done(SCSI_STATUS_CANCELLED) => Err(SessionFailure::Cancelled),
            Waited::Done(_) => Err(SessionFailure::Library {
                message: session.error(),
            }),
            Waited::Failed(reason) => Err(reason),
        };
        let broken = session.broken;
        let result = match result {
            Ok(outcome) => {
                if broken {
                    self.session = None;
                }
                Ok(outcome)
            }
            // Closing the session destroys the context, so nothing refers to the
            // task or the buffers any more.
            Err(reason) => Err(self.fail(op, reason)),
        };
        // SAFETY: the task is complete or its context destroyed; freed once.
        unsafe { (self.lib.free_task)(task.as_ptr()) };
        result
    }

    fn address(&self) -> String {
        self.url.clone()
    }
}

impl Drop for IscsiTransport {
    fn drop(&mut self) {
        if let Some(mut s) = self.session.take() {
            if !s.broken {
                s.logout();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse() {
        let a = parse_address("iscsi://127.0.0.1:3261/iqn.2026-11.org.x:vtl/3").unwrap();
        assert_eq!(
            a,
            Address {
                portal: "127.0.0.1:3261".into(),
                target: "iqn.2026-11.org.x:vtl".into(),
                lun: 3
            }
        );
        let a = parse_address("iscsi://tape.example/iqn.x:y/0").unwrap();
        assert_eq!(a.portal, "tape.example:3260");
        let a = parse_address("iscsi://[::1]:4000/iqn.x:y/1").unwrap();
        assert_eq!(a.portal, "[::1]:4000");
        let a = parse_address("iscsi://[fe80::1]/iqn.x:y/1").unwrap();
        assert_eq!(a.portal, "[fe80::1]:3260");
    }

    #[test]
    fn malformed_addresses_give_one_line_errors() {
        for bad in [
            "iscsi://",
            "iscsi://host/iqn.x:y",
            "iscsi://host/iqn.x:y/1/2",
            "iscsi://host:0/iqn.x:y/1",
            "iscsi://host:99999/iqn.x:y/1",
            "iscsi://host:abc/iqn.x:y/1",
            "iscsi://:3260/iqn.x:y/1",
            "iscsi://host//1",
            "iscsi://host/iqn.x:y/lun",
            "iscsi://host/iqn.x:y/70000",
            "iscsi://u%p@host/iqn.x:y/1",
            "iscsi://[::1/iqn.x:y/1",
            "iscsi://host/iqn x/1",
            "scsi://host/iqn.x:y/1",
        ] {
            let Err(e) = parse_address(bad) else {
                panic!("{bad} parsed");
            };
            let e = e.to_string();
            assert!(e.starts_with(bad) && !e.contains('\n'), "{e}");
            assert!(e.contains("iscsi://HOST[:PORT]/TARGET-IQN/LUN"), "{e}");
        }
    }

    #[test]
    fn libiscsi_is_loaded_or_named_in_the_error() {
        match library() {
            Ok(lib) => assert!(lib.set_noautoreconnect.is_some()),
            Err(e) => panic!("{e}"),
        }
        let e = ScsiError::Transport {
            device: "iscsi://h/t/1".into(),
            source: TransportError::LibiscsiMissing {
                source: Arc::new(libloading::Error::DlOpenUnknown),
            },
        };
        let msg = e.to_string();
        assert!(
            msg.starts_with("iscsi://h/t/1: libiscsi is not installed")
                && msg.contains("libiscsi7")
                && msg.contains("libiscsi (Fedora)"),
            "{msg}"
        );
        let cause = std::error::Error::source(&e).and_then(|t| t.source());
        assert!(cause.is_some(), "the loader's error is kept");
    }

    #[test]
    fn sense_prefix_is_removed() {
        let d = [
            0x00, 0x12, 0x70, 0x00, 0x02, 0, 0, 0, 0, 0x0a, 0, 0, 0, 0, 0x3a, 0, 0, 0, 0, 0,
        ];
        assert_eq!(sense_from_response(&d), d[2..].to_vec());
        assert_eq!(
            sense_from_response(&[0x00, 0x08, 0x70, 0x00]),
            vec![0x70, 0x00]
        );
        assert!(sense_from_response(&[0x00]).is_empty());
        assert!(sense_from_response(&[]).is_empty());
    }

    #[test]
    fn residual_of_tape_reads_follows_the_sense() {
        let read64k = [0x08, 0, 0x01, 0, 0, 0];
        // tgt: 1000-byte block into 64 KiB, reported residual 1000 (the block size).
        let ili = [
            0xf0, 0, 0x20, 0x00, 0x00, 0xfc, 0x18, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        assert_eq!(
            data_in_residual(&read64k, 65536, 2, Some(1000), &ili),
            64536
        );
        // Filemark: INFORMATION is the whole length.
        let fm = [
            0xf0, 0, 0x80, 0x00, 0x01, 0x00, 0x00, 0x0a, 0, 0, 0, 0, 0, 0x01, 0, 0, 0, 0,
        ];
        assert_eq!(data_in_residual(&read64k, 65536, 2, None, &fm), 65536);
        // tgt's end of data: BLANK CHECK without VALID, reported residual 0.
        let eod = [
            0x70, 0, 0x48, 0, 0, 0, 0, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        assert_eq!(data_in_residual(&read64k, 65536, 2, None, &eod), 65536);
        // Block longer than the buffer: negative INFORMATION, the target's value stays.
        let over = [
            0xf0, 0, 0x20, 0xff, 0xff, 0x80, 0x00, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        assert_eq!(
            data_in_residual(&[0x08, 0, 0, 0x80, 0, 0], 32768, 2, Some(32768), &over),
            32768
        );
        // Fixed-block reads and other commands keep the target's value.
        assert_eq!(
            data_in_residual(&[0x08, 1, 0, 0, 1, 0], 65536, 2, Some(7), &ili),
            7
        );
        assert_eq!(
            data_in_residual(&[0x12, 0, 0, 0, 96, 0], 96, 0, Some(30), &[]),
            30
        );
        assert_eq!(data_in_residual(&read64k, 65536, 0, None, &[]), 0);
        assert_eq!(data_in_residual(&read64k, 100, 0, Some(1000), &[]), 100);
    }

    #[test]
    fn connecting_to_a_closed_port_names_the_address() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let url = format!("iscsi://127.0.0.1:{port}/iqn.2026-11.org.tapeloom:none/0");
        let Err(e) = IscsiTransport::open(&url) else {
            panic!("no target listens there");
        };
        let msg = e.to_string();
        eprintln!("{msg}");
        assert!(msg.starts_with(&url), "{msg}");
        assert!(!msg.contains('\n'), "{msg}");
    }
}
