//! Blocks of generator sources made again, for libraries that keep no payload
//! (`library create --payload none`). Such a cartridge keeps each data block's
//! 64-byte header only. When the stream's source was a generator
//! (`gen:PRESET:SIZE:SEED`), this module packs the source again, as the backup
//! did, up to the block asked for, and gives back its payload: the block's own
//! checksum, kept in its header, then says whether the block is as written.
//! Restores and verifies of such jobs then read, time and compare as on a library
//! that keeps everything.
//!
//! A reader asks for a stream's blocks in order, so each stream keeps its packer
//! running between blocks; a block before the packer's place starts it again.
//! A source with `@RATE` is made again at that rate, as it was read.

use crate::backup::generated::SOURCE_PREFIX;
use crate::backup::{pack_some, BackupOptions, Outgoing, Piece};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use tapeloom_device::regenerate::{install, Regenerate};
use tapeloom_format::{BlockHeader, BLOCK_HEADER_LEN};

/// One stream: the sources of its job and their stream names (in the order of
/// their streams, which names each stream's records as the backup named them),
/// its own id, and once asked, its packer and the stream offset of the next
/// block it gives.
struct Stream {
    job: Arc<(Vec<PathBuf>, Vec<Option<String>>)>,
    id: u16,
    packer: Option<(u64, Outgoing)>,
}

#[derive(Default)]
struct Regenerator {
    /// By job tag and stream.
    streams: Mutex<HashMap<(u64, u16), Stream>>,
}

static REGENERATOR: OnceLock<Arc<Regenerator>> = OnceLock::new();

/// Says which sources the streams of the job tagged `tag` read, and under which
/// names (`streams`, as the catalog has them), so that their blocks can be made
/// again when a cartridge kept no payload. Only a job whose every source was a
/// generator is made again: nothing is read from disk.
pub(crate) fn know(tag: u64, streams: &[tapeloom_catalog::Stream]) {
    let generated = |s: &tapeloom_catalog::Stream| {
        std::str::from_utf8(&s.source).is_ok_and(|t| t.starts_with(SOURCE_PREFIX))
    };
    if streams.is_empty() || !streams.iter().all(generated) {
        return;
    }
    let r = REGENERATOR.get_or_init(|| {
        let r = Arc::new(Regenerator::default());
        install(r.clone());
        r
    });
    let Ok(mut known) = r.streams.lock() else {
        return;
    };
    let mut sorted: Vec<&tapeloom_catalog::Stream> = streams.iter().collect();
    sorted.sort_unstable_by_key(|s| s.stream);
    // Every source was checked to be UTF-8 above.
    let sources = (sorted.iter())
        .map(|s| PathBuf::from(String::from_utf8_lossy(&s.source).into_owned()))
        .collect();
    let names = sorted.iter().map(|s| Some(s.name.clone())).collect();
    let job = Arc::new((sources, names));
    for s in sorted {
        known.entry((tag, s.stream)).or_insert_with(|| Stream {
            job: Arc::clone(&job),
            id: s.stream,
            packer: None,
        });
    }
}

/// The fields of a kept header that say which block it is: job tag, stream,
/// whether the payload was compressed or encrypted, and its stream offset
/// (FORMAT.md 4.2: bytes 32..40, 40..42, 42..44 and 48..56).
fn which(header: &[u8]) -> Option<(u64, u16, u16, u64)> {
    let u64_at = |a: usize| Some(u64::from_le_bytes(header.get(a..a + 8)?.try_into().ok()?));
    let u16_at = |a: usize| Some(u16::from_le_bytes(header.get(a..a + 2)?.try_into().ok()?));
    Some((u64_at(32)?, u16_at(40)?, u16_at(42)?, u64_at(48)?))
}

impl Regenerate for Regenerator {
    fn payload(&self, block: &mut [u8]) -> bool {
        let Some((tag, stream, flags, offset)) = which(block) else {
            return false;
        };
        // A payload compressed or encrypted in software is not made again.
        if flags != 0 || block.len() <= BLOCK_HEADER_LEN {
            return false;
        }
        let Ok(mut streams) = self.streams.lock() else {
            return false;
        };
        let Some(s) = streams.get_mut(&(tag, stream)) else {
            return false;
        };
        let Some(made) = next_block(s, tag, block.len(), offset) else {
            return false;
        };
        if made.len() != block.len() {
            return false;
        }
        block[BLOCK_HEADER_LEN..].copy_from_slice(&made[BLOCK_HEADER_LEN..]);
        if BlockHeader::open(block).is_ok() {
            return true;
        }
        block[BLOCK_HEADER_LEN..].fill(0);
        false
    }
}

/// The block of `s` that starts at stream offset `offset`, packed again with
/// blocks of `size` bytes for the job tagged `tag`.
fn next_block(s: &mut Stream, tag: u64, size: usize, offset: u64) -> Option<Vec<u8>> {
    if s.packer.as_ref().is_none_or(|(at, _)| *at > offset) {
        let (sources, names) = &*s.job;
        let opts = BackupOptions {
            stream_names: names.clone(),
            ..BackupOptions::default()
        };
        let facts = (tag, size, 0);
        let packer = pack_some(sources, &opts.pack(), facts, Arc::default(), Some(s.id)).ok()?;
        s.packer = Some((0, packer.into_iter().next()?));
    }
    let (at, out) = s.packer.as_mut()?;
    loop {
        let made = match out.next()? {
            Piece::Block(b) => b,
            Piece::Error(..) | Piece::Idle => continue,
        };
        let (_, _, _, start) = which(&made)?;
        let len = u32::from_le_bytes(made.get(44..48)?.try_into().ok()?) as u64;
        *at = start + len;
        if start == offset {
            return Some(made);
        }
        if start > offset {
            s.packer = None;
            return None;
        }
    }
}
