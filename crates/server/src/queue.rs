//! The server's jobs from their request to their end: waiting, receiving,
//! writing, and the last ones that ended. What `GET /api/queue`, the status page
//! and `/metrics` show of the jobs comes from here: the queue counts its jobs into
//! the server's metrics as they move and end ([`Jobs`]).

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tapeloom_engine::Progress;

use super::metrics::{DriveTally, Jobs};

/// Ended entries kept for the status page.
const RECENT: usize = 50;

pub use tapeloom_proto::backup::State;

/// One entry as shown.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Entry {
    /// The server's number for the request (the `ID` of `/api/backups/ID`).
    pub backup: u64,
    /// The catalog's job id, once the job is on a drive.
    pub job: Option<i64>,
    /// The client (its token's name).
    pub client: String,
    /// The job's name.
    pub name: String,
    /// `client`, or `schedule NAME`.
    pub origin: String,
    /// Where it is.
    pub state: State,
    /// When it was asked for (Unix seconds).
    pub queued_at: u64,
    /// Bytes received from its client (blocks, headers included).
    pub received_bytes: u64,
    /// Bytes waiting on the spool.
    pub spooled_bytes: u64,
    /// Data bytes written by the drives.
    pub written_bytes: u64,
    /// Entries written.
    pub files: u64,
    /// Why it failed.
    pub reason: Option<String>,
}

/// An entry and the live figures of its job while it runs.
pub struct Live {
    /// The entry as it stood when taken.
    pub entry: Entry,
    /// The running job's progress (its per-second series too).
    pub progress: Option<Arc<Progress>>,
}

/// Bytes a job's client sent, and those still on the spool; counted into the
/// server's metrics too.
#[derive(Default)]
pub struct Counters {
    received: AtomicU64,
    held: AtomicU64,
    metrics: Jobs,
}

impl Counters {
    /// `n` bytes came from the client, a block or not, and wait on the spool.
    pub fn received(&self, n: u64, block: bool) {
        self.received.fetch_add(n, Ordering::Relaxed);
        self.held.fetch_add(n, Ordering::Relaxed);
        self.metrics.received(n, block);
    }

    /// The job holds `n` bytes on the stages now.
    pub fn held_now(&self, n: u64) {
        let old = self.held.swap(n, Ordering::Relaxed);
        if old > n {
            self.metrics.unspooled(old - n);
        } else {
            self.metrics.spooled_more(n - old);
        }
    }

    /// Bytes received so far.
    pub fn received_bytes(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    /// Bytes on the spool.
    pub fn held_bytes(&self) -> u64 {
        self.held.load(Ordering::Relaxed)
    }
}

struct Item {
    entry: Entry,
    progress: Option<Arc<Progress>>,
    counters: Arc<Counters>,
    /// What its drives had written at the previous sample.
    drives: DriveTally,
}

impl Item {
    fn shown(&self) -> Entry {
        let mut e = self.entry.clone();
        e.received_bytes = self.counters.received.load(Ordering::Relaxed);
        e.spooled_bytes = self.counters.held.load(Ordering::Relaxed);
        if let Some(p) = &self.progress {
            e.written_bytes = p.bytes.load(Ordering::Relaxed);
            e.files = p.files.load(Ordering::Relaxed);
        }
        e
    }
}

#[derive(Default)]
struct Inner {
    live: BTreeMap<u64, Item>,
    recent: VecDeque<Entry>,
}

/// The queue.
#[derive(Default)]
pub struct Queue {
    next: AtomicU64,
    inner: Mutex<Inner>,
    metrics: Jobs,
}

impl Queue {
    /// A queue that counts its jobs into `metrics`.
    pub fn new(metrics: Jobs) -> Self {
        Queue {
            metrics,
            ..Queue::default()
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A queue that counts its jobs into `metrics` and numbers them from
    /// `first` on.
    pub fn numbered_from(metrics: Jobs, first: u64) -> Self {
        Queue {
            metrics,
            next: AtomicU64::new(first.saturating_sub(1)),
            ..Queue::default()
        }
    }

    /// Adds a request of `client` for job `name`; its number.
    pub fn add(&self, client: &str, name: &str, origin: &str) -> u64 {
        let backup = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        self.add_as(backup, client, name, origin);
        backup
    }

    /// Adds a request of `client` for job `name` as number `backup` (a site's
    /// ticket's).
    pub fn add_as(&self, backup: u64, client: &str, name: &str, origin: &str) {
        let queued_at = u64::try_from(tapeloom_engine::clock::system().secs).unwrap_or(0);
        let entry = Entry {
            backup,
            job: None,
            client: client.to_string(),
            name: name.to_string(),
            origin: origin.to_string(),
            state: State::Waiting,
            queued_at,
            received_bytes: 0,
            spooled_bytes: 0,
            written_bytes: 0,
            files: 0,
            reason: None,
        };
        let counters = Arc::new(Counters {
            metrics: self.metrics.clone(),
            ..Counters::default()
        });
        let item = Item {
            entry,
            progress: None,
            counters,
            drives: DriveTally::default(),
        };
        // Counted under the queue's lock, as every move is: the gauges never show
        // a job in two places.
        let mut inner = self.lock();
        inner.live.insert(backup, item);
        self.metrics.moved(None, Some(State::Waiting));
    }

    /// The byte counters of entry `backup`.
    pub fn counters(&self, backup: u64) -> Option<Arc<Counters>> {
        self.lock().live.get(&backup).map(|i| i.counters.clone())
    }

    /// Entry `backup` is now `state`.
    pub fn set_state(&self, backup: u64, state: State) {
        if let Some(i) = self.lock().live.get_mut(&backup) {
            self.metrics.moved(Some(i.entry.state), Some(state));
            i.entry.state = state;
        }
    }

    /// The job of entry `backup` is on a drive, as job `job`.
    pub fn writing(&self, backup: u64, job: i64, progress: Arc<Progress>) {
        if let Some(i) = self.lock().live.get_mut(&backup) {
            self.metrics
                .moved(Some(i.entry.state), Some(State::Writing));
            i.entry.job = Some(job);
            i.entry.state = State::Writing;
            i.progress = Some(progress);
        }
    }

    /// Entry `backup` ended: failed with `reason`, or well. Its drives' last
    /// samples are counted.
    pub fn ended(&self, backup: u64, reason: Option<String>) {
        let mut inner = self.lock();
        let Some(mut item) = inner.live.remove(&backup) else {
            return;
        };
        if let Some(p) = &item.progress {
            self.metrics.sampled(&mut item.drives, p);
        }
        self.metrics.drives_done(&item.drives);
        self.metrics.moved(Some(item.entry.state), None);
        self.metrics.ended(reason.is_some());
        let mut e = item.shown();
        e.state = if reason.is_some() {
            State::Failed
        } else {
            State::Ended
        };
        e.spooled_bytes = 0;
        e.reason = reason;
        inner.recent.push_front(e);
        inner.recent.truncate(RECENT);
    }

    /// The entries not ended, oldest first.
    pub fn entries(&self) -> Vec<Entry> {
        self.lock().live.values().map(Item::shown).collect()
    }

    /// The entries not ended with their jobs' progress, oldest first.
    pub fn live(&self) -> Vec<Live> {
        (self.lock().live.values())
            .map(|i| Live {
                entry: i.shown(),
                progress: i.progress.clone(),
            })
            .collect()
    }

    /// The last entries that ended, newest first.
    pub fn recent(&self) -> Vec<Entry> {
        self.lock().recent.iter().cloned().collect()
    }

    /// Counts what the running jobs' drives wrote since the previous sample.
    pub fn sample(&self) {
        for i in self.lock().live.values_mut() {
            if let Some(p) = &i.progress {
                self.metrics.sampled(&mut i.drives, p);
            }
        }
    }

    /// Entries waiting or receiving (not yet on a drive).
    pub fn waiting(&self) -> usize {
        (self.lock().live.values())
            .filter(|i| matches!(i.entry.state, State::Waiting | State::Receiving))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_go_from_waiting_to_recent() {
        let q = Queue::default();
        let a = q.add("c1", "a", "client");
        let b = q.add("c2", "b", "schedule nightly");
        assert_eq!((a, b), (1, 2));
        assert_eq!(q.waiting(), 2);
        let p = Arc::new(Progress::default());
        p.bytes.store(77, Ordering::Relaxed);
        q.writing(a, 9, p);
        let e = q.entries();
        assert_eq!(e[0].state, State::Writing);
        assert_eq!((e[0].job, e[0].written_bytes), (Some(9), 77));
        assert_eq!(q.waiting(), 1);
        q.ended(a, None);
        q.ended(b, Some("the client went away".into()));
        assert!(q.entries().is_empty());
        let r = q.recent();
        assert_eq!(r[0].state, State::Failed);
        assert_eq!(r[0].reason.as_deref(), Some("the client went away"));
        assert_eq!((r[1].state, r[1].written_bytes), (State::Ended, 77));
    }
}
