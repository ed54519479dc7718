//! The job's index and its end: as each file's blocks land, the drive that wrote
//! them encodes its index entry into the job's index spool; after every drive's data
//! is on tape, the first drive writes the spooled chunks in the control stream, then
//! the `JobEnd` record that points at them.
//!
//! The spool is an unnamed temporary file, so a job of many millions of files holds
//! one chunk of entries in memory, and the index needs no second pass over the
//! catalog's rows. Entries are in the order their files landed on tape (FORMAT.md
//! 5.6 asks for none).

use crate::error::{io, Result};
use crate::media::writer::{Moved, VolumeWriter};
use std::fs::File;
use std::os::unix::fs::FileExt;
use tapeloom_catalog::FileRow;
use tapeloom_format::{EntryType, IndexEntry, IndexFacts, Pos, Timestamp};

/// Entries per index chunk.
const PAGE: u32 = 2048;

/// Index entries encoded as files land, in chunks of [`PAGE`], kept in a temporary file.
pub(crate) struct IndexSpool {
    file: Option<File>,
    /// The chunk being filled: its count (patched when it is full) and entries.
    open: Vec<u8>,
    count: u32,
    /// Where each full chunk lies in the file.
    chunks: Vec<(u64, usize)>,
    end: u64,
}

impl IndexSpool {
    pub(crate) fn new() -> Self {
        IndexSpool {
            file: None,
            open: 0u32.to_le_bytes().to_vec(),
            count: 0,
            chunks: Vec::new(),
            end: 0,
        }
    }

    /// Encodes the entries of `rows`, which have landed.
    pub(crate) fn add(&mut self, rows: Vec<FileRow>) -> Result<()> {
        for r in rows {
            index_entry(r)?.encode_into(&mut self.open);
            self.count += 1;
            if self.count == PAGE {
                self.close_chunk()?;
            }
        }
        Ok(())
    }

    /// Encodes the paths the job found deleted since its base (FORMAT.md 5.6).
    pub(crate) fn add_deleted(&mut self, paths: &[(Vec<u8>, u8)]) -> Result<()> {
        for (path, kind) in paths {
            IndexEntry {
                stream: tapeloom_format::CONTROL_STREAM,
                kind: EntryType::from_u8(*kind)?,
                size: 0,
                mtime: Timestamp::default(),
                mode: 0,
                start: Pos::default(),
                end: Pos::default(),
                crc: 0,
                path: path.clone(),
                link: Vec::new(),
                meta_only: false,
                deleted: true,
                facts: None,
            }
            .encode_into(&mut self.open);
            self.count += 1;
            if self.count == PAGE {
                self.close_chunk()?;
            }
        }
        Ok(())
    }

    /// Moves the open chunk to the file.
    fn close_chunk(&mut self) -> Result<()> {
        self.open[..4].copy_from_slice(&self.count.to_le_bytes());
        let file = match &mut self.file {
            Some(f) => f,
            None => self.file.insert(io(tempfile::tempfile(), || {
                "create the job's index spool (a temporary file)".to_string()
            })?),
        };
        io(file.write_all_at(&self.open, self.end), || {
            "write the job's index spool".to_string()
        })?;
        self.chunks.push((self.end, self.open.len()));
        self.end += self.open.len() as u64;
        self.open.truncate(4);
        self.count = 0;
        Ok(())
    }

    /// Writes the index with `w` and flushes it; returns where it starts. Entries
    /// that point at blocks written again elsewhere (`moved`) point at their new
    /// places.
    pub(crate) fn write(mut self, w: &mut VolumeWriter, moved: &[Moved]) -> Result<Pos> {
        let mut first_at = None;
        for &(at, len) in &self.chunks {
            let mut buf = vec![0u8; len];
            if let Some(f) = &self.file {
                io(f.read_exact_at(&mut buf, at), || {
                    "read the job's index spool".to_string()
                })?;
            }
            let pos = w.index_chunk(&follow(buf, moved)?)?;
            first_at.get_or_insert(pos);
        }
        if self.count > 0 || first_at.is_none() {
            self.open[..4].copy_from_slice(&self.count.to_le_bytes());
            let open = std::mem::take(&mut self.open);
            let pos = w.index_chunk(&follow(open, moved)?)?;
            first_at.get_or_insert(pos);
        }
        let Some(at) = first_at else {
            return Ok(Pos::default());
        };
        // On a drive that buffers, on tape and flushed before `JobEnd` points at
        // it: a deferred write error that moves the index shows here, and the
        // pointer follows it.
        if w.buffers() {
            w.ctl_position(at)?;
            w.sync()?;
        }
        w.ctl_position(at)
    }
}

/// A chunk of the spool with its entries pointed at the new places of `moved`.
fn follow(chunk: Vec<u8>, moved: &[Moved]) -> Result<Vec<u8>> {
    if moved.is_empty() {
        return Ok(chunk);
    }
    let mut entries = IndexEntry::decode_chunk(&chunk)?;
    for e in &mut entries {
        for p in [&mut e.start, &mut e.end] {
            if let Some(m) = moved.iter().find(|m| m.from == (p.volume_seq, p.lbn)) {
                (p.volume_seq, p.lbn) = m.to;
            }
        }
    }
    Ok(IndexEntry::encode_chunk(&entries))
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
        meta_only: r.meta_only,
        deleted: false,
        facts: Some(IndexFacts {
            ctime: Timestamp::from_nanos(r.ctime_ns),
            ino: r.ino,
            uid: r.uid,
            gid: r.gid,
        }),
    })
}
