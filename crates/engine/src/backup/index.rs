//! The job's index and its end: after every drive's data is on tape, the first drive
//! writes the catalog's rows of the job as index chunks in the control stream, then
//! the `JobEnd` record that points at them.

use crate::error::Result;
use crate::media::writer::VolumeWriter;
use tapeloom_catalog::{Catalog, FileRow};
use tapeloom_format::{EntryType, IndexEntry, Pos, Timestamp};

/// Rows per index chunk (and per catalog page read).
const PAGE: usize = 2048;

/// Writes the job's index with `w`; returns where it starts.
pub(crate) fn write_index(cat: &Catalog, job_id: i64, w: &mut VolumeWriter) -> Result<Pos> {
    let mut first_at = None;
    let mut after: Option<Vec<u8>> = None;
    loop {
        let page = cat.files_after(job_id, after.as_deref(), PAGE)?;
        let next = match page.last() {
            Some(last) if page.len() == PAGE => Some(last.path.clone()),
            _ => None,
        };
        let chunk: Vec<IndexEntry> = page.into_iter().map(index_entry).collect::<Result<_>>()?;
        let at = w.index_chunk(&IndexEntry::encode_chunk(&chunk))?;
        first_at.get_or_insert(at);
        match next {
            Some(path) => after = Some(path),
            None => break,
        }
    }
    match first_at {
        Some(at) => w.ctl_position(at),
        None => Ok(Pos::default()),
    }
}

fn index_entry(r: FileRow) -> Result<IndexEntry> {
    Ok(IndexEntry {
        stream: r.stream,
        kind: EntryType::from_u8(r.kind)?,
        size: r.size,
        mtime: Timestamp::from_nanos(r.mtime_ns),
        mode: r.mode,
        start: Pos {
            volume_seq: r.start_seq,
            lbn: r.start_lbn,
            offset: r.start_off,
        },
        end: Pos {
            volume_seq: r.end_seq,
            lbn: r.end_lbn,
            offset: 0,
        },
        crc: r.crc,
        path: r.path,
        link: r.link,
    })
}
