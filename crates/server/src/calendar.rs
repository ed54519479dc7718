//! Calendar expressions: when a schedule runs. A subset of systemd.time(7)'s
//! calendar events, as Proxmox Backup Server takes them, all in UTC:
//!
//! - `minutely`, `hourly`, `daily`, `weekly` (Monday 00:00), `monthly` (the 1st
//!   at 00:00), `yearly` (1 January at 00:00);
//! - `[WEEKDAYS] [DATE] [TIME]`, at least one of them: WEEKDAYS a list of days
//!   and ranges (`mon,wed`, `mon..fri`); DATE `YYYY-MM-DD` or `MM-DD`; TIME
//!   `HH:MM` or `HH:MM:SS` (default `00:00:00`). Each number of DATE and TIME is
//!   `*`, a number, a range `a..b`, a repetition `a/step` (from a to the field's
//!   end) or `a..b/step`, or a list of those joined by commas: `*:0/15` is every
//!   quarter hour, `*-*-01 02:30` the first of every month at 02:30.
//!
//! No I/O: [`Calendar::next_after`] is arithmetic on Unix seconds.

use time::{Date, Month, OffsetDateTime};

/// Years searched ahead of a time for the next one that matches.
const HORIZON_YEARS: i32 = 10;

/// What is wrong with a calendar expression.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalendarError {
    /// Nothing given.
    #[error("an empty calendar (for example daily, mon..fri 02:00 or *:0/15)")]
    Empty,
    /// A part that is neither days, a date nor a time, or one given twice.
    #[error("'{0}' is not weekdays, a date (YYYY-MM-DD) or a time (HH:MM[:SS])")]
    Part(String),
    /// A weekday that is not mon..sun.
    #[error("'{0}' is not a weekday (mon, tue, wed, thu, fri, sat, sun)")]
    Weekday(String),
    /// A field that is not `*`, a number, a range or a repetition.
    #[error("{field} '{part}' is not *, a number, a range a..b or a repetition a/step")]
    Field {
        /// year, month, day, hour, minute or second.
        field: &'static str,
        /// The field as written.
        part: String,
    },
    /// A number out of its field's range.
    #[error("{field} {value} is out of {min}..{max}")]
    Range {
        /// The field.
        field: &'static str,
        /// The number.
        value: u32,
        /// The field's least number.
        min: u32,
        /// Its greatest.
        max: u32,
    },
    /// A range whose end comes before its start.
    #[error("{field} range '{part}' ends before it starts")]
    Backwards {
        /// The field.
        field: &'static str,
        /// The range as written.
        part: String,
    },
}

/// One item of a field: the numbers from `lo` to `hi`, every `step`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    lo: u32,
    hi: u32,
    step: u32,
}

/// A field: the numbers its items take.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Field(Vec<Span>);

impl Field {
    fn any(min: u32, max: u32) -> Self {
        Field(vec![Span {
            lo: min,
            hi: max,
            step: 1,
        }])
    }

    fn at(v: u32) -> Self {
        Field(vec![Span {
            lo: v,
            hi: v,
            step: 1,
        }])
    }

    fn has(&self, v: u32) -> bool {
        (self.0.iter()).any(|s| (s.lo..=s.hi).contains(&v) && (v - s.lo).is_multiple_of(s.step))
    }

    /// The least number of the field from `from` to `to`.
    fn first(&self, from: u32, to: u32) -> Option<u32> {
        (from..=to).find(|v| self.has(*v))
    }
}

/// A parsed calendar expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Calendar {
    /// Days of the week, bit 0 Monday.
    weekdays: u8,
    years: Field,
    months: Field,
    days: Field,
    hours: Field,
    minutes: Field,
    seconds: Field,
}

/// The bounds of each field.
const YEAR: (&str, u32, u32) = ("year", 1970, 9999);
const MONTH: (&str, u32, u32) = ("month", 1, 12);
const DAY: (&str, u32, u32) = ("day", 1, 31);
const HOUR: (&str, u32, u32) = ("hour", 0, 23);
const MINUTE: (&str, u32, u32) = ("minute", 0, 59);
const SECOND: (&str, u32, u32) = ("second", 0, 59);

const DAY_NAMES: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

impl Calendar {
    /// Parses an expression (see the module's documentation).
    pub fn parse(text: &str) -> Result<Calendar, CalendarError> {
        let text = text.trim();
        let expanded = match text.to_ascii_lowercase().as_str() {
            "minutely" => "*:*:00",
            "hourly" => "*:00:00",
            "daily" => "00:00:00",
            "weekly" => "mon 00:00:00",
            "monthly" => "*-*-01 00:00:00",
            "yearly" | "annually" => "*-01-01 00:00:00",
            _ => text,
        };
        let mut c = Calendar {
            weekdays: 0x7f,
            years: Field::any(YEAR.1, YEAR.2),
            months: Field::any(MONTH.1, MONTH.2),
            days: Field::any(DAY.1, DAY.2),
            hours: Field::at(0),
            minutes: Field::at(0),
            seconds: Field::at(0),
        };
        let parts: Vec<&str> = expanded.split_whitespace().collect();
        if parts.is_empty() {
            return Err(CalendarError::Empty);
        }
        // Weekdays, then a date, then a time: each at most once, in that order.
        let mut stage = 0;
        for part in parts {
            let kind = if part.starts_with(|c: char| c.is_ascii_alphabetic()) {
                0
            } else if part.contains(':') {
                2
            } else if part.contains('-') {
                1
            } else {
                3
            };
            if kind < stage || kind == 3 {
                return Err(CalendarError::Part(part.to_string()));
            }
            stage = kind + 1;
            match kind {
                0 => c.weekdays = weekdays(part)?,
                1 => c.date(part)?,
                _ => c.time(part)?,
            }
        }
        Ok(c)
    }

    /// `YYYY-MM-DD` or `MM-DD`.
    fn date(&mut self, part: &str) -> Result<(), CalendarError> {
        let f: Vec<&str> = part.split('-').collect();
        let (y, m, d) = match f[..] {
            [y, m, d] => (Some(y), m, d),
            [m, d] => (None, m, d),
            _ => return Err(CalendarError::Part(part.to_string())),
        };
        if let Some(y) = y {
            self.years = field(y, YEAR)?;
        }
        self.months = field(m, MONTH)?;
        self.days = field(d, DAY)?;
        Ok(())
    }

    /// `HH:MM` or `HH:MM:SS`.
    fn time(&mut self, part: &str) -> Result<(), CalendarError> {
        let f: Vec<&str> = part.split(':').collect();
        let (h, m, s) = match f[..] {
            [h, m] => (h, m, None),
            [h, m, s] => (h, m, Some(s)),
            _ => return Err(CalendarError::Part(part.to_string())),
        };
        self.hours = field(h, HOUR)?;
        self.minutes = field(m, MINUTE)?;
        self.seconds = match s {
            Some(s) => field(s, SECOND)?,
            None => Field::at(0),
        };
        Ok(())
    }

    /// Whether Unix second `t` (UTC) is one of the expression's.
    pub fn matches(&self, t: i64) -> bool {
        let Ok(t) = OffsetDateTime::from_unix_timestamp(t) else {
            return false;
        };
        self.day_matches(t.date())
            && self.hours.has(u32::from(t.hour()))
            && self.minutes.has(u32::from(t.minute()))
            && self.seconds.has(u32::from(t.second()))
    }

    #[cfg(test)]
    fn matches_day(&self, t: i64) -> bool {
        OffsetDateTime::from_unix_timestamp(t).is_ok_and(|t| self.day_matches(t.date()))
    }

    fn day_matches(&self, d: Date) -> bool {
        let wd = d.weekday().number_days_from_monday();
        self.weekdays & (1 << wd) != 0
            && u32::try_from(d.year()).is_ok_and(|y| self.years.has(y))
            && self.months.has(u32::from(u8::from(d.month())))
            && self.days.has(u32::from(d.day()))
    }

    /// The first second strictly after Unix second `t` that the expression
    /// matches; none within ten years of `t`.
    pub fn next_after(&self, t: i64) -> Option<i64> {
        let start = OffsetDateTime::from_unix_timestamp(t.checked_add(1)?).ok()?;
        let last_year = start.year().checked_add(HORIZON_YEARS)?;
        let mut day = start.date();
        let mut from = (start.hour(), start.minute(), start.second());
        while day.year() <= last_year {
            if !self.years_has(day.year()) {
                day = Date::from_calendar_date(day.year() + 1, Month::January, 1).ok()?;
            } else if !self.months.has(u32::from(u8::from(day.month()))) {
                day = first_of_next_month(day)?;
            } else if self.day_matches(day) {
                if let Some((h, m, s)) = self.time_from(from) {
                    let at = day.with_hms(h, m, s).ok()?.assume_utc();
                    return Some(at.unix_timestamp());
                }
                day = day.next_day()?;
            } else {
                day = day.next_day()?;
            }
            if day != start.date() {
                from = (0, 0, 0);
            }
        }
        None
    }

    fn years_has(&self, y: i32) -> bool {
        u32::try_from(y).is_ok_and(|y| self.years.has(y))
    }

    /// The first time of day at or after `from` the expression takes.
    fn time_from(&self, (h0, m0, s0): (u8, u8, u8)) -> Option<(u8, u8, u8)> {
        let (h0, m0, s0) = (u32::from(h0), u32::from(m0), u32::from(s0));
        let mut h = self.hours.first(h0, HOUR.2)?;
        loop {
            let m_from = if h == h0 { m0 } else { 0 };
            let mut m = self.minutes.first(m_from, MINUTE.2);
            while let Some(mm) = m {
                let s_from = if h == h0 && mm == m0 { s0 } else { 0 };
                if let Some(s) = self.seconds.first(s_from, SECOND.2) {
                    return Some((h as u8, mm as u8, s as u8));
                }
                m = self.minutes.first(mm + 1, MINUTE.2);
            }
            h = self.hours.first(h + 1, HOUR.2)?;
        }
    }
}

fn first_of_next_month(d: Date) -> Option<Date> {
    let (y, m) = match d.month() {
        Month::December => (d.year().checked_add(1)?, Month::January),
        m => (d.year(), m.next()),
    };
    Date::from_calendar_date(y, m, 1).ok()
}

/// A list of weekdays and ranges, as a mask (bit 0 Monday).
fn weekdays(part: &str) -> Result<u8, CalendarError> {
    let day = |name: &str| -> Result<u32, CalendarError> {
        let n = name.to_ascii_lowercase();
        let full = [
            "monday",
            "tuesday",
            "wednesday",
            "thursday",
            "friday",
            "saturday",
            "sunday",
        ];
        (DAY_NAMES.iter().position(|d| *d == n))
            .or_else(|| full.iter().position(|d| *d == n))
            .map(|i| i as u32)
            .ok_or_else(|| CalendarError::Weekday(name.to_string()))
    };
    let mut mask = 0u8;
    for item in part.split(',') {
        let (a, b) = match item.split_once("..") {
            Some((a, b)) => (day(a)?, day(b)?),
            None => (day(item)?, day(item)?),
        };
        if b < a {
            return Err(CalendarError::Backwards {
                field: "weekday",
                part: item.to_string(),
            });
        }
        mask |= (a..=b).fold(0u8, |m, d| m | (1 << d));
    }
    Ok(mask)
}

/// One field: items joined by commas.
fn field(part: &str, (name, min, max): (&'static str, u32, u32)) -> Result<Field, CalendarError> {
    let bad = || CalendarError::Field {
        field: name,
        part: part.to_string(),
    };
    let num = |s: &str| -> Result<u32, CalendarError> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let v = s.parse::<u32>().map_err(|_| bad())?;
        if !(min..=max).contains(&v) {
            return Err(CalendarError::Range {
                field: name,
                value: v,
                min,
                max,
            });
        }
        Ok(v)
    };
    let mut spans = Vec::new();
    for item in part.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((r, s)) => (r, Some(s)),
            None => (item, None),
        };
        let (lo, hi) = match (range, range.split_once("..")) {
            ("*", _) => (min, max),
            (_, Some((a, b))) => (num(a)?, num(b)?),
            (a, None) if step.is_some() => (num(a)?, max),
            (a, None) => (num(a)?, num(a)?),
        };
        if hi < lo {
            return Err(CalendarError::Backwards {
                field: name,
                part: item.to_string(),
            });
        }
        let step = match step {
            None => 1,
            Some(s) => s.parse::<u32>().ok().filter(|s| *s > 0).ok_or_else(bad)?,
        };
        spans.push(Span { lo, hi, step });
    }
    Ok(Field(spans))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Unix seconds of a time written `YYYY-MM-DDTHH:MM:SSZ`.
    fn at(s: &str) -> i64 {
        let n = |r: std::ops::Range<usize>| s[r].parse::<u8>().unwrap();
        let month = Month::try_from(n(5..7)).unwrap();
        let date = Date::from_calendar_date(s[0..4].parse().unwrap(), month, n(8..10)).unwrap();
        date.with_hms(n(11..13), n(14..16), n(17..19))
            .unwrap()
            .assume_utc()
            .unix_timestamp()
    }

    /// The next time of `expr` after `from`, written as `from` is.
    fn next(expr: &str, from: &str) -> String {
        let c = Calendar::parse(expr).unwrap();
        let t = c.next_after(at(from)).expect("a next time");
        assert!(c.matches(t));
        let t = OffsetDateTime::from_unix_timestamp(t).unwrap();
        format!(
            "{}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second()
        )
    }

    #[test]
    fn shorthands() {
        let t = "2026-03-11T10:20:30Z"; // a Wednesday
        assert_eq!(next("minutely", t), "2026-03-11T10:21:00Z");
        assert_eq!(next("hourly", t), "2026-03-11T11:00:00Z");
        assert_eq!(next("daily", t), "2026-03-12T00:00:00Z");
        assert_eq!(next("weekly", t), "2026-03-16T00:00:00Z");
        assert_eq!(next("monthly", t), "2026-04-01T00:00:00Z");
        assert_eq!(next("yearly", t), "2027-01-01T00:00:00Z");
        assert_eq!(next(" Daily ", t), "2026-03-12T00:00:00Z");
    }

    #[test]
    fn weekdays_and_times() {
        // Friday 2026-03-13 at 03:00: the next weekday at 02:00 is Monday.
        assert_eq!(
            next("mon..fri 02:00", "2026-03-13T03:00:00Z"),
            "2026-03-16T02:00:00Z"
        );
        assert_eq!(
            next("mon..fri 02:00", "2026-03-12T01:59:59Z"),
            "2026-03-12T02:00:00Z"
        );
        assert_eq!(
            next("mon,wed 12:30", "2026-03-12T00:00:00Z"),
            "2026-03-16T12:30:00Z"
        );
        assert_eq!(next("sat", "2026-03-12T00:00:00Z"), "2026-03-14T00:00:00Z");
        assert_eq!(
            next("Sunday 23:59:59", "2026-03-12T00:00:00Z"),
            "2026-03-15T23:59:59Z"
        );
        assert_eq!(
            next("mon..tue,fri..sun 00:00", "2026-03-11T05:00:00Z"),
            "2026-03-13T00:00:00Z"
        );
    }

    #[test]
    fn repetitions_and_every_minute() {
        let t = "2026-03-11T10:20:30Z";
        assert_eq!(next("*:0/15", t), "2026-03-11T10:30:00Z");
        assert_eq!(
            next("*:0/15", "2026-03-11T23:50:00Z"),
            "2026-03-12T00:00:00Z"
        );
        assert_eq!(next("*:*", t), "2026-03-11T10:21:00Z");
        assert_eq!(next("*:*:*", t), "2026-03-11T10:20:31Z");
        assert_eq!(next("*:*:0/20", t), "2026-03-11T10:20:40Z");
        assert_eq!(next("8..17/3:00", t), "2026-03-11T11:00:00Z");
        assert_eq!(
            next("8..17/3:00", "2026-03-11T17:00:00Z"),
            "2026-03-12T08:00:00Z"
        );
        assert_eq!(next("02:30", t), "2026-03-12T02:30:00Z");
        assert_eq!(next("2,14:05", t), "2026-03-11T14:05:00Z");
    }

    #[test]
    fn dates_and_month_ends() {
        let t = "2026-03-11T10:20:30Z";
        assert_eq!(next("*-*-01 00:00", t), "2026-04-01T00:00:00Z");
        assert_eq!(
            next("*-*-01 00:00", "2026-12-01T00:00:00Z"),
            "2027-01-01T00:00:00Z"
        );
        // The 31st skips the months without one.
        assert_eq!(
            next("*-*-31 00:00", "2026-03-31T00:00:00Z"),
            "2026-05-31T00:00:00Z"
        );
        // The 29th of February only in leap years.
        assert_eq!(next("*-02-29 06:00", t), "2028-02-29T06:00:00Z");
        assert_eq!(
            next("02-29", "2028-02-29T06:00:00Z"),
            "2032-02-29T00:00:00Z"
        );
        assert_eq!(next("2027-01-01 00:00", t), "2027-01-01T00:00:00Z");
        assert_eq!(next("2026..2030/2-06-15", t), "2026-06-15T00:00:00Z");
        assert_eq!(next("2027/2-06-15", t), "2027-06-15T00:00:00Z");
        // A weekday and a date together: Friday the 13th.
        assert_eq!(
            next("fri *-*-13 00:00", "2026-03-14T00:00:00Z"),
            "2026-11-13T00:00:00Z"
        );
        // The end of a year, to the second.
        assert_eq!(
            next("*:*:*", "2026-12-31T23:59:59Z"),
            "2027-01-01T00:00:00Z"
        );
    }

    #[test]
    fn times_that_never_come_give_none() {
        let c = Calendar::parse("2020-01-01 00:00").unwrap();
        assert_eq!(c.next_after(at("2026-01-01T00:00:00Z")), None);
        // 30 February.
        let c = Calendar::parse("*-02-30").unwrap();
        assert_eq!(c.next_after(at("2026-01-01T00:00:00Z")), None);
        // Past ten years ahead.
        let c = Calendar::parse("2040-01-01").unwrap();
        assert_eq!(c.next_after(at("2026-01-01T00:00:00Z")), None);
    }

    #[test]
    fn bad_expressions_name_their_bad_part() {
        let err = |s: &str| Calendar::parse(s).unwrap_err().to_string();
        assert_eq!(
            err(" "),
            "an empty calendar (for example daily, mon..fri 02:00 or *:0/15)"
        );
        assert_eq!(
            err("mon..fry 02:00"),
            "'fry' is not a weekday (mon, tue, wed, thu, fri, sat, sun)"
        );
        assert_eq!(err("25:00"), "hour 25 is out of 0..23");
        assert_eq!(
            err("*:0/0"),
            "minute '0/0' is not *, a number, a range a..b or a repetition a/step"
        );
        assert_eq!(err("*-13-01"), "month 13 is out of 1..12");
        assert_eq!(err("*-*-0"), "day 0 is out of 1..31");
        assert_eq!(
            err("fri..mon"),
            "weekday range 'fri..mon' ends before it starts"
        );
        assert_eq!(err("10..2:00"), "hour range '10..2' ends before it starts");
        assert_eq!(
            err("02:00 mon"),
            "'mon' is not weekdays, a date (YYYY-MM-DD) or a time (HH:MM[:SS])"
        );
        assert_eq!(
            err("nightly"),
            "'nightly' is not a weekday (mon, tue, wed, thu, fri, sat, sun)"
        );
        assert_eq!(
            err("1:2:3:4"),
            "'1:2:3:4' is not weekdays, a date (YYYY-MM-DD) or a time (HH:MM[:SS])"
        );
        assert_eq!(
            err("12"),
            "'12' is not weekdays, a date (YYYY-MM-DD) or a time (HH:MM[:SS])"
        );
        assert_eq!(
            err("*:x"),
            "minute 'x' is not *, a number, a range a..b or a repetition a/step"
        );
        assert_eq!(
            err("*:+5"),
            "minute '+5' is not *, a number, a range a..b or a repetition a/step"
        );
    }

    /// One field item as written, over `lo..=hi`.
    fn item(lo: u32, hi: u32) -> impl Strategy<Value = String> {
        (lo..=hi, lo..=hi, 1u32..=7, 0u8..5).prop_map(|(a, b, step, kind)| {
            let (a, b) = (a.min(b), a.max(b));
            match kind {
                0 => "*".to_string(),
                1 => a.to_string(),
                2 => format!("{a}..{b}"),
                3 => format!("{a}/{step}"),
                _ => format!("{a}..{b}/{step}"),
            }
        })
    }

    fn list(lo: u32, hi: u32) -> impl Strategy<Value = String> {
        prop::collection::vec(item(lo, hi), 1..3).prop_map(|v| v.join(","))
    }

    fn expression() -> impl Strategy<Value = String> {
        let days = prop::sample::select(vec!["", "mon ", "mon..fri ", "sat,sun ", "wed,fri..sun "]);
        (
            days,
            list(1, 12),
            list(1, 31),
            list(0, 23),
            list(0, 59),
            list(0, 59),
        )
            .prop_map(|(w, mo, d, h, mi, s)| format!("{w}*-{mo}-{d} {h}:{mi}:{s}"))
    }

    proptest! {
        #[test]
        fn the_next_time_is_later_matches_and_is_the_first(
            expr in expression(),
            t in at("2000-01-01T00:00:00Z")..at("2090-01-01T00:00:00Z"),
        ) {
            let c = Calendar::parse(&expr).unwrap();
            if let Some(n) = c.next_after(t) {
                prop_assert!(n > t);
                prop_assert!(c.matches(n), "{expr}: {n}");
                // None between: checked second by second when the gap is short.
                if n - t < 20_000 {
                    prop_assert!(((t + 1)..n).all(|s| !c.matches(s)), "{expr}: {t}..{n}");
                }
            } else {
                // Only expressions whose days never come (30 February...) give none.
                prop_assert!(
                    (0..HORIZON_YEARS as i64 * 366).all(|d| !c.matches_day(t + d * 86_400)),
                    "{expr} after {t}"
                );
            }
        }
    }
}
