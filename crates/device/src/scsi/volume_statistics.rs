//! The Volume Statistics log page (17h, SSC-4; LTO-5 and later): counters the
//! drive keeps in the cartridge memory (mounts, data sets and megabytes written
//! and read, errors, capacity, passes over the tape), decoded into
//! [`VolumeStatistics`].

use super::cdb::{ascii, param_u64, LogParam};
use crate::VolumeStatistics;

/// Log page code of Volume Statistics.
pub const PAGE: u8 = 0x17;

/// The Volume Statistics log page (17h) from its parameters. Counters of any
/// length up to 8 bytes are read; longer ones saturate (see [`param_u64`](super::cdb::param_u64)). Unknown
/// and vendor parameters are left out; a parameter the page lacks stays `None`.
pub fn parse(params: &[LogParam]) -> VolumeStatistics {
    let mut v = VolumeStatistics::default();
    for p in params {
        if p.value.is_empty() {
            continue;
        }
        let n = param_u64(p);
        match p.code {
            0x0001 => v.mounts = Some(n),
            0x0002 => v.datasets_written = Some(n),
            0x0003 => v.recovered_write_errors = Some(n),
            0x0004 => v.unrecovered_write_errors = Some(n),
            0x0007 => v.datasets_read = Some(n),
            0x0008 => v.recovered_read_errors = Some(n),
            0x0009 => v.unrecovered_read_errors = Some(n),
            0x000E => v.last_mount_mb_written = Some(n),
            0x000F => v.last_mount_mb_read = Some(n),
            0x0010 => v.lifetime_mb_written = Some(n),
            0x0011 => v.lifetime_mb_read = Some(n),
            0x0012 => v.last_load_write_compression_ratio = Some(n as f64 / 100.0),
            0x0016 => v.native_capacity_mb = Some(n),
            0x0017 => v.used_native_capacity_mb = Some(n),
            0x0040 => {
                v.volume_serial = Some(ascii(&p.value)).filter(|s| !s.is_empty());
            }
            0x0080 => v.write_protected = Some(n != 0),
            0x0081 => v.worm = Some(n != 0),
            0x0101 => v.beginning_of_medium_passes = Some(n),
            0x0102 => v.middle_of_medium_passes = Some(n),
            _ => {}
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scsi::cdb::parse_log_page;

    /// A Volume Statistics page (17h) laid out as an LTO drive returns it (SSC-4
    /// table "Volume Statistics log parameter codes"; the figures are those of an
    /// LTO-9 cartridge's sg_logs listing), with counters of several lengths, an
    /// ASCII serial number, a vendor parameter and a last parameter cut short.
    fn volume_statistics_page() -> Vec<u8> {
        fn param(code: u16, value: &[u8]) -> Vec<u8> {
            let mut p = code.to_be_bytes().to_vec();
            p.extend_from_slice(&[0x03, value.len() as u8]);
            p.extend_from_slice(value);
            p
        }
        let mut body = Vec::new();
        body.extend(param(0x0000, &[1])); // page valid
        body.extend(param(0x0001, &343u32.to_be_bytes())); // volume mounts
        body.extend(param(0x0002, &1_774_480u32.to_be_bytes()));
        body.extend(param(0x0003, &17u16.to_be_bytes()));
        body.extend(param(0x0004, &[0]));
        body.extend(param(0x0007, &57u64.to_be_bytes()));
        body.extend(param(0x0008, &[0, 0, 0, 3]));
        body.extend(param(0x000E, &9u32.to_be_bytes()));
        body.extend(param(0x000F, &49u32.to_be_bytes()));
        body.extend(param(0x0010, &1_811_222u32.to_be_bytes()));
        body.extend(param(0x0011, &558u32.to_be_bytes()));
        body.extend(param(0x0012, &250u16.to_be_bytes()));
        body.extend(param(0x0016, &27_966_101u32.to_be_bytes()));
        body.extend(param(0x0017, &1_418_152u32.to_be_bytes()));
        let mut serial = b"MF59TWPPJE".to_vec();
        serial.resize(32, b' ');
        body.extend(param(0x0040, &serial));
        body.extend(param(0x0080, &[0]));
        body.extend(param(0x0081, &[1]));
        body.extend(param(0x0101, &6_012u32.to_be_bytes()));
        body.extend(param(0x0102, &3_007u32.to_be_bytes()));
        body.extend(param(0xF000, &[0xAB, 0xCD])); // vendor specific
        let mut d = vec![0x17, 0x00];
        d.extend_from_slice(&(body.len() as u16).to_be_bytes());
        d.extend(body);
        // A parameter that the page length leaves out is not read.
        d.extend(param(0x0009, &[9, 9]));
        d
    }

    #[test]
    fn volume_statistics_page_decodes() {
        let (page, params) = parse_log_page(&volume_statistics_page()).unwrap();
        assert_eq!(page, 0x17);
        let v = parse(&params);
        assert_eq!(v.mounts, Some(343));
        assert_eq!(v.datasets_written, Some(1_774_480));
        assert_eq!(v.recovered_write_errors, Some(17));
        assert_eq!(v.unrecovered_write_errors, Some(0));
        assert_eq!(v.datasets_read, Some(57));
        assert_eq!(v.recovered_read_errors, Some(3));
        assert_eq!(v.unrecovered_read_errors, None);
        assert_eq!(v.last_mount_mb_written, Some(9));
        assert_eq!(v.last_mount_mb_read, Some(49));
        assert_eq!(v.lifetime_mb_written, Some(1_811_222));
        assert_eq!(v.lifetime_mb_read, Some(558));
        assert_eq!(v.last_load_write_compression_ratio, Some(2.5));
        assert_eq!(v.native_capacity_mb, Some(27_966_101));
        assert_eq!(v.used_native_capacity_mb, Some(1_418_152));
        assert_eq!(v.volume_serial.as_deref(), Some("MF59TWPPJE"));
        assert_eq!(v.write_protected, Some(false));
        assert_eq!(v.worm, Some(true));
        assert_eq!(v.beginning_of_medium_passes, Some(6_012));
        assert_eq!(v.middle_of_medium_passes, Some(3_007));
        // An empty page gives nothing, and no panic on any cut of the page.
        assert_eq!(parse(&[]), VolumeStatistics::default());
        let full = volume_statistics_page();
        for cut in 0..full.len() {
            if let Ok((_, params)) = parse_log_page(&full[..cut]) {
                let _ = parse(&params);
            }
        }
    }
}
