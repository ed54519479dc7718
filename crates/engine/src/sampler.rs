//! Per-second samples of a job's drives and streams, for backups and restores alike:
//! bytes so far, pool fill, and what the drive says of its buffer, speed step and
//! backhitches. The samples are stored with the job and drawn by `tapeloom report`;
//! the latest of each series also feeds the progress lines on a terminal.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tapeloom_catalog::Sample;
use tapeloom_device::DriveStats;

/// What a series of samples measures.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Series {
    /// A drive of the library, by index.
    Drive(usize),
    /// A stream of the job, by name.
    Stream(String),
}

impl fmt::Display for Series {
    /// The name the catalog stores: `drive:N` or `stream:NAME`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Series::Drive(d) => write!(f, "drive:{d}"),
            Series::Stream(s) => write!(f, "stream:{s}"),
        }
    }
}

impl Series {
    /// Reads a stored series name back; `None` for a name of neither form.
    pub fn parse(s: &str) -> Option<Series> {
        if let Some(name) = s.strip_prefix("stream:") {
            return Some(Series::Stream(name.to_string()));
        }
        s.strip_prefix("drive:")
            .and_then(|d| d.parse().ok())
            .map(Series::Drive)
    }
}

/// The latest bytes of each series (and backhitches, for drives that count them),
/// updated as samples are taken.
pub type Live = Mutex<BTreeMap<Series, (u64, Option<u64>)>>;

/// Takes a sample of every series once a second.
pub(crate) struct Sampler {
    t0: Instant,
    every: Duration,
    last: Instant,
    /// The samples taken.
    pub out: Vec<Sample>,
}

impl Sampler {
    /// A sampler whose times count from `t0`.
    pub fn new(t0: Instant) -> Self {
        Sampler {
            t0,
            every: Duration::from_secs(1),
            last: Instant::now(),
            out: Vec::new(),
        }
    }

    /// Whether a second has passed since the last sample.
    pub fn due(&self) -> bool {
        self.last.elapsed() >= self.every
    }

    /// Starts a round of samples: every sample of one round has this time.
    pub fn round(&mut self) -> u64 {
        self.last = Instant::now();
        self.t0.elapsed().as_millis() as u64
    }

    /// A drive's sample.
    pub fn drive(
        &mut self,
        t_ms: u64,
        drive: usize,
        bytes: u64,
        pool_fill: f64,
        stats: Option<&DriveStats>,
        live: Option<&Live>,
    ) {
        let series = Series::Drive(drive);
        if let Some(Ok(mut l)) = live.map(|l| l.lock()) {
            l.insert(series.clone(), (bytes, stats.map(|s| s.backhitches)));
        }
        self.out.push(Sample {
            series: series.to_string(),
            t_ms,
            bytes,
            pool_fill,
            buffer_fill: stats.map(|s| s.buffer_fill),
            backhitches: stats.map(|s| s.backhitches).unwrap_or(0),
            speed_mb_s: stats.map(|s| s.speed_now_mb_s),
        });
    }

    /// A stream's sample.
    pub fn stream(&mut self, t_ms: u64, name: &str, bytes: u64, fill: f64, live: Option<&Live>) {
        let series = Series::Stream(name.to_string());
        if let Some(Ok(mut l)) = live.map(|l| l.lock()) {
            l.insert(series.clone(), (bytes, None));
        }
        self.out.push(Sample {
            series: series.to_string(),
            t_ms,
            bytes,
            pool_fill: fill,
            buffer_fill: None,
            backhitches: 0,
            speed_mb_s: None,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_names_round_trip() {
        for s in [
            Series::Drive(0),
            Series::Drive(12),
            Series::Stream("a:b".into()),
        ] {
            assert_eq!(Series::parse(&s.to_string()), Some(s));
        }
        assert_eq!(Series::parse("drive:x"), None);
        assert_eq!(Series::parse("other"), None);
    }

    #[test]
    fn a_round_shares_one_time_and_updates_the_live_view() {
        let live = Live::default();
        let mut s = Sampler::new(Instant::now());
        let t = s.round();
        s.drive(t, 1, 100, 0.5, None, Some(&live));
        s.stream(t, "x", 40, 0.25, Some(&live));
        assert_eq!(s.out.len(), 2);
        assert!(s.out.iter().all(|x| x.t_ms == t));
        assert_eq!(s.out[0].series, "drive:1");
        let l = live.lock().unwrap();
        assert_eq!(l[&Series::Stream("x".into())], (40, None));
        assert!(!s.due());
    }
}
