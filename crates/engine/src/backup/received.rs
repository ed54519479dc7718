//! A backup whose streams were packed elsewhere (a client of the server): each
//! stream's blocks are handed in through an [`Inlet`] and a receiver thread per
//! stream stands where a packer would.
//!
//! Nothing the sender says is trusted. Every block is opened (`BlockHeader::open`:
//! magic, version, CRC), must carry the job's tag and its stream, come next in
//! sequence at the stream offset due, unsealed (zero volume, its seq as LBN), clear
//! and no longer than the job's block size (with room for the tail, for a job the
//! drives' writers encrypt); the entries' rows are told from the blocks themselves by [`StreamRows`], as for staged blocks. A refused block, a
//! stream cut before its end record, or a sender silent for longer than the idle
//! limit fails the job; what is already on tape stays. A sender with nothing to
//! send yet (a long walk of unchanged files) says it is alive ([`Inlet::alive`]).

use crate::backup::mux::{Msg, Outlet};
use crate::backup::staged::Feed;
use crate::error::{Error, ReceiveError, Result};
use crate::stage::rows::StreamRows;
use std::collections::HashMap;
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tapeloom_format::{
    check_relative_path, expand_block, BlockHeader, PackedBlock, BLOCK_HEADER_LEN,
};

/// Blocks that wait between an inlet and its stream's receiver.
const INLET_QUEUE: usize = 8;

/// What a sender hands to a stream.
enum Frame {
    Block(Vec<u8>),
    /// A block [`BlockCheck`] opened already: its CRC is not computed again.
    Checked(Checked),
    /// A source object the sender could not back up: its path, and why.
    Error(Vec<u8>, String),
    /// The end; the receiver answers once the stream's end record was read.
    End(SyncSender<()>),
    Cut(String),
    /// The sender is alive but has nothing to send yet (its walk is long).
    Alive,
}

/// The receiving thread is gone: the job failed or stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closed;

/// One stream's way in: its blocks in order, then [`Inlet::end`]. An inlet dropped
/// without `end` cuts the stream (and fails the job).
pub struct Inlet {
    /// The stream.
    pub stream: u16,
    tx: SyncSender<Frame>,
    /// For a stream received onto the stages: its end is answered once staged.
    staged: Option<Arc<Feed>>,
    /// What the receivers share: why the job failed, once it did.
    /// The first failure's words, kept for as long as an inlet or its failure
    /// handle is: the job may have taken the failure itself, or ended, by the
    /// time a connection asks why its stream was refused.
    said: Arc<Mutex<Option<String>>>,
}

impl Inlet {
    /// Hands the stream's next block over, waiting while the stream's queue is
    /// full (the drive sets the pace).
    pub fn block(&self, block: Vec<u8>) -> std::result::Result<(), Closed> {
        self.tx.send(Frame::Block(block)).map_err(|_| Closed)
    }

    /// Hands over a block the sender checked with a [`BlockCheck`] of the stream
    /// (the receiver checks its header's fields again, not its CRC).
    pub fn checked(&self, block: Checked) -> std::result::Result<(), Closed> {
        self.tx.send(Frame::Checked(block)).map_err(|_| Closed)
    }

    /// A source object of the stream the sender could not back up: `path` in the
    /// job's namespace, and why (a job error; the job ends partial).
    pub fn error(&self, path: Vec<u8>, why: String) -> std::result::Result<(), Closed> {
        self.tx.send(Frame::Error(path, why)).map_err(|_| Closed)
    }

    /// The sender is alive, with nothing to send yet: the stream's idle limit
    /// starts again. Never waits: when blocks wait already, they say as much.
    pub fn alive(&self) -> std::result::Result<(), Closed> {
        match self.tx.try_send(Frame::Alive) {
            Ok(()) | Err(TrySendError::Full(_)) => Ok(()),
            Err(TrySendError::Disconnected(_)) => Err(Closed),
        }
    }

    /// The stream has no more blocks: waits until every block was checked and the
    /// stream's end record read, and for a stream received onto the stages until
    /// its last chunk is flushed and recorded (else the job failed: [`Closed`]).
    pub fn end(self) -> std::result::Result<(), Closed> {
        let (tx, rx) = sync_channel(1);
        self.tx.send(Frame::End(tx)).map_err(|_| Closed)?;
        rx.recv().map_err(|_| Closed)?;
        match &self.staged {
            Some(feed) if !feed.wait_stream_end(self.stream) => Err(Closed),
            _ => Ok(()),
        }
    }

    /// The stream stops short, for `why` (the job fails).
    pub fn cut(self, why: String) {
        let _ = self.tx.send(Frame::Cut(why));
    }

    /// What tells why the job stopped taking blocks, once it did (the first
    /// failure of its receivers, or of its stages), even after the inlet is gone.
    pub fn failure_handle(&self) -> impl Fn() -> Option<String> + Send + 'static {
        let (said, staged) = (self.said.clone(), self.staged.clone());
        move || {
            let f = said.lock().ok().and_then(|f| f.clone());
            f.or_else(|| staged.as_ref()?.failure_text())
        }
    }
}

/// What the receivers of a job share: each stream's queue until its lane starts,
/// and the first failure.
pub(crate) struct Received {
    queues: Mutex<HashMap<u16, Receiver<Frame>>>,
    failure: Mutex<Option<Error>>,
    /// The first failure's words, which [`Received::take_failure`] leaves.
    said: Arc<Mutex<Option<String>>>,
    idle: Duration,
    /// Where the paths deleted since the base come, for a job with a base.
    deletions: Mutex<Option<Receiver<Deletions>>>,
}

/// Paths deleted since a job's base, with their entry types.
pub type Deletions = Vec<(Vec<u8>, u8)>;

impl Received {
    /// Queues for `streams`, and their inlets; a stream silent for `idle` is cut.
    #[cfg(test)]
    pub(crate) fn new(streams: &[u16], idle: Duration) -> (Arc<Received>, Vec<Inlet>) {
        Self::onto(streams, idle, None)
    }

    /// Queues for `streams`, and their inlets, each stream's end answered once
    /// staged on `feed` when there is one; a stream silent for `idle` is cut.
    pub(crate) fn onto(
        streams: &[u16],
        idle: Duration,
        feed: Option<&Arc<Feed>>,
    ) -> (Arc<Received>, Vec<Inlet>) {
        let mut queues = HashMap::new();
        let mut txs = Vec::new();
        for &stream in streams {
            let (tx, rx) = sync_channel(INLET_QUEUE);
            queues.insert(stream, rx);
            txs.push((stream, tx));
        }
        let r = Arc::new(Received {
            queues: Mutex::new(queues),
            failure: Mutex::new(None),
            said: Arc::new(Mutex::new(None)),
            idle,
            deletions: Mutex::new(None),
        });
        let inlets = (txs.into_iter())
            .map(|(stream, tx)| Inlet {
                stream,
                tx,
                staged: feed.cloned(),
                said: r.said.clone(),
            })
            .collect();
        (r, inlets)
    }

    fn fail(&self, e: Error) {
        if let Ok(mut f) = self.failure.lock() {
            // The first failure is the cause; a receiver stopped by it says only that.
            if f.is_none() && !matches!(e, Error::Stopped) {
                if let Ok(mut said) = self.said.lock() {
                    said.get_or_insert_with(|| e.to_string());
                }
                *f = Some(e);
            }
        }
    }

    /// The job's deletions will come through `rx`.
    pub(crate) fn expect_deletions(&self, rx: Receiver<Deletions>) {
        if let Ok(mut d) = self.deletions.lock() {
            *d = Some(rx);
        }
    }

    /// The paths deleted since the base, in order, once they came (waited for
    /// up to the idle limit); none when none are expected.
    pub(crate) fn deletions(&self) -> Result<Deletions> {
        let rx = self.deletions.lock().ok().and_then(|mut d| d.take());
        let Some(rx) = rx else {
            return Ok(Vec::new());
        };
        let mut d = match rx.recv_timeout(self.idle) {
            Ok(d) => d,
            Err(RecvTimeoutError::Timeout) => {
                let why = format!("none came for {} s", self.idle.as_secs());
                return Err(ReceiveError::Deletions(why).into());
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(ReceiveError::Deletions("the sender went away".into()).into())
            }
        };
        if let Some((p, _)) = (d.iter()).find(|(p, _)| check_relative_path(p).is_err()) {
            let why = format!("{} is not a path", crate::display_path(p));
            return Err(ReceiveError::Deletions(why).into());
        }
        d.sort();
        d.dedup_by(|a, b| a.0 == b.0);
        Ok(d)
    }

    /// The first failure of a stream, once.
    pub(crate) fn take_failure(&self) -> Option<Error> {
        self.failure.lock().ok().and_then(|mut f| f.take())
    }
}

/// Where a stream's next block must be.
struct Due {
    tag: u64,
    stream: u16,
    block_size: usize,
    seq: u64,
    offset: u64,
    /// Bytes each block must leave free for its encryption's nonce and tag (0:
    /// the job is written in clear).
    tail: usize,
}

impl Due {
    /// Opens `block` and checks it is the one due.
    fn check(&self, block: &[u8]) -> Result<BlockHeader> {
        let (stream, seq) = (self.stream, self.seq);
        let misplaced = |what| ReceiveError::Misplaced { stream, seq, what };
        if block.len() > self.block_size {
            return Err(misplaced("longer than the job's block size").into());
        }
        let h = BlockHeader::open(block).map_err(|source| ReceiveError::Damaged {
            stream,
            seq,
            source,
        })?;
        self.fields(h, block.len())
    }

    /// Checks that block `h`, `len` bytes as sent and its CRC checked already, is
    /// the one due.
    fn fields(&self, h: BlockHeader, len: usize) -> Result<BlockHeader> {
        let (stream, seq) = (self.stream, self.seq);
        let misplaced = |what| ReceiveError::Misplaced { stream, seq, what };
        if len > self.block_size {
            return Err(misplaced("longer than the job's block size").into());
        }
        let what = if h.job_tag != self.tag {
            Some("another job's")
        } else if h.stream != self.stream {
            Some("another stream's")
        } else if h.lbn != self.seq {
            Some("out of sequence")
        } else if h.volume != [0; 16] {
            Some("sealed for a volume")
        } else if h.encrypted {
            Some("encrypted")
        } else if h.stream_offset != self.offset {
            Some("at another stream offset")
        } else if self.tail > 0 && !self.leaves_tail(&h, len) {
            Some("without room for its encryption (the sender left no tail free)")
        } else {
            None
        };
        match what {
            Some(w) => Err(misplaced(w).into()),
            None => Ok(h),
        }
    }

    /// Whether block `h`, `len` bytes as sent, has room for its encryption's
    /// tail: a stored payload within the block as sent, a compressed one (cut to
    /// its frame) within the job's block size.
    fn leaves_tail(&self, h: &BlockHeader, len: usize) -> bool {
        match h.compressed {
            true => len + self.tail <= self.block_size,
            false => BLOCK_HEADER_LEN + h.payload_len as usize + self.tail <= len,
        }
    }
}

/// A block a [`BlockCheck`] found whole (its CRC right) and due.
#[derive(Debug, PartialEq, Eq)]
pub struct Checked {
    block: Vec<u8>,
    header: BlockHeader,
}

impl Checked {
    /// The block's bytes, as sent.
    pub fn len(&self) -> usize {
        self.block.len()
    }

    /// Whether the block has no bytes (never: a block holds at least its header).
    pub fn is_empty(&self) -> bool {
        self.block.is_empty()
    }
}

/// A stream's blocks checked as they come, before they are kept anywhere: each
/// opened and found to be the one due. The receiver checks each block's fields
/// again, but not its CRC.
pub struct BlockCheck {
    due: Due,
}

impl BlockCheck {
    /// The check of stream `stream` of job `tag`, whose blocks are at most
    /// `block_size` bytes.
    pub fn new(tag: u64, stream: u16, block_size: usize) -> Self {
        BlockCheck {
            due: Due {
                tag,
                stream,
                block_size,
                seq: 0,
                offset: 0,
                tail: 0,
            },
        }
    }

    /// Also checks that each block leaves `tail` bytes free for its encryption
    /// (a job the receiver encrypts).
    pub fn with_tail(mut self, tail: usize) -> Self {
        self.due.tail = tail;
        self
    }

    /// Checks `block`, the stream's next; what [`Inlet::checked`] takes.
    pub fn check(&mut self, block: Vec<u8>) -> Result<Checked> {
        let header = self.due.check(&block)?;
        self.due.seq += 1;
        self.due.offset += u64::from(header.payload_len);
        Ok(Checked { block, header })
    }

    /// Blocks checked so far.
    pub fn blocks(&self) -> u64 {
        self.due.seq
    }
}

/// Starts the receiver of stream `stream`, which feeds `out` as a packer would;
/// each block must leave `tail` bytes free (a job encrypted as it is written).
pub(crate) fn spawn(
    received: &Arc<Received>,
    (tag, block_size, tail): (u64, usize, usize),
    stream: u16,
    mut out: Outlet,
) -> std::thread::JoinHandle<()> {
    let received = Arc::clone(received);
    std::thread::spawn(move || {
        let rx = received
            .queues
            .lock()
            .ok()
            .and_then(|mut q| q.remove(&stream));
        let Some(rx) = rx else {
            received.fail(
                ReceiveError::Cut {
                    stream,
                    why: "no way in for this stream".into(),
                }
                .into(),
            );
            return;
        };
        let due = Due {
            tag,
            stream,
            block_size,
            seq: 0,
            offset: 0,
            tail,
        };
        let fail = |e| received.fail(e);
        if let Err(e) = receive(&rx, due, received.idle, &mut out, &fail) {
            received.fail(e);
        }
    })
}

/// Takes a stream's blocks until its end, checking each and telling its entries'
/// rows from it; then the stream's end as its own end record says. A failure at
/// the end is handed to `fail` before the end is answered, so that the sender
/// waiting on the answer finds why.
fn receive(
    rx: &Receiver<Frame>,
    mut due: Due,
    idle: Duration,
    out: &mut Outlet,
    fail: &dyn Fn(Error),
) -> Result<()> {
    let stream = due.stream;
    let cut = |why: String| Error::from(ReceiveError::Cut { stream, why });
    let mut rows = StreamRows::new(stream);
    let mut expanded = Vec::new();
    let ack = loop {
        let (buf, header) = match rx.recv_timeout(idle) {
            Ok(Frame::Block(b)) => {
                let h = due.check(&b)?;
                (b, h)
            }
            Ok(Frame::Checked(c)) => {
                let h = due.fields(c.header, c.block.len())?;
                (c.block, h)
            }
            Ok(Frame::Error(path, why)) => {
                out.other(Msg::Error(path, why))
                    .map_err(|_| Error::Stopped)?;
                continue;
            }
            Ok(Frame::End(ack)) => break ack,
            Ok(Frame::Cut(why)) => return Err(cut(why)),
            Ok(Frame::Alive) => continue,
            Err(RecvTimeoutError::Timeout) => {
                return Err(cut(format!("no block for {} s", idle.as_secs())))
            }
            Err(RecvTimeoutError::Disconnected) => return Err(cut("the sender went away".into())),
        };
        let len = header.payload_len as usize;
        let payload: &[u8] = if header.compressed {
            // The expanded block is its header, then its payload.
            expand_block(&header, &buf, &mut expanded)?;
            expanded.get(BLOCK_HEADER_LEN..)
        } else {
            buf.get(BLOCK_HEADER_LEN..BLOCK_HEADER_LEN + len)
        }
        .ok_or(tapeloom_format::FormatError::Truncated("block"))?;
        // The files the stream's records say were read with trouble are among the
        // errors the sender reports, by the same paths as a local job's.
        let (done, keep_from) = rows.block(due.seq, header.first_record, payload)?;
        // Its CRC was checked as it came (here or by the sender's BlockCheck).
        let block = PackedBlock::opened(buf, header, due.seq);
        due.seq += 1;
        due.offset += len as u64;
        let m = Msg::Block {
            block,
            done,
            keep_from,
        };
        out.block(m, len).map_err(|_| Error::Stopped)?;
    };
    rows.finish();
    let ended = match rows.end() {
        Some((entries, stored)) => out
            .other(Msg::End(entries, stored))
            .map_err(|_| Error::Stopped),
        None => Err(cut("ended before its end record".into())),
    };
    match ended {
        Ok(()) => {
            let _ = ack.send(());
            Ok(())
        }
        Err(e) => {
            fail(e);
            drop(ack);
            Err(Error::Stopped)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIZE: usize = 64 * 1024;

    /// A sealed block of stream 1 of job 7, seq `lbn` at `offset`, as a client packs it.
    fn block(f: impl FnOnce(&mut BlockHeader)) -> Vec<u8> {
        let mut h = BlockHeader {
            volume: [0; 16],
            lbn: 3,
            job_tag: 7,
            stream: 1,
            payload_len: 100,
            stream_offset: 500,
            first_record: 0,
            compressed: false,
            encrypted: false,
        };
        f(&mut h);
        let mut buf = vec![0u8; SIZE];
        h.seal(&mut buf);
        buf
    }

    fn due() -> Due {
        Due {
            tag: 7,
            stream: 1,
            block_size: SIZE,
            seq: 3,
            offset: 500,
            tail: 0,
        }
    }

    fn refusal(b: &[u8]) -> Option<String> {
        match due().check(b) {
            Ok(_) => None,
            Err(Error::Received(ReceiveError::Misplaced { what, .. })) => Some(what.to_string()),
            Err(Error::Received(ReceiveError::Damaged { .. })) => Some("damaged".into()),
            Err(e) => panic!("not a refusal of the block: {e}"),
        }
    }

    #[test]
    fn only_the_block_due_is_taken() {
        assert_eq!(refusal(&block(|_| {})), None);
        assert_eq!(
            refusal(&block(|h| h.job_tag = 8)).as_deref(),
            Some("another job's")
        );
        assert_eq!(
            refusal(&block(|h| h.stream = 2)).as_deref(),
            Some("another stream's")
        );
        assert_eq!(
            refusal(&block(|h| h.lbn = 4)).as_deref(),
            Some("out of sequence")
        );
        assert_eq!(
            refusal(&block(|h| h.volume = [1; 16])).as_deref(),
            Some("sealed for a volume")
        );
        assert_eq!(
            refusal(&block(|h| h.stream_offset = 400)).as_deref(),
            Some("at another stream offset")
        );
        let mut damaged = block(|_| {});
        damaged[200] ^= 1;
        assert_eq!(refusal(&damaged).as_deref(), Some("damaged"));
        assert_eq!(refusal(&damaged[..10]).as_deref(), Some("damaged"));
        let mut long = block(|_| {});
        long.push(0);
        assert_eq!(
            refusal(&long).as_deref(),
            Some("longer than the job's block size")
        );
    }

    #[test]
    fn a_job_encrypted_as_written_needs_room_for_the_tail() {
        let sealing = Due {
            tail: tapeloom_format::CRYPT_TAIL_LEN,
            ..due()
        };
        assert!(sealing.check(&block(|_| {})).is_ok());
        let full = block(|h| h.payload_len = (SIZE - BLOCK_HEADER_LEN) as u32);
        assert!(due().check(&full).is_ok(), "in clear it fits");
        let e = sealing.check(&full).unwrap_err();
        assert!(
            e.to_string().contains("without room for its encryption"),
            "{e}"
        );
    }

    #[test]
    fn deletions_are_waited_for_and_checked() {
        let (r, _inlets) = Received::new(&[1], Duration::from_millis(50));
        assert!(r.deletions().unwrap().is_empty(), "none expected");
        let (tx, rx) = sync_channel(1);
        r.expect_deletions(rx);
        tx.send(vec![
            (b"b".to_vec(), 1),
            (b"a".to_vec(), 2),
            (b"b".to_vec(), 1),
        ])
        .unwrap();
        assert_eq!(
            r.deletions().unwrap(),
            vec![(b"a".to_vec(), 2), (b"b".to_vec(), 1)]
        );
        let (tx, rx) = sync_channel(1);
        r.expect_deletions(rx);
        tx.send(vec![(b"../etc".to_vec(), 1)]).unwrap();
        let e = r.deletions().unwrap_err();
        assert!(
            matches!(e, Error::Received(ReceiveError::Deletions(_))),
            "{e}"
        );
        let (_tx, rx) = sync_channel(1);
        r.expect_deletions(rx);
        let e = r.deletions().unwrap_err();
        assert!(e.to_string().contains("none came"), "{e}");
    }

    /// How stream 1 ends, its sender saying it is alive every 20 ms for `alive`,
    /// then dropping its inlet (idle limit 100 ms); and when.
    fn cut_after(alive: Duration) -> (String, Duration) {
        let idle = Duration::from_millis(100);
        let (r, mut inlets) = Received::new(&[1], idle);
        let inlet = inlets.remove(0);
        let sender = std::thread::spawn(move || {
            let t0 = std::time::Instant::now();
            while t0.elapsed() < alive {
                inlet.alive().unwrap();
                std::thread::sleep(Duration::from_millis(20));
            }
            std::thread::sleep(Duration::from_millis(300));
        });
        let rx = r.queues.lock().unwrap().remove(&1).unwrap();
        let (tx, _keep) = sync_channel(4);
        let mut out = Outlet::new(tx, Arc::default(), Arc::default(), None);
        let t0 = std::time::Instant::now();
        let e = receive(&rx, due(), idle, &mut out, &|_| {}).unwrap_err();
        let when = t0.elapsed();
        sender.join().unwrap();
        (e.to_string(), when)
    }

    #[test]
    fn a_sender_alive_keeps_its_stream_past_the_idle_limit() {
        let (e, when) = cut_after(Duration::from_millis(600));
        assert!(e.contains("no block"), "{e}");
        assert!(
            when >= Duration::from_millis(650),
            "cut while alive: {when:?}"
        );
        let (e, when) = cut_after(Duration::ZERO);
        assert!(e.contains("no block"), "{e}");
        assert!(
            when < Duration::from_millis(300),
            "silent, yet kept: {when:?}"
        );
    }

    #[test]
    fn a_stream_dropped_by_its_sender_is_cut() {
        let (r, inlets) = Received::new(&[1], Duration::from_secs(5));
        drop(inlets);
        let rx = r.queues.lock().unwrap().remove(&1).unwrap();
        let (tx, _keep) = sync_channel(4);
        let mut out = Outlet::new(tx, Arc::default(), Arc::default(), None);
        let e = receive(&rx, due(), Duration::from_secs(5), &mut out, &|_| {}).unwrap_err();
        assert!(
            matches!(e, Error::Received(ReceiveError::Cut { stream: 1, .. })),
            "{e}"
        );
    }

    #[test]
    fn a_stream_ended_without_its_end_record_tells_its_sender_why() {
        // The job lets go of its receivers at once, as a failed job does: the
        // sender still learns why its end was refused.
        for _ in 0..50 {
            let (r, mut inlets) = Received::new(&[1], Duration::from_secs(5));
            let inlet = inlets.remove(0);
            let why = inlet.failure_handle();
            let (tx, _keep) = sync_channel(4);
            let out = Outlet::new(tx, Arc::default(), Arc::default(), None);
            let receiver = spawn(&r, (7, SIZE, 0), 1, out);
            drop(r);
            assert!(inlet.end().is_err());
            let said = why().expect("a reason");
            assert!(said.contains("end record"), "{said}");
            receiver.join().unwrap();
        }
    }
}
