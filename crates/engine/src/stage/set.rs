//! The stages' space, shared by the threads that spool to them.

use super::check::{check_stage, StageReport};
use crate::error::{Result, StageError};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tapeloom_catalog::{Catalog, ChunkFilter, ChunkState, StagedChunk};

/// A stage's size and how much of it is taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageSpace {
    /// Catalog id.
    pub id: i64,
    /// The stage's folder.
    pub path: PathBuf,
    /// Bytes tapeloom may keep there.
    pub limit: u64,
    /// Bytes taken: chunks not yet on tape, chunks kept after tape, and
    /// reservations.
    pub used: u64,
}

impl StageSpace {
    /// Bytes not taken.
    pub fn free(&self) -> u64 {
        self.limit.saturating_sub(self.used)
    }
}

/// Space reserved on one stage for a chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    /// The stage's catalog id.
    pub stage_id: i64,
    /// The stage's folder.
    pub path: PathBuf,
    /// Bytes reserved.
    pub bytes: u64,
}

/// How often and how long reservations waited for space.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StageWaits {
    /// Reservations that had to wait.
    pub count: u64,
    /// Time they waited, in all.
    pub total: Duration,
}

struct State {
    stages: Vec<StageSpace>,
    waits: StageWaits,
    /// Reservations waiting now.
    waiting: usize,
    /// Set when the job using the set stopped: waiting reservations give up.
    cancelled: bool,
    /// Chunks on tape whose files are kept, oldest first: evicted rather than wait.
    kept: VecDeque<StagedChunk>,
    /// Chunks evicted whose catalog rows still say they are kept.
    evicted: Vec<StagedChunk>,
}

/// The home's stages with their limits and use, shared between threads (clones share
/// one state). [`StageSet::reserve`] takes space for a chunk on the stage with the
/// most free space, and waits while none has room: that wait is the backpressure that
/// holds a backup's sources to the pace of the tape. [`StageSet::release`] gives space
/// back and wakes the waiting.
#[derive(Clone)]
pub struct StageSet {
    inner: Arc<(Mutex<State>, Condvar)>,
    /// A job's own handle ([`StageSet::for_job`]): cancelling it stops that job's
    /// waits only.
    stop: Option<Arc<AtomicBool>>,
}

impl std::fmt::Debug for StageSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StageSet")
            .field("stages", &self.stages())
            .finish()
    }
}

impl StageSet {
    /// A set of the stages given.
    pub fn new(stages: Vec<StageSpace>) -> Self {
        StageSet {
            inner: Arc::new((
                Mutex::new(State {
                    stages,
                    waits: StageWaits::default(),
                    waiting: 0,
                    cancelled: false,
                    kept: VecDeque::new(),
                    evicted: Vec::new(),
                }),
                Condvar::new(),
            )),
            stop: None,
        }
    }

    /// A handle on the same stages for one job of several that share them (a
    /// server's): [`StageSet::cancel`] on it gives up that handle's waits, not
    /// the others'.
    pub fn for_job(&self) -> StageSet {
        StageSet {
            inner: Arc::clone(&self.inner),
            stop: Some(Arc::new(AtomicBool::new(false))),
        }
    }

    /// Whether this handle was cancelled.
    fn stopped(&self, st: &State) -> bool {
        st.cancelled
            || self
                .stop
                .as_ref()
                .is_some_and(|s| s.load(Ordering::Acquire))
    }

    /// The catalog's stages, each using the bytes of its chunks not yet on tape and
    /// of those kept after tape, and what checking each against the catalog found
    /// (see [`check_stage`]; it deletes the kept chunks whose time ran out).
    pub fn open(catalog: &Catalog) -> Result<(Self, Vec<StageReport>)> {
        let stages = catalog.stages()?;
        let mut reports = Vec::new();
        for s in &stages {
            reports.push(check_stage(catalog, s)?);
        }
        let usage = catalog.stage_use()?;
        let spaces = stages
            .into_iter()
            .map(|s| StageSpace {
                used: usage
                    .iter()
                    .find(|(id, _)| *id == s.id)
                    .map_or(0, |(_, u)| u.used()),
                id: s.id,
                path: s.path,
                limit: s.size_limit,
            })
            .collect();
        let set = Self::new(spaces);
        let mut kept: Vec<StagedChunk> = catalog
            .staged_chunks(&ChunkFilter {
                state: Some(ChunkState::Despooled),
                ..Default::default()
            })?
            .into_iter()
            .filter(StagedChunk::is_kept)
            .collect();
        kept.sort_by_key(|c| c.created_ns);
        set.lock().kept = kept.into();
        Ok((set, reports))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A thread that panicked holding the lock left the figures whole: each
        // change is one assignment.
        self.inner.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reserves `bytes` on the stage with the most free space, waiting until one has
    /// room. Refused when no stage could ever hold them.
    pub fn reserve(&self, bytes: u64) -> Result<Reservation> {
        let mut st = self.lock();
        let largest = st.stages.iter().map(|s| s.limit).max();
        match largest {
            None => return Err(StageError::NoStages.into()),
            Some(largest) if bytes > largest => {
                return Err(StageError::TooLarge { bytes, largest }.into())
            }
            Some(_) => {}
        }
        let mut since: Option<Instant> = None;
        loop {
            if self.stopped(&st) {
                if since.is_some() {
                    st.waiting -= 1;
                }
                return Err(crate::error::Error::Stopped);
            }
            let roomiest = st.stages.iter_mut().filter(|s| s.free() >= bytes).fold(
                None::<&mut StageSpace>,
                |best, s| match best {
                    Some(b) if b.free() >= s.free() => Some(b),
                    _ => Some(s),
                },
            );
            if let Some(s) = roomiest {
                s.used += bytes;
                let r = Reservation {
                    stage_id: s.id,
                    path: s.path.clone(),
                    bytes,
                };
                if let Some(t) = since {
                    st.waits.count += 1;
                    st.waits.total += t.elapsed();
                    st.waiting -= 1;
                }
                return Ok(r);
            }
            if let Some(c) = st.kept.pop_front() {
                // Rather than wait, give up the oldest chunk kept after tape.
                let evicted = st
                    .stages
                    .iter()
                    .position(|s| s.id == c.stage_id)
                    .map_or(Ok(false), |i| {
                        super::remove_chunk_file(&st.stages[i].path, &c.file)
                    });
                if let Err(e) = evicted {
                    if since.is_some() {
                        st.waiting -= 1;
                    }
                    return Err(e);
                }
                if let Some(s) = st.stages.iter_mut().find(|s| s.id == c.stage_id) {
                    s.used = s.used.saturating_sub(c.bytes);
                }
                st.evicted.push(c);
                continue;
            }
            if since.is_none() {
                since = Some(Instant::now());
                st.waiting += 1;
            }
            st = self
                .inner
                .1
                .wait(st)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Gives `bytes` back to stage `stage_id` and wakes the reservations waiting.
    pub fn release(&self, stage_id: i64, bytes: u64) {
        let mut st = self.lock();
        if let Some(s) = st.stages.iter_mut().find(|s| s.id == stage_id) {
            s.used = s.used.saturating_sub(bytes);
        }
        drop(st);
        self.inner.1.notify_all();
    }

    /// Keeps a chunk whose blocks are on tape on its stage: its bytes stay taken
    /// until a reservation that would otherwise wait evicts it (oldest first).
    pub fn keep(&self, chunk: StagedChunk) {
        let mut st = self.lock();
        let at = st
            .kept
            .partition_point(|k| k.created_ns <= chunk.created_ns);
        st.kept.insert(at, chunk);
    }

    /// Records in `catalog` that the chunks evicted so far are no longer kept.
    pub fn forget_evicted(&self, catalog: &Catalog) -> Result<()> {
        let evicted = std::mem::take(&mut self.lock().evicted);
        for c in evicted {
            catalog.drop_kept_chunk(c.job_id, c.stream, c.seq)?;
        }
        Ok(())
    }

    /// Bytes of chunks kept after tape.
    pub fn kept_bytes(&self) -> u64 {
        self.lock().kept.iter().map(|c| c.bytes).sum()
    }

    /// Whether a reservation is waiting for space now.
    pub fn pressed(&self) -> bool {
        self.lock().waiting > 0
    }

    /// Makes every waiting and later reservation give up (with [`Error::Stopped`]):
    /// the job that spools has stopped. On a job's handle ([`StageSet::for_job`])
    /// only that handle's reservations give up.
    ///
    /// [`Error::Stopped`]: crate::error::Error::Stopped
    pub fn cancel(&self) {
        match &self.stop {
            Some(stop) => {
                // Under the lock, so that no waiter misses the wake-up.
                let _st = self.lock();
                stop.store(true, Ordering::Release);
            }
            None => self.lock().cancelled = true,
        }
        self.inner.1.notify_all();
    }

    /// How often and how long reservations have waited.
    pub fn waits(&self) -> StageWaits {
        self.lock().waits
    }

    /// The stages and their use now.
    pub fn stages(&self) -> Vec<StageSpace> {
        self.lock().stages.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    fn space(id: i64, limit: u64, used: u64) -> StageSpace {
        StageSpace {
            id,
            path: PathBuf::from(format!("/s/{id}")),
            limit,
            used,
        }
    }

    #[test]
    fn a_chunk_goes_to_the_stage_with_the_most_free_space() {
        let set = StageSet::new(vec![
            space(1, 100, 10),
            space(2, 200, 150),
            space(3, 100, 0),
        ]);
        assert_eq!(set.reserve(50).unwrap().stage_id, 3);
        assert_eq!(set.reserve(50).unwrap().stage_id, 1);
        // Stages 1, 2 and 3 have 40, 50 and 50 free: the first of the roomiest.
        assert_eq!(set.reserve(45).unwrap().stage_id, 2);
        let used: Vec<u64> = set.stages().iter().map(|s| s.used).collect();
        assert_eq!(used, vec![60, 195, 50]);
        assert_eq!(set.waits(), StageWaits::default());
    }

    #[test]
    fn more_than_the_largest_stage_is_refused_not_waited_for() {
        let set = StageSet::new(vec![space(1, 100, 100), space(2, 300, 300)]);
        assert!(matches!(
            set.reserve(301),
            Err(Error::Stage(StageError::TooLarge {
                bytes: 301,
                largest: 300
            }))
        ));
        assert!(matches!(
            StageSet::new(vec![]).reserve(1),
            Err(Error::Stage(StageError::NoStages))
        ));
    }

    #[test]
    fn a_full_stage_holds_the_writer_until_another_thread_releases() {
        let set = StageSet::new(vec![space(1, 100, 0)]);
        let first = set.reserve(80).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let writer = {
            let set = set.clone();
            std::thread::spawn(move || {
                let r = set.reserve(50).unwrap();
                tx.send(r.bytes).unwrap();
            })
        };
        // The writer waits: 20 bytes free, 50 asked for.
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
        assert_eq!(set.waits().count, 0);
        set.release(first.stage_id, first.bytes);
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), 50);
        writer.join().unwrap();
        let w = set.waits();
        assert_eq!(w.count, 1);
        assert!(w.total >= Duration::from_millis(150), "{w:?}");
        assert_eq!(set.stages()[0].used, 50);
    }

    #[test]
    fn a_full_stage_evicts_kept_chunks_oldest_first_instead_of_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let mut s1 = space(1, 100, 0);
        s1.path = dir.path().to_path_buf();
        let set = StageSet::new(vec![s1]);
        let kept = |seq: u64, created_ns: i64| {
            let file = crate::stage::chunk_file(5, 0, seq);
            let f = dir.path().join(&file);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(&f, b"x").unwrap();
            let r = set.reserve(40).unwrap();
            set.keep(StagedChunk {
                job_id: 5,
                stream: 0,
                seq,
                stage_id: r.stage_id,
                file,
                first_block: 0,
                blocks: 1,
                stream_offset: 0,
                bytes: 40,
                state: ChunkState::Despooled,
                created_ns,
                keep_until_ns: Some(i64::MAX),
            });
            f
        };
        let newer = kept(1, 20);
        let older = kept(0, 10);
        assert_eq!(set.kept_bytes(), 80);
        // 20 free, 30 asked for: the older kept chunk goes, the newer stays.
        set.reserve(30).unwrap();
        assert!(!older.exists() && newer.exists());
        assert_eq!((set.kept_bytes(), set.stages()[0].used), (40, 70));
        assert_eq!(set.waits(), StageWaits::default());
        let evicted = set.lock().evicted.clone();
        assert_eq!(evicted.iter().map(|c| c.seq).collect::<Vec<_>>(), vec![0]);
    }

    #[test]
    fn cancelling_one_jobs_handle_leaves_the_others_waiting() {
        let set = StageSet::new(vec![space(1, 100, 100)]);
        let (a, b) = (set.for_job(), set.for_job());
        let waiter = |h: StageSet| std::thread::spawn(move || h.reserve(10).map(|r| r.bytes));
        let (wa, wb) = (waiter(a.clone()), waiter(b.clone()));
        std::thread::sleep(Duration::from_millis(100));
        a.cancel();
        assert!(matches!(wa.join().unwrap(), Err(Error::Stopped)));
        assert!(!wb.is_finished(), "the other job still waits for space");
        set.release(1, 50);
        assert_eq!(wb.join().unwrap().unwrap(), 10);
        assert!(matches!(a.reserve(1), Err(Error::Stopped)));
        assert_eq!(set.reserve(1).unwrap().bytes, 1);
    }

    #[test]
    fn many_writers_share_a_small_stage_without_overfilling_it() {
        let set = StageSet::new(vec![space(1, 10, 0), space(2, 10, 0)]);
        let peak = Arc::new(Mutex::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let set = set.clone();
                let peak = peak.clone();
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        let r = set.reserve(4).unwrap();
                        let used: u64 = set.stages().iter().map(|s| s.used).sum();
                        let mut p = peak.lock().unwrap();
                        *p = (*p).max(used);
                        drop(p);
                        std::thread::yield_now();
                        set.release(r.stage_id, r.bytes);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert!(*peak.lock().unwrap() <= 16);
        assert!(set.stages().iter().all(|s| s.used == 0));
    }
}
