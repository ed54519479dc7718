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

/// One stream: the sources of its job (in the order of their streams, which
/// names each stream's records as the backup named them), its own, and once
/// asked, its packer and the stream offset of the next block it gives.
struct Stream {
    sources: Arc<Vec<PathBuf>>,
    id: u16,
    packer: Option<(u64, Outgoing)>,
}

#[derive(Default)]
struct Regenerator {
    /// By job tag and stream.
    streams: Mutex<HashMap<(u64, u16), Stream>>,
}

static REGENERATOR: OnceLock<Arc<Regenerator>> = OnceLock::new();

/// Says which sources the streams of the job tagged `tag` read (`names`: each
/// stream's source, as the catalog has it), so that their blocks can be made
/// again when a cartridge kept no payload. Only a job whose every source was a
/// generator is made again: nothing is read from disk.
pub(crate) fn know(tag: u64, names: &HashMap<u16, String>) {
    if names.is_empty() || !names.values().all(|n| n.starts_with(SOURCE_PREFIX)) {
        return;
    }
    let r = REGENERATOR.get_or_init(|| {
        let r = Arc::new(Regenerator::default());
        install(r.clone());
        r
    });
    let Ok(mut streams) = r.streams.lock() else {
        return;
    };
    let mut ids: Vec<u16> = names.keys().copied().collect();
    ids.sort_unstable();
    let sources = Arc::new(ids.iter().map(|id| PathBuf::from(&names[id])).collect());
    for id in ids {
        streams.entry((tag, id)).or_insert_with(|| Stream {
            sources: Arc::clone(&sources),
            id,
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
        let opts = BackupOptions::default();
        let facts = (tag, size, 0);
        let packer = pack_some(&s.sources, &opts, facts, Arc::default(), Some(s.id)).ok()?;
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
