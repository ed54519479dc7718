//! Recovering a job that never wrote its index (FORMAT.md 7.1).
//!
//! A backup killed mid-write leaves its blocks on tape and, in the catalog, the rows
//! of the entries it had recorded when it died; a catalog rebuilt from tapes alone
//! has not even those, as the index is written last. Every entry record in a data
//! stream says where it starts, and the records that follow say where it ends, so the
//! job's data streams, read in order across its segments, give every entry that
//! reached tape whole: [`StreamRows`] reads them as it does a staged stream's blocks.
//! The extents are formed again from the blocks read, so a restore of one stream
//! skips the others. Entries cut by the end of the data (the one being written when
//! the job died) or by a bad block get no row; they are named in the job's errors,
//! so that the job is `partial`, says why, and a reader of the whole job passes over
//! their records.
//!
//! In a set (FORMAT.md 5.9) a metadata-only entry has no `Data` or `FileEnd`: it is
//! whole with its `Entry` record ([`tapeloom_format::Entry::has_data`]). The job's
//! set, level and base are in its `JobStart`, which the catalog has from the backup
//! or from `catalog rebuild`. The paths it found deleted were to be written in its
//! index only: a recovered job has none, and the set's next job, comparing against
//! the tree at this one, finds them deleted then.

use crate::backup::mux::Extents;
use crate::error::{JobError, Result};
use crate::home::{Home, Library};
use crate::media::policy::mount;
use crate::media::scan::{Scan, Scanned};
use crate::stage::rows::StreamRows;
use std::collections::{BTreeMap, HashSet};
use tapeloom_catalog::{Catalog, FileRow, JobState, JobVolume};
use tapeloom_format::{
    open_block, BlockHeader, DataKey, FormatError, BLOCK_HEADER_LEN, CONTINUATION_STREAM,
    CONTROL_STREAM, MAX_BLOCK_SIZE,
};

/// What a recovery found.
#[derive(Debug, Clone, Default)]
pub struct RecoverReport {
    /// The job.
    pub job_id: i64,
    /// Entries the catalog had already.
    pub files_known: u64,
    /// Entries found whole in the data streams and added.
    pub files_added: u64,
    /// Data bytes of the entries added.
    pub bytes_added: u64,
    /// Blocks of the job read.
    pub blocks_read: u64,
    /// Blocks that failed their checks.
    pub bad_blocks: u64,
    /// Entries not whole on tape, and why: (path, reason).
    pub cut: Vec<(String, String)>,
}

/// Recovers job `job_id` of the home's catalog from its data streams on tape. Only a
/// job that did not end (`failed`) can be recovered; the jobs before it are not read.
pub fn recover(home: &Home, job_id: i64) -> Result<RecoverReport> {
    let mut lib = home.library()?;
    recover_with(&home.catalog, &mut lib, &home.keys, job_id)
}

/// [`recover`], with the library already open.
pub(crate) fn recover_with(
    cat: &Catalog,
    lib: &mut Library,
    keys: &[tapeloom_format::MasterKey],
    job_id: i64,
) -> Result<RecoverReport> {
    let why = (&b"<job>"[..], RECOVERED);
    read_entries(cat, lib, keys, job_id, (JobState::Partial, why))
}

/// Reads the entries of job `job_id` (`failed`) from its data streams on tape,
/// adds those the catalog lacks, and ends the job in `state`, with `why` (a path
/// and the reason) among its errors: `partial` for a job that did not end
/// ([`recover_with`]), `salvaged` for one whose start record could not be used
/// (`catalog rebuild`; its reason has no path, so `jobs` shows it).
pub(crate) fn read_entries(
    cat: &Catalog,
    lib: &mut Library,
    keys: &[tapeloom_format::MasterKey],
    job_id: i64,
    (state, (path, why)): (JobState, (&[u8], &str)),
) -> Result<RecoverReport> {
    let job = cat.job(job_id)?.ok_or(JobError::NoJob(job_id))?;
    let key = crate::crypt::for_job(keys, &job)?.map(|c| c.data);
    if job.status != JobState::Failed {
        return Err(JobError::NotFailed {
            id: job_id,
            status: job.status.as_str(),
        }
        .into());
    }
    let known: HashSet<Vec<u8>> = cat
        .files(job_id, None)?
        .into_iter()
        .map(|r| r.path)
        .collect();
    let names: BTreeMap<u16, String> = cat
        .streams(job_id)?
        .into_iter()
        .map(|s| (s.stream, s.name))
        .collect();
    let mut report = RecoverReport {
        job_id,
        files_known: known.len() as u64,
        ..RecoverReport::default()
    };
    let mut vols = cat.job_volumes(job_id)?;
    vols.sort_by_key(|v| v.seq);
    let mut reading = Reading {
        tag: job.tag,
        streams: BTreeMap::new(),
        extents: Extents::default(),
        buf: vec![0u8; MAX_BLOCK_SIZE],
        expanded: Vec::new(),
        key,
    };
    for v in &vols {
        let last = reading.segment(lib, v, &mut report)?;
        if v.last_lbn.is_none() {
            if let Some(l) = last {
                cat.end_job_volume(job_id, v.seq, l)?;
            }
        }
    }
    reading.extents.finish();
    cat.replace_extents(job_id, &reading.extents.closed)?;
    let (rows, cut) = reading.finish(&names, &known);
    report.files_added = rows.len() as u64;
    report.bytes_added = data_bytes(&rows);
    for chunk in rows.chunks(4096) {
        cat.add_files(job_id, chunk)?;
    }
    let said: HashSet<Vec<u8>> = cat.errors(job_id)?.into_iter().map(|(p, _)| p).collect();
    for (path, why) in &cut {
        if !said.contains(path) {
            cat.add_error(job_id, path, why)?;
        }
    }
    report.cut = cut
        .into_iter()
        .map(|(p, why)| (crate::display_path(&p), why))
        .collect();
    let all = cat.files(job_id, None)?;
    let ended = crate::clock::now()?.as_nanos();
    cat.finish_job(
        job_id,
        state,
        all.len() as u64,
        data_bytes(&all),
        job.seconds,
        ended,
    )?;
    cat.add_error(job_id, path, why)?;
    Ok(report)
}

/// The job error a recovered job carries.
const RECOVERED: &str =
    "the backup stopped before it wrote its index; its entries were recovered from its data streams";

fn data_bytes(rows: &[FileRow]) -> u64 {
    rows.iter()
        .filter(|r| r.has_data())
        .fold(0u64, |a, r| a.saturating_add(r.size))
}

/// One data stream as it is read back.
struct StreamState {
    rows: StreamRows,
    /// The next block's sequence number within the stream, and its stream offset.
    seq: u64,
    next_offset: u64,
    /// Where each block of the stream lies: (volume seq, LBN), by block seq.
    at: Vec<(u32, u64)>,
    /// Entries found whole.
    done: Vec<FileRow>,
    /// The records could not be followed past a block: the rest is not read.
    broken: Option<String>,
}

struct Reading {
    tag: u64,
    streams: BTreeMap<u16, StreamState>,
    extents: Extents,
    buf: Vec<u8>,
    expanded: Vec<u8>,
    /// The job's data key, when it is encrypted.
    key: Option<DataKey>,
}

impl Reading {
    /// Reads the job's segment on one volume; returns the last block of the job
    /// found there.
    fn segment(
        &mut self,
        lib: &mut Library,
        v: &JobVolume,
        report: &mut RecoverReport,
    ) -> Result<Option<u64>> {
        let (_, mut drive) = mount(lib, &v.volume.barcode, None)?;
        drive.locate(v.first_lbn)?;
        let mut scan = Scan {
            lbn: v.first_lbn,
            uuid: v.volume.uuid,
        };
        let mut last = None;
        loop {
            if v.last_lbn.is_some_and(|l| scan.lbn > l) {
                break;
            }
            let (this, h, n) = match scan.next(&mut *drive, &mut self.buf)? {
                Scanned::Block { lbn, header, len } => (lbn, header, len),
                // Filemarks lie inside segments (every --segment-size).
                Scanned::Filemark => continue,
                Scanned::End => break,
                Scanned::Bad => {
                    report.bad_blocks += 1;
                    continue;
                }
            };
            if h.job_tag != self.tag {
                if v.last_lbn.is_none() {
                    // The segment of a job that died ends where the next job begins.
                    break;
                }
                report.bad_blocks += 1;
                continue;
            }
            last = Some(this);
            report.blocks_read += 1;
            if h.stream == CONTROL_STREAM || h.stream == CONTINUATION_STREAM {
                continue;
            }
            self.extents.landed(h.stream, h.stream_offset, v.seq, this);
            self.block(&h, n, (v.seq, this));
        }
        drive.unload()?;
        Ok(last)
    }

    /// Feeds one block of a data stream to its reader.
    fn block(&mut self, h: &BlockHeader, n: usize, at: (u32, u64)) {
        let s = self.streams.entry(h.stream).or_insert_with(|| StreamState {
            rows: StreamRows::new(h.stream),
            seq: 0,
            next_offset: 0,
            at: Vec::new(),
            done: Vec::new(),
            broken: None,
        });
        if s.broken.is_some() || h.stream_offset < s.next_offset {
            // A block of bytes already read is the copy of one written again after
            // a write was reported failed: the first is as good.
            return;
        }
        if h.stream_offset != s.next_offset {
            // Blocks missing (bad, or never written): their bytes are lost.
            let (from, to) = (s.next_offset, h.stream_offset);
            if s.rows.lost_block(s.seq, from, to).is_err() {
                s.broken = Some(format!("stream bytes {from}..{to} out of order"));
                return;
            }
            s.at.push(at);
            s.seq += 1;
        }
        let block = &self.buf[..n];
        let payload: std::result::Result<&[u8], FormatError> = if h.compressed || h.encrypted {
            open_block(h, block, self.key.as_ref(), &mut self.expanded).and_then(|()| {
                self.expanded
                    .get(BLOCK_HEADER_LEN..)
                    .ok_or(FormatError::Truncated("block"))
            })
        } else {
            block
                .get(BLOCK_HEADER_LEN..BLOCK_HEADER_LEN + h.payload_len as usize)
                .ok_or(FormatError::Truncated("block"))
        };
        let payload = match payload {
            Ok(p) => p,
            Err(e) => {
                s.broken = Some(e.to_string());
                return;
            }
        };
        s.at.push(at);
        match s.rows.block(s.seq, h.first_record, payload) {
            Ok((done, _)) => {
                for d in done {
                    let (Some(&st), Some(&en)) = (
                        s.at.get(d.start_block as usize),
                        s.at.get(d.end_block as usize),
                    ) else {
                        continue;
                    };
                    s.done.push(crate::backup::mux::landed(d.row, st, en));
                }
            }
            Err(e) => s.broken = Some(e.to_string()),
        }
        s.seq += 1;
        s.next_offset = h.stream_offset + h.payload_len as u64;
    }

    /// The rows found (those the catalog lacks), and the entries not whole on tape
    /// with the reason.
    fn finish(
        self,
        names: &BTreeMap<u16, String>,
        known: &HashSet<Vec<u8>>,
    ) -> (Vec<FileRow>, Vec<(Vec<u8>, String)>) {
        let (mut rows, mut cut) = (Vec::new(), Vec::new());
        for (id, mut s) in self.streams {
            let name = names.get(&id).cloned().unwrap_or_else(|| id.to_string());
            rows.extend(s.done.drain(..).filter(|r| !known.contains(&r.path)));
            if let Some(why) = s.broken {
                cut.push((
                    format!("<stream {name}>").into_bytes(),
                    format!("its records could not be followed ({why}); the entries after that point are not recovered"),
                ));
                continue;
            }
            s.rows.finish();
            for l in s.rows.take_lost() {
                let (from, to) = (l.from, l.to);
                let path = l
                    .path
                    .unwrap_or_else(|| format!("<stream {name}, bytes {from}..{to}>").into_bytes());
                cut.push((
                    path,
                    format!("stream bytes {from}..{to} are not on tape (a bad block)"),
                ));
            }
            if s.rows.end().is_none() {
                if let Some(p) = s.rows.open_entry() {
                    if !known.contains(p) {
                        cut.push((
                            p.to_vec(),
                            "the backup stopped while this entry was written: it is not whole on tape".into(),
                        ));
                    }
                }
            }
        }
        (rows, cut)
    }
}
