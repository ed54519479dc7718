//! Where a job and a volume stand. The catalog stores each as the text of
//! [`JobState::as_str`] and [`VolumeState::as_str`] (catalogs of every schema version
//! hold the same words), and the binary prints the same words.

use crate::db::{BoxError, FromValue, ToValue, Value, ValueRef};
use std::fmt;
use std::str::FromStr;
use tapeloom_format::JobStatus;

/// Where a job stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobState {
    /// Begun and not ended (or its process died, until the home is next opened).
    Running,
    /// Ended with every source object backed up.
    Ok,
    /// Ended, and some source objects could not be read.
    Partial,
    /// Did not end: its process died, or its tapes hold no `JobEnd`. Nothing more
    /// of it reaches tape without a new backup.
    Failed,
    /// Its process stopped while its data was on a disk stage, where it waits to
    /// be resumed (`stage resume`, or a server at its start): it will reach tape.
    Queued,
    /// Found on tape by `catalog rebuild` with a start record it could not use:
    /// its files were read from its blocks as they are, with the block size and
    /// streams the blocks show. It restores, but it is no member of a backup set,
    /// and nothing else (copies, moves, verifies due) takes it as a job that
    /// ended.
    Salvaged,
}

impl JobState {
    /// The word the catalog stores and the binary prints.
    pub const fn as_str(self) -> &'static str {
        match self {
            JobState::Running => "running",
            JobState::Ok => "ok",
            JobState::Partial => "partial",
            JobState::Failed => "failed",
            JobState::Queued => "queued",
            JobState::Salvaged => "salvaged",
        }
    }

    /// The status a `JobEnd` record gives a job that ended this way; `None` for a job
    /// that has not ended or failed (its tapes hold no `JobEnd`).
    pub const fn on_tape(self) -> Option<JobStatus> {
        match self {
            JobState::Ok => Some(JobStatus::Ok),
            JobState::Partial => Some(JobStatus::Partial),
            JobState::Running | JobState::Failed | JobState::Queued | JobState::Salvaged => None,
        }
    }
}

/// A job whose `JobEnd` record says how it ended.
impl From<JobStatus> for JobState {
    fn from(s: JobStatus) -> Self {
        match s {
            JobStatus::Ok => JobState::Ok,
            JobStatus::Partial => JobState::Partial,
        }
    }
}

/// Where a volume stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VolumeState {
    /// It has room: jobs may append to it.
    Append,
    /// A job reached early warning on it: nothing more is written to it.
    Full,
    /// A write to it failed (a medium error): nothing more is written to it; what
    /// is on it still reads.
    Suspect,
    /// Every job on it outlived its pool's retention and was forgotten: a backup
    /// of its pool may label it anew (recycle it).
    Expired,
}

impl VolumeState {
    /// The word the catalog stores and the binary prints.
    pub const fn as_str(self) -> &'static str {
        match self {
            VolumeState::Append => "append",
            VolumeState::Full => "full",
            VolumeState::Suspect => "suspect",
            VolumeState::Expired => "expired",
        }
    }
}

/// Where a chunk of a stream spooled to a disk stage stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChunkState {
    /// Its file on the stage holds blocks that are not on tape yet.
    Spooled,
    /// Its blocks are on tape and recorded; its file may be deleted.
    Despooled,
}

impl ChunkState {
    /// The word the catalog stores and the binary prints.
    pub const fn as_str(self) -> &'static str {
        match self {
            ChunkState::Spooled => "spooled",
            ChunkState::Despooled => "despooled",
        }
    }
}

/// A word that names no state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {text:?}")]
pub struct UnknownState {
    /// `job state` or `volume state`.
    pub what: &'static str,
    /// The word.
    pub text: String,
}

macro_rules! state_text {
    ($t:ty, $what:literal, [$($v:ident),*]) => {
        impl FromStr for $t {
            type Err = UnknownState;
            fn from_str(s: &str) -> Result<Self, UnknownState> {
                $(if s == <$t>::$v.as_str() {
                    return Ok(<$t>::$v);
                })*
                Err(UnknownState { what: $what, text: s.to_string() })
            }
        }

        /// The word, padded to the width asked for.
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.pad(self.as_str())
            }
        }

        impl ToValue for $t {
            fn value(&self) -> ValueRef<'_> {
                ValueRef::Text(self.as_str())
            }
        }

        impl FromValue for $t {
            fn from_value(v: &Value) -> Result<Self, BoxError> {
                crate::db::text(v)?
                    .parse()
                    .map_err(|e: UnknownState| Box::new(e) as BoxError)
            }
        }
    };
}

state_text!(
    JobState,
    "job state",
    [Running, Ok, Partial, Failed, Queued, Salvaged]
);
state_text!(
    VolumeState,
    "volume state",
    [Append, Full, Suspect, Expired]
);
state_text!(ChunkState, "chunk state", [Spooled, Despooled]);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip() {
        for s in [
            JobState::Running,
            JobState::Ok,
            JobState::Partial,
            JobState::Failed,
            JobState::Queued,
            JobState::Salvaged,
        ] {
            assert_eq!(s.as_str().parse::<JobState>(), Ok(s));
            assert_eq!(s.to_string(), s.as_str());
        }
        for s in [
            VolumeState::Append,
            VolumeState::Full,
            VolumeState::Suspect,
            VolumeState::Expired,
        ] {
            assert_eq!(s.as_str().parse::<VolumeState>(), Ok(s));
        }
        for s in [ChunkState::Spooled, ChunkState::Despooled] {
            assert_eq!(s.as_str().parse::<ChunkState>(), Ok(s));
        }
        assert_eq!(
            ["running", "ok", "partial", "failed", "salvaged", "append", "full"],
            [
                JobState::Running.as_str(),
                JobState::Ok.as_str(),
                JobState::Partial.as_str(),
                JobState::Failed.as_str(),
                JobState::Salvaged.as_str(),
                VolumeState::Append.as_str(),
                VolumeState::Full.as_str()
            ]
        );
        let e = "done".parse::<JobState>().unwrap_err();
        assert_eq!(e.to_string(), "unknown job state \"done\"");
        assert!("Ok".parse::<JobState>().is_err());
        assert!("ok".parse::<VolumeState>().is_err());
    }

    #[test]
    fn display_pads_like_a_str() {
        assert_eq!(format!("{:<8}|", JobState::Ok), "ok      |");
        assert_eq!(format!("{:>6}", VolumeState::Full), "  full");
    }

    #[test]
    fn on_tape_status_maps_both_ways() {
        for s in [JobStatus::Ok, JobStatus::Partial] {
            assert_eq!(JobState::from(s).on_tape(), Some(s));
        }
        assert_eq!(JobState::Running.on_tape(), None);
        assert_eq!(JobState::Failed.on_tape(), None);
        assert_eq!(JobState::Queued.on_tape(), None);
    }
}
