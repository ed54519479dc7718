//! The writer's side of the plumbing between stream packers and the writer that
//! interleaves them: each stream's lane, and the extents the writer forms. The
//! packers' side (their messages, the shared doorbell and counters, a stream's
//! rate limit) is `tapeloom_tree::pack::mux`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::Arc;
use tapeloom_catalog::{Extent, FileRow};
use tapeloom_format::PackedBlock;
use tapeloom_tree::pack::mux::PackedRow;
pub(crate) use tapeloom_tree::pack::mux::{Done, Msg, Outlet, Shared};

/// The catalog's row of an entry its packer packed, whose record starts at
/// `start` and ends at `end` (volume sequence, logical block).
pub(crate) fn landed(r: PackedRow, start: (u32, u64), end: (u32, u64)) -> FileRow {
    FileRow {
        path: r.path,
        stream: r.stream,
        kind: r.kind,
        mode: r.mode,
        uid: r.uid,
        gid: r.gid,
        size: r.size,
        mtime_ns: r.mtime_ns,
        start_seq: start.0,
        start_lbn: start.1,
        start_off: r.start_off,
        end_seq: end.0,
        end_lbn: end.1,
        crc: r.crc,
        link: r.link,
        ctime_ns: r.ctime_ns,
        ino: r.ino,
        meta_only: r.meta_only,
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
