//! The S3 front end's part of `GET /metrics` and of the status page, when it
//! is on: what the front end counts as it answers (requests by operation and
//! status, the bytes of bodies received and sent, the SlowDown answers of
//! each budget), which it tells through [`tapeloom_s3::Watch`]; the restores
//! the restoring thread reads now; and, from the catalog at each scrape
//! (`tapeloom_ops::metrics::s3_figures`), the objects waiting for tape, the
//! restores asked and the restore cache's use, beside its limit.
//!
//! The `operation` label is s3s's name of the operation (a fixed list of a
//! hundred names at most), so no label takes a value a client chose.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tapeloom_ops::metrics::S3Figures;
use tapeloom_s3::Budget;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabel {
    operation: String,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BudgetLabel {
    budget: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

/// What the S3 front end counts while the server runs.
pub struct S3Metrics {
    requests: Family<RequestLabel, Counter>,
    answered: AtomicU64,
    received: Counter,
    sent: Counter,
    slow_down: Family<BudgetLabel, Counter>,
    reading: Arc<AtomicU64>,
    cache_limit: u64,
}

impl S3Metrics {
    /// The S3 front end's counters, with the restore cache's limit.
    pub fn new(cache_limit: u64) -> S3Metrics {
        let m = S3Metrics {
            requests: Family::default(),
            answered: AtomicU64::new(0),
            received: Counter::default(),
            sent: Counter::default(),
            slow_down: Family::default(),
            reading: Arc::default(),
            cache_limit,
        };
        for b in [Budget::Control, Budget::Bulk] {
            drop(m.slow_down.get_or_create(&BudgetLabel { budget: b.name() }));
        }
        m
    }

    /// Registers the counters in `r`.
    pub(crate) fn register(&self, r: &mut Registry) {
        r.register(
            "tapeloom_s3_requests",
            "S3 requests answered, by operation (s3s's name) and status",
            self.requests.clone(),
        );
        r.register(
            "tapeloom_s3_received_bytes",
            "Bytes of S3 requests' bodies received",
            self.received.clone(),
        );
        r.register(
            "tapeloom_s3_sent_bytes",
            "Bytes of S3 answers' bodies sent",
            self.sent.clone(),
        );
        r.register(
            "tapeloom_s3_slow_down",
            "S3 requests answered 503 SlowDown because their budget was full, by budget: control or bulk",
            self.slow_down.clone(),
        );
    }

    /// S3 requests answered since the server started.
    pub fn answered_total(&self) -> u64 {
        self.answered.load(Ordering::Relaxed)
    }

    /// The restore cache's limit.
    pub fn cache_limit(&self) -> u64 {
        self.cache_limit
    }

    /// The restores the restoring thread reads now.
    pub fn reading_now(&self) -> u64 {
        self.reading.load(Ordering::Relaxed)
    }

    /// The restoring thread reads `n` restores from tape until the guard is
    /// dropped.
    pub fn reading(&self, n: usize) -> Reading {
        self.reading.fetch_add(n as u64, Ordering::Relaxed);
        Reading {
            of: Arc::clone(&self.reading),
            n: n as u64,
        }
    }

    /// The restores waiting and being read, of the `asked` the catalog holds.
    pub fn restores(&self, asked: u64) -> (u64, u64) {
        let running = self.reading_now().min(asked);
        (asked - running, running)
    }
}

/// Restores being read, counted until dropped.
pub struct Reading {
    of: Arc<AtomicU64>,
    n: u64,
}

impl Drop for Reading {
    fn drop(&mut self) {
        self.of.fetch_sub(self.n, Ordering::Relaxed);
    }
}

impl tapeloom_s3::Watch for S3Metrics {
    fn answered(&self, operation: &str, status: u16) {
        let label = RequestLabel {
            operation: operation.to_string(),
            status,
        };
        self.requests.get_or_create(&label).inc();
        self.answered.fetch_add(1, Ordering::Relaxed);
    }

    fn received(&self, bytes: u64) {
        self.received.inc_by(bytes);
    }

    fn sent(&self, bytes: u64) {
        self.sent.inc_by(bytes);
    }

    fn slowed_down(&self, budget: Budget) {
        let label = BudgetLabel {
            budget: budget.name(),
        };
        self.slow_down.get_or_create(&label).inc();
    }
}

/// Registers the S3 front end's levels in `r`: the catalog's figures `f`, the
/// restores `m` reads now, and the restore cache's limit.
pub(crate) fn levels(f: &S3Figures, m: &S3Metrics, r: &mut Registry) {
    let objects: Gauge<u64, AtomicU64> = Gauge::default();
    objects.set(f.objects_waiting);
    r.register(
        "tapeloom_s3_objects_waiting",
        "S3 objects not yet on tape",
        objects,
    );
    let bytes: Gauge<u64, AtomicU64> = Gauge::default();
    bytes.set(f.bytes_waiting);
    r.register(
        "tapeloom_s3_objects_waiting_bytes",
        "Bytes of the S3 objects not yet on tape",
        bytes,
    );
    let restores: Family<StateLabel, Gauge<u64, AtomicU64>> = Family::default();
    let (waiting, running) = m.restores(f.restores);
    restores
        .get_or_create(&StateLabel { state: "waiting" })
        .set(waiting);
    restores
        .get_or_create(&StateLabel { state: "running" })
        .set(running);
    r.register(
        "tapeloom_s3_restores",
        "S3 restores asked and not ended, by state: waiting (gathering, or for a drive) or running (being read from tape)",
        restores,
    );
    let used: Gauge<u64, AtomicU64> = Gauge::default();
    used.set(f.cache_bytes);
    r.register(
        "tapeloom_s3_restore_cache_used_bytes",
        "Bytes of the S3 restore cache in use: restored copies kept and restores asked",
        used,
    );
    let limit: Gauge<u64, AtomicU64> = Gauge::default();
    limit.set(m.cache_limit);
    r.register(
        "tapeloom_s3_restore_cache_capacity_bytes",
        "The S3 restore cache's limit in bytes",
        limit,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restores_being_read_are_running_and_the_others_wait() {
        let m = S3Metrics::new(1);
        assert_eq!(m.restores(3), (3, 0));
        let reading = m.reading(2);
        assert_eq!(m.restores(3), (1, 2));
        // Never more running than the catalog has asked.
        assert_eq!(m.restores(1), (0, 1));
        drop(reading);
        assert_eq!(m.restores(3), (3, 0));
    }
}
