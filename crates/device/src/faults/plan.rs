//! The fault plan and its spec string (`docs/FAULTS.md`).
//!
//! ```text
//! spec  = item *( ";" item )
//! item  = "seed=" N | kind [ "=" value ] [ "@" cond *( "," cond ) ]
//! cond  = "lbn=" N | "n=" N | "drive=" N | "barcode=" TEXT | "once" | "every"
//! ```

use std::fmt;
use std::time::Duration;

/// What goes wrong.
#[derive(Debug, Clone, PartialEq)]
pub enum FaultKind {
    /// A read at the block fails with MEDIUM ERROR 11/00; the position moves past it.
    ReadError,
    /// Each block read fails as [`FaultKind::ReadError`] with this probability.
    ReadErrorRate(f64),
    /// A write at the block fails with MEDIUM ERROR 0C/00; nothing is written.
    WriteError,
    /// Each block write fails as [`FaultKind::WriteError`] with this probability.
    WriteErrorRate(f64),
    /// The block goes to tape, then the write fails with MEDIUM ERROR 0C/00.
    WriteErrorWritten,
    /// The write reports success, but the block never reaches the tape.
    WriteOkUnwritten,
    /// A buffered drive's deferred write error: the write at the block and every
    /// write and filemark after it report success but never reach the tape, until
    /// the third write after it or the next flush fails with a deferred MEDIUM
    /// ERROR 0C/00 (response code 71h) whose INFORMATION field counts the objects
    /// lost; that command is not carried out.
    WriteErrorDeferred,
    /// Writes at or past the block report early warning.
    EarlyWarningAt,
    /// Writes report early warning once the cartridge holds this many bytes.
    EarlyWarningBytes(u64),
    /// Writes at or past the block fail with end of medium, and no write on the
    /// drive reports early warning.
    EndOfMediumNoWarning,
    /// A read or write at the block waits this long, then goes on.
    Stall(Duration),
    /// A read or write at the block waits this long, then fails as a SCSI command
    /// whose time ran out (host status DID_TIME_OUT); nothing is read or written.
    Timeout(Duration),
    /// At the block the drive goes offline: this and every later command on it
    /// fails with NOT READY 04/12, and it cannot be opened again.
    Offline,
    /// A changer move (load, unload, transfer) fails with HARDWARE ERROR 15/01;
    /// nothing moves.
    MoveFail,
    /// Each changer move fails as [`FaultKind::MoveFail`] with this probability.
    MoveFailRate(f64),
    /// The slot is empty though the inventory lists a cartridge in it: a move out
    /// of it fails with ILLEGAL REQUEST 3B/0E.
    SlotEmpty(usize),
    /// From the write or filemark at the block on, the drive reports this TapeAlert
    /// flag (01h to 40h): a cartridge flag while that cartridge is in the drive, a
    /// drive or cleaning flag until the drive is cleaned.
    Alert(u16),
    /// Not a failure but a drive of another kind: one with no timing model that
    /// gives its own Recommended Access Order, as a SCSI LTO-9 drive does, and
    /// whose order is always the pieces asked from the last to the first.
    RaoReversed,
}

impl FaultKind {
    /// Whether it is an event that can fire once (as opposed to a condition that
    /// holds, or a rate drawn on every operation).
    pub fn is_event(&self) -> bool {
        matches!(
            self,
            FaultKind::ReadError
                | FaultKind::WriteError
                | FaultKind::WriteErrorWritten
                | FaultKind::WriteOkUnwritten
                | FaultKind::WriteErrorDeferred
                | FaultKind::Stall(_)
                | FaultKind::Timeout(_)
                | FaultKind::Offline
                | FaultKind::MoveFail
                | FaultKind::Alert(_)
        )
    }

    /// Whether it happens in the changer rather than in a drive.
    pub fn is_changer(&self) -> bool {
        matches!(
            self,
            FaultKind::MoveFail | FaultKind::MoveFailRate(_) | FaultKind::SlotEmpty(_)
        )
    }

    fn needs_lbn(&self) -> bool {
        !self.is_changer()
            && !matches!(
                self,
                FaultKind::ReadErrorRate(_)
                    | FaultKind::WriteErrorRate(_)
                    | FaultKind::EarlyWarningBytes(_)
                    | FaultKind::RaoReversed
            )
    }
}

/// One fault of a plan, with where it applies.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    /// What goes wrong.
    pub kind: FaultKind,
    /// The logical block it happens at (drive faults).
    pub lbn: Option<u64>,
    /// The changer move it happens at, counted from 1 (`move-fail`).
    pub n: Option<u64>,
    /// Only on this drive (or, for a changer fault, moves to or from it).
    pub drive: Option<usize>,
    /// Only with this cartridge.
    pub barcode: Option<String>,
    /// An event fires every time its place is reached instead of once.
    pub every: bool,
}

/// The faults to inject, and the seed of the rates.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FaultPlan {
    /// Seeds the draws of every rate: the same seed fails the same operations.
    pub seed: u64,
    /// The faults, in the order given.
    pub faults: Vec<Fault>,
}

/// A spec string that does not parse: the part at fault and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad fault spec at '{part}': {problem}")]
pub struct FaultSpecError {
    /// The item or condition as written.
    pub part: String,
    /// What is wrong with it.
    pub problem: SpecProblem,
}

/// What is wrong with a part of a fault spec.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecProblem {
    /// A kind of fault that does not exist.
    #[error("no such fault (see docs/FAULTS.md)")]
    UnknownKind,
    /// A kind that needs a value, given none.
    #[error("needs a value (KIND=VALUE)")]
    MissingValue,
    /// A kind that takes no value, given one.
    #[error("takes no value")]
    UnexpectedValue,
    /// A number that does not parse.
    #[error("not a whole number")]
    Number,
    /// A rate outside 0 to 1.
    #[error("a rate is a number from 0 to 1")]
    Rate,
    /// A size that does not parse.
    #[error("not a size (a number with K, M, G or T)")]
    Size,
    /// A duration that does not parse.
    #[error("not a duration (a number with ms, s or m)")]
    Duration,
    /// A condition that does not exist, or does not apply to the kind.
    #[error("no such condition here (lbn=, n=, drive=, barcode=, once, every)")]
    UnknownCondition,
    /// A drive fault without the block it happens at.
    #[error("needs the block it happens at (@lbn=N)")]
    MissingLbn,
    /// A TapeAlert flag outside 01h to 40h.
    #[error("a TapeAlert flag is a hex code from 01 to 40 (like 14h)")]
    AlertCode,
    /// `once` or `every` on a condition that holds or a rate.
    #[error("once and every apply to events only")]
    NotAnEvent,
}

fn bad(part: &str, problem: SpecProblem) -> FaultSpecError {
    FaultSpecError {
        part: part.to_string(),
        problem,
    }
}

impl std::str::FromStr for FaultPlan {
    type Err = FaultSpecError;

    fn from_str(spec: &str) -> Result<Self, FaultSpecError> {
        let mut plan = FaultPlan::default();
        for item in spec.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            if let Some(v) = item.strip_prefix("seed=") {
                plan.seed = number(item, v)?;
                continue;
            }
            plan.faults.push(parse_fault(item)?);
        }
        Ok(plan)
    }
}

impl FaultPlan {
    /// Parses a spec string.
    pub fn parse(spec: &str) -> Result<FaultPlan, FaultSpecError> {
        spec.parse()
    }

    /// Whether the plan holds any fault of a drive.
    pub fn has_drive_faults(&self) -> bool {
        self.faults.iter().any(|f| !f.kind.is_changer())
    }

    /// Whether a drive may report deferred write errors (it buffers writes).
    pub fn has_deferred_errors(&self) -> bool {
        self.faults
            .iter()
            .any(|f| f.kind == FaultKind::WriteErrorDeferred)
    }
}

fn parse_fault(item: &str) -> Result<Fault, FaultSpecError> {
    let (head, conds) = match item.split_once('@') {
        Some((h, c)) => (h.trim(), Some(c)),
        None => (item, None),
    };
    let (name, value) = match head.split_once('=') {
        Some((n, v)) => (n.trim(), Some(v.trim())),
        None => (head, None),
    };
    let need = || value.ok_or_else(|| bad(item, SpecProblem::MissingValue));
    let none = |k: FaultKind| match value {
        Some(_) => Err(bad(item, SpecProblem::UnexpectedValue)),
        None => Ok(k),
    };
    let kind = match name {
        "read-error" => none(FaultKind::ReadError)?,
        "read-error-rate" => FaultKind::ReadErrorRate(rate(item, need()?)?),
        "write-error" => none(FaultKind::WriteError)?,
        "write-error-rate" => FaultKind::WriteErrorRate(rate(item, need()?)?),
        "write-error-written" => none(FaultKind::WriteErrorWritten)?,
        "write-ok-unwritten" => none(FaultKind::WriteOkUnwritten)?,
        "write-error-deferred" => none(FaultKind::WriteErrorDeferred)?,
        "ew" => none(FaultKind::EarlyWarningAt)?,
        "ew-at" => FaultKind::EarlyWarningBytes(size(item, need()?)?),
        "eom-no-ew" => none(FaultKind::EndOfMediumNoWarning)?,
        "stall" => FaultKind::Stall(duration(item, need()?)?),
        "timeout" => FaultKind::Timeout(match value {
            Some(v) => duration(item, v)?,
            None => Duration::ZERO,
        }),
        "offline" => none(FaultKind::Offline)?,
        "move-fail" => none(FaultKind::MoveFail)?,
        "move-fail-rate" => FaultKind::MoveFailRate(rate(item, need()?)?),
        "slot-empty" => FaultKind::SlotEmpty(number(item, need()?)? as usize),
        "alert" => FaultKind::Alert(alert_code(item, need()?)?),
        "rao-reversed" => none(FaultKind::RaoReversed)?,
        _ => return Err(bad(name, SpecProblem::UnknownKind)),
    };
    let mut f = Fault {
        kind,
        lbn: None,
        n: None,
        drive: None,
        barcode: None,
        every: false,
    };
    for c in conds.into_iter().flat_map(|c| c.split(',')).map(str::trim) {
        let (key, v) = c.split_once('=').unwrap_or((c, ""));
        match key {
            "lbn" if !f.kind.is_changer() => f.lbn = Some(number(c, v)?),
            "n" if f.kind == FaultKind::MoveFail => f.n = Some(number(c, v)?),
            "drive" => f.drive = Some(number(c, v)? as usize),
            "barcode" if !v.is_empty() => f.barcode = Some(v.to_string()),
            "once" | "every" if !f.kind.is_event() => return Err(bad(c, SpecProblem::NotAnEvent)),
            "once" => f.every = false,
            "every" => f.every = true,
            _ => return Err(bad(c, SpecProblem::UnknownCondition)),
        }
    }
    if f.kind.needs_lbn() && f.lbn.is_none() {
        return Err(bad(item, SpecProblem::MissingLbn));
    }
    Ok(f)
}

/// A TapeAlert flag code in hex, 01 to 40: `14`, `14h` or `0x14`.
fn alert_code(part: &str, v: &str) -> Result<u16, FaultSpecError> {
    let hex = v.trim_start_matches("0x").trim_end_matches(['h', 'H']);
    match u16::from_str_radix(hex, 16) {
        Ok(c) if (1..=0x40).contains(&c) => Ok(c),
        _ => Err(bad(part, SpecProblem::AlertCode)),
    }
}

fn number(part: &str, v: &str) -> Result<u64, FaultSpecError> {
    v.trim().parse().map_err(|_| bad(part, SpecProblem::Number))
}

fn rate(part: &str, v: &str) -> Result<f64, FaultSpecError> {
    match v.parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(bad(part, SpecProblem::Rate)),
    }
}

/// `123`, `64K`, `2G`, `1.5T` (binary multiples; a trailing `B` or `iB` is allowed).
fn size(part: &str, v: &str) -> Result<u64, FaultSpecError> {
    let v = v.trim_end_matches("iB").trim_end_matches('B');
    let split = v.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let shift = match unit {
        "" => 0,
        "K" | "k" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return Err(bad(part, SpecProblem::Size)),
    };
    match num.parse::<f64>() {
        Ok(n) if n >= 0.0 && n.is_finite() => Ok((n * (1u64 << shift) as f64) as u64),
        _ => Err(bad(part, SpecProblem::Size)),
    }
}

/// `250ms`, `2s`, `1.5m`; a bare number is seconds.
fn duration(part: &str, v: &str) -> Result<Duration, FaultSpecError> {
    let split = v.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let scale = match unit {
        "ms" => 0.001,
        "" | "s" => 1.0,
        "m" => 60.0,
        _ => return Err(bad(part, SpecProblem::Duration)),
    };
    match num.parse::<f64>() {
        Ok(n) if n >= 0.0 && n.is_finite() => Ok(Duration::from_secs_f64(n * scale)),
        _ => Err(bad(part, SpecProblem::Duration)),
    }
}

impl fmt::Display for FaultPlan {
    /// The plan as a spec string that parses back to it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "seed={}", self.seed)?;
        for x in &self.faults {
            let (name, value) = match &x.kind {
                FaultKind::ReadError => ("read-error", None),
                FaultKind::ReadErrorRate(r) => ("read-error-rate", Some(r.to_string())),
                FaultKind::WriteError => ("write-error", None),
                FaultKind::WriteErrorRate(r) => ("write-error-rate", Some(r.to_string())),
                FaultKind::WriteErrorWritten => ("write-error-written", None),
                FaultKind::WriteOkUnwritten => ("write-ok-unwritten", None),
                FaultKind::WriteErrorDeferred => ("write-error-deferred", None),
                FaultKind::EarlyWarningAt => ("ew", None),
                FaultKind::EarlyWarningBytes(b) => ("ew-at", Some(b.to_string())),
                FaultKind::EndOfMediumNoWarning => ("eom-no-ew", None),
                FaultKind::Stall(d) => ("stall", Some(format!("{}ms", d.as_millis()))),
                FaultKind::Timeout(d) => ("timeout", Some(format!("{}ms", d.as_millis()))),
                FaultKind::Offline => ("offline", None),
                FaultKind::MoveFail => ("move-fail", None),
                FaultKind::MoveFailRate(r) => ("move-fail-rate", Some(r.to_string())),
                FaultKind::SlotEmpty(s) => ("slot-empty", Some(s.to_string())),
                FaultKind::Alert(c) => ("alert", Some(format!("{c:02X}h"))),
                FaultKind::RaoReversed => ("rao-reversed", None),
            };
            write!(f, ";{name}")?;
            if let Some(v) = value {
                write!(f, "={v}")?;
            }
            let mut conds = Vec::new();
            if let Some(l) = x.lbn {
                conds.push(format!("lbn={l}"));
            }
            if let Some(n) = x.n {
                conds.push(format!("n={n}"));
            }
            if let Some(d) = x.drive {
                conds.push(format!("drive={d}"));
            }
            if let Some(b) = &x.barcode {
                conds.push(format!("barcode={b}"));
            }
            if x.every {
                conds.push("every".to_string());
            }
            if !conds.is_empty() {
                write!(f, "@{}", conds.join(","))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_spec_parses_and_prints_back() {
        let spec = "write-error@lbn=500; read-error-rate=0.001;seed=7;ew-at=2G;\
                    eom-no-ew@lbn=900;write-error-written@lbn=40;write-ok-unwritten@lbn=41;\
                    write-error-deferred@lbn=60;\
                    stall=2s@lbn=100;timeout@lbn=120,every;move-fail@n=2;slot-empty=3;\
                    offline@lbn=300,drive=1;read-error@lbn=7,barcode=TL0002L3;alert=14h@lbn=9";
        let p = FaultPlan::parse(spec).unwrap();
        assert_eq!(p.seed, 7);
        assert_eq!(p.faults.len(), 14);
        assert_eq!(p.faults[13].kind, FaultKind::Alert(0x14));
        assert_eq!(p.faults[6].kind, FaultKind::WriteErrorDeferred);
        assert_eq!(p.faults[2].kind, FaultKind::EarlyWarningBytes(2 << 30));
        assert_eq!(p.faults[7].kind, FaultKind::Stall(Duration::from_secs(2)));
        assert!(p.faults[8].every && !p.faults[7].every);
        assert_eq!(p.faults[9].n, Some(2));
        assert_eq!(p.faults[11].drive, Some(1));
        assert_eq!(p.faults[12].barcode.as_deref(), Some("TL0002L3"));
        assert_eq!(FaultPlan::parse(&p.to_string()).unwrap(), p);
        assert_eq!(FaultPlan::parse("").unwrap(), FaultPlan::default());
    }

    #[test]
    fn a_bad_spec_names_the_bad_part() {
        let e = |s: &str| FaultPlan::parse(s).unwrap_err();
        assert_eq!(e("seed=1;read-eror@lbn=3").part, "read-eror");
        assert_eq!(e("read-eror@lbn=3").problem, SpecProblem::UnknownKind);
        assert_eq!(e("read-error@lbn=x").part, "lbn=x");
        assert_eq!(e("read-error").problem, SpecProblem::MissingLbn);
        assert_eq!(e("read-error-rate=2").problem, SpecProblem::Rate);
        assert_eq!(e("stall=3h@lbn=1").problem, SpecProblem::Duration);
        assert_eq!(e("ew-at=2X").problem, SpecProblem::Size);
        assert_eq!(e("move-fail@lbn=2").problem, SpecProblem::UnknownCondition);
        assert_eq!(e("ew@lbn=2,once").problem, SpecProblem::NotAnEvent);
        assert_eq!(e("slot-empty").problem, SpecProblem::MissingValue);
        assert_eq!(e("alert=41@lbn=1").problem, SpecProblem::AlertCode);
        assert_eq!(e("alert=zz@lbn=1").problem, SpecProblem::AlertCode);
        assert_eq!(e("alert=0x04").problem, SpecProblem::MissingLbn);
        assert_eq!(
            e("offline=1@lbn=2").to_string(),
            "bad fault spec at 'offline=1@lbn=2': takes no value"
        );
    }
}
