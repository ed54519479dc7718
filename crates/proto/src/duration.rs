//! Durations on the command line and in the server's configuration: a whole
//! number and a unit, `90s`, `30m`, `2h`, `7d`, `2w`.

use std::time::Duration;

/// Why a duration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// No number before the unit.
    #[error("'{0}' is not a duration (try 90s, 30m, 2h or 7d)")]
    NotANumber(String),
    /// A unit other than s, m, h, d, w.
    #[error("'{0}' has an unknown unit (try s, m, h, d or w)")]
    Unit(String),
    /// Zero, or more seconds than a time in nanoseconds holds.
    #[error("'{0}' is out of range (from 1s to about 146 years)")]
    Range(String),
}

/// Most seconds a duration may have: what nanoseconds since the epoch can still add.
const MAX_SECONDS: u64 = i64::MAX as u64 / 1_000_000_000 / 2;

/// Parses a duration.
pub fn parse(s: &str) -> Result<Duration, DurationError> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = match num.parse() {
        Ok(n) => n,
        // Digits too many for a number are a duration far out of range.
        Err(_) if !num.is_empty() => return Err(DurationError::Range(s.to_string())),
        Err(_) => return Err(DurationError::NotANumber(s.to_string())),
    };
    let per: u64 = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86400,
        "w" => 7 * 86400,
        _ => return Err(DurationError::Unit(s.to_string())),
    };
    match n.checked_mul(per) {
        Some(secs) if secs > 0 && secs <= MAX_SECONDS => Ok(Duration::from_secs(secs)),
        _ => Err(DurationError::Range(s.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse("7d"), Ok(Duration::from_secs(7 * 86400)));
        assert!(matches!(parse("h"), Err(DurationError::NotANumber(_))));
        assert!(matches!(parse("2"), Err(DurationError::Unit(_))));
        assert_eq!(parse("2w"), Ok(Duration::from_secs(14 * 86400)));
        assert!(matches!(parse("2y"), Err(DurationError::Unit(_))));
        assert!(matches!(parse("0s"), Err(DurationError::Range(_))));
        assert!(matches!(
            parse("99999999999999d"),
            Err(DurationError::Range(_))
        ));
        assert!(matches!(
            parse("99999999999999999999s"),
            Err(DurationError::Range(_))
        ));
        assert!(matches!(parse("-1s"), Err(DurationError::NotANumber(_))));
    }
}
