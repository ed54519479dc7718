//! The window planner: given the sources, the library and a window, it simulates a
//! backup event by event with the drive model the emulation uses
//! ([`tapeloom_device::lto::TapeModel`]) and predicts the window's length, each
//! drive's rate, share of time streaming and backhitches, the stage's peak, the
//! CPU the job needs, and the time of restores; and it answers the sizing
//! questions (the fewest drives that fit a window, the concurrency, the stage).
//!
//! The simulation follows the engine's rules, in chunks of a few MiB instead of
//! blocks (a chunk is at most a 32nd of the drive's buffer, so the buffer's fill,
//! the speed steps and the backhitches come out as they do block by block):
//!
//! - Each drive loads a new cartridge first (the model's load time), rewinds
//!   twice (to read what is at its start, then to write), and writes its label
//!   and a filemark with the immediate bit; its streams start then.
//! - Streams are taken largest first. A drive holds a fixed number at once
//!   (`concurrency`), or with `auto` it starts with one and takes one more each
//!   tenth of a second while their rates stay under four fifths of the drive's
//!   top rate (the engine adds a stream when its writer waited a fifth of the
//!   time); when a stream ends, the drive takes the next waiting one.
//! - A drive is offered its streams' data as they read it (under its share of the
//!   network, and of what the server's cores can process: `cores / cpu_per_gb`
//!   GB/s), and takes it as fast as its buffer lets it; a host slower than the
//!   lowest speed step lets the buffer run dry, and the model counts a backhitch.
//!   A writer that found nothing to write waits, as the engine's does, until its
//!   streams' buffers are half full, and then writes them at once.
//! - Through a stage, the sources spool at their own rates (under the stage's disk
//!   rate) from the start, while the drives load, and the drives start to despool
//!   as the engine's start rule does before it knows a drive's rate: when the
//!   stage is half full, or full to its last chunk, or holds the whole job.
//! - The job ends with the model's flush of the drive's buffer.

use std::collections::VecDeque;
use std::fmt::Write as _;
use tapeloom_device::lto::{LtoParams, TapeModel};
// The writer's rule for taking streams, with the writer's own constants: the share
// of its time a writer waits for data before it takes another stream, how often it
// judges, the blocks of a drive's buffer pool (`backup --buffers`), the share of
// its streams' buffers a writer that ran dry waits to see filled before it writes
// again (`backup --high-water`), and the longest it waits.
use tapeloom_engine::{
    DEFAULT_BUFFERS, DEFAULT_HIGH_WATER, DRY_SHARE, HIGH_WATER_WAIT, JUDGE_WINDOW,
};

/// One source of the job, as the planner sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanSource {
    /// Its name, for the verdict.
    pub name: String,
    /// Bytes to back up.
    pub bytes: u64,
    /// Bytes per second it can be read at.
    pub rate: f64,
    /// Files it holds (0 when not known).
    pub files: u64,
}

/// A disk stage the job goes through.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlanStage {
    /// Its size in bytes.
    pub bytes: u64,
    /// Bytes per second its disk writes (and, at the same time, reads).
    pub rate: f64,
}

/// Everything a plan is made from.
#[derive(Debug, Clone)]
pub struct PlanInput {
    /// The job's sources, one stream each.
    pub sources: Vec<PlanSource>,
    /// The drive model (scaled as the library's is).
    pub model: LtoParams,
    /// Drives the job writes with.
    pub drives: usize,
    /// How far the drive's compression shrinks the data (1: not at all).
    pub ratio: f64,
    /// Bytes per block.
    pub block: u64,
    /// Streams a drive holds at once; `None` for `auto`.
    pub concurrency: Option<usize>,
    /// Through this stage, if any.
    pub stage: Option<PlanStage>,
    /// The network's bytes per second from the clients, in all, if it limits.
    pub network: Option<f64>,
    /// The engine's CPU seconds per GB written.
    pub cpu_per_gb: f64,
    /// The media server's cores, if it is to be judged.
    pub cores: Option<f64>,
    /// The window the job must fit, in seconds.
    pub window: Option<f64>,
    /// Where on the cartridge the one file to restore lies, in bytes of tape from
    /// its beginning; the middle of the job's data when not given.
    pub restore_at: Option<f64>,
}

/// One drive's predicted figures.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DrivePlan {
    /// The drive's index among the job's.
    pub drive: usize,
    /// Host bytes written.
    pub bytes: u64,
    /// Host MB/s from its first byte of data to its last one taken into the
    /// drive's buffer.
    pub mb_per_s: f64,
    /// The share of its data time the tape moved.
    pub streaming_share: f64,
    /// Times the tape ran dry and stopped.
    pub backhitches: u64,
    /// Seconds from the start of the job to its last block on tape.
    pub seconds: f64,
    /// The streams it wrote, in the order it took them.
    pub streams: Vec<String>,
}

/// Predicted restore times, in seconds.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RestorePlan {
    /// One file from an unloaded cartridge: load, locate (or read through, when
    /// that is quicker), read of its first block.
    pub one_file_seconds: f64,
    /// Its load part: the load, and the check of the cartridge's label after it
    /// (a rewind and the label's read).
    pub one_file_load_seconds: f64,
    /// Its locate part, from the beginning of the tape (or the read through to
    /// the file, when that is quicker).
    pub one_file_locate_seconds: f64,
    /// Its read part: one command and one block.
    pub one_file_read_seconds: f64,
    /// One stream of the job, the slowest to restore: after the load, the drive
    /// reaches the stream's first block and reads through to its last (an
    /// interleaved stream's extents are spread over the job's whole span).
    /// Through a stage, where the plan does not follow each stream, the whole
    /// job's span.
    pub one_stream_seconds: f64,
    /// The whole job from one drive's cartridge, after the load.
    pub whole_job_seconds: f64,
    /// A set's point in time is its jobs' restores; for a full alone, the whole job.
    pub point_in_time_seconds: f64,
}

/// What binds the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Bind {
    /// The sources read slower than the drives could write.
    Sources,
    /// The drives write at their top rate.
    Drives,
    /// The stage's disk is slower than the sources.
    Stage,
    /// The network from the clients is slower than the sources and the drives.
    Network,
    /// The server has fewer cores than the job needs.
    Cpu,
}

/// A plan's predictions.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PlanOutcome {
    /// Seconds from the start to the last drive's last block on tape.
    pub window_seconds: f64,
    /// Whether that fits the window asked for.
    pub fits: Option<bool>,
    /// Each drive's figures.
    pub drives: Vec<DrivePlan>,
    /// The most bytes the stage held at once.
    pub stage_peak_bytes: u64,
    /// Cores the engine keeps busy at the job's rate.
    pub cores_needed: f64,
    /// Cores per drive at its top rate.
    pub cores_per_drive: f64,
    /// What binds the window.
    pub binds: Bind,
    /// Restore times.
    pub restore: RestorePlan,
    /// Plain sentences: what binds and what to change.
    pub verdict: Vec<String>,
}

/// Bytes of a volume label (`tapeloom_format::LABEL_LEN`).
const LABEL_BYTES: f64 = tapeloom_format::LABEL_LEN as f64;

/// Bytes a writer holding `held` streams waits for after it ran dry: half of
/// their buffers, each stream's buffer being the pool shared by the streams the
/// engine expects a drive to hold (`Weaver::lane_cap`).
fn high_water(input: &PlanInput, held: usize) -> f64 {
    let expected = match input.concurrency {
        Some(c) => c.max(1),
        None => input
            .sources
            .len()
            .div_ceil(input.drives.max(1))
            .clamp(1, 4),
    };
    let lane_cap = (DEFAULT_BUFFERS / expected).max(2);
    DEFAULT_HIGH_WATER * (lane_cap * held.max(1)) as f64 * input.block as f64
}

/// Bytes of a chunk the simulation moves at once: a 32nd of the drive's buffer (at
/// most 8 MiB), or for a large job whatever makes a drive's share about a million
/// chunks, up to an 8th of the buffer. Within those bounds the chunk changes no
/// figure by more than a few tenths of a percent, and a ten-hour window plans in
/// a fraction of a second.
fn chunk_of(input: &PlanInput) -> f64 {
    let p = &input.model;
    let total: f64 = input.sources.iter().map(|s| s.bytes as f64).sum();
    let share = total / input.drives.max(1) as f64;
    let small = (p.buffer_bytes / 32.0).clamp(64.0 * 1024.0, 8.0 * 1024.0 * 1024.0);
    small.max((share / 1e6).min(p.buffer_bytes / 8.0))
}

/// The host rate a drive takes at its top speed.
fn top_rate(p: &LtoParams, ratio: f64) -> f64 {
    (p.native() * ratio).min(p.interface_mb_s * 1e6)
}

/// One stream being written: its index and bytes left.
struct Held {
    source: usize,
    left: f64,
}

/// One drive in the simulation.
struct Sim {
    model: TapeModel,
    held: Vec<Held>,
    /// When the writer is free: the drive took its last chunk.
    host: f64,
    /// When the sources had read the last chunk offered.
    made: f64,
    /// When each of the last chunks left the buffer pool: the sources read ahead
    /// of the drive by at most the pool.
    freed: VecDeque<f64>,
    /// Chunks the engine's buffer pool holds.
    pool: usize,
    /// Backhitches while data streamed (the flush at the end is not one).
    hitches: u64,
    /// The stops the label's filemark cost, which are not backhitches of the data.
    label_hitches: u64,
    /// When the writer last judged whether to take another stream.
    judged: f64,
    bytes: f64,
    first: Option<f64>,
    /// When the last chunk was in the drive's buffer.
    last_data: f64,
    /// When the last chunk was on tape (the flush at the end done).
    last: f64,
    streams: Vec<String>,
    /// Where each source's data lies on this drive's tape (native bytes, first
    /// and last), for the restore of one stream.
    spans: Vec<(f64, f64)>,
    done: bool,
}

/// Simulates the job and predicts its figures.
pub fn plan(input: &PlanInput) -> PlanOutcome {
    let (sims, stage_peak) = match input.stage {
        Some(stage) => simulate_staged(input, stage),
        None => (simulate_direct(input), 0),
    };
    outcome(input, sims, stage_peak)
}

fn new_sim(input: &PlanInput) -> Sim {
    let mut model = TapeModel::new(input.model.clone());
    model.load(false);
    // A new cartridge is mounted as the engine mounts it: a rewind to read what
    // is at its start (a blank cartridge answers at once), a rewind to write its
    // label, the label, and the label's filemark with the immediate bit (the
    // drive goes on streaming into the job's first blocks).
    model.rewind();
    model.rewind();
    model.write(LABEL_BYTES, LABEL_BYTES, model.now);
    let loaded = model.filemark(true);
    let label_hitches = model.stats.backhitches;
    Sim {
        model,
        held: Vec::new(),
        host: loaded,
        // A drive starts its streams once its cartridge is mounted.
        made: loaded,
        freed: VecDeque::new(),
        pool: ((DEFAULT_BUFFERS as u64 * input.block) as f64 / chunk_of(input)).max(1.0) as usize,
        hitches: 0,
        label_hitches,
        judged: loaded,
        bytes: 0.0,
        first: None,
        last_data: loaded,
        last: loaded,
        streams: Vec::new(),
        spans: vec![(f64::INFINITY, 0.0); input.sources.len()],
        done: false,
    }
}

/// The sources' order: largest first, as the engine takes them once sized.
fn order(input: &PlanInput) -> Vec<usize> {
    let mut o: Vec<usize> = (0..input.sources.len()).collect();
    o.sort_by(|&a, &b| input.sources[b].bytes.cmp(&input.sources[a].bytes));
    o
}

/// The most bytes per second the job can move in all: the network's rate, and
/// what the server's cores can process (`cores / cpu_per_gb` GB/s).
fn job_cap(input: &PlanInput) -> Option<f64> {
    let cpu = input
        .cores
        .filter(|_| input.cpu_per_gb > 0.0)
        .map(|c| c / input.cpu_per_gb * 1e9);
    match (input.network, cpu) {
        (Some(n), Some(c)) => Some(n.min(c)),
        (n, c) => n.or(c),
    }
}

/// The rate of what a drive holds, under its share of the network and the CPU.
fn held_rate(input: &PlanInput, held: &[Held]) -> f64 {
    let r: f64 = held.iter().map(|h| input.sources[h.source].rate).sum();
    match job_cap(input) {
        Some(n) => r.min(n / input.drives.max(1) as f64),
        None => r,
    }
}

/// Whether a drive holding `held` takes another stream.
fn wants_more(input: &PlanInput, held: &[Held]) -> bool {
    match input.concurrency {
        Some(c) => held.len() < c.max(1),
        // The engine's writer takes another stream when it waited a fifth or more
        // of the time: when its streams give less than four fifths of what the
        // drive takes at its top speed.
        None => {
            held.is_empty()
                || held_rate(input, held) < (1.0 - DRY_SHARE) * top_rate(&input.model, input.ratio)
        }
    }
}

/// The engine's rule for the streams of a job to end together (`--concurrency
/// auto`, `Backlog::next_ends_late` in the writer): the next waiting stream starts
/// now when, started only as a held one ends, it would end after all the others.
fn next_ends_late(input: &PlanInput, held: &[Held], queue: &[usize]) -> bool {
    if input.concurrency.is_some() {
        return false;
    }
    let Some(&next) = queue.last() else {
        return false;
    };
    let next = input.sources[next].bytes as f64;
    let waiting: f64 = queue.iter().map(|&i| input.sources[i].bytes as f64).sum();
    let share = (waiting / input.drives.max(1) as f64).max(next);
    let work = held.iter().map(|h| h.left).sum::<f64>() + share;
    (held.len() as f64 + 1.0) * next >= work
}

fn simulate_direct(input: &PlanInput) -> Vec<Sim> {
    let mut queue = order(input);
    queue.reverse();
    let mut sims: Vec<Sim> = (0..input.drives.max(1)).map(|_| new_sim(input)).collect();
    // The drives take their first streams in turn: as many as a fixed
    // concurrency says, or one with `auto` (the engine's writer starts with one
    // and takes another once a window, below).
    loop {
        let mut took = false;
        for s in sims.iter_mut() {
            let first = input.concurrency.is_some() || s.held.is_empty();
            if first && wants_more(input, &s.held) {
                if let Some(i) = queue.pop() {
                    take(input, s, i);
                    took = true;
                }
            }
        }
        if !took {
            break;
        }
    }
    let chunk = chunk_of(input);
    // The drive whose host is earliest moves next.
    while let Some(d) = (0..sims.len())
        .filter(|&d| !sims[d].done)
        .min_by(|&a, &b| sims[a].host.total_cmp(&sims[b].host))
    {
        let s = &mut sims[d];
        if s.held.is_empty() {
            finish(s);
            continue;
        }
        let rate = held_rate(input, &s.held).max(1.0);
        let left: f64 = s.held.iter().map(|h| h.left).sum();
        let n = chunk.min(left);
        // Each held stream gives its share of the chunk as it reads.
        let mut given = 0.0;
        let at = s.model.tape_pos;
        for h in s.held.iter_mut() {
            let part = (n * input.sources[h.source].rate / rate.max(1.0)).min(h.left);
            h.left -= part;
            given += part;
            if part > 0.0 {
                let span = &mut s.spans[h.source];
                span.0 = span.0.min(at);
                span.1 = span.1.max(at + part / input.ratio);
            }
        }
        let given = if given <= 0.0 { n } else { given };
        let freed = if s.freed.len() >= s.pool {
            s.freed.pop_front().unwrap_or(0.0)
        } else {
            0.0
        };
        s.made = (s.made + given / rate).max(freed);
        let mut offered = s.made.max(s.host);
        if s.made > s.host {
            // The writer found nothing to write: as the engine's, it waits until
            // its streams' buffers are half full again (a stream's end, or two
            // seconds, end the wait sooner), and writes what they hold at once.
            let want = (high_water(input, s.held.len()) - given).min(left - given);
            let full = s.made + want.max(0.0) / rate;
            offered = full.min(s.host + HIGH_WATER_WAIT.as_secs_f64()).max(s.made);
        }
        write(input, s, given, offered);
        let host = s.host;
        s.freed.push_back(host);
        let before = s.held.len();
        s.held.retain(|h| h.left > 0.5);
        // As the engine's writer: a stream ended is replaced at once (a fixed
        // concurrency), and once a window it takes one more stream when it waited
        // too long or the next waiting one must start for the streams to end
        // together.
        let ended = s.held.len() < before;
        if ended && input.concurrency.is_some() {
            while wants_more(input, &s.held) {
                match queue.pop() {
                    Some(i) => take(input, s, i),
                    None => break,
                }
            }
        }
        if s.host - s.judged >= JUDGE_WINDOW.as_secs_f64() || (ended && s.held.is_empty()) {
            s.judged = s.host;
            if wants_more(input, &s.held) || next_ends_late(input, &s.held, &queue) {
                if let Some(i) = queue.pop() {
                    take(input, s, i);
                }
            }
        }
    }
    sims
}

fn take(input: &PlanInput, s: &mut Sim, i: usize) {
    s.held.push(Held {
        source: i,
        left: input.sources[i].bytes as f64,
    });
    s.streams.push(input.sources[i].name.clone());
}

/// The drive is offered `bytes` at time `offered`; the host goes on when the drive
/// has taken them.
fn write(input: &PlanInput, s: &mut Sim, bytes: f64, offered: f64) {
    let done = s.model.write(bytes, bytes / input.ratio, offered);
    s.first.get_or_insert(offered.min(done));
    s.host = done.max(offered);
    s.bytes += bytes;
    s.last = done;
    s.last_data = done;
}

fn finish(s: &mut Sim) {
    s.hitches = s.model.stats.backhitches - s.label_hitches;
    if s.bytes > 0.0 {
        s.last = s.model.flush();
    }
    s.done = true;
}

/// Through a stage: the sources spool onto it, and the drives despool from it
/// once the start rule holds. Chunk `k` is on the stage once the sources have
/// sent it and there was room for it (the chunk a stage's size before it has left).
fn simulate_staged(input: &PlanInput, stage: PlanStage) -> (Vec<Sim>, u64) {
    let mut sims: Vec<Sim> = (0..input.drives.max(1)).map(|_| new_sim(input)).collect();
    let total: f64 = input.sources.iter().map(|s| s.bytes as f64).sum();
    let spool_rate = {
        let r: f64 = input.sources.iter().map(|s| s.rate).sum();
        job_cap(input)
            .map_or(r, |n| r.min(n))
            .min(stage.rate)
            .max(1.0)
    };
    let n = chunk_of(input);
    let chunks = (total / n).ceil().max(1.0) as usize;
    let size = |k: usize| n.min(total - k as f64 * n);
    let room = ((stage.bytes as f64 / n).floor() as usize).max(1);
    // When the start rule first holds, spooling alone (before any despool). The
    // engine learns the drive's rate only from the data it writes, so before the
    // first despool it starts when the stage is half full (or all is spooled).
    let mut start = 0.0;
    let mut spooled = 0.0;
    let half = stage.bytes as f64 / 2.0;
    for k in 0..chunks {
        spooled += size(k);
        start = spooled / spool_rate;
        if spooled >= half || k + 1 >= room || total - spooled <= 0.5 {
            break;
        }
    }

    let mut on_stage = vec![0.0f64; chunks];
    let mut taken = vec![0.0f64; chunks];
    let mut read_at = vec![0.0f64; sims.len()];
    for k in 0..chunks {
        let sent = if k == 0 { 0.0 } else { on_stage[k - 1] };
        let freed = if k >= room { taken[k - room] } else { 0.0 };
        on_stage[k] = (sent + size(k) / spool_rate).max(freed);
        let d = k % sims.len();
        let s = &mut sims[d];
        let offered = on_stage[k]
            .max(start)
            .max(read_at[d] + size(k) / stage.rate)
            .max(s.host);
        write(input, s, size(k), offered);
        read_at[d] = offered;
        taken[k] = s.host;
    }
    for s in sims.iter_mut() {
        finish(s);
    }
    // The stage's peak: chunks on it and not yet taken, at each arrival.
    let (mut peak, mut gone) = (0.0f64, 0usize);
    for (k, &arrived) in on_stage.iter().enumerate() {
        while gone < chunks && taken[gone] <= arrived {
            gone += 1;
        }
        let held = ((k + 1).saturating_sub(gone)) as f64 * n;
        peak = peak.max(held.min(total));
    }
    (sims, peak as u64)
}

fn outcome(input: &PlanInput, sims: Vec<Sim>, stage_peak: u64) -> PlanOutcome {
    let drives: Vec<DrivePlan> = sims
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let st = s.model.snapshot();
            let first = s.first.unwrap_or(s.last);
            let span = (s.last_data - first).max(1e-9);
            DrivePlan {
                drive: i,
                bytes: s.bytes as u64,
                mb_per_s: s.bytes / span / 1e6,
                streaming_share: (st.streaming_seconds / span).min(1.0),
                backhitches: s.hitches,
                seconds: s.last,
                streams: s.streams.clone(),
            }
        })
        .collect();
    let window = drives.iter().map(|d| d.seconds).fold(0.0, f64::max);
    let total: u64 = input.sources.iter().map(|s| s.bytes).sum();
    let data_span = drives
        .iter()
        .map(|d| d.bytes as f64 / (d.mb_per_s * 1e6).max(1.0))
        .fold(0.0, f64::max)
        .max(1e-9);
    // The cores the job needs to run as fast as its sources, network, stage and
    // drives let it (the CPU left out): what the simulation reached, or with a
    // CPU that held it back, what it would have reached without.
    let achieved = total as f64 / data_span;
    let unheld = if job_cap(input) != input.network {
        let mut free = input.clone();
        free.cores = None;
        let o = plan(&free);
        let span = (o.drives.iter())
            .map(|d| d.bytes as f64 / (d.mb_per_s * 1e6).max(1.0))
            .fold(0.0, f64::max)
            .max(1e-9);
        total as f64 / span
    } else {
        achieved
    };
    let cores_needed = input.cpu_per_gb * unheld / 1e9;
    let cores_per_drive = input.cpu_per_gb * top_rate(&input.model, input.ratio) / 1e9;
    let restore = restore(input, &sims);
    let binds = binds(input, cores_needed);
    let mut o = PlanOutcome {
        window_seconds: window,
        fits: input.window.map(|w| window <= w),
        drives,
        stage_peak_bytes: stage_peak,
        cores_needed,
        cores_per_drive,
        binds,
        restore,
        verdict: Vec::new(),
    };
    o.verdict = verdict(input, &o);
    o
}

fn restore(input: &PlanInput, sims: &[Sim]) -> RestorePlan {
    let p = &input.model;
    // The fullest drive's cartridge: its tape bytes, past the label.
    let per_drive = sims
        .iter()
        .map(|s| s.model.stats.tape_bytes as f64 - LABEL_BYTES)
        .fold(0.0, f64::max);
    let mut m = TapeModel::new(p.clone());
    // After the load, the reader checks the cartridge's label: a rewind, then
    // the label's read.
    m.load(false);
    m.rewind();
    let check = m.read(LABEL_BYTES, LABEL_BYTES) - p.load_s;
    // The reader passes over what lies before the data it wants the cheaper
    // way, as the engine's reader does with a drive model: a locate, or reading
    // through.
    let reach = |at: f64| m.locate_seconds(0.0, at).min(at / p.native());
    let at = input.restore_at.unwrap_or(per_drive / 2.0);
    let locate = reach(at);
    // One block, as the model reads it: its tape bytes at the native rate, or
    // the command and its host bytes over the interface, whichever is longer.
    let block = input.block as f64;
    let read =
        (block / input.ratio / p.native()).max(p.command_s + block / (p.interface_mb_s * 1e6));
    let span = per_drive / p.native();
    // One stream: reached, then read through from its first block to its last
    // (the others' extents between them are read too); the slowest stream.
    let one_stream = sims
        .iter()
        .flat_map(|s| s.spans.iter())
        .filter(|(a, b)| a.is_finite() && b > a)
        .map(|&(a, b)| reach(a) + (b - a) / p.native())
        .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))))
        .unwrap_or(span);
    let load = p.load_s + check;
    RestorePlan {
        one_file_seconds: load + locate + read,
        one_file_load_seconds: load,
        one_file_locate_seconds: locate,
        one_file_read_seconds: read,
        one_stream_seconds: load + one_stream,
        whole_job_seconds: load + span,
        point_in_time_seconds: load + span,
    }
}

fn binds(input: &PlanInput, cores_needed: f64) -> Bind {
    if input.cores.is_some_and(|c| cores_needed > c) {
        return Bind::Cpu;
    }
    let drives = top_rate(&input.model, input.ratio) * input.drives.max(1) as f64;
    let sources: f64 = input.sources.iter().map(|s| s.rate).sum();
    if let Some(n) = input.network {
        if n < sources && n < drives {
            return Bind::Network;
        }
    }
    if let Some(s) = input.stage {
        if s.rate < sources && s.rate < drives {
            return Bind::Stage;
        }
    }
    if sources >= 0.95 * drives {
        Bind::Drives
    } else {
        Bind::Sources
    }
}

/// A number of seconds as people read it.
pub fn hours(s: f64) -> String {
    if s >= 3600.0 {
        format!("{:.1} h", s / 3600.0)
    } else if s >= 60.0 {
        format!("{:.0} min", s / 60.0)
    } else {
        format!("{s:.0} s")
    }
}

fn verdict(input: &PlanInput, o: &PlanOutcome) -> Vec<String> {
    let mut v = Vec::new();
    let p = &input.model;
    let top = top_rate(p, input.ratio) / 1e6;
    let lowest = p.speed_steps().first().copied().unwrap_or(p.native()) * input.ratio / 1e6;
    let sources: f64 = input.sources.iter().map(|s| s.rate).sum::<f64>() / 1e6;
    let mut first = format!(
        "The backup takes {} on {} {} drive{}",
        hours(o.window_seconds),
        input.drives,
        p.name.to_uppercase(),
        if input.drives == 1 { "" } else { "s" }
    );
    if let (Some(w), Some(fits)) = (input.window, o.fits) {
        let _ = write!(
            first,
            ", which {} the {} window",
            if fits { "fits" } else { "does not fit" },
            hours(w)
        );
    }
    first.push('.');
    v.push(first);
    let hitches: u64 = o.drives.iter().map(|d| d.backhitches).sum();
    match o.binds {
        Bind::Drives => v.push(format!(
            "The drives bind: each writes at its top rate of about {top:.0} MB/s for this data. \
             More drives, or a newer generation, would shorten the window."
        )),
        Bind::Sources => {
            let per = o.drives.iter().map(|d| d.mb_per_s).fold(0.0, f64::max);
            v.push(format!(
                "The sources bind: together they read at {sources:.0} MB/s, and a drive gets \
                 at most {per:.0} MB/s of the {top:.0} MB/s it could take."
            ));
            if hitches > 0 {
                v.push(format!(
                    "Below the drive's lowest speed step ({lowest:.0} MB/s for this data) its \
                     buffer runs dry: {hitches} backhitches. Back up more streams at once \
                     (--concurrency), or go through a disk stage (--stage) that feeds the \
                     drive at full speed."
                ));
            } else {
                v.push(
                    "Faster sources (more streams at once, faster disks) would shorten the \
                     window; more drives would not."
                        .into(),
                );
            }
        }
        Bind::Stage => v.push(format!(
            "The stage's disk binds: it writes at {:.0} MB/s, below what the sources give. \
             A faster stage disk would shorten the window.",
            input.stage.map_or(0.0, |s| s.rate / 1e6)
        )),
        Bind::Network => v.push(format!(
            "The network binds: {:.0} MB/s from the clients, below what the sources and \
             drives could do. A faster link would shorten the window.",
            input.network.unwrap_or(0.0) / 1e6
        )),
        Bind::Cpu => v.push(format!(
            "The CPU binds: the job needs {:.1} cores at this rate and the server has {:.1}. \
             Each drive at its top rate needs {:.2} cores.",
            o.cores_needed,
            input.cores.unwrap_or(0.0),
            o.cores_per_drive
        )),
    }
    let last = o
        .drives
        .iter()
        .max_by(|a, b| a.seconds.total_cmp(&b.seconds));
    if let Some(d) = last.filter(|d| o.binds == Bind::Drives && d.mb_per_s < 0.9 * top) {
        v.push(format!(
            "Drive {} ends last, at {:.0} MB/s on average: its last streams run with too few \
             beside them to keep it at its top rate. Sources of more even sizes, or more of \
             them, end together.",
            d.drive, d.mb_per_s
        ));
    }
    if o.binds != Bind::Sources && hitches > 0 {
        v.push(format!(
            "The drives stop {hitches} times when their buffers run dry (backhitches)."
        ));
    }
    v.push(format!(
        "One file from an unloaded cartridge takes about {:.0} s to its first byte \
         ({:.0} s to load it and read its label, {:.0} s to locate the file).",
        o.restore.one_file_seconds,
        o.restore.one_file_load_seconds,
        o.restore.one_file_locate_seconds
    ));
    v
}

/// The fewest drives (up to `max`) whose window fits `window` seconds; `None` when
/// even `max` do not.
pub fn solve_drives(input: &PlanInput, window: f64, max: usize) -> Option<(usize, PlanOutcome)> {
    let with = |n: usize| {
        let mut i = input.clone();
        i.drives = n;
        i.window = Some(window);
        plan(&i)
    };
    // More drives never lengthen the window: search for the first that fits.
    if with(max).window_seconds > window {
        return None;
    }
    let (mut lo, mut hi) = (0usize, max);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if with(mid).window_seconds <= window {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some((hi, with(hi)))
}

/// The concurrency that gives the shortest window without backhitches (the
/// shortest window when every one has some), from 1 to the number of sources.
pub fn solve_concurrency(input: &PlanInput) -> (usize, PlanOutcome) {
    let mut best: Option<(usize, PlanOutcome)> = None;
    for c in 1..=input.sources.len().max(1) {
        let mut i = input.clone();
        i.concurrency = Some(c);
        let o = plan(&i);
        let key = |o: &PlanOutcome| {
            let h: u64 = o.drives.iter().map(|d| d.backhitches).sum();
            (h > 0, o.window_seconds)
        };
        let better = match &best {
            None => true,
            Some((_, b)) => {
                let (a, b) = (key(&o), key(b));
                (a.0, a.1) < (b.0, b.1 * 0.995)
            }
        };
        if better {
            best = Some((c, o));
        }
    }
    best.unwrap_or_else(|| (1, plan(input)))
}

/// The smallest stage (to a 64th of the job) with which the drives never stop,
/// at the stage disk `rate`; `None` when no stage up to twice the job's size
/// does. (A stage larger than the job still helps: the despool starts when it is
/// half full.)
pub fn solve_stage(input: &PlanInput, rate: f64) -> Option<(u64, PlanOutcome)> {
    let total: u64 = 2 * input.sources.iter().map(|s| s.bytes).sum::<u64>();
    let try_size = |bytes: u64| {
        let mut i = input.clone();
        i.stage = Some(PlanStage { bytes, rate });
        let o = plan(&i);
        let h: u64 = o.drives.iter().map(|d| d.backhitches).sum();
        (h == 0, o)
    };
    let (ok, _) = try_size(total);
    if !ok {
        return None;
    }
    let (mut lo, mut hi) = (0u64, total);
    while hi - lo > (total / 64).max(1) {
        let mid = lo + (hi - lo) / 2;
        if try_size(mid).0 {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some((hi, try_size(hi).1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tapeloom_device::lto::generation;

    fn input(rates: &[f64], drives: usize) -> PlanInput {
        PlanInput {
            sources: rates
                .iter()
                .enumerate()
                .map(|(i, &r)| PlanSource {
                    name: format!("s{i}"),
                    bytes: 100_000_000_000,
                    rate: r * 1e6,
                    files: 0,
                })
                .collect(),
            model: generation("lto9").unwrap(),
            drives,
            ratio: 1.0,
            block: 256 * 1024,
            concurrency: None,
            stage: None,
            network: None,
            cpu_per_gb: 0.6,
            cores: None,
            window: None,
            restore_at: None,
        }
    }

    #[test]
    fn fast_sources_keep_the_drive_at_its_top_rate() {
        let o = plan(&input(&[500.0], 1));
        let d = &o.drives[0];
        assert!((d.mb_per_s - 400.0).abs() < 8.0, "{d:?}");
        assert_eq!(d.backhitches, 0);
        assert_eq!(o.binds, Bind::Drives);
        // 100 GB at 400 MB/s and the 17 s load.
        assert!((o.window_seconds - 267.0).abs() < 5.0, "{o:?}");
    }

    #[test]
    fn a_source_below_the_lowest_step_makes_backhitches_and_the_sources_bind() {
        let o = plan(&input(&[100.0], 1));
        assert!(o.drives[0].backhitches > 0, "{o:?}");
        assert_eq!(o.binds, Bind::Sources);
        assert!(o.verdict.iter().any(|l| l.contains("backhitches")), "{o:?}");
    }

    #[test]
    fn more_drives_shorten_the_window_until_it_fits() {
        let i = input(&[300.0; 8], 1);
        let (n, o) = solve_drives(&i, 1500.0, 16).unwrap();
        assert!(o.window_seconds <= 1500.0);
        let mut fewer = i.clone();
        fewer.drives = n - 1;
        assert!(plan(&fewer).window_seconds > 1500.0);
    }

    #[test]
    fn a_stage_feeds_slow_sources_without_backhitches() {
        // A 150 MB/s source, below LTO-9's lowest step of 177: the drive at
        // 400 MB/s does not run dry if it starts once the stage holds 5/3 of what
        // is left to come (62.5 GB of the 100), and it starts when the stage is
        // half full: a stage of 125 GB.
        let i = input(&[150.0], 1);
        assert!(plan(&i).drives[0].backhitches > 0);
        let (bytes, o) = solve_stage(&i, 1000e6).unwrap();
        assert!((bytes as f64 / 125e9 - 1.0).abs() < 0.05, "{bytes}");
        assert_eq!(o.drives[0].backhitches, 0);
        assert!(o.stage_peak_bytes <= bytes);
    }

    #[test]
    fn a_stream_written_alone_restores_sooner_than_one_interleaved() {
        // Four 100 MB/s streams: alone, each fills a quarter of the tape and its
        // restore reads that quarter; interleaved (auto takes all four to reach
        // the drive's 400 MB/s), each is spread over the whole job.
        let mut alone = input(&[100.0; 4], 1);
        alone.concurrency = Some(1);
        let a = plan(&alone).restore;
        assert!(a.one_stream_seconds < 0.5 * a.whole_job_seconds, "{a:?}");
        let mixed = plan(&input(&[100.0; 4], 1)).restore;
        assert!(
            mixed.one_stream_seconds > 0.9 * mixed.whole_job_seconds,
            "{mixed:?}"
        );
    }

    #[test]
    fn too_few_cores_hold_the_job_back() {
        // Two 300 MB/s sources on two drives: 600 MB/s in all. At 2 CPU seconds
        // per GB, one core moves 500 MB/s: the CPU binds and the job runs at that.
        let mut i = input(&[300.0, 300.0], 2);
        i.cpu_per_gb = 2.0;
        let free = plan(&i);
        i.cores = Some(1.0);
        let held = plan(&i);
        assert_eq!(held.binds, Bind::Cpu, "{held:?}");
        assert!((held.cores_needed - 1.2).abs() < 0.05, "{held:?}");
        let rate: f64 = held.drives.iter().map(|d| d.mb_per_s).sum();
        assert!((rate - 500.0).abs() < 10.0, "{held:?}");
        assert!(held.window_seconds > 1.15 * free.window_seconds, "{held:?}");
    }

    #[test]
    fn a_ten_hour_window_plans_in_well_under_a_second() {
        let mut i = input(&[500.0; 4], 4);
        for s in &mut i.sources {
            s.bytes = 14_000_000_000_000;
        }
        let t = std::time::Instant::now();
        let o = plan(&i);
        assert!(o.window_seconds > 9.0 * 3600.0, "{}", o.window_seconds);
        assert!(t.elapsed().as_secs_f64() < 1.0, "{:?}", t.elapsed());
    }
}
