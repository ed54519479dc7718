//! The clock of job dates and expiry: the system clock. In a build with the cargo
//! feature `test-hooks`, the time the test hook `TAPELOOM_NOW` (an RFC 3339 time)
//! gives, running faster under the test hook `TAPELOOM_CLOCK_SPEED`.
//!
//! A job's start and end times (in the catalog and on tape), a volume label's
//! creation time and the expiry of volumes all come from [`now`], so a test can run
//! jobs "on" chosen days and expire them later without waiting. A server's
//! schedules run on it too, so a test can see an hour of them in two minutes.

use crate::error::{HomeError, Result};
use tapeloom_format::Timestamp;

/// A `TAPELOOM_CLOCK_SPEED` that is not a positive number.
#[derive(Debug, thiserror::Error)]
#[error("TAPELOOM_CLOCK_SPEED: {value:?} is not a positive number (for example 30)")]
pub struct BadSpeed {
    /// The variable's value.
    pub value: String,
}

/// The time now: the system clock. In a build with the feature `test-hooks`, the
/// test hooks' clock when `TAPELOOM_NOW` or `TAPELOOM_CLOCK_SPEED` is set; a
/// `TAPELOOM_NOW` that is not an RFC 3339 time is then [`HomeError::BadNow`], a
/// bad speed an I/O error of kind `InvalidInput` whose source is a [`BadSpeed`].
pub fn now() -> Result<Timestamp> {
    #[cfg(feature = "test-hooks")]
    if let Some(t) = hooked::now()? {
        return Ok(t);
    }
    Ok(system())
}

/// The system clock, which no test hook moves: for what is measured in real
/// time (a sample's wall time, a stage chunk's age, a file's access time). This is
/// the one place tapeloom reads `SystemTime::now`; `scripts/layers.py` fails on
/// any other.
pub fn system() -> Timestamp {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Timestamp::from_nanos(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// [`system`] in nanoseconds since the Unix epoch.
pub fn system_ns() -> i64 {
    system().as_nanos()
}

/// How many times faster than real time the clock runs: none (real time). In a
/// build with the feature `test-hooks`, `TAPELOOM_CLOCK_SPEED` when set.
pub fn speed() -> std::result::Result<Option<f64>, BadSpeed> {
    #[cfg(feature = "test-hooks")]
    if let Some(speed) = hooked::speed()? {
        return Ok(Some(speed));
    }
    Ok(None)
}

/// The clock of the test hooks.
#[cfg(feature = "test-hooks")]
mod hooked {
    use super::{parse, BadSpeed};
    use crate::error::Result;
    use std::sync::OnceLock;
    use std::time::{Duration, Instant};
    use tapeloom_format::Timestamp;

    /// The variable that replaces the system clock, when set.
    pub const NOW_VAR: &str = "TAPELOOM_NOW";

    /// The variable that makes the clock run faster: a positive number, the
    /// clock's seconds per real second.
    pub const SPEED_VAR: &str = "TAPELOOM_CLOCK_SPEED";

    /// The time now, when either variable is set. Without `TAPELOOM_CLOCK_SPEED`:
    /// `TAPELOOM_NOW` (the clock stands still). With it: the time the clock showed
    /// when the process first read it (`TAPELOOM_NOW`, else the system clock),
    /// plus the real time since then times the speed.
    pub fn now() -> Result<Option<Timestamp>> {
        let speed = speed().map_err(|e| crate::error::Error::Io {
            what: "read the clock".into(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, e),
        })?;
        let Some(speed) = speed else {
            return standing();
        };
        static START: OnceLock<(Instant, Timestamp)> = OnceLock::new();
        let start = match START.get() {
            Some(s) => *s,
            None => {
                let base = standing()?.unwrap_or_else(super::system);
                *START.get_or_init(|| (Instant::now(), base))
            }
        };
        Ok(Some(sped(start.1, start.0.elapsed(), speed)))
    }

    /// The clock without a speed: `TAPELOOM_NOW` when set.
    fn standing() -> Result<Option<Timestamp>> {
        std::env::var_os(NOW_VAR)
            .map(|v| parse(&v.to_string_lossy()))
            .transpose()
    }

    /// `TAPELOOM_CLOCK_SPEED`: none when unset.
    pub fn speed() -> std::result::Result<Option<f64>, BadSpeed> {
        std::env::var_os(SPEED_VAR)
            .map(|v| parse_speed(&v.to_string_lossy()))
            .transpose()
    }

    /// A clock speed: a finite number above 0.
    pub fn parse_speed(value: &str) -> std::result::Result<f64, BadSpeed> {
        value
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s > 0.0)
            .ok_or_else(|| BadSpeed {
                value: value.to_string(),
            })
    }

    /// The time a clock that showed `base` shows `elapsed` real time later, running
    /// `speed` times faster.
    pub fn sped(base: Timestamp, elapsed: Duration, speed: f64) -> Timestamp {
        let ahead = (elapsed.as_secs_f64() * speed * 1e9).min(i64::MAX as f64) as i64;
        Timestamp::from_nanos(base.as_nanos().saturating_add(ahead))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn a_sped_clock_runs_speed_times_faster() {
            let base = parse("2026-01-05T03:00:00Z").unwrap();
            let t = sped(base, Duration::from_millis(1500), 30.0);
            assert_eq!((t.secs - base.secs, t.nanos), (45, 0));
            assert_eq!(sped(base, Duration::ZERO, 1000.0), base);
            let t = sped(base, Duration::from_secs(2), 0.25);
            assert_eq!((t.secs - base.secs, t.nanos), (0, 500_000_000));
        }

        #[test]
        fn clock_speeds_are_positive_numbers() {
            assert_eq!(parse_speed("30").unwrap(), 30.0);
            assert_eq!(parse_speed(" 0.5 ").unwrap(), 0.5);
            for bad in ["0", "-2", "fast", "", "inf", "NaN"] {
                assert!(parse_speed(bad).is_err(), "{bad}");
            }
            assert_eq!(
                parse_speed("fast").unwrap_err().to_string(),
                "TAPELOOM_CLOCK_SPEED: \"fast\" is not a positive number (for example 30)"
            );
        }
    }
}

/// An RFC 3339 time as a timestamp.
pub fn parse(value: &str) -> Result<Timestamp> {
    let bad = || HomeError::BadNow {
        value: value.to_string(),
    };
    let t = time::OffsetDateTime::parse(value, &time::format_description::well_known::Rfc3339)
        .map_err(|_| bad())?;
    let ns = i64::try_from(t.unix_timestamp_nanos()).map_err(|_| bad())?;
    Ok(Timestamp::from_nanos(ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_3339_times_parse_and_others_are_refused() {
        let t = parse("2026-01-05T03:00:00Z").unwrap();
        assert_eq!(t.secs, 1_767_582_000);
        assert_eq!(parse("2026-01-05T04:00:00+01:00").unwrap(), t);
        let e = parse("yesterday").unwrap_err();
        assert_eq!(
            e.to_string(),
            "TAPELOOM_NOW: \"yesterday\" is not an RFC 3339 time (for example 2026-01-05T03:00:00Z)"
        );
    }
}
