//! The record a managed file keeps of its tape copy: the extended attribute
//! `user.tapeloom.hsm`, a few bytes:
//!
//! ```text
//! 1 STATE JOB SIZE INO MTIME_NS CRC
//! ```
//!
//! a version byte (1); STATE, `P` (premigrated) or `R` (released); then JOB (the
//! job the copy is in), SIZE (the file's size when it was copied) and INO (its
//! inode number then, which names its entry among the job's files) as LEB128
//! numbers; then MTIME_NS (its modification time then, in nanoseconds) as 8
//! bytes and CRC (the CRC32C of its data) as 4 bytes, little-endian. At most 44
//! bytes: ext4 keeps an attribute that small inside the inode, so a released
//! file has no block at all (`st_blocks` 0). The entry's path in the job is in
//! the catalog (`hsm_files`) and the job's file list.
//!
//! A file without the attribute is resident (never migrated). A file whose size
//! or modification time differs from its record's was changed since its copy:
//! it is dirty. The catalog keeps the same record, so that either can be
//! rebuilt from the other.

use crate::error::{HsmError, Result};
use std::path::Path;

/// The extended attribute a managed file's record is in.
pub const STAMP_ATTR: &str = "user.tapeloom.hsm";

/// The version byte of a record.
const VERSION: u8 = 1;

/// A managed file's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum State {
    /// Never migrated: its data is on disk only.
    Resident,
    /// Its data is on disk and on tape.
    Premigrated,
    /// Its data is on tape only: the file is a stub of the same size, with no
    /// data blocks on disk.
    Released,
    /// Changed since its copy went to tape.
    Dirty,
}

impl State {
    /// The state's word.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Resident => "resident",
            State::Premigrated => "premigrated",
            State::Released => "released",
            State::Dirty => "dirty",
        }
    }

    /// The state a word names.
    pub fn parse(s: &str) -> Option<State> {
        Some(match s {
            "resident" => State::Resident,
            "premigrated" => State::Premigrated,
            "released" => State::Released,
            "dirty" => State::Dirty,
            _ => return None,
        })
    }

    /// Every state, in the order reports list them.
    pub const ALL: [State; 4] = [
        State::Resident,
        State::Premigrated,
        State::Released,
        State::Dirty,
    ];
}

/// A managed file's record of its tape copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    /// `Premigrated` or `Released`.
    pub state: State,
    /// The job the copy is in.
    pub job: i64,
    /// The file's size when it was copied.
    pub size: u64,
    /// Its modification time when it was copied, in nanoseconds.
    pub mtime_ns: i64,
    /// CRC32C of its data.
    pub crc: u32,
    /// Its inode number when it was copied: its entry among the job's files.
    pub ino: u64,
    /// A released file whose data a recall is writing back: what the file holds
    /// is not its data until the recall says premigrated. A recall cut before
    /// that leaves this mark, and the file is released again.
    pub recalling: bool,
}

impl Stamp {
    /// The record as the attribute holds it.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![
            VERSION,
            match (self.state, self.recalling) {
                (State::Released, true) => b'C',
                (State::Released, false) => b'R',
                _ => b'P',
            },
        ];
        for n in [self.job as u64, self.size, self.ino] {
            leb128(&mut out, n);
        }
        out.extend_from_slice(&self.mtime_ns.to_le_bytes());
        out.extend_from_slice(&self.crc.to_le_bytes());
        out
    }

    /// The record in `bytes`, or why it is not one.
    pub fn decode(bytes: &[u8]) -> std::result::Result<Stamp, String> {
        let [version, state, rest @ ..] = bytes else {
            return Err("too short".into());
        };
        if *version != VERSION {
            return Err(format!("version {version}, not {VERSION}"));
        }
        let (state, recalling) = match state {
            b'P' => (State::Premigrated, false),
            b'R' => (State::Released, false),
            b'C' => (State::Released, true),
            _ => return Err("a bad state".into()),
        };
        let mut at = rest;
        let job = unleb128(&mut at).ok_or("a bad job")?;
        let size = unleb128(&mut at).ok_or("a bad size")?;
        let ino = unleb128(&mut at).ok_or("a bad inode number")?;
        let [m0, m1, m2, m3, m4, m5, m6, m7, c0, c1, c2, c3] = at else {
            return Err(format!("{} bytes after the numbers, not 12", at.len()));
        };
        Ok(Stamp {
            state,
            job: i64::try_from(job).map_err(|_| "a bad job")?,
            size,
            mtime_ns: i64::from_le_bytes([*m0, *m1, *m2, *m3, *m4, *m5, *m6, *m7]),
            crc: u32::from_le_bytes([*c0, *c1, *c2, *c3]),
            ino,
            recalling,
        })
    }

    /// The record of the file at `path`: none when it has none (it is resident).
    pub fn read(path: &Path) -> Result<Option<Stamp>> {
        let got = xattr::get(path, STAMP_ATTR).map_err(|source| HsmError::Io {
            what: format!("read the record of {}", path.display()),
            source,
        })?;
        match got {
            None => Ok(None),
            Some(bytes) => Stamp::decode(&bytes)
                .map(Some)
                .map_err(|why| HsmError::BadStamp {
                    path: path.to_path_buf(),
                    why,
                }),
        }
    }

    /// Writes the record on the file at `path`.
    pub fn write(&self, path: &Path) -> Result<()> {
        xattr::set(path, STAMP_ATTR, &self.encode()).map_err(|source| HsmError::Io {
            what: format!("write the record of {}", path.display()),
            source,
        })
    }

    /// Removes the record from the file at `path`: it is resident again.
    pub fn remove(path: &Path) -> Result<()> {
        match xattr::remove(path, STAMP_ATTR) {
            Ok(()) => Ok(()),
            Err(e) if e.raw_os_error() == Some(nix::libc::ENODATA) => Ok(()),
            Err(source) => Err(HsmError::Io {
                what: format!("remove the record of {}", path.display()),
                source,
            }),
        }
    }

    /// Whether a file of `size` bytes last modified at `mtime_ns` is as it was
    /// when it was copied.
    pub fn matches(&self, size: u64, mtime_ns: i64) -> bool {
        self.size == size && self.mtime_ns == mtime_ns
    }
}

/// Appends `n` as LEB128.
fn leb128(out: &mut Vec<u8>, mut n: u64) {
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// Takes a LEB128 number off the front of `at`.
fn unleb128(at: &mut &[u8]) -> Option<u64> {
    let mut n = 0u64;
    for (i, &b) in at.iter().enumerate().take(10) {
        n |= u64::from(b & 0x7f).checked_shl(7 * i as u32)?;
        if b & 0x80 == 0 {
            *at = &at[i + 1..];
            return Some(n);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_fits_in_an_inode_and_a_bad_one_says_why() {
        let s = Stamp {
            state: State::Released,
            job: i64::MAX,
            size: u64::MAX,
            mtime_ns: 1_700_000_000_123_456_789,
            crc: 0x0102_abcd,
            ino: u64::MAX,
            recalling: false,
        };
        let bytes = s.encode();
        assert!(bytes.len() <= 44, "{}", bytes.len());
        assert_eq!(Stamp::decode(&bytes).unwrap(), s);
        let small = Stamp {
            job: 1,
            size: 0,
            ino: 2,
            ..s.clone()
        };
        assert_eq!(Stamp::decode(&small.encode()).unwrap(), small);
        let recalling = Stamp {
            recalling: true,
            ..s.clone()
        };
        assert_eq!(Stamp::decode(&recalling.encode()).unwrap(), recalling);
        let mut wrong_version = bytes.clone();
        wrong_version[0] = 2;
        let mut wrong_state = bytes.clone();
        wrong_state[1] = b'D';
        for bad in [
            wrong_version,
            wrong_state,
            bytes[..bytes.len() - 1].to_vec(),
            [bytes.clone(), vec![0]].concat(),
            vec![1],
            vec![1, b'P', 0xff, 0xff],
        ] {
            assert!(Stamp::decode(&bad).is_err(), "{bad:?}");
        }
    }
}
