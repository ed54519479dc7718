//! What a further copy of a job wrote, as `tapeloom copy --json` prints it and a
//! backup's document holds it (its `copy`).

use serde::Serialize;

/// What a copy wrote.
#[derive(Debug, Clone, Serialize)]
pub struct Copied {
    /// The job copied.
    pub job_id: i64,
    /// The copy's number (2 for the first further copy).
    pub copy_no: u32,
    /// The pool it went to.
    pub pool: String,
    /// Blocks copied.
    pub blocks: u64,
    /// Filemarks inside the job's segments, copied.
    pub filemarks: u64,
    /// Bytes of the blocks copied, as stored on tape.
    pub bytes: u64,
    /// Copy segments written.
    pub segments: usize,
    /// Cartridges the copy is on, in order.
    pub cartridges: Vec<String>,
    /// Seconds, wall clock.
    pub seconds: f64,
    /// The drive that read, and the one that wrote.
    pub drives: (usize, usize),
    /// With one drive: the most bytes the spool file held at once.
    pub spool_peak_bytes: Option<u64>,
    /// How the reading drive ran (of its last segment), when it keeps
    /// statistics.
    pub read_drive: Option<DriveFigures>,
    /// How the writing drive ran, when it keeps statistics.
    pub write_drive: Option<DriveFigures>,
}

/// How a drive of a copy ran, from its statistics.
#[derive(Debug, Clone, Serialize)]
pub struct DriveFigures {
    /// Bytes it read (the reading drive) or was given to write (the writing one).
    pub bytes: u64,
    /// Seconds its tape moved with data.
    pub streaming_seconds: f64,
    /// Seconds its tape stood while it was in use.
    pub stopped_seconds: f64,
    /// Times its tape ran dry and backed up, or stopped for a flush.
    pub backhitches: u64,
    /// Of those, the ones while the data flowed (the writing drive: before the
    /// flush at the copy's end).
    pub backhitches_while_data: Option<u64>,
    /// `bytes` over `streaming_seconds`, in MB/s.
    pub mb_per_s: f64,
    /// Its model's top rate, in MB/s, when it has speed steps.
    pub top_mb_per_s: Option<f64>,
}
