//! One drive's writer: it pulls streams from the job's queue, interleaves the ones it
//! holds in extents, lands their blocks through its [`VolumeWriter`], records where
//! every entry went, and samples its counters every second.
//!
//! Streams are balanced across drives by pull: a drive takes the next waiting stream
//! when its own writer runs dry (`--concurrency auto`) or when one of its streams ends
//! (a fixed concurrency). A drive fed by fast streams stays with few; a drive whose
//! streams are slow takes more. A stream never moves between drives, so each stream's
//! blocks stay in order along one drive's chain of cartridges.

use crate::backup::{BackupOptions, Progress, StreamReport};
use crate::error::{Error, Result};
use crate::mux::{Extents, Lane, Msg, Outlet, Shared};
use crate::volumes::VolumeWriter;
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tapeloom_catalog::Sample;
use tapeloom_format::EntryType;

/// A stream not yet started: id, source, and its root in the job's namespace.
pub(crate) struct Pending {
    pub id: u16,
    pub name: String,
    pub abs: PathBuf,
    pub root: Vec<u8>,
}

/// What the drives of one job share.
pub(crate) struct JobShared<'a> {
    pub opts: &'a BackupOptions,
    pub tag: u64,
    pub job_id: i64,
    pub skip: Vec<(u64, u64)>,
    pub pending: Mutex<VecDeque<Pending>>,
    pub progress: Arc<Progress>,
    pub t0: Instant,
    /// Set when a drive failed: the others stop too.
    pub stop: AtomicBool,
    /// Streams each drive expects to hold at once, to size its channels.
    pub expected: usize,
    /// Whether packers compress their blocks (zstd).
    pub software: bool,
    /// What they did.
    pub counters: Arc<crate::compress::CompressionCounters>,
}

impl JobShared<'_> {
    fn next_stream(&self) -> Option<Pending> {
        self.pending.lock().ok().and_then(|mut q| q.pop_front())
    }
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
}

/// What one drive's writer hands back.
pub(crate) struct Woven {
    pub report: DriveReport,
    pub streams: Vec<(u16, StreamReport)>,
    pub errors: Vec<(String, String)>,
    pub entries: u64,
    pub stored: u64,
    pub samples: Vec<Sample>,
}

/// Per-second samples of one drive and its streams.
struct Sampler {
    every: Duration,
    last: Instant,
    drive: String,
    out: Vec<Sample>,
}

impl Sampler {
    fn due(&self) -> bool {
        self.last.elapsed() >= self.every
    }

    fn take(
        &mut self,
        job: &JobShared<'_>,
        w: &VolumeWriter,
        written: u64,
        pool_fill: f64,
        streams: &[(String, u64, f64)],
    ) {
        self.last = Instant::now();
        let t_ms = job.t0.elapsed().as_millis() as u64;
        let stats = w.drive_stats();
        if let Ok(mut live) = job.progress.series.lock() {
            live.insert(
                self.drive.clone(),
                (written, stats.as_ref().map(|s| s.backhitches)),
            );
            for (name, bytes, _) in streams {
                live.insert(format!("stream:{name}"), (*bytes, None));
            }
        }
        self.out.push(Sample {
            series: self.drive.clone(),
            t_ms,
            bytes: written,
            pool_fill,
            buffer_fill: stats.as_ref().map(|s| s.buffer_fill),
            backhitches: stats.as_ref().map(|s| s.backhitches).unwrap_or(0),
            speed_mb_s: stats.as_ref().map(|s| s.speed_now_mb_s),
        });
        for (name, bytes, fill) in streams {
            self.out.push(Sample {
                series: format!("stream:{name}"),
                t_ms,
                bytes: *bytes,
                pool_fill: *fill,
                buffer_fill: None,
                backhitches: 0,
                speed_mb_s: None,
            });
        }
    }
}

/// Runs one drive's writer until no stream is left for it.
pub(crate) fn weave(job: &JobShared<'_>, w: &mut VolumeWriter) -> Result<Woven> {
    let opts = job.opts;
    let shared = Arc::new(Shared::default());
    let fixed = opts.concurrency.map(|k| k.max(1));
    let lane_cap = (opts.buffers / fixed.unwrap_or(job.expected).max(1)).max(2);
    let (tag, block_size, readers) = (job.tag, opts.block_size, opts.readers);
    let start_lane = |p: Pending| -> Lane {
        let (tx, rx) = sync_channel::<Msg>(lane_cap);
        let queued = Arc::new(AtomicUsize::new(0));
        let out = Outlet::new(
            tx,
            Arc::clone(&shared),
            Arc::clone(&queued),
            opts.limit_rate,
        );
        let skip = job.skip.clone();
        let Pending { id, abs, root, .. } = p;
        let comp = if job.software {
            crate::compress::Compressor::new().map(|c| (c, Arc::clone(&job.counters)))
        } else {
            None
        };
        let thread = std::thread::spawn(move || {
            let fetched = crate::source::start(vec![(abs.clone(), root.clone())], readers, skip);
            let host = crate::backup::HostPath { abs, root };
            crate::backup::pack_stream(id, tag, block_size, fetched, out, &host, comp);
        });
        Lane::new(id, rx, queued, thread)
    };
    let label = match w.drive_index() {
        Some(d) => format!("drive:{d}"),
        None => "drive:0".to_string(),
    };
    let mut sampler = Sampler {
        every: Duration::from_secs(1),
        last: Instant::now(),
        drive: label,
        out: Vec::new(),
    };
    let mut target = fixed.unwrap_or(1);
    let mut lanes: Vec<Lane> = Vec::new();
    let mut names: HashMap<u16, String> = HashMap::new();
    let mut errors = Vec::new();
    let mut rows = Vec::new();
    let mut positions: HashMap<u16, (u64, VecDeque<(u32, u64)>)> = HashMap::new();
    let mut per_stream: HashMap<u16, StreamReport> = HashMap::new();
    let mut stream_written: HashMap<u16, u64> = HashMap::new();
    let mut extents = Extents::default();
    let mut report = DriveReport {
        drive: w.drive_index(),
        ..Default::default()
    };
    let (mut entries, mut stored, mut written) = (0u64, 0u64, 0u64);
    let mut writer_wait = Duration::ZERO;
    let mut cur: usize = 0;
    let mut run = 0usize;
    let mut dry = true;
    let mut lanes_done = 0usize;
    let mut window_start = Instant::now();
    let mut window_wait = Duration::ZERO;
    let cat_job = job.job_id;
    let result = (|| -> Result<()> {
        loop {
            if job.stop.load(Ordering::Relaxed) {
                return Err(Error::Msg(
                    "stopped: another drive of the job failed".into(),
                ));
            }
            // Adaptive concurrency: when the writer has waited for data a fifth or more
            // of the last tenth of a second, the streams in hand cannot keep the drive
            // busy: weave one more in. A drive that never waits is saturated and takes
            // no more.
            let span = window_start.elapsed();
            if span >= Duration::from_millis(100) {
                if fixed.is_none() && window_wait.as_secs_f64() >= 0.2 * span.as_secs_f64() {
                    target = target.max(lanes.len()) + 1;
                }
                window_start = Instant::now();
                window_wait = Duration::ZERO;
            }
            while lanes.len() < target {
                match job.next_stream() {
                    Some(p) => {
                        names.insert(p.id, p.name.clone());
                        per_stream.insert(
                            p.id,
                            StreamReport {
                                name: p.name.clone(),
                                bytes: 0,
                                files: 0,
                                seconds: 0.0,
                                drive: w.drive_index(),
                            },
                        );
                        report.streams.push(p.name.clone());
                        lanes.push(start_lane(p));
                    }
                    None => {
                        target = lanes.len();
                        break;
                    }
                }
            }
            report.max_concurrency = report.max_concurrency.max(lanes.len());
            if sampler.due() {
                let cap = (lane_cap * lanes.len().max(1)) as f64;
                let fill = shared.queued.load(Ordering::Relaxed) as f64 / cap;
                let streams: Vec<(String, u64, f64)> = names
                    .iter()
                    .map(|(id, n)| {
                        let b = stream_written.get(id).copied().unwrap_or(0);
                        let f = lanes
                            .iter()
                            .find(|l| l.id == *id)
                            .map(|l| l.queued() as f64 / lane_cap as f64)
                            .unwrap_or(0.0);
                        (n.clone(), b, f)
                    })
                    .collect();
                sampler.take(job, w, written, fill.min(1.0), &streams);
            }
            if lanes.is_empty() {
                break;
            }
            if dry {
                // The pool fills to the high-water mark before the writer starts.
                let want = (opts.high_water * (lane_cap * lanes.len()) as f64) as usize;
                let t = Instant::now();
                let waited_before = shared.queued.load(Ordering::Relaxed) < want;
                while shared.queued.load(Ordering::Relaxed) < want
                    && t.elapsed() < Duration::from_secs(2)
                {
                    let seen = shared.rung();
                    // A stream that has sent everything cannot fill the pool further.
                    if shared.finished.load(Ordering::Relaxed) > lanes_done {
                        break;
                    }
                    shared.wait(seen, Duration::from_millis(20));
                }
                if waited_before {
                    writer_wait += t.elapsed();
                    window_wait += t.elapsed();
                }
                dry = false;
            }
            // Stay with the current stream for up to an extent, while it has data.
            if cur >= lanes.len() || run >= opts.extent_blocks.max(1) || !lanes[cur].ready() {
                run = 0;
                let n = lanes.len();
                match (1..=n).map(|k| (cur + k) % n).find(|&i| lanes[i].ready()) {
                    Some(i) => cur = i,
                    None => {
                        let seen = shared.rung();
                        if lanes.iter_mut().any(|l| l.ready()) {
                            continue;
                        }
                        report.writer_waits += 1;
                        let t = Instant::now();
                        shared.wait(seen, Duration::from_millis(50));
                        writer_wait += t.elapsed();
                        dry = true;
                        window_wait += t.elapsed();
                        continue;
                    }
                }
            }
            let id = lanes[cur].id;
            match lanes[cur].take() {
                Some(Msg::Block {
                    mut block,
                    done,
                    keep_from,
                }) => {
                    shared.queued.fetch_sub(1, Ordering::Relaxed);
                    run += 1;
                    let len = block.header.payload_len as u64;
                    let at = w.write(&mut block)?;
                    written += len;
                    *stream_written.entry(id).or_default() += len;
                    extents.landed(id, block.header.stream_offset, at.0, at.1);
                    let (base, map) = positions.entry(id).or_insert((block.seq, VecDeque::new()));
                    map.push_back(at);
                    let mut sr = per_stream.get_mut(&id);
                    for d in done {
                        let s = map
                            .get((d.start_block - *base) as usize)
                            .copied()
                            .ok_or_else(|| Error::Msg("entry start position lost".into()))?;
                        let e = map
                            .get((d.end_block - *base) as usize)
                            .copied()
                            .ok_or_else(|| Error::Msg("entry end position lost".into()))?;
                        let mut row = d.row;
                        row.start_seq = s.0;
                        row.start_lbn = s.1;
                        row.end_seq = e.0;
                        row.end_lbn = e.1;
                        report.files += 1;
                        if let Some(sr) = sr.as_mut() {
                            sr.files += 1;
                        }
                        if row.kind == EntryType::Regular as u8 {
                            report.bytes += row.size;
                            if let Some(sr) = sr.as_mut() {
                                sr.bytes += row.size;
                            }
                            job.progress.bytes.fetch_add(row.size, Ordering::Relaxed);
                        }
                        job.progress.files.fetch_add(1, Ordering::Relaxed);
                        rows.push(row);
                    }
                    while *base < keep_from && !map.is_empty() {
                        map.pop_front();
                        *base += 1;
                    }
                    shared.give(block.buf);
                    if rows.len() >= 4096 {
                        w.cat.add_files(cat_job, &rows)?;
                        rows.clear();
                    }
                    if extents.closed.len() >= 1024 {
                        w.cat.add_extents(cat_job, &extents.closed)?;
                        extents.closed.clear();
                    }
                }
                Some(Msg::Error(p, why)) => {
                    w.cat.add_error(cat_job, &p, &why)?;
                    errors.push((crate::display_path(&p), why));
                }
                Some(Msg::End(e, b)) => {
                    entries += e;
                    stored += b;
                    if let Some(sr) = per_stream.get_mut(&id) {
                        sr.seconds = job.t0.elapsed().as_secs_f64();
                    }
                    let mut lane = lanes.remove(cur);
                    lane.ended = true;
                    lanes_done += 1;
                    if let Some(t) = lane.thread.take() {
                        t.join()
                            .map_err(|_| Error::Msg("a packer thread panicked".into()))?;
                    }
                    run = 0;
                    if fixed.is_some() {
                        // A fixed concurrency refills at once.
                        continue;
                    }
                }
                None => {}
            }
        }
        extents.finish();
        w.cat.add_extents(cat_job, &extents.closed)?;
        w.cat.add_files(cat_job, &rows)?;
        Ok(())
    })();
    // Whatever happened, let the packers go: dropping the lanes closes their channels.
    drop(lanes);
    if result.is_err() {
        job.stop.store(true, Ordering::Relaxed);
    }
    result?;
    let streams: Vec<(String, u64, f64)> = names
        .iter()
        .map(|(id, n)| (n.clone(), stream_written.get(id).copied().unwrap_or(0), 0.0))
        .collect();
    sampler.take(job, w, written, 0.0, &streams);
    report.backhitches = w.drive_stats().map(|s| s.backhitches);
    report.seconds = job.t0.elapsed().as_secs_f64();
    report.writer_wait_seconds = writer_wait.as_secs_f64();
    report.reader_waits = shared.reader_waits.load(Ordering::Relaxed);
    report.reader_wait_seconds = shared.reader_wait_ns.load(Ordering::Relaxed) as f64 / 1e9;
    Ok(Woven {
        report,
        streams: per_stream.into_iter().collect(),
        errors,
        entries,
        stored,
        samples: sampler.out,
    })
}
