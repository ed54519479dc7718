//! The engine's error types: one enum per kind of refusal, matched by variant.
//!
//! Messages say what is wrong in the engine's terms; the command line adds how to
//! get past a refusal (which flag), since only it knows its flags.

use crate::escape_controls;
use std::path::PathBuf;
use thiserror::Error;

/// An engine error: what was being done, and why it failed.
#[derive(Debug, Error)]
pub enum Error {
    /// A device (drive or changer) failed.
    #[error(transparent)]
    Device(#[from] tapeloom_device::DeviceError),
    /// The catalog failed.
    #[error(transparent)]
    Catalog(#[from] tapeloom_catalog::CatalogError),
    /// Bytes from tape could not be decoded.
    #[error(transparent)]
    Format(#[from] tapeloom_format::FormatError),
    /// A file system operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done ("read /x/y").
        what: String,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// A state file could not be encoded or decoded.
    #[error("{what}: {source}")]
    Json {
        /// What was being done, or which file is damaged.
        what: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// The job asked for is not there, or does not hold what was asked.
    #[error(transparent)]
    Job(#[from] JobError),
    /// Options that cannot be carried out.
    #[error(transparent)]
    Options(#[from] OptionsError),
    /// A cartridge or drive the volume policy refuses or cannot find.
    #[error(transparent)]
    Media(#[from] MediaError),
    /// A restored object that cannot be placed safely.
    #[error(transparent)]
    Place(#[from] PlaceError),
    /// The home folder's state.
    #[error(transparent)]
    Home(#[from] HomeError),
    /// A disk stage or a chunk file on it.
    #[error(transparent)]
    Stage(#[from] StageError),
    /// A copy of a job.
    #[error(transparent)]
    Copy(#[from] CopyError),
    /// A key file, or a job's key.
    #[error(transparent)]
    Crypt(#[from] CryptError),
    /// A stream packed elsewhere (a client of the server) whose blocks are refused.
    #[error(transparent)]
    Received(#[from] ReceiveError),
    /// This drive's writer stopped because another drive of the job failed.
    #[error("stopped: another drive of the job failed")]
    Stopped,
    /// A worker thread panicked.
    #[error("{what} panicked")]
    Panicked {
        /// Which thread ("a drive's writer").
        what: &'static str,
    },
    /// A position the writer keeps for an entry was lost (a bug, not bad input).
    #[error("{what} position lost")]
    PositionLost {
        /// Which position ("entry start").
        what: &'static str,
    },
}

pub use tapeloom_tree::{CryptError, OptionsError, PlaceError};

impl From<tapeloom_tree::Error> for Error {
    /// A failure of the tree crate becomes the engine's variant of the same name,
    /// with the same message.
    fn from(e: tapeloom_tree::Error) -> Self {
        match e {
            tapeloom_tree::Error::Format(e) => Error::Format(e),
            tapeloom_tree::Error::Io { what, source } => Error::Io { what, source },
            tapeloom_tree::Error::Crypt(e) => Error::Crypt(e),
            tapeloom_tree::Error::Options(e) => Error::Options(e),
            tapeloom_tree::Error::Place(e) => Error::Place(e),
            tapeloom_tree::Error::BadPlan(why) => Error::Received(ReceiveError::BadPlan(why)),
        }
    }
}

/// A job that is not there or lacks what was asked of it.
#[derive(Debug, Error)]
pub enum JobError {
    /// No such job.
    #[error("no job {0} in the catalog")]
    NoJob(i64),
    /// Only a job that did not end can be recovered from its data streams.
    #[error("job {id} is {status}, not failed: only a job that did not end is recovered from its data streams")]
    NotFailed {
        /// Job id.
        id: i64,
        /// Its status.
        status: &'static str,
    },
    /// The job has no volume: it wrote nothing.
    #[error("job {0} wrote nothing to tape")]
    NothingOnTape(i64),
    /// The job has no volume with this sequence number.
    #[error("the job has no volume {seq}")]
    NoVolume {
        /// Volume sequence number.
        seq: u32,
    },
    /// No stream of that name.
    #[error("job {job} has no stream {}", escape_controls(name))]
    NoStream {
        /// Job id.
        job: i64,
        /// Stream asked for.
        name: String,
    },
    /// No entry at or below that path.
    #[error("job {job} has no path {}", escape_controls(path))]
    NoPath {
        /// Job id.
        job: i64,
        /// The path, displayable.
        path: String,
    },
    /// No job belongs to that backup set.
    #[error("no backup set {} in the catalog", escape_controls(set))]
    NoSet {
        /// The set asked for.
        set: String,
    },
    /// The set has no job that ended (ok or partial) at or before the time, or the
    /// job named did not end.
    #[error(
        "backup set {} has no job that ended ok or partial at or before {}",
        escape_controls(set),
        escape_controls(at)
    )]
    NoJobAt {
        /// The set.
        set: String,
        /// The time or job asked for.
        at: String,
    },
    /// A point in time that is neither an RFC 3339 time nor a job of the set.
    #[error(
        "'{}' is neither an RFC 3339 time nor a job of backup set {}",
        escape_controls(at),
        escape_controls(set)
    )]
    BadAt {
        /// The set.
        set: String,
        /// What was given.
        at: String,
    },
}

/// A copy of a job that cannot be made.
#[derive(Debug, Error)]
pub enum CopyError {
    /// Only a job that ended is copied.
    #[error("job {job} is {status}: only a job that ended (ok or partial) is copied")]
    NotEnded {
        /// Job id.
        job: i64,
        /// Its status.
        status: &'static str,
    },
    /// The copy would go to the pool the job is in.
    #[error(
        "job {job} is in pool {} already (cartridge {}): a copy goes to another pool",
        escape_controls(pool),
        escape_controls(barcode)
    )]
    SamePool {
        /// Job id.
        job: i64,
        /// The pool.
        pool: String,
        /// A cartridge of the job in it.
        barcode: String,
    },
    /// The writing side stopped; its own error says why.
    #[error("the copy's writing drive stopped")]
    WriterGone,
    /// The reading thread panicked.
    #[error("the copy's reading drive stopped unexpectedly")]
    ReaderPanicked,
    /// A spool file read back is not what was written to it.
    #[error("the copy's spool file {} changed on disk", .path.display())]
    SpoolDamaged {
        /// The file.
        path: PathBuf,
    },
    /// The copy read holds no object at that place of the original.
    #[error("copy {copy_no} holds nothing of the job's volume {seq} at block {lbn}")]
    NotInCopy {
        /// The copy.
        copy_no: u32,
        /// The original's volume sequence.
        seq: u32,
        /// The original's LBN.
        lbn: u64,
    },
    /// No copy of that number.
    #[error("job {job} has no copy {copy_no} that restores may read")]
    NoCopy {
        /// Job id.
        job: i64,
        /// The copy asked for.
        copy_no: u32,
    },
    /// The copy a move wrote did not read back whole: the job stays where it was.
    #[error(
        "job {job} stays where it was: its new copy {copy_no} read back with {bad} bad blocks and {missing} files missing or damaged"
    )]
    MoveUnsound {
        /// Job id.
        job: i64,
        /// The copy written.
        copy_no: u32,
        /// Bad blocks found.
        bad: u64,
        /// Files missing or damaged.
        missing: u64,
    },
    /// A cartridge a repack or migration was asked for that the catalog does
    /// not know.
    #[error("the catalog knows no cartridge {}", escape_controls(barcode))]
    UnknownCartridge {
        /// Its barcode.
        barcode: String,
    },
    /// `repack --pool` of a pool with no reclaim share.
    #[error("pool {} has no reclaim share: set one with `tapeloom pool create {} --reclaim 60%`, or name the cartridges to repack", escape_controls(pool), escape_controls(pool))]
    NoReclaim {
        /// The pool.
        pool: String,
    },
    /// A cartridge to be labelled anew after its jobs moved still holds one.
    #[error(
        "cartridge {} still holds job {job}: it is not labelled anew",
        escape_controls(barcode)
    )]
    StillHolds {
        /// Its barcode.
        barcode: String,
        /// A job on it.
        job: i64,
    },
}

/// What is wrong with an object of a segment read as it lies on tape.
#[derive(Debug, Error)]
pub enum SegmentProblem {
    /// The block does not open: its CRC, magic or header is bad.
    #[error("the block is damaged: {0}")]
    Damaged(tapeloom_format::FormatError),
    /// The block belongs to another job.
    #[error("the block is another job's (tag {found:016x}, not {want:016x})")]
    OtherJob {
        /// The tag it carries.
        found: u64,
        /// The job's.
        want: u64,
    },
    /// The block says it was written elsewhere (another volume or LBN).
    #[error("the block says it was written at block {lbn} of another place")]
    Misplaced {
        /// The LBN its header gives.
        lbn: u64,
    },
    /// The tape ends before the segment's recorded end.
    #[error("the tape ends before the segment's recorded end at block {end}")]
    EndsEarly {
        /// The recorded last block.
        end: u64,
    },
    /// The catalog records no end for the segment (its job never closed it).
    #[error("the catalog records no end for the job's segment there")]
    NoEnd,
}

/// Cartridges and drives the volume policy refuses or cannot find.
#[derive(Debug, Error)]
pub enum MediaError {
    /// After a flush the drive stands elsewhere than the blocks it accepted put it:
    /// it lost writes it reported done.
    #[error("cartridge {barcode}: after a flush the drive stands at block {found}, but {expected} blocks were written: the drive lost writes it said were done")]
    PositionMismatch {
        /// Barcode.
        barcode: String,
        /// Where the blocks written put it.
        expected: u64,
        /// Where the drive says it is.
        found: u64,
    },
    /// A drive reported a TapeAlert flag of its own hardware: it writes no more.
    #[error(
        "drive {drive}: TapeAlert {flags}: the drive writes no more in this job; have it serviced"
    )]
    DriveAlert {
        /// The library's drive.
        drive: usize,
        /// The flags, as "1Eh Hardware A".
        flags: String,
    },
    /// A cartridge flag on more cartridges than a writer leaves.
    #[error("cartridge {barcode}: TapeAlert {flags}, after {failovers} cartridges left already: the drive is suspect")]
    CartridgeAlert {
        /// Barcode.
        barcode: String,
        /// The flags.
        flags: String,
        /// Cartridges left before it.
        failovers: u32,
    },
    /// A drive asked to be cleaned and could not be.
    #[error("drive {drive} asks to be cleaned (TapeAlert {flags}) and could not be: {source}")]
    CleaningFailed {
        /// The library's drive.
        drive: usize,
        /// The flags.
        flags: String,
        /// Why.
        #[source]
        source: Box<tapeloom_device::DeviceError>,
    },
    /// A deferred write error lost more than the writer kept to write again.
    #[error("cartridge {barcode}: deferred write error: the drive lost {lost} objects it had taken, and {kept} are kept to write again (or too many cartridges failed already)")]
    DeferredLost {
        /// Barcode.
        barcode: String,
        /// Objects lost.
        lost: u64,
        /// Objects kept.
        kept: u64,
    },
    /// A drive still asks to be cleaned after it was.
    #[error("drive {drive} still asks to be cleaned (TapeAlert {flags}) after {cleanings} cleanings in this job: have it serviced")]
    StillNeedsCleaning {
        /// The library's drive.
        drive: usize,
        /// The flags.
        flags: String,
        /// Cleanings done.
        cleanings: u32,
    },
    /// The cartridge is in a mail slot: outside the library (exported).
    #[error("cartridge {barcode} is in mail slot {slot}, outside the library: run `tapeloom library import {barcode}` to read it")]
    InMailSlot {
        /// Barcode.
        barcode: String,
        /// The mail slot's address.
        slot: usize,
    },
    /// The cartridge is not in the library.
    #[error("cartridge {barcode} is not in the library; if it went offsite, put it into a mail slot and run `tapeloom library import {barcode}`")]
    NotInLibrary {
        /// Barcode.
        barcode: String,
    },
    /// Data tapeloom did not write: never overwritten without force.
    #[error("cartridge {barcode} holds data tapeloom did not write ({why}); refusing to label it")]
    Foreign {
        /// Barcode.
        barcode: String,
        /// What was found.
        why: String,
    },
    /// A volume with jobs in the catalog: never overwritten without force.
    #[error("cartridge {barcode} holds {jobs} jobs of the catalog; refusing to label it")]
    HoldsJobs {
        /// Barcode.
        barcode: String,
        /// Jobs on it.
        jobs: u64,
    },
    /// A tapeloom label the catalog does not know: `catalog rebuild` reads it.
    #[error("cartridge {barcode} carries a tapeloom label ({pool}) the catalog does not know; refusing to label it")]
    UnknownLabel {
        /// Barcode.
        barcode: String,
        /// The label's pool.
        pool: String,
    },
    /// A label that does not match what the catalog recorded for the cartridge.
    #[error("cartridge {barcode} carries a label that does not match the catalog; refusing to write to it")]
    LabelMismatch {
        /// Barcode.
        barcode: String,
    },
    /// A cartridge took no new label.
    #[error("cartridge {}: {why}", escape_controls(barcode))]
    LabelUnwritable {
        /// Its barcode.
        barcode: String,
        /// What the drive said.
        why: String,
    },
    /// A segment read as it lies on tape (a copy's source, a read-back) is not
    /// what the catalog says of it.
    #[error("cartridge {barcode}, block {lbn}: {problem}")]
    SegmentObject {
        /// Barcode.
        barcode: String,
        /// Where.
        lbn: u64,
        /// What is wrong.
        problem: SegmentProblem,
    },
    /// No copy of a job could be read: each cartridge tried, and why it could
    /// not be mounted.
    #[error("no copy of the job could be read: {}", tried_list(tried))]
    NoCopyReadable {
        /// Each cartridge tried, with why it was passed over.
        tried: Vec<(String, String)>,
    },
    /// The label found is not the volume's the job expects.
    #[error("cartridge {barcode} does not carry the label of volume {seq} of this job")]
    WrongVolume {
        /// Barcode.
        barcode: String,
        /// Volume sequence number expected.
        seq: u32,
    },
    /// A cartridge to trim holds, after the failed jobs' data, blocks of another job
    /// (or of no job this catalog knows): nothing is cut.
    #[error("cartridge {barcode}: block {block} after the failed jobs' data is not theirs; nothing was cut")]
    TrimOther {
        /// Barcode.
        barcode: String,
        /// The block.
        block: u64,
    },
    /// Rebuild found a label whose uuid the catalog has under another cartridge.
    #[error("cartridge {barcode} carries a label the catalog does not know for it; not rebuilding from it")]
    RebuildMismatch {
        /// Barcode.
        barcode: String,
    },
    /// A cartridge was about to be labelled anew (recycled) while the catalog does
    /// not hold it expired and empty: its jobs are kept, it is not overwritten.
    #[error("cartridge {barcode} has not expired; refusing to label it anew")]
    NotExpired {
        /// Barcode.
        barcode: String,
    },
    /// Write protected.
    #[error("cartridge {barcode} is write protected")]
    WriteProtected {
        /// Barcode.
        barcode: String,
    },
    /// No cartridge left to write to.
    #[error("no writable cartridge left in the library for pool {pool} (all are full, foreign, write protected or in use by this job)")]
    NoneWritable {
        /// Pool.
        pool: String,
    },
    /// A job names a pool the catalog does not know.
    #[error("no pool {pool} in the catalog")]
    UnknownPool {
        /// The pool named.
        pool: String,
    },
    /// No blank cartridge for a benchmark.
    #[error("no blank cartridge in the library to run the benchmark on")]
    NoBlank,
    /// A drive index past the library's drives.
    #[error("the library has no drive {drive} (it has {have})")]
    NoSuchDrive {
        /// The index asked for.
        drive: usize,
        /// Drives in the library.
        have: usize,
    },
    /// The lock on the library was poisoned by a writer that panicked.
    #[error("another drive's writer failed while using the library")]
    LibraryPoisoned,
}

/// The home folder's state.
#[derive(Debug, Error)]
pub enum HomeError {
    /// Another process holds the home.
    #[error("lock {}: {source}", path.display())]
    Locked {
        /// The lock file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The home is on a read-only file system and the command writes to it.
    #[error("home {} is on a read-only file system: this command writes to it (jobs, ls, restore, verify and library status read such a home)", dir.display())]
    ReadOnly {
        /// The home.
        dir: PathBuf,
    },
    /// The library holds jobs: replacing it would strand them.
    #[error("the library holds jobs (volume {barcode} has data); refusing to {what}")]
    HoldsJobs {
        /// A volume with data.
        barcode: String,
        /// What was refused.
        what: &'static str,
    },
    /// `TAPELOOM_FAULTS` holds a fault spec that does not parse (a build with the
    /// feature `test-hooks` only).
    #[cfg(feature = "test-hooks")]
    #[error("TAPELOOM_FAULTS: {source}")]
    FaultSpec {
        /// What is wrong with it.
        #[source]
        source: tapeloom_device::faults::FaultSpecError,
    },
    /// The home's configuration file cannot be read or does not parse.
    #[error("{}: {why}", path.display())]
    BadConfig {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// A catalog URL given on the command line holds a password.
    #[error("the catalog URL given with --catalog holds a password; give it in PGPASSWORD, ~/.pgpass or the home's home.toml, not on the command line")]
    PasswordOnCommandLine,
    /// `TAPELOOM_NOW` holds a time that is not RFC 3339.
    #[error("TAPELOOM_NOW: {value:?} is not an RFC 3339 time (for example 2026-01-05T03:00:00Z)")]
    BadNow {
        /// The variable's value.
        value: String,
    },
}

/// A disk stage that cannot be used, or a chunk file on it that cannot be read.
#[derive(Debug, Error)]
pub enum StageError {
    /// The home has no stage.
    #[error("no disk stage (tapeloom stage add DIR --size SIZE adds one)")]
    NoStages,
    /// More space asked for than the largest stage holds: waiting would never end.
    #[error("{bytes} bytes do not fit on any stage (the largest holds {largest})")]
    TooLarge {
        /// Bytes asked for.
        bytes: u64,
        /// Size limit of the largest stage.
        largest: u64,
    },
    /// No stage at this path.
    #[error("no stage at {}", path.display())]
    NoSuchStage {
        /// The path given, resolved.
        path: PathBuf,
    },
    /// A stage of no size.
    #[error("a stage needs a size above 0")]
    ZeroSize,
    /// The stage's folder exists and is not a folder.
    #[error("{} exists and is not a directory", path.display())]
    NotADirectory {
        /// The path.
        path: PathBuf,
    },
    /// A chunk file's header is damaged or from another tapeloom.
    #[error("{}: {problem}", path.display())]
    ChunkHeader {
        /// The chunk file.
        path: PathBuf,
        /// What is wrong.
        problem: ChunkHeaderProblem,
    },
    /// A chunk file holds another job's or stream's blocks than the catalog says.
    #[error("{} holds job {found_tag:016x} stream {found_stream}, not job {job_tag:016x} stream {stream}", path.display())]
    WrongChunk {
        /// The chunk file.
        path: PathBuf,
        /// The job tag expected.
        job_tag: u64,
        /// The stream expected.
        stream: u16,
        /// The job tag in the file.
        found_tag: u64,
        /// The stream in the file.
        found_stream: u16,
    },
    /// A chunk file ends before the blocks its header counts.
    #[error("{} is cut short: {blocks} of its {expected} blocks of stream {stream} are whole", path.display())]
    TornTail {
        /// The chunk file.
        path: PathBuf,
        /// The stream.
        stream: u16,
        /// Blocks read whole.
        blocks: u64,
        /// Blocks its header counts.
        expected: u64,
    },
    /// A block length that no block has: the chunk cannot be read past it.
    #[error("{}: a block length of {len} at byte {at}", path.display())]
    BlockLength {
        /// The chunk file.
        path: PathBuf,
        /// The length read.
        len: u32,
        /// Where in the file.
        at: u64,
    },
    /// A block whose checksum or header does not hold: the stream's bytes from `from`
    /// up to `to` are lost from this chunk.
    #[error("{}: block {seq} of stream {stream} is damaged (stream bytes {from} to {to}): {source}", path.display())]
    DamagedBlock {
        /// The chunk file.
        path: PathBuf,
        /// The stream.
        stream: u16,
        /// The block's seq within the stream.
        seq: u64,
        /// Stream offset of the first byte lost.
        from: u64,
        /// Stream offset after the last byte lost.
        to: u64,
        /// Why the block was refused.
        #[source]
        source: tapeloom_format::FormatError,
    },
    /// An intact block where another was due: of another job, stream or place.
    #[error("{}: block {seq} of stream {stream} is out of place ({what})", path.display())]
    MisplacedBlock {
        /// The chunk file, or the one being written.
        path: PathBuf,
        /// The stream.
        stream: u16,
        /// The block's seq expected.
        seq: u64,
        /// What does not match.
        what: &'static str,
    },
    /// A stream's blocks or records out of the order FORMAT.md 5 gives them: which
    /// entries the stream holds, and where, cannot be told past this block.
    #[error("block {seq} of stream {stream}: {what}")]
    StreamOrder {
        /// The stream.
        stream: u16,
        /// The block's seq within the stream.
        seq: u64,
        /// What is out of order.
        what: &'static str,
    },
}

/// What is wrong with a chunk file's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ChunkHeaderProblem {
    /// The file is shorter than a header.
    #[error("shorter than a chunk header")]
    Truncated,
    /// The magic is not `TLCH`.
    #[error("not a tapeloom chunk file")]
    BadMagic,
    /// A layout version this tapeloom does not read.
    #[error("chunk layout version {0} is not known")]
    Version(u16),
    /// The header's checksum does not match.
    #[error("chunk header checksum {stored:08x} != {computed:08x}")]
    BadCrc {
        /// The checksum stored.
        stored: u32,
        /// The checksum of the bytes.
        computed: u32,
    },
    /// A field that must be zero is not, the header length is wrong, the end offset
    /// is before the first, or the block seqs would overflow.
    #[error("chunk header fields out of range")]
    Fields,
}

/// Result of engine operations.
pub type Result<T> = std::result::Result<T, Error>;

/// Wraps an I/O result with what was being done.
pub(crate) fn io<T>(r: std::io::Result<T>, what: impl FnOnce() -> String) -> Result<T> {
    r.map_err(|source| Error::Io {
        what: what(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn causes_are_kept_as_sources() {
        let e = io::<()>(
            Err(std::io::Error::from_raw_os_error(libc_enoent())),
            || "read /x".into(),
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("read /x: "), "{e}");
        let cause = e.source().expect("the io error is the source");
        assert!(cause.downcast_ref::<std::io::Error>().is_some());

        let d = Error::from(tapeloom_device::DeviceError::NoMedium);
        assert!(matches!(
            d,
            Error::Device(tapeloom_device::DeviceError::NoMedium)
        ));
    }

    fn libc_enoent() -> i32 {
        nix::errno::Errno::ENOENT as i32
    }
}

/// Why the blocks of a stream packed elsewhere (a client of the server) are refused:
/// the job they were sent for fails.
#[derive(Debug, Error)]
pub enum ReceiveError {
    /// A block that does not open: too short, bad magic, version or CRC.
    #[error("stream {stream}, block {seq}: {source}")]
    Damaged {
        /// The stream.
        stream: u16,
        /// The block's place in the stream.
        seq: u64,
        /// What the format found.
        #[source]
        source: tapeloom_format::FormatError,
    },
    /// A sound block that is not the one due: another job, another stream, out of
    /// sequence, longer than the job's block size, sealed for a volume, encrypted.
    #[error("stream {stream}, block {seq}: {what}")]
    Misplaced {
        /// The stream.
        stream: u16,
        /// The block's place in the stream.
        seq: u64,
        /// What is wrong with it.
        what: &'static str,
    },
    /// The stream's blocks stopped before its end record: the sender went away or
    /// ended the stream early.
    #[error("stream {stream}: {why}")]
    Cut {
        /// The stream.
        stream: u16,
        /// Why it stopped.
        why: String,
    },
    /// The job's description is not one a job can be run from.
    #[error("the job's description: {0}")]
    BadPlan(&'static str),
    /// The paths deleted since the job's base did not come, or are not paths.
    #[error("the paths deleted since the base: {0}")]
    Deletions(String),
}

/// Each cartridge tried and why it was passed over, on one line; a reason that
/// names its cartridge already is given as it is.
fn tried_list(tried: &[(String, String)]) -> String {
    let one = |(b, why): &(String, String)| match why.contains(b.as_str()) {
        true => why.clone(),
        false => format!("cartridge {b}: {why}"),
    };
    tried.iter().map(one).collect::<Vec<_>>().join("; ")
}
