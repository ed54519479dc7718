//! Which drives the server's running jobs hold, and the home they share.
//!
//! The server runs one job on each free drive. A job holds the drives it was
//! given from its start to its end and writes on no other. While any job runs the
//! server holds the home's lock once, and each job works through a sibling of that
//! home ([`Home::sibling`]): a catalog connection of its own and the library
//! handle all of them share. When the last job ends the lock is let go, so a
//! restore, a scheduled job or an admin's command can take the home.
//!
//! Only the jobs' threads take these locks, never a request's.

use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};
use tapeloom_engine::{Home, StageSet};

/// The server's drives, and the home its running jobs share.
pub struct Drives {
    inner: Mutex<Inner>,
    /// `tapeloom_drives_busy`.
    gauge: prometheus_client::metrics::gauge::Gauge,
    /// Taken while the home is opened, so two jobs never wait on its lock at once.
    opening: Mutex<()>,
}

struct Inner {
    /// Whether each drive is held by a job.
    busy: Vec<bool>,
    /// The home, while any job holds it.
    home: Option<Home>,
    /// Its stages, which its running jobs share, opened with it.
    stages: Option<StageSet>,
    /// Jobs holding the home.
    holders: usize,
}

impl Drives {
    /// A library of `n` drives, all free; the drives held are counted into
    /// `gauge`.
    pub fn new(n: usize, gauge: prometheus_client::metrics::gauge::Gauge) -> Self {
        Drives {
            gauge,
            inner: Mutex::new(Inner {
                busy: vec![false; n.max(1)],
                home: None,
                stages: None,
                holders: 0,
            }),
            opening: Mutex::new(()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Drives no job holds.
    pub fn free(&self) -> usize {
        self.lock().busy.iter().filter(|b| !**b).count()
    }

    /// Drives held by jobs.
    pub fn busy(&self) -> usize {
        self.lock().busy.iter().filter(|b| **b).count()
    }

    /// Takes up to `n` free drives (at least one, when one is free); the drives'
    /// indexes, none when every drive is held.
    pub fn take(&self, n: usize) -> Vec<usize> {
        let mut g = self.lock();
        let free: Vec<usize> = (g.busy.iter().enumerate())
            .filter(|(_, b)| !**b)
            .map(|(i, _)| i)
            .take(n.max(1))
            .collect();
        for &i in &free {
            g.busy[i] = true;
        }
        self.gauge.inc_by(free.len() as i64);
        free
    }

    /// Waits for a free drive and takes it, until `stop` says to give up
    /// (none then). The dispatcher of clients' jobs takes drives too; this one
    /// looks again four times a second.
    pub fn wait_for_one(&self, stop: impl Fn() -> bool) -> Option<Held<'_>> {
        loop {
            let indexes = self.take(1);
            if !indexes.is_empty() {
                return Some(Held {
                    drives: self,
                    indexes,
                });
            }
            if stop() {
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
    }

    /// Gives drives back.
    pub fn give(&self, drives: &[usize]) {
        let mut g = self.lock();
        for &i in drives {
            if let Some(b) = g.busy.get_mut(i).filter(|b| **b) {
                *b = false;
                self.gauge.dec();
            }
        }
    }

    /// A handle on the home for one job, the home opened (and its lock taken)
    /// when no other job holds it. The handle gives itself back when dropped,
    /// however the job ends.
    pub fn enter(&self, dir: &Path) -> tapeloom_ops::Result<Entered<'_>> {
        let _opening = self.opening.lock().unwrap_or_else(PoisonError::into_inner);
        let (home, stages) = match self.sibling()? {
            Some(h) => h,
            None => {
                // Waits here for another process that holds the home.
                let mut home = Home::open(dir)?;
                let mine = home.sibling()?;
                // Opened while no job of this server runs: the `.part` files it
                // removes are a dead process's.
                let stages = tapeloom_ops::spool::open(&home)?;
                let mut g = self.lock();
                g.home = Some(home);
                g.stages = Some(stages.clone());
                g.holders += 1;
                (mine, stages)
            }
        };
        Ok(Entered {
            drives: self,
            home,
            stages,
        })
    }

    /// A sibling of the home the running jobs hold, and its stages, if they hold
    /// it.
    fn sibling(&self) -> tapeloom_engine::Result<Option<(Home, StageSet)>> {
        let mut g = self.lock();
        let Some(stages) = g.stages.clone() else {
            return Ok(None);
        };
        let Some(home) = g.home.as_mut() else {
            return Ok(None);
        };
        let h = home.sibling()?;
        g.holders += 1;
        Ok(Some((h, stages)))
    }

    /// The bytes the stages hold and their size, while a job holds the home.
    pub fn stage_use(&self) -> Option<(u64, u64)> {
        let stages = self.lock().stages.as_ref()?.stages();
        Some((
            stages.iter().map(|s| s.used).sum(),
            stages.iter().map(|s| s.limit).sum(),
        ))
    }

    /// A job is done with its handle on the home: the home's lock is let go when
    /// no job holds it any more.
    fn leave(&self) {
        let last = {
            let mut g = self.lock();
            g.holders = g.holders.saturating_sub(1);
            if g.holders == 0 {
                g.stages = None;
                g.home.take()
            } else {
                None
            }
        };
        drop(last);
    }
}

/// One job's handle on the home the running jobs share.
pub struct Entered<'a> {
    drives: &'a Drives,
    home: Home,
    /// The stages the running jobs share.
    pub stages: StageSet,
}

impl std::ops::Deref for Entered<'_> {
    type Target = Home;
    fn deref(&self) -> &Home {
        &self.home
    }
}

impl std::ops::DerefMut for Entered<'_> {
    fn deref_mut(&mut self) -> &mut Home {
        &mut self.home
    }
}

/// Drives a job holds until it drops them.
pub struct Held<'a> {
    drives: &'a Drives,
    /// Their indexes.
    pub indexes: Vec<usize>,
}

impl Held<'_> {
    /// Takes up to `n` more drives of those free now.
    pub fn more(&mut self, n: usize) {
        if n > 0 {
            let more = self.drives.take(n);
            self.indexes.extend(more);
        }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.drives.give(&self.indexes);
    }
}

impl Drop for Entered<'_> {
    /// The job's handle goes just after this (its own lock on the home with it,
    /// which keeps the home locked until then).
    fn drop(&mut self) {
        self.drives.leave();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::gauge::Gauge;

    #[test]
    fn drives_go_to_one_job_at_a_time_and_come_back() {
        let gauge = Gauge::default();
        let d = Drives::new(3, gauge.clone());
        assert_eq!(d.take(2), vec![0, 1]);
        assert_eq!((d.free(), d.busy(), gauge.get()), (1, 2, 2));
        // More than are free: what is free, and then none.
        assert_eq!(d.take(5), vec![2]);
        assert!(d.take(1).is_empty());
        assert_eq!(gauge.get(), 3);
        // Given back once; a drive given twice, or one the library lacks, counts
        // nothing.
        d.give(&[1]);
        d.give(&[1, 7]);
        assert_eq!((d.free(), gauge.get()), (1, 2));
        assert_eq!(d.take(0), vec![1]);
        let held = d.wait_for_one(|| true);
        assert!(held.is_none(), "no drive was free");
        d.give(&[0]);
        let held = d.wait_for_one(|| true).expect("drive 0 is free");
        assert_eq!(held.indexes, vec![0]);
        drop(held);
        assert_eq!((d.free(), gauge.get()), (1, 2));
        // More drives for a holder: those free, given back with the first.
        d.give(&[2]);
        let mut held = d.wait_for_one(|| true).expect("drive 0 is free");
        held.more(0);
        assert_eq!(held.indexes, vec![0]);
        held.more(5);
        assert_eq!((held.indexes.clone(), d.free()), (vec![0, 2], 0));
        drop(held);
        assert_eq!((d.free(), gauge.get()), (2, 1));
    }

    #[test]
    fn jobs_share_one_lock_on_the_home_until_the_last_ends() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("home");
        drop(Home::open(&dir).unwrap());
        let d = Drives::new(2, Gauge::default());
        let a = d.enter(&dir).unwrap();
        let b = d.enter(&dir).unwrap();
        // Held: another opening of the home waits.
        let (tx, rx) = std::sync::mpsc::channel();
        let dir2 = dir.clone();
        let other = std::thread::spawn(move || {
            let h = Home::open(&dir2);
            let _ = tx.send(());
            h.is_ok()
        });
        let wait = std::time::Duration::from_millis(300);
        assert!(rx.recv_timeout(wait).is_err(), "opened while two jobs run");
        drop(a);
        assert!(rx.recv_timeout(wait).is_err(), "opened while one job runs");
        drop(b);
        let ended = std::time::Duration::from_secs(20);
        assert!(
            rx.recv_timeout(ended).is_ok(),
            "not opened once the jobs ended"
        );
        assert!(other.join().unwrap());
    }
}
