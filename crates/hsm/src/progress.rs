//! The per-second samples of a recall: files and bytes written back so far and
//! files still waiting, taken by a thread of their own while the recall reads and
//! writes, and kept with each job the recall read (`report JOB --op recall`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};
use tapeloom_ops::hsm::RecallSample;

/// How often a sample is taken.
const EVERY: Duration = Duration::from_secs(1);

/// What a recall has done so far, counted as it goes.
pub(crate) struct Progress {
    t0: Instant,
    every: Duration,
    asked: u64,
    back: AtomicU64,
    bytes: AtomicU64,
    failed: AtomicU64,
    /// Set when the recall ended; the sampling thread waits on `wake` between
    /// samples, so the end does not wait for the next second.
    ended: Mutex<bool>,
    wake: Condvar,
    samples: Mutex<Vec<RecallSample>>,
}

impl Progress {
    /// The progress of a recall of `asked` files, starting now, sampled each
    /// second.
    pub fn new(asked: u64) -> Self {
        Self::every(asked, EVERY)
    }

    /// The progress of a recall of `asked` files, sampled every `every`.
    fn every(asked: u64, every: Duration) -> Self {
        Progress {
            t0: Instant::now(),
            every,
            asked,
            back: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            ended: Mutex::new(false),
            wake: Condvar::new(),
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
        let Ok(mut ended) = self.ended.lock() else {
            return;
        };
        while !*ended {
            let now = Instant::now();
            if now >= next {
                let s = self.now();
                if let Ok(mut v) = self.samples.lock() {
                    v.push(s);
                }
                next += self.every;
                continue;
            }
            match self.wake.wait_timeout(ended, next - now) {
                Ok((guard, _)) => ended = guard,
                Err(_) => return,
            }
        }
    }

    /// Ends the sampling at once; [`Progress::samples`] adds the last sample.
    pub fn end(&self) {
        if let Ok(mut ended) = self.ended.lock() {
            *ended = true;
        }
        self.wake.notify_all();
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

    #[test]
    fn a_recall_that_ends_does_not_wait_for_the_next_second() {
        // Samples an hour apart: the end wakes the sampler, which does not
        // sleep out the hour.
        let p = Progress::every(1, Duration::from_secs(3600));
        let t = Instant::now();
        std::thread::scope(|s| {
            s.spawn(|| p.sample());
            std::thread::sleep(Duration::from_millis(20));
            p.end();
        });
        assert!(t.elapsed() < Duration::from_secs(600), "{:?}", t.elapsed());
        assert!(!p.samples().is_empty());
    }
}
