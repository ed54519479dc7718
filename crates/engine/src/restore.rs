//! Restore: whole jobs, or chosen paths, reading only the blocks that hold them.

use crate::error::{Error, Result};
use crate::fsmeta::Placer;
use crate::home::Home;
use crate::jobread::{Got, JobReader, Sink, Streams};
use crate::writers::{Writers, SMALL};
use std::collections::HashMap;
use std::collections::HashSet;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::Instant;
use tapeloom_catalog::{Extent, FileRow, JobVolume, Sample};
use tapeloom_format::{Entry, EntryType, Event, FileEnd, Kind};

/// How to restore.
#[derive(Debug, Clone, Default)]
pub struct RestoreOptions {
    /// Where to put the restored tree.
    pub to: PathBuf,
    /// Paths (files or directories) of the job to restore; all when empty.
    pub paths: Vec<Vec<u8>>,
    /// Drive to read with, when the user chose one.
    pub drive: Option<usize>,
    /// Restore only this stream (by name).
    pub stream: Option<String>,
    /// How to pass over data that is not wanted between two wanted runs.
    pub skip_by: SkipBy,
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

/// What a restore did.
#[derive(Debug, Clone, Default)]
pub struct RestoreReport {
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
    /// Gaps between wanted runs passed by reading through.
    pub read_through: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Modeled seconds of the drives' work, when they have a timing model.
    pub modeled_seconds: Option<f64>,
    /// Data bytes restored per stream, by name.
    pub streams: Vec<(String, u64)>,
    /// The last drive's statistics, when it keeps them.
    pub drive_stats: Option<tapeloom_device::DriveStats>,
    /// The model's lower bound for the same reads: every wanted block read at full
    /// speed, every gap passed the cheaper way (locate or read through), plus loads
    /// and unloads. With no overheads beyond the tape's physics, this is the best any
    /// restore of these blocks can do on this drive.
    pub bound_seconds: Option<f64>,
    /// Objects that could not be restored: path and reason.
    pub errors: Vec<(String, String)>,
    /// What the drive said about each cartridge at the end of its mount.
    pub health: Vec<(String, tapeloom_device::DriveHealth)>,
}

/// Threads writing small files.
const WRITERS: usize = 3;

/// Blocks between two wanted runs that are read through rather than skipped by locate.
const READ_THROUGH: u64 = 2;

struct Open {
    entry: Entry,
    wanted: bool,
    file: Option<File>,
    /// A small file's data, gathered for the writers.
    buf: Option<Vec<u8>>,
    crc: u32,
    written: u64,
    failed: Option<String>,
}

struct Restorer {
    placer: Placer,
    want: Option<HashSet<Vec<u8>>>,
    open: std::collections::HashMap<u16, Open>,
    dirs: Vec<Entry>,
    report: RestoreReport,
    /// Small-file writers; taken when the reading is done.
    writers: Option<Writers>,
    /// Data bytes restored per stream, for the samples.
    per_stream: HashMap<u16, u64>,
}

impl Restorer {
    fn wanted(&self, path: &[u8]) -> bool {
        self.want.as_ref().is_none_or(|w| w.contains(path))
    }

    fn fail(&mut self, path: &[u8], why: String) {
        self.report.errors.push((crate::display_path(path), why));
    }

    fn close(&mut self, stream: u16, end: Option<FileEnd>) {
        let Some(mut o) = self.open.remove(&stream) else {
            return;
        };
        if !o.wanted {
            return;
        }
        if o.failed.is_none() {
            match end {
                Some(fe) if fe.crc != o.crc => {
                    o.failed = Some(format!(
                        "checksum mismatch (tape says {:08x}, data gives {:08x})",
                        fe.crc, o.crc
                    ))
                }
                None if o.entry.kind == EntryType::Regular => {
                    o.failed = Some("its data ends early".into())
                }
                _ => {}
            }
        }
        if o.failed.is_none() {
            if let Some(data) = o.buf.take() {
                let p = self.placer.path_of(&o.entry.path);
                let sent = match &self.writers {
                    Some(w) => w.submit(p, o.entry.clone(), data),
                    None => Err("the writers are closed".into()),
                };
                if let Err(e) = sent {
                    self.fail(&o.entry.path, e);
                }
                return;
            }
        }
        let file = o.file.take();
        match o.failed {
            Some(why) => {
                let p = self.placer.path_of(&o.entry.path);
                if o.entry.kind == EntryType::Regular {
                    let _ = std::fs::remove_file(p);
                }
                self.fail(&o.entry.path, why);
            }
            None => {
                let done = match &file {
                    Some(f) => self.placer.finish_file(f, &o.entry),
                    None => self.placer.finish(&o.entry),
                };
                if let Err(e) = done {
                    self.fail(&o.entry.path, e.to_string());
                    return;
                }
                self.report.files += 1;
                self.report.bytes += o.entry.size;
            }
        }
    }

    fn entry(&mut self, stream: u16, e: Entry) {
        if self.open.contains_key(&stream) {
            self.lost(stream, "the entry after it began before its data ended");
        }
        let wanted = self.wanted(&e.path);
        let mut o = Open {
            entry: e,
            wanted,
            file: None,
            buf: None,
            crc: 0,
            written: 0,
            failed: None,
        };
        let small =
            o.entry.kind == EntryType::Regular && o.entry.sparse.is_none() && o.entry.size <= SMALL;
        if wanted && small {
            match self.placer.parents(&o.entry.path) {
                Ok(()) => o.buf = Some(Vec::with_capacity(o.entry.size as usize)),
                Err(err) => o.failed = Some(err.to_string()),
            }
        } else if wanted {
            if o.entry.kind == EntryType::HardLink {
                // Its target may still be with the writers.
                if let Some(w) = &self.writers {
                    w.wait();
                }
            }
            match self.placer.create(&o.entry) {
                Ok(f) => o.file = f,
                Err(err) => o.failed = Some(err.to_string()),
            }
        }
        if o.entry.kind == EntryType::Regular {
            self.open.insert(stream, o);
        } else if wanted {
            if let Some(why) = o.failed {
                self.fail(&o.entry.path, why);
            } else if o.entry.kind == EntryType::Directory {
                self.report.files += 1;
                self.dirs.push(o.entry);
            } else {
                match self.placer.finish(&o.entry) {
                    Ok(()) => self.report.files += 1,
                    Err(err) => self.fail(&o.entry.path, err.to_string()),
                }
            }
        }
    }

    fn data(&mut self, stream: u16, chunk: &[u8]) {
        let Some(o) = self.open.get_mut(&stream) else {
            return;
        };
        if !o.wanted || o.failed.is_some() {
            return;
        }
        *self.per_stream.entry(stream).or_default() += chunk.len() as u64;
        o.crc = crc32c::crc32c_append(o.crc, chunk);
        if let Some(buf) = o.buf.as_mut() {
            if buf.len() as u64 + chunk.len() as u64 > o.entry.size {
                o.failed = Some("more data than its size".into());
            } else {
                buf.extend_from_slice(chunk);
            }
            return;
        }
        let Some(f) = o.file.as_ref() else { return };
        // Map stored bytes to file offsets: dense files in order, sparse ones by extent.
        let mut rest = chunk;
        while !rest.is_empty() {
            let (off, room) = match &o.entry.sparse {
                None => (o.written, u64::MAX),
                Some(ext) => {
                    let mut skip = o.written;
                    let mut found = None;
                    for &(eo, el) in ext {
                        if skip < el {
                            found = Some((eo + skip, el - skip));
                            break;
                        }
                        skip -= el;
                    }
                    match found {
                        Some(x) => x,
                        None => {
                            o.failed = Some("more data than its extents hold".into());
                            return;
                        }
                    }
                }
            };
            let n = (rest.len() as u64).min(room) as usize;
            if let Err(e) = f.write_all_at(&rest[..n], off) {
                o.failed = Some(format!("write failed: {e}"));
                return;
            }
            o.written += n as u64;
            rest = &rest[n..];
        }
    }

    fn finish_dirs(&mut self) {
        // Deepest first, so setting a parent's mtime comes after its children changed it.
        let mut dirs = std::mem::take(&mut self.dirs);
        dirs.sort_by_key(|d| {
            std::cmp::Reverse(
                d.path.iter().filter(|&&b| b == b'/').count() + usize::from(d.path != b"."),
            )
        });
        for d in dirs {
            if let Err(e) = self.placer.finish(&d) {
                self.fail(&d.path, e.to_string());
            }
        }
    }
}

impl Sink for Restorer {
    fn event(&mut self, stream: u16, ev: Event<'_>, _at: (u32, u64)) -> Result<()> {
        match ev {
            Event::Record {
                kind: Kind::Entry,
                body,
            } => match Entry::decode(body) {
                Ok(e) => self.entry(stream, e),
                Err(err) => {
                    self.lost(stream, &err.to_string());
                    self.fail(b"?", format!("an entry on tape is refused: {err}"));
                }
            },
            Event::Record {
                kind: Kind::FileEnd,
                body,
            } => {
                let fe = FileEnd::decode(body).ok();
                self.close(stream, fe);
            }
            Event::Data(chunk) => self.data(stream, chunk),
            _ => {}
        }
        Ok(())
    }

    fn lost(&mut self, stream: u16, why: &str) {
        if let Some(o) = self.open.get_mut(&stream) {
            if o.failed.is_none() {
                o.failed = Some(why.to_string());
            }
            self.close(stream, None);
        }
    }
}

/// Restores job `job_id` (or the chosen paths of it) under `opts.to`.
pub fn restore(home: &Home, job_id: i64, opts: &RestoreOptions) -> Result<RestoreReport> {
    let t0 = Instant::now();
    let cat = &home.catalog;
    let (mut reader, vols) = JobReader::open(home, job_id, opts.drive)?;
    // What to read: every file under each chosen path, plus hard-link targets.
    let mut rows: Vec<FileRow> = Vec::new();
    let only_stream = match &opts.stream {
        None => None,
        Some(name) => Some(
            cat.streams(job_id)?
                .into_iter()
                .find(|s| &s.name == name)
                .map(|s| s.stream)
                .ok_or_else(|| Error::Msg(format!("job {job_id} has no stream {name}")))?,
        ),
    };
    let want = if opts.paths.is_empty() && only_stream.is_none() {
        None
    } else {
        let mut set = HashSet::new();
        if opts.paths.is_empty() {
            if let Some(id) = only_stream {
                cat.for_each_file(job_id, None, |r| {
                    if r.stream == id {
                        rows.push(r);
                    }
                    Ok(())
                })?;
            }
        }
        for p in &opts.paths {
            let p = normalize(p);
            let before = rows.len();
            cat.for_each_file(job_id, Some(&p), |r| {
                if only_stream.is_none_or(|id| id == r.stream) {
                    rows.push(r);
                }
                Ok(())
            })?;
            if rows.len() == before {
                return Err(Error::Msg(format!(
                    "job {job_id} has no path {}",
                    crate::display_path(&p)
                )));
            }
        }
        let mut extra = Vec::new();
        for r in &rows {
            set.insert(r.path.clone());
            if r.kind == EntryType::HardLink as u8 {
                if let Some(t) = cat.file(job_id, &r.link)? {
                    extra.push(t);
                }
            }
        }
        for t in extra {
            if set.insert(t.path.clone()) {
                rows.push(t);
            }
        }
        Some(set)
    };
    let mut rs = Restorer {
        placer: Placer::new(&opts.to)?,
        want,
        open: Default::default(),
        dirs: Vec::new(),
        report: RestoreReport::default(),
        writers: Some(Writers::new(WRITERS)),
        per_stream: HashMap::new(),
    };
    let names: HashMap<u16, String> = cat
        .streams(job_id)?
        .into_iter()
        .map(|s| (s.stream, s.name))
        .collect();
    let mut samples = Vec::new();
    let mut last_sample = Instant::now();
    let drive_series = format!("drive:{}", opts.drive.unwrap_or(0));
    let sample = |reader: &JobReader, rs: &Restorer, out: &mut Vec<Sample>| {
        let t_ms = t0.elapsed().as_millis() as u64;
        let st = reader.drive_stats();
        out.push(Sample {
            series: drive_series.clone(),
            t_ms,
            bytes: reader.bytes_read,
            pool_fill: 0.0,
            buffer_fill: st.as_ref().map(|s| s.buffer_fill),
            backhitches: st.as_ref().map(|s| s.backhitches).unwrap_or(0),
            speed_mb_s: st.as_ref().map(|s| s.speed_now_mb_s),
        });
        for (id, b) in &rs.per_stream {
            out.push(Sample {
                series: format!(
                    "stream:{}",
                    names.get(id).map(|s| s.as_str()).unwrap_or("?")
                ),
                t_ms,
                bytes: *b,
                pool_fill: 0.0,
                buffer_fill: None,
                backhitches: 0,
                speed_mb_s: None,
            });
        }
    };

    let mut streams = Streams::default();
    let extents = cat.extents(job_id)?;
    let (runs, hints) = plan_runs(&vols, &mut rows, rs.want.is_none(), &extents);
    let mut bound = 0.0f64;
    let mut modeled = false;
    for run in runs {
        if reader.at().is_none_or(|(seq, _)| seq != run.start.0) {
            // Mount the volume: the reader stands after its label.
            reader.seek(run.start.0, 1)?;
        }
        if let Some((seq, lbn)) = reader.at() {
            if seq == run.start.0 && lbn < run.start.1 {
                let travel = reader.travel(run.start.1);
                if let Some(t) = travel {
                    bound += t.read.min(t.locate);
                    modeled = true;
                }
                let read = match opts.skip_by {
                    SkipBy::Read => true,
                    SkipBy::Locate => false,
                    SkipBy::Auto => travel.is_some_and(|t| t.read <= t.locate),
                };
                if read {
                    rs.report.read_through += 1;
                    reader.pass(run.start.1)?;
                }
            }
        }
        if reader.at() != Some(run.start) {
            reader.seek(run.start.0, run.start.1)?;
        }
        while let Some(at) = reader.at() {
            if at > run.end {
                break;
            }
            if last_sample.elapsed().as_secs() >= 1 {
                last_sample = Instant::now();
                sample(&reader, &rs, &mut samples);
            }
            if let Some(c) = reader.read_cost(at.1, at.1 + 1) {
                bound += c;
            }
            match reader.next()? {
                Got::End => break,
                Got::Bad { seq, lbn, why } => {
                    let barcode = vols
                        .iter()
                        .find(|v| v.seq == seq)
                        .map(|v| v.volume.barcode.as_str())
                        .unwrap_or("?");
                    for p in cat.files_in_block(job_id, seq, lbn)? {
                        if rs.wanted(&p) {
                            rs.fail(&p, format!("block {lbn} of {barcode} is bad: {why}"));
                        }
                    }
                }
                Got::Block { seq, lbn, header } => {
                    let block = reader.block();
                    let payload = header.payload(block);
                    let hint = hints.get(&(seq, lbn, header.stream)).copied();
                    streams.feed(&header, payload, (seq, lbn), hint, &mut rs)?;
                }
            }
        }
    }
    streams.finish(&mut rs);
    sample(&reader, &rs, &mut samples);
    cat.clear_samples(job_id, "restore")?;
    cat.add_samples(job_id, "restore", &samples)?;
    let health = reader.take_health();
    cat.clear_drive_health(job_id, "restore")?;
    for (barcode, h) in &health {
        let text = serde_json::to_string(h).map_err(|e| Error::Msg(e.to_string()))?;
        cat.add_drive_health(
            job_id,
            "restore",
            opts.drive.unwrap_or(0) as i64,
            barcode,
            &text,
        )?;
    }
    if let Some(w) = rs.writers.take() {
        let (files, bytes, errors) = w.finish();
        rs.report.files += files;
        rs.report.bytes += bytes;
        rs.report.errors.extend(errors);
    }
    rs.finish_dirs();
    let per_stream = std::mem::take(&mut rs.per_stream);
    let mut report = rs.report;
    // A file named for a bad block may also have failed its checksum: name it once.
    let mut seen = HashSet::new();
    report.errors.retain(|e| seen.insert(e.0.clone()));
    report.blocks_read = reader.blocks_read;
    report.bytes_read_from_tape = reader.bytes_read;
    report.locates = reader.locates;
    report.mounts = reader.mounts;
    report.drive_stats = reader.drive_stats();
    report.health = health;
    let mut per: Vec<(u16, u64)> = per_stream.into_iter().collect();
    per.sort();
    report.streams = per
        .into_iter()
        .map(|(id, b)| (names.get(&id).cloned().unwrap_or_default(), b))
        .collect();
    report.modeled_seconds = reader.modeled_seconds();
    if modeled || report.modeled_seconds.is_some() {
        report.bound_seconds = Some(bound + reader.fixed_seconds);
    }
    report.seconds = t0.elapsed().as_secs_f64();
    Ok(report)
}

/// A stretch of a job's blocks to read in one go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    /// (volume seq, LBN) of the first block.
    start: (u32, u64),
    /// (volume seq, LBN) of the last block; reading stops after it.
    end: (u32, u64),
}

/// Where wanted entries start: (volume seq, LBN, stream) to payload offset.
type Hints = HashMap<(u32, u64, u16), u32>;

/// What to read: the whole job as one run; or, for chosen entries, the blocks that
/// hold them. With an extent map (multiplexed jobs) that is only the wanted
/// streams' extents within each entry's span, so other streams' data is skipped by
/// locate; without one, each entry's span. Runs closer than [`READ_THROUGH`] blocks
/// are merged (reading through a few blocks beats a locate).
fn plan_runs(
    vols: &[JobVolume],
    rows: &mut [FileRow],
    whole: bool,
    extents: &[Extent],
) -> (Vec<Run>, Hints) {
    let mut hints = Hints::new();
    if whole {
        let run = Run {
            start: (vols[0].seq, vols[0].first_lbn),
            end: (u32::MAX, u64::MAX),
        };
        return (vec![run], hints);
    }
    rows.sort_by_key(|r| (r.start_seq, r.start_lbn, r.start_off));
    let mut by_stream: HashMap<u16, Vec<&Extent>> = HashMap::new();
    for e in extents {
        by_stream.entry(e.stream).or_default().push(e);
    }
    let mut pieces: Vec<Run> = Vec::new();
    for r in rows.iter() {
        let at = (r.start_seq, r.start_lbn, r.stream);
        let off = hints.entry(at).or_insert(r.start_off);
        *off = (*off).min(r.start_off);
        let start = (r.start_seq, r.start_lbn);
        let end = (r.end_seq, r.end_lbn);
        match by_stream.get(&r.stream) {
            Some(ext) => {
                // Extents are in tape order: the first that ends at or after `start`.
                let from = ext.partition_point(|e| (e.seq, e.first_lbn + e.blocks - 1) < start);
                for e in &ext[from..] {
                    let (first, last) = ((e.seq, e.first_lbn), (e.seq, e.first_lbn + e.blocks - 1));
                    if first > end {
                        break;
                    }
                    pieces.push(Run {
                        start: first.max(start),
                        end: last.min(end),
                    });
                }
            }
            None => pieces.push(Run { start, end }),
        }
    }
    pieces.sort_by_key(|p| (p.start, p.end));
    let mut runs: Vec<Run> = Vec::new();
    for p in pieces {
        match runs.last_mut() {
            Some(last)
                if p.start <= last.end
                    || (p.start.0 == last.end.0 && p.start.1 <= last.end.1 + READ_THROUGH + 1) =>
            {
                last.end = last.end.max(p.end);
            }
            _ => runs.push(p),
        }
    }
    (runs, hints)
}

/// A path as the user typed it, in job-namespace form: no leading `./` or `/`, no
/// trailing `/`; `.` for the root.
pub fn normalize(p: &[u8]) -> Vec<u8> {
    let mut p = p;
    while let Some(r) = p.strip_prefix(b"./") {
        p = r;
    }
    while let Some(r) = p.strip_prefix(b"/") {
        p = r;
    }
    while p.len() > 1 && p.ends_with(b"/") {
        p = &p[..p.len() - 1];
    }
    if p.is_empty() {
        b".".to_vec()
    } else {
        p.to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tapeloom_catalog::Volume;

    fn row(start: (u32, u64, u32), end: (u32, u64)) -> FileRow {
        FileRow {
            path: vec![],
            stream: 1,
            kind: 1,
            mode: 0,
            uid: 0,
            gid: 0,
            size: 0,
            mtime_ns: 0,
            start_seq: start.0,
            start_lbn: start.1,
            start_off: start.2,
            end_seq: end.0,
            end_lbn: end.1,
            crc: 0,
            link: vec![],
        }
    }

    fn vol() -> JobVolume {
        JobVolume {
            seq: 0,
            volume: Volume {
                id: 1,
                barcode: "TL0001L9".into(),
                uuid: [0; 16],
                pool: "default".into(),
                block_size: 65536,
                status: "append".into(),
            },
            first_lbn: 2,
            last_lbn: None,
        }
    }

    fn spans(runs: &[Run]) -> Vec<((u32, u64), (u32, u64))> {
        runs.iter().map(|r| (r.start, r.end)).collect()
    }

    #[test]
    fn runs_merge_when_close_and_split_when_far() {
        let mut rows = vec![
            row((0, 100, 5), (0, 101)),
            row((0, 10, 0), (0, 12)),
            row((0, 13, 7), (0, 13)),
            row((1, 3, 0), (1, 4)),
        ];
        let (runs, hints) = plan_runs(std::slice::from_ref(&vol()), &mut rows, false, &[]);
        assert_eq!(
            spans(&runs),
            vec![((0, 10), (0, 13)), ((0, 100), (0, 101)), ((1, 3), (1, 4))]
        );
        assert_eq!(hints.get(&(0, 100, 1)), Some(&5));
        let (whole, _) = plan_runs(&[vol()], &mut rows, true, &[]);
        assert_eq!(whole.len(), 1);
        assert_eq!(whole[0].start, (0, 2));
    }

    #[test]
    fn runs_skip_other_streams_extents() {
        let ext = |stream, first_lbn, blocks| Extent {
            stream,
            seq: 0,
            first_lbn,
            blocks,
            stream_offset: 0,
        };
        // Stream 1 at 2-11 and 40-49, stream 2 at 12-39 in between.
        let extents = [ext(1, 2, 10), ext(2, 12, 28), ext(1, 40, 10)];
        let mut rows = vec![row((0, 8, 100), (0, 44))];
        let (runs, _) = plan_runs(&[vol()], &mut rows, false, &extents);
        assert_eq!(spans(&runs), vec![((0, 8), (0, 11)), ((0, 40), (0, 44))]);
    }

    #[test]
    fn user_paths_are_normalized() {
        assert_eq!(normalize(b"./a/b/"), b"a/b");
        assert_eq!(normalize(b"/a"), b"a");
        assert_eq!(normalize(b"./"), b".");
    }
}
