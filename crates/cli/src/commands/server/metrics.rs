//! `GET /metrics`: the server's counters and the catalog's gauges in Prometheus's
//! text format (version 0.0.4). Counters are 64-bit and start at zero with the
//! process.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use tapeloom_catalog::{Catalog, JobState, VolumeState};

/// The content type of the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What the server counts while it runs.
#[derive(Default)]
pub struct Metrics {
    by_status: Mutex<BTreeMap<u16, u64>>,
    refused: AtomicU64,
    dropped: AtomicU64,
}

impl Metrics {
    /// A request answered with `status`.
    pub fn answered(&self, status: u16) {
        let mut m = self.by_status.lock().unwrap_or_else(|p| p.into_inner());
        *m.entry(status).or_insert(0) += 1;
    }

    /// A request refused for its token (missing, unknown, revoked, not an admin's).
    pub fn refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection closed without an answer (TLS failure, stall, over the limit).
    pub fn dropped(&self) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// The text format, with the jobs and volumes of `cat` by state.
    pub fn render(&self, cat: &Catalog) -> tapeloom_catalog::Result<String> {
        let mut jobs: BTreeMap<&str, u64> = [
            JobState::Running,
            JobState::Ok,
            JobState::Partial,
            JobState::Failed,
        ]
        .iter()
        .map(|s| (s.as_str(), 0))
        .collect();
        for j in cat.jobs()? {
            *jobs.entry(j.status.as_str()).or_insert(0) += 1;
        }
        let mut volumes: BTreeMap<&str, u64> = [
            VolumeState::Append,
            VolumeState::Full,
            VolumeState::Suspect,
            VolumeState::Expired,
        ]
        .iter()
        .map(|s| (s.as_str(), 0))
        .collect();
        for v in cat.volumes()? {
            *volumes.entry(v.status.as_str()).or_insert(0) += 1;
        }
        let by_status = self
            .by_status
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut s = String::new();
        family(
            &mut s,
            "tapeloom_http_requests_total",
            "counter",
            "HTTP requests answered, by status.",
        );
        for (status, n) in by_status {
            let _ = writeln!(s, "tapeloom_http_requests_total{{status=\"{status}\"}} {n}");
        }
        let refused = self.refused.load(Ordering::Relaxed);
        family(
            &mut s,
            "tapeloom_http_refused_total",
            "counter",
            "Requests refused for a missing, unknown or revoked token, or one without the rights.",
        );
        let _ = writeln!(s, "tapeloom_http_refused_total {refused}");
        let dropped = self.dropped.load(Ordering::Relaxed);
        family(&mut s, "tapeloom_http_connections_dropped_total", "counter", "Connections closed without an answer: TLS failures, stalled clients, over the connection limit.");
        let _ = writeln!(s, "tapeloom_http_connections_dropped_total {dropped}");
        family(
            &mut s,
            "tapeloom_jobs",
            "gauge",
            "Jobs in the catalog, by state.",
        );
        for (state, n) in jobs {
            let _ = writeln!(s, "tapeloom_jobs{{state=\"{state}\"}} {n}");
        }
        family(
            &mut s,
            "tapeloom_volumes",
            "gauge",
            "Volumes in the catalog, by state.",
        );
        for (state, n) in volumes {
            let _ = writeln!(s, "tapeloom_volumes{{state=\"{state}\"}} {n}");
        }
        Ok(s)
    }
}

fn family(s: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(s, "# HELP {name} {help}");
    let _ = writeln!(s, "# TYPE {name} {kind}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_has_help_and_type_and_every_state_a_line() {
        let d = tempfile::tempdir().unwrap();
        let cat = Catalog::open(&d.path().join("c.db")).unwrap();
        let m = Metrics::default();
        m.answered(200);
        m.answered(200);
        m.refused();
        let text = m.render(&cat).unwrap();
        assert!(text.contains("tapeloom_http_requests_total{status=\"200\"} 2\n"));
        assert!(text.contains("tapeloom_http_refused_total 1\n"));
        assert!(text.contains("tapeloom_jobs{state=\"failed\"} 0\n"));
        assert!(text.contains("tapeloom_volumes{state=\"expired\"} 0\n"));
        assert_eq!(text.matches("# TYPE").count(), 5);
    }
}
