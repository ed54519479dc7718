//! The packing side of a backup whose streams are packed on one machine and
//! written on another: the job's description ([`RemotePlan`]) and [`pack_streams`]
//! (each stream's walker, readers and packer, its blocks sealed as a stage seals
//! them: zero volume, their seq as LBN). The writing side is the engine's
//! `receive_staged`.

use super::mux::{Msg, Outlet, Shared};
use super::plan::{PackOptions, Pending, Plan};
use super::scan::Scan;
use crate::error::{Error, Result};
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::AtomicUsize;
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;
use tapeloom_format::{check_block_size, MAX_STREAMS};

/// A job as the packing side describes it to the writing side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemotePlan {
    /// The job's name.
    pub name: String,
    /// Its streams, ids 1, 2, ... in order.
    pub streams: Vec<RemoteStream>,
}

/// One stream of a [`RemotePlan`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteStream {
    /// Its name, unique in the job.
    pub name: String,
    /// The source path on the packing machine (recorded, never opened).
    pub source: String,
    /// Where its root lies in the job's namespace: `.` or a top-level name.
    pub root: String,
}

impl RemotePlan {
    /// The plan of backing up `sources` (checked here, on the packing machine).
    pub fn of_sources(sources: &[PathBuf], opts: &PackOptions) -> Result<RemotePlan> {
        let plan = Plan::new(sources, opts)?;
        let streams = plan
            .streams()
            .into_iter()
            .zip(&plan.roots)
            .map(|(s, root)| RemoteStream {
                name: s.name,
                source: String::from_utf8_lossy(&s.source).into_owned(),
                root: String::from_utf8_lossy(root).into_owned(),
            })
            .collect();
        Ok(RemotePlan {
            name: plan.job_name,
            streams,
        })
    }

    /// Whether a job can be run from this plan: its names are file names, its
    /// streams' names unique, their roots clean paths.
    pub fn check(&self) -> Result<()> {
        self.checked().map(|_| ())
    }

    /// The plan a job is run from, once its names are found sound.
    pub fn checked(&self) -> Result<Plan> {
        let bad = Error::BadPlan;
        if self.streams.is_empty() || self.streams.len() > MAX_STREAMS {
            return Err(bad("from 1 to 4096 streams (the format's limit)"));
        }
        if self.name.is_empty() || self.name.len() > 255 || self.name.contains(['/', '\0']) {
            return Err(bad("a job name that is not a file name"));
        }
        let mut names = HashSet::new();
        for s in &self.streams {
            let name_ok =
                !s.name.is_empty() && s.name.len() <= 255 && !s.name.contains(['/', '\0']);
            if !name_ok || !names.insert(s.name.as_str()) {
                return Err(bad("stream names must be unique file names"));
            }
            let root_ok =
                s.root == "." || tapeloom_format::check_relative_path(s.root.as_bytes()).is_ok();
            if !root_ok || s.source.contains('\0') {
                return Err(bad("a stream's root or source is not a clean path"));
            }
        }
        Ok(Plan {
            sources: self
                .streams
                .iter()
                .map(|s| PathBuf::from(&s.source))
                .collect(),
            names: self.streams.iter().map(|s| s.name.clone()).collect(),
            roots: self
                .streams
                .iter()
                .map(|s| s.root.clone().into_bytes())
                .collect(),
            job_name: self.name.clone(),
        })
    }
}

/// What a stream packed on this machine sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// A block, sealed.
    Block(Vec<u8>),
    /// A source object that could not be backed up (path, why), as a local job
    /// records it among its errors.
    Error(Vec<u8>, String),
    /// Nothing came for the interval of [`Outgoing::keep_alive`]: the stream's
    /// walker is at work (a long walk of unchanged files) with nothing to send.
    Idle,
}

/// One stream packed on this machine: its sealed blocks in order, and the source
/// objects it could not back up.
pub struct Outgoing {
    /// The stream.
    pub stream: u16,
    rx: Receiver<Msg>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Entries and stored bytes, once the stream has ended.
    pub ended: Option<(u64, u64)>,
    /// After how long without a piece [`Piece::Idle`] comes.
    idle: Option<Duration>,
}

impl Outgoing {
    /// From now on, [`Piece::Idle`] comes whenever nothing came for `every`.
    pub fn keep_alive(&mut self, every: Duration) {
        self.idle = Some(every);
    }

    /// The packer's next message; `Err(true)` when none came for the idle
    /// interval, `Err(false)` once the packer is gone.
    fn recv(&self) -> std::result::Result<Msg, bool> {
        match self.idle {
            Some(every) => self
                .rx
                .recv_timeout(every)
                .map_err(|e| e == RecvTimeoutError::Timeout),
            None => self.rx.recv().map_err(|_| false),
        }
    }
}

impl Iterator for Outgoing {
    type Item = Piece;

    /// The stream's next piece; none once the packer has ended.
    fn next(&mut self) -> Option<Piece> {
        loop {
            match self.recv() {
                Ok(Msg::Block { mut block, .. }) => {
                    block.seal([0; 16], block.seq);
                    return Some(Piece::Block(block.buf));
                }
                Ok(Msg::Error(path, why)) => return Some(Piece::Error(path, why)),
                Ok(Msg::End(entries, stored)) => {
                    self.ended = Some((entries, stored));
                    break;
                }
                Ok(Msg::OnTape { .. }) => {}
                Err(true) => return Some(Piece::Idle),
                Err(false) => break,
            }
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        None
    }
}

/// Starts the walker, readers and packer of every stream of `plan`'s sources for
/// job `tag` with blocks of `block_size`, each keeping `tail` bytes free after its
/// payload (room for the nonce and tag of a receiver that encrypts:
/// [`tapeloom_format::CRYPT_TAIL_LEN`], else 0), each stream held to its
/// generator source's `@RATE`, else to `opts.limit_rate`.
/// Each object is compared with `scan`'s base ([`Scan::from_tree`]; none for a
/// full) as a local job compares it; `scan` counts what was read, and once every
/// stream ended says what was deleted ([`Scan::deletions`]).
pub fn pack_streams(
    sources: &[PathBuf],
    opts: &PackOptions,
    facts: (u64, usize, usize),
    scan: Arc<Scan>,
) -> Result<Vec<Outgoing>> {
    pack_some(sources, opts, facts, scan, None)
}

/// [`pack_streams`], of stream `only` alone when given: the names in its records
/// are those of a job of all `sources`.
pub fn pack_some(
    sources: &[PathBuf],
    opts: &PackOptions,
    (tag, block_size, tail): (u64, usize, usize),
    scan: Arc<Scan>,
    only: Option<u16>,
) -> Result<Vec<Outgoing>> {
    check_block_size(block_size)?;
    let plan = Plan::new(sources, opts)?;
    let setup = || super::packer::PackerSetup {
        tag,
        block_size,
        tail,
        readers: opts.readers,
        skip: Vec::new(),
        counters: None,
        scan: Arc::clone(&scan),
    };
    let mut out = Vec::new();
    for p in Pending::of(&plan)
        .into_iter()
        .filter(|p| only.is_none_or(|o| o == p.id))
    {
        let (tx, rx) = sync_channel::<Msg>(16);
        let outlet = Outlet::new(
            tx,
            Arc::new(Shared::default()),
            Arc::new(AtomicUsize::new(0)),
            super::generated::rate(&p.abs).or(opts.limit_rate),
        );
        let stream = p.id;
        #[cfg(not(feature = "test-hooks"))]
        let thread = super::packer::spawn(&setup(), p, outlet);
        #[cfg(feature = "test-hooks")]
        let thread = match walk_delay_for_test() {
            None => super::packer::spawn(&setup(), p, outlet),
            Some(delay) => {
                let setup = setup();
                std::thread::spawn(move || {
                    std::thread::sleep(delay);
                    let _ = super::packer::spawn(&setup, p, outlet).join();
                })
            }
        };
        out.push(Outgoing {
            stream,
            rx,
            thread: Some(thread),
            ended: None,
            idle: None,
        });
    }
    Ok(out)
}

/// The test hook `TAPELOOM_TEST_WALK_DELAY_MS=N` (a build with the feature
/// `test-hooks` only) makes each stream's walk begin N milliseconds late, as a
/// long walk of unchanged files would send nothing for that long. Unset (or not
/// a number), nothing waits.
#[cfg(feature = "test-hooks")]
fn walk_delay_for_test() -> Option<Duration> {
    let ms = std::env::var("TAPELOOM_TEST_WALK_DELAY_MS").ok()?;
    ms.parse::<u64>().ok().map(Duration::from_millis)
}
