//! The summary of a job's per-second samples as `tapeloom report --json` prints
//! it, beside the plots (`tapeloom_ops::report` draws them and makes it).

use crate::health::CartridgeHealth;
use serde::Serialize;

/// The file written, and what the summary says of drives and cartridges.
#[derive(Serialize)]
pub struct Drawn {
    pub job_id: i64,
    pub op: String,
    pub out: String,
    pub samples: usize,
    /// The job's rate while data moved (its drives' data phase), MB/s.
    pub data_mb_per_s: Option<f64>,
    pub drives: Vec<DriveTotal>,
    /// When drives loaded, positioned or wrote the index, as drawn.
    pub spans: Vec<SpanOut>,
    pub cartridges: Vec<DriveCartridge>,
    /// Whether the job was backed up through the disk stages.
    pub staged: bool,
    /// How full the stages got during the run drawn, for a staged backup.
    pub stage_fill: Option<StagePeak>,
    /// The recall's files and bytes written back and files waiting, second by
    /// second, for `--op recall`.
    pub recall: Option<RecallOut>,
}

/// A recall's per-second samples and their peaks.
#[derive(Serialize)]
pub struct RecallOut {
    pub files: u64,
    pub bytes: u64,
    /// The most files waiting at once.
    pub peak_waiting: u64,
    pub seconds: f64,
    pub samples: Vec<RecallPoint>,
}

/// One second of a recall.
#[derive(Serialize)]
pub struct RecallPoint {
    pub t_s: f64,
    pub files: u64,
    pub bytes: u64,
    pub waiting: u64,
}

/// The most the stages held during a staged backup.
#[derive(Serialize)]
pub struct StagePeak {
    pub peak_bytes: u64,
    /// The peak as a share of the stages' size, 0 to 1.
    pub peak_share: f64,
    /// The stages' size, when they held anything.
    pub size_bytes: Option<u64>,
}

/// A span of the time axis without data, as drawn.
#[derive(Serialize)]
pub struct SpanOut {
    pub what: String,
    pub drive: Option<String>,
    pub from_s: f64,
    pub to_s: f64,
}

/// A drive's last sample: its bytes and backhitches over the run.
#[derive(Serialize)]
pub struct DriveTotal {
    pub drive: usize,
    pub bytes: u64,
    pub backhitches: u64,
    /// The drive's rate while data moved, MB/s.
    pub data_mb_per_s: Option<f64>,
}

/// What a drive said about a cartridge at the end of its mount.
#[derive(Serialize)]
pub struct DriveCartridge {
    pub drive: i64,
    #[serde(flatten)]
    pub health: CartridgeHealth,
}
