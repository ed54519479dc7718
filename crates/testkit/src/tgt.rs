//! A tgt virtual tape library on loopback, for tests and for trying tapeloom
//! without hardware.
//!
//! [`TgtLibrary::start`] runs `tgtd` (the Linux SCSI target framework daemon, package
//! `tgt`) as a child process listening on 127.0.0.1 and sets it up the way tgt's
//! README.vtl script does: SSC tape drives on LUNs 1..=N, an SMC changer on LUN N+1
//! whose data transfer elements 1..=N are those drives, one medium transport element
//! at address N+1, storage elements from N+2 on, holding the tapes, and one
//! import/export element (mail slot) after them. Tape images
//! are files in the library directory named by their barcodes. It needs root (tgtd
//! keeps its control socket in /var/run/tgtd).
//!
//! # What tgt 1.0.85 does (seen through libiscsi 1.19)
//!
//! These are the quirks a driver must handle; the tests in `tests/tgt_transport.rs`
//! check them. Sense data is fixed format (70h/F0h), 18 bytes.
//!
//! Drives (SSC, INQUIRY "IET     " "VIRTUAL-TAPE"):
//! - TEST UNIT READY without a tape: NOT READY, 3A/00. After MOVE MEDIUM into the
//!   drive the next TEST UNIT READY is GOOD at once: no UNIT ATTENTION.
//! - READ(6) variable, block shorter than the buffer: CHECK CONDITION, NO SENSE,
//!   ILI, VALID, INFORMATION = buffer - block (`f0 00 20 00 01 00 00` for 64 KiB
//!   into 128 KiB); the block is transferred. The iSCSI residual is the block
//!   length, not the bytes missing (1000 for a 1000-byte block into 64 KiB).
//!   SILI is ignored: the same CHECK CONDITION comes with SILI set.
//! - Block longer than the buffer: ILI with a negative INFORMATION (`ff ff 80 00`
//!   for 64 KiB into 32 KiB) and no data at all; the position moves past the block.
//! - Filemark: `f0 00 80 00 01 00 00 ..` with ASC/ASCQ 00/01 and INFORMATION = the
//!   requested length; end of data: BLANK CHECK with EOM, VALID clear, ASC/ASCQ
//!   00/00 (`70 00 48 ..`). In both cases the iSCSI residual is 0 and a full data
//!   phase of stale bytes is sent. The iSCSI transport corrects the residual of
//!   these reads from the sense data.
//! - READ POSITION is a stub: byte 0 is 20 (short form) or 32 (long form), all
//!   else zero at every position, so BOP and the block number are not reported.
//!   Positions must be counted by the driver.
//! - READ BLOCK LIMITS: `09 10 00 00 00 04` (maximum 1 MiB, minimum 4).
//! - LOAD/UNLOAD (1Bh) reads byte 4 as START STOP UNIT does: 02h (bit 1 alone)
//!   unloads (NOT READY 3A/00 after), 03h loads, 00h and 01h do nothing. A load
//!   does not rewind; the position stays where it was.
//! - Writing past the tape size: every WRITE from the one that crosses the size
//!   on returns CHECK CONDITION, NO SENSE with EOM, ASC/ASCQ 00/00, VALID clear
//!   (`70 00 40 ..`), yet the block is written and the image file grows; there is
//!   no early-warning zone before the size and no hard end. WRITE FILEMARKS stays
//!   GOOD.
//!
//! Changer (SMC, "VIRTUAL-CHANGER"):
//! - MODE SENSE page 1Dh: `1d 12 00 03 00 01 00 04 00 03 00 00 00 00 00 01 00 02 00
//!   00` for 2 drives and 3 slots (transport 3, slots 4.., drives 1..).
//! - READ ELEMENT STATUS sends 8 bytes fewer than its report: the header's byte
//!   count is 8 + the descriptors (the page header is not counted) and the transfer
//!   stops there, so the last descriptor lacks its last 8 bytes. "First element
//!   address reported" is wrong. Element type 0 (all types) gives overlapping,
//!   unusable pages: ask for one element type per command.
//! - With DVCID, drive descriptors (86 bytes with VOLTAG) carry code set 2, type 1,
//!   length 34: "IET     VIRTUAL-TAPE    " and the drive's serial number (as in its
//!   INQUIRY page 80h, e.g. "beaf11"), NUL-padded.
//! - MOVE MEDIUM out of a loaded, ready drive works without unloading first
//!   (the drive then reports NOT READY 3A/00), unless PREVENT MEDIUM REMOVAL is in
//!   force on the drive: ILLEGAL REQUEST 53/02. Destination full: ILLEGAL REQUEST
//!   3B/0D; source empty: 3B/0E. A slot's descriptor shows the source element of a
//!   tape moved back (byte 9 = 80h, bytes 10-11 = the drive's address).
use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tapeloom_device::{DeviceError, Result};

/// Directory of tgtd's control sockets (`socket.N` for control port N).
const SOCKET_DIR: &str = "/var/run/tgtd";
/// Longest wait for one tgtadm or tgtimg run.
const TOOL_TIMEOUT: Duration = Duration::from_secs(20);
/// Longest wait for a new tgtd to answer on its control socket.
const START_TIMEOUT: Duration = Duration::from_secs(15);
/// Longest wait for tgtd to exit after its system is deleted.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Attempts at finding a port tgtd can listen on.
const START_ATTEMPTS: usize = 5;
/// Target id of the library's target.
const TID: &str = "1";

/// Ports of the libraries running in this process.
static PORTS: Mutex<Vec<Ports>> = Mutex::new(Vec::new());

/// How to build a [`TgtLibrary`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TgtOptions {
    /// Number of tape drives (1 to 32).
    pub drives: usize,
    /// Number of tapes, all in storage slots at start (1 to 999).
    pub tapes: usize,
    /// Size of each tape in MB (tgtimg's unit).
    pub tape_mb: u64,
    /// Barcode prefix: tape `i` (from 1) has barcode `{prefix}{i:03}L6`, so the
    /// prefix "TLT" gives LTO-6 style labels TLT001L6, TLT002L6, ... Letters and
    /// digits, 1 to 24 characters.
    pub barcode_prefix: String,
    /// Directory of the tape images (created if missing). Images already there
    /// are kept, so a library can be restarted with its tapes' contents.
    pub dir: PathBuf,
}

impl TgtOptions {
    /// `drives` drives and `tapes` tapes of `tape_mb` MB labelled `{prefix}001L6`..
    /// in `dir`.
    pub fn sized(
        dir: impl Into<PathBuf>,
        drives: usize,
        tapes: usize,
        tape_mb: u64,
        prefix: &str,
    ) -> TgtOptions {
        TgtOptions {
            drives,
            tapes,
            tape_mb,
            barcode_prefix: prefix.to_string(),
            dir: dir.into(),
        }
    }

    /// Two drives and three 64 MB tapes labelled TLT001L6.. in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> TgtOptions {
        TgtOptions {
            drives: 2,
            tapes: 3,
            tape_mb: 64,
            barcode_prefix: "TLT".to_string(),
            dir: dir.into(),
        }
    }
}

/// The tgt programs, with their paths.
#[derive(Debug, Clone)]
struct Tools {
    tgtd: PathBuf,
    tgtadm: PathBuf,
    tgtimg: PathBuf,
}

/// A running tgt virtual tape library. Dropping it stops tgtd.
pub struct TgtLibrary {
    /// The iSCSI portal, `127.0.0.1:PORT`.
    pub portal: String,
    /// The target name (IQN).
    pub target: String,
    /// Address of the changer: `iscsi://127.0.0.1:PORT/IQN/LUN`.
    pub changer_url: String,
    /// Addresses of the drives, in data transfer element order (element 1 first).
    pub drive_urls: Vec<String>,
    /// Barcodes of the tapes, in storage element order.
    pub barcodes: Vec<String>,
    child: Option<Child>,
    ports: Ports,
    dir: PathBuf,
    tools: Tools,
}

impl std::fmt::Debug for TgtLibrary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TgtLibrary")
            .field("portal", &self.portal)
            .field("target", &self.target)
            .field("changer_url", &self.changer_url)
            .field("drive_urls", &self.drive_urls)
            .field("barcodes", &self.barcodes)
            .field("pid", &self.child.as_ref().map(Child::id))
            .field("control_port", &self.ports.control)
            .field("dir", &self.dir)
            .finish()
    }
}

fn tool_error(what: impl Into<String>, detail: impl Into<String>) -> DeviceError {
    DeviceError::Io(what.into(), std::io::Error::other(detail.into()))
}

fn find_tools() -> std::result::Result<Tools, String> {
    let found: Vec<(&str, Option<PathBuf>)> = ["tgtd", "tgtadm", "tgtimg"]
        .iter()
        .map(|n| (*n, super::need::find_program(n)))
        .collect();
    let missing: Vec<&str> = found
        .iter()
        .filter(|(_, p)| p.is_none())
        .map(|(n, _)| *n)
        .collect();
    match found.as_slice() {
        [(_, Some(tgtd)), (_, Some(tgtadm)), (_, Some(tgtimg))] => Ok(Tools {
            tgtd: tgtd.clone(),
            tgtadm: tgtadm.clone(),
            tgtimg: tgtimg.clone(),
        }),
        _ => Err(format!(
            "tgt is not installed: {} not found on PATH or in /usr/sbin (install the package tgt)",
            missing.join(", ")
        )),
    }
}

/// Runs a tool to completion with a deadline; returns its standard output, or a
/// message with its exit status and error output.
fn run_tool(
    program: &Path,
    args: &[&str],
    timeout: Duration,
) -> std::result::Result<String, String> {
    let name = program
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let shown = || format!("{name} {}", args.join(" "));
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    let reader = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut p) = pipe {
                let mut bytes = Vec::new();
                let _ = p.read_to_end(&mut bytes);
                s = String::from_utf8_lossy(&bytes).into_owned();
            }
            s
        })
    };
    let out = reader(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = reader(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                break Err(format!(
                    "{} did not finish within {} s",
                    shown(),
                    timeout.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => break Err(format!("waiting for {}: {e}", shown())),
        }
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    let status = status?;
    if status.success() {
        Ok(stdout)
    } else {
        let detail = stderr
            .trim()
            .lines()
            .chain(stdout.trim().lines())
            .collect::<Vec<_>>()
            .join("; ");
        Err(format!("{} failed ({status}): {detail}", shown()))
    }
}

/// A free TCP port on 127.0.0.1 for the portal, and the control port of its tgtd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ports {
    iscsi: u16,
    control: u16,
}

/// The control port that goes with an iSCSI port. tgtd takes control ports up to
/// 32767; the small numbers admins use (0 is tgtd's default) are left alone.
fn control_port_for(iscsi: u16) -> u16 {
    1000 + iscsi % 31000
}

/// Reserves ports for a new library: the iSCSI port is free on 127.0.0.1 now, and
/// neither port is used by another library of this process.
fn reserve_ports() -> Result<Ports> {
    for _ in 0..100 {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .map_err(|e| DeviceError::Io("finding a free TCP port on 127.0.0.1".into(), e))?;
        let iscsi = l
            .local_addr()
            .map_err(|e| DeviceError::Io("finding a free TCP port".into(), e))?
            .port();
        let control = control_port_for(iscsi);
        let mut used = PORTS.lock().unwrap_or_else(|p| p.into_inner());
        if used
            .iter()
            .all(|u| u.iscsi != iscsi && u.control != control)
        {
            let ports = Ports { iscsi, control };
            used.push(ports);
            return Ok(ports);
        }
    }
    Err(tool_error(
        "finding a free TCP port on 127.0.0.1",
        "none left",
    ))
}

fn release_ports(ports: Ports) {
    PORTS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|u| *u != ports);
}

/// Removes the control socket and lock file of control port `control`.
fn remove_control_files(control: u16) {
    for suffix in ["", ".lock"] {
        let _ = std::fs::remove_file(format!("{SOCKET_DIR}/socket.{control}{suffix}"));
    }
}

/// The last lines of tgtd's log, for error messages.
fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.contains("oom-killer") && !l.contains("nr_open") && !l.contains("RDMA"))
        .collect();
    let start = lines.len().saturating_sub(3);
    lines[start..].join("; ")
}

fn validate(opts: &TgtOptions) -> Result<()> {
    let bad = |why: String| Err(tool_error("tgt library options", why));
    if !(1..=32).contains(&opts.drives) {
        return bad(format!("{} drives (1 to 32 allowed)", opts.drives));
    }
    if !(1..=999).contains(&opts.tapes) {
        return bad(format!("{} tapes (1 to 999 allowed)", opts.tapes));
    }
    if opts.tape_mb == 0 {
        return bad("tape size of 0 MB".to_string());
    }
    let p = &opts.barcode_prefix;
    if p.is_empty() || p.len() > 24 || !p.chars().all(|c| c.is_ascii_alphanumeric()) {
        return bad(format!(
            "barcode prefix {p:?}: use 1 to 24 letters and digits"
        ));
    }
    Ok(())
}

impl TgtLibrary {
    /// Checks that tgtd, tgtadm and tgtimg can be found, that this process is
    /// root (as tgtd must be), and that libiscsi (which reaches the library)
    /// loads; the error is one line that says what is missing.
    pub fn available() -> std::result::Result<(), String> {
        find_tools()?;
        // Its control socket goes in a directory only root may write.
        let root = std::fs::metadata("/proc/self").is_ok_and(|m| {
            use std::os::unix::fs::MetadataExt;
            m.uid() == 0
        });
        if !root {
            return Err(format!(
                "tgtd needs root (its control socket is in {SOCKET_DIR})"
            ));
        }
        tapeloom_device::scsi::load_iscsi().map_err(|e| e.to_string())
    }

    /// For tests: starts a library as described in `opts`, or panics with a line
    /// that says why tgtd failed. Without tgt or libiscsi the test is passed over
    /// with a line saying so, or fails under `TAPELOOM_TEST_REQUIRE_ALL=1`
    /// ([`super::need`]): `None`, and the test returns.
    pub fn start_for_test(opts: &TgtOptions) -> Option<TgtLibrary> {
        if !super::need::need(TgtLibrary::available()) {
            return None;
        }
        Some(TgtLibrary::start(opts).unwrap_or_else(|e| panic!("starting tgt: {e}")))
    }

    /// The library's changer and drives, as [`tapeloom_device::scsi::ScsiLibrary::open`] takes them.
    pub fn config(&self) -> tapeloom_device::scsi::ScsiLibraryConfig {
        tapeloom_device::scsi::ScsiLibraryConfig {
            changer: self.changer_url.clone(),
            drives: self.drive_urls.clone(),
        }
    }

    /// Creates the tape images and starts a library as described in `opts`.
    pub fn start(opts: &TgtOptions) -> Result<TgtLibrary> {
        validate(opts)?;
        let tools = find_tools().map_err(|m| tool_error("starting tgt", m))?;
        std::fs::create_dir_all(&opts.dir)
            .map_err(|e| DeviceError::Io(format!("creating {}", opts.dir.display()), e))?;
        let dir = std::fs::canonicalize(&opts.dir)
            .map_err(|e| DeviceError::Io(format!("resolving {}", opts.dir.display()), e))?;
        let dir_str = dir.to_string_lossy().into_owned();
        if dir_str
            .chars()
            .any(|c| c == ',' || c == '=' || c.is_whitespace())
        {
            return Err(tool_error(
                format!("tgt library directory {dir_str}"),
                "tgtadm cannot take a path with commas, '=' or blanks",
            ));
        }
        let barcodes: Vec<String> = (1..=opts.tapes)
            .map(|i| format!("{}{i:03}L6", opts.barcode_prefix))
            .collect();
        // tgt builds DIR/BARCODE in a 128-byte buffer when it loads a drive.
        let longest = barcodes.iter().map(String::len).max().unwrap_or(0).max(8);
        if dir_str.len() + 1 + longest > 127 {
            return Err(tool_error(
                format!("tgt library directory {dir_str}"),
                "the path is too long for tgt (directory and barcode must fit in 127 bytes)",
            ));
        }
        let mb = opts.tape_mb.to_string();
        let new_tape = |barcode: &str| -> Result<()> {
            let file = dir.join(barcode);
            if file.exists() {
                return Ok(());
            }
            let file = file.to_string_lossy().into_owned();
            run_tool(
                &tools.tgtimg,
                &[
                    "--op",
                    "new",
                    "--device-type",
                    "tape",
                    "--barcode",
                    barcode,
                    "--size",
                    &mb,
                    "--type",
                    "data",
                    "--file",
                    &file,
                ],
                TOOL_TIMEOUT,
            )
            .map(|_| ())
            .map_err(|m| tool_error(format!("creating the tape image {file}"), m))
        };
        for b in &barcodes {
            new_tape(b)?;
        }
        // Each drive starts with a tape image as backing store, as README.vtl does
        // (drive i gets tape i); drives beyond the number of tapes get an image of
        // their own that is in no slot.
        let mut drive_files = Vec::new();
        for i in 1..=opts.drives {
            let name = match barcodes.get(i - 1) {
                Some(b) => b.clone(),
                None => {
                    let b = format!("NOTAPE{i:02}");
                    new_tape(&b)?;
                    b
                }
            };
            drive_files.push(dir.join(name).to_string_lossy().into_owned());
        }
        let smc = dir.join("smc");
        if !smc.exists() {
            std::fs::write(&smc, [0u8; 1024]).map_err(|e| {
                DeviceError::Io(format!("creating the changer file {}", smc.display()), e)
            })?;
        }
        std::fs::create_dir_all(SOCKET_DIR).map_err(|e| {
            let hint = if e.kind() == std::io::ErrorKind::PermissionDenied {
                " (tgtd needs root)"
            } else {
                ""
            };
            DeviceError::Io(format!("creating {SOCKET_DIR}{hint}"), e)
        })?;

        let mut last_failure = String::new();
        for _ in 0..START_ATTEMPTS {
            let ports = reserve_ports()?;
            let port = ports.iscsi;
            match Self::spawn_daemon(&tools, &dir, ports) {
                Ok(child) => {
                    let target = format!("iqn.2026-11.org.tapeloom:vtl-{port}");
                    let base = format!("iscsi://127.0.0.1:{port}/{target}");
                    let mut lib = TgtLibrary {
                        portal: format!("127.0.0.1:{port}"),
                        changer_url: format!("{base}/{}", opts.drives + 1),
                        drive_urls: (1..=opts.drives).map(|i| format!("{base}/{i}")).collect(),
                        target,
                        barcodes,
                        child: Some(child),
                        ports,
                        dir,
                        tools,
                    };
                    // On failure `lib` is dropped, which stops tgtd.
                    lib.configure(opts.drives, &drive_files, &dir_str)?;
                    return Ok(lib);
                }
                Err(m) => {
                    release_ports(ports);
                    last_failure = m;
                }
            }
        }
        Err(tool_error("starting tgtd", last_failure))
    }

    /// Starts tgtd on `ports` and waits until it answers on its control socket and
    /// accepts connections on the portal. Failures are messages; the caller retries
    /// with other ports.
    fn spawn_daemon(tools: &Tools, dir: &Path, ports: Ports) -> std::result::Result<Child, String> {
        let port = ports.iscsi;
        let log_path = dir.join("tgtd.log");
        let log = std::fs::File::create(&log_path)
            .map_err(|e| format!("creating {}: {e}", log_path.display()))?;
        let log2 = log
            .try_clone()
            .map_err(|e| format!("{}: {e}", log_path.display()))?;
        let control = ports.control.to_string();
        let portal = format!("portal=127.0.0.1:{port}");
        let mut child = Command::new(&tools.tgtd)
            .args(["-f", "-C", &control, "--iscsi", &portal])
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", tools.tgtd.display()))?;
        let deadline = Instant::now() + START_TIMEOUT;
        // Kills the tgtd started here and removes the control files it made. When it
        // has exited by itself the files are left alone: they may be another
        // tgtd's, one that held the control port first.
        let fail = |child: &mut Child, why: String| {
            let running = matches!(child.try_wait(), Ok(None));
            let _ = child.kill();
            let _ = child.wait();
            if running {
                remove_control_files(ports.control);
            }
            Err(why)
        };
        loop {
            match child.try_wait() {
                Ok(Some(status)) => {
                    return Err(format!(
                        "tgtd exited at start ({status}): {}",
                        log_tail(&log_path)
                    ));
                }
                Ok(None) => {}
                Err(e) => return fail(&mut child, format!("waiting for tgtd: {e}")),
            }
            let probe = run_tool(
                &tools.tgtadm,
                &["-C", &control, "--op", "show", "--mode", "system"],
                TOOL_TIMEOUT,
            );
            if probe.is_ok() {
                break;
            }
            if Instant::now() >= deadline {
                return fail(
                    &mut child,
                    format!(
                        "tgtd did not answer within {} s: {}",
                        START_TIMEOUT.as_secs(),
                        log_tail(&log_path)
                    ),
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        if let Err(e) = TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
            return fail(
                &mut child,
                format!(
                    "tgtd does not listen on {addr}: {e}: {}",
                    log_tail(&log_path)
                ),
            );
        }
        Ok(child)
    }

    /// Runs tgtadm on this library's daemon.
    fn tgtadm(&self, args: &[&str]) -> Result<()> {
        let control = self.ports.control.to_string();
        let mut all = vec!["-C", control.as_str()];
        all.extend_from_slice(args);
        run_tool(&self.tools.tgtadm, &all, TOOL_TIMEOUT)
            .map(|_| ())
            .map_err(|m| tool_error("setting up the tgt library", m))
    }

    /// Creates the target, the drives, the changer and its elements, and opens the
    /// target to every initiator, as README.vtl does.
    fn configure(&mut self, drives: usize, drive_files: &[String], dir: &str) -> Result<()> {
        let lu = ["--lld", "iscsi", "--mode", "logicalunit", "--tid", TID];
        let lu_new = |lun: &str, path: &str, kind: &str| -> Vec<String> {
            let mut v: Vec<String> = lu.iter().map(|s| s.to_string()).collect();
            v.extend(
                [
                    "--op",
                    "new",
                    "--lun",
                    lun,
                    "-b",
                    path,
                    &format!("--device-type={kind}"),
                ]
                .map(String::from),
            );
            v
        };
        let lu_update = |lun: &str, params: &str| -> Vec<String> {
            let mut v: Vec<String> = lu.iter().map(|s| s.to_string()).collect();
            v.extend(["--op", "update", "--lun", lun, "--params", params].map(String::from));
            v
        };
        let run = |me: &Self, v: Vec<String>| {
            me.tgtadm(&v.iter().map(String::as_str).collect::<Vec<_>>())
        };

        let target = self.target.clone();
        self.tgtadm(&[
            "--lld", "iscsi", "--op", "new", "--mode", "target", "--tid", TID, "-T", &target,
        ])?;
        for (i, file) in drive_files.iter().enumerate() {
            let lun = (i + 1).to_string();
            run(self, lu_new(&lun, file, "tape"))?;
            run(self, lu_update(&lun, "online=0"))?;
        }
        let changer = (drives + 1).to_string();
        let smc = format!("{dir}/smc");
        run(self, lu_new(&changer, &smc, "changer"))?;
        run(self, lu_update(&changer, &format!("media_home={dir}")))?;
        run(
            self,
            lu_update(
                &changer,
                &format!("element_type=4,start_address=1,quantity={drives}"),
            ),
        )?;
        for i in 1..=drives {
            run(
                self,
                lu_update(
                    &changer,
                    &format!("element_type=4,address={i},tid={TID},lun={i}"),
                ),
            )?;
        }
        run(
            self,
            lu_update(
                &changer,
                &format!("element_type=1,start_address={changer},quantity=1"),
            ),
        )?;
        let first_slot = drives + 2;
        let tapes = self.barcodes.len();
        run(
            self,
            lu_update(
                &changer,
                &format!("element_type=2,start_address={first_slot},quantity={tapes}"),
            ),
        )?;
        for (j, barcode) in self.barcodes.clone().iter().enumerate() {
            let address = first_slot + j;
            run(
                self,
                lu_update(
                    &changer,
                    &format!("element_type=2,address={address},barcode={barcode},sides=1"),
                ),
            )?;
        }
        // One import/export element (a mail slot) after the storage elements.
        let mail = first_slot + tapes;
        run(
            self,
            lu_update(
                &changer,
                &format!("element_type=3,start_address={mail},quantity=1"),
            ),
        )?;
        self.tgtadm(&[
            "--lld", "iscsi", "--op", "bind", "--mode", "target", "--tid", TID, "-I", "ALL",
        ])
    }

    /// The process id of tgtd while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Stops tgtd: takes the system offline, deletes the target (closing the
    /// sessions) and the system, and waits for the daemon to exit, killing it when
    /// it does not within a few seconds. Calling it again does nothing.
    pub fn stop(&mut self) -> Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        // tgtd ignores SIGTERM while it has targets; these requests make it exit.
        let _ = self.tgtadm(&[
            "--op", "update", "--mode", "sys", "--name", "State", "-v", "offline",
        ]);
        let _ = self.tgtadm(&[
            "--lld", "iscsi", "--op", "delete", "--mode", "target", "--tid", TID, "--force",
        ]);
        let _ = self.tgtadm(&["--op", "delete", "--mode", "system"]);
        let deadline = Instant::now() + STOP_TIMEOUT;
        let mut result = Ok(());
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Ok(None) => {
                    // Child::kill sends SIGKILL to this child's own pid.
                    let _ = child.kill();
                    let _ = child.wait();
                    result = Err(tool_error(
                        format!("stopping tgtd (pid {})", child.id()),
                        format!(
                            "it did not exit within {} s and was killed",
                            STOP_TIMEOUT.as_secs()
                        ),
                    ));
                    break;
                }
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    result = Err(DeviceError::Io("waiting for tgtd to exit".into(), e));
                    break;
                }
            }
        }
        // tgtd leaves its control socket and lock file behind, also when it exits
        // by itself; the control port was this library's, so remove them.
        remove_control_files(self.ports.control);
        release_ports(self.ports);
        result
    }
}

impl Drop for TgtLibrary {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_checked() {
        let ok = TgtOptions::new("/tmp/x");
        assert!(validate(&ok).is_ok());
        for bad in [
            TgtOptions {
                drives: 0,
                ..ok.clone()
            },
            TgtOptions {
                tapes: 0,
                ..ok.clone()
            },
            TgtOptions {
                tapes: 1000,
                ..ok.clone()
            },
            TgtOptions {
                tape_mb: 0,
                ..ok.clone()
            },
            TgtOptions {
                barcode_prefix: String::new(),
                ..ok.clone()
            },
            TgtOptions {
                barcode_prefix: "A,B".into(),
                ..ok.clone()
            },
        ] {
            assert!(validate(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn missing_tools_name_the_package() {
        let r = run_tool(
            Path::new("/nonexistent/tgtadm"),
            &["--help"],
            Duration::from_secs(1),
        );
        assert!(r.is_err());
        if let Err(m) = find_tools() {
            assert!(
                m.contains("install the package tgt") && !m.contains('\n'),
                "{m}"
            );
        }
    }

    #[test]
    fn reserved_ports_are_distinct() {
        let a = reserve_ports().unwrap();
        let b = reserve_ports().unwrap();
        assert!(a.iscsi != b.iscsi && a.control != b.control, "{a:?} {b:?}");
        for p in [a, b] {
            assert!((1000..32768).contains(&p.control), "{p:?}");
        }
        release_ports(a);
        release_ports(b);
    }
}
