//! The read-rate assessment: how fast the sources can be read in the order a backup
//! reads them, as HP's HPreaddata measures, to tell whether the disks can keep a tape
//! drive streaming.
//!
//! Each directory is one stream; all streams run at once. A stream walks the
//! directory with the backup's walker (depth first, a directory before its contents,
//! names in byte order, symlinks not followed) and hands the regular files, in that
//! order, to the stream's reader threads, which open each one by name in its
//! directory, as a backup does, read it from start to end and throw the data away.

use crate::error::{io, Error, Result, ToolError};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Mutex;
use std::thread::Builder;
use std::time::Instant;
use tapeloom_engine::display_path;
use tapeloom_engine::walk::{walk_files, Walk, WalkedFile};

/// Bytes per read.
const BUF: usize = 1 << 20;
/// Alignment of the read buffer, for `O_DIRECT`.
const ALIGN: usize = 4096;
/// Files listed ahead of the readers, per stream.
const QUEUE: usize = 1024;

/// How to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRateOptions {
    /// Reader threads per stream (at least 1 is used).
    pub threads_per_source: usize,
    /// Read with `O_DIRECT`, past the page cache, where the file system allows it.
    pub direct: bool,
}

impl Default for ReadRateOptions {
    fn default() -> Self {
        ReadRateOptions {
            threads_per_source: 1,
            direct: false,
        }
    }
}

/// The result of one stream (one directory).
#[derive(Debug, Clone, PartialEq)]
pub struct StreamRate {
    /// The directory, as given.
    pub path: PathBuf,
    /// Bytes read (from files read whole, and the part read of files that failed).
    pub bytes: u64,
    /// Files read from start to end.
    pub files: u64,
    /// Seconds from the start of the call until this stream finished.
    pub seconds: f64,
    /// Bytes read per second, in MB/s (10^6 bytes).
    pub mb_per_s: f64,
    /// Files read whole per second.
    pub files_per_s: f64,
    /// Objects that could not be listed or read: path and reason, sorted by path.
    pub errors: Vec<(String, String)>,
    /// Whether the stream read with `O_DIRECT` throughout (false when not asked, or
    /// when the file system refused it and the stream fell back to normal reads).
    pub direct: bool,
}

/// The result of a read-rate assessment.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadRateReport {
    /// One per directory, in the order given.
    pub streams: Vec<StreamRate>,
    /// Bytes read by all streams.
    pub total_bytes: u64,
    /// Seconds the whole call took.
    pub seconds: f64,
    /// All bytes per second of the whole call, in MB/s (10^6 bytes).
    pub total_mb_per_s: f64,
}

/// Reads every regular file under each of `dirs`, one stream per directory, all at
/// once, and reports the rates. A directory that does not exist is an error before
/// anything is read; files that cannot be read are listed in their stream's errors.
pub fn read_rate(dirs: &[PathBuf], opts: &ReadRateOptions) -> Result<ReadRateReport> {
    if dirs.is_empty() {
        return Err(ToolError::NoDirectories.into());
    }
    for d in dirs {
        io(std::fs::metadata(d), || format!("source {}", d.display()))?;
    }
    let readers = opts.threads_per_source.max(1);
    let direct = opts.direct;
    let start = Instant::now();
    let results = std::thread::scope(|s| -> Result<Vec<Result<StreamRate>>> {
        let mut handles = Vec::with_capacity(dirs.len());
        for d in dirs {
            let h = Builder::new()
                .name("readrate-walk".into())
                .spawn_scoped(s, move || stream(d, readers, direct, start));
            handles.push(io(h, || "start a read-rate stream".to_string())?);
        }
        Ok(handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or(Err(Error::Panicked {
                    what: "a read-rate stream",
                }))
            })
            .collect())
    })?;
    let seconds = start.elapsed().as_secs_f64();
    let streams = results.into_iter().collect::<Result<Vec<_>>>()?;
    let total_bytes = streams.iter().map(|s| s.bytes).sum();
    Ok(ReadRateReport {
        streams,
        total_bytes,
        seconds,
        total_mb_per_s: rate(total_bytes, seconds) / 1e6,
    })
}

/// What one reader did.
#[derive(Default)]
struct Tally {
    bytes: u64,
    files: u64,
    errors: Vec<(String, String)>,
}

/// One stream: walks `dir` on this thread and reads with `readers` threads.
fn stream(dir: &Path, readers: usize, direct: bool, start: Instant) -> Result<StreamRate> {
    let direct_ok = AtomicBool::new(direct);
    let (tx, rx) = sync_channel::<Target>(QUEUE);
    let rx = Mutex::new(rx);
    let mut total = std::thread::scope(|s| -> Result<Tally> {
        // Owned here so that the readers see the end of the list however this returns.
        let tx = tx;
        let mut handles = Vec::with_capacity(readers);
        for _ in 0..readers {
            let h = Builder::new()
                .name("readrate-read".into())
                .spawn_scoped(s, || reader(&rx, &direct_ok));
            handles.push(io(h, || "start a read-rate reader".to_string())?);
        }
        let mut walked = Tally::default();
        match std::fs::metadata(dir) {
            Ok(m) if m.is_file() => {
                let _ = tx.send(Target::Path(dir.to_path_buf()));
            }
            _ => walk(dir, &tx, &mut walked.errors),
        }
        drop(tx);
        for h in handles {
            let t = h.join().map_err(|_| Error::Panicked {
                what: "a read-rate reader",
            })?;
            walked.bytes += t.bytes;
            walked.files += t.files;
            walked.errors.extend(t.errors);
        }
        Ok(walked)
    })?;
    let seconds = start.elapsed().as_secs_f64();
    total.errors.sort();
    Ok(StreamRate {
        path: dir.to_path_buf(),
        bytes: total.bytes,
        files: total.files,
        seconds,
        mb_per_s: rate(total.bytes, seconds) / 1e6,
        files_per_s: rate(total.files, seconds),
        errors: total.errors,
        direct: direct_ok.load(Ordering::Relaxed),
    })
}

/// `n` per second over `seconds`.
fn rate(n: u64, seconds: f64) -> f64 {
    n as f64 / seconds.max(1e-9)
}

fn shown(p: &Path) -> String {
    display_path(p.as_os_str().as_bytes())
}

/// A file to read: a source given as a file, or one the walker found.
enum Target {
    Path(PathBuf),
    Found(WalkedFile),
}

impl Target {
    fn shown(&self) -> String {
        match self {
            Target::Path(p) => shown(p),
            Target::Found(f) => shown(&f.path()),
        }
    }
}

/// Sends the regular files under `dir` in backup order, until the readers are gone.
fn walk(dir: &Path, tx: &SyncSender<Target>, errors: &mut Vec<(String, String)>) {
    // A source given as a symlink to a directory is read; symlinks below it are not
    // followed. Symlinks, devices, sockets and pipes hold no file data to back up,
    // and the walker leaves them out.
    let walked = walk_files(dir, &mut |w| match w {
        Walk::File(f) => tx.send(Target::Found(f)),
        Walk::Unlisted { path, why } => {
            errors.push((display_path(&path), why));
            Ok(())
        }
    });
    if let Err(e) = walked {
        errors.push((shown(dir), format!("cannot list directory: {e}")));
    }
}

/// Reads the files from `rx` until the list ends.
fn reader(rx: &Mutex<Receiver<Target>>, direct: &AtomicBool) -> Tally {
    let mut raw = vec![0u8; BUF + ALIGN];
    // Always below ALIGN for bytes; if not, reads are unaligned and O_DIRECT falls
    // back to normal reads.
    let off = raw.as_ptr().align_offset(ALIGN);
    let off = if off < ALIGN { off } else { 0 };
    let buf = &mut raw[off..off + BUF];
    let mut tally = Tally::default();
    loop {
        let target = {
            let Ok(guard) = rx.lock() else { break };
            match guard.recv() {
                Ok(p) => p,
                Err(_) => break,
            }
        };
        match read_file(&target, buf, direct, &mut tally.bytes) {
            Ok(()) => tally.files += 1,
            Err(e) => tally.errors.push((target.shown(), e.to_string())),
        }
    }
    tally
}

fn open(target: &Target, direct: bool) -> std::io::Result<File> {
    match target {
        Target::Path(path) => {
            let mut o = OpenOptions::new();
            o.read(true);
            if direct {
                o.custom_flags(nix::libc::O_DIRECT);
            }
            o.open(path)
        }
        Target::Found(f) => f.open(direct),
    }
}

fn is_einval(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(nix::libc::EINVAL)
}

/// Reads `target` from start to end into `buf`, adding to `bytes` as it goes. Falls back
/// from `O_DIRECT` to normal reads (for the whole stream) when the file system refuses
/// it.
fn read_file(
    path: &Target,
    buf: &mut [u8],
    direct: &AtomicBool,
    bytes: &mut u64,
) -> std::io::Result<()> {
    let mut direct_now = direct.load(Ordering::Relaxed);
    let mut f = match open(path, direct_now) {
        Err(e) if direct_now && is_einval(&e) => {
            direct.store(false, Ordering::Relaxed);
            direct_now = false;
            open(path, false)?
        }
        r => r?,
    };
    let mut pos = 0u64;
    loop {
        match f.read(buf) {
            // With O_DIRECT the last, partial block comes back short, and the read
            // after it returns 0.
            Ok(0) => return Ok(()),
            Ok(n) => {
                pos += n as u64;
                *bytes += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if direct_now && is_einval(&e) => {
                direct.store(false, Ordering::Relaxed);
                direct_now = false;
                f = open(path, false)?;
                f.seek(SeekFrom::Start(pos))?;
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// Makes a small tree under `root` and returns (bytes, files) of its regular files.
    fn tree(root: &Path, seed: usize) -> (u64, u64) {
        let sizes = [0usize, 1, 4095, 4096, 4097, 100_000, (1 << 20) + 3, 3 << 20];
        let (mut bytes, mut files) = (0, 0);
        for (k, &size) in sizes.iter().enumerate() {
            let dir = root.join(format!("d{}", k % 3)).join(format!("e{}", k % 2));
            std::fs::create_dir_all(&dir).unwrap();
            let data: Vec<u8> = (0..size).map(|i| (i * 31 + seed) as u8).collect();
            std::fs::write(dir.join(format!("f{k}")), data).unwrap();
            bytes += size as u64;
            files += 1;
        }
        // Not followed, not counted.
        std::os::unix::fs::symlink(root.join("d0"), root.join("link-dir")).unwrap();
        std::os::unix::fs::symlink(root.join("d0/e0/f0"), root.join("link-file")).unwrap();
        (bytes, files)
    }

    #[test]
    fn readrate_streams_report_their_bytes_and_files() {
        let t = tempfile::tempdir().unwrap();
        let (a, b) = (t.path().join("a"), t.path().join("b"));
        let (ab, af) = tree(&a, 1);
        std::fs::create_dir_all(b.join("more")).unwrap();
        std::fs::write(b.join("more/big"), vec![7u8; 5 << 20]).unwrap();
        let (bb, bf) = tree(&b, 2);
        let (bb, bf) = (bb + (5 << 20), bf + 1);
        for threads in [1, 3] {
            for direct in [false, true] {
                let opts = ReadRateOptions {
                    threads_per_source: threads,
                    direct,
                };
                let r = read_rate(&[a.clone(), b.clone()], &opts).unwrap();
                assert_eq!(r.streams.len(), 2);
                let (sa, sb) = (&r.streams[0], &r.streams[1]);
                assert_eq!(sa.path, a);
                assert_eq!((sa.bytes, sa.files), (ab, af), "{opts:?}");
                assert_eq!((sb.bytes, sb.files), (bb, bf), "{opts:?}");
                assert!(sa.errors.is_empty() && sb.errors.is_empty(), "{r:?}");
                assert_eq!(r.total_bytes, ab + bb);
                assert!(r.seconds > 0.0 && r.total_mb_per_s > 0.0);
                assert!(sa.mb_per_s > 0.0 && sa.files_per_s > 0.0);
                assert!(sa.seconds <= r.seconds && sb.seconds <= r.seconds);
                if !direct {
                    assert!(!sa.direct && !sb.direct);
                }
            }
        }
    }

    #[test]
    fn readrate_unreadable_file_is_an_error_of_its_stream() {
        let t = tempfile::tempdir().unwrap();
        let (bytes, files) = tree(t.path(), 3);
        let locked = t.path().join("d1/locked");
        std::fs::write(&locked, b"secret").unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
        let r = read_rate(&[t.path().to_path_buf()], &ReadRateOptions::default()).unwrap();
        let s = &r.streams[0];
        if nix::unistd::geteuid().is_root() {
            // chmod does not stop root.
            assert_eq!((s.bytes, s.files), (bytes + 6, files + 1));
        } else {
            assert_eq!((s.bytes, s.files), (bytes, files));
            assert_eq!(s.errors.len(), 1, "{s:?}");
            assert!(s.errors[0].0.ends_with("d1/locked"), "{s:?}");
        }
    }

    #[test]
    fn readrate_missing_dir_is_an_error() {
        let t = tempfile::tempdir().unwrap();
        let missing = t.path().join("missing");
        let e = read_rate(
            &[t.path().to_path_buf(), missing],
            &ReadRateOptions::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("missing"), "{e}");
        assert!(read_rate(&[], &ReadRateOptions::default()).is_err());
    }
}
