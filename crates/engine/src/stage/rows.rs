//! A staged stream's entries, told from its blocks alone.
//!
//! As it packs, a stream's packer tells the writer which entries end in each block and
//! the oldest block whose position it still needs (backup/pack.rs). A stream kept on a
//! disk stage may go to tape after its packer is gone, after a crash even; then
//! [`StreamRows`] reads the same facts back from the blocks' records, so that the
//! catalog rows come out as the packer would have sent them.

use crate::backup::mux::Done;
use crate::error::{Error, Result, StageError};
use tapeloom_catalog::FileRow;
use tapeloom_format::{
    Entry, EntryType, Event, FileEnd, FileStatus, Kind, RecordDecoder, RecordHeader, StreamEnd,
    BLOCK_HEADER_LEN, MAX_BLOCK_SIZE, RECORD_HEADER_LEN,
};

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
}

/// A regular file whose `Data` and `FileEnd` records are still to come.
struct Open {
    row: FileRow,
    start_block: u64,
    stored: u64,
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
            },
            damaged: false,
        }
    }

    /// The stream's next block: its seq and its payload (already expanded when the
    /// block was compressed; `payload_len` bytes). Returns the entries that end in this
    /// block, in order, and `keep_from` exactly as pack.rs computes it for this block.
    ///
    /// Blocks must come in order from seq 0. Once a block is refused, every later one
    /// is too.
    pub(crate) fn block(&mut self, seq: u64, payload: &[u8]) -> Result<(Vec<Done>, u64)> {
        if self.damaged {
            return Err(self.walk.order(seq, "a block after damage to the stream"));
        }
        let r = self.read(seq, payload);
        self.damaged = r.is_err();
        r
    }

    fn read(&mut self, seq: u64, payload: &[u8]) -> Result<(Vec<Done>, u64)> {
        let w = &mut self.walk;
        if seq != w.seq {
            return Err(w.order(seq, "a block out of sequence"));
        }
        if payload.len() > MAX_BLOCK_SIZE - BLOCK_HEADER_LEN {
            return Err(w.order(seq, "a payload larger than any block's"));
        }
        let end = w.fed + payload.len() as u64;
        let mut done = Vec::new();
        self.dec
            .feed::<Error>(payload, &mut |ev| w.event(ev, end, &mut done))?;
        if matches!(w.expect, Expect::Nothing) && w.next_at < end {
            return Err(w.order(seq, "bytes after the StreamEnd record"));
        }
        let keep_from = w.open_from(payload).unwrap_or(seq + 1);
        w.fed = end;
        w.seq += 1;
        Ok((done, keep_from))
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
                let at = self.next;
                self.passed(body.len() as u64, end);
                self.record(kind, body, at, done)
            }
            Event::DataStart { len } => {
                match std::mem::replace(&mut self.expect, Expect::Nothing) {
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
                let regular = e.kind == EntryType::Regular;
                let open = Open {
                    stored: e.stored_len(),
                    start_block: at.0,
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
        }
        Ok(())
    }

    /// The catalog row of an entry whose record starts at `start_off`, as pack_item
    /// fills it in.
    fn row(&self, e: Entry, start_off: u32) -> FileRow {
        FileRow {
            path: e.path,
            stream: self.stream,
            kind: e.kind as u8,
            mode: e.mode,
            uid: e.uid,
            gid: e.gid,
            size: e.size,
            mtime_ns: e.mtime.as_nanos(),
            start_seq: 0,
            start_lbn: 0,
            start_off,
            end_seq: 0,
            end_lbn: 0,
            crc: 0,
            link: e.link,
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
            Expect::Entry => {
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
