//! One entry point per decoder family of `tapeloom-format`, and the chunk reader.

use super::{Outcome, Violation};
use crate::stage::{ChunkReader, CHUNK_HEADER_LEN, CHUNK_MAGIC};
use std::io::Write;
use tapeloom_format::{
    expand_block, open_block, BlockHeader, DataKey, Entry, Event, FileEnd, FormatError, IndexEntry,
    JobEnd, JobKey, JobStart, KeyFile, Kind, MasterKey, PackedBlock, RecordDecoder, RecordHeader,
    StreamEnd, VolumeLabel, BLOCK_HEADER_LEN, BLOCK_MAGIC, CRYPT_TAIL_LEN, LABEL_LEN, LABEL_MAGIC,
    NO_RECORD, RECORD_HEADER_LEN,
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
        Kind::JobKey => drop(JobKey::decode(body)),
        Kind::CopyStart => drop(tapeloom_format::CopyStart::decode(body)),
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

/// The master key the `crypt` target unwraps and encrypts with.
const FUZZ_MASTER: [u8; 32] = [7; 32];

/// Key material and encrypted blocks. The flags byte's low two bits choose what the
/// rest is: 0 a key file, 1 a key file's paper form, 2 a `JobKey` body (unwrapped
/// with a fixed master key), 3 a block that is sealed, encrypted with a fixed data
/// key when it is in clear, opened again, then opened once more with its tag
/// changed. Whatever decodes must encode to the same value, and a changed tag must be
/// refused.
pub fn crypt(data: &[u8]) -> Outcome {
    let (f, rest) = flags(data);
    match f & 3 {
        0 => key_file(KeyFile::decode(rest)),
        1 => key_file(KeyFile::from_paper(&String::from_utf8_lossy(rest))),
        2 => job_key(rest),
        _ => encrypted_block(rest),
    }
}

fn key_file(decoded: Result<KeyFile, FormatError>) -> Outcome {
    let Ok(k) = decoded else {
        return Ok(());
    };
    if KeyFile::decode(&k.encode()).as_ref() != Ok(&k) {
        return Err(Violation(format!(
            "key file does not survive encoding: {k:?}"
        )));
    }
    if KeyFile::from_paper(&k.paper()).as_ref() != Ok(&k) {
        return Err(Violation(format!("paper form does not read back: {k:?}")));
    }
    // Unlocking costs what the file asks for (up to 4 GiB): only cheap files here.
    if k.kdf.memory_kib <= 64 && k.kdf.iterations <= 2 {
        let _ = k.unlock(b"passphrase");
    }
    Ok(())
}

fn job_key(body: &[u8]) -> Outcome {
    let Ok(jk) = JobKey::decode(body) else {
        return Ok(());
    };
    if JobKey::decode(&jk.encode()).as_ref() != Ok(&jk) {
        return Err(Violation(format!(
            "JobKey does not survive encoding: {jk:?}"
        )));
    }
    let _ = MasterKey::from_bytes(FUZZ_MASTER).unwrap(&jk);
    Ok(())
}

fn encrypted_block(raw: &[u8]) -> Outcome {
    let mut b = raw.to_vec();
    seal_block(&mut b);
    let Ok(header) = BlockHeader::open(&b) else {
        return Ok(());
    };
    let key = DataKey::from_bytes(&[9; 32]);
    let mut out = Vec::new();
    if header.encrypted {
        // A tag the fuzzer cannot forge: only the refusal paths run.
        if open_block(&header, &b, Some(&key), &mut out).is_ok() {
            return Err(Violation("a block with a forged tag opened".into()));
        }
        return Ok(());
    }
    let mut clear = Vec::new();
    let clear_ok = expand_block(&header, &b, &mut clear).is_ok();
    let mut p = PackedBlock::new(b, header, 0);
    if key.encrypt_block(&mut p, [3; 12]).is_err() {
        return Ok(());
    }
    p.seal(header.volume, header.lbn);
    let Ok(h) = BlockHeader::open(&p.buf) else {
        return Err(Violation("an encrypted block does not open".into()));
    };
    let opened = open_block(&h, &p.buf, Some(&key), &mut out).is_ok();
    if opened != clear_ok || (opened && out[BLOCK_HEADER_LEN..] != clear[BLOCK_HEADER_LEN..]) {
        return Err(Violation("encryption changed what the block holds".into()));
    }
    let tag_at = if h.compressed {
        p.buf.len() - 1
    } else {
        BLOCK_HEADER_LEN + h.payload_len as usize + CRYPT_TAIL_LEN - 1
    };
    p.buf[tag_at] ^= 1;
    reseal_block(&mut p.buf);
    match BlockHeader::open(&p.buf).map(|h| open_block(&h, &p.buf, Some(&key), &mut out)) {
        Ok(Err(FormatError::BadTag)) => Ok(()),
        other => Err(Violation(format!("a changed tag gave {other:?}"))),
    }
}
