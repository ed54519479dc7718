//! Blocks a server sends for a restore, through `BlockRestore` as a client places
//! them: none may panic or write outside the restore target.

use super::decoders::reseal_block;
use super::tape::{check_beside, no_panic, target};
use super::{Outcome, Violation};
use crate::restore::{BlockRestore, RestoreOptions};
use tapeloom_format::{BLOCK_HEADER_LEN, BLOCK_MAGIC};

/// The input: a flags byte, then blocks, each a `u16` little-endian length and
/// that many bytes. Flags bit 0 sets each block's magic and CRC right; bit 1 makes
/// it a restore of the path `a` rather than of the whole job.
pub fn handoff(data: &[u8]) -> Outcome {
    let (f, mut rest) = match data.split_first() {
        Some((f, rest)) => (*f, rest),
        None => (0, data),
    };
    let run = tempfile::tempdir().map_err(|e| Violation(format!("no run folder: {e}")))?;
    let to = target(run.path(), "w").map_err(|e| Violation(format!("no target: {e}")))?;
    let opts = RestoreOptions {
        to: to.clone(),
        paths: if f & 2 != 0 {
            vec![b"a".to_vec()]
        } else {
            vec![]
        },
        ..RestoreOptions::default()
    };
    let Some(mut br) = no_panic(
        "a restore's start",
        BlockRestore::new(&opts).map_err(crate::Error::from),
    )?
    else {
        return Ok(());
    };
    if f & 2 != 0 {
        br.want(b"a".to_vec());
    }
    while let Some(n) = rest
        .get(..2)
        .map(|b| usize::from(u16::from_le_bytes([b[0], b[1]])))
    {
        let end = (2 + n).min(rest.len());
        let mut b = rest[2..end].to_vec();
        rest = &rest[end..];
        if f & 1 != 0 && b.len() >= BLOCK_HEADER_LEN {
            b[..4].copy_from_slice(BLOCK_MAGIC);
            reseal_block(&mut b);
        }
        if no_panic("a block", br.block(&b).map_err(crate::Error::from))?.is_none() {
            break;
        }
    }
    let end = br.finish(&Default::default()).map_err(crate::Error::from);
    no_panic("the restore's end", end)?;
    check_beside(&to)
}
