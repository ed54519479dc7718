//! A restore's placing side: its options and report, the placer and restorer that
//! every restore ends its entries in, and the restores fed with blocks read on
//! another machine ([`BlockRestore`], [`SetBlockRestore`]).

pub(crate) mod handed;
pub mod overwrite;
pub mod place;
pub mod restorer;
pub(crate) mod set_handed;
pub mod writers;

pub use handed::{open_handed, opened_payload, BlockRestore};
pub use overwrite::{Kept, Overwrite};
pub use set_handed::{SetBlockRestore, SetJob, SetSelection, NO_DATA};
use std::path::PathBuf;

/// How to restore.
#[derive(Debug, Clone, Default)]
pub struct RestoreOptions {
    /// Where to put the restored tree.
    pub to: PathBuf,
    /// Paths (files or directories) of the job to restore; all when empty.
    pub paths: Vec<Vec<u8>>,
    /// Drive to read with, when the user chose one (then it is the only one).
    pub drive: Option<usize>,
    /// Most drives to read with at once (the first ones of the library); all when
    /// `None`. No more are used than the job has chains.
    pub drives: Option<usize>,
    /// Restore only this stream (by name).
    pub stream: Option<String>,
    /// How to pass over data that is not wanted between two wanted runs.
    pub skip_by: SkipBy,
    /// What to do with an object already at a restored path.
    pub overwrite: Overwrite,
    /// Read only the blocks on these cartridges (by barcode), and nothing from a
    /// disk stage; all when empty. A server of a site reads so its part of a job
    /// whose cartridges sit in two libraries: handed on in the job's volume order,
    /// the parts make the same blocks as one reading.
    pub volumes: Vec<String>,
    /// In what order each cartridge's wanted runs are read. Blocks handed on to be
    /// placed elsewhere are always read in block order.
    pub order: ReadOrder,
    /// The operation the drives' per-second samples, marks and health are kept
    /// under with the job (`report --op`); `restore` when none. A later reading
    /// of the same operation replaces them.
    pub samples_as: Option<String>,
    /// Read this copy of the job only (1: its own cartridges); else the first
    /// copy whose cartridges are in the library and sound, and a bad block from
    /// another copy.
    pub copy: Option<u32>,
}

impl RestoreOptions {
    /// The operation samples are kept under.
    pub fn op(&self) -> &str {
        self.samples_as.as_deref().unwrap_or("restore")
    }
}

/// How a restore passes over unwanted blocks between two wanted runs of one volume.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SkipBy {
    /// Whichever the drive's model says is faster; without a model, read through
    /// gaps of a few blocks and locate over longer ones.
    #[default]
    Auto,
    /// Always locate.
    Locate,
    /// Always read through.
    Read,
}

/// In what order a restore reads the runs of each cartridge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ReadOrder {
    /// The order the drive's timing model says is fastest, else the drive's own
    /// recommended order, else block order.
    #[default]
    Planned,
    /// Block order, as written.
    Block,
}

/// What a restore did. `D` is what each drive read: the engine's `DriveRead`
/// where the restore read its own drives, `()` where it placed blocks another
/// machine read (that machine's report names its drives).
#[derive(Debug, Clone, Default)]
pub struct RestoreReport<D> {
    /// Objects restored.
    pub files: u64,
    /// File data bytes restored.
    pub bytes: u64,
    /// Blocks read from tape.
    pub blocks_read: u64,
    /// Bytes read from tape.
    pub bytes_read_from_tape: u64,
    /// Locates done.
    pub locates: u64,
    /// Cartridges mounted.
    pub mounts: u64,
    /// Cartridges the changer moved into a drive (a cartridge already in its drive
    /// is mounted without one).
    pub loads: u64,
    /// Gaps between wanted runs passed by reading through.
    pub read_through: u64,
    /// Cartridges whose runs were read in another order than the block order,
    /// because the drive's model said that order was faster.
    pub reordered: u64,
    /// Modeled seconds the drives' reading plans predicted (the longest of the
    /// drives), when they planned with a timing model: beside `modeled_seconds`,
    /// how well the plan knew the tape.
    pub planned_seconds: Option<f64>,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Modeled seconds of the restore, when the drives have a timing model: the
    /// longest of the drives' times, since they read at once.
    pub modeled_seconds: Option<f64>,
    /// Modeled seconds until the first wanted block was under the head, on the
    /// drive that got there first: the rest of `modeled_seconds` is reading (and
    /// passing over what lies between the wanted runs).
    pub first_block_seconds: Option<f64>,
    /// Data bytes restored per stream, by name.
    pub streams: Vec<(String, u64)>,
    /// Where the restore read the streams it needed: all from the stages, all from
    /// tape, or some from each.
    pub source: Source,
    /// The copy of the job it read from tape (1: its own cartridges; 0: none).
    pub copy_no: u32,
    /// Bad blocks read from another copy instead.
    pub from_other_copy: u64,
    /// Cartridges passed over because they could not be mounted (blank,
    /// carrying another label, failing to load or at their label): barcode and
    /// why. The next copy of the job was read in their place.
    pub passed_over: Vec<(String, String)>,
    /// Where it read each stream it needed, by name, in stream order.
    pub stream_sources: Vec<(String, Source)>,
    /// Blocks read from chunk files on the stages.
    pub blocks_read_from_stage: u64,
    /// Bytes of chunk files read from the stages.
    pub bytes_read_from_stage: u64,
    /// The model's lower bound for the same reads on the same drives: on each drive,
    /// every wanted block read at full speed, every gap passed the cheaper way (locate
    /// or read through), plus loads and unloads; the longest of the drives. With no
    /// overheads beyond the tape's physics, this is the best any restore of these
    /// blocks can do with this sharing of chains.
    pub bound_seconds: Option<f64>,
    /// The chains of cartridges the job's drives wrote (1 for a job of one drive).
    pub chains: usize,
    /// What each drive read, in drive order.
    pub drives: Vec<D>,
    /// Objects that could not be restored: path and reason.
    pub errors: Vec<(String, String)>,
    /// Objects already at their path that differ from the backed-up ones and were
    /// kept (`--overwrite`): path and why. Not errors.
    pub skipped: Vec<(String, Kept)>,
    /// Objects already at their path and identical to the backed-up ones, left as
    /// they were (counted in `files` too).
    pub unchanged: u64,
    /// Files the job holds as metadata alone (their data is in an earlier job of
    /// its set), left out of a one-job restore.
    pub meta_only: u64,
    /// The job restored, or the job a set's tree stands at.
    pub job: i64,
    /// The jobs read from: the job restored, or those a set's tree needs.
    pub jobs: Vec<i64>,
    /// Blocks of the runs a set's restore planned to read (each block once);
    /// blocks passed over by reading through come on top.
    pub blocks_planned: u64,
}

/// Where a restore read a stream, or the streams it restored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Source {
    /// Chunk files on the disk stages.
    Stage,
    /// Tape.
    #[default]
    Tape,
    /// Some streams from the stages, the others from tape.
    StageAndTape,
}

impl Source {
    /// The word for it: `stage`, `tape`, or `stage+tape`.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Stage => "stage",
            Source::Tape => "tape",
            Source::StageAndTape => "stage+tape",
        }
    }
}

impl<D> RestoreReport<D> {
    /// The same report with `drives` for what each drive read.
    pub fn with_drives<E>(self, drives: Vec<E>) -> RestoreReport<E> {
        RestoreReport {
            files: self.files,
            bytes: self.bytes,
            blocks_read: self.blocks_read,
            bytes_read_from_tape: self.bytes_read_from_tape,
            locates: self.locates,
            mounts: self.mounts,
            loads: self.loads,
            read_through: self.read_through,
            reordered: self.reordered,
            planned_seconds: self.planned_seconds,
            seconds: self.seconds,
            modeled_seconds: self.modeled_seconds,
            first_block_seconds: self.first_block_seconds,
            streams: self.streams,
            source: self.source,
            copy_no: self.copy_no,
            from_other_copy: self.from_other_copy,
            passed_over: self.passed_over,
            stream_sources: self.stream_sources,
            blocks_read_from_stage: self.blocks_read_from_stage,
            bytes_read_from_stage: self.bytes_read_from_stage,
            bound_seconds: self.bound_seconds,
            chains: self.chains,
            drives,
            errors: self.errors,
            skipped: self.skipped,
            unchanged: self.unchanged,
            meta_only: self.meta_only,
            job: self.job,
            jobs: self.jobs,
            blocks_planned: self.blocks_planned,
        }
    }
}
