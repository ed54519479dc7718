//! The frames of a stream's body: each a `u32` little-endian length and that many
//! bytes, a block or a note of a source object not backed up, a keepalive, and a
//! closing frame of length zero. The same codec reads a client's upload on the
//! server and a restore's answer on the client; the HTTP body that carries them
//! is the transport's (see `tapeloom-server`).

use bytes::Bytes;
use std::io::{self, Read, Write};

/// Why a body of frames could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The connection ended, failed or stalled before the body's end.
    #[error("connection: {0}")]
    Io(#[from] io::Error),
    /// A frame no sender writes.
    #[error("malformed frames: {0}")]
    Malformed(&'static str),
    /// A frame longer than the job's blocks (or a note longer than 64 KiB).
    #[error("a frame of {0} bytes, longer than any block of the job")]
    TooLarge(u32),
}

impl FrameError {
    /// The HTTP status to answer with; none when the connection is only closed.
    pub fn status(&self) -> Option<u16> {
        match self {
            FrameError::Io(_) => None,
            FrameError::Malformed(_) => Some(400),
            FrameError::TooLarge(_) => Some(413),
        }
    }
}

/// The bit of a frame's length that makes it a [`Frame::Note`].
pub const NOTE_FLAG: u32 = 1 << 31;
/// Bytes of a note at most.
pub const MAX_NOTE: usize = 64 * 1024;

/// A frame of a framed body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A block, shared rather than copied: a sender hands it to the connection
    /// and keeps it for sending again at once.
    Block(Bytes),
    /// A source object the sender could not back up: `u32` little-endian length
    /// of its path, the path, then why (UTF-8).
    Note(Vec<u8>),
}

impl Frame {
    /// A note's path and reason; none when it does not hold them.
    pub fn parse_note(note: &[u8]) -> Option<(Vec<u8>, String)> {
        let len = u32::from_le_bytes(note.get(..4)?.try_into().ok()?) as usize;
        let path = note.get(4..4usize.checked_add(len)?)?;
        let why = std::str::from_utf8(note.get(4 + len..)?).ok()?;
        Some((path.to_vec(), why.to_string()))
    }

    /// The note of `path` and `why`.
    pub fn note(path: &[u8], why: &str) -> Frame {
        let mut n = (path.len() as u32).to_le_bytes().to_vec();
        n.extend_from_slice(path);
        n.extend_from_slice(why.as_bytes());
        n.truncate(MAX_NOTE);
        Frame::Note(n)
    }
}

/// The length that makes a frame a keepalive: a note of no bytes, which no note
/// is (a note holds at least its path's length). As a length of zero closes the
/// body, this one with [`NOTE_FLAG`] is no block, note or closing frame.
pub const KEEPALIVE: u32 = NOTE_FLAG;

/// What a body of frames that may hold keepalives holds next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Framed {
    /// A block or a note.
    Frame(Frame),
    /// A keepalive ([`KEEPALIVE`]): the sender is at work but has nothing to send.
    KeepAlive,
}

/// What a frame's length says follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Length {
    /// The closing frame.
    End,
    /// A keepalive ([`KEEPALIVE`]).
    KeepAlive,
    /// A note of this many bytes.
    Note(usize),
    /// A block of this many bytes.
    Block(usize),
}

impl Length {
    /// What `len` says, in a body whose blocks are at most `max` bytes.
    pub fn of(len: u32, max: usize) -> Result<Length, FrameError> {
        if len == 0 {
            return Ok(Length::End);
        }
        if len == KEEPALIVE {
            return Ok(Length::KeepAlive);
        }
        if len & NOTE_FLAG != 0 {
            let n = (len & !NOTE_FLAG) as usize;
            return match n <= MAX_NOTE {
                true => Ok(Length::Note(n)),
                false => Err(FrameError::TooLarge(len)),
            };
        }
        match len as usize <= max {
            true => Ok(Length::Block(len as usize)),
            false => Err(FrameError::TooLarge(len)),
        }
    }
}

/// A body of frames, read one at a time: each a `u32` little-endian length and
/// that many bytes, the last of length zero. A length with [`NOTE_FLAG`] set is a
/// note of at most [`MAX_NOTE`] bytes; no other frame may be longer than `max`.
/// [`KEEPALIVE`] is a keepalive where the reader takes them
/// ([`Frames::next_framed`]), else malformed. The whole body is never held.
pub struct Frames {
    rest: Vec<u8>,
    max: usize,
    ended: bool,
}

impl Frames {
    /// The frames that follow a head, `rest` the bytes already read past it.
    pub fn new(rest: Vec<u8>, max: usize) -> Self {
        Frames {
            rest,
            max,
            ended: false,
        }
    }

    /// The next frame; none after the closing frame. A keepalive is refused.
    pub fn next_frame(&mut self, r: &mut impl Read) -> Result<Option<Frame>, FrameError> {
        if self.ended {
            return Ok(None);
        }
        let len = self.take(r, 4)?;
        let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]);
        if len == KEEPALIVE {
            return Err(FrameError::Malformed("a keepalive where none is taken"));
        }
        self.frame_of(r, len)
    }

    /// The next frame or keepalive; none after the closing frame.
    pub fn next_framed(&mut self, r: &mut impl Read) -> Result<Option<Framed>, FrameError> {
        if self.ended {
            return Ok(None);
        }
        let len = self.take(r, 4)?;
        let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]);
        if len == KEEPALIVE {
            return Ok(Some(Framed::KeepAlive));
        }
        Ok(self.frame_of(r, len)?.map(Framed::Frame))
    }

    /// The frame whose length is `len`, its bytes read from `r`.
    fn frame_of(&mut self, r: &mut impl Read, len: u32) -> Result<Option<Frame>, FrameError> {
        match Length::of(len, self.max)? {
            Length::End => {
                self.ended = true;
                Ok(None)
            }
            // Taken by the callers before they come here.
            Length::KeepAlive => Err(FrameError::Malformed("a keepalive where none is taken")),
            Length::Note(n) => self.take(r, n).map(|b| Some(Frame::Note(b))),
            Length::Block(n) => self.take(r, n).map(|b| Some(Frame::Block(Bytes::from(b)))),
        }
    }

    /// The trailer after the closing frame: a `u32` little-endian length of at
    /// most `max`, and that many bytes.
    pub fn trailer(&mut self, r: &mut impl Read, max: usize) -> Result<Vec<u8>, FrameError> {
        let len = self.take(r, 4)?;
        let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]);
        if len as usize > max {
            return Err(FrameError::TooLarge(len));
        }
        self.take(r, len as usize)
    }

    /// Exactly `n` bytes: those already read first, then from `r`, read straight
    /// into the frame (nothing read ahead, each byte written once).
    fn take(&mut self, r: &mut impl Read, n: usize) -> Result<Vec<u8>, FrameError> {
        let have = self.rest.len().min(n);
        // Zeroed by the allocator, not byte by byte.
        let mut out = vec![0u8; n];
        out[..have].copy_from_slice(&self.rest[..have]);
        self.rest.drain(..have);
        let mut at = have;
        while at < n {
            match r.read(&mut out[at..]) {
                Ok(k) if k > 0 => at += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Said plainly (TLS says it with a link to its manual).
                Ok(_) => return Err(closed_midway().into()),
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    return Err(closed_midway().into())
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(out)
    }
}

/// The error of a body of frames cut short.
fn closed_midway() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "closed by the sender before the body's end",
    )
}

/// Writes `frames` and keepalives as a body of frames (see [`Frames`]), the
/// closing frame last;
/// each keepalive is flushed at once. How many frames (keepalives not counted).
pub fn write_framed(
    w: &mut (impl FrameWrite + ?Sized),
    frames: impl Iterator<Item = Framed>,
) -> io::Result<u64> {
    write_framed_keeping(w, frames, drop)
}

/// Where frames are written. A writer that hands its bytes over in pieces
/// (the writer of a streamed HTTP body) takes a block as it is, without copying it.
pub trait FrameWrite: Write {
    /// Writes all of `b`; by default copied like any other bytes.
    fn write_shared(&mut self, b: &Bytes) -> io::Result<()> {
        self.write_all(b)
    }
}

impl FrameWrite for Vec<u8> {}

/// [`write_framed`], each frame handed to `keep` once it was written or its
/// writing failed (a sender that may have to send it again keeps it).
pub fn write_framed_keeping(
    w: &mut (impl FrameWrite + ?Sized),
    frames: impl Iterator<Item = Framed>,
    mut keep: impl FnMut(Frame),
) -> io::Result<u64> {
    let mut n = 0;
    for f in frames {
        let f = match f {
            Framed::Frame(f) => f,
            Framed::KeepAlive => {
                w.write_all(&KEEPALIVE.to_le_bytes())?;
                w.flush()?;
                continue;
            }
        };
        let written = write_frame(w, &f);
        keep(f);
        written?;
        n += 1;
    }
    w.write_all(&0u32.to_le_bytes())?;
    w.flush()?;
    Ok(n)
}

/// Writes one frame.
fn write_frame(w: &mut (impl FrameWrite + ?Sized), f: &Frame) -> io::Result<()> {
    let (flag, b): (u32, &[u8]) = match f {
        Frame::Block(b) => (0, b),
        Frame::Note(b) => (NOTE_FLAG, b),
    };
    // Nothing a reader would take for another frame, or refuse, is sent: an
    // empty block is the closing frame, an empty note a keepalive.
    if b.is_empty() {
        return Err(io::Error::other("an empty frame"));
    }
    if flag == NOTE_FLAG && b.len() > MAX_NOTE {
        return Err(io::Error::other("a note longer than 64 KiB"));
    }
    let len = u32::try_from(b.len())
        .ok()
        .filter(|l| l & NOTE_FLAG == 0)
        .ok_or_else(|| io::Error::other("a frame of 2 GiB or more"))?;
    w.write_all(&(len | flag).to_le_bytes())?;
    match f {
        Frame::Block(b) => w.write_shared(b),
        Frame::Note(b) => w.write_all(b),
    }
}

/// `%XX` escapes decoded; anything else kept as it is. None when a `%` is not
/// followed by two hexadecimal digits (the crate would keep it as it is).
pub fn percent_decode(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    let whole = (b.iter().enumerate())
        .filter(|(_, c)| **c == b'%')
        .all(|(i, _)| {
            b.get(i + 1..i + 3)
                .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit))
        });
    whole.then(|| percent_encoding::percent_decode(b).collect())
}

/// What a query value escapes: all but the unreserved characters and `/`.
const QUERY_VALUE: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'/');

/// Bytes escaped for a query value: unreserved characters and `/` as they are.
pub fn percent_encode(b: &[u8]) -> String {
    percent_encoding::percent_encode(b, QUERY_VALUE).to_string()
}

/// Blocks (kind 0), notes (1) and keepalives (any other kind) of test data.
#[cfg(test)]
pub(crate) fn framed_items(items: Vec<(Vec<u8>, u8)>) -> Vec<Framed> {
    (items.into_iter())
        .map(|(b, k)| match k {
            0 => Framed::Frame(Frame::Block(b.into())),
            1 => Framed::Frame(Frame::Note(b)),
            _ => Framed::KeepAlive,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Frames written are read back as they were; the closing frame ends them.
        #[test]
        fn frames_come_back(
            blocks in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 1..300), 0..8),
            notes in proptest::collection::vec(proptest::bool::ANY, 8),
        ) {
            let blocks: Vec<Frame> = blocks
                .into_iter()
                .zip(notes)
                .map(|(b, n)| if n { Frame::Note(b) } else { Frame::Block(b.into()) })
                .collect();
            let mut body = Vec::new();
            write_framed(&mut body, blocks.clone().into_iter().map(Framed::Frame)).unwrap();
            let (rest, tail) = body.split_at(body.len().min(5));
            let mut frames = Frames::new(rest.to_vec(), 300);
            let mut r = tail;
            let mut got = Vec::new();
            while let Some(f) = frames.next_frame(&mut r).unwrap() {
                got.push(f);
            }
            proptest::prop_assert_eq!(got, blocks);
        }

        /// Frames and keepalives written are read back as they were by a reader
        /// that takes keepalives.
        #[test]
        fn keepalives_come_back_between_frames(
            items in proptest::collection::vec((proptest::collection::vec(proptest::num::u8::ANY, 1..100), 0u8..3), 0..12),
        ) {
            let sent = framed_items(items);
            let mut body = Vec::new();
            write_framed(&mut body, sent.clone().into_iter()).unwrap();
            let mut frames = Frames::new(Vec::new(), 100);
            let mut r = body.as_slice();
            let mut got = Vec::new();
            while let Some(f) = frames.next_framed(&mut r).unwrap() {
                got.push(f);
            }
            proptest::prop_assert_eq!(got, sent);
            proptest::prop_assert!(r.is_empty());
        }

        /// Any bytes are frames or an error, never a panic, and no frame is longer
        /// than allowed.
        #[test]
        fn any_bytes_are_frames_or_an_error(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..600)) {
            let mut frames = Frames::new(Vec::new(), 64);
            let mut r = bytes.as_slice();
            while let Ok(Some(f)) = frames.next_framed(&mut r) {
                let Framed::Frame(f) = f else {
                    continue;
                };
                match f {
                    Frame::Block(b) => proptest::prop_assert!(!b.is_empty() && b.len() <= 64),
                    Frame::Note(n) => {
                        proptest::prop_assert!(n.len() <= MAX_NOTE);
                        let _ = Frame::parse_note(&n);
                    }
                }
            }
        }

        #[test]
        fn any_bytes_escape_and_come_back(b in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            proptest::prop_assert_eq!(percent_decode(&percent_encode(&b)).unwrap(), b);
        }
    }

    #[test]
    fn a_keepalive_is_four_bytes_and_only_where_taken() {
        let mut body = Vec::new();
        let sent = [
            Framed::KeepAlive,
            Framed::Frame(Frame::Block(vec![7; 3].into())),
        ];
        assert_eq!(write_framed(&mut body, sent.into_iter()).unwrap(), 1);
        assert_eq!(body[..8], [0, 0, 0, 0x80, 3, 0, 0, 0]);
        // A reader that takes none refuses it.
        let e = Frames::new(Vec::new(), 64).next_frame(&mut body.as_slice());
        assert!(matches!(e, Err(FrameError::Malformed(_))), "{e:?}");
        // A keepalive cut short is a body cut short.
        let e = Frames::new(Vec::new(), 64).next_framed(&mut &body[..3]);
        assert!(e.unwrap_err().to_string().contains("before the body's end"));
        // No frame is written that a reader would take for another, or refuse.
        for bad in [
            Frame::Note(Vec::new()),
            Frame::Block(Bytes::new()),
            Frame::Note(vec![0; MAX_NOTE + 1]),
        ] {
            let f = [Framed::Frame(bad)].into_iter();
            assert!(write_framed(&mut Vec::new(), f).is_err());
        }
        // A keepalive after the closing frame is not read as one.
        let mut body = Vec::new();
        write_framed(&mut body, std::iter::empty()).unwrap();
        body.extend_from_slice(&KEEPALIVE.to_le_bytes());
        let mut frames = Frames::new(Vec::new(), 64);
        let mut r = body.as_slice();
        assert_eq!(frames.next_framed(&mut r).unwrap(), None);
        assert_eq!(frames.next_framed(&mut r).unwrap(), None);
    }

    #[test]
    fn a_body_cut_short_says_so() {
        let body = [10u8, 0, 0, 0, 1, 2];
        let e = Frames::new(Vec::new(), 64).next_frame(&mut &body[..]);
        let e = e.unwrap_err();
        assert_eq!(e.status(), None);
        assert!(e.to_string().contains("before the body's end"), "{e}");
    }

    #[test]
    fn percent_escapes_go_both_ways() {
        let b = b"a b/\xff%?&=";
        assert_eq!(percent_decode(&percent_encode(b)).unwrap(), b);
        for bad in ["%", "%a", "%+1", "%zz"] {
            assert!(percent_decode(bad).is_none(), "{bad}");
        }
    }
}
