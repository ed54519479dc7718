//! A stream's way from its client's connection into its job on the stages.
//!
//! Each frame a connection reads is handed to the engine's receiver of the
//! stream (`tapeloom_engine::Inlet`), which checks the block and passes it to a
//! spooler writing it to the stages (`tapeloom_engine::receive_staged`). The
//! handing over waits while the stages are full, so a client sends no faster than
//! the stages take. A stream's end is answered only once its last chunk is
//! flushed and recorded in the catalog: what a client was told the server holds
//! is on disk.

use super::queue::Counters;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tapeloom_engine::Inlet;

/// What a client sends of a stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Item {
    /// A block, as sent, checked.
    Block(tapeloom_engine::Checked),
    /// A source object the client could not back up: its path, and why.
    Note(Vec<u8>, String),
    /// The stream's end.
    End,
    /// A sign of life of a client with nothing to send.
    Alive,
}

/// Why a stream takes nothing more: its job failed or stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closed(pub String);

/// One stream's way in, shared by the connections that send it (one at a time).
pub struct StreamInlet {
    inlet: Mutex<Option<Inlet>>,
    closed: Mutex<Option<String>>,
    counters: Arc<Counters>,
}

impl StreamInlet {
    /// The way in of a stream through `inlet`, its bytes counted into `counters`.
    pub fn new(inlet: Inlet, counters: Arc<Counters>) -> Self {
        StreamInlet {
            inlet: Mutex::new(Some(inlet)),
            closed: Mutex::new(None),
            counters,
        }
    }

    fn inlet(&self) -> MutexGuard<'_, Option<Inlet>> {
        self.inlet.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn closed(&self) -> Option<String> {
        self.closed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn refused(&self) -> Closed {
        Closed(
            self.closed()
                .unwrap_or_else(|| "the job stopped taking this stream".into()),
        )
    }

    /// Hands `item` over, waiting while the stages are full; for the end, waits
    /// until the stream's last chunk is recorded.
    pub fn push(&self, item: Item) -> Result<(), Closed> {
        if let Some(why) = self.closed() {
            return Err(Closed(why));
        }
        let mut g = self.inlet();
        let Some(inlet) = g.as_ref() else {
            return Err(self.refused());
        };
        let (n, block) = match &item {
            Item::Block(b) => (b.len() as u64, true),
            Item::Note(p, w) => ((p.len() + w.len()) as u64, false),
            Item::End | Item::Alive => (0, false),
        };
        let handed = match item {
            Item::Block(b) => inlet.checked(b).map_err(|_| inlet.failure_handle()()),
            Item::Note(path, why) => inlet.error(path, why).map_err(|_| inlet.failure_handle()()),
            Item::Alive => inlet.alive().map_err(|_| inlet.failure_handle()()),
            Item::End => {
                // The end takes the inlet: what tells why it failed is kept apart.
                let failure = inlet.failure_handle();
                match g.take() {
                    Some(inlet) => inlet.end().map_err(|_| failure()),
                    None => return Err(self.refused()),
                }
            }
        };
        drop(g);
        if let Err(engine) = handed {
            // The server's reason, when it closed the stream; else the engine's.
            return Err(self
                .closed()
                .or(engine)
                .map_or_else(|| self.refused(), Closed));
        }
        if n > 0 {
            self.counters.received(n, block);
        }
        Ok(())
    }

    /// Nothing more goes in, for `why`: the stream is cut (its job fails). A
    /// connection handing a frame over meanwhile is let go first by the job's
    /// stop (`tapeloom_engine::ReceiveStop`).
    pub fn close(&self, why: &str) {
        {
            let mut c = self.closed.lock().unwrap_or_else(PoisonError::into_inner);
            if c.is_none() {
                *c = Some(why.to_string());
            }
        }
        if let Some(inlet) = self.inlet().take() {
            inlet.cut(why.to_string());
        }
    }
}
