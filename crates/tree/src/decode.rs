//! Decoding a job's streams: blocks of several interleaved streams, each fed to
//! its stream's record decoder, and the records handed to a [`Sink`]. A tape
//! reader, a stage reader and blocks handed from elsewhere all decode so.

use crate::error::{Error, Result};
use std::collections::HashMap;
use tapeloom_format::{
    BlockHeader, Event, FormatError, RecordDecoder, CONTINUATION_STREAM, NO_RECORD,
};

/// Receives the decoded records of a job's streams.
pub trait Sink {
    /// One event of `stream`.
    fn event(&mut self, stream: u16, ev: Event<'_>, at: (u32, u64)) -> Result<()>;
    /// Bytes of `stream` were lost or did not decode: whatever record was open is damaged.
    fn lost(&mut self, stream: u16, why: &str);
}

#[derive(Default)]
struct StreamState {
    dec: RecordDecoder,
    next: Option<u64>,
}

/// Feeds blocks of several interleaved streams to their decoders.
#[derive(Default)]
pub struct Streams {
    map: HashMap<u16, StreamState>,
}

enum SinkError {
    Fatal(Error),
    Format(FormatError),
}

impl From<FormatError> for SinkError {
    fn from(e: FormatError) -> Self {
        SinkError::Format(e)
    }
}

impl Streams {
    /// Feeds one good block. When the stream's decoder is not in step with this block
    /// (first block seen, or blocks were skipped), decoding begins at `start`, a record
    /// known to start there, or else where the block says its first record starts.
    pub fn feed(
        &mut self,
        h: &BlockHeader,
        payload: &[u8],
        at: (u32, u64),
        start: Option<u32>,
        sink: &mut dyn Sink,
    ) -> Result<()> {
        if h.stream == CONTINUATION_STREAM {
            return Ok(());
        }
        let st = self.map.entry(h.stream).or_default();
        if st.next.is_some_and(|n| h.stream_offset < n) {
            // Bytes already decoded: the copy of a block written again on the next
            // cartridge after a write reported failed had put it on tape too.
            return Ok(());
        }
        let from = if st.next == Some(h.stream_offset) {
            0
        } else {
            if st.next.is_some() && !st.dec.at_boundary() {
                sink.lost(h.stream, "data lost in a bad block");
            }
            st.dec.reset();
            match start {
                Some(s) => s as usize,
                None if h.first_record == NO_RECORD => {
                    st.next = None;
                    return Ok(());
                }
                None => h.first_record as usize,
            }
        };
        // A block that claims to end past 2^64 leaves the next one to resynchronise.
        st.next = h.stream_offset.checked_add(u64::from(h.payload_len));
        let stream = h.stream;
        let r = st
            .dec
            .feed::<SinkError>(payload.get(from..).unwrap_or(&[]), &mut |ev| {
                sink.event(stream, ev, at).map_err(SinkError::Fatal)
            });
        match r {
            Ok(()) => Ok(()),
            Err(SinkError::Fatal(e)) => Err(e),
            Err(SinkError::Format(e)) => {
                // A record that does not decode: drop the stream's state and go on at
                // the next block that starts a record.
                st.dec.reset();
                st.next = None;
                sink.lost(stream, &e.to_string());
                Ok(())
            }
        }
    }

    /// The next blocks come from elsewhere on tape, perhaps from before the last
    /// ones: each stream decodes afresh from the next block it is fed, as after
    /// a gap. A stream left in the middle of an entry loses that entry.
    pub fn jump(&mut self, sink: &mut dyn Sink) {
        for (stream, st) in self.map.iter_mut() {
            if st.next.is_some() && !st.dec.at_boundary() {
                sink.lost(
                    *stream,
                    "the reading moved elsewhere on tape inside this entry",
                );
            }
            st.dec.reset();
            st.next = None;
        }
    }

    /// The streams fed so far.
    pub fn ids(&self) -> impl Iterator<Item = u16> + '_ {
        self.map.keys().copied()
    }

    /// Ends decoding: a stream that stopped mid-record lost its tail.
    pub fn finish(&mut self, sink: &mut dyn Sink) {
        for (stream, st) in self.map.iter_mut() {
            if !st.dec.at_boundary() {
                sink.lost(*stream, "the job's data ends in the middle of this entry");
                st.dec.reset();
            }
        }
    }
}
