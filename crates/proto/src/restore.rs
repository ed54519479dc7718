//! A restore through the server, on the wire. The answer to
//! `GET /api/jobs/ID/restore?path=P...` is a chunked body of frames
//! (`crate::frame::Frames`):
//!
//! 1. for an encrypted job, first, a [`Notice::JobKey`]: the job's `JobKey`
//!    record (FORMAT.md 5.8) as the catalog keeps it, its data key wrapped by the
//!    master key whose fingerprint it names (the server never holds the key
//!    file; the client unwraps it and opens each block);
//!    then notes of the selection ([`Notice::Want`] per wanted entry when paths
//!    were asked, [`Notice::LeftOut`] per entry the job could not store whole,
//!    [`Notice::Row`] per entry the catalog lists among those wanted);
//! 2. each block as stored (an encrypted job's still sealed), in the order the drives read them, with a
//!    [`Notice::Bad`] for each entry of a block that could not be read (one of
//!    empty path when it held none);
//! 3. the closing zero-length frame, then the trailer: a `u32` little-endian
//!    length and a [`Trailer`] JSON document (the server's figures, or why its
//!    reading failed midway).
//!
//! The answer to `GET /api/sets/restore?set=NAME&at=TIME&path=P...`, a set's
//! point-in-time restore, has the same shape; its selection, before any block,
//! is a [`Notice::SetAt`], then for each job read a [`Notice::Job`], its
//! [`Notice::JobKey`] when it is encrypted, a [`Notice::Want`] per entry placed
//! from it with its data, a [`Notice::Meta`] per metadata-only entry of it and a
//! [`Notice::Row`] per entry of either, and last a [`Notice::Missing`] per file
//! no job holds the data of. A
//! [`Notice::Of`] says whose are the blocks and [`Notice::Bad`] notes that
//! follow it.

use super::error::ServerError;
use crate::frame::Frame;
use serde::{Deserialize, Serialize};

/// Bytes of a trailer at most.
pub const MAX_TRAILER: usize = 64 * 1024;

/// The reason word of a wanted entry's note.
const WANT: &str = "want";
/// The reason word of a left-out entry's note.
const LEFT_OUT: &str = "left-out";
/// The reason word of an encrypted job's key note.
const JOB_KEY: &str = "job-key";
/// The prefix of a bad block's note.
const BAD: &str = "bad: ";
/// The reason word of a set's point in time's note.
const SET_AT: &str = "set-at";
/// The reason word of a set's job's note.
const JOB: &str = "job";
/// The reason word of a metadata-only entry's note.
const META: &str = "meta";
/// The reason word of a note of a file no job holds the data of.
const MISSING: &str = "missing";
/// The reason word of the note that says whose the next blocks are.
const OF: &str = "of-job";
/// The prefix of the note of what the catalog lists of an entry: `row STREAM
/// TYPE SIZE`.
const ROW: &str = "row ";

/// What the catalog lists of an entry a restore expects to meet on tape (a
/// [`Notice::Row`]): its stream, type and size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expect {
    /// The stream that holds it.
    pub stream: u16,
    /// Its type (FORMAT.md 5.3).
    pub kind: u8,
    /// Its logical size.
    pub size: u64,
}

/// A job of a set's restore, as its note gives it (JSON in the note's path
/// place).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobNote {
    /// The job's id.
    pub id: i64,
    /// Its tag, which its blocks carry.
    pub tag: u64,
    /// Its block size.
    pub block_size: u32,
}

/// What a note of a restore's answer says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// The entry at this path is wanted.
    Want(Vec<u8>),
    /// The job left this entry out.
    LeftOut(Vec<u8>),
    /// The entry was in a block that could not be read, for this reason.
    Bad(Vec<u8>, String),
    /// The job is encrypted: the body of its `JobKey` record (in the note's
    /// path place).
    JobKey(Vec<u8>),
    /// A set's restore: the job its tree stands at.
    SetAt(i64),
    /// A set's restore reads this job; the notes of the selection that follow,
    /// up to the next, are of it.
    Job(JobNote),
    /// The entry at this path of the last job named takes its metadata alone
    /// from it (its data comes from an earlier job).
    Meta(Vec<u8>),
    /// No job of the set's chain holds the data of the file at this path.
    Missing(Vec<u8>),
    /// The blocks and bad entries that follow are of this job.
    Of(i64),
    /// What the catalog lists of the entry at this path (of the last job named,
    /// in a set's restore): the placing side names it when it never meets it,
    /// or meets it otherwise.
    Row(Vec<u8>, Expect),
}

impl Notice {
    /// The frame of this notice.
    pub fn frame(&self) -> Frame {
        match self {
            Notice::Want(p) => Frame::note(p, WANT),
            Notice::LeftOut(p) => Frame::note(p, LEFT_OUT),
            Notice::Bad(p, why) => Frame::note(p, &format!("{BAD}{why}")),
            Notice::JobKey(k) => Frame::note(k, JOB_KEY),
            Notice::SetAt(j) => Frame::note(j.to_string().as_bytes(), SET_AT),
            Notice::Job(j) => Frame::note(&serde_json::to_vec(j).unwrap_or_default(), JOB),
            Notice::Meta(p) => Frame::note(p, META),
            Notice::Missing(p) => Frame::note(p, MISSING),
            Notice::Of(j) => Frame::note(j.to_string().as_bytes(), OF),
            Notice::Row(p, x) => {
                Frame::note(p, &format!("{ROW}{} {} {}", x.stream, x.kind, x.size))
            }
        }
    }

    /// The notice a note holds; none when it holds none.
    pub fn parse(note: &[u8]) -> Option<Notice> {
        let (path, why) = Frame::parse_note(note)?;
        match why.as_str() {
            WANT => Some(Notice::Want(path)),
            LEFT_OUT => Some(Notice::LeftOut(path)),
            JOB_KEY => Some(Notice::JobKey(path)),
            SET_AT => Some(Notice::SetAt(
                std::str::from_utf8(&path).ok()?.parse().ok()?,
            )),
            JOB => Some(Notice::Job(serde_json::from_slice(&path).ok()?)),
            META => Some(Notice::Meta(path)),
            MISSING => Some(Notice::Missing(path)),
            OF => Some(Notice::Of(std::str::from_utf8(&path).ok()?.parse().ok()?)),
            w if w.starts_with(ROW) => {
                let mut n = w[ROW.len()..].split(' ');
                let x = Expect {
                    stream: n.next()?.parse().ok()?,
                    kind: n.next()?.parse().ok()?,
                    size: n.next()?.parse().ok()?,
                };
                n.next().is_none().then_some(Notice::Row(path, x))
            }
            w => Some(Notice::Bad(path, w.strip_prefix(BAD)?.to_string())),
        }
    }
}

/// A note of one job's restore: the notices of [`Notice`] that are not only a
/// set's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobNotice {
    /// The entry at this path is wanted.
    Want(Vec<u8>),
    /// The job left this entry out.
    LeftOut(Vec<u8>),
    /// The entry was in a block that could not be read, for this reason.
    Bad(Vec<u8>, String),
    /// The job is encrypted: the body of its `JobKey` record.
    JobKey(Vec<u8>),
    /// What the catalog lists of the entry at this path.
    Row(Vec<u8>, Expect),
}

impl Notice {
    /// The notice as one of a job's restore; a set's restore's is a bad answer.
    pub fn of_job(self) -> Result<JobNotice, ServerError> {
        Ok(match self {
            Notice::Want(p) => JobNotice::Want(p),
            Notice::LeftOut(p) => JobNotice::LeftOut(p),
            Notice::Bad(p, why) => JobNotice::Bad(p, why),
            Notice::JobKey(k) => JobNotice::JobKey(k),
            Notice::Row(p, x) => JobNotice::Row(p, x),
            Notice::SetAt(_)
            | Notice::Job(_)
            | Notice::Meta(_)
            | Notice::Missing(_)
            | Notice::Of(_) => {
                let e = "a note of a set's restore in a job's";
                return Err(ServerError::BadAnswer(e.into()));
            }
        })
    }
}

/// What the server read for a restore: the figures of a local restore's reading.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Trailer {
    /// Blocks read from tape.
    pub blocks_read: u64,
    /// Bytes read from tape.
    pub bytes_read_from_tape: u64,
    /// Locates.
    pub locates: u64,
    /// Cartridges mounted.
    pub mounts: u64,
    /// Gaps passed by reading through.
    pub read_through: u64,
    /// The job's chains of cartridges.
    pub chains: usize,
    /// Drives read with.
    pub drives: usize,
    /// Where the streams were read: stage, tape, or stage+tape.
    pub source: String,
    /// Blocks read from the disk stages.
    pub blocks_read_from_stage: u64,
    /// Bytes of chunk files read from the stages.
    pub bytes_read_from_stage: u64,
    /// Seconds the server read for.
    pub seconds: f64,
    /// The streams read: number, name, and where each was read (stage or tape).
    #[serde(default)]
    pub streams: Vec<(u16, String, String)>,
    /// Why the reading failed midway, when it did.
    pub error: Option<String>,
    /// Blocks of the runs a set's restore planned (each block once).
    #[serde(default)]
    pub blocks_planned: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_come_back_from_their_frames() {
        for n in [
            Notice::Want(b"a/b".to_vec()),
            Notice::LeftOut(b"\xffx".to_vec()),
            Notice::Bad(b"c".to_vec(), "block 7 of L1 is bad: medium error".into()),
            Notice::JobKey(vec![0, 1, 0xff]),
            Notice::SetAt(12),
            Notice::Job(JobNote {
                id: 3,
                tag: u64::MAX,
                block_size: 65536,
            }),
            Notice::Meta(b"d/f".to_vec()),
            Notice::Missing(b"g".to_vec()),
            Notice::Of(-1),
            Notice::Row(
                b"h i".to_vec(),
                Expect {
                    stream: 65534,
                    kind: 1,
                    size: u64::MAX,
                },
            ),
        ] {
            let Frame::Note(bytes) = n.frame() else {
                panic!("not a note");
            };
            assert_eq!(Notice::parse(&bytes), Some(n));
        }
        let Frame::Note(other) = Frame::note(b"x", "something else") else {
            panic!("not a note");
        };
        assert_eq!(Notice::parse(&other), None);
        for cut in ["row 1 1", "row 1 1 5 6", "row x 1 5", "row 1 1 -5"] {
            let Frame::Note(bytes) = Frame::note(b"p", cut) else {
                panic!("not a note");
            };
            assert_eq!(Notice::parse(&bytes), None, "{cut}");
        }
    }
}
