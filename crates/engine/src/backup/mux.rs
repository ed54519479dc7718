//! The plumbing between stream packers and the writer that interleaves them: one
//! bounded channel per stream (together, the buffer pool), a doorbell the writer waits
//! on when every stream is empty, the counters backup admins read (who waited for
//! whom), a per-stream rate limit, and the extents the writer forms.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use tapeloom_catalog::{Extent, FileRow};
use tapeloom_format::PackedBlock;

/// An entry whose last block has been packed: its catalog row, with block numbers
/// of its stream still to be turned into positions.
pub(crate) struct Done {
    pub row: FileRow,
    pub start_block: u64,
    pub end_block: u64,
}

/// What a stream's packer sends to the writer.
pub(crate) enum Msg {
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
pub(crate) struct Shared {
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
pub(crate) struct Stopped;

/// A packer's end of its stream's channel.
pub(crate) struct Outlet {
    tx: SyncSender<Msg>,
    shared: Arc<Shared>,
    queued: Arc<AtomicUsize>,
    limit: Option<f64>,
    started: Instant,
    sent: u64,
}

impl Outlet {
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

/// The writer's end of one stream's channel.
pub(crate) struct Lane {
    pub id: u16,
    rx: Receiver<Msg>,
    queued: Arc<AtomicUsize>,
    peeked: Option<Msg>,
    /// The packer thread, until the stream ends.
    pub thread: Option<std::thread::JoinHandle<()>>,
    /// Set when the stream sent its end (or its packer died).
    pub ended: bool,
}

impl Lane {
    pub fn new(
        id: u16,
        rx: Receiver<Msg>,
        queued: Arc<AtomicUsize>,
        thread: std::thread::JoinHandle<()>,
    ) -> Self {
        Lane {
            id,
            rx,
            queued,
            peeked: None,
            thread: Some(thread),
            ended: false,
        }
    }

    /// Whether a message is waiting.
    pub fn ready(&mut self) -> bool {
        if self.peeked.is_none() && !self.ended {
            match self.rx.try_recv() {
                Ok(m) => self.peeked = Some(m),
                Err(TryRecvError::Empty) => {}
                Err(TryRecvError::Disconnected) => {
                    // The packer ended without saying so (it failed): treat as ended.
                    self.peeked = Some(Msg::End(0, 0));
                }
            }
        }
        self.peeked.is_some()
    }

    /// The waiting message's block, if it is one.
    pub fn peek_block(&mut self) -> Option<&PackedBlock> {
        self.ready();
        match &self.peeked {
            Some(Msg::Block { block, .. }) => Some(block),
            _ => None,
        }
    }

    /// The waiting message.
    pub fn take(&mut self) -> Option<Msg> {
        let m = self.peeked.take();
        if matches!(m, Some(Msg::Block { .. })) {
            self.queued.fetch_sub(1, Ordering::Relaxed);
        }
        m
    }

    /// Blocks of this stream waiting in its channel.
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }
}

/// Forms extents from the blocks the writer lands, in order.
#[derive(Default)]
pub(crate) struct Extents {
    open: Option<Extent>,
    /// Closed extents not yet stored.
    pub closed: Vec<Extent>,
}

impl Extents {
    /// A block of `stream` at `stream_offset` landed at (seq, lbn).
    pub fn landed(&mut self, stream: u16, stream_offset: u64, seq: u32, lbn: u64) {
        if let Some(e) = self.open.as_mut() {
            if e.stream == stream && e.seq == seq && e.first_lbn + e.blocks == lbn {
                e.blocks += 1;
                return;
            }
        }
        if let Some(e) = self.open.take() {
            self.closed.push(e);
        }
        self.open = Some(Extent {
            stream,
            seq,
            first_lbn: lbn,
            blocks: 1,
            stream_offset,
        });
    }

    /// Closes the open extent.
    pub fn finish(&mut self) {
        if let Some(e) = self.open.take() {
            self.closed.push(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extents_follow_consecutive_blocks_of_one_stream() {
        let mut x = Extents::default();
        x.landed(1, 0, 0, 2);
        x.landed(1, 100, 0, 3);
        x.landed(2, 0, 0, 4);
        x.landed(1, 200, 0, 5);
        x.landed(1, 300, 1, 2);
        x.finish();
        let got: Vec<(u16, u32, u64, u64)> = x
            .closed
            .iter()
            .map(|e| (e.stream, e.seq, e.first_lbn, e.blocks))
            .collect();
        assert_eq!(
            got,
            vec![(1, 0, 2, 2), (2, 0, 4, 1), (1, 0, 5, 1), (1, 1, 2, 1)]
        );
    }
}
