//! The hierarchical storage's part of `GET /metrics`, when the home manages
//! folders: files and bytes per state, from the catalog at each scrape
//! (`tapeloom_ops::metrics`); and,
//! while `hsm daemon` runs, what its status file in the home says: the reads
//! waiting for a recall, the files and bytes recalled, and how long the reads
//! waited (a histogram the daemon keeps in the buckets of
//! [`tapeloom_hsm::LATENCY_BOUNDS`], encoded here as it counted them).

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use tapeloom_ops::metrics::HsmFigures;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

/// A histogram as another process counted it: non-cumulative counts per upper
/// bound, their sum and count.
#[derive(Debug)]
struct Counted {
    sum: f64,
    count: u64,
    buckets: Vec<(f64, u64)>,
}

impl EncodeMetric for Counted {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_histogram::<NoLabelSet>(self.sum, self.count, &self.buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// Registers the hierarchical storage's series in `r`, from the catalog's
/// figures `hsm`: nothing when the home manages no folder.
pub(crate) fn levels(hsm: Option<&HsmFigures>, home: &Path, r: &mut Registry) {
    let Some(hsm) = hsm else {
        return;
    };
    let files: Family<StateLabel, Gauge> = Family::default();
    for (&state, &n) in &hsm.files {
        files.get_or_create(&StateLabel { state }).set(n as i64);
    }
    let bytes: Family<StateLabel, Gauge<u64, AtomicU64>> = Family::default();
    for (&state, &n) in &hsm.bytes {
        bytes.get_or_create(&StateLabel { state }).set(n);
    }
    r.register(
        "tapeloom_hsm_files",
        "Files of the managed folders the catalog records, by state (resident files are not recorded)",
        files,
    );
    r.register(
        "tapeloom_hsm_bytes",
        "Bytes of the managed folders' recorded files, by state",
        bytes,
    );
    let Some(daemon) = tapeloom_hsm::running_status(home) else {
        return;
    };
    let n = |k: &str| daemon.get(k).and_then(|v| v.as_u64()).unwrap_or(0);
    let waiting: Gauge = Gauge::default();
    waiting.set(n("waiting") as i64);
    r.register(
        "tapeloom_hsm_recalls_waiting",
        "Reads of released files waiting for their recall now",
        waiting,
    );
    for (name, help, key) in [
        (
            "tapeloom_hsm_recalled_files",
            "Files the running daemon recalled",
            "recalled_files",
        ),
        (
            "tapeloom_hsm_recalled_bytes",
            "Bytes the running daemon recalled",
            "recalled_bytes",
        ),
        (
            "tapeloom_hsm_recall_failures",
            "Reads the running daemon answered with an error",
            "failed",
        ),
    ] {
        let c: Counter = Counter::default();
        c.inc_by(n(key));
        r.register(name, help, c);
    }
    let lat = daemon.get("recall_seconds");
    let counts = lat.and_then(|l| l.get("counts")).and_then(|c| c.as_array());
    let buckets = (tapeloom_hsm::LATENCY_BOUNDS.iter().enumerate())
        .map(|(i, b)| {
            let c = counts.and_then(|c| c.get(i)).and_then(|v| v.as_u64());
            (*b, c.unwrap_or(0))
        })
        .collect();
    let counted = Counted {
        sum: lat
            .and_then(|l| l.get("sum"))
            .and_then(|v| v.as_f64())
            .unwrap_or(0.0),
        count: lat
            .and_then(|l| l.get("count"))
            .and_then(|v| v.as_u64())
            .unwrap_or(0),
        buckets,
    };
    r.register(
        "tapeloom_hsm_recall_seconds",
        "How long reads of released files waited for their data (or their error), answered by the running daemon",
        counted,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::prometheus_text;

    #[test]
    fn the_daemons_histogram_is_encoded_as_it_counted() {
        let mut r = Registry::default();
        let counted = Counted {
            sum: 7.5,
            count: 3,
            buckets: vec![(0.5, 1), (1.0, 0), (f64::INFINITY, 2)],
        };
        r.register("t_recall_seconds", "waits", counted);
        let mut s = String::new();
        prometheus_text::encode(&mut s, &r).unwrap();
        assert!(s.contains("# TYPE t_recall_seconds histogram"), "{s}");
        assert!(s.contains("t_recall_seconds_bucket{le=\"0.5\"} 1"), "{s}");
        assert!(s.contains("t_recall_seconds_bucket{le=\"1\"} 1"), "{s}");
        assert!(s.contains("t_recall_seconds_bucket{le=\"+Inf\"} 3"), "{s}");
        assert!(s.contains("t_recall_seconds_count 3"), "{s}");
    }
}
