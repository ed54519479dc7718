//! A base's tree on the wire (`GET /api/backups/ID/base`), written and read one
//! row at a time, so neither end holds it as one document.
//!
//! The body is one JSON document, `{"rows": [...]}` with the rows in path order,
//! laid out one row a line, each line ending in `\n`:
//!
//! | line       | holds                                                      |
//! |------------|------------------------------------------------------------|
//! | first      | `{"rows":[`                                                |
//! | each row   | a [`BaseRow`] as a JSON object, then `,` unless it is last |
//! | last       | `]}`                                                       |
//!
//! A line is at most [`MAX_LINE`] bytes. A reader takes the lines as they come and
//! refuses anything else: a line too long, a row that does not parse, rows out of
//! path order (or twice), a body cut short or with anything after its end.

use serde::{Deserialize, Serialize};
use std::io::{self, BufRead, Write};

/// One path of a base's tree: what the packing side compares an object with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaseRow {
    /// The path in the job's namespace.
    pub path: Vec<u8>,
    /// Entry type code (FORMAT.md 5.3).
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
    #[serde(default)]
    pub link: Vec<u8>,
}

/// Bytes of a line at most, its `\n` included: a row whose path and link take
/// some 120 KiB each (each byte a JSON number of up to four characters).
pub const MAX_LINE: usize = 1 << 20;

const OPEN: &[u8] = b"{\"rows\":[";
const CLOSE: &[u8] = b"]}";

/// Why a base's tree could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BaseError {
    /// The connection failed.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// A line longer than [`MAX_LINE`].
    #[error("line {0} is longer than {MAX_LINE} bytes")]
    TooLong(u64),
    /// A line that is not what its place calls for.
    #[error("line {line}: {why}")]
    Malformed {
        /// Its number, from 1.
        line: u64,
        /// What is wrong, on one line.
        why: String,
    },
    /// The body ended before its closing line.
    #[error("it ends before its closing line, after {0} rows")]
    Cut(u64),
}

/// Writes `rows` (in path order) as a base's tree; how many.
pub fn write_tree(
    w: &mut impl Write,
    rows: impl ExactSizeIterator<Item = BaseRow>,
) -> io::Result<u64> {
    w.write_all(OPEN)?;
    w.write_all(b"\n")?;
    let last = rows.len();
    let mut line = Vec::with_capacity(256);
    for (i, row) in rows.enumerate() {
        line.clear();
        serde_json::to_writer(&mut line, &row).map_err(io::Error::other)?;
        if i + 1 < last {
            line.push(b',');
        }
        line.push(b'\n');
        if line.len() > MAX_LINE {
            return Err(io::Error::other(
                "a row of the base longer than a line may be",
            ));
        }
        w.write_all(&line)?;
    }
    w.write_all(CLOSE)?;
    w.write_all(b"\n")?;
    w.flush()?;
    Ok(last as u64)
}

/// Reads a base's tree from `r`, handing each row to `each` as it comes; how many.
pub fn read_tree<R: BufRead + ?Sized>(
    r: &mut R,
    mut each: impl FnMut(BaseRow),
) -> Result<u64, BaseError> {
    let mut lines = Lines::default();
    match lines.next(r)? {
        Some(_) if lines.buf == OPEN => {}
        Some(l) => return Err(malformed(l, "not the opening of a base's tree")),
        // A whole document on one line (an older server's) is not a tree a row a line.
        None if !OPEN.starts_with(&lines.buf) => {
            return Err(malformed(1, "not the opening of a base's tree"))
        }
        None => return Err(BaseError::Cut(0)),
    }
    let (mut rows, mut prev, mut more) = (0u64, None::<Vec<u8>>, true);
    loop {
        let Some(l) = lines.next(r)? else {
            return Err(BaseError::Cut(rows));
        };
        let buf = &lines.buf;
        if buf == CLOSE {
            break;
        }
        if !more {
            return Err(malformed(l, "a row after the last"));
        }
        more = buf.last() == Some(&b',');
        let text = buf.strip_suffix(b",").unwrap_or(buf);
        let row: BaseRow =
            serde_json::from_slice(text).map_err(|e| malformed(l, &format!("not a row: {e}")))?;
        if prev.as_ref().is_some_and(|p| *p >= row.path) {
            return Err(malformed(l, "a row out of path order"));
        }
        prev = Some(row.path.clone());
        each(row);
        rows += 1;
    }
    // The closing line is line `rows + 2`.
    if more && rows > 0 {
        return Err(malformed(rows + 1, "a comma after the last row"));
    }
    if r.read(&mut [0u8; 1])? != 0 {
        return Err(malformed(rows + 3, "something after the closing line"));
    }
    Ok(rows)
}

fn malformed(line: u64, why: &str) -> BaseError {
    BaseError::Malformed {
        line,
        why: why.to_string(),
    }
}

/// The lines of a body, read one at a time into one buffer.
#[derive(Default)]
struct Lines {
    /// The last line read, without its `\n`.
    buf: Vec<u8>,
    /// Lines read.
    n: u64,
}

impl Lines {
    /// The next line's number, its bytes in `buf`; none at the body's end, or
    /// when the body ends within the line (`buf` holds what came of it).
    fn next<R: BufRead + ?Sized>(&mut self, r: &mut R) -> Result<Option<u64>, BaseError> {
        self.buf.clear();
        self.n += 1;
        let n = io::Read::take(&mut *r, MAX_LINE as u64).read_until(b'\n', &mut self.buf)?;
        match self.buf.last() {
            _ if n == 0 => Ok(None),
            Some(b'\n') => {
                self.buf.pop();
                Ok(Some(self.n))
            }
            _ if n >= MAX_LINE => Err(BaseError::TooLong(self.n)),
            _ => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(path: &[u8]) -> BaseRow {
        BaseRow {
            path: path.to_vec(),
            kind: 1,
            size: 12,
            mtime_ns: -5,
            ctime_ns: 7,
            ino: 99,
            mode: 0o644,
            uid: 1000,
            gid: 100,
            link: Vec::new(),
        }
    }

    fn read(body: &[u8]) -> Result<Vec<BaseRow>, BaseError> {
        let mut rows = Vec::new();
        read_tree(&mut &body[..], |r| rows.push(r))?;
        Ok(rows)
    }

    fn written(rows: &[BaseRow]) -> Vec<u8> {
        let mut body = Vec::new();
        write_tree(&mut body, rows.iter().cloned()).unwrap();
        body
    }

    /// The error of `body`, on one line.
    fn refusal(body: &[u8]) -> String {
        let e = read(body).unwrap_err().to_string();
        assert!(!e.contains('\n'), "{e}");
        e
    }

    #[test]
    fn a_tree_is_one_json_document_a_row_a_line() {
        let rows = vec![row(b"a"), row(b"a/b\xff"), row(b"c")];
        let body = written(&rows);
        let text = String::from_utf8(body.clone()).unwrap();
        assert_eq!(text.lines().count(), 5, "{text}");
        assert!(text.starts_with("{\"rows\":[\n{\"path\":[97],"), "{text}");
        assert!(text.ends_with("}\n]}\n"), "{text}");
        // Whole, it is the document a tree is as JSON.
        #[derive(serde::Deserialize)]
        struct Whole {
            rows: Vec<BaseRow>,
        }
        let whole: Whole = serde_json::from_slice(&body).unwrap();
        assert_eq!(whole.rows, rows);
        assert_eq!(read(&body).unwrap(), rows);
        assert_eq!(read(&written(&[])).unwrap(), Vec::new());
    }

    #[test]
    fn a_malformed_tree_is_a_one_line_error() {
        let good = written(&[row(b"a"), row(b"b")]);
        let text = String::from_utf8(good.clone()).unwrap();
        let with = |from: &str, to: &str| text.replacen(from, to, 1).into_bytes();
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"{\"rows\":[]}".to_vec(), "line 1: not the opening"),
            (with("\"kind\":1", "\"kind\":\"x\""), "line 2: not a row"),
            (with("[97]", "[98]"), "line 3: a row out of path order"),
            (with("},\n", "}\n"), "line 3: a row after the last"),
            (
                with("}\n]}", "},\n]}"),
                "line 3: a comma after the last row",
            ),
            (
                good[..good.len() - 3].to_vec(),
                "ends before its closing line, after 2 rows",
            ),
            (good[..20].to_vec(), "after 0 rows"),
            (Vec::new(), "after 0 rows"),
            (
                [&good[..], b"x"].concat(),
                "line 5: something after the closing line",
            ),
        ];
        for (body, why) in cases {
            let e = refusal(&body);
            assert!(e.contains(why), "{e} (wanted {why})");
        }
        let long = [b"{\"rows\":[\n".as_slice(), &vec![b' '; MAX_LINE]].concat();
        assert_eq!(
            refusal(&long),
            format!("line 2 is longer than {MAX_LINE} bytes")
        );
        // Nor is a row too long for a line written.
        let huge = BaseRow {
            link: vec![255; MAX_LINE / 4],
            ..row(b"a")
        };
        assert!(write_tree(&mut Vec::new(), [huge].into_iter()).is_err());
    }

    proptest::proptest! {
        /// Rows written are read back as they were.
        #[test]
        fn rows_come_back(
            paths in proptest::collection::btree_set(proptest::collection::vec(proptest::num::u8::ANY, 1..40), 0..20),
            link in proptest::collection::vec(proptest::num::u8::ANY, 0..20),
            size in proptest::num::u64::ANY,
            mtime in proptest::num::i64::ANY,
        ) {
            let rows: Vec<BaseRow> = (paths.into_iter())
                .map(|p| BaseRow { size, mtime_ns: mtime, link: link.clone(), ..row(&p) })
                .collect();
            proptest::prop_assert_eq!(read(&written(&rows)).unwrap(), rows);
        }

        /// Any bytes after the opening are rows or an error, never a panic.
        #[test]
        fn any_bytes_are_rows_or_an_error(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..400)) {
            let body = [b"{\"rows\":[\n".as_slice(), &bytes].concat();
            let _ = read(&body);
        }
    }
}
