//! A body of frames taken whole by a task of the runtime, for a thread that
//! handles one frame at a time.
//!
//! Read through [`crate::body::BodyReader`], a body wakes its thread for every
//! piece hyper hands over (a TLS record's worth, 16 KiB or so): some 64 wakeups
//! for each block of 1 MiB, and a copy of every byte into a frame zeroed first. A
//! [`FrameFeed`] gathers each frame on the runtime instead, into memory not zeroed
//! first, and hands it over whole: one wakeup a frame. It reads at most one frame
//! ahead of the thread, so a thread that stops taking frames stops the body.

use crate::body::{body_error, Incomplete};
use crate::frame::{Frame, FrameError, Framed, Length};
use bytes::Bytes;
use http_body::Body;
use std::io;
use std::pin::Pin;
use std::time::Duration;
use tokio::runtime::Handle;
use tokio::sync::mpsc;

type Item = Result<Option<Framed>, FrameError>;

/// The frames of one body, gathered by a task of the runtime; dropped, the task
/// stops.
pub struct FrameFeed {
    rt: Handle,
    rx: mpsc::Receiver<Item>,
    task: tokio::task::JoinHandle<()>,
}

impl FrameFeed {
    /// Starts gathering the frames of `body` (its first bytes `came`, read from it
    /// already), blocks being at most `max` bytes, on a task of `rt`.
    pub fn start<B>(rt: &Handle, (came, body): (Bytes, B), max: usize) -> FrameFeed
    where
        B: Body<Data = Bytes> + Unpin + Send + 'static,
        B::Error: Incomplete + std::error::Error + Send + Sync + 'static,
    {
        let (tx, rx) = mpsc::channel(1);
        let mut g = Gather { body, came, max };
        let task = rt.spawn(async move {
            loop {
                let item = g.next().await;
                let last = !matches!(item, Ok(Some(_)));
                if tx.send(item).await.is_err() || last {
                    return;
                }
            }
        });
        FrameFeed {
            rt: rt.clone(),
            rx,
            task,
        }
    }

    /// The next frame or keepalive, waiting at most `timeout` for it; none after
    /// the closing frame.
    pub fn next(&mut self, timeout: Duration) -> Item {
        let rx = &mut self.rx;
        match (self.rt).block_on(async { tokio::time::timeout(timeout, rx.recv()).await }) {
            Err(_) => Err(FrameError::Io(io::Error::new(
                io::ErrorKind::TimedOut,
                "the body was not received in time",
            ))),
            Ok(Some(item)) => item,
            // The task ended after the closing frame (or an error, said already).
            Ok(None) => Ok(None),
        }
    }
}

impl Drop for FrameFeed {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A body and the bytes of it not yet taken.
struct Gather<B> {
    body: B,
    came: Bytes,
    max: usize,
}

impl<B> Gather<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Incomplete + std::error::Error + Send + Sync + 'static,
{
    /// The next frame or keepalive; none for the closing frame.
    async fn next(&mut self) -> Item {
        let len = self.take(4).await?;
        let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]);
        Ok(match Length::of(len, self.max)? {
            Length::End => None,
            Length::KeepAlive => Some(Framed::KeepAlive),
            Length::Note(n) => Some(Framed::Frame(Frame::Note(self.take(n).await?))),
            Length::Block(n) => Some(Framed::Frame(Frame::Block(Bytes::from(
                self.take(n).await?,
            )))),
        })
    }

    /// Exactly `n` bytes, each copied once.
    async fn take(&mut self, n: usize) -> Result<Vec<u8>, FrameError> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            if self.came.is_empty() {
                self.more().await?;
                continue;
            }
            let k = (n - out.len()).min(self.came.len());
            out.extend_from_slice(&self.came.split_to(k));
        }
        Ok(out)
    }

    /// The body's next bytes; an error when it ends or fails first.
    async fn more(&mut self) -> Result<(), FrameError> {
        let body = &mut self.body;
        match std::future::poll_fn(|cx| Pin::new(&mut *body).poll_frame(cx)).await {
            None => Err(FrameError::Io(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "closed by the sender before the body's end",
            ))),
            Some(Err(e)) => Err(FrameError::Io(body_error(e))),
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    self.came = data;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{write_framed, KEEPALIVE};
    use std::collections::VecDeque;
    use std::task::{Context, Poll};

    /// A body of the given pieces, then its end (or an error: cut short).
    struct Pieces(VecDeque<Bytes>, bool);

    #[derive(Debug, thiserror::Error)]
    #[error("cut")]
    struct Cut;

    impl Incomplete for Cut {
        fn incomplete(&self) -> bool {
            true
        }
    }

    impl Body for Pieces {
        type Data = Bytes;
        type Error = Cut;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<http_body::Frame<Bytes>, Cut>>> {
            Poll::Ready(match self.0.pop_front() {
                Some(b) => Some(Ok(http_body::Frame::data(b))),
                None if self.1 => Some(Err(Cut)),
                None => None,
            })
        }
    }

    fn feed(rt: &tokio::runtime::Runtime, body: &[u8], piece: usize, cut: bool) -> FrameFeed {
        let pieces = body.chunks(piece).map(Bytes::copy_from_slice).collect();
        FrameFeed::start(rt.handle(), (Bytes::new(), Pieces(pieces, cut)), 100)
    }

    fn all(f: &mut FrameFeed) -> Vec<Item> {
        let mut got = Vec::new();
        loop {
            let item = f.next(Duration::from_secs(5));
            let last = !matches!(item, Ok(Some(_)));
            got.push(item);
            if last {
                return got;
            }
        }
    }

    proptest::proptest! {
        /// Frames come whole and in order however the body is cut into pieces,
        /// the closing frame last.
        #[test]
        fn frames_come_whole_whatever_the_pieces(
            items in proptest::collection::vec((proptest::collection::vec(proptest::num::u8::ANY, 1..100), 0u8..3), 0..12),
            piece in 1usize..64,
        ) {
            let sent = crate::frame::framed_items(items);
            let mut body = Vec::new();
            write_framed(&mut body, sent.clone().into_iter()).unwrap();
            let rt = tokio::runtime::Runtime::new().unwrap();
            let mut f = feed(&rt, &body, piece, false);
            let got: Vec<Framed> = all(&mut f)
                .into_iter()
                .map_while(|i| i.unwrap())
                .collect();
            proptest::prop_assert_eq!(got, sent);
            proptest::prop_assert!(matches!(f.next(Duration::from_secs(1)), Ok(None)));
        }
    }

    #[test]
    fn a_body_cut_short_or_a_frame_too_long_is_an_error() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let mut body = Vec::new();
        let block = Framed::Frame(Frame::Block(vec![7u8; 50].into()));
        write_framed(&mut body, [block].into_iter()).unwrap();
        // Cut in the middle of the block: the sender went away.
        let mut f = feed(&rt, &body[..30], 8, true);
        match f.next(Duration::from_secs(5)) {
            Err(FrameError::Io(e)) => {
                assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "{e}");
                assert_eq!(e.to_string(), "closed by the sender before the body's end");
            }
            other => panic!("{other:?}"),
        }
        // A block longer than the job's is refused before it is gathered.
        let mut long = 101u32.to_le_bytes().to_vec();
        long.extend_from_slice(&[0; 101]);
        let mut f = feed(&rt, &long, 16, false);
        assert!(matches!(
            f.next(Duration::from_secs(5)),
            Err(FrameError::TooLarge(101))
        ));
        // A body that stops sending: the wait ends at the timeout.
        let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(1);
        struct Stalled(tokio::sync::mpsc::Receiver<Bytes>);
        impl Body for Stalled {
            type Data = Bytes;
            type Error = Cut;
            fn poll_frame(
                mut self: Pin<&mut Self>,
                cx: &mut Context<'_>,
            ) -> Poll<Option<Result<http_body::Frame<Bytes>, Cut>>> {
                self.0
                    .poll_recv(cx)
                    .map(|b| b.map(|b| Ok(http_body::Frame::data(b))))
            }
        }
        let head = Bytes::copy_from_slice(&KEEPALIVE.to_le_bytes());
        let mut f = FrameFeed::start(rt.handle(), (head, Stalled(rx)), 100);
        assert!(matches!(
            f.next(Duration::from_secs(5)),
            Ok(Some(Framed::KeepAlive))
        ));
        match f.next(Duration::from_millis(200)) {
            Err(FrameError::Io(e)) => assert_eq!(e.kind(), io::ErrorKind::TimedOut),
            other => panic!("{other:?}"),
        }
        drop(tx);
    }
}
