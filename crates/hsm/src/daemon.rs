//! `hsm daemon`: transparent recall. The daemon marks each released file of
//! the managed folders with fanotify's pre-content event (`FAN_PRE_ACCESS`,
//! Linux 6.14) and its open event (`FAN_OPEN_PERM`, alone on older kernels), so
//! that an open, a read, a write or a mapping of it waits for the daemon's
//! answer. An open waits because copy tools look for a file's data
//! (`SEEK_DATA`) before they read, and that raises no event. tapeloom's own
//! processes (a backup storing the stub, a release, a recall) are let through.
//! Only released files are marked: reading any other file costs nothing, and
//! `stat`, `ls -l`, `find`, `du`, `getfattr`, `rename` and `unlink` raise no
//! event at all. A reader of a
//! released file waits while the file comes back: the requests that come
//! together are one batch (until the recall worker is idle and no request came
//! for 50 ms, or at most `window`, 2 s by default), one restore per job
//! (`recall_batch`), and the data is written through the event's own
//! descriptor, which raises no event. The file's mark is then taken off. A
//! recall that fails, or that takes longer than `timeout` (10 minutes by
//! default), answers the reader with EIO.
//!
//! The daemon marks the released files when it starts. While it runs,
//! `hsm release` asks it (on the socket `hsm.sock` of the home) to mark each
//! file it releases before giving the file's lease back, and `hsm recall` asks
//! it to take the mark off before writing the data back (under the file's
//! lease), so that neither raises an event the daemon would wait on.
//!
//! If the daemon dies, the kernel would let the waiting readers through to the
//! stubs' zeros. A guardian process (`hsm guardian`) holds the fanotify group
//! too and is told which events wait; when the daemon's pipe to it closes
//! without a goodbye, it answers each waiting event with EIO.

use crate::error::{io, HsmError, Result};
use crate::recall::{recall_batch, Ask, RecallOrder, Recalled};
use crate::sys::{Group, Watch};
use crate::{root_path, roots, Facts, Managed, Stamp, State};
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::{Duration, Instant};
use tapeloom_engine::Home;
use xattr::FileExt;

/// How the daemon runs.
#[derive(Debug)]
pub struct DaemonOptions {
    /// Requests that come within this time are one batch.
    pub window: Duration,
    /// A reader waits at most this long, then gets EIO.
    pub timeout: Duration,
    /// Where the counters are written (JSON), as they change.
    pub status: Option<PathBuf>,
    /// The guardian to start (`tapeloom hsm guardian`), given `--fd N`.
    pub guardian: Option<std::process::Command>,
}

impl Default for DaemonOptions {
    fn default() -> Self {
        DaemonOptions {
            window: Duration::from_secs(2),
            timeout: Duration::from_secs(600),
            status: None,
            guardian: None,
        }
    }
}

/// What the daemon saw and did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counters {
    /// Events: accesses by other programs that waited for the daemon's answer.
    pub events: u64,
    /// Of those, accesses to files that are not released: let through at once.
    pub passed: u64,
    /// Accesses to released files: they waited for a recall.
    pub waited: u64,
    /// Files recalled.
    pub recalled_files: u64,
    /// Their bytes.
    pub recalled_bytes: u64,
    /// Batches recalled.
    pub batches: u64,
    /// Cartridges mounted for them.
    pub mounts: u64,
    /// Cartridges the changer moved into a drive for them.
    pub loads: u64,
    /// Modeled seconds of their readings, when the drives have a timing model.
    pub modeled_seconds: f64,
    /// Modeled seconds their reading plans predicted.
    pub planned_seconds: f64,
    /// Accesses answered with EIO because their recall failed.
    pub failed: u64,
    /// Accesses answered with EIO because their recall took too long.
    pub timed_out: u64,
    /// Accesses waiting now.
    pub waiting: u64,
    /// Accesses by tapeloom itself (a backup, a release, a recall): let
    /// through without a recall.
    pub own: u64,
    /// Released files marked.
    pub marked: u64,
    /// How long the accesses that waited for a recall waited, to their answer.
    pub recall_seconds: Latency,
}

/// The upper bounds, in seconds, of [`Latency`]'s buckets (the last is all).
pub const LATENCY_BOUNDS: [f64; 10] = [
    0.1,
    0.5,
    1.0,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    600.0,
    f64::INFINITY,
];

/// Waits counted by how long they took: a histogram.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Latency {
    /// Waits in each bucket of [`LATENCY_BOUNDS`] (not cumulative).
    pub buckets: [u64; 10],
    /// Seconds waited in all.
    pub sum: f64,
    /// Waits counted.
    pub count: u64,
}

impl Latency {
    /// Counts a wait of `d`.
    pub fn observe(&mut self, d: Duration) {
        let s = d.as_secs_f64();
        let i = LATENCY_BOUNDS.iter().position(|b| s <= *b).unwrap_or(9);
        self.buckets[i] += 1;
        self.sum += s;
        self.count += 1;
    }

    fn json(&self) -> String {
        let counts: Vec<String> = self.buckets.iter().map(|n| n.to_string()).collect();
        format!(
            "{{\"counts\":[{}],\"sum\":{:.6},\"count\":{}}}",
            counts.join(","),
            self.sum,
            self.count
        )
    }
}

/// The file in the home where a running daemon keeps its counters (JSON, with
/// its process id), for the server's `/metrics`.
pub const STATUS_FILE: &str = "hsm-daemon.json";

/// What a running daemon's status file says, when the daemon that wrote it is
/// still running: its counters as JSON.
pub fn running_status(home_dir: &Path) -> Option<serde_json::Value> {
    let text = std::fs::read_to_string(home_dir.join(STATUS_FILE)).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    let pid = v.get("pid")?.as_u64()?;
    Path::new(&format!("/proc/{pid}")).exists().then_some(v)
}

impl Counters {
    /// The counters as one line of JSON, with the kind of events watched.
    pub fn json(&self, watch: &str) -> String {
        let head = format!(
            "{{\"events\":{},\"passed\":{},\"waited\":{},\"recalled_files\":{},\"recalled_bytes\":{},\"batches\":{},\"mounts\":{},\"loads\":{},\"modeled_seconds\":{:.3},\"planned_seconds\":{:.3},\"failed\":{},\"timed_out\":{},\"waiting\":{},\"own\":{},\"marked\":{},\"watch\":\"{watch}\"}}",
            self.events, self.passed, self.waited, self.recalled_files, self.recalled_bytes,
            self.batches, self.mounts, self.loads, self.modeled_seconds, self.planned_seconds,
            self.failed, self.timed_out, self.waiting, self.own, self.marked
        );
        let tail = format!(
            ",\"recall_seconds\":{},\"pid\":{}}}",
            self.recall_seconds.json(),
            std::process::id()
        );
        head.trim_end_matches('}').to_string() + &tail
    }
}

/// The longest the daemon waits for an event before it looks at its recalls,
/// batches and deadlines again.
const TICK: Duration = Duration::from_millis(5);

/// A batch is handed on this long after its last request when the recall
/// worker is idle, before its window is over.
const QUIET: Duration = Duration::from_millis(50);

/// A released file some accesses wait for.
struct Waiting {
    path: PathBuf,
    stamp: Stamp,
    /// The events' descriptors, each with when its reader gives up.
    fds: Vec<(std::fs::File, Instant)>,
    /// Handed to the recall worker.
    sent: bool,
}

/// The daemon's state between ticks.
struct Daemon {
    group: Group,
    roots: Vec<PathBuf>,
    opts: DaemonOptions,
    /// Where `hsm release` and `hsm recall` ask the daemon to mark and unmark.
    socket: std::os::unix::net::UnixListener,
    waiting: HashMap<(u64, u64), Waiting>,
    /// Files of the batch being gathered, when it closes at the latest, and
    /// when its last request came.
    batch: Vec<(u64, u64)>,
    closes: Option<Instant>,
    last: Instant,
    /// Batches handed to the recall worker and not yet over.
    in_flight: usize,
    work: Sender<Vec<Ask>>,
    done: Receiver<Recalled>,
    guard: Option<(std::process::Child, std::process::ChildStdin)>,
    counters: Counters,
    written: Option<Counters>,
    /// The program the daemon runs (tapeloom): its other processes are let
    /// through.
    exe: Option<PathBuf>,
    /// The home's status file ([`STATUS_FILE`]).
    status_file: PathBuf,
}

/// Runs the daemon on the home at `home_dir` until SIGTERM or SIGINT (or `stop`
/// returns true); returns its counters.
pub fn daemon(home_dir: &Path, opts: DaemonOptions, stop: &dyn Fn() -> bool) -> Result<Counters> {
    let roots: Vec<PathBuf> = {
        let home = Home::open(home_dir)?;
        roots(&home)?.iter().map(root_path).collect()
    };
    let group = Group::new().map_err(|source| HsmError::Io {
        what: "start watching (fanotify needs root and Linux 5.x; pre-content events Linux 6.14)"
            .into(),
        source,
    })?;
    crate::sys::stop_on_signals();
    let (work, jobs) = channel::<Vec<Ask>>();
    let (finished, done) = channel::<Recalled>();
    let home = home_dir.to_path_buf();
    std::thread::Builder::new()
        .name("hsm-recall".into())
        .spawn(move || worker(&home, jobs, finished))
        .map_err(|source| HsmError::Io {
            what: "start the recall thread".into(),
            source,
        })?;
    let path = home_dir.join(crate::notify::SOCKET);
    let _ = std::fs::remove_file(&path);
    let socket = io(
        std::os::unix::net::UnixListener::bind(&path),
        "listen on",
        &path,
    )?;
    io(socket.set_nonblocking(true), "listen on", &path)?;
    let mut d = Daemon {
        group,
        roots,
        opts,
        socket,
        waiting: HashMap::new(),
        batch: Vec::new(),
        closes: None,
        last: Instant::now(),
        in_flight: 0,
        work,
        done,
        guard: None,
        counters: Counters::default(),
        written: None,
        exe: std::env::current_exe().ok(),
        status_file: home_dir.join(STATUS_FILE),
    };
    d.start_guardian()?;
    d.mark_released();
    while !crate::sys::STOP.load(Ordering::SeqCst) && !stop() {
        d.take_events()?;
        d.take_asks();
        d.take_results();
        d.give_up_late();
        d.send_batch();
        d.write_status();
        d.group.wait(TICK);
    }
    d.end();
    let _ = std::fs::remove_file(&path);
    Ok(d.counters)
}

/// The recall worker: each batch recalled with the home opened for it (so that
/// other commands may use the home between batches).
fn worker(home_dir: &Path, jobs: Receiver<Vec<Ask>>, done: Sender<Recalled>) {
    for asks in jobs {
        let mut out = Recalled::default();
        let paths: Vec<PathBuf> = asks.iter().map(|a| a.path.clone()).collect();
        let r = Home::open(home_dir)
            .map_err(HsmError::from)
            .and_then(|home| recall_batch(&home, asks, RecallOrder::Planned, &mut out));
        if let Err(e) = r {
            let why = e.to_string();
            let failed: HashSet<&PathBuf> = out.failed.iter().map(|(p, _)| p).collect();
            let rest: Vec<(PathBuf, String)> = (paths.iter())
                .filter(|p| !out.recalled.contains(p) && !failed.contains(p))
                .map(|p| (p.clone(), why.clone()))
                .collect();
            out.failed.extend(rest);
        }
        if done.send(out).is_err() {
            return;
        }
    }
}

impl Daemon {
    fn start_guardian(&mut self) -> Result<()> {
        let Some(mut cmd) = self.opts.guardian.take() else {
            return Ok(());
        };
        let fd: OwnedFd = io(
            self.group.inheritable(),
            "share the watch with",
            Path::new("the guardian"),
        )?;
        cmd.arg("--fd").arg(fd.as_raw_fd().to_string());
        cmd.stdin(std::process::Stdio::piped());
        let mut child = io(cmd.spawn(), "start", Path::new("the guardian"))?;
        drop(fd);
        if let Some(stdin) = child.stdin.take() {
            self.guard = Some((child, stdin));
        }
        Ok(())
    }

    /// Tells the guardian a line; a guardian that is gone is forgotten.
    fn tell(&mut self, line: &str) {
        if let Some((_, stdin)) = &mut self.guard {
            if stdin
                .write_all(line.as_bytes())
                .and_then(|_| stdin.flush())
                .is_err()
            {
                self.guard = None;
            }
        }
    }

    fn answer(&mut self, fd: RawFd, allow: bool) {
        if let Err(e) = self.group.answer(fd, allow) {
            tracing::warn!("hsm daemon: answering an access failed: {e}");
        }
        self.tell(&format!("D {fd}\n"));
    }

    /// Marks every released file of the managed folders.
    fn mark_released(&mut self) {
        let mut skipped = |p: &Path, why: String| {
            tracing::warn!("hsm daemon: cannot look at {}: {why}", p.display());
        };
        for m in crate::files_under(&self.roots, &mut skipped) {
            if m.state() == State::Released {
                // A recall cut while it wrote (this daemon killed, say) left
                // blocks in the stub: it is released again.
                let stamp = m
                    .stamp
                    .as_ref()
                    .filter(|s| m.facts.blocks > 0 || s.recalling);
                if let Some(stamp) = stamp {
                    if let Err(e) = crate::release::release_again(&m.path, stamp) {
                        tracing::warn!(
                            "hsm daemon: cannot release {} again: {e}",
                            m.path.display()
                        );
                    }
                }
                if let Err(e) = self.mark_path(&m.path, true) {
                    tracing::warn!("hsm daemon: cannot watch {}: {e}", m.path.display());
                }
            }
        }
    }

    /// Marks (or unmarks) the file at `path`.
    fn mark_path(&mut self, path: &Path, on: bool) -> std::io::Result<()> {
        self.group.mark_path(path, on)?;
        if on {
            self.counters.marked += 1;
        }
        Ok(())
    }

    /// Answers what `hsm release` and `hsm recall` ask on the socket.
    fn take_asks(&mut self) {
        while let Ok((stream, _)) = self.socket.accept() {
            let answer = self.ask(&stream);
            let mut w = &stream;
            let _ = w.write_all(answer.as_bytes());
        }
    }

    /// One request on the socket (`mark HEX` or `unmark HEX`, the path in
    /// hexadecimal) and its answer line.
    fn ask(&mut self, stream: &std::os::unix::net::UnixStream) -> String {
        use std::io::BufRead;
        let _ = stream.set_nonblocking(false);
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        let mut line = String::new();
        if std::io::BufReader::new(stream)
            .read_line(&mut line)
            .is_err()
        {
            return "error: no request\n".into();
        }
        let mut words = line.trim_end().splitn(2, ' ');
        let (verb, hex) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
        let Some(path) = crate::notify::unhex(hex) else {
            return "error: a bad path\n".into();
        };
        let r = match verb {
            "mark" => self.mark_path(&path, true),
            "unmark" => self.mark_path(&path, false),
            _ => return "error: a bad request\n".into(),
        };
        match r {
            Ok(()) => "ok\n".into(),
            Err(e) => format!("error: {e}\n"),
        }
    }

    fn take_events(&mut self) -> Result<()> {
        let events = io(
            self.group.events(),
            "read the watch's events",
            Path::new("fanotify"),
        )?;
        for ev in events {
            let fd = ev.fd.as_raw_fd();
            self.tell(&format!("P {fd}\n"));
            let file = std::fs::File::from(ev.fd);
            if self.own(ev.pid) {
                // tapeloom itself (a backup storing the stub, a release, a
                // recall): let through, the file stays marked.
                self.counters.own += 1;
                self.answer(fd, true);
                continue;
            }
            self.counters.events += 1;
            match released(&file, fd) {
                Some((key, path, stamp)) => self.wait(key, path, stamp, file),
                None => {
                    // Marked but no longer released: it raises no more events.
                    self.counters.passed += 1;
                    let _ = self.group.unmark_file(std::os::fd::AsFd::as_fd(&file));
                    self.answer(fd, true);
                }
            }
        }
        Ok(())
    }

    /// Whether process `pid` runs the daemon's own program.
    fn own(&self, pid: i32) -> bool {
        let Some(exe) = &self.exe else { return false };
        std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|p| p == *exe)
    }

    fn wait(&mut self, key: (u64, u64), path: PathBuf, stamp: Stamp, file: std::fs::File) {
        self.counters.waited += 1;
        let until = Instant::now() + self.opts.timeout;
        let w = self.waiting.entry(key).or_insert_with(|| Waiting {
            path,
            stamp,
            fds: Vec::new(),
            sent: false,
        });
        w.fds.push((file, until));
        if !w.sent && !self.batch.contains(&key) {
            self.batch.push(key);
            self.closes.get_or_insert(Instant::now() + self.opts.window);
            self.last = Instant::now();
        }
    }

    /// Hands the batch to the recall worker when its window is over, or sooner
    /// when the worker is idle and no request came for [`QUIET`]: a burst of
    /// reads started together is one batch, and a reader of one file after
    /// another does not wait a whole window for each.
    fn send_batch(&mut self) {
        let Some(closes) = self.closes else { return };
        let now = Instant::now();
        let quiet = self.in_flight == 0 && now.duration_since(self.last) >= QUIET;
        if now < closes && !quiet {
            return;
        }
        self.closes = None;
        let mut asks = Vec::new();
        for key in std::mem::take(&mut self.batch) {
            let Some(w) = self.waiting.get_mut(&key) else {
                continue;
            };
            let Some(writer) = w.fds.first().and_then(|(f, _)| f.try_clone().ok()) else {
                continue;
            };
            w.sent = true;
            asks.push(Ask {
                path: w.path.clone(),
                stamp: w.stamp.clone(),
                writer: Some(writer),
            });
        }
        if asks.is_empty() {
            return;
        }
        match self.work.send(asks) {
            Ok(()) => self.in_flight += 1,
            Err(_) => tracing::warn!("hsm daemon: the recall thread is gone"),
        }
    }

    fn take_results(&mut self) {
        while let Ok(r) = self.done.try_recv() {
            self.in_flight = self.in_flight.saturating_sub(1);
            self.counters.batches += 1;
            self.counters.mounts += r.mounts;
            self.counters.loads += r.loads;
            self.counters.modeled_seconds += r.modeled_seconds.unwrap_or(0.0);
            self.counters.planned_seconds += r.planned_seconds.unwrap_or(0.0);
            self.counters.recalled_files += r.files;
            self.counters.recalled_bytes += r.bytes;
            let ends: Vec<(PathBuf, bool)> = (r.recalled.into_iter().map(|p| (p, true)))
                .chain(r.failed.into_iter().map(|(p, why)| {
                    tracing::warn!("hsm daemon: {} was not recalled: {why}", p.display());
                    (p, false)
                }))
                .collect();
            for (path, ok) in ends {
                let key = (self.waiting.iter())
                    .find(|(_, w)| w.path == path)
                    .map(|(k, _)| *k);
                let Some(w) = key.and_then(|k| self.waiting.remove(&k)) else {
                    continue;
                };
                if ok {
                    if let Some((f, _)) = w.fds.first() {
                        let _ = self.group.unmark_file(std::os::fd::AsFd::as_fd(f));
                    }
                }
                for (f, until) in w.fds {
                    if !ok {
                        self.counters.failed += 1;
                    }
                    self.waited_since(until);
                    self.answer(f.as_raw_fd(), ok);
                }
            }
        }
    }

    /// Counts the wait of an access answered now whose deadline was `until`.
    fn waited_since(&mut self, until: Instant) {
        let left = until.saturating_duration_since(Instant::now());
        let waited = self.opts.timeout.saturating_sub(left);
        self.counters.recall_seconds.observe(waited);
    }

    fn give_up_late(&mut self) {
        let now = Instant::now();
        let mut late = Vec::new();
        for w in self.waiting.values_mut() {
            let (gone, keep): (Vec<_>, Vec<_>) =
                w.fds.drain(..).partition(|(_, until)| *until <= now);
            w.fds = keep;
            late.extend(gone);
        }
        self.waiting.retain(|_, w| !w.fds.is_empty() || w.sent);
        for (f, until) in late {
            self.counters.timed_out += 1;
            self.waited_since(until);
            self.answer(f.as_raw_fd(), false);
        }
        self.counters.waiting = self.waiting.values().map(|w| w.fds.len() as u64).sum();
    }

    /// Writes the counters, when they changed, to the home's status file and
    /// to `--status`.
    fn write_status(&mut self) {
        if self.written.as_ref() == Some(&self.counters) {
            return;
        }
        let watch = match self.group.watch {
            Watch::PreAccess => "pre-access",
            Watch::OpenPerm => "open-perm",
        };
        let line = self.counters.json(watch) + "\n";
        let mut all = true;
        for path in std::iter::once(&self.status_file).chain(self.opts.status.as_ref()) {
            let tmp = path.with_extension("tmp");
            all &= std::fs::write(&tmp, &line)
                .and_then(|_| std::fs::rename(&tmp, path))
                .is_ok();
        }
        if all {
            self.written = Some(self.counters.clone());
        }
    }

    /// Stops: every waiting access gets EIO, and the guardian goes without
    /// answering anything.
    fn end(&mut self) {
        let waiting: Vec<Waiting> = self.waiting.drain().map(|(_, w)| w).collect();
        for w in waiting {
            for (f, _) in w.fds {
                self.counters.failed += 1;
                self.answer(f.as_raw_fd(), false);
            }
        }
        self.counters.waiting = 0;
        self.written = None;
        self.write_status();
        self.tell("Q\n");
        if let Some((mut child, stdin)) = self.guard.take() {
            drop(stdin);
            let _ = child.wait();
        }
    }
}

/// The file of an event when it is a released stub: its identity, its path and
/// its record.
fn released(file: &std::fs::File, fd: RawFd) -> Option<((u64, u64), PathBuf, Stamp)> {
    let md = file.metadata().ok()?;
    let stamp = Stamp::decode(&file.get_xattr(crate::STAMP_ATTR).ok()??).ok()?;
    let path = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
    let m = Managed {
        path,
        facts: Facts::of(&md),
        stamp: Some(stamp),
    };
    if m.state() != State::Released {
        return None;
    }
    let stamp = m.stamp?;
    Some(((md.dev(), md.ino()), m.path, stamp))
}

/// `hsm guardian`: holds the daemon's fanotify group (descriptor `fd`,
/// inherited) and reads from `input` the events that wait (`P N`) and those
/// answered (`D N`). At `Q` it ends; at the end of `input` without `Q` (the
/// daemon died) it answers every waiting event with EIO. Returns how many it
/// answered.
pub fn guardian(fd: RawFd, input: impl std::io::BufRead) -> Result<u64> {
    let group = crate::sys::Group::adopt(fd).map_err(|source| HsmError::Io {
        what: format!("take the watch from descriptor {fd}"),
        source,
    })?;
    let mut waiting: HashSet<RawFd> = HashSet::new();
    for line in input.lines() {
        let Ok(line) = line else { break };
        let mut words = line.split(' ');
        let n = || -> Option<RawFd> { line.split(' ').nth(1)?.parse().ok() };
        match (words.next(), n()) {
            (Some("P"), Some(n)) => {
                waiting.insert(n);
            }
            (Some("D"), Some(n)) => {
                waiting.remove(&n);
            }
            (Some("Q"), _) => return Ok(0),
            _ => {}
        }
    }
    let mut answered = 0;
    for n in waiting {
        if group.answer(n, false).is_ok() {
            answered += 1;
        }
    }
    // No access waits for this group from now on; the accesses queued and not
    // yet read, and those the daemon read but had not told of, get EIO too:
    // were the group closed with them pending, the kernel would let them read
    // the stub.
    let _ = group.flush_marks();
    loop {
        let Ok(events) = group.events() else { break };
        if events.is_empty() {
            break;
        }
        for ev in events {
            if group.answer(ev.fd.as_raw_fd(), false).is_ok() {
                answered += 1;
            }
        }
    }
    // An event's descriptor number is under the daemon's limit of open files,
    // which the guardian shares: the ones it read and had not told of.
    for n in 0..open_files_limit() {
        let _ = group.answer(n, false);
    }
    Ok(answered)
}

/// This process's limit of open files (its children's too), from
/// `/proc/self/limits`; 1024 when it cannot be read, at most 2^20.
fn open_files_limit() -> RawFd {
    let text = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let soft = (text.lines())
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|n| n.parse::<RawFd>().ok());
    soft.unwrap_or(1024).clamp(0, 1 << 20)
}
