//! What the server's jobs share: the backups clients began, the queue, the
//! drives and the home they write in, the key files, the site, the limits and
//! the counters, and whether the server stops. The requests of a backup, each
//! job's thread, the drives' thread, the site's thread and the schedules hold it
//! (in an `Arc`); the other routes take only the parts of it they use.

use crate::backup_jobs::Backups;
use crate::config::{Limits, QueueLimits};
use crate::drives::Drives;
use crate::keys::Keys;
use crate::metrics::Metrics;
use crate::queue::Queue;
use crate::site::Site;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

/// What the server's jobs share.
pub struct Work {
    /// The home whose catalog is served.
    pub home: PathBuf,
    /// The limits.
    pub limits: Limits,
    /// The counters.
    pub metrics: Metrics,
    /// The backups clients began.
    pub backups: Backups,
    /// The jobs, from their request to their end.
    pub queue: Queue,
    /// The queue's limits.
    pub queue_limits: QueueLimits,
    /// Drives of the library.
    pub drives: usize,
    /// Which drives the running jobs hold, and the home they share.
    pub drive_pool: Drives,
    /// MB/s a client must send for its job to go to a drive before it is whole.
    pub start_rate_mb_s: f64,
    /// The key files' master keys the server holds.
    pub keys: Keys,
    /// The server among the others of its site, when its catalog is shared.
    pub site: Option<Site>,
    /// The jobs a stopped server left on the stages that are being resumed
    /// (`writer::recover`), until each resume ends.
    pub resuming: std::sync::Mutex<std::collections::BTreeSet<i64>>,
    /// Set once the server was told to stop (SIGTERM, SIGINT): it takes no new job.
    draining: AtomicBool,
    /// Set once the drain's grace ran out: the jobs stop where they are.
    halting: AtomicBool,
}

/// What the server knows of its library when it starts.
pub struct Library {
    /// Drives of the library.
    pub drives: usize,
    /// Their lowest speed step in MB/s, where known.
    pub lowest_mb_s: Option<f64>,
}

impl Work {
    /// The state of a server of `home`.
    pub fn new(
        home: PathBuf,
        (limits, queue_limits): (Limits, QueueLimits),
        library: &Library,
    ) -> Self {
        let metrics = Metrics::default();
        let busy = metrics.jobs().drives_busy();
        Work {
            backups: Backups::default(),
            start_rate_mb_s: (queue_limits.start_rate_mb_s)
                .or(library.lowest_mb_s)
                .unwrap_or(0.0),
            home,
            limits,
            metrics,
            queue: Queue::default(),
            queue_limits,
            drives: library.drives,
            drive_pool: Drives::new(library.drives, busy),
            keys: Default::default(),
            site: None,
            resuming: Default::default(),
            draining: AtomicBool::new(false),
            halting: AtomicBool::new(false),
        }
    }

    /// Whether the server was told to stop.
    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    /// Whether the server stops its jobs where they are, leaving them on the
    /// stages for its next start.
    pub fn halting(&self) -> bool {
        self.halting.load(Ordering::Acquire)
    }

    /// The server was told to stop: it takes no new job.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::Release);
    }

    /// The drain's grace ran out: the jobs stop where they are.
    pub fn halt(&self) {
        self.halting.store(true, Ordering::Release);
    }
}
