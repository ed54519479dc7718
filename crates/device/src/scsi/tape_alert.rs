//! The TapeAlert log page (2Eh, SSC-4): the drive's flags for conditions an
//! operator or the host should act on (clean now, media life, hardware errors).
//! Read at the end of each mount and by `library status`.

use super::cdb::LogParam;

/// Log page code of TapeAlert.
pub const PAGE: u8 = 0x2E;

/// The TapeAlert flag names (SSC-3 and SSC-4, TapeAlert log page 2Eh), for parameter
/// codes 01h to 40h.
const TAPEALERT: [&str; 64] = [
    "Read warning",                               // 01h
    "Write warning",                              // 02h
    "Hard error",                                 // 03h
    "Media",                                      // 04h
    "Read failure",                               // 05h
    "Write failure",                              // 06h
    "Media life",                                 // 07h
    "Not data grade",                             // 08h
    "Write protect",                              // 09h
    "No removal",                                 // 0Ah
    "Cleaning media",                             // 0Bh
    "Unsupported format",                         // 0Ch
    "Recoverable mechanical cartridge failure",   // 0Dh
    "Unrecoverable mechanical cartridge failure", // 0Eh
    "Memory chip in cartridge failure",           // 0Fh
    "Forced eject",                               // 10h
    "Read only format",                           // 11h
    "Tape directory corrupted on load",           // 12h
    "Nearing media life",                         // 13h
    "Clean now",                                  // 14h
    "Clean periodic",                             // 15h
    "Expired cleaning media",                     // 16h
    "Invalid cleaning tape",                      // 17h
    "Retension requested",                        // 18h
    "Dual-port interface error",                  // 19h
    "Cooling fan failure",                        // 1Ah
    "Power supply failure",                       // 1Bh
    "Power consumption",                          // 1Ch
    "Drive maintenance",                          // 1Dh
    "Hardware A",                                 // 1Eh
    "Hardware B",                                 // 1Fh
    "Interface",                                  // 20h
    "Eject media",                                // 21h
    "Microcode update fail",                      // 22h
    "Drive humidity",                             // 23h
    "Drive temperature",                          // 24h
    "Drive voltage",                              // 25h
    "Predictive failure",                         // 26h
    "Diagnostics required",                       // 27h
    "Obsolete",                                   // 28h
    "Obsolete",                                   // 29h
    "Obsolete",                                   // 2Ah
    "Obsolete",                                   // 2Bh
    "Obsolete",                                   // 2Ch
    "Obsolete",                                   // 2Dh
    "Obsolete",                                   // 2Eh
    "Reserved",                                   // 2Fh
    "Reserved",                                   // 30h
    "Reserved",                                   // 31h
    "Lost statistics",                            // 32h
    "Tape directory invalid at unload",           // 33h
    "Tape system area write failure",             // 34h
    "Tape system area read failure",              // 35h
    "No start of data",                           // 36h
    "Loading or threading failure",               // 37h
    "Unrecoverable unload failure",               // 38h
    "Automation interface failure",               // 39h
    "Microcode failure",                          // 3Ah
    "WORM medium - integrity check failed",       // 3Bh
    "WORM medium - overwrite attempted",          // 3Ch
    "Reserved",                                   // 3Dh
    "Reserved",                                   // 3Eh
    "Reserved",                                   // 3Fh
    "Reserved",                                   // 40h
];

/// The name of TapeAlert flag `code` (01h to 40h), `None` outside that range.
pub fn flag_name(code: u16) -> Option<&'static str> {
    let index = usize::from(code).checked_sub(1)?;
    TAPEALERT.get(index).copied()
}

/// The TapeAlert flags that are set, from the parameters of the TapeAlert log page
/// (2Eh): parameters 01h to 40h whose value is not zero, in the order of the page,
/// with their standard names.
pub fn flags(params: &[LogParam]) -> Vec<(u16, &'static str)> {
    params
        .iter()
        .filter(|p| p.value.iter().any(|&b| b != 0))
        .filter_map(|p| flag_name(p.code).map(|name| (p.code, name)))
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::scsi::cdb::parse_log_page;

    /// A TapeAlert log page (2Eh) with all 64 one-byte flags, `set` among them.
    pub(crate) fn alert_page(set: &[u16]) -> Vec<u8> {
        let mut d = vec![0x2E, 0x00, 0x01, 0x40];
        for code in 1..=64u16 {
            d.extend_from_slice(&code.to_be_bytes());
            d.extend_from_slice(&[0x03, 0x01, u8::from(set.contains(&code))]);
        }
        d
    }

    #[test]
    fn flags_of_the_page() {
        let (page, params) = parse_log_page(&alert_page(&[0x03, 0x14, 0x1E])).unwrap();
        assert_eq!(page, 0x2E);
        assert_eq!(params.len(), 64);
        assert_eq!(
            params[19],
            LogParam {
                code: 0x14,
                value: vec![1]
            }
        );
        assert_eq!(
            flags(&params),
            vec![
                (0x03, "Hard error"),
                (0x14, "Clean now"),
                (0x1E, "Hardware A")
            ]
        );
        assert!(flags(&parse_log_page(&alert_page(&[])).unwrap().1).is_empty());
        let names: Vec<&str> = (1..=64).filter_map(flag_name).collect();
        assert_eq!(names.len(), 64);
        assert_eq!(names[0x0B], "Unsupported format");
        assert_eq!(names[0x15], "Expired cleaning media");
        assert_eq!(names[0x1F], "Interface");
        assert_eq!(names[0x27], "Obsolete");
        assert_eq!(names[0x31], "Lost statistics");
        assert_eq!(names[0x3B], "WORM medium - overwrite attempted");
        assert_eq!(names[0x3F], "Reserved");
        assert_eq!(flag_name(0), None);
        assert_eq!(flag_name(65), None);
        // Codes outside 1..64 and zero values are not flags.
        let params = vec![
            LogParam {
                code: 0,
                value: vec![1],
            },
            LogParam {
                code: 0x41,
                value: vec![1],
            },
            LogParam {
                code: 0x09,
                value: vec![0, 0],
            },
            LogParam {
                code: 0x0A,
                value: vec![0, 1],
            },
        ];
        assert_eq!(flags(&params), vec![(0x0A, "No removal")]);
    }
}
