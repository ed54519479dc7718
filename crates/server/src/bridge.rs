//! Between hyper's tasks and the threads that answer requests. The routes, the
//! catalog and the engine are synchronous (SQLite, the drives' threads), so each
//! request is answered on a thread of tokio's blocking pool: there a [`Conn`]
//! reads the request's body as `std::io::Read` (each read under a deadline) and
//! writes its answer, whole ([`Conn::answer`]) or streamed as it is made
//! ([`Conn::start`], then `std::io::Write`). The task that serves the connection
//! waits for the answer's head, then hands hyper its body to send
//! (`tapeloom_proto::body`).
//!
//! [`Deadlined`] bounds the other direction: a client that leaves an answer
//! unread for the timeout is dropped.

use crate::http::Answer;
use hyper::body::Incoming;
use std::future::Future;
use std::io::{self, Read, Write};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tapeloom_proto::body::{BodyReader, ChunkWriter, Chunks};
use tapeloom_proto::feed::FrameFeed;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// An answer's head and its body.
pub struct Head {
    /// The HTTP status.
    pub status: u16,
    /// Its content type.
    pub content_type: &'static str,
    /// Its body.
    pub body: Chunks,
}

/// A request's body and its answer, on the thread that answers it.
pub struct Conn {
    rt: Handle,
    /// The request's body; its deadline is moved on by a reader that takes it
    /// piece by piece.
    pub body: BodyReader<Incoming>,
    /// How long a write of the answer may wait for the client to take it.
    timeout: Duration,
    head: Option<oneshot::Sender<Head>>,
    out: Option<ChunkWriter>,
}

impl Conn {
    /// The thread's side of a request whose body is `body`: the answer's head goes
    /// to `head`.
    pub fn new(rt: Handle, body: Incoming, head: oneshot::Sender<Head>, timeout: Duration) -> Conn {
        Conn {
            body: BodyReader::new(rt.clone(), body, Instant::now() + timeout),
            rt,
            timeout,
            head: Some(head),
            out: None,
        }
    }

    /// Whether the answer's head went (by `answer` or `start`).
    pub fn answered(&self) -> bool {
        self.head.is_none()
    }

    /// Answers with `a`, whole; nothing when an answer went already.
    pub fn answer(&mut self, a: Answer) {
        if let Some(h) = self.head.take() {
            let _ = h.send(Head {
                status: a.status,
                content_type: a.content_type,
                body: Chunks::whole(a.body),
            });
        }
    }

    /// Starts a streamed answer of `status`: what is written next is its body.
    pub fn start(&mut self, status: u16, content_type: &'static str) -> io::Result<()> {
        let h =
            (self.head.take()).ok_or_else(|| io::Error::other("the answer was started already"))?;
        let (body, w) = Chunks::stream(self.rt.clone(), self.timeout);
        self.out = Some(w);
        h.send(Head {
            status,
            content_type,
            body,
        })
        .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the client went away"))
    }

    /// The request's body as frames, each gathered whole on the runtime and handed
    /// over at once (blocks at most `max` bytes); none when it was read already.
    pub fn frames(&mut self, max: usize) -> Option<FrameFeed> {
        let body = self.body.take_body()?;
        Some(FrameFeed::start(&self.rt, body, max))
    }

    fn out(&mut self) -> io::Result<&mut ChunkWriter> {
        (self.out.as_mut()).ok_or_else(|| io::Error::other("an answer written before its head"))
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.body.read(buf)
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.out()?.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out()?.flush()
    }
}

/// A connection whose writes fail once they waited the timeout for the client
/// to read: hyper has no write deadline of its own.
pub struct Deadlined<T> {
    inner: T,
    timeout: Duration,
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<T> Deadlined<T> {
    /// `inner`, its writes bounded by `timeout`.
    pub fn new(inner: T, timeout: Duration) -> Self {
        Deadlined {
            inner,
            timeout,
            stalled: None,
        }
    }

    /// A write that made no progress: an error once it waited the timeout.
    fn waited(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        let timeout = self.timeout;
        let sleep = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client did not read the answer in time",
            )),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Deadlined<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Deadlined<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write(cx, buf) {
            Poll::Pending => self.waited(cx).map(Err),
            done => {
                self.stalled = None;
                done
            }
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write_vectored(cx, bufs) {
            Poll::Pending => self.waited(cx).map(Err),
            done => {
                self.stalled = None;
                done
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.inner).poll_flush(cx) {
            Poll::Pending => self.waited(cx).map(Err),
            done => {
                self.stalled = None;
                done
            }
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
