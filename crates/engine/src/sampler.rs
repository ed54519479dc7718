//! Samples of a job's drives and streams, ten a second in the job's first minute
//! (so that a job of a few seconds has a plot) and once a second after, for
//! backups and restores alike:
//! bytes so far, pool fill, and what the drive says of its buffer, speed step and
//! backhitches; for a backup through the disk stages, also how full the stages are. The samples are stored with the job and drawn by `tapeloom report`;
//! the latest of each series also feeds the progress lines on a terminal.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
pub use tapeloom_catalog::Series;
use tapeloom_catalog::{Mark, Phase, Sample};
use tapeloom_device::DriveStats;

/// A drive's span without data: (drive, phase, from, to).
pub(crate) type Marked = (Option<usize>, Phase, Instant, Instant);

/// Marks of a job's drives, in milliseconds since `t0`, in time order.
pub(crate) fn marks<'a>(t0: Instant, marked: impl IntoIterator<Item = &'a Marked>) -> Vec<Mark> {
    let ms = |t: Instant| t.saturating_duration_since(t0).as_millis() as u64;
    let mut out: Vec<Mark> = marked
        .into_iter()
        .map(|(drive, phase, from, to)| Mark {
            drive: *drive,
            phase: *phase,
            from_ms: ms(*from),
            to_ms: ms(*to),
        })
        .collect();
    out.sort_by_key(|m| (m.from_ms, m.drive));
    out
}

/// The latest sample of each series, updated as samples are taken.
pub type Live = Mutex<BTreeMap<Series, Latest>>;

/// The latest sample of a series, as [`Live`] keeps it. Only a drive with a model
/// says what its buffer, speed step and backhitches are.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Latest {
    /// Bytes so far.
    pub bytes: u64,
    /// A drive's backhitches so far.
    pub backhitches: Option<u64>,
    /// A drive's buffer fill, 0 to 1.
    pub buffer_fill: Option<f64>,
    /// A drive's speed step now, MB/s of tape (0 when the tape stands).
    pub speed_mb_s: Option<f64>,
}

/// How often samples are taken while a job is young.
const YOUNG_EVERY: Duration = Duration::from_millis(100);
/// How long a job is young.
const YOUNG_FOR: Duration = Duration::from_secs(60);

/// Takes a sample of every series ten times a second in the job's first minute,
/// then once a second.
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

    /// Whether the next sample is due: a tenth of a second after the last in the
    /// job's first minute, a second after it then.
    pub fn due(&self) -> bool {
        let every = match self.t0.elapsed() < YOUNG_FOR {
            true => YOUNG_EVERY.min(self.every),
            false => self.every,
        };
        self.last.elapsed() >= every
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
            let latest = Latest {
                bytes,
                backhitches: stats.map(|s| s.backhitches),
                buffer_fill: stats.map(|s| s.buffer_fill),
                speed_mb_s: stats.map(|s| s.speed_now_mb_s),
            };
            l.insert(series.clone(), latest);
        }
        self.out.push(Sample {
            series,
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
            let latest = Latest {
                bytes,
                ..Latest::default()
            };
            l.insert(series.clone(), latest);
        }
        self.out.push(Sample {
            series,
            t_ms,
            bytes,
            pool_fill: fill,
            buffer_fill: None,
            backhitches: 0,
            speed_mb_s: None,
        });
    }

    /// The stages' sample: `held` bytes of their `size` in all.
    pub fn stage(&mut self, t_ms: u64, held: u64, size: u64) {
        let fill = if size == 0 {
            0.0
        } else {
            (held as f64 / size as f64).min(1.0)
        };
        self.out.push(Sample {
            series: Series::Stage,
            t_ms,
            bytes: held,
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
    fn a_young_job_is_sampled_ten_times_a_second_and_an_older_one_once() {
        let young = Sampler::new(Instant::now());
        assert!(!young.due());
        std::thread::sleep(Duration::from_millis(120));
        assert!(young.due());
        let Some(t0) = Instant::now().checked_sub(Duration::from_secs(61)) else {
            return;
        };
        let mut old = Sampler::new(t0);
        old.round();
        std::thread::sleep(Duration::from_millis(120));
        assert!(!old.due());
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
        assert_eq!(s.out[0].series, Series::Drive(1));
        let l = live.lock().unwrap();
        assert_eq!(
            l[&Series::Stream("x".into())],
            Latest {
                bytes: 40,
                ..Default::default()
            }
        );
        assert!(!s.due());
    }

    #[test]
    fn the_live_view_keeps_a_drives_buffer_speed_and_backhitches() {
        let live = Live::default();
        let mut s = Sampler::new(Instant::now());
        let stats = DriveStats {
            backhitches: 3,
            buffer_fill: 0.625,
            speed_now_mb_s: 80.0,
            ..Default::default()
        };
        let t = s.round();
        s.drive(t, 2, 5 << 20, 0.5, Some(&stats), Some(&live));
        s.drive(t, 0, 7, 0.5, None, Some(&live));
        let l = live.lock().unwrap();
        let want = Latest {
            bytes: 5 << 20,
            backhitches: Some(3),
            buffer_fill: Some(0.625),
            speed_mb_s: Some(80.0),
        };
        assert_eq!(l[&Series::Drive(2)], want);
        assert_eq!(
            l[&Series::Drive(0)],
            Latest {
                bytes: 7,
                ..Default::default()
            }
        );
    }

    #[test]
    fn the_stage_sample_holds_bytes_and_their_share_of_the_size() {
        let mut s = Sampler::new(Instant::now());
        s.stage(1000, 3 << 20, 4 << 20);
        s.stage(2000, 1, 0);
        assert_eq!(s.out[0].series, Series::Stage);
        assert_eq!((s.out[0].bytes, s.out[0].pool_fill), (3 << 20, 0.75));
        assert_eq!(s.out[1].pool_fill, 0.0);
    }
}
