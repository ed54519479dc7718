//! How documents write times, rates and the paths that failed.

use serde::{Deserialize, Serialize};

/// Nanoseconds since the epoch as RFC 3339 UTC with nanoseconds. (humantime's
/// formatter panics on times before 1970, which file times can be.)
pub fn time(ns: i64) -> String {
    match time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ns)) {
        Ok(t) => format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:09}Z",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second(),
            t.nanosecond()
        ),
        // Outside years -9999 to 9999: beyond what an i64 of nanoseconds holds.
        Err(_) => ns.to_string(),
    }
}

/// MB/s (10^6 bytes per second) of `bytes` in `seconds`.
pub fn mb_per_s(bytes: u64, seconds: f64) -> f64 {
    bytes as f64 / 1e6 / seconds.max(1e-9)
}

/// A path and why it failed, in `errors` lists.
#[derive(Serialize, Deserialize)]
pub struct PathError {
    /// The path, displayable.
    pub path: String,
    /// What went wrong.
    pub reason: String,
}

impl PathError {
    /// The engine's (path, reason) pairs.
    pub fn list(errors: &[(String, String)]) -> Vec<PathError> {
        errors
            .iter()
            .map(|(path, reason)| PathError {
                path: path.clone(),
                reason: reason.clone(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn times() {
        assert_eq!(super::time(0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(
            super::time(1_700_000_000_123_456_789),
            "2023-11-14T22:13:20.123456789Z"
        );
        assert_eq!(
            super::time(-1_000_000_000),
            "1969-12-31T23:59:59.000000000Z"
        );
    }
}
