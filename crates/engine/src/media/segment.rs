//! A job's segment read as it lies on tape: every object (block or filemark)
//! from the segment's first LBN to its recorded last, each block checked (it
//! opens, its CRC holds, it is the job's, and it says it was written where it
//! was read) and handed on as stored, never decoded or decrypted. A copy reads
//! its source so (docs/COPIES.md), object for object.

use crate::error::{MediaError, Result, SegmentProblem};
use tapeloom_catalog::JobVolume;
use tapeloom_device::{DeviceError, ReadOutcome, TapeDrive};
use tapeloom_format::BlockHeader;

/// One object of a segment.
pub(crate) enum Object<'a> {
    /// A block, as stored on tape (header, payload, padding), and its header.
    Block(&'a [u8], BlockHeader),
    /// A filemark inside the segment.
    Filemark,
}

/// What reading a segment met.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SegmentRead {
    /// Blocks read.
    pub blocks: u64,
    /// Filemarks inside the segment.
    pub filemarks: u64,
    /// Bytes of the blocks, as stored.
    pub bytes: u64,
}

/// Reads segment `v` of the job tagged `tag` from `drive`, which holds the
/// segment's cartridge (its label checked), handing each object to `each` with
/// its LBN, in order. `block_size` is the job's block size.
pub(crate) fn read_segment(
    drive: &mut dyn TapeDrive,
    v: &JobVolume,
    (tag, block_size): (u64, usize),
    mut each: impl FnMut(u64, Object<'_>) -> Result<()>,
) -> Result<SegmentRead> {
    let fail = |lbn, problem| MediaError::SegmentObject {
        barcode: v.volume.barcode.clone(),
        lbn,
        problem,
    };
    let last = v
        .last_lbn
        .ok_or_else(|| fail(v.first_lbn, SegmentProblem::NoEnd))?;
    drive.locate(v.first_lbn)?;
    let mut buf = vec![0u8; block_size.max(tapeloom_format::LABEL_LEN)];
    let mut read = SegmentRead::default();
    for lbn in v.first_lbn..=last {
        match drive.read_block(&mut buf) {
            Ok(ReadOutcome::Block(n)) => {
                let block = buf.get(..n).unwrap_or(&[]);
                let h =
                    BlockHeader::open(block).map_err(|e| fail(lbn, SegmentProblem::Damaged(e)))?;
                if h.job_tag != tag {
                    let problem = SegmentProblem::OtherJob {
                        found: h.job_tag,
                        want: tag,
                    };
                    return Err(fail(lbn, problem).into());
                }
                if h.lbn != lbn || h.volume != v.volume.uuid {
                    return Err(fail(lbn, SegmentProblem::Misplaced { lbn: h.lbn }).into());
                }
                read.blocks += 1;
                read.bytes += n as u64;
                each(lbn, Object::Block(block, h))?;
            }
            Ok(ReadOutcome::Filemark) => {
                read.filemarks += 1;
                each(lbn, Object::Filemark)?;
            }
            Ok(ReadOutcome::EndOfData) => {
                return Err(fail(lbn, SegmentProblem::EndsEarly { end: last }).into());
            }
            Err(DeviceError::BlockTooLarge { .. }) => {
                let e = tapeloom_format::FormatError::PayloadTooLong(block_size as u32);
                return Err(fail(lbn, SegmentProblem::Damaged(e)).into());
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(read)
}
