//! Payloads made again: a cartridge of a library that keeps no payload
//! (`library create --payload none`) keeps only each data block's header, and a
//! block whose data came from a generator source can be made again from the
//! generator. The engine, which makes generator sources (through the generator
//! installed in it), installs one [`Regenerate`] for the process; the virtual drive asks it for each block whose
//! payload was not kept, and reads the block as if it had been.

use std::sync::{Arc, OnceLock};

/// Makes a block's payload again.
pub trait Regenerate: Send + Sync {
    /// `block` is a whole block as written (its length as on tape): its first
    /// 64 bytes are the header the cartridge kept, the rest zeros. Fills in the
    /// payload and padding; true when the block is then whole and its checksum
    /// holds, false when this block cannot be made again (it is left as it was).
    fn payload(&self, block: &mut [u8]) -> bool;
}

static REGENERATOR: OnceLock<Arc<dyn Regenerate>> = OnceLock::new();

/// Installs the process's regenerator; the first one installed stays.
pub fn install(r: Arc<dyn Regenerate>) {
    let _ = REGENERATOR.set(r);
}

/// The block whose header `block` starts with, made whole again, when a
/// regenerator is installed and can.
pub(crate) fn fill(block: &mut [u8]) -> bool {
    REGENERATOR.get().is_some_and(|r| r.payload(block))
}
