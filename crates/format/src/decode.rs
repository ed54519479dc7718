//! Turns a stream's payload bytes back into records, without buffering file data.

use crate::{FormatError, Kind, RecordHeader, RECORD_HEADER_LEN};

/// Largest non-data record body the decoder buffers.
const MAX_RECORD: u64 = 256 * 1024 * 1024;

/// What the decoder found.
#[derive(Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// A whole record other than `Data`.
    Record {
        /// Its kind.
        kind: Kind,
        /// Its body.
        body: &'a [u8],
    },
    /// A `Data` record of `len` bytes begins.
    DataStart {
        /// Body length.
        len: u64,
    },
    /// Part of a `Data` body.
    Data(&'a [u8]),
    /// The `Data` record is complete.
    DataEnd,
}

enum State {
    Header,
    Body { kind: Kind, len: u64 },
    Data { left: u64 },
}

/// Decodes the records of one stream from its payload bytes, fed in order.
pub struct RecordDecoder {
    state: State,
    head: Vec<u8>,
    body: Vec<u8>,
}

impl Default for RecordDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl RecordDecoder {
    /// A decoder positioned at a record boundary.
    pub fn new() -> Self {
        RecordDecoder {
            state: State::Header,
            head: Vec::with_capacity(RECORD_HEADER_LEN),
            body: Vec::new(),
        }
    }

    /// Forgets any partial record: the next byte fed starts a record.
    pub fn reset(&mut self) {
        self.state = State::Header;
        self.head.clear();
        self.body.clear();
    }

    /// True when the decoder is between records.
    pub fn at_boundary(&self) -> bool {
        matches!(self.state, State::Header) && self.head.is_empty()
    }

    /// Feeds payload bytes; calls `f` for every event, in order.
    pub fn feed<E: From<FormatError>>(
        &mut self,
        mut data: &[u8],
        f: &mut impl FnMut(Event<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        while !data.is_empty() {
            match self.state {
                State::Header => {
                    let n = (RECORD_HEADER_LEN - self.head.len()).min(data.len());
                    self.head.extend_from_slice(&data[..n]);
                    data = &data[n..];
                    if self.head.len() == RECORD_HEADER_LEN {
                        let mut a = [0u8; RECORD_HEADER_LEN];
                        a.copy_from_slice(&self.head);
                        self.head.clear();
                        let h = RecordHeader::decode(&a)?;
                        if h.kind == Kind::Data {
                            f(Event::DataStart { len: h.len })?;
                            if h.len == 0 {
                                f(Event::DataEnd)?;
                            } else {
                                self.state = State::Data { left: h.len };
                            }
                        } else {
                            if h.len > MAX_RECORD {
                                return Err(FormatError::RecordTooLarge {
                                    kind: h.kind,
                                    len: h.len,
                                }
                                .into());
                            }
                            self.body.clear();
                            if h.len == 0 {
                                f(Event::Record {
                                    kind: h.kind,
                                    body: &[],
                                })?;
                            } else {
                                self.state = State::Body {
                                    kind: h.kind,
                                    len: h.len,
                                };
                            }
                        }
                    }
                }
                State::Body { kind, len } => {
                    let n = ((len as usize) - self.body.len()).min(data.len());
                    self.body.extend_from_slice(&data[..n]);
                    data = &data[n..];
                    if self.body.len() as u64 == len {
                        self.state = State::Header;
                        f(Event::Record {
                            kind,
                            body: &self.body,
                        })?;
                    }
                }
                State::Data { left } => {
                    let n = (left.min(data.len() as u64)) as usize;
                    let left = left - n as u64;
                    self.state = if left == 0 {
                        State::Header
                    } else {
                        State::Data { left }
                    };
                    f(Event::Data(&data[..n]))?;
                    data = &data[n..];
                    if left == 0 {
                        f(Event::DataEnd)?;
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BlockHeader, StreamPacker};
    use proptest::prelude::*;

    #[derive(Debug, PartialEq)]
    enum Owned {
        Rec(Kind, Vec<u8>),
        Data(Vec<u8>),
    }

    fn decode_all(blocks: &[Vec<u8>]) -> Vec<Owned> {
        let mut d = RecordDecoder::new();
        let mut out = Vec::new();
        let mut cur = Vec::new();
        for b in blocks {
            let h = BlockHeader::open(b).unwrap();
            d.feed::<FormatError>(h.payload(b), &mut |ev| {
                match ev {
                    Event::Record { kind, body } => out.push(Owned::Rec(kind, body.to_vec())),
                    Event::DataStart { .. } => cur.clear(),
                    Event::Data(x) => cur.extend_from_slice(x),
                    Event::DataEnd => out.push(Owned::Data(std::mem::take(&mut cur))),
                }
                Ok(())
            })
            .unwrap();
        }
        out
    }

    proptest! {
        /// Packing then decoding gives back every record, whatever the sizes.
        #[test]
        fn pack_decode_round_trip(recs in proptest::collection::vec((any::<bool>(), proptest::collection::vec(any::<u8>(), 0..3000)), 0..20),
                                  bs in 1usize..4) {
            let block_size = 64 + bs * 700;
            let mut p = StreamPacker::new(3, 99, block_size);
            let mut want = Vec::new();
            for (is_data, body) in &recs {
                let kind = if *is_data { Kind::Data } else { Kind::Entry };
                p.record(kind, body);
                want.push(if *is_data { Owned::Data(body.clone()) } else { Owned::Rec(kind, body.clone()) });
            }
            p.finish_block();
            let mut blocks = Vec::new();
            let mut off = 0;
            for (i, mut b) in std::mem::take(&mut p.ready).into_iter().enumerate() {
                prop_assert_eq!(b.seq, i as u64);
                prop_assert_eq!(b.header.stream_offset, off);
                off += b.header.payload_len as u64;
                b.seal([1; 16], 10 + i as u64);
                prop_assert_eq!(b.buf.len(), block_size);
                blocks.push(b.buf);
            }
            prop_assert_eq!(decode_all(&blocks), want);
        }

        #[test]
        fn garbage_never_panics(b in proptest::collection::vec(any::<u8>(), 0..500)) {
            let mut d = RecordDecoder::new();
            let _ = d.feed::<FormatError>(&b, &mut |_| Ok(()));
        }
    }

    #[test]
    fn resync_from_first_record() {
        let mut p = StreamPacker::new(1, 1, 64 + 100);
        p.record(Kind::Entry, &[1; 150]);
        p.record(Kind::Entry, &[2; 10]);
        p.finish_block();
        let blocks: Vec<_> = p.ready.drain(..).collect();
        // The second record starts in block 1 at offset 150 + 16 - 100 = 66.
        assert_eq!(blocks[1].header.first_record, 66);
        let mut d = RecordDecoder::new();
        let mut got = Vec::new();
        let payload = &blocks[1].buf[64 + 66..64 + blocks[1].header.payload_len as usize];
        d.feed::<FormatError>(payload, &mut |ev| {
            if let Event::Record { body, .. } = ev {
                got.push(body.to_vec());
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(got, vec![vec![2u8; 10]]);
    }
}
