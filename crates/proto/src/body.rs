//! HTTP bodies between hyper's tasks and the threads that make or read them.
//! Both ends are synchronous where the data is (the engine's threads, SQLite), and
//! asynchronous on the wire (hyper on tokio): a [`Chunks`] body carries what a
//! thread writes through a [`ChunkWriter`] to hyper, and a [`BodyReader`] gives a
//! thread hyper's body as `std::io::Read`, each wait under a deadline.

use bytes::Bytes;
use http_body::{Body, Frame};
use std::io::{self, Read, Write};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::runtime::Handle;
use tokio::sync::mpsc;

/// Bytes a writer gathers before it hands them over.
const CHUNK: usize = 256 * 1024;

/// Chunks waiting for the connection to send them.
const CHUNKS_WAITING: usize = 4;

/// A body hyper sends: whole (its length known, so sent with `Content-Length`),
/// or chunks as a thread writes them (chunked), ending when the writer is dropped.
pub enum Chunks {
    /// The whole body; none once sent.
    Whole(Option<Bytes>),
    /// Chunks as they come.
    Stream(mpsc::Receiver<Bytes>),
}

impl Chunks {
    /// A whole body of `b`.
    pub fn whole(b: impl Into<Bytes>) -> Chunks {
        Chunks::Whole(Some(b.into()))
    }

    /// A streamed body and the writer that makes it on a thread of `rt`'s
    /// callers; each hand-over waits at most `timeout` for the connection.
    pub fn stream(rt: Handle, timeout: Duration) -> (Chunks, ChunkWriter) {
        let (tx, rx) = mpsc::channel(CHUNKS_WAITING);
        let w = ChunkWriter {
            rt,
            tx,
            timeout,
            pending: Vec::new(),
        };
        (Chunks::Stream(rx), w)
    }
}

impl Body for Chunks {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        match self.get_mut() {
            Chunks::Whole(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            Chunks::Stream(rx) => rx.poll_recv(cx).map(|c| c.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, Chunks::Whole(None))
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match self {
            Chunks::Whole(Some(b)) => http_body::SizeHint::with_exact(b.len() as u64),
            Chunks::Whole(None) => http_body::SizeHint::with_exact(0),
            Chunks::Stream(_) => http_body::SizeHint::default(),
        }
    }
}

/// The writing end of a streamed [`Chunks`], used from a thread outside the
/// runtime: what is written goes in chunks of 256 KiB, or at each flush.
pub struct ChunkWriter {
    rt: Handle,
    tx: mpsc::Sender<Bytes>,
    timeout: Duration,
    pending: Vec<u8>,
}

impl ChunkWriter {
    /// Hands what was written over, waiting at most the timeout.
    fn send(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::take(&mut self.pending));
        self.hand_over(chunk)
    }

    /// Hands `chunk` over, waiting at most the timeout.
    fn hand_over(&mut self, chunk: Bytes) -> io::Result<()> {
        let (tx, timeout) = (&self.tx, self.timeout);
        // The timer is made inside the runtime, which it needs.
        let sent =
            (self.rt).block_on(async { tokio::time::timeout(timeout, tx.send(chunk)).await });
        match sent {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the other end stopped taking the body",
            )),
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the other end did not take the body in time",
            )),
        }
    }
}

/// Blocks at least this long go to the connection as they are, not copied.
const SHARED: usize = 16 * 1024;

impl crate::frame::FrameWrite for ChunkWriter {
    fn write_shared(&mut self, b: &Bytes) -> io::Result<()> {
        if b.len() < SHARED {
            return self.write_all(b);
        }
        // What was written before it goes first, then the block itself.
        self.send()?;
        self.hand_over(b.clone())
    }
}

impl Write for ChunkWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.pending.extend_from_slice(buf);
        if self.pending.len() >= CHUNK {
            self.send()?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send()
    }
}

impl Drop for ChunkWriter {
    fn drop(&mut self) {
        // What was written goes; the other end has it or not.
        let _ = self.send();
    }
}

/// A body hyper receives, read from a thread outside the runtime. Each read
/// ends by [`BodyReader::deadline`], which a reader that takes the body piece by
/// piece moves on before each piece.
pub struct BodyReader<B> {
    rt: Handle,
    body: Option<B>,
    came: Bytes,
    /// When the read in progress must end.
    pub deadline: Instant,
}

impl<B> BodyReader<B> {
    /// `body`, read on the threads that call into `rt`, the first read ending by
    /// `deadline`.
    pub fn new(rt: Handle, body: B, deadline: Instant) -> Self {
        BodyReader {
            rt,
            body: Some(body),
            came: Bytes::new(),
            deadline,
        }
    }
}

/// Whether an error of a body is one cut short (hyper's incomplete message).
pub trait Incomplete {
    /// Whether the body ended before its framing said it would.
    fn incomplete(&self) -> bool;
}

impl Incomplete for hyper::Error {
    fn incomplete(&self) -> bool {
        if self.is_incomplete_message() {
            return true;
        }
        // A chunked body whose sender went away is an I/O error under hyper's.
        let mut source = std::error::Error::source(self);
        while let Some(e) = source {
            if let Some(io) = e.downcast_ref::<io::Error>() {
                return matches!(
                    io.kind(),
                    io::ErrorKind::UnexpectedEof
                        | io::ErrorKind::ConnectionReset
                        | io::ErrorKind::ConnectionAborted
                        | io::ErrorKind::BrokenPipe
                );
            }
            source = e.source();
        }
        false
    }
}

impl<B> Read for BodyReader<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Incomplete + std::error::Error + Send + Sync + 'static,
{
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.came.is_empty() {
            let Some(body) = self.body.as_mut() else {
                return Ok(0);
            };
            let left = self.deadline.saturating_duration_since(Instant::now());
            let next = std::future::poll_fn(|cx| Pin::new(&mut *body).poll_frame(cx));
            match (self.rt).block_on(async { tokio::time::timeout(left, next).await }) {
                Err(_) => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the body was not received in time",
                    ))
                }
                Ok(None) => self.body = None,
                Ok(Some(Err(e))) => return Err(body_error(e)),
                Ok(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        self.came = data;
                    }
                }
            }
        }
        let n = buf.len().min(self.came.len());
        buf[..n].copy_from_slice(&self.came.split_to(n));
        Ok(n)
    }
}

/// The I/O error of a body's error: one cut short is said plainly.
pub(crate) fn body_error<E>(e: E) -> io::Error
where
    E: Incomplete + std::error::Error + Send + Sync + 'static,
{
    if e.incomplete() {
        return io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "closed by the sender before the body's end",
        );
    }
    io::Error::other(e)
}

impl<B> BodyReader<B> {
    /// Takes the body out, with the bytes of it read already and not yet taken;
    /// none when it was read to its end. The reader then reads nothing more.
    pub fn take_body(&mut self) -> Option<(Bytes, B)> {
        let body = self.body.take()?;
        Some((std::mem::take(&mut self.came), body))
    }
}

/// Reads `r` to its end, at most `max` bytes (an error beyond).
pub fn read_to_end(r: &mut impl Read, max: u64) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let n = r.take(max.saturating_add(1)).read_to_end(&mut out)?;
    if n as u64 > max {
        return Err(io::Error::other(format!("a body longer than {max} bytes")));
    }
    Ok(out)
}
