//! What a backup will do, decided before anything is read: its options, its streams
//! (names, sources, where each lands in the job's namespace) and its drives.

use crate::error::{OptionsError, Result};
use std::path::PathBuf;
use tapeloom_tree::pack::plan::PackOptions;
pub(crate) use tapeloom_tree::pack::plan::{Pending, Plan};
use tapeloom_tree::pack::{Compress, Only};

/// How to run a backup.
#[derive(Debug, Clone)]
pub struct BackupOptions {
    /// Job name; made from the source names when empty.
    pub name: String,
    /// Block size in bytes.
    pub block_size: usize,
    /// Blocks in the pool between the packers and the writer.
    pub buffers: usize,
    /// Reader threads per stream fetching metadata and small files.
    pub readers: usize,
    /// Drives to write with.
    pub drives: DriveSet,
    /// Streams interleaved at once; `None` chooses as the job goes.
    pub concurrency: Option<usize>,
    /// Most consecutive blocks of one stream before the writer turns to another.
    pub extent_blocks: usize,
    /// How the writer turns from stream to stream.
    pub interleave: Interleave,
    /// Fill of the pool (0..1) the writer waits for before it starts, and restarts
    /// after running dry.
    pub high_water: f64,
    /// Most bytes per second each stream reads.
    pub limit_rate: Option<f64>,
    /// Stream names given by the user, by source index.
    pub stream_names: Vec<Option<String>>,
    /// Bytes between filemarks inside a job (written with the immediate bit); 0 for
    /// none.
    pub segment_bytes: u64,
    /// Software compression.
    pub compress: Compress,
    /// The drive's own compression.
    pub drive_compression: bool,
    /// Straight to the drives, or through the home's disk stages.
    pub via: Via,
    /// Bytes per chunk file when spooling to a stage.
    pub chunk_bytes: u64,
    /// How long a stream's chunks stay on the stage once on tape, so a restore can
    /// read them from there; `None` deletes them as soon as they are on tape.
    pub keep_staged: Option<std::time::Duration>,
    /// When a staged job's drive starts and how it orders the streams' runs.
    pub despool: DespoolOrder,
    /// Encrypt the job with a data key wrapped by this master key.
    pub encrypt: Option<tapeloom_format::MasterKey>,
    /// The media pool the job writes to; `None` for the default pool. A pool the
    /// catalog does not know is refused before anything is written.
    pub pool: Option<String>,
    /// The backup set; `None` for the set named after the job.
    pub set: Option<String>,
    /// The level asked for (a set without a full gets a full).
    pub level: tapeloom_format::Level,
    /// The job's tag, chosen beforehand (a server gives it to the client that packs
    /// the blocks before the job reaches a drive); `None`: a random one.
    pub job_tag: Option<u64>,
    /// The client (a server token's name) the job is run for, written in its
    /// `JobStart` and recorded in the catalog; empty for a job not run for a
    /// client.
    pub client: String,
    /// The stages as a server's running jobs share them; `None`: the job opens
    /// the home's stages itself (it is the home's only job).
    pub stages: Option<crate::stage::StageSet>,
    /// Only these objects of the sources are stored (the folders above them
    /// too); `None`: all. A migration to tape stores so the files it chose.
    pub only: Option<std::sync::Arc<Only>>,
}

/// How the drives write a job that goes through the stages.
///
/// With equal sources that end together, a drive cannot both lay each stream down in
/// one run and end soon after the sources: a stream's run cannot end before its
/// source does, and the runs follow one another, so the last of `n` equal runs ends
/// `(n - 1) / n` of the despool time after the sources. Each order gives up one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DespoolOrder {
    /// Each stream in one run where the stages can hold it, whose source ends first
    /// first: the drive starts when it can write the streams back to back, each
    /// whole, without running dry (the rule `whole_runs_fit` of the staged backup).
    /// A restore of one stream reads one run; the job ends up to a despool time
    /// after its sources.
    #[default]
    Whole,
    /// The drive starts as soon as it will not run dry before the sources end (see
    /// `start_now` of the staged backup) and writes whatever is staged: the job
    /// ends soon after its sources, and streams land in several runs.
    Early,
}

/// How a drive's writer turns from one of the streams it interleaves to the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Interleave {
    /// To the next stream with a block waiting: a slow stream never holds the
    /// drive up, and where each stream's extents land depends on how fast each
    /// one is read.
    #[default]
    Ready,
    /// To each stream in the order the drive took them, a whole extent of each
    /// or the rest of the stream, waiting for its blocks; with several drives,
    /// stream `k` of the order given goes to drive `k mod drives` (instead of to
    /// the drive that runs dry first). The same sources and options lay the job
    /// on tape the same way on every run, however fast each stream is read. Needs
    /// a fixed concurrency and a direct backup, which leave nothing else to
    /// timing.
    InTurn,
}

/// Whether a backup goes through the disk stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// Streams are interleaved onto the drives as they are read.
    Direct,
    /// Streams spool to the stages at their sources' pace and are despooled to the
    /// drives, each in runs as long as the stage holds.
    Stage,
    /// The stage when the home has one and the sources are known to be slower
    /// together than the drive's lowest speed step (a rate limit says so); else
    /// direct.
    Auto,
}

/// Default filemark spacing: 16 GiB, about 40 seconds of an LTO-9 at full speed.
/// Filemarks written with the immediate bit do not flush the drive, so they cost
/// nothing in speed; restores position by block and never need them. They are there
/// for tools that space by filemark (`mt fsf`), as NERSC's tapemarks every gigabyte
/// were; few and far between, because a drive that gets one without the immediate bit
/// (an older driver) would stop.
pub const DEFAULT_SEGMENT_BYTES: u64 = 16 << 30;

/// Default extent: 64 MiB of one stream. At LTO-9 speed that is a sixth of a second
/// of tape; a restore of one stream skips the others in steps no smaller than this,
/// and a 20 TB job needs about 300,000 extent rows.
pub const DEFAULT_EXTENT_BYTES: u64 = 64 << 20;

/// Default blocks in the pool between a drive's packers and its writer
/// (`BackupOptions::buffers`).
pub const DEFAULT_BUFFERS: usize = 64;

/// Default fill of the pool a writer waits for before it starts, and after it ran
/// dry (`BackupOptions::high_water`).
pub const DEFAULT_HIGH_WATER: f64 = 0.5;

impl Default for BackupOptions {
    fn default() -> Self {
        BackupOptions {
            name: String::new(),
            block_size: tapeloom_format::DEFAULT_BLOCK_SIZE,
            buffers: DEFAULT_BUFFERS,
            readers: 4,
            drives: DriveSet::Count(1),
            concurrency: None,
            extent_blocks: (DEFAULT_EXTENT_BYTES / tapeloom_format::DEFAULT_BLOCK_SIZE as u64)
                as usize,
            interleave: Interleave::Ready,
            high_water: DEFAULT_HIGH_WATER,
            limit_rate: None,
            stream_names: Vec::new(),
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            compress: Compress::Auto,
            drive_compression: true,
            via: Via::Direct,
            chunk_bytes: crate::stage::DEFAULT_CHUNK_SIZE,
            keep_staged: None,
            despool: DespoolOrder::Whole,
            stages: None,
            only: None,
            encrypt: None,
            pool: None,
            set: None,
            level: tapeloom_format::Level::Full,
            job_tag: None,
            client: String::new(),
        }
    }
}

/// What a job that goes on after its process died had already done: its files
/// (entries), data bytes, stored bytes and volumes, counted into its end.
#[derive(Debug, Clone, Default)]
pub(crate) struct Prior {
    pub files: u64,
    pub bytes: u64,
    pub stored: u64,
    pub volumes: Vec<(u32, tapeloom_catalog::Volume)>,
    /// Source objects it could not back up: path and reason.
    pub errors: Vec<(String, String)>,
}

/// The streams of a job of `sources` with `opts`: the checks of the tree crate's
/// `Plan::new`, and [`BackupOptions::check_in_turn`].
pub(crate) fn plan(sources: &[PathBuf], opts: &BackupOptions) -> Result<Plan> {
    opts.check_in_turn()?;
    Ok(Plan::new(sources, &opts.pack())?)
}

impl BackupOptions {
    /// What packing the job's sources takes of its options.
    pub fn pack(&self) -> PackOptions {
        PackOptions {
            name: self.name.clone(),
            stream_names: self.stream_names.clone(),
            readers: self.readers,
            limit_rate: self.limit_rate,
        }
    }

    /// Refuses streams woven in turn with options that would leave their order
    /// to timing.
    pub fn check_in_turn(&self) -> Result<()> {
        if self.interleave != Interleave::InTurn {
            return Ok(());
        }
        let needs = if self.concurrency.is_none() {
            Some("a fixed concurrency")
        } else if self.via != Via::Direct {
            Some("a direct backup, not one through the stages")
        } else {
            None
        };
        match needs {
            Some(needs) => Err(OptionsError::InTurn { needs }.into()),
            None => Ok(()),
        }
    }
}

/// Which drives a job uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriveSet {
    /// This many drives: one lets the volume policy pick it; more take the first N.
    Count(usize),
    /// Every drive of the library.
    All,
    /// These drives.
    List(Vec<usize>),
}

impl std::str::FromStr for DriveSet {
    type Err = OptionsError;

    /// Parses `N`, `all` or a comma-separated list of drive indexes (`0,2`).
    fn from_str(s: &str) -> std::result::Result<Self, OptionsError> {
        let bad = || OptionsError::DriveSet {
            given: s.to_string(),
        };
        if s == "all" {
            return Ok(DriveSet::All);
        }
        if s.contains(',') {
            let v: Vec<usize> = s
                .split(',')
                .map(|x| x.trim().parse().map_err(|_| bad()))
                .collect::<std::result::Result<_, _>>()?;
            return Ok(DriveSet::List(v));
        }
        match s.parse::<usize>() {
            Ok(n) if n > 0 => Ok(DriveSet::Count(n)),
            _ => Err(bad()),
        }
    }
}

/// The drive of each writer: `None` lets the volume policy choose.
pub(crate) fn resolve_drives(
    set: &DriveSet,
    have: usize,
) -> std::result::Result<Vec<Option<usize>>, OptionsError> {
    let v: Vec<Option<usize>> = match set {
        DriveSet::Count(1) => vec![None],
        DriveSet::Count(n) if *n <= have => (0..*n).map(Some).collect(),
        DriveSet::Count(n) => return Err(OptionsError::TooManyDrives { asked: *n, have }),
        DriveSet::All => (0..have).map(Some).collect(),
        DriveSet::List(l) => {
            let mut seen = Vec::new();
            for d in l {
                if *d >= have {
                    return Err(OptionsError::NoSuchDrive { drive: *d, have });
                }
                if seen.contains(d) {
                    return Err(OptionsError::DriveTwice { drive: *d });
                }
                seen.push(*d);
            }
            seen.into_iter().map(Some).collect()
        }
    };
    if v.is_empty() {
        return Err(OptionsError::NoDrive);
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drive_sets_parse_and_resolve() {
        assert_eq!("all".parse::<DriveSet>().unwrap(), DriveSet::All);
        assert_eq!("2".parse::<DriveSet>().unwrap(), DriveSet::Count(2));
        assert_eq!(
            "0, 2".parse::<DriveSet>().unwrap(),
            DriveSet::List(vec![0, 2])
        );
        assert!(matches!(
            "0".parse::<DriveSet>(),
            Err(OptionsError::DriveSet { .. })
        ));
        assert_eq!(resolve_drives(&DriveSet::Count(1), 4).unwrap(), vec![None]);
        assert_eq!(
            resolve_drives(&DriveSet::All, 2).unwrap(),
            vec![Some(0), Some(1)]
        );
        assert!(matches!(
            resolve_drives(&DriveSet::Count(3), 2),
            Err(OptionsError::TooManyDrives { asked: 3, have: 2 })
        ));
        assert!(matches!(
            resolve_drives(&DriveSet::List(vec![1, 1]), 2),
            Err(OptionsError::DriveTwice { drive: 1 })
        ));
        assert!(matches!(
            resolve_drives(&DriveSet::List(vec![5]), 2),
            Err(OptionsError::NoSuchDrive { drive: 5, have: 2 })
        ));
        assert!(matches!(
            resolve_drives(&DriveSet::List(vec![]), 2),
            Err(OptionsError::NoDrive)
        ));
    }

    #[test]
    fn streams_woven_in_turn_leave_nothing_to_timing() {
        let t = tempfile::tempdir().unwrap();
        let a = t.path().join("a");
        std::fs::create_dir(&a).unwrap();
        let in_turn = |concurrency, drives, via| BackupOptions {
            interleave: Interleave::InTurn,
            concurrency,
            drives,
            via,
            ..Default::default()
        };
        let needs = |opts: BackupOptions| match plan(std::slice::from_ref(&a), &opts) {
            Err(crate::Error::Options(OptionsError::InTurn { needs })) => Some(needs),
            Err(e) => panic!("{e}"),
            Ok(_) => None,
        };
        let one = DriveSet::Count(1);
        assert_eq!(needs(in_turn(Some(3), one.clone(), Via::Direct)), None);
        let two = DriveSet::List(vec![0, 2]);
        assert_eq!(needs(in_turn(Some(1), two, Via::Direct)), None);
        assert_eq!(needs(in_turn(Some(2), DriveSet::All, Via::Direct)), None);
        assert_eq!(
            needs(in_turn(None, one.clone(), Via::Direct)),
            Some("a fixed concurrency")
        );
        assert_eq!(
            needs(in_turn(Some(2), one, Via::Auto)),
            Some("a direct backup, not one through the stages")
        );
    }

    #[test]
    fn plans_check_rates_and_names() {
        let t = tempfile::tempdir().unwrap();
        let a = t.path().join("a");
        std::fs::create_dir(&a).unwrap();
        let opts = BackupOptions {
            limit_rate: Some(0.0),
            ..Default::default()
        };
        assert!(matches!(
            plan(std::slice::from_ref(&a), &opts),
            Err(crate::Error::Options(OptionsError::RateLimit { .. }))
        ));
        assert!(matches!(
            plan(&[], &BackupOptions::default()),
            Err(crate::Error::Options(OptionsError::NoSources))
        ));
        let twice = BackupOptions {
            stream_names: vec![Some("x".into()), Some("x".into())],
            ..Default::default()
        };
        assert!(matches!(
            plan(&[a.clone(), a.clone()], &twice),
            Err(crate::Error::Options(OptionsError::DuplicateStream { .. }))
        ));
        let one = plan(std::slice::from_ref(&a), &BackupOptions::default()).unwrap();
        assert_eq!(one.roots, vec![b".".to_vec()]);
        assert_eq!(one.job_name, "a");
        let two = plan(&[a.clone(), a], &BackupOptions::default()).unwrap();
        assert_eq!(two.roots, vec![b"a".to_vec(), b"a-2".to_vec()]);
    }
}
