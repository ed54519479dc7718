//! What a backup reports: live counters while it runs, and per job, stream and drive
//! when it ends.

use std::sync::atomic::AtomicU64;

/// Live counters, for progress display.
#[derive(Debug, Default)]
pub struct Progress {
    /// Entries written.
    pub files: AtomicU64,
    /// Stored data bytes written.
    pub bytes: AtomicU64,
    /// The latest sample of each stream and drive: bytes so far and, for drives with
    /// a model, backhitches so far, buffer fill and speed step. Updated every second.
    pub series: crate::sampler::Live,
}

/// What a backup did.
#[derive(Debug, Clone)]
pub struct BackupReport {
    /// Catalog job id.
    pub job_id: i64,
    /// Seconds of CPU the process used while the job ran (in a server, with the
    /// jobs beside it); `None` where the kernel does not say.
    pub cpu_seconds: Option<f64>,
    /// Ok or partial.
    pub status: tapeloom_catalog::JobState,
    /// Entries backed up.
    pub files: u64,
    /// Data bytes stored.
    pub bytes: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Seconds from the moment the first cartridge was mounted and positioned until
    /// the last data block was written: the job less loads, label reads, positioning,
    /// the index and the final flush.
    pub data_seconds: f64,
    /// Barcodes written, in order.
    pub volumes: Vec<String>,
    /// Source objects that could not be backed up: path and reason.
    pub errors: Vec<(String, String)>,
    /// Blocks written, all streams.
    pub blocks: u64,
    /// Per stream: name, data bytes, seconds from the job's start to its end.
    pub streams: Vec<StreamReport>,
    /// Most streams interleaved at once, all drives together.
    pub max_concurrency: usize,
    /// Extents written.
    pub extents: u64,
    /// Filemarks written inside the job's segments.
    pub filemarks: u64,
    /// Per drive: what it wrote, its waits and its statistics.
    pub drives: Vec<DriveReport>,
    /// Whether blocks were compressed in software (zstd).
    pub software_compression: bool,
    /// Data block payload bytes, and the bytes stored for them.
    pub compression_raw_bytes: u64,
    /// Bytes stored for the data block payloads.
    pub compression_stored_bytes: u64,
    /// Blocks stored compressed, and stored as they were.
    pub compressed_blocks: (u64, u64),
    /// Whether the job went through the disk stages.
    pub staged: bool,
    /// Through the stages: the order the drives despooled in.
    pub despool: Option<crate::backup::plan::DespoolOrder>,
    /// Times spooling waited for stage space, and the seconds it waited.
    pub stage_waits: (u64, f64),
    /// The job's set, level and base, and why its level is not the one asked for.
    pub set: crate::backup::changes::SetChoice,
    /// Objects unchanged since the base: neither opened nor stored.
    pub unchanged: u64,
    /// Regular files stored as metadata alone (their data is in an earlier job).
    pub meta_only: u64,
    /// Paths found deleted since the base.
    pub deleted: u64,
    /// Bytes read from source files.
    pub source_bytes_read: u64,
    /// Regular files opened to be read.
    pub source_files_opened: u64,
}

/// One stream of a finished backup.
#[derive(Debug, Clone)]
pub struct StreamReport {
    /// Stream name.
    pub name: String,
    /// Data bytes.
    pub bytes: u64,
    /// Entries.
    pub files: u64,
    /// Seconds from the job's start until the stream's last block was written.
    pub seconds: f64,
    /// The drive that carried it, when the job chose drives.
    pub drive: Option<usize>,
    /// Through the stage: the stream's payload bytes spooled, and the seconds from
    /// the job's start until its last block was staged.
    pub spool: Option<(u64, f64)>,
}

/// What one drive did.
#[derive(Debug, Clone, Default)]
pub struct DriveReport {
    /// The library's drive index, when the job chose one.
    pub drive: Option<usize>,
    /// File data bytes written with this drive.
    pub bytes: u64,
    /// Entries written with this drive.
    pub files: u64,
    /// Blocks written, all streams and the job's own records.
    pub blocks: u64,
    /// Barcodes written, in order.
    pub volumes: Vec<String>,
    /// Names of the streams this drive carried.
    pub streams: Vec<String>,
    /// Times the writer found every stream empty.
    pub writer_waits: u64,
    /// Seconds the writer spent waiting so.
    pub writer_wait_seconds: f64,
    /// Times a stream's packer found this drive's pool full.
    pub reader_waits: u64,
    /// Seconds packers spent waiting so.
    pub reader_wait_seconds: f64,
    /// Most streams interleaved at once.
    pub max_concurrency: usize,
    /// Filemarks written inside the job's segments.
    pub filemarks: u64,
    /// Seconds from the job's start until this drive's last block.
    pub seconds: f64,
    /// The drive's statistics, when it keeps them.
    pub drive_stats: Option<tapeloom_device::DriveStats>,
    /// Backhitches while this drive's data streamed, when the drive counts them: up to
    /// its last data block. The stops after it (waiting for the job's other drives,
    /// the index, the flush that ends the job) are in `drive_stats` only.
    pub backhitches: Option<u64>,
    /// What the drive said about each cartridge at the end of its mount.
    pub health: Vec<(String, tapeloom_device::DriveHealth)>,
    /// Whether the drive's own compressor ran (at the last mount).
    pub drive_compressed: Option<bool>,
    /// Through the stage: what the drive despooled.
    pub despool: Option<Despool>,
    /// When this drive wrote the job's first data block and its last (Unix
    /// nanoseconds, this machine's clock), when it wrote any: where the data
    /// spans of jobs on several drives overlap, the drives wrote at once.
    pub data_span_ns: Option<(i64, i64)>,
    /// Payload bytes of the data blocks this drive wrote.
    pub data_bytes: u64,
}

/// What one drive despooled.
#[derive(Debug, Clone, Default)]
pub struct Despool {
    /// Payload bytes written.
    pub bytes: u64,
    /// Seconds from its first despooled block to its last.
    pub seconds: f64,
    /// Bytes per second the drive takes at its top speed for this data, when its
    /// model says.
    pub max_bytes_per_s: Option<f64>,
}
