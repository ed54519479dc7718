//! A backup on the wire: what a client asks for ([`Begin`]), what the server
//! answers when it lets the job in ([`Begun`]) or keeps it waiting ([`Waiting`]),
//! and the document of its end ([`BackedUp`]), which `tapeloom backup --json`
//! prints for a local backup too.

use crate::copy::Copied;
use crate::fmt::PathError;
use crate::health::CartridgeHealth;
use serde::Serialize;
use tapeloom_format::Level;

/// A job as a client asks for it.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub struct Begin {
    /// The job's name.
    pub name: String,
    /// Its set (default: its name).
    pub set: Option<String>,
    /// The media pool (default: `default`).
    pub pool: Option<String>,
    /// Block size in bytes.
    pub block_size: usize,
    /// Its streams, ids 1, 2, ... in order.
    pub streams: Vec<BeginStream>,
    /// The level asked for: full, incremental or differential (default full).
    #[serde(default = "full")]
    pub level: String,
    /// The fingerprint (hex) of the key the client asks the job encrypted with
    /// (`backup --encrypt FILE`): the server encrypts it with its own copy of that
    /// key, over the pool's, and refuses the job when it does not hold it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypt: Option<String>,
}

fn full() -> String {
    Level::Full.name().to_string()
}

/// The level named `name`.
pub fn level_named(name: &str) -> Option<Level> {
    [Level::Full, Level::Incremental, Level::Differential]
        .into_iter()
        .find(|l| l.name() == name)
}

/// One stream of a [`Begin`].
#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub struct BeginStream {
    /// Its name.
    pub name: String,
    /// The source path on the client.
    pub source: String,
    /// Its root in the job's namespace.
    pub root: String,
}

/// What the client packs its blocks with.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Begun {
    /// The backup's number in the server's queue (the `ID` of its requests).
    pub backup: u64,
    /// The job's tag, in every block.
    pub tag: u64,
    /// Its block size.
    pub block_size: usize,
    /// The level it runs at (none from an older server: full).
    #[serde(default)]
    pub level: Option<String>,
    /// The job its changes are relative to, for an incremental or differential.
    #[serde(default)]
    pub base_job: Option<i64>,
    /// Why it runs at another level than the one asked for.
    #[serde(default)]
    pub promoted: Option<String>,
    /// Bytes each block leaves free after its payload: the nonce and tag of a
    /// job the server encrypts (none from an older server: 0).
    #[serde(default)]
    pub tail: usize,
    /// The fingerprint of the key the server encrypts the job with (the one the
    /// client named, else its pool's); none for a job written in clear.
    #[serde(default)]
    pub encrypt: Option<String>,
    /// How often a stream with nothing to send says its client is alive (a
    /// keepalive frame), in milliseconds; none from an older server, which takes
    /// no keepalive.
    #[serde(default)]
    pub keepalive_ms: Option<u64>,
}

/// What the server holds of one stream of a job (`GET /api/backups/ID/streams/N`):
/// a client whose connection broke off sends the stream again from frame `held`
/// (`POST .../streams/N?from=HELD`) once no connection sends it (`open` false).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct StreamState {
    /// Frames (blocks and notes) of the stream the server holds.
    pub held: u64,
    /// Whether a connection sends the stream now.
    pub open: bool,
    /// Whether the stream's end came.
    pub ended: bool,
}

/// A job not yet let in, or not yet over.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Waiting {
    /// The backup's number.
    pub backup: u64,
    /// Where it is: waiting, receiving or writing.
    pub state: State,
    /// Jobs ahead of it in the queue (waiting for a place, or for a drive).
    pub ahead: usize,
}

/// Where a queued job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Waiting for a place (a limit of its client or of the drives).
    Waiting,
    /// Its client sends its blocks; they wait on the server's spool.
    Receiving,
    /// On a drive.
    Writing,
    /// Ended well (ok or partial).
    Ended,
    /// Failed.
    Failed,
}

/// What a backup wrote, and how fast.
#[derive(Serialize)]
pub struct BackedUp {
    pub job_id: i64,
    pub status: &'static str,
    #[serde(flatten)]
    pub set: SetFigures,
    pub files: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub mb_per_s: f64,
    pub data_seconds: f64,
    pub data_mb_per_s: f64,
    /// Seconds of CPU the process used for the job (in a server, with the jobs
    /// beside it), and per GB (10^9 bytes) of the job's data.
    pub cpu_seconds: Option<f64>,
    pub cpu_seconds_per_gb: Option<f64>,
    pub blocks: u64,
    pub volumes: Vec<String>,
    pub extents: u64,
    pub filemarks: u64,
    pub max_concurrency: usize,
    pub streams: Vec<Stream>,
    pub drives: Vec<Drive>,
    pub compression: Compression,
    /// direct or stage.
    pub via: &'static str,
    /// Through the stage: whole or early (`--despool`).
    pub despool: Option<&'static str>,
    /// Through the stage: how often and how long spooling waited for space.
    pub stage_waits: Option<StageWaits>,
    pub errors: Vec<PathError>,
    /// The copy written once the job ended, when its pool names a copy pool
    /// (`pool create --copy-to`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copy: Option<Copied>,
    /// Why that copy could not be written (the job itself is whole).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copy_error: Option<String>,
}

/// How often and how long spooling waited for stage space.
#[derive(Serialize)]
pub struct StageWaits {
    pub count: u64,
    pub seconds: f64,
}

/// One stream: its data and the drive that wrote it.
#[derive(Serialize)]
pub struct Stream {
    pub name: String,
    pub bytes: u64,
    pub files: u64,
    pub seconds: f64,
    pub mb_per_s: f64,
    pub drive: usize,
    /// Through the stage: the stream's rate onto the stage (its payload over the
    /// seconds from the job's start until its last block was staged).
    pub spool_mb_per_s: Option<f64>,
    /// Through the stage: seconds from the job's start until its last block was
    /// staged.
    pub spool_seconds: Option<f64>,
}

/// What compressed the data, and by how much.
#[derive(Serialize)]
pub struct Compression {
    /// zstd or none.
    pub software: &'static str,
    /// `--drive-compression`: on or off.
    pub drive: String,
    pub raw_bytes: u64,
    pub stored_bytes: u64,
    pub ratio: f64,
    pub compressed_blocks: u64,
    pub stored_as_is_blocks: u64,
}

/// A job's place in its set, and what its base comparison found.
#[derive(Serialize)]
pub struct SetFigures {
    pub set: String,
    pub level: &'static str,
    pub base_job: Option<i64>,
    /// Why the job ran at another level than the one asked for.
    pub promoted: Option<String>,
    /// Objects unchanged since the base: neither opened nor stored.
    pub unchanged: u64,
    /// Regular files recorded with their metadata alone.
    pub meta_only: u64,
    /// Paths found deleted since the base.
    pub deleted: u64,
    /// Bytes read from source files, and files opened to be read.
    pub source_bytes_read: u64,
    pub source_files_opened: u64,
}

/// One drive of a backup: rate, utilization against the drive's maximum at the
/// data's compressibility (when the drive has a model), waits and backhitches:
/// those while the drive's data streamed, and the stops after its last data block
/// (waiting for the job's other drives, the index, the flush that ends the job).
/// Utilization counts the time the tape moved or stood during the job, not loads.
#[derive(Serialize)]
pub struct Drive {
    pub drive: usize,
    pub bytes: u64,
    pub mb_per_s: f64,
    pub volumes: Vec<String>,
    pub streams: Vec<String>,
    pub max_concurrency: usize,
    pub filemarks: u64,
    pub utilization: Option<f64>,
    pub backhitches: Option<u64>,
    pub stops_after_data: Option<u64>,
    pub compression_ratio: Option<f64>,
    pub modeled_seconds: Option<f64>,
    pub writer_waits: u64,
    pub writer_wait_seconds: f64,
    pub reader_waits: u64,
    pub reader_wait_seconds: f64,
    pub drive_compression: Option<bool>,
    pub tape_alerts: Option<Vec<String>>,
    pub cartridges: Vec<CartridgeHealth>,
    /// Through the stage: the drive's rate from its first despooled block to its
    /// last, and the most it takes for this data (when its model says).
    pub despool_mb_per_s: Option<f64>,
    pub despool_max_mb_per_s: Option<f64>,
    pub despool_seconds: Option<f64>,
    /// The tape's mean speed while it moved, as a share of its top speed step (from
    /// the drive's model): 1.0 when it streamed at full speed throughout.
    pub streaming_speed_share: Option<f64>,
    /// When the drive wrote its first data block of the job and its last (Unix
    /// nanoseconds), and its rate between them: the data's own rate, without the
    /// loads and the index.
    pub data_span_ns: Option<[i64; 2]>,
    pub data_span_mb_per_s: Option<f64>,
    /// The most the drive takes for this data (its top speed step times the
    /// data's compression ratio), when its model says.
    pub model_mb_per_s: Option<f64>,
}
