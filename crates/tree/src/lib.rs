//! What packing and placing file trees needs and no catalog, so that a client
//! packs and places on its own machine with it, and the engine around its
//! catalog and drives with the same code:
//!
//! - packing ([`pack`]): the walk and the reading of files, the comparison with
//!   a base's tree ([`BaseTree`]), the packer of each stream and its channel,
//!   compression, generated sources, and the packing side of a job written on
//!   another machine; the walk alone is [`walk`], sizes people write [`size`];
//! - placing ([`restore`]): a restore's options and report, the placer and the
//!   restorer every restore ends its entries in, what a restore expects of an
//!   entry ([`Expect`]), and restores fed with blocks read on another machine;
//! - decoding ([`decode`]) a job's interleaved streams into records, and
//!   checking them as a verify does ([`verify`]);
//! - how paths and names are shown to people ([`display_path`],
//!   [`escape_controls`]), a path in a job's namespace ([`normalize`]), a job's
//!   keys ([`crypt`]), and what any of it can fail on ([`Error`]).
//!
//! The engine re-exports what its users name under its own paths.

#![forbid(unsafe_code)]

pub mod crypt;
pub mod decode;
mod error;
pub mod pack;
pub mod restore;
pub mod size;
pub mod verify;
pub mod walk;

pub use crypt::{create_key_file, job_data_key, open_key_file, read_key_file, write_key_file};
pub use error::{io, sys, CryptError, Error, OptionsError, PlaceError, Result};

use std::borrow::Cow;
use tapeloom_format::{Entry, EntryType};

/// One path of a base's tree: what comparing an object with it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseRow {
    /// The path in the job's namespace.
    pub path: Vec<u8>,
    /// Entry type code.
    pub kind: u8,
    /// Logical size.
    pub size: u64,
    /// Modification time in nanoseconds.
    pub mtime_ns: i64,
    /// Status change time in nanoseconds (0 when not known).
    pub ctime_ns: i64,
    /// Inode number (0 when not known).
    pub ino: u64,
    /// Permission bits.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// A hard link's target (empty for every other type).
    pub link: Vec<u8>,
}

/// A set's tree at a job's base, in path order, as the packing side of a job
/// packed elsewhere compares with it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BaseTree {
    /// Its paths, in order.
    pub rows: Vec<BaseRow>,
}

impl BaseTree {
    /// Whether the tree holds `path`.
    pub fn holds(&self, path: &[u8]) -> bool {
        self.rows
            .binary_search_by(|r| r.path.as_slice().cmp(path))
            .is_ok()
    }
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

/// An entry a restore expects to meet on tape, as the catalog lists it (its row,
/// or the row the server read for it): its stream, type and size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expect {
    /// The stream that holds it.
    pub stream: u16,
    /// Its type (FORMAT.md 5.3).
    pub kind: u8,
    /// Its logical size.
    pub size: u64,
}

impl Expect {
    /// Why entry `e`, met on tape, is not the one the catalog lists; `None` when
    /// it is.
    pub fn differs(&self, e: &Entry) -> Option<String> {
        if self.kind != e.kind as u8 {
            let listed = EntryType::from_u8(self.kind).map_or("unknown", |k| k.name());
            return Some(format!(
                "its entry on tape is a {}, the catalog's a {listed}",
                e.kind.name()
            ));
        }
        (e.has_data() && self.size != e.size).then(|| {
            format!(
                "its entry on tape gives {} bytes, the catalog {} bytes",
                e.size, self.size
            )
        })
    }
}

/// Renders raw path bytes for people and JSON: UTF-8 as it is, other bytes as `\xNN`.
/// For people, `escape_controls` then escapes its control characters.
pub fn display_path(p: &[u8]) -> String {
    let mut s = String::with_capacity(p.len());
    for chunk in p.utf8_chunks() {
        s.push_str(chunk.valid());
        for b in chunk.invalid() {
            s.push_str(&format!("\\x{b:02x}"));
        }
    }
    s
}

/// Makes a name safe to print for people, as GNU `ls --quoting-style=escape` does
/// for control characters: tab, newline and carriage return become `\t`, `\n` and
/// `\r`, and every other control character (C0, DEL and C1, which terminals take as
/// commands) becomes `\xNN` for each of its UTF-8 bytes (ESC is `\x1b`), the form
/// `display_path` gives bytes that are not UTF-8. Anything else, spaces and
/// backslashes too, is left as it is, so a plain name prints unchanged. JSON output
/// keeps names as `display_path` gives them, without this.
pub fn escape_controls(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                let mut utf8 = [0u8; 4];
                for b in c.encode_utf8(&mut utf8).bytes() {
                    out.push_str(&format!("\\x{b:02x}"));
                }
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::{display_path, escape_controls};

    #[test]
    fn paths_display_losslessly() {
        assert_eq!(display_path(b"a/b c"), "a/b c");
        assert_eq!(display_path(b"caf\xe9/x"), "caf\\xe9/x");
    }

    #[test]
    fn control_characters_are_escaped_for_people() {
        assert!(matches!(
            escape_controls("plain name, caf\u{e9} \\ 1.txt"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(escape_controls("\x1b[2J"), "\\x1b[2J");
        assert_eq!(escape_controls("a\nb\tc\rd"), "a\\nb\\tc\\rd");
        assert_eq!(escape_controls("del\x7f"), "del\\x7f");
        // A C1 control (CSI) is escaped byte by byte.
        assert_eq!(escape_controls("c1\u{9b}2J"), "c1\\xc2\\x9b2J");
        // Bytes that are not UTF-8 and control characters come out alike.
        assert_eq!(
            escape_controls(&display_path(b"\xff\xfe\x1b")),
            "\\xff\\xfe\\x1b"
        );
        assert!(!escape_controls("\x1b\x07\x00")
            .chars()
            .any(char::is_control));
    }
}
