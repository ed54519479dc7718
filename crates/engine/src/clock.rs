//! The clock of job dates and expiry: the system clock, or the time the test hook
//! `TAPELOOM_NOW` (an RFC 3339 time) gives.
//!
//! A job's start and end times (in the catalog and on tape), a volume label's
//! creation time and the expiry of volumes all come from [`now`], so a test can run
//! jobs "on" chosen days and expire them later without waiting.

use crate::error::{HomeError, Result};
use tapeloom_format::Timestamp;

/// The variable that replaces the system clock, when set.
pub const NOW_VAR: &str = "TAPELOOM_NOW";

/// The time now: `TAPELOOM_NOW` when set, else the system clock. A value that is
/// not an RFC 3339 time is [`HomeError::BadNow`].
pub fn now() -> Result<Timestamp> {
    match std::env::var_os(NOW_VAR) {
        None => Ok(Timestamp::now()),
        Some(v) => parse(&v.to_string_lossy()),
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
