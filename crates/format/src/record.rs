//! Stream records and their bodies (FORMAT.md 5).

use crate::codec::{Dec, Enc};
use crate::{FormatError, Result};

/// Length of a record header.
pub const RECORD_HEADER_LEN: usize = 16;

/// The kind of a stream record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum Kind {
    /// Start of a job on its first volume.
    JobStart = 1,
    /// Start of a job's segment on a later volume.
    Continuation = 2,
    /// Metadata of one file system object.
    Entry = 3,
    /// A regular file's stored bytes.
    Data = 4,
    /// Checksum and status after a file's data.
    FileEnd = 5,
    /// End of a data stream.
    StreamEnd = 6,
    /// A chunk of the job index.
    Index = 7,
    /// End of the job.
    JobEnd = 8,
    /// The data key of an encrypted job, wrapped (format version 3).
    JobKey = 9,
    /// Start of a segment of a further copy of a job (docs/COPIES.md).
    CopyStart = 10,
}

impl Kind {
    fn from_u16(v: u16) -> Result<Self> {
        Ok(match v {
            1 => Kind::JobStart,
            2 => Kind::Continuation,
            3 => Kind::Entry,
            4 => Kind::Data,
            5 => Kind::FileEnd,
            6 => Kind::StreamEnd,
            7 => Kind::Index,
            8 => Kind::JobEnd,
            9 => Kind::JobKey,
            10 => Kind::CopyStart,
            _ => {
                return Err(FormatError::UnknownCode {
                    what: "record kind",
                    value: v,
                })
            }
        })
    }
}

/// The 16-byte header before every record body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    /// What the body is.
    pub kind: Kind,
    /// Length of the body in bytes.
    pub len: u64,
}

impl RecordHeader {
    /// Encodes the header.
    pub fn encode(&self) -> [u8; RECORD_HEADER_LEN] {
        let mut v = Vec::with_capacity(RECORD_HEADER_LEN);
        let mut e = Enc(&mut v);
        e.u16(self.kind as u16);
        e.u16(0);
        e.u32(0);
        e.u64(self.len);
        let mut a = [0u8; RECORD_HEADER_LEN];
        a.copy_from_slice(&v);
        a
    }

    /// Decodes a header.
    pub fn decode(buf: &[u8; RECORD_HEADER_LEN]) -> Result<Self> {
        let mut d = Dec::new(buf, "record header");
        let kind = Kind::from_u16(d.u16()?)?;
        d.reserved(6)?;
        let len = d.u64()?;
        Ok(RecordHeader { kind, len })
    }
}

/// Seconds and nanoseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    /// Seconds since 1970-01-01T00:00:00Z (negative before).
    pub secs: i64,
    /// Nanoseconds, 0..999,999,999.
    pub nanos: u32,
}

impl Timestamp {
    fn enc(&self, e: &mut Enc) {
        e.i64(self.secs);
        e.u32(self.nanos);
    }
    fn dec(d: &mut Dec) -> Result<Self> {
        let secs = d.i64()?;
        let nanos = d.u32()?;
        if nanos >= 1_000_000_000 {
            return Err(FormatError::Nanoseconds(nanos));
        }
        Ok(Timestamp { secs, nanos })
    }
    /// The time as nanoseconds since the epoch (saturating).
    pub fn as_nanos(&self) -> i64 {
        self.secs
            .saturating_mul(1_000_000_000)
            .saturating_add(self.nanos as i64)
    }
    /// The inverse of [`Timestamp::as_nanos`].
    pub fn from_nanos(ns: i64) -> Self {
        Timestamp {
            secs: ns.div_euclid(1_000_000_000),
            nanos: ns.rem_euclid(1_000_000_000) as u32,
        }
    }
}

/// The type of a file system object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum EntryType {
    /// A regular file, followed by its data.
    Regular = 1,
    /// A directory.
    Directory = 2,
    /// A symbolic link; the target is in `link`.
    Symlink = 3,
    /// Another name of an earlier regular file; its path is in `link`.
    HardLink = 4,
    /// A named pipe.
    Fifo = 5,
    /// A character device.
    CharDevice = 6,
    /// A block device.
    BlockDevice = 7,
    /// A Unix socket (restored as nothing; recorded for completeness).
    Socket = 8,
}

impl EntryType {
    /// Decodes the type byte.
    pub fn from_u8(v: u8) -> Result<Self> {
        Ok(match v {
            1 => EntryType::Regular,
            2 => EntryType::Directory,
            3 => EntryType::Symlink,
            4 => EntryType::HardLink,
            5 => EntryType::Fifo,
            6 => EntryType::CharDevice,
            7 => EntryType::BlockDevice,
            8 => EntryType::Socket,
            _ => {
                return Err(FormatError::UnknownCode {
                    what: "entry type",
                    value: v.into(),
                })
            }
        })
    }
    /// The name used in listings and JSON.
    pub fn name(&self) -> &'static str {
        match self {
            EntryType::Regular => "file",
            EntryType::Directory => "dir",
            EntryType::Symlink => "symlink",
            EntryType::HardLink => "hardlink",
            EntryType::Fifo => "fifo",
            EntryType::CharDevice => "chardev",
            EntryType::BlockDevice => "blockdev",
            EntryType::Socket => "socket",
        }
    }
}

/// Metadata of one file system object (FORMAT.md 5.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Object type.
    pub kind: EntryType,
    /// Permission, set-id and sticky bits.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Logical size of a regular file.
    pub size: u64,
    /// Modification time.
    pub mtime: Timestamp,
    /// Access time.
    pub atime: Timestamp,
    /// Device number of a device node.
    pub rdev: u64,
    /// Path relative to the job's namespace root.
    pub path: Vec<u8>,
    /// Symlink target, or the first path of a hard-link set.
    pub link: Vec<u8>,
    /// Owner's name, when known.
    pub user: Vec<u8>,
    /// Group's name, when known.
    pub group: Vec<u8>,
    /// Extended attributes, name and value.
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    /// Data extents (offset, length) of a sparse file; `None` for a dense file.
    pub sparse: Option<Vec<(u64, u64)>>,
    /// A regular file whose data is unchanged since an earlier job of its set: no
    /// `Data` or `FileEnd` follows (version 4).
    pub meta_only: bool,
    /// The change time and inode number, which the next job of the set compares
    /// (version 4); `None` in entries of older writers.
    pub facts: Option<Facts>,
}

/// What an incremental compares of an object besides its entry (FORMAT.md 5.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Facts {
    /// Status change time.
    pub ctime: Timestamp,
    /// Inode number.
    pub ino: u64,
}

/// Entry flag bits (FORMAT.md 5.3).
const ENTRY_SPARSE: u8 = 1;
const ENTRY_META_ONLY: u8 = 2;
const ENTRY_FACTS: u8 = 4;

impl Entry {
    /// Whether `Data` and `FileEnd` records follow: a regular file, unless it is
    /// metadata alone.
    pub fn has_data(&self) -> bool {
        self.kind == EntryType::Regular && !self.meta_only
    }

    /// Bytes of a regular file stored in its `Data` record.
    pub fn stored_len(&self) -> u64 {
        if self.kind != EntryType::Regular || self.meta_only {
            return 0;
        }
        match &self.sparse {
            Some(ext) => ext.iter().map(|e| e.1).sum(),
            None => self.size,
        }
    }

    /// Encodes the body.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(96 + self.path.len() + self.link.len());
        let mut e = Enc(&mut v);
        e.u8(self.kind as u8);
        let mut flags = 0;
        if self.sparse.is_some() {
            flags |= ENTRY_SPARSE;
        }
        if self.meta_only {
            flags |= ENTRY_META_ONLY;
        }
        if self.facts.is_some() {
            flags |= ENTRY_FACTS;
        }
        e.u8(flags);
        e.u16(0);
        e.u32(self.mode);
        e.u32(self.uid);
        e.u32(self.gid);
        e.u64(self.size);
        self.mtime.enc(&mut e);
        self.atime.enc(&mut e);
        e.u64(self.rdev);
        e.bytes32(&self.path);
        e.bytes32(&self.link);
        e.bytes16(&self.user);
        e.bytes16(&self.group);
        e.u32(self.xattrs.len() as u32);
        for (n, val) in &self.xattrs {
            e.bytes16(n);
            e.bytes32(val);
        }
        let ext = self.sparse.as_deref().unwrap_or(&[]);
        e.u32(ext.len() as u32);
        for (o, l) in ext {
            e.u64(*o);
            e.u64(*l);
        }
        if let Some(f) = &self.facts {
            f.ctime.enc(&mut e);
            e.u64(f.ino);
        }
        v
    }

    /// Decodes a body and checks that the path is safe.
    pub fn decode(buf: &[u8]) -> Result<Self> {
        let mut d = Dec::new(buf, "entry record");
        let kind = EntryType::from_u8(d.u8()?)?;
        let flags = d.u8()?;
        let known = ENTRY_SPARSE | ENTRY_META_ONLY | ENTRY_FACTS;
        if flags & !known != 0 || (flags & ENTRY_META_ONLY != 0 && kind != EntryType::Regular) {
            return Err(FormatError::UnknownEntryFlags(flags));
        }
        d.reserved(2)?;
        let mode = d.u32()?;
        let uid = d.u32()?;
        let gid = d.u32()?;
        let size = d.u64()?;
        let mtime = Timestamp::dec(&mut d)?;
        let atime = Timestamp::dec(&mut d)?;
        let rdev = d.u64()?;
        let path = d.bytes32()?;
        crate::check_relative_path(&path)?;
        let link = d.bytes32()?;
        let user = d.bytes16()?;
        let group = d.bytes16()?;
        let n = d.u32()? as usize;
        let n = d.count(n, 6)?;
        let mut xattrs = Vec::with_capacity(n);
        for _ in 0..n {
            xattrs.push((d.bytes16()?, d.bytes32()?));
        }
        let n = d.u32()? as usize;
        let n = d.count(n, 16)?;
        let mut ext = Vec::with_capacity(n);
        for _ in 0..n {
            ext.push((d.u64()?, d.u64()?));
        }
        let sparse = if flags & ENTRY_SPARSE != 0 {
            Some(ext)
        } else {
            None
        };
        let facts = if flags & ENTRY_FACTS != 0 {
            Some(Facts {
                ctime: Timestamp::dec(&mut d)?,
                ino: d.u64()?,
            })
        } else {
            None
        };
        if let Some(ext) = &sparse {
            let mut end = 0u64;
            for &(o, l) in ext {
                let e = o.checked_add(l);
                if o < end || e.is_none_or(|e| e > size) {
                    return Err(FormatError::SparseExtents);
                }
                end = o + l;
            }
        }
        if kind == EntryType::HardLink {
            crate::check_relative_path(&link)?;
        }
        Ok(Entry {
            kind,
            mode,
            uid,
            gid,
            size,
            mtime,
            atime,
            rdev,
            path,
            link,
            user,
            group,
            xattrs,
            sparse,
            meta_only: flags & ENTRY_META_ONLY != 0,
            facts,
        })
    }
}

/// Outcome of reading a file during backup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FileStatus {
    /// The data is the file's.
    Ok = 0,
    /// The file shrank while read; the rest is zeros.
    Shrank = 1,
    /// The file grew while read; the excess is not stored.
    Grew = 2,
    /// A read failed; the rest is zeros.
    ReadError = 3,
}

/// The record after a file's data (FORMAT.md 5.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileEnd {
    /// CRC32C of the stored bytes.
    pub crc: u32,
    /// How reading went.
    pub status: FileStatus,
}

impl FileEnd {
    /// Encodes the body.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(8);
        let mut e = Enc(&mut v);
        e.u32(self.crc);
        e.u8(self.status as u8);
        e.raw(&[0; 3]);
        v
    }
    /// Decodes a body.
    pub fn decode(buf: &[u8]) -> Result<Self> {
        let mut d = Dec::new(buf, "file end record");
        let crc = d.u32()?;
        let status = match d.u8()? {
            0 => FileStatus::Ok,
            1 => FileStatus::Shrank,
            2 => FileStatus::Grew,
            3 => FileStatus::ReadError,
            s => {
                return Err(FormatError::UnknownCode {
                    what: "file status",
                    value: s.into(),
                })
            }
        };
        d.reserved(3)?;
        Ok(FileEnd { crc, status })
    }
}

/// The record at the end of a data stream (FORMAT.md 5.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamEnd {
    /// Entries in the stream.
    pub entries: u64,
    /// Stored data bytes in the stream.
    pub bytes: u64,
}

impl StreamEnd {
    /// Encodes the body.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(16);
        let mut e = Enc(&mut v);
        e.u64(self.entries);
        e.u64(self.bytes);
        v
    }
    /// Decodes a body.
    pub fn decode(buf: &[u8]) -> Result<Self> {
        let mut d = Dec::new(buf, "stream end record");
        Ok(StreamEnd {
            entries: d.u64()?,
            bytes: d.u64()?,
        })
    }
}

/// One stream of a job, as listed in its start record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamInfo {
    /// Stream id (1..).
    pub id: u16,
    /// Stream name.
    pub name: String,
    /// Source path on the backed-up host.
    pub source: Vec<u8>,
}

/// The body of a `CopyStart`: the start of a segment of a further copy of a job.
/// The objects after its blocks are the original's, from volume sequence
/// `orig_seq` and LBN `orig_lbn` on, one for one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyStart {
    /// The copy's number: 2 for the first copy after the job's own cartridges.
    pub copy_no: u16,
    /// The original's volume sequence of the first object copied after it.
    pub orig_seq: u32,
    /// The original's LBN of that object.
    pub orig_lbn: u64,
    /// The copy was written to move the job (`migrate`, `repack`): once read
    /// back, it stands in for the job's own cartridges (flag bit 0).
    pub moving: bool,
    /// The job, as a `Continuation` names it; its volume sequence is the copy
    /// segment's number within the copy, from 0.
    pub start: JobStart,
}

impl CopyStart {
    /// Bytes before the `JobStart` body.
    const FIXED: usize = 16;

    /// Encodes the body: the copy's fields, then the `JobStart` body.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::new();
        let mut e = Enc(&mut v);
        e.u16(self.copy_no);
        e.u16(u16::from(self.moving));
        e.u32(self.orig_seq);
        e.u64(self.orig_lbn);
        v.extend_from_slice(&self.start.encode());
        v
    }

    /// Decodes a body. A copy number below 2 is corrupt (the job's own
    /// cartridges are copy 1 and have no `CopyStart`).
    pub fn decode(buf: &[u8]) -> Result<Self> {
        let mut d = Dec::new(buf, "copy start record");
        let copy_no = d.u16()?;
        let flags = d.u16()?;
        if flags & !1 != 0 {
            return Err(FormatError::UnknownCode {
                what: "copy start flags",
                value: flags,
            });
        }
        let orig_seq = d.u32()?;
        let orig_lbn = d.u64()?;
        if copy_no < 2 {
            return Err(FormatError::UnknownCode {
                what: "copy number",
                value: copy_no,
            });
        }
        let rest = buf.get(Self::FIXED..).unwrap_or(&[]);
        Ok(CopyStart {
            copy_no,
            orig_seq,
            orig_lbn,
            moving: flags & 1 != 0,
            start: JobStart::decode(rest)?,
        })
    }
}

/// `JobStart` and `Continuation` bodies (FORMAT.md 5.1, 5.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobStart {
    /// Random identity of the job.
    pub job_tag: u64,
    /// When the job started.
    pub started: Timestamp,
    /// The job's block size.
    pub block_size: u32,
    /// Which volume of the job this is, from 0.
    pub volume_seq: u32,
    /// Job name.
    pub name: String,
    /// Host the job ran on.
    pub host: String,
    /// The job's data streams.
    pub streams: Vec<StreamInfo>,
    /// Its backup set, level, base and pool (version 4); `None` from older writers.
    pub set: Option<SetInfo>,
    /// The client (a server token's name) the job was run for; empty for a job
    /// not run for a client, and in bodies that end after the pool. It follows the
    /// set fields, so a body without them has none: it is not written then.
    pub client: String,
}

/// The level of a job in its set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum Level {
    /// Everything.
    #[default]
    Full = 0,
    /// What changed since the set's previous job of any level.
    Incremental = 1,
    /// What changed since the set's last full.
    Differential = 2,
}

impl Level {
    /// Decodes the level byte.
    pub fn from_u8(v: u8) -> Result<Self> {
        Ok(match v {
            0 => Level::Full,
            1 => Level::Incremental,
            2 => Level::Differential,
            _ => {
                return Err(FormatError::UnknownCode {
                    what: "job level",
                    value: v.into(),
                })
            }
        })
    }
    /// The name used on the command line and in JSON.
    pub fn name(&self) -> &'static str {
        match self {
            Level::Full => "full",
            Level::Incremental => "incremental",
            Level::Differential => "differential",
        }
    }
}

/// A job's place in its backup set (FORMAT.md 5.1, version 4).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SetInfo {
    /// The set's name.
    pub set: String,
    /// The job's level.
    pub level: Level,
    /// The tag of the job its changes are relative to (0 for a full).
    pub base: u64,
    /// The media pool the job was written to.
    pub pool: String,
}

impl JobStart {
    /// Encodes the body.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::new();
        let mut e = Enc(&mut v);
        e.u64(self.job_tag);
        self.started.enc(&mut e);
        e.u32(self.block_size);
        e.u32(self.volume_seq);
        e.str16(&self.name);
        e.str16(&self.host);
        e.u16(self.streams.len() as u16);
        for s in &self.streams {
            e.u16(s.id);
            e.str16(&s.name);
            e.bytes32(&s.source);
        }
        if let Some(set) = &self.set {
            e.str16(&set.set);
            e.u8(set.level as u8);
            e.u64(set.base);
            e.str16(&set.pool);
            e.str16(&self.client);
        }
        v
    }
    /// Decodes a body.
    pub fn decode(buf: &[u8]) -> Result<Self> {
        let mut d = Dec::new(buf, "job start record");
        let job_tag = d.u64()?;
        let started = Timestamp::dec(&mut d)?;
        let block_size = d.u32()?;
        let volume_seq = d.u32()?;
        let name = d.string16()?;
        let host = d.string16()?;
        let n = d.u16()? as usize;
        if n > crate::MAX_STREAMS {
            return Err(FormatError::TooManyStreams(n));
        }
        let n = d.count(n, 8)?;
        let mut streams = Vec::with_capacity(n);
        for _ in 0..n {
            streams.push(StreamInfo {
                id: d.u16()?,
                name: d.string16()?,
                source: d.bytes32()?,
            });
        }
        let (set, client) = match d.remaining() {
            0 => (None, String::new()),
            _ => set_and_client(&mut d)?,
        };
        Ok(JobStart {
            job_tag,
            started,
            block_size,
            volume_seq,
            name,
            host,
            streams,
            set,
            client,
        })
    }
}

/// The fields after a `JobStart`'s stream table (FORMAT.md 5.1): the set fields
/// (version 4), then the client, absent from bodies that end after the pool.
fn set_and_client(d: &mut Dec<'_>) -> Result<(Option<SetInfo>, String)> {
    let set = d.string16()?;
    let level = Level::from_u8(d.u8()?)?;
    let base = d.u64()?;
    let pool = d.string16()?;
    if (level == Level::Full) != (base == 0) {
        return Err(FormatError::UnknownCode {
            what: "job base",
            value: level as u16,
        });
    }
    // Bytes after the client are a later revision's fields: ignored.
    let client = match d.remaining() {
        0 => String::new(),
        _ => d.string16()?,
    };
    let set = SetInfo {
        set,
        level,
        base,
        pool,
    };
    Ok((Some(set), client))
}

/// A position on the volumes of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Pos {
    /// Volume sequence within the job.
    pub volume_seq: u32,
    /// Logical block number on that volume.
    pub lbn: u64,
    /// Offset within the block's payload.
    pub offset: u32,
}

/// One entry of the job index (FORMAT.md 5.6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    /// Stream holding the entry.
    pub stream: u16,
    /// Object type.
    pub kind: EntryType,
    /// Logical size.
    pub size: u64,
    /// Modification time.
    pub mtime: Timestamp,
    /// Permission bits.
    pub mode: u32,
    /// Where the `Entry` record starts.
    pub start: Pos,
    /// The block with the entry's last byte (offset unused, zero).
    pub end: Pos,
    /// CRC32C of the stored bytes.
    pub crc: u32,
    /// Path in the job namespace.
    pub path: Vec<u8>,
    /// Symlink target, or the first path of a hard-link set.
    pub link: Vec<u8>,
    /// The entry is a regular file's new metadata only; its data is in an earlier
    /// job of the set (version 4).
    pub meta_only: bool,
    /// The path was deleted since the job's base (version 4): no record is on tape.
    pub deleted: bool,
    /// Change time, inode and owner, which the next job of the set compares
    /// (version 4).
    pub facts: Option<IndexFacts>,
}

/// What an index entry keeps for change detection (FORMAT.md 5.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct IndexFacts {
    /// Status change time.
    pub ctime: Timestamp,
    /// Inode number.
    pub ino: u64,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
}

/// Index entry flag bits (FORMAT.md 5.6).
const INDEX_META_ONLY: u8 = 1;
const INDEX_DELETED: u8 = 2;
const INDEX_FACTS: u8 = 4;

impl IndexEntry {
    /// Appends the encoding to `v`.
    pub fn encode_into(&self, v: &mut Vec<u8>) {
        let mut e = Enc(v);
        e.u16(self.stream);
        e.u8(self.kind as u8);
        let mut flags = 0;
        if self.meta_only {
            flags |= INDEX_META_ONLY;
        }
        if self.deleted {
            flags |= INDEX_DELETED;
        }
        if self.facts.is_some() {
            flags |= INDEX_FACTS;
        }
        e.u8(flags);
        e.u64(self.size);
        self.mtime.enc(&mut e);
        e.u32(self.mode);
        e.u32(self.start.volume_seq);
        e.u64(self.start.lbn);
        e.u32(self.start.offset);
        e.u32(self.end.volume_seq);
        e.u64(self.end.lbn);
        e.u32(self.crc);
        if let Some(f) = &self.facts {
            f.ctime.enc(&mut e);
            e.u64(f.ino);
            e.u32(f.uid);
            e.u32(f.gid);
        }
        e.bytes32(&self.path);
        e.bytes32(&self.link);
    }

    /// Encodes an `Index` record body from entries.
    pub fn encode_chunk(entries: &[IndexEntry]) -> Vec<u8> {
        let mut v = Vec::with_capacity(entries.len() * 80);
        Enc(&mut v).u32(entries.len() as u32);
        for e in entries {
            e.encode_into(&mut v);
        }
        v
    }

    /// Decodes an `Index` record body.
    pub fn decode_chunk(buf: &[u8]) -> Result<Vec<IndexEntry>> {
        let mut d = Dec::new(buf, "index record");
        let n = d.u32()? as usize;
        let n = d.count(n, 68)?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let stream = d.u16()?;
            let kind = EntryType::from_u8(d.u8()?)?;
            let flags = d.u8()?;
            if flags & !(INDEX_META_ONLY | INDEX_DELETED | INDEX_FACTS) != 0
                || flags & (INDEX_META_ONLY | INDEX_DELETED) == INDEX_META_ONLY | INDEX_DELETED
                || (flags & INDEX_META_ONLY != 0 && kind != EntryType::Regular)
            {
                return Err(FormatError::UnknownEntryFlags(flags));
            }
            let size = d.u64()?;
            let mtime = Timestamp::dec(&mut d)?;
            let mode = d.u32()?;
            let start = Pos {
                volume_seq: d.u32()?,
                lbn: d.u64()?,
                offset: d.u32()?,
            };
            let end = Pos {
                volume_seq: d.u32()?,
                lbn: d.u64()?,
                offset: 0,
            };
            let crc = d.u32()?;
            let facts = if flags & INDEX_FACTS != 0 {
                Some(IndexFacts {
                    ctime: Timestamp::dec(&mut d)?,
                    ino: d.u64()?,
                    uid: d.u32()?,
                    gid: d.u32()?,
                })
            } else {
                None
            };
            let path = d.bytes32()?;
            crate::check_relative_path(&path)?;
            let link = d.bytes32()?;
            out.push(IndexEntry {
                stream,
                kind,
                size,
                mtime,
                mode,
                start,
                end,
                crc,
                path,
                link,
                meta_only: flags & INDEX_META_ONLY != 0,
                deleted: flags & INDEX_DELETED != 0,
                facts,
            });
        }
        if d.remaining() != 0 {
            return Err(FormatError::TrailingBytes("index record"));
        }
        Ok(out)
    }
}

/// How a job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum JobStatus {
    /// Everything was backed up.
    Ok = 0,
    /// Some source objects could not be read.
    Partial = 1,
}

/// The last record of a job (FORMAT.md 5.7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobEnd {
    /// The job.
    pub job_tag: u64,
    /// When it ended.
    pub ended: Timestamp,
    /// How it ended.
    pub status: JobStatus,
    /// Entries in all streams.
    pub entries: u64,
    /// Stored bytes in all streams.
    pub bytes: u64,
    /// Where the first `Index` record starts.
    pub index_start: Pos,
    /// Volume UUIDs in sequence order.
    pub volumes: Vec<[u8; 16]>,
}

impl JobEnd {
    /// Encodes the body.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::new();
        let mut e = Enc(&mut v);
        e.u64(self.job_tag);
        self.ended.enc(&mut e);
        e.u8(self.status as u8);
        e.raw(&[0; 3]);
        e.u64(self.entries);
        e.u64(self.bytes);
        e.u32(self.index_start.volume_seq);
        e.u64(self.index_start.lbn);
        e.u32(self.index_start.offset);
        e.u32(self.volumes.len() as u32);
        for u in &self.volumes {
            e.raw(u);
        }
        v
    }
    /// Decodes a body.
    pub fn decode(buf: &[u8]) -> Result<Self> {
        let mut d = Dec::new(buf, "job end record");
        let job_tag = d.u64()?;
        let ended = Timestamp::dec(&mut d)?;
        let status = match d.u8()? {
            0 => JobStatus::Ok,
            1 => JobStatus::Partial,
            s => {
                return Err(FormatError::UnknownCode {
                    what: "job status",
                    value: s.into(),
                })
            }
        };
        d.reserved(3)?;
        let entries = d.u64()?;
        let bytes = d.u64()?;
        let index_start = Pos {
            volume_seq: d.u32()?,
            lbn: d.u64()?,
            offset: d.u32()?,
        };
        let n = d.u32()? as usize;
        let n = d.count(n, 16)?;
        let mut volumes = Vec::with_capacity(n);
        for _ in 0..n {
            volumes.push(d.array()?);
        }
        Ok(JobEnd {
            job_tag,
            ended,
            status,
            entries,
            bytes,
            index_start,
            volumes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::collection::vec;
    use proptest::prelude::*;

    fn ts() -> impl Strategy<Value = Timestamp> {
        (any::<i64>(), 0u32..1_000_000_000).prop_map(|(secs, nanos)| Timestamp { secs, nanos })
    }
    fn rel_path() -> impl Strategy<Value = Vec<u8>> {
        vec(
            vec(
                any::<u8>().prop_filter("no slash/nul", |b| *b != b'/' && *b != 0),
                1..12,
            )
            .prop_filter("not dot", |c| c != b"." && c != b".."),
            1..5,
        )
        .prop_map(|cs| cs.join(&b'/'))
    }
    fn etype() -> impl Strategy<Value = EntryType> {
        (1u8..=8).prop_map(|v| EntryType::from_u8(v).unwrap())
    }
    fn entry() -> impl Strategy<Value = Entry> {
        (
            (
                etype(),
                any::<u32>(),
                any::<u32>(),
                any::<u32>(),
                0u64..1 << 40,
                ts(),
                ts(),
                any::<u64>(),
            ),
            (
                rel_path(),
                rel_path(),
                vec(any::<u8>(), 0..20),
                vec(any::<u8>(), 0..20),
                vec((vec(any::<u8>(), 1..20), vec(any::<u8>(), 0..50)), 0..4),
                any::<bool>(),
                any::<bool>(),
                proptest::option::of((ts(), any::<u64>())),
            ),
        )
            .prop_map(
                |(
                    (kind, mode, uid, gid, size, mtime, atime, rdev),
                    (path, link, user, group, xattrs, sp, meta, facts),
                )| {
                    let sparse = sp.then(|| vec![(0, size / 4), (size / 2, size / 4)]);
                    Entry {
                        kind,
                        mode,
                        uid,
                        gid,
                        size,
                        mtime,
                        atime,
                        rdev,
                        path,
                        link,
                        user,
                        group,
                        xattrs,
                        sparse,
                        meta_only: meta && kind == EntryType::Regular,
                        facts: facts.map(|(ctime, ino)| Facts { ctime, ino }),
                    }
                },
            )
    }
    fn pos() -> impl Strategy<Value = Pos> {
        (any::<u32>(), any::<u64>(), any::<u32>()).prop_map(|(volume_seq, lbn, offset)| Pos {
            volume_seq,
            lbn,
            offset,
        })
    }

    /// Job start bodies: with or without set fields, with a client only with
    /// them (it is written after the pool).
    fn job_start() -> impl Strategy<Value = JobStart> {
        let set = proptest::option::of(("[a-z]{0,8}", 0u8..3, 1u64.., "[a-z]{0,8}"));
        let head = (
            any::<u64>(),
            ts(),
            any::<u32>(),
            any::<u32>(),
            ".{0,20}",
            ".{0,20}",
        );
        let streams = vec((1u16.., "[a-z]{1,8}", vec(any::<u8>(), 0..30)), 0..5);
        (head, streams, set, ".{0,20}").prop_map(
            |((job_tag, started, block_size, volume_seq, name, host), streams, set, client)| {
                let set = set.map(|(set, level, base, pool)| {
                    let level = Level::from_u8(level).unwrap();
                    let base = if level == Level::Full { 0 } else { base };
                    SetInfo {
                        set,
                        level,
                        base,
                        pool,
                    }
                });
                let client = if set.is_some() { client } else { String::new() };
                let streams = streams
                    .into_iter()
                    .map(|(id, name, source)| StreamInfo { id, name, source })
                    .collect();
                JobStart {
                    job_tag,
                    started,
                    block_size,
                    volume_seq,
                    name,
                    host,
                    streams,
                    set,
                    client,
                }
            },
        )
    }

    /// The `JobStart` decoder of version 4 before the client (it reads the set
    /// fields and nothing after them), kept to show what such a reader makes of
    /// bodies with a client.
    fn version_4_before_client(buf: &[u8]) -> JobStart {
        let mut d = Dec::new(buf, "job start record");
        let (job_tag, started) = (d.u64().unwrap(), Timestamp::dec(&mut d).unwrap());
        let (block_size, volume_seq) = (d.u32().unwrap(), d.u32().unwrap());
        let (name, host) = (d.string16().unwrap(), d.string16().unwrap());
        let n = d.u16().unwrap();
        let streams = (0..n)
            .map(|_| StreamInfo {
                id: d.u16().unwrap(),
                name: d.string16().unwrap(),
                source: d.bytes32().unwrap(),
            })
            .collect();
        let set = (d.remaining() > 0).then(|| SetInfo {
            set: d.string16().unwrap(),
            level: Level::from_u8(d.u8().unwrap()).unwrap(),
            base: d.u64().unwrap(),
            pool: d.string16().unwrap(),
        });
        JobStart {
            job_tag,
            started,
            block_size,
            volume_seq,
            name,
            host,
            streams,
            set,
            client: String::new(),
        }
    }

    proptest! {
        #[test]
        fn entry_round_trip(e in entry()) {
            prop_assert_eq!(Entry::decode(&e.encode()).unwrap(), e);
        }

        #[test]
        fn header_round_trip(k in 1u16..=8, len in any::<u64>()) {
            let h = RecordHeader { kind: Kind::from_u16(k).unwrap(), len };
            prop_assert_eq!(RecordHeader::decode(&h.encode()).unwrap(), h);
        }

        #[test]
        fn file_end_round_trip(crc in any::<u32>(), s in 0u8..4) {
            let status = [FileStatus::Ok, FileStatus::Shrank, FileStatus::Grew, FileStatus::ReadError][s as usize];
            let f = FileEnd { crc, status };
            prop_assert_eq!(FileEnd::decode(&f.encode()).unwrap(), f);
        }

        #[test]
        fn stream_end_round_trip(entries in any::<u64>(), bytes in any::<u64>()) {
            let s = StreamEnd { entries, bytes };
            prop_assert_eq!(StreamEnd::decode(&s.encode()).unwrap(), s);
        }

        #[test]
        fn job_start_round_trip(j in job_start()) {
            prop_assert_eq!(JobStart::decode(&j.encode()).unwrap(), j);
        }

        #[test]
        fn copy_start_round_trip(
            j in job_start(),
            copy_no in 2u16..,
            orig_seq in any::<u32>(),
            orig_lbn in any::<u64>(),
        ) {
            let c = CopyStart { copy_no, orig_seq, orig_lbn, moving: copy_no % 2 == 0, start: j };
            let body = c.encode();
            prop_assert_eq!(CopyStart::decode(&body).unwrap(), c);
            // Cut in its own fields or in the job's first field, it is an
            // error; copy number 1 is refused.
            for n in [0, 3, 15, 20] {
                prop_assert!(CopyStart::decode(&body[..n]).is_err());
            }
            let mut one = body.clone();
            one[..2].copy_from_slice(&1u16.to_le_bytes());
            prop_assert!(CopyStart::decode(&one).is_err());
        }

        #[test]
        fn job_start_without_client_reads_as_no_client(j in job_start()) {
            // A body of a writer before the client (FORMAT.md 5.1) ends after the
            // pool, or after the stream table: the job has no client.
            let body = j.encode();
            let old = &body[..body.len() - j.set.as_ref().map_or(0, |_| 2 + j.client.len())];
            prop_assert_eq!(JobStart::decode(old).unwrap(), JobStart { client: String::new(), ..j });
        }

        #[test]
        fn job_start_bytes_after_the_client_are_ignored(j in job_start(), more in vec(any::<u8>(), 1..20)) {
            // Without set fields, bytes after the stream table are read as them.
            prop_assume!(j.set.is_some());
            let mut body = j.encode();
            body.extend_from_slice(&more);
            prop_assert_eq!(JobStart::decode(&body).unwrap(), j);
        }

        #[test]
        fn job_start_read_as_version_4_before_the_client(j in job_start()) {
            // A version-4 reader before the client stops after the pool: what it
            // reads of a body with a client is the body without it.
            let body = j.encode();
            prop_assert_eq!(version_4_before_client(&body), JobStart { client: String::new(), ..j });
        }

        #[test]
        fn index_round_trip(items in vec(((any::<u16>(), etype(), any::<u64>(), ts(), any::<u32>(), pos(), pos(), any::<u32>(), rel_path(), vec(any::<u8>(), 0..10)), (0u8..3, proptest::option::of((ts(), any::<u64>(), any::<u32>(), any::<u32>())))), 0..20)) {
            let es: Vec<IndexEntry> = items.into_iter().map(|((stream, kind, size, mtime, mode, start, mut end, crc, path, link), (change, facts))| {
                end.offset = 0;
                let facts = facts.map(|(ctime, ino, uid, gid)| IndexFacts { ctime, ino, uid, gid });
                let meta_only = change == 1 && kind == EntryType::Regular;
                IndexEntry { stream, kind, size, mtime, mode, start, end, crc, path, link, meta_only, deleted: change == 2, facts }
            }).collect();
            prop_assert_eq!(IndexEntry::decode_chunk(&IndexEntry::encode_chunk(&es)).unwrap(), es);
        }

        #[test]
        fn job_end_round_trip(job_tag in any::<u64>(), ended in ts(), partial in any::<bool>(), entries in any::<u64>(),
                              bytes in any::<u64>(), index_start in pos(), volumes in vec(any::<[u8;16]>(), 0..5)) {
            let j = JobEnd { job_tag, ended, status: if partial { JobStatus::Partial } else { JobStatus::Ok },
                             entries, bytes, index_start, volumes };
            prop_assert_eq!(JobEnd::decode(&j.encode()).unwrap(), j);
        }

        #[test]
        fn decoders_never_panic(b in vec(any::<u8>(), 0..300)) {
            let _ = Entry::decode(&b);
            let _ = JobStart::decode(&b);
            let _ = JobEnd::decode(&b);
            let _ = IndexEntry::decode_chunk(&b);
            let _ = FileEnd::decode(&b);
            let _ = StreamEnd::decode(&b);
        }
    }

    #[test]
    fn hostile_paths_are_refused() {
        for p in [&b"/etc/passwd"[..], b"../x", b"a/../../x"] {
            let e = Entry {
                kind: EntryType::Regular,
                mode: 0o644,
                uid: 0,
                gid: 0,
                size: 0,
                mtime: Timestamp::default(),
                atime: Timestamp::default(),
                rdev: 0,
                path: p.to_vec(),
                link: vec![],
                user: vec![],
                group: vec![],
                xattrs: vec![],
                sparse: None,
                meta_only: false,
                facts: None,
            };
            assert!(Entry::decode(&e.encode()).is_err());
        }
    }

    #[test]
    fn metadata_alone_is_only_for_regular_files() {
        let mut e = Entry {
            kind: EntryType::Regular,
            mode: 0o644,
            uid: 0,
            gid: 0,
            size: 5,
            mtime: Timestamp::default(),
            atime: Timestamp::default(),
            rdev: 0,
            path: b"a".to_vec(),
            link: vec![],
            user: vec![],
            group: vec![],
            xattrs: vec![],
            sparse: None,
            meta_only: true,
            facts: None,
        };
        assert_eq!(e.stored_len(), 0);
        assert!(!e.has_data());
        let mut body = e.encode();
        assert_eq!(body[1], 2, "flag bit 1");
        assert!(Entry::decode(&body).unwrap().meta_only);
        body[0] = EntryType::Directory as u8;
        assert!(matches!(
            Entry::decode(&body),
            Err(FormatError::UnknownEntryFlags(2))
        ));
        e.meta_only = false;
        assert!(e.has_data());
        // A JobStart of version 3 (no set) still reads, as a job without a set.
        let j = JobStart {
            job_tag: 1,
            started: Timestamp::default(),
            block_size: 65536,
            volume_seq: 0,
            name: "n".into(),
            host: "h".into(),
            streams: vec![],
            set: None,
            client: String::new(),
        };
        assert_eq!(JobStart::decode(&j.encode()).unwrap().set, None);
        // A full has no base, and anything else has one.
        let bad = JobStart {
            set: Some(SetInfo {
                set: "s".into(),
                level: Level::Incremental,
                base: 0,
                pool: "p".into(),
            }),
            ..j
        };
        assert!(JobStart::decode(&bad.encode()).is_err());
    }
}
