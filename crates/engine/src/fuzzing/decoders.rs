//! One entry point per decoder family of `tapeloom-format`, and the chunk reader.

use super::{Outcome, Violation};
use crate::stage::{ChunkReader, CHUNK_HEADER_LEN, CHUNK_MAGIC};
use std::io::Write;
use tapeloom_format::{
    expand_block, BlockHeader, Entry, Event, FileEnd, FormatError, IndexEntry, JobEnd, JobStart,
    Kind, RecordDecoder, RecordHeader, StreamEnd, VolumeLabel, BLOCK_HEADER_LEN, BLOCK_MAGIC,
    LABEL_LEN, LABEL_MAGIC, NO_RECORD, RECORD_HEADER_LEN,
};

/// Splits off the leading flags byte.
fn flags(data: &[u8]) -> (u8, &[u8]) {
    match data.split_first() {
        Some((f, rest)) => (*f, rest),
        None => (0, data),
    }
}

/// Sets a block's magic and CRC so that its fields reach the decoder.
fn seal_block(b: &mut [u8]) {
    if b.len() < BLOCK_HEADER_LEN {
        return;
    }
    b[..4].copy_from_slice(BLOCK_MAGIC);
    reseal_block(b);
}

/// Recomputes a block's CRC over whatever its bytes are now.
pub(super) fn reseal_block(b: &mut [u8]) {
    if b.len() < BLOCK_HEADER_LEN {
        return;
    }
    let crc = crc32c::crc32c_append(crc32c::crc32c(&b[..60]), &b[64..]);
    b[60..64].copy_from_slice(&crc.to_le_bytes());
}

/// Recomputes a volume label's CRC.
pub(super) fn reseal_label(b: &mut [u8]) {
    if b.len() < LABEL_LEN {
        return;
    }
    let crc = crc32c::crc32c(&b[..LABEL_LEN - 4]);
    b[LABEL_LEN - 4..LABEL_LEN].copy_from_slice(&crc.to_le_bytes());
}

/// Decodes every record of a payload, each body by its kind, as restore, verify and
/// rebuild do; the payload is fed in pieces of `step` bytes.
fn decode_stream(payload: &[u8], step: usize) {
    let mut d = RecordDecoder::new();
    for piece in payload.chunks(step.max(1)) {
        let fed = d.feed::<FormatError>(piece, &mut |ev| {
            if let Event::Record { kind, body } = ev {
                decode_body(kind, body);
            }
            Ok(())
        });
        if fed.is_err() {
            // Readers resynchronise at the next block's first record.
            d.reset();
        }
    }
}

fn decode_body(kind: Kind, body: &[u8]) {
    match kind {
        Kind::JobStart | Kind::Continuation => drop(JobStart::decode(body)),
        Kind::Entry => {
            if let Ok(e) = Entry::decode(body) {
                let _ = e.stored_len();
            }
        }
        Kind::Data => {}
        Kind::FileEnd => drop(FileEnd::decode(body)),
        Kind::StreamEnd => drop(StreamEnd::decode(body)),
        Kind::Index => drop(IndexEntry::decode_chunk(body)),
        Kind::JobEnd => drop(JobEnd::decode(body)),
        Kind::JobKey => drop(tapeloom_format::JobKey::decode(body)),
    }
}

/// A whole block: header (flags bit 0 sets magic and CRC right), expansion of a
/// compressed payload, and the records in it.
pub fn block(data: &[u8]) -> Outcome {
    let (f, rest) = flags(data);
    let mut b = rest.to_vec();
    if f & 1 != 0 {
        seal_block(&mut b);
    }
    let Ok(h) = BlockHeader::open(&b) else {
        return Ok(());
    };
    let mut out = Vec::new();
    if expand_block(&h, &b, &mut out).is_ok() {
        let payload = h.payload(&out);
        if h.first_record != NO_RECORD {
            if let Some(from) = payload.get(h.first_record as usize..) {
                decode_stream(from, usize::from(f >> 1) + 1);
            }
        }
        decode_stream(payload, payload.len());
    }
    Ok(())
}

/// A stream's payload bytes through the record decoder, fed in pieces whose size the
/// flags byte chooses, every record body decoded by its kind.
pub fn records(data: &[u8]) -> Outcome {
    let (f, rest) = flags(data);
    decode_stream(rest, usize::from(f) * 17 + 1);
    Ok(())
}

/// `Entry`, `FileEnd` and `StreamEnd` bodies (the records of a data stream).
pub fn entry(data: &[u8]) -> Outcome {
    if let Ok(e) = Entry::decode(data) {
        let _ = e.stored_len();
    }
    let _ = FileEnd::decode(data);
    let _ = StreamEnd::decode(data);
    Ok(())
}

/// The volume label; flags bit 0 pads it to its length and sets its magic and CRC
/// right.
pub fn label(data: &[u8]) -> Outcome {
    let (f, rest) = flags(data);
    let mut b = rest.to_vec();
    if f & 1 != 0 {
        if b.len() < LABEL_LEN {
            b.resize(LABEL_LEN, 0);
        }
        b[..8].copy_from_slice(LABEL_MAGIC);
        reseal_label(&mut b);
    }
    let _ = VolumeLabel::decode(&b);
    Ok(())
}

/// `JobStart`/`Continuation`, `JobEnd` and `StreamEnd` bodies.
pub fn job(data: &[u8]) -> Outcome {
    let _ = JobStart::decode(data);
    let _ = JobEnd::decode(data);
    let _ = StreamEnd::decode(data);
    Ok(())
}

/// An `Index` record body.
pub fn index(data: &[u8]) -> Outcome {
    let _ = IndexEntry::decode_chunk(data);
    Ok(())
}

/// A compressed block's frame: the first four bytes are the payload length the
/// header claims, the rest is the frame.
pub fn expand(data: &[u8]) -> Outcome {
    let Some((len, frame)) = data.split_first_chunk::<4>() else {
        return Ok(());
    };
    let payload_len = u32::from_le_bytes(*len);
    let header = BlockHeader {
        volume: [0; 16],
        lbn: 0,
        job_tag: 0,
        stream: 1,
        payload_len,
        stream_offset: 0,
        first_record: NO_RECORD,
        compressed: true,
        encrypted: false,
    };
    let mut b = vec![0u8; BLOCK_HEADER_LEN];
    b.extend_from_slice(frame);
    let mut out = Vec::new();
    match expand_block(&header, &b, &mut out) {
        Ok(()) if out.len() != BLOCK_HEADER_LEN + payload_len as usize => Err(Violation(format!(
            "a frame expanded to {} bytes, not {payload_len}",
            out.len() - 64
        ))),
        _ if out.len() > BLOCK_HEADER_LEN + payload_len as usize => Err(Violation(format!(
            "a failed expansion kept {} bytes, more than the {payload_len} claimed",
            out.len() - 64
        ))),
        _ => Ok(()),
    }
}

/// Every body decoder on the same bytes, and what decodes must encode to bytes that
/// decode to the same value.
pub fn codec(data: &[u8]) -> Outcome {
    fn again<T: PartialEq + std::fmt::Debug>(
        what: &str,
        v: Result<T, FormatError>,
        encode: impl Fn(&T) -> Vec<u8>,
        decode: impl Fn(&[u8]) -> Result<T, FormatError>,
    ) -> Outcome {
        let Ok(v) = v else { return Ok(()) };
        match decode(&encode(&v)) {
            Ok(w) if w == v => Ok(()),
            other => Err(Violation(format!(
                "{what} {v:?} does not survive encoding again: {other:?}"
            ))),
        }
    }
    if let Some(h) = data.first_chunk::<RECORD_HEADER_LEN>() {
        if let Ok(r) = RecordHeader::decode(h) {
            if RecordHeader::decode(&r.encode()) != Ok(r) {
                return Err(Violation(format!(
                    "record header {r:?} changes when encoded"
                )));
            }
        }
    }
    again("entry", Entry::decode(data), Entry::encode, Entry::decode)?;
    again(
        "file end",
        FileEnd::decode(data),
        FileEnd::encode,
        FileEnd::decode,
    )?;
    again(
        "stream end",
        StreamEnd::decode(data),
        StreamEnd::encode,
        StreamEnd::decode,
    )?;
    again(
        "job start",
        JobStart::decode(data),
        JobStart::encode,
        JobStart::decode,
    )?;
    again(
        "job end",
        JobEnd::decode(data),
        JobEnd::encode,
        JobEnd::decode,
    )?;
    again(
        "index",
        IndexEntry::decode_chunk(data),
        |v| IndexEntry::encode_chunk(v),
        IndexEntry::decode_chunk,
    )
}

/// A chunk file of a disk stage through [`ChunkReader`]. Flags bit 0 sets the chunk
/// header's magic and CRC right, bit 1 every length-prefixed block's magic and CRC.
pub fn chunk(data: &[u8]) -> Outcome {
    let (f, rest) = flags(data);
    let mut b = rest.to_vec();
    if f & 1 != 0 && b.len() >= CHUNK_HEADER_LEN {
        b[..4].copy_from_slice(CHUNK_MAGIC);
        let crc = crc32c::crc32c(&b[..68]);
        b[68..72].copy_from_slice(&crc.to_le_bytes());
    }
    if f & 2 != 0 {
        let mut at = CHUNK_HEADER_LEN;
        while let Some(len) = b.get(at..at + 4) {
            let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
            let Some(block) = b.get_mut(at + 4..at + 4 + len) else {
                break;
            };
            seal_block(block);
            at += 4 + len;
        }
    }
    let Ok(mut file) = tempfile::NamedTempFile::new() else {
        return Ok(());
    };
    if file.write_all(&b).is_err() {
        return Ok(());
    }
    let Ok(reader) = ChunkReader::open(file.path()) else {
        return Ok(());
    };
    let _ = (
        reader.job_tag(),
        reader.stream(),
        reader.seq(),
        reader.stream_range(),
    );
    let mut items = 0usize;
    for r in reader {
        if let Ok(staged) = r {
            let _ = BlockHeader::open(&staged.block);
        }
        // Every step reads at least a length, so a chunk file of n bytes yields at
        // most n / 4 items.
        items += 1;
        if items > b.len() / 4 + 1 {
            return Err(Violation("the chunk reader does not stop".into()));
        }
    }
    Ok(())
}
