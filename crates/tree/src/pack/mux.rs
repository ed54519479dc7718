//! The packers' side of the plumbing between stream packers and the writer that
//! interleaves them (or the sender that takes a stream elsewhere): one bounded
//! channel per stream (together, the buffer pool), a doorbell the writer waits on
//! when every stream is empty, the counters backup admins read (who waited for
//! whom), and a per-stream rate limit.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use tapeloom_format::PackedBlock;

/// What the catalog records of an entry its packer packed, but where its blocks
/// landed, which the writer fills in: the fields of the catalog's file row that a
/// packer knows.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PackedRow {
    /// Path in the job namespace (raw bytes).
    pub path: Vec<u8>,
    /// Stream id.
    pub stream: u16,
    /// Entry type code (FORMAT.md 5.3).
    pub kind: u8,
    /// Permission bits.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Logical size.
    pub size: u64,
    /// Modification time in nanoseconds.
    pub mtime_ns: i64,
    /// Payload offset where the entry starts in its first block.
    pub start_off: u32,
    /// CRC32C of the stored bytes.
    pub crc: u32,
    /// Symlink or hard-link target.
    pub link: Vec<u8>,
    /// Status change time in nanoseconds (0 when not known).
    pub ctime_ns: i64,
    /// Inode number (0 when not known).
    pub ino: u64,
    /// A regular file's new metadata alone: its data is in an earlier job of the
    /// set, and it has no `Data` record in this one.
    pub meta_only: bool,
}

impl PackedRow {
    /// Whether the entry has data in its job: a regular file, unless the row is
    /// metadata alone.
    pub fn has_data(&self) -> bool {
        self.kind == tapeloom_format::EntryType::Regular as u8 && !self.meta_only
    }
}

/// An entry whose last block has been packed: its row, with block numbers of its
/// stream still to be turned into positions.
pub struct Done {
    /// What the catalog records of it.
    pub row: PackedRow,
    /// The block of its stream where its record starts.
    pub start_block: u64,
    /// The block of its stream where its last record ends.
    pub end_block: u64,
}

/// What a stream's packer sends to the writer.
pub enum Msg {
    /// A full block, the entries that end in it, and the oldest block of the stream
    /// whose position is still needed.
    Block {
        block: PackedBlock,
        done: Vec<Done>,
        keep_from: u64,
    },
    /// A block a despooler found on tape already, where it landed before the job's
    /// process died, with the entries that end in it: nothing to write, only rows.
    OnTape {
        seq: u64,
        at: (u32, u64),
        done: Vec<Done>,
        keep_from: u64,
    },
    /// A source object that could not be backed up.
    Error(Vec<u8>, String),
    /// The stream is complete: (entries, stored bytes).
    End(u64, u64),
}

/// State shared by the packers and the writer.
#[derive(Default)]
pub struct Shared {
    bell: Mutex<u64>,
    cv: Condvar,
    /// Blocks waiting in all the channels.
    pub queued: AtomicUsize,
    /// Streams whose packer has sent everything.
    pub finished: AtomicUsize,
    /// Times a packer found its channel full and had to wait for the writer.
    pub reader_waits: AtomicU64,
    /// Nanoseconds packers spent waiting so.
    pub reader_wait_ns: AtomicU64,
    spare: Mutex<Vec<Vec<u8>>>,
}

impl Shared {
    fn ring(&self) {
        if let Ok(mut n) = self.bell.lock() {
            *n += 1;
            self.cv.notify_all();
        }
    }

    /// The doorbell count, to wait on.
    pub fn rung(&self) -> u64 {
        self.bell.lock().map(|n| *n).unwrap_or(0)
    }

    /// Waits until the doorbell rings after `seen`, or `timeout` passes.
    pub fn wait(&self, seen: u64, timeout: Duration) {
        let Ok(g) = self.bell.lock() else { return };
        let _ = self.cv.wait_timeout_while(g, timeout, |n| *n == seen);
    }

    /// Gives a written block's buffer back for the packers to reuse.
    pub fn give(&self, buf: Vec<u8>) {
        if let Ok(mut s) = self.spare.lock() {
            if s.len() < 64 {
                s.push(buf);
            }
        }
    }

    /// A reusable buffer, if any.
    pub fn take(&self) -> Option<Vec<u8>> {
        self.spare.lock().ok().and_then(|mut s| s.pop())
    }
}

/// How far behind its schedule a rate-limited stream may fall and still catch up
/// by sending faster than its rate: enough to absorb a late wake-up, far less than
/// a drive's load, after which it would send a burst no real source reads at.
const LIMIT_CREDIT: Duration = Duration::from_millis(100);

/// The writer went away.
pub struct Stopped;

/// A packer's end of its stream's channel.
pub struct Outlet {
    tx: SyncSender<Msg>,
    shared: Arc<Shared>,
    queued: Arc<AtomicUsize>,
    limit: Option<f64>,
    started: Instant,
    sent: u64,
}

impl Outlet {
    /// An outlet sending on `tx`, counting in `shared` and in the stream's own
    /// `queued`, no faster than `limit` bytes per second when given.
    pub fn new(
        tx: SyncSender<Msg>,
        shared: Arc<Shared>,
        queued: Arc<AtomicUsize>,
        limit: Option<f64>,
    ) -> Self {
        Outlet {
            tx,
            shared,
            queued,
            limit,
            started: Instant::now(),
            sent: 0,
        }
    }

    /// The state it shares with the writer.
    pub fn shared(&self) -> &Shared {
        &self.shared
    }

    /// Sends a block, no faster than the stream's rate limit, counting the wait
    /// when the channel is full.
    pub fn block(&mut self, m: Msg, bytes: usize) -> Result<(), Stopped> {
        self.sent += bytes as u64;
        if let Some(rate) = self.limit {
            let due = Duration::from_secs_f64(self.sent as f64 / rate);
            let now = self.started.elapsed();
            if due > now {
                std::thread::sleep(due - now);
            } else if now - due > LIMIT_CREDIT {
                // Behind its schedule (it waited for the writer, or its drive was
                // still loading): a source read at this rate would not have the
                // time back, so the stream may not catch up faster than the rate.
                self.started += now - due - LIMIT_CREDIT;
            }
        }
        self.shared.queued.fetch_add(1, Ordering::Relaxed);
        self.queued.fetch_add(1, Ordering::Relaxed);
        match self.tx.try_send(m) {
            Ok(()) => {}
            Err(TrySendError::Full(m)) => {
                let t = Instant::now();
                self.shared.reader_waits.fetch_add(1, Ordering::Relaxed);
                let r = self.tx.send(m);
                self.shared
                    .reader_wait_ns
                    .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
                r.map_err(|_| Stopped)?;
            }
            Err(TrySendError::Disconnected(_)) => return Err(Stopped),
        }
        self.shared.ring();
        Ok(())
    }

    /// Sends anything else.
    pub fn other(&mut self, m: Msg) -> Result<(), Stopped> {
        if matches!(m, Msg::End(..)) {
            self.shared.finished.fetch_add(1, Ordering::Relaxed);
        }
        let r = self.tx.send(m).map_err(|_| Stopped);
        self.shared.ring();
        r
    }
}
