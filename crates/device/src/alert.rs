//! TapeAlert flags as a set, and what each critical one asks of the host.
//!
//! The classes follow the TapeAlert specification's own split of its critical and
//! warning flags into medium, drive and cleaning conditions, as Proxmox Backup
//! Server acts on them: a cartridge flag stops writing to that cartridge (it is
//! marked suspect and the job goes on on another), a cleaning flag has the drive
//! cleaned before it writes again, a drive flag takes the drive out of the job.

use crate::scsi::tape_alert::flag_name;

/// TapeAlert flags 01h to 40h: bit `code - 1` is set when flag `code` is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TapeAlerts(pub u64);

/// What a critical flag asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum AlertAction {
    /// Write no more to the cartridge in the drive.
    Cartridge,
    /// Clean the drive before it writes again.
    Clean,
    /// Use the drive no more.
    Drive,
}

/// Media flags: 04h Media, 05h Read failure, 06h Write failure, 07h Media life,
/// 08h Not data grade, 0Eh Unrecoverable mechanical cartridge failure, 0Fh Memory
/// chip in cartridge failure, 12h Tape directory corrupted on load, 34h and 35h
/// Tape system area write and read failure, 3Bh WORM medium integrity check failed.
const CARTRIDGE: &[u16] = &[
    0x04, 0x05, 0x06, 0x07, 0x08, 0x0E, 0x0F, 0x12, 0x34, 0x35, 0x3B,
];
/// Cleaning flags: 14h Clean now, 15h Clean periodic.
const CLEAN: &[u16] = &[0x14, 0x15];
/// Drive flags: 1Eh Hardware A, 1Fh Hardware B, 20h Interface, 24h Drive
/// temperature, 25h Drive voltage, 27h Diagnostics required, 3Ah Microcode failure.
const DRIVE: &[u16] = &[0x1E, 0x1F, 0x20, 0x24, 0x25, 0x27, 0x3A];

impl TapeAlerts {
    /// The set with flag `code` (01h to 40h) added; other codes are ignored.
    pub fn with(self, code: u16) -> TapeAlerts {
        match code {
            1..=64 => TapeAlerts(self.0 | 1 << (code - 1)),
            _ => self,
        }
    }

    /// The flags from their codes.
    pub fn from_codes(codes: impl IntoIterator<Item = u16>) -> TapeAlerts {
        codes.into_iter().fold(TapeAlerts(0), TapeAlerts::with)
    }

    /// Whether flag `code` is set.
    pub fn has(&self, code: u16) -> bool {
        (1..=64).contains(&code) && self.0 & 1 << (code - 1) != 0
    }

    /// The codes set, in order.
    pub fn codes(&self) -> Vec<u16> {
        (1..=64).filter(|&c| self.has(c)).collect()
    }

    /// Whether none is set.
    pub fn is_empty(&self) -> bool {
        self.0 == 0
    }

    /// Each flag as `library status` prints it: "14h Clean now".
    pub fn names(&self) -> Vec<String> {
        self.codes().into_iter().map(describe).collect()
    }

    /// The gravest action the flags ask for (a drive out of service before a
    /// cleaning before a cartridge left), and the flags that ask for it.
    pub fn action(&self) -> Option<(AlertAction, Vec<u16>)> {
        [
            (AlertAction::Drive, DRIVE),
            (AlertAction::Clean, CLEAN),
            (AlertAction::Cartridge, CARTRIDGE),
        ]
        .into_iter()
        .find_map(|(a, set)| {
            let hit: Vec<u16> = set.iter().copied().filter(|&c| self.has(c)).collect();
            (!hit.is_empty()).then_some((a, hit))
        })
    }
}

/// What a critical flag `code` asks for, if anything.
pub fn action_of(code: u16) -> Option<AlertAction> {
    TapeAlerts::from_codes([code]).action().map(|(a, _)| a)
}

/// A flag as "14h Clean now".
pub fn describe(code: u16) -> String {
    format!("{code:02X}h {}", flag_name(code).unwrap_or("Unknown"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_sort_into_what_they_ask_for() {
        assert_eq!(TapeAlerts::default().action(), None);
        assert_eq!(action_of(0x09), None, "write protect asks for nothing");
        assert_eq!(action_of(0x04), Some(AlertAction::Cartridge));
        assert_eq!(action_of(0x14), Some(AlertAction::Clean));
        assert_eq!(action_of(0x1E), Some(AlertAction::Drive));
        let a = TapeAlerts::from_codes([0x06, 0x14, 0x09]);
        assert_eq!(a.codes(), vec![0x06, 0x09, 0x14]);
        assert_eq!(a.action(), Some((AlertAction::Clean, vec![0x14])));
        assert_eq!(a.names()[0], "06h Write failure");
        assert!(TapeAlerts::from_codes([0, 65]).is_empty());
        assert!(TapeAlerts::from_codes([64]).has(64));
    }
}
