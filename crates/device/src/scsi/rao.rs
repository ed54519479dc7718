//! The drive's own Recommended Access Order (SSC-5): the host names the pieces
//! it wants of the mounted cartridge, and a drive that knows where its blocks lie
//! (LTO-9 and later, IBM's TS11x0 and the like) answers with the order that reads
//! them soonest.
//!
//! Three commands do it, as CERN CTA's tape server sends them:
//! - RECEIVE RECOMMENDED ACCESS ORDER (MAINTENANCE IN, A3h, service action 1Dh)
//!   with the UDS_LIMITS bit: how many pieces the drive takes at once;
//! - GENERATE RECOMMENDED ACCESS ORDER (MAINTENANCE OUT, A4h, service action
//!   1Dh): the pieces, each a *user data segment* (UDS) descriptor of 32 bytes
//!   with a name of 10 bytes, a partition and its first and last logical object;
//! - RECEIVE RECOMMENDED ACCESS ORDER without the bit: the same descriptors, in
//!   the drive's order.
//!
//! A drive that does not know the commands refuses them (ILLEGAL REQUEST), and
//! the caller plans without the drive. Every byte the drive sends back is checked:
//! a list that does not name each piece exactly once is not used.

use super::error::ParseError;
use super::{exec, DataDir, ScsiTransport, LONG, SHORT};
use crate::Result;

/// MAINTENANCE IN.
const MAINTENANCE_IN: u8 = 0xA3;
/// MAINTENANCE OUT.
const MAINTENANCE_OUT: u8 = 0xA4;
/// The service action of both RAO commands.
const SERVICE_ACTION: u8 = 0x1D;
/// RAO PROCESS 2: generate the list in the recommended order.
const PROCESS_GENERATE: u8 = 2;
/// UDS TYPE 0: basic descriptors, without the geometry of the pieces.
const UDS_TYPE_BASIC: u8 = 0;
/// Bytes of one basic UDS descriptor.
pub const UDS_LEN: usize = 32;
/// The descriptor length field of a basic descriptor (the bytes after it).
const UDS_DESCRIPTOR_LENGTH: u16 = (UDS_LEN - 2) as u16;
/// Bytes of the header of the GENERATE parameter list and of the RAO list.
const HEADER: usize = 8;

/// RECEIVE RECOMMENDED ACCESS ORDER: with `limits`, the drive's UDS limits (4
/// bytes); without, the RAO list from `offset`, `alloc` bytes at most.
pub fn receive(limits: bool, offset: u32, alloc: u32) -> [u8; 12] {
    let mut c = [0u8; 12];
    c[0] = MAINTENANCE_IN;
    c[1] = SERVICE_ACTION | if limits { 0x80 } else { 0 };
    c[2..6].copy_from_slice(&offset.to_be_bytes());
    c[6..10].copy_from_slice(&alloc.to_be_bytes());
    c[10] = UDS_TYPE_BASIC;
    c
}

/// GENERATE RECOMMENDED ACCESS ORDER with a parameter list of `len` bytes.
pub fn generate(len: u32) -> [u8; 12] {
    let mut c = [0u8; 12];
    c[0] = MAINTENANCE_OUT;
    c[1] = SERVICE_ACTION;
    c[2] = PROCESS_GENERATE;
    c[3] = UDS_TYPE_BASIC;
    c[6..10].copy_from_slice(&len.to_be_bytes());
    c
}

/// The GENERATE parameter list for `extents` (first and last logical object of
/// each piece, partition 0): a header, then one descriptor each, named by its
/// index in ten decimal digits.
pub fn generate_params(extents: &[(u64, u64)]) -> Vec<u8> {
    let list = extents.len() * UDS_LEN;
    let mut p = vec![0u8; HEADER + list];
    p[4..8].copy_from_slice(&u32::try_from(list).unwrap_or(u32::MAX).to_be_bytes());
    for (i, &(first, last)) in extents.iter().enumerate() {
        let d = &mut p[HEADER + i * UDS_LEN..HEADER + (i + 1) * UDS_LEN];
        d[0..2].copy_from_slice(&UDS_DESCRIPTOR_LENGTH.to_be_bytes());
        d[5..15].copy_from_slice(format!("{:010}", i % 10_000_000_000).as_bytes());
        d[15] = 0;
        d[16..24].copy_from_slice(&first.to_be_bytes());
        d[24..32].copy_from_slice(&last.max(first).to_be_bytes());
    }
    p
}

/// The drive's UDS limits: how many pieces one GENERATE may name, and the
/// largest piece (0: no limit given).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most descriptors in one list.
    pub max_descriptors: u16,
    /// Largest piece the drive takes, as it counts it.
    pub max_size: u16,
}

/// Parses the UDS limits (4 bytes).
pub fn parse_limits(d: &[u8]) -> std::result::Result<Limits, ParseError> {
    match d.get(..4) {
        Some(&[a, b, c, e]) => Ok(Limits {
            max_descriptors: u16::from_be_bytes([a, b]),
            max_size: u16::from_be_bytes([c, e]),
        }),
        _ => Err(ParseError::TooShort {
            what: "UDS limits",
            len: d.len(),
            need: "4",
        }),
    }
}

/// Parses an RAO list for `n` pieces sent as [`generate_params`] names them:
/// the pieces' indices in the drive's order. Err unless the list names each
/// piece exactly once.
pub fn parse_list(d: &[u8], n: usize) -> std::result::Result<Vec<usize>, ParseError> {
    let bad = |problem| ParseError::RaoList { problem };
    let header = d.get(..HEADER).ok_or(ParseError::TooShort {
        what: "RAO list",
        len: d.len(),
        need: "at least 8",
    })?;
    let len = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
    let len = usize::try_from(len).map_err(|_| bad("its length does not fit"))?;
    if len != n * UDS_LEN {
        return Err(bad("it holds another number of descriptors than were sent"));
    }
    let body = d
        .get(HEADER..HEADER + len)
        .ok_or(bad("it is shorter than its header says"))?;
    let mut seen = vec![false; n];
    let mut order = Vec::with_capacity(n);
    for desc in body.chunks_exact(UDS_LEN) {
        let name = std::str::from_utf8(&desc[5..15]).map_err(|_| bad("a name is not text"))?;
        let i: usize = (name.trim_end_matches(['\0', ' ']).parse())
            .map_err(|_| bad("a name is not one that was sent"))?;
        match seen.get_mut(i) {
            Some(s) if !*s => *s = true,
            Some(_) => return Err(bad("a piece is named twice")),
            None => return Err(bad("a name is not one that was sent")),
        }
        order.push(i);
    }
    Ok(order)
}

/// The UDS limits of the drive behind `t`; `Ok(None)` when it refuses the
/// command (it has no recommended access order) or answers what cannot be read;
/// `Err` only for a transport that failed.
pub fn limits(t: &mut dyn ScsiTransport) -> Result<Option<Limits>> {
    let mut lim = [0u8; 4];
    let r = exec(t, &receive(true, 0, 4), DataDir::In(&mut lim), SHORT)?;
    if !r.good() {
        tracing::debug!(key = ?r.key(), "the drive has no recommended access order");
        return Ok(None);
    }
    Ok(parse_limits(&lim).ok())
}

/// Asks the drive behind `t`, whose limits are `limits`, for its order of
/// `extents` (first and last logical object of each piece, on the mounted
/// cartridge). `Ok(None)` when there are more pieces than the drive takes at
/// once, when it refuses a command, or when it sends back a list that does not
/// name each piece once; `Err` only for a transport that failed.
pub fn ask(
    t: &mut dyn ScsiTransport,
    limits: Limits,
    extents: &[(u64, u64)],
) -> Result<Option<Vec<usize>>> {
    if extents.len() > usize::from(limits.max_descriptors) {
        tracing::debug!(
            pieces = extents.len(),
            most = limits.max_descriptors,
            "more pieces than the drive orders at once"
        );
        return Ok(None);
    }
    let params = generate_params(extents);
    let Ok(len) = u32::try_from(params.len()) else {
        return Ok(None);
    };
    let r = exec(t, &generate(len), DataDir::Out(&params), LONG)?;
    if !r.good() {
        tracing::debug!(key = ?r.key(), "the drive refused GENERATE RECOMMENDED ACCESS ORDER");
        return Ok(None);
    }
    let mut list = vec![0u8; params.len()];
    let r = exec(t, &receive(false, 0, len), DataDir::In(&mut list), SHORT)?;
    if !r.good() {
        return Ok(None);
    }
    match parse_list(&list, extents.len()) {
        Ok(order) => Ok(Some(order)),
        Err(e) => {
            tracing::warn!(error = %e, "the drive's recommended access order is not used");
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scsi::{CmdOutcome, STATUS_CHECK_CONDITION, STATUS_GOOD};
    use std::time::Duration;

    #[test]
    fn the_commands_are_laid_out_as_ssc_5_has_them() {
        let g = generate(96);
        assert_eq!(g, [0xA4, 0x1D, 2, 0, 0, 0, 0, 0, 0, 96, 0, 0]);
        let l = receive(true, 0, 4);
        assert_eq!(l, [0xA3, 0x9D, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0]);
        let r = receive(false, 0, 0x0102_0304);
        assert_eq!(r, [0xA3, 0x1D, 0, 0, 0, 0, 1, 2, 3, 4, 0, 0]);
    }

    #[test]
    fn each_piece_is_a_descriptor_of_32_bytes_named_by_its_index() {
        let p = generate_params(&[(10, 19), (0x0102_0304_0506_0708, 5)]);
        assert_eq!(p.len(), 8 + 64);
        assert_eq!(&p[..8], &[0, 0, 0, 0, 0, 0, 0, 64]);
        let d0 = &p[8..40];
        assert_eq!(&d0[..5], &[0, 30, 0, 0, 0]);
        assert_eq!(&d0[5..15], b"0000000000");
        assert_eq!(d0[15], 0, "partition 0");
        assert_eq!(&d0[16..24], &10u64.to_be_bytes());
        assert_eq!(&d0[24..32], &19u64.to_be_bytes());
        let d1 = &p[40..72];
        assert_eq!(&d1[5..15], b"0000000001");
        assert_eq!(&d1[16..24], &[1, 2, 3, 4, 5, 6, 7, 8]);
        // A piece never ends before it begins.
        assert_eq!(&d1[24..32], &d1[16..24]);
    }

    /// The list a drive would send for `params` in the order `order`.
    fn list(params: &[u8], order: &[usize]) -> Vec<u8> {
        let mut l = params[..8].to_vec();
        for &i in order {
            l.extend_from_slice(&params[8 + i * UDS_LEN..8 + (i + 1) * UDS_LEN]);
        }
        l
    }

    #[test]
    fn a_list_naming_each_piece_once_gives_the_order_and_any_other_is_refused() {
        let params = generate_params(&[(1, 1), (5, 9), (20, 30)]);
        assert_eq!(parse_list(&list(&params, &[2, 0, 1]), 3), Ok(vec![2, 0, 1]));
        // Short, cut, a piece twice, a piece missing, a name never sent, noise.
        assert!(parse_list(&[0; 5], 3).is_err());
        let mut cut = list(&params, &[2, 0, 1]);
        cut.truncate(50);
        assert!(parse_list(&cut, 3).is_err());
        let mut twice = list(&params, &[2, 0, 0]);
        assert!(parse_list(&twice, 3).is_err());
        twice[HEADER + 5..HEADER + 15].copy_from_slice(b"0000000007");
        assert!(parse_list(&twice, 3).is_err());
        let mut fewer = list(&params, &[2, 0]);
        fewer[7] = 64;
        assert!(parse_list(&fewer, 3).is_err());
        let mut noise = list(&params, &[0, 1, 2]);
        noise[HEADER + 6] = 0xFF;
        assert!(parse_list(&noise, 3).is_err());
        assert_eq!(
            parse_limits(&[0x0A, 0xAA, 0, 0]),
            Ok(Limits {
                max_descriptors: 2730,
                max_size: 0
            })
        );
        assert!(parse_limits(&[1, 2]).is_err());
    }

    /// A drive that orders pieces by their last logical object, from the last:
    /// it answers the RAO commands (limited to `most` pieces) and refuses every
    /// other command, or refuses them all when `knows` is false.
    struct RaoDrive {
        knows: bool,
        most: u16,
        generated: Option<Vec<u8>>,
        sent: Vec<u8>,
    }

    /// ILLEGAL REQUEST, INVALID COMMAND OPERATION CODE, as fixed-format sense.
    fn illegal() -> CmdOutcome {
        let mut sense = vec![0u8; 18];
        (sense[0], sense[2], sense[7], sense[12]) = (0x70, 0x05, 10, 0x20);
        CmdOutcome {
            status: STATUS_CHECK_CONDITION,
            residual: 0,
            sense,
        }
    }

    impl ScsiTransport for RaoDrive {
        fn execute(&mut self, cdb: &[u8], data: DataDir<'_>, _: Duration) -> Result<CmdOutcome> {
            self.sent.push(cdb[0]);
            let good = CmdOutcome {
                status: STATUS_GOOD,
                ..CmdOutcome::default()
            };
            match (self.knows, cdb[0], cdb[1] & 0x1F, data) {
                (true, MAINTENANCE_IN, SERVICE_ACTION, DataDir::In(buf)) if cdb[1] & 0x80 != 0 => {
                    buf[..4].copy_from_slice(&[(self.most >> 8) as u8, self.most as u8, 0, 0]);
                    Ok(good)
                }
                (true, MAINTENANCE_OUT, SERVICE_ACTION, DataDir::Out(p)) => {
                    self.generated = Some(p.to_vec());
                    Ok(good)
                }
                (true, MAINTENANCE_IN, SERVICE_ACTION, DataDir::In(buf)) => {
                    let Some(p) = &self.generated else {
                        return Ok(illegal());
                    };
                    let n = (p.len() - HEADER) / UDS_LEN;
                    let last = |i: usize| &p[HEADER + i * UDS_LEN + 24..HEADER + (i + 1) * UDS_LEN];
                    let mut order: Vec<usize> = (0..n).collect();
                    order.sort_by(|&a, &b| last(b).cmp(last(a)));
                    let l = list(p, &order);
                    buf[..l.len()].copy_from_slice(&l);
                    Ok(good)
                }
                _ => Ok(illegal()),
            }
        }
        fn address(&self) -> String {
            "rao-test".into()
        }
    }

    #[test]
    fn a_drive_that_orders_is_asked_and_one_that_does_not_is_not_used() {
        let extents = [(10, 12), (40, 41), (20, 25)];
        let mut d = RaoDrive {
            knows: true,
            most: 2730,
            generated: None,
            sent: Vec::new(),
        };
        let lim = limits(&mut d).unwrap().unwrap();
        assert_eq!(lim.max_descriptors, 2730);
        assert_eq!(ask(&mut d, lim, &extents).unwrap(), Some(vec![1, 2, 0]));
        assert_eq!(d.sent, [MAINTENANCE_IN, MAINTENANCE_OUT, MAINTENANCE_IN]);
        // More pieces than the drive takes at once: not asked to generate.
        let mut small = RaoDrive {
            knows: true,
            most: 2,
            generated: None,
            sent: Vec::new(),
        };
        let lim = limits(&mut small).unwrap().unwrap();
        assert_eq!(ask(&mut small, lim, &extents).unwrap(), None);
        assert_eq!(small.sent, [MAINTENANCE_IN]);
        let mut old = RaoDrive {
            knows: false,
            most: 0,
            generated: None,
            sent: Vec::new(),
        };
        assert_eq!(limits(&mut old).unwrap(), None);
        assert_eq!(old.sent, [MAINTENANCE_IN]);
    }
}
