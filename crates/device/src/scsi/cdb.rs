//! Command descriptor blocks for tape drives (SPC-4, SSC-4) and media changers
//! (SMC-3), and parsers for the data they return.
//!
//! The builders return fixed arrays with every multi-byte field big-endian, as the
//! standards lay them out. The parsers take data that came from a device: they check
//! lengths before they read, return `Err` for data too short or inconsistent to use,
//! and never panic. The element status parser is the exception to "too short is an
//! error": it decodes every element that fits, since some targets send less than
//! their headers promise.

use super::error::{ParseError, PositionFlag};

/// The largest value a 24-bit CDB field holds.
const MAX24: u32 = 0x00FF_FFFF;

/// A 24-bit big-endian field; values above FFFFFFh saturate to FFFFFFh (never wrap
/// to a small number).
fn be24(v: u32) -> [u8; 3] {
    let b = v.min(MAX24).to_be_bytes();
    [b[1], b[2], b[3]]
}

/// Big-endian value of up to 8 bytes (longer input keeps the low-order 8 bytes).
fn be(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
}

fn be16_at(d: &[u8], at: usize) -> Option<u16> {
    match d.get(at..at + 2) {
        Some(&[a, b]) => Some(u16::from_be_bytes([a, b])),
        _ => None,
    }
}

/// The part of `d` from `start` to `end`, cut to what `d` holds (empty when `d` ends
/// before `start`).
fn clamp(d: &[u8], start: usize, end: usize) -> &[u8] {
    let end = end.min(d.len());
    d.get(start..end).unwrap_or(&[])
}

/// Text from an ASCII field: cut at the first NUL, printable ASCII kept, any other
/// byte shown as `?`, leading and trailing spaces removed.
pub(crate) fn ascii(field: &[u8]) -> String {
    let field = match field.iter().position(|&b| b == 0) {
        Some(nul) => &field[..nul],
        None => field,
    };
    let s: String = field
        .iter()
        .map(|&b| {
            if (0x20..0x7F).contains(&b) {
                char::from(b)
            } else {
                '?'
            }
        })
        .collect();
    s.trim_matches(' ').to_string()
}

// ---------------------------------------------------------------------------------
// Command builders
// ---------------------------------------------------------------------------------

/// TEST UNIT READY (00h).
pub fn test_unit_ready() -> [u8; 6] {
    [0x00, 0, 0, 0, 0, 0]
}

/// INQUIRY (12h). With `Some(page)` the EVPD bit is set and the vital product data
/// page `page` is asked for; with `None` the standard inquiry data. The allocation
/// length is the 16-bit field of SPC-3 and later (bytes 3 and 4); values up to 255
/// also suit SPC-2 devices, which read byte 4 only.
pub fn inquiry(vpd_page: Option<u8>, alloc: u16) -> [u8; 6] {
    let [hi, lo] = alloc.to_be_bytes();
    match vpd_page {
        Some(page) => [0x12, 0x01, page, hi, lo, 0],
        None => [0x12, 0x00, 0x00, hi, lo, 0],
    }
}

/// REQUEST SENSE (03h), fixed format (DESC = 0).
pub fn request_sense(alloc: u8) -> [u8; 6] {
    [0x03, 0, 0, 0, alloc, 0]
}

/// READ BLOCK LIMITS (05h), the 6-byte form (MLOI = 0); see [`parse_block_limits`].
pub fn read_block_limits() -> [u8; 6] {
    [0x05, 0, 0, 0, 0, 0]
}

/// MODE SENSE(6) (1Ah) of the current values (PC = 00b) of page `page` (6 bits,
/// 3Fh for all pages), subpage 0. `dbd` leaves out the block descriptors.
pub fn mode_sense6(page: u8, dbd: bool, alloc: u8) -> [u8; 6] {
    [0x1A, if dbd { 0x08 } else { 0 }, page & 0x3F, 0, alloc, 0]
}

/// MODE SELECT(6) (15h) with PF = 1 (the data is in page format) and SP = 0; `len`
/// is the length of the parameter list, see [`mode_select6_data`].
pub fn mode_select6(len: u8) -> [u8; 6] {
    [0x15, 0x10, 0, 0, len, 0]
}

/// READ(6) (08h) of one variable-length block (FIXED = 0, SILI = 0): the transfer
/// length is the buffer size in bytes. Sizes above FFFFFFh give FFFFFFh (the largest
/// block SSC allows fits the first FFFFFFh bytes of the buffer).
pub fn read6(len: u32) -> [u8; 6] {
    let [a, b, c] = be24(len);
    [0x08, 0x00, a, b, c, 0]
}

/// WRITE(6) (0Ah) of one variable-length block (FIXED = 0) of `len` bytes. The
/// field holds at most FFFFFFh; larger blocks are a caller error (checked in debug
/// builds, saturated otherwise).
pub fn write6(len: u32) -> [u8; 6] {
    debug_assert!(len <= MAX24, "WRITE(6) of {len} bytes");
    let [a, b, c] = be24(len);
    [0x0A, 0x00, a, b, c, 0]
}

/// WRITE FILEMARKS(6) (10h) of `count` filemarks (at most FFFFFFh, saturated).
/// `immediate` sets IMMED; without it the drive writes its buffer to the medium
/// before it returns. A count of 0 with IMMED clear only flushes the buffer.
pub fn write_filemarks6(count: u32, immediate: bool) -> [u8; 6] {
    let [a, b, c] = be24(count);
    [0x10, u8::from(immediate), a, b, c, 0]
}

/// What SPACE counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpaceCode {
    /// Logical blocks.
    Blocks = 0,
    /// Filemarks.
    Filemarks = 1,
    /// To end of data (the count is ignored).
    EndOfData = 3,
}

/// SPACE(6) (11h). `count` is a 24-bit two's complement number (-800000h to
/// 7FFFFFh); negative counts move towards the beginning of the partition. Counts
/// outside that range are clamped to it, so they never change direction; use
/// [`space16`] for them.
pub fn space6(code: SpaceCode, count: i32) -> [u8; 6] {
    debug_assert!(
        (-0x80_0000..=0x7F_FFFF).contains(&count),
        "space count {count} does not fit 24 bits"
    );
    let b = count.clamp(-0x80_0000, 0x7F_FFFF).to_be_bytes();
    [0x11, code as u8, b[1], b[2], b[3], 0]
}

/// SPACE(16) (91h) with a 64-bit two's complement count and parameter length 0.
pub fn space16(code: SpaceCode, count: i64) -> [u8; 16] {
    let mut cdb = [0u8; 16];
    cdb[0] = 0x91;
    cdb[1] = code as u8;
    cdb[4..12].copy_from_slice(&count.to_be_bytes());
    cdb
}

/// LOCATE(16) (92h) to logical object identifier `lbn` in partition 0: DEST_TYPE = 0
/// (logical object identifier), CP = 0 (the current partition, which is 0 for the
/// single-partition tapes this code writes). `immediate` sets IMMED.
pub fn locate16(lbn: u64, immediate: bool) -> [u8; 16] {
    let mut cdb = [0u8; 16];
    cdb[0] = 0x92;
    cdb[1] = u8::from(immediate);
    cdb[4..12].copy_from_slice(&lbn.to_be_bytes());
    cdb
}

/// READ POSITION (34h), service action 06h (long form, 32 bytes of data). The
/// ALLOCATION LENGTH field is 0: SSC-3 requires zero for the short and long forms,
/// and drives that check it (HP and Quantum LTO, for example) reject other values.
/// The device returns 32 bytes regardless; give it a 32-byte buffer.
pub fn read_position_long() -> [u8; 10] {
    [0x34, 0x06, 0, 0, 0, 0, 0, 0, 0, 0]
}

/// READ POSITION (34h), service action 00h (short form, 20 bytes of data, block
/// identifiers). The allocation length is 0, as for the long form; give the device a
/// 20-byte buffer.
pub fn read_position_short() -> [u8; 10] {
    [0x34, 0x00, 0, 0, 0, 0, 0, 0, 0, 0]
}

/// REWIND (01h). `immediate` sets IMMED.
pub fn rewind(immediate: bool) -> [u8; 6] {
    [0x01, u8::from(immediate), 0, 0, 0, 0]
}

/// LOAD UNLOAD (1Bh). `byte4` goes into byte 4 as given: bit 0 LOAD, bit 1 RETEN,
/// bit 2 EOT, bit 3 HOLD. `immediate` sets IMMED in byte 1.
pub fn load_unload(byte4: u8, immediate: bool) -> [u8; 6] {
    [0x1B, u8::from(immediate), 0, 0, byte4, 0]
}

/// PREVENT ALLOW MEDIUM REMOVAL (1Eh): PREVENT = 01b to lock the medium in, 00b to
/// allow its removal.
pub fn prevent_allow(prevent: bool) -> [u8; 6] {
    [0x1E, 0, 0, 0, u8::from(prevent), 0]
}

/// LOG SENSE (4Dh) of page `page` (6 bits), subpage 0, cumulative values (PC = 01b),
/// from the first parameter (parameter pointer 0), SP = 0.
pub fn log_sense(page: u8, alloc: u16) -> [u8; 10] {
    let [hi, lo] = alloc.to_be_bytes();
    [0x4D, 0, 0x40 | (page & 0x3F), 0, 0, 0, 0, hi, lo, 0]
}

/// MOVE MEDIUM (A5h) from element `source` to element `destination` with the medium
/// transport element `transport` (0 lets the changer choose). INVERT = 0.
pub fn move_medium(transport: u16, source: u16, destination: u16) -> [u8; 12] {
    let [t0, t1] = transport.to_be_bytes();
    let [s0, s1] = source.to_be_bytes();
    let [d0, d1] = destination.to_be_bytes();
    [0xA5, 0, t0, t1, s0, s1, d0, d1, 0, 0, 0, 0]
}

/// An element type code of the media changer command set (SMC-3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElementType {
    /// All element types (only as a READ ELEMENT STATUS argument).
    All = 0,
    /// Medium transport element (the robot's picker).
    Transport = 1,
    /// Storage element (a slot).
    Storage = 2,
    /// Import/export element (a mail slot).
    ImportExport = 3,
    /// Data transfer element (a drive).
    DataTransfer = 4,
}

impl ElementType {
    /// The element type for an element type code, `None` for codes SMC-3 does not
    /// define. Code 0 gives [`ElementType::All`].
    pub fn from_code(code: u8) -> Option<ElementType> {
        match code {
            0 => Some(ElementType::All),
            1 => Some(ElementType::Transport),
            2 => Some(ElementType::Storage),
            3 => Some(ElementType::ImportExport),
            4 => Some(ElementType::DataTransfer),
            _ => None,
        }
    }
}

/// READ ELEMENT STATUS (B8h) of `count` elements of type `etype` from address
/// `start`. `voltag` asks for volume tags (barcodes), `dvcid` for the device
/// identifiers of data transfer elements. CURDATA = 0. The allocation length is 24
/// bits (larger values give FFFFFFh).
pub fn read_element_status(
    etype: ElementType,
    start: u16,
    count: u16,
    voltag: bool,
    dvcid: bool,
    alloc: u32,
) -> [u8; 12] {
    let [s0, s1] = start.to_be_bytes();
    let [n0, n1] = count.to_be_bytes();
    let [a0, a1, a2] = be24(alloc);
    let byte1 = if voltag { 0x10 } else { 0 } | (etype as u8 & 0x0F);
    [
        0xB8,
        byte1,
        s0,
        s1,
        n0,
        n1,
        u8::from(dvcid),
        a0,
        a1,
        a2,
        0,
        0,
    ]
}

/// INITIALIZE ELEMENT STATUS (07h): the changer takes a new inventory.
pub fn initialize_element_status() -> [u8; 6] {
    [0x07, 0, 0, 0, 0, 0]
}

// ---------------------------------------------------------------------------------
// INQUIRY
// ---------------------------------------------------------------------------------

/// What standard INQUIRY data says about a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InquiryData {
    /// Peripheral device type (byte 0 bits 4-0): 01h sequential-access (tape),
    /// 08h medium changer.
    pub peripheral_type: u8,
    /// RMB: the medium is removable.
    pub removable: bool,
    /// T10 vendor identification (bytes 8-15), trimmed.
    pub vendor: String,
    /// Product identification (bytes 16-31), trimmed.
    pub product: String,
    /// Product revision level (bytes 32-35), trimmed.
    pub revision: String,
}

/// Parses standard INQUIRY data. At least 5 bytes are needed; the text fields are
/// taken as far as the data holds them (empty when missing). Text is cut at a NUL,
/// trimmed of spaces, and bytes outside printable ASCII show as `?`.
pub fn parse_inquiry(d: &[u8]) -> Result<InquiryData, ParseError> {
    if d.len() < 5 {
        return Err(ParseError::TooShort {
            what: "INQUIRY data",
            len: d.len(),
            need: "at least 5",
        });
    }
    Ok(InquiryData {
        peripheral_type: d[0] & 0x1F,
        removable: d[1] & 0x80 != 0,
        vendor: ascii(clamp(d, 8, 16)),
        product: ascii(clamp(d, 16, 32)),
        revision: ascii(clamp(d, 32, 36)),
    })
}

/// Parses the Unit Serial Number VPD page (80h): the serial number, trimmed. Err when
/// the data is shorter than the 4-byte header or is another page.
pub fn parse_serial_vpd(d: &[u8]) -> Result<String, ParseError> {
    if d.len() < 4 {
        return Err(ParseError::TooShort {
            what: "serial number page",
            len: d.len(),
            need: "at least 4",
        });
    }
    if d[1] != 0x80 {
        return Err(ParseError::WrongPage {
            got: d[1],
            expected: 0x80,
        });
    }
    let len = usize::from(u16::from_be_bytes([d[2], d[3]]));
    Ok(ascii(clamp(d, 4, 4 + len)))
}

// ---------------------------------------------------------------------------------
// READ BLOCK LIMITS
// ---------------------------------------------------------------------------------

/// The block sizes a drive supports (READ BLOCK LIMITS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockLimits {
    /// GRANULARITY: block lengths are multiples of 2^granularity bytes.
    pub granularity: u8,
    /// Maximum block length limit in bytes (0 means not specified).
    pub max: u32,
    /// Minimum block length limit in bytes.
    pub min: u16,
}

/// Parses the 6-byte READ BLOCK LIMITS data (SSC-4): granularity in byte 0 bits
/// 4-0, maximum length in bytes 1-3, minimum in bytes 4-5.
pub fn parse_block_limits(d: &[u8]) -> Result<BlockLimits, ParseError> {
    match d.get(..6) {
        Some(&[g, a, b, c, lo0, lo1]) => Ok(BlockLimits {
            granularity: g & 0x1F,
            max: u32::from_be_bytes([0, a, b, c]),
            min: u16::from_be_bytes([lo0, lo1]),
        }),
        _ => Err(ParseError::TooShort {
            what: "READ BLOCK LIMITS data",
            len: d.len(),
            need: "6",
        }),
    }
}

// ---------------------------------------------------------------------------------
// MODE SENSE / MODE SELECT
// ---------------------------------------------------------------------------------

/// A short-form mode parameter block descriptor (8 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockDescriptor {
    /// Density code (the tape format, 0 for the drive's default).
    pub density: u8,
    /// Number of blocks (0 for all remaining).
    pub blocks: u32,
    /// Block length, 0 for variable-length blocks.
    pub block_len: u32,
}

/// MODE SENSE(6) data of a tape drive or changer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModeData {
    /// Medium type (byte 1).
    pub medium_type: u8,
    /// WP (device-specific parameter bit 7): the loaded medium is write protected.
    pub write_protected: bool,
    /// BUFFERED MODE (device-specific parameter bits 6-4).
    pub buffered_mode: u8,
    /// SPEED (device-specific parameter bits 3-0).
    pub speed: u8,
    /// The first block descriptor, when the device returned one.
    pub descriptor: Option<BlockDescriptor>,
    /// The mode pages: the bytes after the header and the block descriptors, up to
    /// the end of the mode data (its length field) or of the buffer, whichever comes
    /// first. See [`find_mode_page`].
    pub pages: Vec<u8>,
}

/// Parses MODE SENSE(6) data: the 4-byte header, the block descriptors and the
/// pages. Err when the data is shorter than the header or than the block descriptors
/// the header announces (an allocation length too small, or garbage).
pub fn parse_mode_sense6(d: &[u8]) -> Result<ModeData, ParseError> {
    let Some(&[mdl, medium_type, dsp, bdl]) = d.get(..4) else {
        return Err(ParseError::TooShort {
            what: "MODE SENSE(6) data",
            len: d.len(),
            need: "4",
        });
    };
    let bdl = usize::from(bdl);
    if d.len() < 4 + bdl {
        return Err(ParseError::DescriptorsCut {
            len: d.len(),
            descriptors: bdl,
        });
    }
    let descriptor = match d.get(4..12) {
        Some(&[density, n0, n1, n2, _, l0, l1, l2]) if bdl >= 8 => Some(BlockDescriptor {
            density,
            blocks: u32::from_be_bytes([0, n0, n1, n2]),
            block_len: u32::from_be_bytes([0, l0, l1, l2]),
        }),
        _ => None,
    };
    // The mode data length counts the bytes after itself.
    let end = (usize::from(mdl) + 1).min(d.len());
    let pages = clamp(d, 4 + bdl, end).to_vec();
    Ok(ModeData {
        medium_type,
        write_protected: dsp & 0x80 != 0,
        buffered_mode: (dsp >> 4) & 0x07,
        speed: dsp & 0x0F,
        descriptor,
        pages,
    })
}

/// Finds mode page `page` (page_0 format, subpage 0) among `pages`, with its 2-byte
/// header; the PS bit is ignored when comparing codes. Sub-page format pages are
/// stepped over. A page that runs past the end of `pages` is returned as far as it
/// is present; callers check the length they need.
pub fn find_mode_page(pages: &[u8], page: u8) -> Option<&[u8]> {
    let mut at = 0usize;
    while let Some(&[b0, b1]) = pages.get(at..at + 2) {
        let subpage_format = b0 & 0x40 != 0;
        let total = if subpage_format {
            // Byte 1 is the subpage code, bytes 2-3 the page length.
            4 + usize::from(be16_at(pages, at + 2).unwrap_or(0))
        } else {
            2 + usize::from(b1)
        };
        if !subpage_format && b0 & 0x3F == page & 0x3F {
            return Some(clamp(pages, at, at + total));
        }
        at += total;
    }
    None
}

/// Builds MODE SELECT(6) parameter data: a 4-byte header (mode data length 0,
/// medium type 0, device-specific parameter `buffered_mode << 4` with WP and SPEED
/// 0), the 8-byte block descriptor when given, then `page` with its PS bit cleared.
pub fn mode_select6_data(
    descriptor: Option<BlockDescriptor>,
    buffered_mode: u8,
    page: Option<&[u8]>,
) -> Vec<u8> {
    let mut out = vec![0, 0, (buffered_mode & 0x07) << 4, 0];
    if let Some(bd) = descriptor {
        out[3] = 8;
        let [n0, n1, n2] = be24(bd.blocks);
        let [l0, l1, l2] = be24(bd.block_len);
        out.extend_from_slice(&[bd.density, n0, n1, n2, 0, l0, l1, l2]);
    }
    if let Some(p) = page {
        let start = out.len();
        out.extend_from_slice(p);
        if let Some(b0) = out.get_mut(start) {
            *b0 &= 0x7F;
        }
    }
    out
}

/// From the Data Compression mode page (0Fh) as MODE SENSE returned it, a copy to
/// send back with DCE (byte 2 bit 7, compression enabled) set to `on` and PS
/// cleared. `None` when the data is shorter than 4 bytes, is not page 0Fh, or DCC
/// (byte 2 bit 6) says the drive cannot compress.
pub fn compression_page(current: &[u8], on: bool) -> Option<Vec<u8>> {
    let &[b0, _, b2, _] = current.get(..4)? else {
        return None;
    };
    if b0 & 0x3F != 0x0F || b2 & 0x40 == 0 {
        return None;
    }
    let mut page = current.to_vec();
    page[0] &= 0x7F;
    if on {
        page[2] |= 0x80;
    } else {
        page[2] &= !0x80;
    }
    Some(page)
}

// ---------------------------------------------------------------------------------
// READ POSITION
// ---------------------------------------------------------------------------------

/// A tape position from READ POSITION.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// BOP: at the beginning of the partition.
    pub bop: bool,
    /// EOP: between early warning and the end of the partition.
    pub eop: bool,
    /// BPEW: beyond the programmable early warning.
    pub bpew: bool,
    /// The logical object number (blocks and filemarks from the beginning of the
    /// partition).
    pub lbn: u64,
    /// The logical file identifier (filemarks from the beginning of the partition),
    /// when the device knows it; the short form never gives it.
    pub file: Option<u64>,
}

/// Parses the long form of READ POSITION data (SSC-4, 32 bytes). Byte 0: BOP bit 7,
/// EOP bit 6, MPU bit 3 (mark position unknown: the file identifier is not valid),
/// LONU bit 2 (logical object number unknown), BPEW bit 0. The logical object number
/// is in bytes 8-15, the logical file identifier in bytes 16-23. Err when fewer than
/// 24 bytes are present or LONU is set.
pub fn parse_read_position_long(d: &[u8]) -> Result<Position, ParseError> {
    if d.len() < 24 {
        return Err(ParseError::TooShort {
            what: "READ POSITION long form",
            len: d.len(),
            need: "24",
        });
    }
    let flags = d[0];
    if flags & 0x04 != 0 {
        return Err(ParseError::PositionUnknown(PositionFlag::Lonu));
    }
    Ok(Position {
        bop: flags & 0x80 != 0,
        eop: flags & 0x40 != 0,
        bpew: flags & 0x01 != 0,
        lbn: be(&d[8..16]),
        file: if flags & 0x08 != 0 {
            None
        } else {
            Some(be(&d[16..24]))
        },
    })
}

/// Parses the short form of READ POSITION data (SSC-4, 20 bytes). Byte 0: BOP bit 7,
/// EOP bit 6, LOCU bit 5, BYCU bit 4, BPU (LOLU in SSC-3 and later: the block
/// locations are unknown) bit 2, PERR bit 1, BPEW bit 0. The first block location is
/// in bytes 4-7. Err when fewer than 8 bytes are present or BPU is set.
pub fn parse_read_position_short(d: &[u8]) -> Result<Position, ParseError> {
    if d.len() < 8 {
        return Err(ParseError::TooShort {
            what: "READ POSITION short form",
            len: d.len(),
            need: "8",
        });
    }
    let flags = d[0];
    if flags & 0x04 != 0 {
        return Err(ParseError::PositionUnknown(PositionFlag::Bpu));
    }
    Ok(Position {
        bop: flags & 0x80 != 0,
        eop: flags & 0x40 != 0,
        bpew: flags & 0x01 != 0,
        lbn: be(&d[4..8]),
        file: None,
    })
}

// ---------------------------------------------------------------------------------
// Media changer: element address assignment and element status
// ---------------------------------------------------------------------------------

/// Where a changer's elements are: (first element address, number of elements) of
/// each type, from the Element Address Assignment mode page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ElementAddresses {
    /// Medium transport elements.
    pub transport: (u16, u16),
    /// Storage elements.
    pub storage: (u16, u16),
    /// Import/export elements.
    pub import_export: (u16, u16),
    /// Data transfer elements.
    pub data_transfer: (u16, u16),
}

/// Finds the Element Address Assignment page (1Dh, SMC-3) in mode pages (give
/// it [`ModeData::pages`]) and reads it. Err when the page is missing or shorter
/// than its 18 bytes of addresses and counts.
pub fn parse_element_address_page(pages: &[u8]) -> Result<ElementAddresses, ParseError> {
    let p = find_mode_page(pages, 0x1D).ok_or(ParseError::NoElementAddressPage)?;
    let w = |at| {
        be16_at(p, at).ok_or(ParseError::TooShort {
            what: "Element Address Assignment page",
            len: p.len(),
            need: "18",
        })
    };
    Ok(ElementAddresses {
        transport: (w(2)?, w(4)?),
        storage: (w(6)?, w(8)?),
        import_export: (w(10)?, w(12)?),
        data_transfer: (w(14)?, w(16)?),
    })
}

/// One element from READ ELEMENT STATUS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Element {
    /// The element's type.
    pub etype: ElementType,
    /// The element address.
    pub address: u16,
    /// FULL: the element holds a cartridge.
    pub full: bool,
    /// EXCEPT: the element is in an abnormal state; `asc`/`ascq` say which.
    pub except: bool,
    /// Additional sense code for the element's state (0 when not reported).
    pub asc: u8,
    /// Additional sense code qualifier for the element's state.
    pub ascq: u8,
    /// The element the cartridge came from, when SVALID is set.
    pub source: Option<u16>,
    /// The volume identifier of the primary volume tag (the barcode), trimmed;
    /// `None` when not asked for, blank, or cut off.
    pub barcode: Option<String>,
    /// The device identifier of a data transfer element (DVCID): the identifier as
    /// text when its code set is ASCII or UTF-8, as lower-case hexadecimal when
    /// binary. `None` when absent, empty or cut off.
    pub device_id: Option<String>,
}

/// Parses READ ELEMENT STATUS data (SMC-3): the 8-byte header, then element
/// status pages, each an 8-byte page header (element type code, PVOLTAG bit 7 and
/// AVOLTAG bit 6 of byte 1, descriptor length in bytes 2-3, descriptor byte count in
/// bytes 5-7) followed by its element descriptors.
///
/// Descriptor layout: address in bytes 0-1; byte 2 FULL bit 0 and EXCEPT bit 2;
/// ASC/ASCQ in bytes 4-5; SVALID byte 9 bit 7 with the source address in bytes
/// 10-11; from byte 12 the primary volume tag (36 bytes, of which the first 32 are
/// the barcode) when PVOLTAG, then the alternate volume tag when AVOLTAG; then, for a
/// data transfer element, the device identification: code set (byte 0 bits 3-0),
/// identifier type, a reserved byte, identifier length and the identifier.
///
/// The data is bounded by the byte counts of the headers and by the buffer. Every
/// descriptor that fits is decoded; a last descriptor cut short is decoded as far as
/// its address and flags are present, its barcode only when all 32 bytes of the
/// volume identifier are there, its device identifier only when complete. Pages of
/// element types SMC-3 does not define are skipped. Err only when the 8-byte header
/// is missing or a page with descriptors gives a descriptor length of 0.
pub fn parse_element_status(d: &[u8]) -> Result<Vec<Element>, ParseError> {
    let Some(&[_, _, _, _, _, c0, c1, c2]) = d.get(..8) else {
        return Err(ParseError::TooShort {
            what: "READ ELEMENT STATUS data",
            len: d.len(),
            need: "8",
        });
    };
    let report = u32::from_be_bytes([0, c0, c1, c2]) as usize;
    let end = d.len().min(8 + report);
    let mut elements = Vec::new();
    let mut page_at = 8usize;
    while let Some(&[code, tags, l0, l1, _, n0, n1, n2]) = d.get(page_at..page_at + 8) {
        if page_at + 8 > end {
            break;
        }
        let desc_len = usize::from(u16::from_be_bytes([l0, l1]));
        let page_bytes = u32::from_be_bytes([0, n0, n1, n2]) as usize;
        let first = page_at + 8;
        let claimed_end = first + page_bytes;
        let page_end = claimed_end.min(end);
        match ElementType::from_code(code) {
            Some(etype) if etype != ElementType::All && page_end > first => {
                if desc_len == 0 {
                    return Err(ParseError::ZeroDescriptorLength {
                        code,
                        bytes: page_bytes,
                    });
                }
                let mut at = first;
                while at < page_end {
                    let desc = clamp(d, at, (at + desc_len).min(page_end));
                    if let Some(e) =
                        parse_descriptor(desc, etype, tags & 0x80 != 0, tags & 0x40 != 0)
                    {
                        elements.push(e);
                    }
                    at += desc_len;
                }
            }
            _ => {}
        }
        page_at = claimed_end;
    }
    Ok(elements)
}

/// One element descriptor, decoded as far as `desc` holds it; `None` when even the
/// address and flags are missing.
fn parse_descriptor(
    desc: &[u8],
    etype: ElementType,
    pvoltag: bool,
    avoltag: bool,
) -> Option<Element> {
    let address = be16_at(desc, 0)?;
    let flags = *desc.get(2)?;
    let source = match (desc.get(9), be16_at(desc, 10)) {
        (Some(&b9), Some(addr)) if b9 & 0x80 != 0 => Some(addr),
        _ => None,
    };
    let mut at = 12;
    let mut barcode = None;
    if pvoltag {
        barcode = desc.get(at..at + 32).map(ascii).filter(|s| !s.is_empty());
        at += 36;
    }
    if avoltag {
        at += 36;
    }
    let device_id = if etype == ElementType::DataTransfer {
        device_identifier(desc, at)
    } else {
        None
    };
    Some(Element {
        etype,
        address,
        full: flags & 0x01 != 0,
        except: flags & 0x04 != 0,
        asc: desc.get(4).copied().unwrap_or(0),
        ascq: desc.get(5).copied().unwrap_or(0),
        source,
        barcode,
        device_id,
    })
}

/// The identification descriptor at `at` of an element descriptor.
fn device_identifier(desc: &[u8], at: usize) -> Option<String> {
    let &[code_set, _id_type, _, len] = desc.get(at..at + 4)? else {
        return None;
    };
    let id = desc.get(at + 4..at + 4 + usize::from(len))?;
    let text = match code_set & 0x0F {
        // Binary.
        1 => hex::encode(id),
        // ASCII, UTF-8, and (leniently) anything else.
        _ => ascii(id),
    };
    Some(text).filter(|s| !s.is_empty())
}

// ---------------------------------------------------------------------------------
// LOG SENSE
// ---------------------------------------------------------------------------------

/// One log parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogParam {
    /// The parameter code.
    pub code: u16,
    /// The parameter value bytes.
    pub value: Vec<u8>,
}

/// Parses a log page (SPC-4): the page code (byte 0 bits 5-0) and its
/// parameters (code in bytes 0-1, control byte, length, value). The page is bounded
/// by its page length and by the buffer; a last parameter cut short is left out. Err
/// when the 4-byte page header is missing.
pub fn parse_log_page(d: &[u8]) -> Result<(u8, Vec<LogParam>), ParseError> {
    let Some(&[b0, _, l0, l1]) = d.get(..4) else {
        return Err(ParseError::TooShort {
            what: "log page",
            len: d.len(),
            need: "4",
        });
    };
    let end = d.len().min(4 + usize::from(u16::from_be_bytes([l0, l1])));
    let mut params = Vec::new();
    let mut at = 4usize;
    while let Some(&[c0, c1, _, len]) = d.get(at..at + 4) {
        let value_end = at + 4 + usize::from(len);
        if value_end > end {
            break;
        }
        params.push(LogParam {
            code: u16::from_be_bytes([c0, c1]),
            value: d[at + 4..value_end].to_vec(),
        });
        at = value_end;
    }
    Ok((b0 & 0x3F, params))
}

/// The value of a log parameter as a big-endian unsigned number. Values longer than
/// 8 bytes give their low-order 8 bytes when the rest is zero, `u64::MAX` otherwise.
pub fn param_u64(p: &LogParam) -> u64 {
    let v = &p.value;
    if v.len() > 8 {
        let (high, low) = v.split_at(v.len() - 8);
        if high.iter().any(|&b| b != 0) {
            return u64::MAX;
        }
        return be(low);
    }
    be(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pseudo-random bytes (xorshift), for robustness tests.
    fn noise(seed: u32, len: usize) -> Vec<u8> {
        let mut x = seed | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect()
    }

    // ----- CDBs ------------------------------------------------------------------

    #[test]
    fn six_byte_cdbs() {
        assert_eq!(test_unit_ready(), [0x00, 0, 0, 0, 0, 0]);
        assert_eq!(inquiry(None, 96), [0x12, 0, 0, 0, 96, 0]);
        assert_eq!(
            inquiry(Some(0x80), 0x0104),
            [0x12, 0x01, 0x80, 0x01, 0x04, 0]
        );
        assert_eq!(request_sense(96), [0x03, 0, 0, 0, 96, 0]);
        assert_eq!(read_block_limits(), [0x05, 0, 0, 0, 0, 0]);
        assert_eq!(
            mode_sense6(0x0F, true, 0xFF),
            [0x1A, 0x08, 0x0F, 0, 0xFF, 0]
        );
        assert_eq!(mode_sense6(0x3F, false, 12), [0x1A, 0x00, 0x3F, 0, 12, 0]);
        assert_eq!(mode_sense6(0xDD, false, 12)[2], 0x1D, "PC stays 00b");
        assert_eq!(mode_select6(28), [0x15, 0x10, 0, 0, 28, 0]);
        assert_eq!(rewind(false), [0x01, 0, 0, 0, 0, 0]);
        assert_eq!(rewind(true), [0x01, 1, 0, 0, 0, 0]);
        assert_eq!(load_unload(0x01, false), [0x1B, 0, 0, 0, 0x01, 0]);
        assert_eq!(load_unload(0x00, true), [0x1B, 0x01, 0, 0, 0x00, 0]);
        assert_eq!(load_unload(0x04 | 0x02, false), [0x1B, 0, 0, 0, 0x06, 0]);
        assert_eq!(prevent_allow(true), [0x1E, 0, 0, 0, 0x01, 0]);
        assert_eq!(prevent_allow(false), [0x1E, 0, 0, 0, 0x00, 0]);
        assert_eq!(initialize_element_status(), [0x07, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn read_write_and_filemarks() {
        // 256 KiB variable block: transfer length 040000h.
        assert_eq!(read6(262_144), [0x08, 0x00, 0x04, 0x00, 0x00, 0]);
        assert_eq!(write6(0x00FF_FFFF), [0x0A, 0x00, 0xFF, 0xFF, 0xFF, 0]);
        assert_eq!(write6(0x0001_2345), [0x0A, 0x00, 0x01, 0x23, 0x45, 0]);
        assert_eq!(write_filemarks6(1, false), [0x10, 0x00, 0, 0, 1, 0]);
        assert_eq!(
            write_filemarks6(0x0203, true),
            [0x10, 0x01, 0, 0x02, 0x03, 0]
        );
        assert_eq!(write_filemarks6(0, false), [0x10, 0, 0, 0, 0, 0]);
        // A 16 MiB buffer reads at most FFFFFFh bytes, never 0.
        assert_eq!(read6(0x0100_0000), [0x08, 0x00, 0xFF, 0xFF, 0xFF, 0]);
    }

    #[test]
    fn space_counts_are_twos_complement() {
        assert_eq!(space6(SpaceCode::Filemarks, 1), [0x11, 0x01, 0, 0, 1, 0]);
        assert_eq!(
            space6(SpaceCode::Filemarks, -1),
            [0x11, 0x01, 0xFF, 0xFF, 0xFF, 0]
        );
        assert_eq!(
            space6(SpaceCode::Blocks, -2),
            [0x11, 0x00, 0xFF, 0xFF, 0xFE, 0]
        );
        assert_eq!(
            space6(SpaceCode::Blocks, 0x7F_FFFF),
            [0x11, 0x00, 0x7F, 0xFF, 0xFF, 0]
        );
        assert_eq!(
            space6(SpaceCode::Blocks, -0x80_0000),
            [0x11, 0x00, 0x80, 0x00, 0x00, 0]
        );
        assert_eq!(space6(SpaceCode::EndOfData, 0), [0x11, 0x03, 0, 0, 0, 0]);
        assert_eq!(
            space16(SpaceCode::Blocks, -2),
            [0x91, 0x00, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE, 0, 0, 0, 0]
        );
        assert_eq!(
            space16(SpaceCode::Filemarks, 0x0102_0304_0506),
            [0x91, 0x01, 0, 0, 0, 0, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0, 0, 0, 0]
        );
        assert_eq!(space16(SpaceCode::EndOfData, 0)[1], 0x03);
    }

    #[test]
    fn locate_and_read_position() {
        assert_eq!(
            locate16(0x01_2345_6789, false),
            [0x92, 0x00, 0, 0, 0, 0, 0, 0x01, 0x23, 0x45, 0x67, 0x89, 0, 0, 0, 0]
        );
        let c = locate16(u64::MAX, true);
        assert_eq!(c[1], 0x01);
        assert_eq!(&c[4..12], &[0xFF; 8]);
        assert_eq!(read_position_long(), [0x34, 0x06, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(read_position_short(), [0x34, 0x00, 0, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn log_sense_and_changer_cdbs() {
        // TapeAlert page, cumulative values, 1 KiB.
        assert_eq!(
            log_sense(0x2E, 0x0400),
            [0x4D, 0, 0x6E, 0, 0, 0, 0, 0x04, 0x00, 0]
        );
        assert_eq!(
            log_sense(0x0C, 0xFFFF),
            [0x4D, 0, 0x4C, 0, 0, 0, 0, 0xFF, 0xFF, 0]
        );
        assert_eq!(
            move_medium(0x0001, 0x1000, 0x0100),
            [0xA5, 0, 0x00, 0x01, 0x10, 0x00, 0x01, 0x00, 0, 0, 0, 0]
        );
        assert_eq!(
            read_element_status(ElementType::Storage, 0x1000, 24, true, false, 0x01_0000),
            [0xB8, 0x12, 0x10, 0x00, 0x00, 0x18, 0x00, 0x01, 0x00, 0x00, 0, 0]
        );
        assert_eq!(
            read_element_status(ElementType::DataTransfer, 0x0100, 2, true, true, 4096),
            [0xB8, 0x14, 0x01, 0x00, 0x00, 0x02, 0x01, 0x00, 0x10, 0x00, 0, 0]
        );
        assert_eq!(
            read_element_status(ElementType::All, 0, 0xFFFF, false, false, 0xFF_FFFF),
            [0xB8, 0x00, 0, 0, 0xFF, 0xFF, 0x00, 0xFF, 0xFF, 0xFF, 0, 0]
        );
        assert_eq!(ElementType::from_code(3), Some(ElementType::ImportExport));
        assert_eq!(ElementType::from_code(5), None);
    }

    // ----- INQUIRY and VPD -------------------------------------------------------

    /// Standard INQUIRY data as an LTO drive returns it (SPC-4): tape
    /// device, RMB, version 06h (SPC-4), response data format 2.
    fn lto_inquiry() -> Vec<u8> {
        let mut d = vec![0x01, 0x80, 0x06, 0x02, 0x33, 0x00, 0x00, 0x00];
        d.extend_from_slice(b"IBM     ");
        d.extend_from_slice(b"ULT3580-TD6     ");
        d.extend_from_slice(b"G9N1");
        d.extend_from_slice(&[0u8; 20]);
        d
    }

    #[test]
    fn inquiry_of_a_tape_drive_and_a_changer() {
        let q = parse_inquiry(&lto_inquiry()).unwrap();
        assert_eq!(q.peripheral_type, 0x01);
        assert!(q.removable);
        assert_eq!(q.vendor, "IBM");
        assert_eq!(q.product, "ULT3580-TD6");
        assert_eq!(q.revision, "G9N1");

        let mut d = vec![0x08, 0x80, 0x05, 0x02, 0x1F, 0x00, 0x00, 0x00];
        d.extend_from_slice(b"HP      MSL G3 Series   E.00");
        let q = parse_inquiry(&d).unwrap();
        assert_eq!(q.peripheral_type, 0x08);
        assert_eq!(
            (q.vendor.as_str(), q.product.as_str()),
            ("HP", "MSL G3 Series")
        );
        assert_eq!(q.revision, "E.00");

        // Peripheral qualifier bits are not part of the type.
        let mut d = lto_inquiry();
        d[0] = 0x21;
        d[1] = 0x00;
        let q = parse_inquiry(&d).unwrap();
        assert_eq!(q.peripheral_type, 0x01);
        assert!(!q.removable);
    }

    #[test]
    fn short_and_odd_inquiry_data() {
        assert!(parse_inquiry(&[]).is_err());
        assert!(parse_inquiry(&[0x01, 0x80, 0x06, 0x02]).is_err());
        let q = parse_inquiry(&[0x01, 0x80, 0x06, 0x02, 0x00]).unwrap();
        assert_eq!(q.peripheral_type, 1);
        assert!(q.vendor.is_empty() && q.product.is_empty() && q.revision.is_empty());
        // Cut in the product field.
        let q = parse_inquiry(&lto_inquiry()[..21]).unwrap();
        assert_eq!(
            (q.vendor.as_str(), q.product.as_str(), q.revision.as_str()),
            ("IBM", "ULT35", "")
        );
        // NUL padding, a NUL-terminated string and a non-ASCII byte.
        let mut d = vec![0x01, 0x80, 0x06, 0x02, 0x1F, 0, 0, 0];
        d.extend_from_slice(b"QUANTUM\0");
        d.extend_from_slice(b"ULTRIUM 5\0\0\0\0\0\0\0");
        d.extend_from_slice(&[b'3', 0xE9, b'1', b' ']);
        let q = parse_inquiry(&d).unwrap();
        assert_eq!(q.vendor, "QUANTUM");
        assert_eq!(q.product, "ULTRIUM 5");
        assert_eq!(q.revision, "3?1");
    }

    #[test]
    fn serial_number_page() {
        let mut d = vec![0x01, 0x80, 0x00, 0x0A];
        d.extend_from_slice(b"1013000123");
        assert_eq!(parse_serial_vpd(&d).unwrap(), "1013000123");
        // Right-aligned with leading spaces, page length shorter than the buffer.
        let mut d = vec![0x08, 0x80, 0x00, 0x0C];
        d.extend_from_slice(b"  MXA123B04Z");
        d.extend_from_slice(b"garbage");
        assert_eq!(parse_serial_vpd(&d).unwrap(), "MXA123B04Z");
        // Page length longer than the buffer.
        assert_eq!(
            parse_serial_vpd(&[0x01, 0x80, 0x00, 0x20, b'A', b'B']).unwrap(),
            "AB"
        );
        assert!(parse_serial_vpd(&[0x01, 0x80, 0x00]).is_err());
        assert!(parse_serial_vpd(&[0x01, 0x83, 0x00, 0x02, b'x', b'y']).is_err());
    }

    // ----- READ BLOCK LIMITS -----------------------------------------------------

    #[test]
    fn block_limits() {
        // LTO: any length from 1 byte to 16 MiB - 1.
        let l = parse_block_limits(&[0x00, 0xFF, 0xFF, 0xFF, 0x00, 0x01]).unwrap();
        assert_eq!(
            l,
            BlockLimits {
                granularity: 0,
                max: 0x00FF_FFFF,
                min: 1
            }
        );
        // 8 MiB maximum, 4-byte granularity, reserved bits set in byte 0.
        let l = parse_block_limits(&[0xE2, 0x80, 0x00, 0x00, 0x00, 0x04]).unwrap();
        assert_eq!(
            l,
            BlockLimits {
                granularity: 2,
                max: 0x0080_0000,
                min: 4
            }
        );
        assert!(parse_block_limits(&[0x00, 0xFF, 0xFF, 0xFF, 0x00]).is_err());
        assert!(parse_block_limits(&[]).is_err());
    }

    // ----- MODE SENSE / SELECT ---------------------------------------------------

    /// The Data Compression page (SSC-4) as an LTO drive reports it: DCE and
    /// DCC set, DDE set, algorithm 1 (ALDC) both ways.
    const COMPRESSION_PAGE: [u8; 16] = [
        0x8F, 0x0E, 0xC0, 0x80, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0, 0, 0, 0,
    ];

    fn mode_sense_with_descriptor(dsp: u8) -> Vec<u8> {
        // Header: mode data length 27, medium type 0, device-specific, BD length 8.
        let mut d = vec![27, 0x00, dsp, 0x08];
        // LTO-5 density, all blocks, variable length.
        d.extend_from_slice(&[0x58, 0, 0, 0, 0, 0, 0, 0]);
        d.extend_from_slice(&COMPRESSION_PAGE);
        d
    }

    #[test]
    fn mode_sense6_header_descriptor_and_pages() {
        let m = parse_mode_sense6(&mode_sense_with_descriptor(0x10)).unwrap();
        assert_eq!(m.medium_type, 0);
        assert!(!m.write_protected);
        assert_eq!(m.buffered_mode, 1);
        assert_eq!(m.speed, 0);
        assert_eq!(
            m.descriptor,
            Some(BlockDescriptor {
                density: 0x58,
                blocks: 0,
                block_len: 0
            })
        );
        assert_eq!(m.pages, COMPRESSION_PAGE.to_vec());
        assert_eq!(find_mode_page(&m.pages, 0x0F), Some(&COMPRESSION_PAGE[..]));

        // Write protected, speed 3, fixed 64 KiB blocks.
        let mut d = mode_sense_with_descriptor(0x93);
        d[4..12].copy_from_slice(&[0x5A, 0x00, 0x10, 0x00, 0x00, 0x01, 0x00, 0x00]);
        let m = parse_mode_sense6(&d).unwrap();
        assert!(m.write_protected);
        assert_eq!((m.buffered_mode, m.speed), (1, 3));
        assert_eq!(
            m.descriptor,
            Some(BlockDescriptor {
                density: 0x5A,
                blocks: 0x1000,
                block_len: 0x1_0000
            })
        );
    }

    #[test]
    fn mode_sense6_bounds() {
        // DBD: no descriptor, the page right after the header.
        let mut d = vec![19, 0, 0x10, 0];
        d.extend_from_slice(&COMPRESSION_PAGE);
        let m = parse_mode_sense6(&d).unwrap();
        assert_eq!(m.descriptor, None);
        assert_eq!(m.pages.len(), 16);
        // Trailing bytes beyond the mode data length are not pages.
        d.extend_from_slice(&[0xAA; 10]);
        assert_eq!(parse_mode_sense6(&d).unwrap().pages.len(), 16);
        // A mode data length beyond the buffer: the buffer bounds the pages.
        let mut d = mode_sense_with_descriptor(0);
        d[0] = 0xFF;
        assert_eq!(parse_mode_sense6(&d).unwrap().pages.len(), 16);
        // Allocation length 12: header and descriptor only.
        let m = parse_mode_sense6(&mode_sense_with_descriptor(0)[..12]).unwrap();
        assert!(m.descriptor.is_some());
        assert!(m.pages.is_empty());
        // Descriptors announced but missing.
        assert!(parse_mode_sense6(&mode_sense_with_descriptor(0)[..8]).is_err());
        assert!(parse_mode_sense6(&[3, 0, 0]).is_err());
        // A mode data length shorter than the header.
        let m = parse_mode_sense6(&[0, 0, 0x80, 0]).unwrap();
        assert!(m.write_protected && m.pages.is_empty());
    }

    #[test]
    fn find_mode_page_walks_pages() {
        let mut pages = vec![0x02, 0x0E];
        pages.extend_from_slice(&[0x11; 14]); // Disconnect-Reconnect page
        pages.extend_from_slice(&[0x50, 0x01, 0x00, 0x04, 1, 2, 3, 4]); // subpage format 10h/01h
        pages.extend_from_slice(&[0x90, 0x02, 0xAB, 0xCD]); // Device Configuration, PS set
        pages.extend_from_slice(&COMPRESSION_PAGE);
        assert_eq!(find_mode_page(&pages, 0x02).map(<[u8]>::len), Some(16));
        assert_eq!(
            find_mode_page(&pages, 0x10),
            Some(&[0x90, 0x02, 0xAB, 0xCD][..])
        );
        assert_eq!(find_mode_page(&pages, 0x0F), Some(&COMPRESSION_PAGE[..]));
        assert_eq!(find_mode_page(&pages, 0x1D), None);
        // A page cut by the end of the data is returned as far as it goes.
        assert_eq!(
            find_mode_page(&pages[..pages.len() - 6], 0x0F).map(<[u8]>::len),
            Some(10)
        );
        assert_eq!(find_mode_page(&[0x0F], 0x0F), None);
        assert_eq!(find_mode_page(&[], 0x0F), None);
    }

    #[test]
    fn mode_select_data() {
        let page = compression_page(&COMPRESSION_PAGE, false).unwrap();
        let d = mode_select6_data(
            Some(BlockDescriptor {
                density: 0,
                blocks: 0,
                block_len: 0,
            }),
            1,
            Some(&page),
        );
        let mut expected = vec![0, 0, 0x10, 8, 0, 0, 0, 0, 0, 0, 0, 0];
        expected.extend_from_slice(&[0x0F, 0x0E, 0x40, 0x80, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0]);
        assert_eq!(d, expected);
        assert_eq!(mode_select6(d.len() as u8)[4], 28);

        // Fixed 512-byte blocks, no page, buffered mode 0.
        let d = mode_select6_data(
            Some(BlockDescriptor {
                density: 0x46,
                blocks: 0,
                block_len: 512,
            }),
            0,
            None,
        );
        assert_eq!(d, vec![0, 0, 0, 8, 0x46, 0, 0, 0, 0, 0x00, 0x02, 0x00]);
        // Page only, PS cleared.
        assert_eq!(
            mode_select6_data(None, 1, Some(&[0x90, 0x02, 1, 2])),
            vec![0, 0, 0x10, 0, 0x10, 0x02, 1, 2]
        );
    }

    #[test]
    fn compression_page_toggles_dce() {
        let on = compression_page(&COMPRESSION_PAGE, true).unwrap();
        assert_eq!(on[0], 0x0F, "PS cleared");
        assert_eq!(on[2], 0xC0);
        assert_eq!(&on[3..], &COMPRESSION_PAGE[3..]);
        let off = compression_page(&COMPRESSION_PAGE, false).unwrap();
        assert_eq!(off[2], 0x40);
        let mut no_dcc = COMPRESSION_PAGE;
        no_dcc[2] = 0x00;
        assert_eq!(compression_page(&no_dcc, true), None);
        assert_eq!(compression_page(&COMPRESSION_PAGE[..3], true), None);
        assert_eq!(
            compression_page(&[0x10, 0x0E, 0xC0, 0x80], true),
            None,
            "not page 0Fh"
        );
    }

    // ----- READ POSITION ---------------------------------------------------------

    #[test]
    fn read_position_long_form() {
        // At BOP: block 0, file 0.
        let mut d = [0u8; 32];
        d[0] = 0x80;
        let p = parse_read_position_long(&d).unwrap();
        assert_eq!(
            p,
            Position {
                bop: true,
                eop: false,
                bpew: false,
                lbn: 0,
                file: Some(0)
            }
        );
        // Block 0x1_0000_0005 past 3 filemarks, in early warning and beyond PEW.
        let mut d = [0u8; 32];
        d[0] = 0x41;
        d[8..16].copy_from_slice(&0x1_0000_0005u64.to_be_bytes());
        d[16..24].copy_from_slice(&3u64.to_be_bytes());
        let p = parse_read_position_long(&d).unwrap();
        assert!(!p.bop && p.eop && p.bpew);
        assert_eq!(p.lbn, 0x1_0000_0005);
        assert_eq!(p.file, Some(3));
        // MPU: the file is unknown, the block is not.
        d[0] = 0x08;
        let p = parse_read_position_long(&d).unwrap();
        assert_eq!((p.lbn, p.file), (0x1_0000_0005, None));
        // LONU: position unknown.
        d[0] = 0x04;
        assert!(parse_read_position_long(&d).is_err());
        // Short data.
        assert!(parse_read_position_long(&[0x80; 23]).is_err());
        d[0] = 0;
        assert_eq!(parse_read_position_long(&d[..24]).unwrap().file, Some(3));
    }

    #[test]
    fn read_position_short_form() {
        // Block 1234 (04D2h), first and last block location equal, LOCU and BYCU set
        // (the buffer counts are not reported).
        let d = [
            0x30, 0x00, 0, 0, 0x00, 0x00, 0x04, 0xD2, 0x00, 0x00, 0x04, 0xD2, 0, 0, 0, 0, 0, 0, 0,
            0,
        ];
        let p = parse_read_position_short(&d).unwrap();
        assert_eq!(
            p,
            Position {
                bop: false,
                eop: false,
                bpew: false,
                lbn: 1234,
                file: None
            }
        );
        let mut d2 = d;
        d2[0] = 0xC1;
        let p = parse_read_position_short(&d2).unwrap();
        assert!(p.bop && p.eop && p.bpew);
        // BPU set.
        d2[0] = 0x04;
        assert!(parse_read_position_short(&d2).is_err());
        // Short data.
        assert!(parse_read_position_short(&d[..7]).is_err());
        assert_eq!(parse_read_position_short(&d[..8]).unwrap().lbn, 1234);
    }

    // ----- Element address assignment page ---------------------------------------

    /// MODE SENSE(6) data (DBD) with the Element Address Assignment page of a small
    /// library: one picker at 1, 24 slots from 1000h, one mail slot at 10h, two drives
    /// from 100h.
    fn library_mode_sense() -> Vec<u8> {
        let mut d = vec![23, 0, 0, 0];
        d.extend_from_slice(&[
            0x9D, 0x12, 0x00, 0x01, 0x00, 0x01, 0x10, 0x00, 0x00, 0x18, 0x00, 0x10, 0x00, 0x01,
            0x01, 0x00, 0x00, 0x02, 0x00, 0x00,
        ]);
        d
    }

    #[test]
    fn element_address_assignment() {
        let m = parse_mode_sense6(&library_mode_sense()).unwrap();
        let a = parse_element_address_page(&m.pages).unwrap();
        assert_eq!(
            a,
            ElementAddresses {
                transport: (1, 1),
                storage: (0x1000, 24),
                import_export: (0x10, 1),
                data_transfer: (0x100, 2),
            }
        );
        // After another page.
        let mut pages = vec![0x1F, 0x02, 0x0F, 0x07];
        pages.extend_from_slice(&m.pages);
        assert_eq!(parse_element_address_page(&pages).unwrap(), a);
        // Missing or truncated.
        assert!(parse_element_address_page(&pages[..4]).is_err());
        assert!(parse_element_address_page(&m.pages[..17]).is_err());
        assert!(parse_element_address_page(&m.pages[..18]).is_ok());
    }

    // ----- READ ELEMENT STATUS ---------------------------------------------------

    /// An element descriptor (SMC-3): address, flags, ASC/ASCQ, source, primary
    /// volume tag when `tag` is given, device identification when `dvcid` is given.
    fn descriptor(
        addr: u16,
        flags: u8,
        asc: (u8, u8),
        source: Option<u16>,
        tag: Option<&str>,
        dvcid: Option<(u8, &[u8])>,
    ) -> Vec<u8> {
        let mut d = vec![0u8; 12];
        d[0..2].copy_from_slice(&addr.to_be_bytes());
        d[2] = flags;
        d[4] = asc.0;
        d[5] = asc.1;
        if let Some(s) = source {
            d[9] = 0x80;
            d[10..12].copy_from_slice(&s.to_be_bytes());
        }
        if let Some(t) = tag {
            let mut v = [b' '; 36];
            v[..t.len()].copy_from_slice(t.as_bytes());
            v[32..36].fill(0);
            d.extend_from_slice(&v);
        }
        if let Some((code_set, id)) = dvcid {
            d.extend_from_slice(&[code_set, 0x01, 0x00, id.len() as u8]);
            d.extend_from_slice(id);
        }
        d
    }

    /// An element status page: header and descriptors (all of the same length).
    fn page(code: u8, tags: u8, descs: &[Vec<u8>]) -> Vec<u8> {
        let len = descs.first().map_or(0, Vec::len);
        let bytes = (len * descs.len()) as u32;
        let mut p = vec![code, tags];
        p.extend_from_slice(&(len as u16).to_be_bytes());
        p.push(0);
        p.extend_from_slice(&bytes.to_be_bytes()[1..]);
        for d in descs {
            p.extend_from_slice(d);
        }
        p
    }

    fn report(first: u16, pages: &[Vec<u8>], count: u16) -> Vec<u8> {
        let body: Vec<u8> = pages.concat();
        let mut r = first.to_be_bytes().to_vec();
        r.extend_from_slice(&count.to_be_bytes());
        r.push(0);
        r.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
        r.extend_from_slice(&body);
        r
    }

    /// The identifier of an LTO drive as a changer reports it (T10 vendor ID based:
    /// vendor, product, serial number), 34 bytes.
    const DRIVE_ID: &[u8] = b"IBM     ULT3580-TD6     1013000123";

    #[test]
    fn element_status_slots_and_drives() {
        let slots = page(
            2,
            0x80,
            &[
                descriptor(0x1000, 0x09, (0, 0), None, Some("ABC123L6"), None),
                descriptor(0x1001, 0x08, (0, 0), None, Some(""), None),
                descriptor(
                    0x1002,
                    0x0D,
                    (0x83, 0x00),
                    Some(0x0100),
                    Some("XYZ999L6"),
                    None,
                ),
            ],
        );
        let drives = page(
            4,
            0x80,
            &[
                descriptor(
                    0x0100,
                    0x09,
                    (0, 0),
                    Some(0x1003),
                    Some("DEF456L6"),
                    Some((2, DRIVE_ID)),
                ),
                descriptor(
                    0x0101,
                    0x08,
                    (0, 0),
                    None,
                    Some(""),
                    Some((2, b"IBM     ULT3580-TD6     1013000456")),
                ),
            ],
        );
        let d = report(0x0100, &[slots, drives], 5);
        let e = parse_element_status(&d).unwrap();
        assert_eq!(e.len(), 5);
        assert_eq!(
            e[0],
            Element {
                etype: ElementType::Storage,
                address: 0x1000,
                full: true,
                except: false,
                asc: 0,
                ascq: 0,
                source: None,
                barcode: Some("ABC123L6".to_string()),
                device_id: None,
            }
        );
        assert!(!e[1].full);
        assert_eq!(e[1].barcode, None, "a blank tag is no barcode");
        assert!(e[2].full && e[2].except);
        assert_eq!((e[2].asc, e[2].ascq), (0x83, 0x00));
        assert_eq!(e[2].source, Some(0x0100));
        assert_eq!(e[3].etype, ElementType::DataTransfer);
        assert_eq!(e[3].address, 0x0100);
        assert_eq!(e[3].source, Some(0x1003));
        assert_eq!(e[3].barcode.as_deref(), Some("DEF456L6"));
        assert_eq!(
            e[3].device_id.as_deref(),
            Some("IBM     ULT3580-TD6     1013000123")
        );
        assert_eq!(
            e[4].device_id.as_deref(),
            Some("IBM     ULT3580-TD6     1013000456")
        );
        assert_eq!(e[4].barcode, None);
    }

    #[test]
    fn element_status_without_tags_and_binary_ids() {
        let drives = page(
            4,
            0x00,
            &[descriptor(
                0x01F0,
                0x01,
                (0, 0),
                None,
                None,
                Some((1, &[0x50, 0x05, 0x07, 0x63, 0x0F, 0x00, 0x12, 0x34])),
            )],
        );
        let picker = page(
            1,
            0x00,
            &[descriptor(0x0000, 0x00, (0, 0), None, None, None)],
        );
        let mail = page(
            3,
            0x00,
            &[descriptor(0x0010, 0x3A, (0, 0), None, None, None)],
        );
        let e = parse_element_status(&report(0, &[picker, mail, drives], 3)).unwrap();
        assert_eq!(e.len(), 3);
        assert_eq!(
            (e[0].etype, e[0].address, e[0].full),
            (ElementType::Transport, 0, false)
        );
        assert_eq!(e[1].etype, ElementType::ImportExport);
        assert!(!e[1].full && !e[1].except);
        assert_eq!(e[2].device_id.as_deref(), Some("500507630f001234"));
        assert_eq!(e[2].barcode, None);
    }

    #[test]
    fn element_status_with_alternate_tags() {
        // PVOLTAG and AVOLTAG: the identifier follows both tags.
        let mut desc = descriptor(0x0100, 0x01, (0, 0), None, Some("PRI001L5"), None);
        let mut alt = [b' '; 36];
        alt[..8].copy_from_slice(b"ALT001L5");
        desc.extend_from_slice(&alt);
        desc.extend_from_slice(&[0x02, 0x00, 0x00, 0x04]);
        desc.extend_from_slice(b"DRV1");
        let e = parse_element_status(&report(0x100, &[page(4, 0xC0, &[desc])], 1)).unwrap();
        assert_eq!(e[0].barcode.as_deref(), Some("PRI001L5"));
        assert_eq!(e[0].device_id.as_deref(), Some("DRV1"));
    }

    #[test]
    fn element_status_eight_bytes_short() {
        // A target whose header byte counts include 8 bytes it never sends: the last
        // descriptor loses its last 8 bytes.
        let descs: Vec<Vec<u8>> = (0..3u16)
            .map(|i| {
                let mut d = descriptor(
                    0x1000 + i,
                    0x01,
                    (0, 0),
                    None,
                    Some(&format!("TAPE{i:02}L6")),
                    None,
                );
                d.extend_from_slice(&[0; 4]); // 52-byte descriptors
                d
            })
            .collect();
        let full = report(0x1000, &[page(2, 0x80, &descs)], 3);
        let short = &full[..full.len() - 8];
        let e = parse_element_status(short).unwrap();
        assert_eq!(e.len(), 3);
        assert_eq!(e[2].address, 0x1002);
        assert!(e[2].full);
        assert_eq!(
            e[2].barcode.as_deref(),
            Some("TAPE02L6"),
            "the 32 barcode bytes are all there"
        );

        // Drives with identifiers: the last identifier is cut, so it is left out.
        let drives: Vec<Vec<u8>> = [DRIVE_ID, b"IBM     ULT3580-TD6     1013000456"]
            .iter()
            .enumerate()
            .map(|(i, id)| {
                descriptor(
                    0x100 + i as u16,
                    0x00,
                    (0, 0),
                    None,
                    Some(""),
                    Some((2, id)),
                )
            })
            .collect();
        let full = report(0x100, &[page(4, 0x80, &drives)], 2);
        let e = parse_element_status(&full[..full.len() - 8]).unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(
            e[0].device_id.as_deref(),
            Some("IBM     ULT3580-TD6     1013000123")
        );
        assert_eq!(e[1].address, 0x101);
        assert_eq!(e[1].device_id, None);

        // Cut inside a barcode: address and flags, no barcode.
        let full = report(0x1000, &[page(2, 0x80, &descs)], 3);
        let cut = full.len() - 52 + 20;
        let e = parse_element_status(&full[..cut]).unwrap();
        assert_eq!(e.len(), 3);
        assert_eq!(
            (e[2].address, e[2].full, e[2].barcode.as_ref()),
            (0x1002, true, None)
        );
        // Cut inside the address: that element is left out.
        let cut = full.len() - 52 + 1;
        assert_eq!(parse_element_status(&full[..cut]).unwrap().len(), 2);
    }

    #[test]
    fn element_status_bounds() {
        assert!(parse_element_status(&[0; 7]).is_err());
        // Header only, nothing available.
        assert!(parse_element_status(&[0, 0, 0, 0, 0, 0, 0, 0])
            .unwrap()
            .is_empty());
        // The buffer is larger than the report: zero fill is not parsed.
        let mut d = report(
            0x1000,
            &[page(
                2,
                0x00,
                &[descriptor(0x1000, 1, (0, 0), None, None, None)],
            )],
            1,
        );
        d.extend_from_slice(&[0u8; 100]);
        let e = parse_element_status(&d).unwrap();
        assert_eq!(e.len(), 1);
        // Unknown element type pages are skipped.
        let odd = page(7, 0x00, &[descriptor(0x9000, 1, (0, 0), None, None, None)]);
        let ok = page(2, 0x00, &[descriptor(0x1000, 1, (0, 0), None, None, None)]);
        let e = parse_element_status(&report(0, &[odd, ok], 2)).unwrap();
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].address, 0x1000);
        // Descriptor length 0 with descriptor bytes: garbage.
        let mut bad = page(2, 0, &[descriptor(0x1000, 1, (0, 0), None, None, None)]);
        bad[2] = 0;
        bad[3] = 0;
        assert!(parse_element_status(&report(0, &[bad], 1)).is_err());
    }

    // ----- LOG SENSE -------------------------------------------------------------

    #[test]
    fn log_page_counters() {
        // A counters page with a 4-byte and an 8-byte parameter, then a truncated one.
        let mut d = vec![0x0C, 0x00, 0x00, 0x1C];
        d.extend_from_slice(&[0x00, 0x00, 0x40, 0x04, 0x12, 0x34, 0x56, 0x78]);
        d.extend_from_slice(&[
            0x00, 0x01, 0x40, 0x08, 0, 0, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06,
        ]);
        d.extend_from_slice(&[0x80, 0x00, 0x40, 0x08, 0xFF, 0xFF]);
        let (page, params) = parse_log_page(&d).unwrap();
        assert_eq!(page, 0x0C);
        assert_eq!(params.len(), 2);
        assert_eq!(params[0].code, 0);
        assert_eq!(param_u64(&params[0]), 0x1234_5678);
        assert_eq!(params[1].code, 1);
        assert_eq!(param_u64(&params[1]), 0x0102_0304_0506);
        // The page length bounds the parameters even when the buffer is longer.
        let mut d = vec![
            0x40 | 0x02,
            0x00,
            0x00,
            0x06,
            0x00,
            0x03,
            0x00,
            0x02,
            0xAB,
            0xCD,
        ];
        d.extend_from_slice(&[0x00, 0x04, 0x00, 0x01, 0xEE]);
        let (page, params) = parse_log_page(&d).unwrap();
        assert_eq!(page, 0x02, "SPF bit masked");
        assert_eq!(
            params,
            vec![LogParam {
                code: 3,
                value: vec![0xAB, 0xCD]
            }]
        );
        assert!(parse_log_page(&[0x2E, 0x00, 0x00]).is_err());
        assert_eq!(parse_log_page(&[0x2E, 0, 0, 0]).unwrap(), (0x2E, vec![]));
    }

    #[test]
    fn param_values() {
        let p = |v: &[u8]| {
            param_u64(&LogParam {
                code: 0,
                value: v.to_vec(),
            })
        };
        assert_eq!(p(&[]), 0);
        assert_eq!(p(&[0x7F]), 0x7F);
        assert_eq!(p(&[0x01, 0x00]), 256);
        assert_eq!(p(&[0xFF; 8]), u64::MAX);
        assert_eq!(p(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0x2A]), 42);
        assert_eq!(p(&[1, 0, 0, 0, 0, 0, 0, 0, 0, 0x2A]), u64::MAX);
    }

    // ----- Robustness ------------------------------------------------------------

    #[test]
    fn parsers_never_panic() {
        let samples: Vec<Vec<u8>> = vec![
            lto_inquiry(),
            vec![0x01, 0x80, 0x00, 0x0A, b'1', b'0', b'1', b'3'],
            vec![0x00, 0xFF, 0xFF, 0xFF, 0x00, 0x01],
            mode_sense_with_descriptor(0x10),
            library_mode_sense(),
            crate::scsi::tape_alert::tests::alert_page(&[1, 2]),
            report(
                0x100,
                &[page(
                    4,
                    0xC0,
                    &[descriptor(
                        0x100,
                        1,
                        (0, 0),
                        Some(1),
                        Some("A"),
                        Some((2, DRIVE_ID)),
                    )],
                )],
                1,
            ),
            [0x41u8; 32].to_vec(),
        ];
        let run = |d: &[u8]| {
            let _ = parse_inquiry(d);
            let _ = parse_serial_vpd(d);
            let _ = parse_block_limits(d);
            if let Ok(m) = parse_mode_sense6(d) {
                let _ = parse_element_address_page(&m.pages);
                let _ = find_mode_page(&m.pages, 0x0F).map(|p| compression_page(p, true));
            }
            let _ = find_mode_page(d, 0x1D);
            let _ = compression_page(d, false);
            let _ = parse_element_address_page(d);
            let _ = parse_read_position_long(d);
            let _ = parse_read_position_short(d);
            let _ = parse_element_status(d);
            if let Ok((_, params)) = parse_log_page(d) {
                let _ = crate::scsi::tape_alert::flags(&params);
                let _ = params.iter().map(param_u64).fold(0u64, u64::wrapping_add);
            }
        };
        for s in &samples {
            for n in 0..=s.len() {
                run(&s[..n]);
            }
        }
        for seed in 0..3000u32 {
            let mut d = noise(seed.wrapping_mul(2_654_435_761), (seed % 300) as usize);
            run(&d);
            // Element status with a plausible header and page header over noise.
            if d.len() > 16 {
                d[8] = (seed % 5) as u8;
                d[2] = 0;
                run(&d);
            }
        }
    }
}
