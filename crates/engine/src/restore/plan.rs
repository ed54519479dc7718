//! Restore planning: which entries a restore wants (chosen paths, a stream, hard-link
//! targets), and the runs of blocks that hold them, in tape order.

use crate::error::{JobError, Result};
use crate::restore::RestoreOptions;
use std::collections::{HashMap, HashSet};
use tapeloom_catalog::{Catalog, Extent, FileRow, JobVolume};
use tapeloom_format::EntryType;
pub use tapeloom_tree::{normalize, Expect};

/// Blocks between two wanted runs that are read through rather than skipped by locate.
const READ_THROUGH: u64 = 2;

/// The paths of the entries a restore wants; `None` for the whole job.
pub(crate) type Wanted = Option<HashSet<Vec<u8>>>;

/// The entries a restore wants, with their catalog rows.
pub(crate) fn select(
    cat: &Catalog,
    job_id: i64,
    opts: &RestoreOptions,
) -> Result<(Wanted, Vec<FileRow>)> {
    let mut rows: Vec<FileRow> = Vec::new();
    let only_stream = match &opts.stream {
        None => None,
        Some(name) => Some(
            cat.streams(job_id)?
                .into_iter()
                .find(|s| &s.name == name)
                .map(|s| s.stream)
                .ok_or_else(|| JobError::NoStream {
                    job: job_id,
                    name: name.clone(),
                })?,
        ),
    };
    if opts.paths.is_empty() && only_stream.is_none() {
        return Ok((None, rows));
    }
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
            return Err(JobError::NoPath {
                job: job_id,
                path: crate::display_path(&p),
            }
            .into());
        }
    }
    // Hard links need their targets.
    let mut set = HashSet::new();
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
    Ok((Some(set), rows))
}

/// What the catalog lists of the entries a restore of job `job_id` wants, by
/// path: `rows` as [`select`] gives them, or every row of the job when `whole`.
pub(crate) fn expected(
    cat: &Catalog,
    job_id: i64,
    rows: &[FileRow],
    whole: bool,
) -> Result<HashMap<Vec<u8>, Expect>> {
    let mut out = HashMap::new();
    if whole {
        cat.for_each_file(job_id, None, |r| {
            out.insert(r.path.clone(), expect_of(&r));
            Ok(())
        })?;
    }
    for r in rows {
        out.insert(r.path.clone(), expect_of(r));
    }
    Ok(out)
}

/// Paths the job reported as not backed up and holds no row for: a job error without
/// an entry. The records of such an entry may be partly on tape, cut by a block that
/// was damaged on a disk stage and never written (docs/STAGE.md 3.3); reading the
/// whole job passes over them.
pub(crate) fn left_out(cat: &Catalog, job_id: i64) -> Result<HashSet<Vec<u8>>> {
    let mut out = HashSet::new();
    for (path, _) in cat.errors(job_id)? {
        if cat.file(job_id, &path)?.is_none() {
            out.insert(path);
        }
    }
    Ok(out)
}

/// A stretch of a job's blocks to read in one go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Run {
    /// (volume seq, LBN) of the first block.
    pub start: (u32, u64),
    /// (volume seq, LBN) of the last block; reading stops after it.
    pub end: (u32, u64),
    /// A wanted entry of the run before it goes on into it: the two are read one
    /// after the other, decoding carrying on.
    pub joined: bool,
}

/// Where wanted entries start: (volume seq, LBN, stream) to payload offset.
pub(crate) type Hints = HashMap<(u32, u64, u16), u32>;

/// What to read: the whole job as one run; or, for chosen entries, the blocks that
/// hold them. With an extent map (multiplexed jobs) that is only the wanted
/// streams' extents within each entry's span, so other streams' data is skipped by
/// locate; without one, each entry's span. Runs closer than [`READ_THROUGH`] blocks
/// are merged (reading through a few blocks beats a locate).
pub(crate) fn plan_runs(
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
            joined: false,
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
                        joined: false,
                    });
                }
            }
            None => pieces.push(Run {
                start,
                end,
                joined: false,
            }),
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
    join(&mut runs, rows);
    (runs, hints)
}

/// Marks the runs a wanted entry goes on into from the run before.
fn join(runs: &mut [Run], rows: &[FileRow]) {
    // The run holding (seq, lbn): the last that starts at or before it.
    let holder =
        |runs: &[Run], at: (u32, u64)| runs.partition_point(|r| r.start <= at).checked_sub(1);
    for r in rows {
        let (Some(a), Some(b)) = (
            holder(runs, (r.start_seq, r.start_lbn)),
            holder(runs, (r.end_seq, r.end_lbn)),
        ) else {
            continue;
        };
        for run in runs.iter_mut().take(b + 1).skip(a + 1) {
            run.joined = true;
        }
    }
}

/// The expectation of catalog row `r`.
pub(crate) fn expect_of(r: &FileRow) -> Expect {
    Expect {
        stream: r.stream,
        kind: r.kind,
        size: r.size,
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
            ..FileRow::default()
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
                status: tapeloom_catalog::VolumeState::Append,
                generation: 0,
            },
            first_lbn: 2,
            last_lbn: None,
            chain: Some(0),
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
        assert!(runs.iter().all(|r| !r.joined));
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
        // The entry goes on from the first run into the second.
        assert_eq!((runs[0].joined, runs[1].joined), (false, true));
    }

    #[test]
    fn user_paths_are_normalized() {
        assert_eq!(normalize(b"./a/b/"), b"a/b");
        assert_eq!(normalize(b"/a"), b"a");
        assert_eq!(normalize(b"./"), b".");
    }
}
