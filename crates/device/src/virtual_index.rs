//! The index of a virtual cartridge (`BARCODE.idx`, FORMAT.md 8): read it, check it
//! against the data file, and rebuild it from the blocks' own headers when it is
//! missing or damaged.
//!
//! Reading a cartridge never changes its data file. The index is trusted as it is
//! when its entries follow one another and end exactly where the data does (every
//! cartridge closed cleanly). Otherwise what it says is checked against the data: the
//! entries that follow one another from the start are kept, the last block among them
//! is checked by its CRC, and the data after them is read block by block. Every
//! tapeloom block carries its logical block number and a CRC over all its bytes, so
//! the end of each block is where its CRC holds ([`tapeloom_format::block_len`]),
//! and a jump in the numbers between two blocks is the filemarks between them. The
//! data file does not say whether filemarks follow its last block: one is counted
//! after a label (FORMAT.md 4, rule 1) and after a last block of stream 0 that begins
//! with a record (a job's `JobEnd` ends its segment with one, rule 3 and 4).
//!
//! The rebuild is *certain* when every byte of the data file is in a block whose CRC
//! holds, but for a torn tail shorter than the largest block (a write that a crash
//! cut short), and the block numbers rise in order. A certain rebuild is written
//! (the old index kept beside it as `BARCODE.idx.damaged` when the new one is not
//! its continuation); an uncertain one is used for reading only, and the cartridge
//! refuses to append until it is sorted out.

use crate::{io, Result};
use std::fs::File;
use std::os::unix::fs::FileExt;
use tapeloom_format::{block_len, VolumeLabel, LABEL_LEN, MAX_BLOCK_SIZE};

/// Bytes of one index entry.
pub(crate) const IDX_LEN: u64 = 16;
pub(crate) const KIND_BLOCK: u32 = 0;
pub(crate) const KIND_FILEMARK: u32 = 1;
/// A data block of a cartridge that keeps no payload: the data file holds its
/// header, and the rest of its length is a hole.
pub(crate) const KIND_HEADER_ONLY: u32 = 2;

/// One logical object of a cartridge: a block (its bytes in the data file) or a
/// filemark (no bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Object {
    pub offset: u64,
    pub len: u32,
    pub kind: u32,
}

impl Object {
    pub fn end(&self) -> u64 {
        self.offset + self.len as u64
    }

    pub fn encode(&self) -> [u8; IDX_LEN as usize] {
        let mut e = [0u8; IDX_LEN as usize];
        e[0..8].copy_from_slice(&self.offset.to_le_bytes());
        e[8..12].copy_from_slice(&self.len.to_le_bytes());
        e[12..16].copy_from_slice(&self.kind.to_le_bytes());
        e
    }

    fn decode(c: &[u8]) -> Option<Object> {
        Some(Object {
            offset: u64::from_le_bytes(c.get(0..8)?.try_into().ok()?),
            len: u32::from_le_bytes(c.get(8..12)?.try_into().ok()?),
            kind: u32::from_le_bytes(c.get(12..16)?.try_into().ok()?),
        })
    }
}

/// The most filemarks a rebuild believes between two blocks. A writer leaves one
/// between segments and one after the label; more in a row come only from damage
/// (a block header's number), and would each take an object.
const MAX_FILEMARKS_BETWEEN: u64 = 64;

/// What the index of a cartridge is, once checked against its data.
#[derive(Debug)]
pub(crate) struct Checked {
    pub objects: Vec<Object>,
    /// The objects are those on the cartridge: the index was whole, or its rebuild
    /// is certain.
    pub certain: bool,
    /// The objects differ from the index file's: a certain rebuild to write.
    pub changed: bool,
    /// The index file's entries are not a beginning of the objects (it was damaged,
    /// not only cut short by a crash): keep it beside the new one.
    pub damaged: bool,
}

/// Reads the index entries in `raw` and checks them against `data` (`data_len`
/// bytes), rebuilding what they lack from the data's block headers.
pub(crate) fn check(raw: &[u8], data: &File, data_len: u64, name: &str) -> Result<Checked> {
    let entries: Vec<Object> = raw
        .chunks_exact(IDX_LEN as usize)
        .filter_map(Object::decode)
        .collect();
    let whole = (raw.len() as u64).is_multiple_of(IDX_LEN);
    let mut prefix = Vec::new();
    let mut end = 0u64;
    for o in &entries {
        let sound = o.offset == end
            && match o.kind {
                KIND_BLOCK | KIND_HEADER_ONLY => o.len > 0,
                KIND_FILEMARK => o.len == 0,
                _ => false,
            }
            && o.end() <= data_len;
        if !sound {
            break;
        }
        end = o.end();
        prefix.push(*o);
    }
    let mut reader = Reader::new(data, data_len, name);
    if whole && prefix.len() == entries.len() && end == data_len {
        // A job's last block whose filemark a crash kept from the index.
        let unclosed = reader.ends_job(&prefix)?;
        if unclosed {
            prefix.push(filemark(data_len));
        }
        return Ok(Checked {
            objects: prefix,
            certain: true,
            changed: unclosed,
            damaged: false,
        });
    }
    // The last block the entries name may be the damaged one (a length off by one
    // still leads to an entry that seems to follow): the entries are kept only when
    // that block's bytes are a block whose CRC holds at its length and whose number
    // is its place. Blocks that are not tapeloom's (a test's raw bytes) are taken as
    // indexed.
    let last_block = prefix.iter().rposition(|o| o.kind == KIND_BLOCK);
    if let Some(k) = last_block {
        if !reader.holds_block(prefix[k], k as u64)? {
            prefix.clear();
        }
    }
    let from = prefix.last().map_or(0, |o| o.end());
    let tail = reader.scan(from, prefix.len() as u64)?;
    let (mut objects, certain) = if tail.backwards && !prefix.is_empty() {
        // The blocks after the entries do not follow them: read the whole cartridge.
        let all = reader.scan(0, 0)?;
        (all.objects, all.certain && !all.backwards)
    } else {
        let mut objects = prefix;
        objects.extend(tail.objects);
        (objects, tail.certain && !tail.backwards)
    };
    if certain && reader.ends_job(&objects)? {
        objects.push(filemark(data_len));
    }
    let damaged =
        entries.len() > objects.len() || entries.iter().zip(&objects).any(|(a, b)| a != b);
    let changed = raw.len() as u64 != objects.len() as u64 * IDX_LEN || damaged;
    Ok(Checked {
        objects,
        certain,
        changed,
        damaged,
    })
}

/// The objects a scan found after a point.
struct Tail {
    objects: Vec<Object>,
    /// Every byte read is in a whole block, but for a torn tail.
    certain: bool,
    /// The scan stopped at a block numbered before the place it was expected.
    backwards: bool,
}

/// Reads a cartridge's data file forward through a window of at least the largest
/// block, so that each byte is read about once.
struct Reader<'a> {
    data: &'a File,
    len: u64,
    name: &'a str,
    buf: Vec<u8>,
    /// File offset of `buf[0]`.
    at: u64,
}

impl<'a> Reader<'a> {
    fn new(data: &'a File, len: u64, name: &'a str) -> Self {
        Reader {
            data,
            len,
            name,
            buf: Vec::new(),
            at: 0,
        }
    }

    /// The bytes from `off`: the largest block and four more (to see the magic of
    /// the block after it), or up to the end of the file.
    fn window(&mut self, off: u64) -> Result<&[u8]> {
        let want = (MAX_BLOCK_SIZE + 4) as u64;
        let need_end = (off + want).min(self.len);
        let have_end = self.at + self.buf.len() as u64;
        if off < self.at || need_end > have_end {
            let end = (off + 2 * want).min(self.len);
            let keep = if off >= self.at && off < have_end {
                self.buf.drain(..(off - self.at) as usize);
                self.buf.len()
            } else {
                self.buf.clear();
                0
            };
            self.at = off;
            self.buf.resize((end - off) as usize, 0);
            let name = self.name;
            io(
                || format!("read cartridge {name}"),
                self.data
                    .read_exact_at(&mut self.buf[keep..], off + keep as u64),
            )?;
        }
        let from = (off - self.at) as usize;
        Ok(&self.buf[from..(need_end - self.at) as usize])
    }

    /// Whether the indexed block `o` is a whole tapeloom block written at `lbn` (or
    /// a label at 0), or bytes that are not tapeloom's at all, taken as indexed.
    fn holds_block(&mut self, o: Object, lbn: u64) -> Result<bool> {
        let last = o.end() == self.len;
        let w = self.window(o.offset)?;
        if w.starts_with(tapeloom_format::LABEL_MAGIC) {
            return Ok(lbn == 0 && o.len as usize == LABEL_LEN && VolumeLabel::decode(w).is_ok());
        }
        if !w.starts_with(tapeloom_format::BLOCK_MAGIC) {
            return Ok(true);
        }
        let len = o.len as usize;
        let cut = &w[..(len + 4).min(w.len())];
        Ok(block_len(cut, last) == Some(len) && header_lbn(w) == Some(lbn))
    }

    /// Reads the blocks from `off` to the end of the data, the first of which is
    /// expected at `lbn` or later.
    fn scan(&mut self, mut off: u64, mut lbn: u64) -> Result<Tail> {
        let mut t = Tail {
            objects: Vec::new(),
            certain: true,
            backwards: false,
        };
        while off < self.len {
            let w = self.window(off)?;
            if lbn == 0 && w.len() >= LABEL_LEN && VolumeLabel::decode(w).is_ok() {
                // The label and the filemark after it (FORMAT.md 4, rule 1).
                t.objects.push(block(off, LABEL_LEN));
                t.objects.push(filemark(off + LABEL_LEN as u64));
                off += LABEL_LEN as u64;
                lbn = 2;
                continue;
            }
            let Some((len, at)) = self.next_block(off)? else {
                // No whole block from here to the end: a torn write when it is the
                // beginning of a block, shorter than the largest.
                let short = self.len - off < MAX_BLOCK_SIZE as u64;
                let w = self.window(off)?;
                t.certain &= short && w.starts_with(tapeloom_format::BLOCK_MAGIC);
                break;
            };
            let w = self.window(at)?;
            let Some(n) = header_lbn(w).filter(|&n| n >= lbn + u64::from(at > off)) else {
                t.backwards = true;
                break;
            };
            if n - lbn > MAX_FILEMARKS_BETWEEN {
                // No writer leaves so many filemarks between two blocks: the number
                // is damage, and nothing after it is certain.
                t.certain = false;
                break;
            }
            if at > off {
                // Damaged bytes between two whole blocks: one block when the numbers
                // leave room for exactly one, else a guess.
                t.certain &= n == lbn + 1 && at - off <= MAX_BLOCK_SIZE as u64;
                t.objects.push(block(off, (at - off) as usize));
                lbn += 1;
            }
            for _ in lbn..n {
                t.objects.push(filemark(at));
            }
            t.objects.push(block(at, len));
            off = at + len as u64;
            lbn = n + 1;
        }
        Ok(t)
    }

    /// The next whole block at or after `off`: its length and where it starts.
    fn next_block(&mut self, off: u64) -> Result<Option<(usize, u64)>> {
        let mut at = off;
        while at < self.len {
            let len = self.len;
            let w = self.window(at)?;
            let last = at + w.len() as u64 == len;
            if let Some(len) = block_len(w, last) {
                return Ok(Some((len, at)));
            }
            // Resynchronise at the next magic after this point.
            let magic = tapeloom_format::BLOCK_MAGIC;
            let skip = w
                .get(1..)
                .and_then(|r| r.windows(magic.len()).position(|m| m == magic));
            match skip {
                Some(s) => at += s as u64 + 1,
                None if last => return Ok(None),
                // No magic in this window: go on after it, but for its last bytes,
                // where a magic may begin.
                None => at += (w.len() - magic.len()) as u64,
            }
        }
        Ok(None)
    }

    /// Whether the data ends with a block a filemark followed: the label, or a
    /// block of stream 0 that begins with a record (a job's `JobEnd` begins the
    /// last block of its segment, and the segment ends with a filemark).
    fn ends_job(&mut self, objects: &[Object]) -> Result<bool> {
        let Some(last) = objects.last().filter(|o| o.kind == KIND_BLOCK) else {
            return Ok(false);
        };
        if last.end() != self.len {
            return Ok(false);
        }
        // Only the header is read: a cartridge being written is opened often (each
        // look at the library), and its last block may be the largest.
        let mut w = [0u8; 64];
        let n = (last.len as usize).min(w.len());
        let name = self.name;
        io(
            || format!("read cartridge {name}"),
            self.data.read_exact_at(&mut w[..n], last.offset),
        )?;
        if objects.len() == 1 {
            return Ok(w.starts_with(tapeloom_format::LABEL_MAGIC));
        }
        Ok(n == w.len()
            && w.starts_with(tapeloom_format::BLOCK_MAGIC)
            && w[40..42] == [0, 0]
            && w[56..60] == [0, 0, 0, 0])
    }
}

fn block(offset: u64, len: usize) -> Object {
    Object {
        offset,
        len: len as u32,
        kind: KIND_BLOCK,
    }
}

fn filemark(offset: u64) -> Object {
    Object {
        offset,
        len: 0,
        kind: KIND_FILEMARK,
    }
}

/// The logical block number in a block header (FORMAT.md 4.2, offset 24).
fn header_lbn(w: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(w.get(24..32)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use crate::{ReadOutcome, TapeDrive, VirtualDrive, VirtualTape};
    use std::path::Path;
    use tapeloom_format::{BlockHeader, Timestamp, VolumeLabel, NO_RECORD};

    fn block(lbn: u64, stream: u16, first_record: u32, len: usize, fill: u8) -> Vec<u8> {
        let payload = (len - 64).min(1000);
        let h = BlockHeader {
            volume: [5; 16],
            lbn,
            job_tag: 42,
            stream,
            payload_len: payload as u32,
            stream_offset: 0,
            first_record,
            compressed: false,
            encrypted: false,
        };
        let mut b = vec![0u8; len];
        b[64..64 + payload].fill(fill);
        h.seal(&mut b);
        b
    }

    /// A cartridge as a job leaves it: label, filemark, blocks of several lengths
    /// (one holding a whole block of its own), a filemark inside the segment, and a
    /// last block of stream 0 that begins with a record, then the closing filemark.
    fn cartridge(dir: &Path) -> Vec<u8> {
        let label = VolumeLabel {
            uuid: [5; 16],
            barcode: "T1".into(),
            pool: "default".into(),
            created: Timestamp { secs: 1, nanos: 0 },
            block_size: 65536,
            generation: 0,
        };
        let mut d = VirtualDrive::new(
            "t",
            Some(VirtualTape::open(dir, "T1", 1 << 30, 1 << 20, false).unwrap()),
        );
        d.write_block(&label.encode()).unwrap();
        d.write_filemarks(1, false).unwrap();
        d.write_block(&block(2, 0, 0, 65536, 1)).unwrap();
        let mut nested = block(3, 1, NO_RECORD, 65536, 2);
        let inner = block(9, 1, 0, 4096, 3);
        nested[2000..2000 + inner.len()].copy_from_slice(&inner);
        let h = BlockHeader::open(&block(3, 1, NO_RECORD, 65536, 2)).unwrap();
        h.seal(&mut nested);
        d.write_block(&nested).unwrap();
        d.write_block(&block(4, 2, 0, 8192, 4)).unwrap();
        d.write_filemarks(1, true).unwrap();
        d.write_block(&block(6, 1, NO_RECORD, 65536, 5)).unwrap();
        d.write_block(&block(7, 0, 0, 65536, 6)).unwrap();
        d.write_filemarks(1, false).unwrap();
        d.unload().unwrap();
        std::fs::read(dir.join("T1.idx")).unwrap()
    }

    /// Every object of the cartridge as a drive reads it from the start.
    fn objects(dir: &Path) -> Vec<ReadOutcome> {
        let mut d = VirtualDrive::new(
            "t",
            Some(VirtualTape::open(dir, "T1", 1 << 30, 1 << 20, false).unwrap()),
        );
        let mut buf = vec![0u8; 1 << 20];
        let mut out = Vec::new();
        loop {
            match d.read_block(&mut buf).unwrap() {
                ReadOutcome::EndOfData => break out,
                o => out.push(o),
            }
        }
    }

    #[test]
    fn a_damaged_index_is_rebuilt_from_the_data_which_reading_never_changes() {
        fn damage(what: &str, r: &mut Vec<u8>) {
            let mut entry = |i: usize, at: usize, v: &[u8]| {
                r[i * 16 + at..i * 16 + at + v.len()].copy_from_slice(v)
            };
            match what {
                "a bad kind" => entry(3, 12, &[9, 0, 0, 0]),
                "an offset past the data" => entry(4, 0, &[0, 0, 0, 0, 1, 0, 0, 0]),
                "a middle length one more" => entry(2, 8, &65537u32.to_le_bytes()),
                "a middle length one less" => entry(2, 8, &65535u32.to_le_bytes()),
                "the last length one less" => entry(7, 8, &65535u32.to_le_bytes()),
                "the last length one more" => entry(7, 8, &65537u32.to_le_bytes()),
                "empty" => r.clear(),
                "short by an entry" => r.truncate(r.len() - 16),
                "short by half an entry" => r.truncate(r.len() - 24),
                "short by half" => r.truncate(r.len() / 2),
                "garbage" => r
                    .iter_mut()
                    .for_each(|b| *b = b.wrapping_mul(7).wrapping_add(3)),
                _ => unreachable!("{what}"),
            }
        }
        let damages = [
            "missing",
            "empty",
            "short by an entry",
            "short by half an entry",
            "short by half",
            "a bad kind",
            "an offset past the data",
            "a middle length one more",
            "a middle length one less",
            "the last length one less",
            "the last length one more",
            "garbage",
        ];
        for what in damages {
            let dir = tempfile::tempdir().unwrap();
            let good = cartridge(dir.path());
            let want = objects(dir.path());
            assert_eq!(want.len(), 9, "{want:?}");
            let data_path = dir.path().join("T1.data");
            let data = std::fs::read(&data_path).unwrap();
            let idx_path = dir.path().join("T1.idx");
            if what == "missing" {
                std::fs::remove_file(&idx_path).unwrap();
            } else {
                let mut raw = good.clone();
                damage(what, &mut raw);
                std::fs::write(&idx_path, &raw).unwrap();
            }
            assert_eq!(objects(dir.path()), want, "{what}");
            assert!(
                std::fs::read(&data_path).unwrap() == data,
                "{what}: data changed"
            );
            assert_eq!(
                std::fs::read(&idx_path).unwrap(),
                good,
                "{what}: index not rebuilt"
            );
            // The rebuilt index is trusted as it is from then on.
            assert_eq!(objects(dir.path()), want, "{what}");
        }
    }

    #[test]
    fn an_uncertain_rebuild_reads_but_refuses_to_append() {
        let dir = tempfile::tempdir().unwrap();
        cartridge(dir.path());
        let data_path = dir.path().join("T1.data");
        let mut data = std::fs::read(&data_path).unwrap();
        // Two blocks damaged in a row, where a block and a filemark are numbered.
        let (a, b) = (1024 + 65536, 1024 + 2 * 65536 + 100);
        data[a + 70] ^= 1;
        data[b] ^= 1;
        std::fs::write(&data_path, &data).unwrap();
        std::fs::write(dir.path().join("T1.idx"), []).unwrap();
        let mut d = VirtualDrive::new(
            "t",
            Some(VirtualTape::open(dir.path(), "T1", 1 << 30, 1 << 20, false).unwrap()),
        );
        let mut buf = vec![0u8; 1 << 20];
        assert_eq!(d.read_block(&mut buf).unwrap(), ReadOutcome::Block(1024));
        d.space_to_eod().unwrap();
        let e = d.write_block(&[0; 100]).unwrap_err();
        assert!(e.to_string().contains("could not be rebuilt"), "{e}");
        assert_eq!(std::fs::read(&data_path).unwrap(), data);
        assert_eq!(std::fs::read(dir.path().join("T1.idx")).unwrap(), b"");
    }
}
