//! A staged stream's entries, told from its blocks alone.
//!
//! As it packs, a stream's packer tells the writer which entries end in each block and
//! the oldest block whose position it still needs (backup/pack.rs). A stream kept on a
//! disk stage may go to tape after its packer is gone, after a crash even; then
//! [`StreamRows`] reads the same facts back from the blocks' records, so that the
//! catalog rows come out as the packer would have sent them.
//!
//! A block damaged on the stage never goes to tape. [`StreamRows::lost_block`] is told
//! of it instead; the records are followed again from the first record that starts in
//! a later intact block (`BlockHeader::first_record`), and the entries whose records
//! overlap the lost bytes get no row: they are reported as [`Lost`] (docs/STAGE.md
//! 3.3).

use crate::backup::mux::Done;
use crate::error::{Error, Result, StageError};
use tapeloom_format::{
    Entry, Event, FileEnd, FileStatus, Kind, RecordDecoder, RecordHeader, StreamEnd,
    BLOCK_HEADER_LEN, MAX_BLOCK_SIZE, NO_RECORD, RECORD_HEADER_LEN,
};
use tapeloom_tree::pack::mux::PackedRow;

/// Body length of a `FileEnd` record (FORMAT.md 5.4).
const FILE_END_LEN: u64 = 8;
/// Length of the `StreamEnd` record, header and body (FORMAT.md 5.5).
const STREAM_END_RECORD: u64 = RECORD_HEADER_LEN as u64 + 16;

/// Entries lost with damaged blocks: they have no row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lost {
    /// The entry's path in the job namespace; `None` for entries whose `Entry`
    /// record was itself lost, so that neither their paths nor their number are known.
    pub path: Option<Vec<u8>>,
    /// The stream bytes lost: from the first byte to after the last.
    pub from: u64,
    pub to: u64,
}

/// Bytes lost from the stream, until the records are followed again.
struct Gap {
    from: u64,
    to: u64,
    /// Every entry whose `Entry` record starts before this stream offset is either
    /// rowed already or `open`.
    known_end: u64,
    /// The entry the lost bytes cut into, when its `Entry` record was read.
    open: Option<Vec<u8>>,
}

/// Derives, block by block, what the packer said about a stream's entries.
pub(crate) struct StreamRows {
    dec: RecordDecoder,
    walk: Walk,
    /// An earlier block was refused: the records cannot be followed past it.
    damaged: bool,
}

/// Where the records of a stream stand, between the decoder's events.
struct Walk {
    stream: u16,
    /// Seq of the block due next.
    seq: u64,
    /// Stream offset of that block's first payload byte.
    fed: u64,
    /// Stream offset where the next record starts,
    next_at: u64,
    /// and that place as the packer reports it: (block seq, payload offset).
    next: (u64, u32),
    /// The next record has begun, in a block already read, and is an `Entry`.
    entry_begun: bool,
    expect: Expect,
    /// Body length of the `Data` record being passed over.
    data_len: u64,
    end: Option<StreamEnd>,
    problems: Vec<(Vec<u8>, String)>,
    /// Lost bytes not yet followed by a record read again.
    gap: Option<Gap>,
    /// The decoder is out of step: the next intact block is read from its first
    /// record.
    resync: bool,
    lost: Vec<Lost>,
}

/// A regular file whose `Data` and `FileEnd` records are still to come.
struct Open {
    row: PackedRow,
    start_block: u64,
    stored: u64,
    /// Stream offset after the entry's last record.
    end_at: u64,
}

impl Open {
    fn done(self, end_block: u64) -> Done {
        Done {
            row: self.row,
            start_block: self.start_block,
            end_block,
        }
    }
}

/// The record the stream's order allows next (FORMAT.md 5.3).
enum Expect {
    /// An `Entry`, or the `StreamEnd`.
    Entry,
    /// A regular file's `Data`.
    Data(Open),
    /// A regular file's `FileEnd`.
    FileEnd(Open),
    /// Nothing: the `StreamEnd` has been read.
    Nothing,
    /// After lost bytes: the `Data` and `FileEnd` records of entries lost with them
    /// are passed over until an `Entry` or the `StreamEnd`.
    Skip,
}

impl StreamRows {
    pub(crate) fn new(stream: u16) -> Self {
        StreamRows {
            dec: RecordDecoder::new(),
            walk: Walk {
                stream,
                seq: 0,
                fed: 0,
                next_at: 0,
                next: (0, 0),
                entry_begun: false,
                expect: Expect::Entry,
                data_len: 0,
                end: None,
                problems: Vec::new(),
                gap: None,
                resync: false,
                lost: Vec::new(),
            },
            damaged: false,
        }
    }

    /// Follows a stream from block `seq`, whose payload starts at stream offset
    /// `fed`, on: the blocks before it are on tape and every entry that starts in
    /// them has its row already. Records are read from the first that starts in a
    /// block; the bytes before it (the end of such an entry) are passed over.
    pub(crate) fn from_block(stream: u16, seq: u64, fed: u64) -> Self {
        let mut r = StreamRows::new(stream);
        let w = &mut r.walk;
        (w.seq, w.fed, w.next_at, w.next) = (seq, fed, fed, (seq, 0));
        w.expect = Expect::Skip;
        w.resync = true;
        r
    }

    /// The stream's next block: its seq, where its first record starts (its header's
    /// `first_record`, looked at only after lost bytes) and its payload (already
    /// expanded when the block was compressed; `payload_len` bytes). Returns the
    /// entries that end in this block, in order, and `keep_from` exactly as pack.rs
    /// computes it for this block (after lost bytes: for the entries still known).
    ///
    /// Blocks must come in order from seq 0, intact ones here and damaged ones to
    /// [`StreamRows::lost_block`]. Once a block is refused, every later one is too.
    pub(crate) fn block(
        &mut self,
        seq: u64,
        first_record: u32,
        payload: &[u8],
    ) -> Result<(Vec<Done>, u64)> {
        if self.damaged {
            return Err(self.walk.order(seq, "a block after damage to the stream"));
        }
        let r = self.read(seq, first_record, payload);
        self.damaged = r.is_err();
        r
    }

    /// Block `seq` was damaged on the stage and goes no further: the stream bytes
    /// `from..to` are lost. The entries they cut into are reported by
    /// [`StreamRows::take_lost`] once the records are read again, or at
    /// [`StreamRows::finish`].
    pub(crate) fn lost_block(&mut self, seq: u64, from: u64, to: u64) -> Result<()> {
        if self.damaged {
            return Err(self.walk.order(seq, "a block after damage to the stream"));
        }
        let w = &mut self.walk;
        let r = if seq != w.seq {
            Err(w.order(seq, "a block out of sequence"))
        } else if from != w.fed || to < from {
            Err(w.order(seq, "lost bytes elsewhere than the block due"))
        } else {
            w.lose(from, to);
            self.dec.reset();
            Ok(())
        };
        self.damaged = r.is_err();
        r
    }

    /// The entries lost with damaged blocks, once known.
    pub(crate) fn take_lost(&mut self) -> Vec<Lost> {
        std::mem::take(&mut self.walk.lost)
    }

    /// The stream has no more blocks: lost bytes after which no record was read
    /// again are settled (see [`StreamRows::take_lost`]).
    pub(crate) fn finish(&mut self) {
        let w = &mut self.walk;
        if w.gap.is_some() {
            // What follows the last entry known is the StreamEnd record, or an entry.
            let last = w.fed.saturating_sub(STREAM_END_RECORD);
            w.resolve(last);
        }
    }

    fn read(&mut self, seq: u64, first_record: u32, payload: &[u8]) -> Result<(Vec<Done>, u64)> {
        let w = &mut self.walk;
        if seq != w.seq {
            return Err(w.order(seq, "a block out of sequence"));
        }
        if payload.len() > MAX_BLOCK_SIZE - BLOCK_HEADER_LEN {
            return Err(w.order(seq, "a payload larger than any block's"));
        }
        let end = w.fed + payload.len() as u64;
        let mut from = 0;
        if w.resync {
            // After lost bytes, follow the records again where one starts.
            if first_record == NO_RECORD {
                w.fed = end;
                w.seq += 1;
                return Ok((Vec::new(), seq + 1));
            }
            if first_record as usize >= payload.len() {
                return Err(w.order(seq, "a first record outside its payload"));
            }
            from = first_record as usize;
            w.resync = false;
            w.next_at = w.fed + u64::from(first_record);
            w.next = (seq, first_record);
        }
        let mut done = Vec::new();
        self.dec
            .feed::<Error>(&payload[from..], &mut |ev| w.event(ev, end, &mut done))?;
        if matches!(w.expect, Expect::Nothing) && w.next_at < end {
            return Err(w.order(seq, "bytes after the StreamEnd record"));
        }
        let keep_from = w.open_from(payload).unwrap_or(seq + 1);
        w.fed = end;
        w.seq += 1;
        Ok((done, keep_from))
    }

    /// The path of the regular file whose records were begun and not finished: at
    /// the end of a stream cut short, the file cut.
    pub(crate) fn open_entry(&self) -> Option<&[u8]> {
        match &self.walk.expect {
            Expect::Data(o) | Expect::FileEnd(o) => Some(&o.row.path),
            _ => None,
        }
    }

    /// The stream's StreamEnd record, once seen: (entries, bytes).
    pub(crate) fn end(&self) -> Option<(u64, u64)> {
        self.walk.end.map(|e| (e.entries, e.bytes))
    }

    /// Problems the stream records about its files (FileEnd status Shrank, Grew,
    /// ReadError), as (path in the job namespace, reason).
    #[cfg_attr(
        not(test),
        expect(
            dead_code,
            reason = "a job finished from its chunks after a crash reports them; a live one has its packer's"
        )
    )]
    pub(crate) fn take_problems(&mut self) -> Vec<(Vec<u8>, String)> {
        std::mem::take(&mut self.walk.problems)
    }
}

impl Walk {
    fn order(&self, seq: u64, what: &'static str) -> Error {
        StageError::StreamOrder {
            stream: self.stream,
            seq,
            what,
        }
        .into()
    }

    /// One decoder event in the block due, whose payload ends at stream offset `end`.
    fn event(&mut self, ev: Event<'_>, end: u64, done: &mut Vec<Done>) -> Result<()> {
        match ev {
            Event::Record { kind, body } => {
                let (at, start) = (self.next, self.next_at);
                self.passed(body.len() as u64, end);
                if matches!(self.expect, Expect::Skip) {
                    if matches!(kind, Kind::FileEnd) {
                        return Ok(());
                    }
                    self.resolve(start);
                }
                self.record(kind, body, at, done)
            }
            Event::DataStart { len } => {
                match std::mem::replace(&mut self.expect, Expect::Nothing) {
                    Expect::Skip => {
                        self.data_len = len;
                        self.expect = Expect::Skip;
                        Ok(())
                    }
                    Expect::Data(open) if open.stored == len => {
                        self.data_len = len;
                        self.expect = Expect::FileEnd(open);
                        Ok(())
                    }
                    Expect::Data(_) => Err(self.order(
                        self.seq,
                        "a Data record of another length than its entry stores",
                    )),
                    _ => Err(self.order(self.seq, "a Data record that follows no regular file")),
                }
            }
            // File data is passed over, never kept: files can be larger than memory.
            Event::Data(_) => Ok(()),
            Event::DataEnd => {
                self.passed(self.data_len, end);
                Ok(())
            }
        }
    }

    /// A whole record other than `Data`, which started at `at`.
    fn record(
        &mut self,
        kind: Kind,
        body: &[u8],
        at: (u64, u32),
        done: &mut Vec<Done>,
    ) -> Result<()> {
        match (kind, std::mem::replace(&mut self.expect, Expect::Entry)) {
            (Kind::Entry, Expect::Entry) => {
                let e = Entry::decode(body)?;
                let regular = e.has_data();
                let stored = e.stored_len();
                // Its Data and FileEnd records follow at once.
                let records = 2 * RECORD_HEADER_LEN as u64 + FILE_END_LEN;
                let open = Open {
                    stored,
                    start_block: at.0,
                    end_at: self.next_at.saturating_add(stored).saturating_add(records),
                    row: self.row(e, at.1),
                };
                if regular {
                    self.expect = Expect::Data(open);
                } else {
                    done.push(open.done(self.seq));
                }
            }
            (Kind::FileEnd, Expect::FileEnd(mut open)) => {
                let fe = FileEnd::decode(body)?;
                open.row.crc = fe.crc;
                if let Some(why) = problem(fe.status) {
                    self.problems.push((open.row.path.clone(), why.to_string()));
                }
                done.push(open.done(self.seq));
            }
            (Kind::StreamEnd, Expect::Entry) => {
                self.end = Some(StreamEnd::decode(body)?);
                self.expect = Expect::Nothing;
            }
            (_, Expect::Entry) => {
                return Err(self.order(self.seq, "a record other than an Entry or the StreamEnd"))
            }
            (_, Expect::Data(_)) => {
                return Err(self.order(self.seq, "a regular file's entry without a Data record"))
            }
            (_, Expect::FileEnd(_)) => {
                return Err(self.order(self.seq, "a regular file's data without a FileEnd record"))
            }
            (_, Expect::Nothing) => {
                return Err(self.order(self.seq, "a record after the StreamEnd record"))
            }
            (_, Expect::Skip) => {
                return Err(self.order(self.seq, "a record other than an Entry after lost bytes"))
            }
        }
        Ok(())
    }

    /// The block due is lost: stream bytes `from..to`.
    fn lose(&mut self, from: u64, to: u64) {
        if let Some(g) = self.gap.as_mut() {
            g.to = to;
        } else {
            let (open, known_end) = match std::mem::replace(&mut self.expect, Expect::Skip) {
                Expect::Data(o) | Expect::FileEnd(o) => (Some(o.row.path), o.end_at),
                // The record under way, if any, started at `next_at`.
                Expect::Entry | Expect::Skip => (None, self.next_at),
                Expect::Nothing => (None, u64::MAX),
            };
            self.gap = Some(Gap {
                from,
                to,
                known_end,
                open,
            });
        }
        self.expect = Expect::Skip;
        self.entry_begun = false;
        self.resync = true;
        self.fed = to;
        self.seq += 1;
    }

    /// Records are read again from stream offset `start`, where an `Entry` or the
    /// `StreamEnd` begins: the entries cut by the lost bytes are known.
    fn resolve(&mut self, start: u64) {
        if matches!(self.expect, Expect::Skip) {
            self.expect = Expect::Entry;
        }
        let Some(g) = self.gap.take() else { return };
        if let Some(path) = g.open {
            self.lost.push(Lost {
                path: Some(path),
                from: g.from,
                to: g.to,
            });
        }
        if g.known_end < start {
            self.lost.push(Lost {
                path: None,
                from: g.from,
                to: g.to,
            });
        }
    }

    /// The catalog row of an entry whose record starts at `start_off`, as pack_item
    /// fills it in.
    fn row(&self, e: Entry, start_off: u32) -> PackedRow {
        PackedRow {
            path: e.path,
            stream: self.stream,
            kind: e.kind as u8,
            mode: e.mode,
            uid: e.uid,
            gid: e.gid,
            size: e.size,
            mtime_ns: e.mtime.as_nanos(),
            start_off,
            crc: 0,
            link: e.link,
            ctime_ns: e.facts.map_or(0, |f| f.ctime.as_nanos()),
            ino: e.facts.map_or(0, |f| f.ino),
            meta_only: e.meta_only,
        }
    }

    /// A record with a body of `body` bytes ended in the block due, whose payload ends
    /// at stream offset `end`: the next record starts right after it, or, when the block
    /// is full, at the start of the next block, which is where the packer places it.
    fn passed(&mut self, body: u64, end: u64) {
        self.next_at += RECORD_HEADER_LEN as u64 + body;
        self.next = if self.next_at < end {
            // Less than the payload's length, which is at most MAX_BLOCK_SIZE.
            (self.seq, (self.next_at - self.fed) as u32)
        } else {
            (self.seq + 1, 0)
        };
        self.entry_begun = false;
    }

    /// The block where the entry still open at the end of the block due starts, if one
    /// is: the packer counts an entry as open from the moment its `Entry` record's
    /// header begins, even when the header runs on into the next block.
    fn open_from(&mut self, payload: &[u8]) -> Option<u64> {
        match &self.expect {
            Expect::Data(open) | Expect::FileEnd(open) => Some(open.start_block),
            Expect::Nothing => None,
            Expect::Entry | Expect::Skip => {
                if self.next.0 == self.seq {
                    if let Some(&lead) = payload.get(self.next.1 as usize) {
                        // The kind leads a record header, low byte first; between
                        // entries that byte alone tells an Entry from the StreamEnd.
                        let entry = RecordHeader {
                            kind: Kind::Entry,
                            len: 0,
                        }
                        .encode()[0];
                        self.entry_begun = lead == entry;
                    }
                }
                self.entry_begun.then_some(self.next.0)
            }
        }
    }
}

/// What the packer reported for a file whose reading went wrong. The cause of a read
/// error is not recorded in the stream.
fn problem(status: FileStatus) -> Option<&'static str> {
    match status {
        FileStatus::Ok => None,
        FileStatus::Shrank => Some("file shrank while it was read; the rest is stored as zeros"),
        FileStatus::Grew => Some("file grew while it was read; the excess is not stored"),
        FileStatus::ReadError => Some("read failed; the rest is stored as zeros"),
    }
}

#[cfg(test)]
mod tests;
