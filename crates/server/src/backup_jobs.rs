//! The backups clients began, from their request to their end: the state the
//! requests of a backup, its job's thread and the drives' thread share, under
//! one lock ([`Backups::lock`]), with a condition variable told of every change.

use crate::inlet::StreamInlet;
use crate::queue::Counters;
use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tapeloom_engine::{BaseTree, BlockCheck, Deletions, SetChoice};
use tapeloom_proto::backup::{Begin, State};

/// How long a job's outcome waits for its client to ask for it.
const KEEP_OUTCOME: Duration = Duration::from_secs(3600);

/// How a job ended: the backup document, or why it failed.
pub type Outcome = Result<Vec<u8>, String>;

/// A client's job, from its request to its end.
pub struct Job {
    /// The client that began it.
    pub client: String,
    /// As asked for.
    pub doc: Begin,
    /// Its tag.
    pub tag: u64,
    /// When it was asked for (ns since the epoch, the job clock's).
    pub asked_ns: i64,
    /// Where it is.
    pub state: State,
    /// Each stream's way onto the stages, once let in.
    pub spools: HashMap<u16, Arc<StreamInlet>>,
    /// Its job in the catalog and what stops its receiving, once let in.
    pub staging: Option<(i64, tapeloom_engine::ReceiveStop)>,
    /// Where its drives are given to it, until they are.
    pub grant: Option<SyncSender<Vec<usize>>>,
    /// Its thread stopped it where it was, the server stopping.
    pub halted: bool,
    /// Each stream's state across its client's connections.
    pub sending: HashMap<u16, Sending>,
    /// Streams whose end is on the spool.
    pub ended_streams: usize,
    /// When its first block came.
    pub first_block: Option<Instant>,
    /// When it was let in or its client last sent a frame.
    pub active: Instant,
    /// Its bytes so far.
    pub counters: Arc<Counters>,
    /// Why it failed, once it did.
    pub failed: Option<String>,
    /// Its outcome, once over.
    pub outcome: Option<Outcome>,
    /// When its outcome came, which is kept for its client for a while.
    pub ended: Option<Instant>,
    /// Its set, level and base, chosen when it is let in.
    pub choice: Option<SetChoice>,
    /// Being let in: its base read and its spools made, outside the jobs' lock.
    pub admitting: bool,
    /// The base's tree (empty for a full).
    pub base: Arc<BaseTree>,
    /// Where the client's deletions go, until they came.
    pub deletions_tx: Option<SyncSender<Deletions>>,
    /// Where the engine takes them from, until the job is on a drive.
    pub deletions_rx: Option<Receiver<Deletions>>,
}

impl Job {
    /// Whether every stream's end is on the spool.
    pub fn complete(&self) -> bool {
        self.ended_streams == self.doc.streams.len()
    }
}

/// The jobs clients began, and what receiving them shares.
pub struct Backups {
    jobs: Mutex<BTreeMap<u64, Job>>,
    /// Told whenever a job changes.
    pub changed: Condvar,
}

impl Default for Backups {
    fn default() -> Self {
        Backups {
            jobs: Mutex::new(BTreeMap::new()),
            changed: Condvar::new(),
        }
    }
}

impl Backups {
    /// Whether a client waits for room on the stages.
    pub fn pressed(&self) -> bool {
        (self.lock().values()).any(|j| j.staging.as_ref().is_some_and(|(_, s)| s.pressed()))
    }

    /// The jobs, locked.
    pub fn lock(&self) -> MutexGuard<'_, BTreeMap<u64, Job>> {
        self.jobs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits on `jobs` until told of a change or `until`; false once it passed.
    pub fn wait<'a>(
        &self,
        jobs: MutexGuard<'a, BTreeMap<u64, Job>>,
        until: Instant,
    ) -> Option<MutexGuard<'a, BTreeMap<u64, Job>>> {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        let (g, _) = (self.changed)
            .wait_timeout(jobs, left.min(Duration::from_millis(250)))
            .unwrap_or_else(PoisonError::into_inner);
        Some(g)
    }

    /// Stops every job let in and not yet ended where it is, for `why`: what it
    /// staged stays on the stages (the next start writes it), and a stream still
    /// being sent is cut.
    pub fn halt_all(&self, why: &str) {
        let open: Vec<u64> = (self.lock().iter())
            .filter(|(_, j)| j.outcome.is_none() && j.failed.is_none())
            .map(|(n, _)| *n)
            .collect();
        for n in open {
            self.close(n, why);
        }
    }

    /// Whether every job not ended holds all its streams on the stages.
    pub fn all_staged(&self) -> bool {
        (self.lock().values())
            .filter(|j| j.outcome.is_none() && j.failed.is_none())
            .all(|j| j.state != State::Waiting && j.complete())
    }

    /// Whether every job's thread is over (ended, or stopped by [`Backups::halt_all`]).
    pub fn all_halted(&self) -> bool {
        (self.lock().values()).all(|j| j.outcome.is_some() || j.halted)
    }

    /// Whether a job let in or on a drive has not ended yet.
    pub fn any_open(&self) -> bool {
        (self.lock().values()).any(|j| j.outcome.is_none())
    }

    /// Outcomes no client asked for in time are forgotten.
    pub fn forget_old(&self) {
        (self.lock()).retain(|_, j| j.ended.is_none_or(|t| t.elapsed() < KEEP_OUTCOME));
    }

    /// Stops job `backup`'s receiving and cuts its streams, outside the jobs' lock:
    /// the stop first, so that a connection handing a frame over is let go.
    pub fn close(&self, backup: u64, why: &str) {
        let (spools, stop) = match self.lock().get(&backup) {
            Some(j) => (
                j.spools.values().cloned().collect::<Vec<_>>(),
                j.staging.as_ref().map(|(_, s)| s.clone()),
            ),
            None => return,
        };
        if let Some(stop) = stop {
            stop.stop();
        }
        for s in spools {
            s.close(why);
        }
    }

    /// Jobs with a stream whose connection broke off longer than `window` ago and
    /// that no client sent again: each job, and why it fails.
    pub fn abandoned(&self, window: Duration) -> Vec<(u64, String)> {
        let jobs = self.lock();
        let mut out = Vec::new();
        for (n, j) in jobs.iter() {
            if j.failed.is_some() || j.outcome.is_some() {
                continue;
            }
            let cut = (j.sending.iter())
                .filter(|(_, s)| !s.open && !s.ended)
                .find_map(|(k, s)| {
                    s.cut
                        .as_ref()
                        .filter(|(at, _)| at.elapsed() > window)
                        .map(|c| (k, c))
                });
            if let Some((stream, (_, why))) = cut {
                let why = format!(
                    "stream {stream}'s connection broke off ({why}) and its client did not send it again within {} s",
                    window.as_secs()
                );
                out.push((*n, why));
            }
        }
        out
    }
}

/// A stream's state across its client's connections.
#[derive(Default)]
pub struct Sending {
    /// Whether a connection sends it now.
    pub open: bool,
    /// Blocks and notes the spool holds of it.
    pub held: u64,
    /// Whether its end came.
    pub ended: bool,
    /// The check of its next block, kept while no connection sends it.
    pub check: Option<BlockCheck>,
    /// When and why its last connection broke off, while no other sends it.
    pub cut: Option<(Instant, String)>,
}

/// A tag no other job has (random, as the engine's own).
pub fn random_tag() -> u64 {
    let mut b = [0u8; 8];
    if getrandom::fill(&mut b).is_err() {
        // No randomness: the time, which is unique enough for one server.
        return tapeloom_engine::clock::system_ns().unsigned_abs();
    }
    u64::from_le_bytes(b)
}

/// A client's job as it asked for it, before it is begun in the catalog.
pub struct Unwritten {
    /// Its client.
    pub client: String,
    /// Its tag.
    pub tag: u64,
    /// When it was asked for.
    pub asked_ns: i64,
    /// As asked for.
    pub doc: Begin,
}
