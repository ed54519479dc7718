//! The per-second samples of a recall: files and bytes written back so far and
//! files still waiting, taken by a thread of their own while the recall reads and
//! writes, and kept with each job the recall read (`report JOB --op recall`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tapeloom_catalog::RecallSample;

/// How often a sample is taken.
const EVERY: Duration = Duration::from_secs(1);
/// How often the sampling thread looks whether the recall ended.
const TICK: Duration = Duration::from_millis(50);

/// What a recall has done so far, counted as it goes.
pub(crate) struct Progress {
    t0: Instant,
    asked: u64,
    back: AtomicU64,
    bytes: AtomicU64,
    failed: AtomicU64,
    ended: AtomicBool,
    samples: Mutex<Vec<RecallSample>>,
}

impl Progress {
    /// The progress of a recall of `asked` files, starting now.
    pub fn new(asked: u64) -> Self {
        Progress {
            t0: Instant::now(),
            asked,
            back: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            ended: AtomicBool::new(false),
            samples: Mutex::new(Vec::new()),
        }
    }

    /// A file of `bytes` came back.
    pub fn came_back(&self, bytes: u64) {
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.back.fetch_add(1, Ordering::Relaxed);
    }

    /// `n` files will not come back.
    pub fn failed(&self, n: u64) {
        self.failed.fetch_add(n, Ordering::Relaxed);
    }

    /// The sample of now.
    fn now(&self) -> RecallSample {
        let back = self.back.load(Ordering::Relaxed);
        let failed = self.failed.load(Ordering::Relaxed);
        RecallSample {
            t_ms: self.t0.elapsed().as_millis() as u64,
            files: back,
            bytes: self.bytes.load(Ordering::Relaxed),
            waiting: self.asked.saturating_sub(back + failed),
        }
    }

    /// Takes a sample at the start and every second until [`Progress::end`].
    pub fn sample(&self) {
        let mut next = Instant::now();
        while !self.ended.load(Ordering::Relaxed) {
            if Instant::now() >= next {
                let s = self.now();
                if let Ok(mut v) = self.samples.lock() {
                    v.push(s);
                }
                next += EVERY;
            }
            std::thread::sleep(TICK);
        }
    }

    /// Ends the sampling, with a last sample of the end.
    pub fn end(&self) {
        self.ended.store(true, Ordering::Relaxed);
    }

    /// The samples taken, the last of the end.
    pub fn samples(&self) -> Vec<RecallSample> {
        let mut v = self.samples.lock().map(|v| v.clone()).unwrap_or_default();
        let last = self.now();
        match v.last() {
            Some(l) if l.t_ms == last.t_ms => {}
            _ => v.push(last),
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_count_files_back_and_files_waiting_each_second() {
        let p = Progress::new(3);
        std::thread::scope(|s| {
            s.spawn(|| p.sample());
            std::thread::sleep(Duration::from_millis(1100));
            p.came_back(10);
            p.failed(1);
            p.end();
        });
        let v = p.samples();
        assert!(v.len() >= 2, "{v:?}");
        assert!(v[0].t_ms < 500, "{v:?}");
        assert_eq!((v[0].files, v[0].waiting), (0, 3));
        let last = v.last().unwrap();
        assert_eq!((last.files, last.bytes, last.waiting), (1, 10, 1));
        assert!(v.windows(2).all(|w| w[0].t_ms < w[1].t_ms), "{v:?}");
    }
}
