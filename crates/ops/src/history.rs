//! What past jobs recorded of themselves, for the planner: each stream's bytes
//! and the rate it achieved.

use crate::error::Result;
use tapeloom_catalog::Series;
use tapeloom_engine::Home;

/// A stream of a past backup, from its per-second samples.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamHistory {
    /// The stream's name.
    pub name: String,
    /// The bytes it took in all.
    pub bytes: u64,
    /// Bytes per second from its first sample with data to its last (at least 1).
    pub rate: f64,
}

/// The streams of backup job `job` that have samples, each with its bytes and
/// rate.
pub fn backup_streams(home: &Home, job: i64) -> Result<Vec<StreamHistory>> {
    let samples = home.catalog.samples(job, "backup")?;
    let mut out = Vec::new();
    for st in home.catalog.streams(job)? {
        let mine: Vec<_> = samples
            .iter()
            .filter(|s| matches!(&s.series, Series::Stream(n) if *n == st.name))
            .collect();
        let first = mine.iter().find(|s| s.bytes > 0);
        let last = mine.last();
        let (Some(first), Some(last)) = (first, last) else {
            continue;
        };
        let span = last.t_ms.saturating_sub(first.t_ms).max(1) as f64 / 1000.0;
        out.push(StreamHistory {
            name: st.name,
            bytes: last.bytes,
            rate: (last.bytes.saturating_sub(first.bytes) as f64 / span).max(1.0),
        });
    }
    Ok(out)
}
