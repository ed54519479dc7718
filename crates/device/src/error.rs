//! The device crate's errors: [`DeviceError`] and the typed reasons inside it.
//!
//! Callers decide by variant, never by message text. Each error's text is one line;
//! where an error has a cause (an I/O error, a SCSI command's failure), the text
//! ends with the cause's text and [`std::error::Error::source`] returns the cause.

use crate::scsi::ScsiError;
use std::path::PathBuf;

/// Errors from drives and changers.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// No cartridge in the drive.
    #[error("no cartridge in the drive")]
    NoMedium,
    /// The cartridge is full; the block was not written.
    #[error("end of medium: the cartridge is full")]
    EndOfMedium,
    /// The cartridge is write protected; nothing was written.
    #[error("the cartridge is write protected")]
    WriteProtected,
    /// The block on tape is larger than the read buffer; the position moved past it.
    #[error("block of {actual} bytes is larger than the read buffer")]
    BlockTooLarge {
        /// Size of the block on tape.
        actual: usize,
    },
    /// A locate or space went past end of data.
    #[error("logical block {lbn} is beyond end of data")]
    BeyondEndOfData {
        /// The position asked for.
        lbn: u64,
    },
    /// The block's payload was not kept: the cartridge belongs to a virtual library
    /// made for experiments, which keeps only block headers.
    #[error("cartridge {barcode} keeps no payload (its library was made with --payload none, for experiments at full scale): block {lbn} cannot be read back")]
    NoPayloadKept {
        /// The cartridge.
        barcode: String,
        /// The block asked for.
        lbn: u64,
    },
    /// The drive keeps no data, so nothing can be read back (the null drive).
    #[error("the null drive keeps no data to read back")]
    NoDataKept,
    /// A changer or library request that cannot be carried out.
    #[error(transparent)]
    Changer(#[from] ChangerError),
    /// Stored state that makes no sense.
    #[error(transparent)]
    Corrupt(#[from] Corruption),
    /// A SCSI command or transport failed.
    #[error(transparent)]
    Scsi(#[from] ScsiError),
    /// An operating system error, with what was being done.
    #[error("{0}: {1}")]
    Io(String, #[source] std::io::Error),
}

impl DeviceError {
    /// A deferred MEDIUM ERROR (response code 71h): buffered writes of earlier
    /// commands did not reach the tape. The number of objects (blocks and
    /// filemarks) lost, from the INFORMATION field (SSC: the objects left in the
    /// buffer); the command that reported it was not carried out.
    pub fn deferred_write_lost(&self) -> Option<u64> {
        match self {
            DeviceError::Scsi(e) => e
                .sense()
                .filter(|s| s.deferred && s.key == crate::scsi::sense::MEDIUM_ERROR)
                .map(|s| s.information.unwrap_or(0).max(0) as u64),
            _ => None,
        }
    }

    /// Whether the drive could not read (or write) the medium at its position: a
    /// MEDIUM ERROR sense, not deferred. The block is bad; the drive and the rest of
    /// the cartridge may be fine.
    pub fn is_medium_error(&self) -> bool {
        match self {
            DeviceError::Scsi(e) => e
                .sense()
                .is_some_and(|s| s.key == crate::scsi::sense::MEDIUM_ERROR && !s.deferred),
            _ => false,
        }
    }
}

/// Why a changer or library refused a request. The text names the drive, slot or
/// cartridge as the library numbers them.
#[derive(Debug, thiserror::Error)]
pub enum ChangerError {
    /// A virtual library's layout with no or too many drives, slots or cleaning
    /// cartridges.
    #[error(
        "a library needs 1 to 256 drives, 1 to 9999 slots and at most 999 cleaning cartridges"
    )]
    BadLayout,
    /// A virtual library's cartridges are smaller than the smallest allowed (4 MiB).
    #[error("cartridge capacity must be at least 4 MiB")]
    CapacityTooSmall {
        /// The capacity asked for, bytes.
        capacity: u64,
    },
    /// A drive model that does not exist.
    #[error("no drive model '{model}' (try lto1 .. lto10)")]
    UnknownModel {
        /// The model asked for.
        model: String,
    },
    /// A virtual library that holds data would be replaced.
    #[error("the library in {} holds data on {}; refusing to replace it", dir.display(), barcodes.join(", "))]
    HoldsData {
        /// The library's folder.
        dir: PathBuf,
        /// The cartridges with data.
        barcodes: Vec<String>,
    },
    /// A SCSI library configured without drives.
    #[error("a SCSI library needs at least one drive")]
    NoDrives,
    /// More drives attached than the changer has drive elements.
    #[error(
        "the changer {changer} has {elements} drive elements, but {drives} drives are attached"
    )]
    TooFewDriveElements {
        /// The changer's address.
        changer: String,
        /// Its data transfer elements.
        elements: usize,
        /// The drives attached.
        drives: usize,
    },
    /// No such drive in the library.
    #[error("the library has no drive {drive}{}", count.map(|n| format!(" (it has {n})")).unwrap_or_default())]
    NoSuchDrive {
        /// The drive asked for.
        drive: usize,
        /// How many drives the library has, where the message says.
        count: Option<usize>,
    },
    /// No such slot in the library.
    #[error("the library has no slot {slot}{}", count.map(|n| format!(" (it has {n})")).unwrap_or_default())]
    NoSuchSlot {
        /// The slot asked for.
        slot: usize,
        /// How many slots the library has, where the message says.
        count: Option<usize>,
    },
    /// A slot number that cannot be a SCSI element address (above 65535).
    #[error("no slot {slot} in the library")]
    NotAnElementAddress {
        /// The slot asked for.
        slot: usize,
    },
    /// The changer does not report the data transfer element of a drive.
    #[error("drive {drive} is not in the changer")]
    DriveNotInChanger {
        /// The drive.
        drive: usize,
    },
    /// A move out of an empty slot.
    #[error("slot {slot} is empty")]
    SlotEmpty {
        /// The slot.
        slot: usize,
    },
    /// A move into a slot that holds a cartridge.
    #[error("slot {slot} already holds {barcode}")]
    SlotOccupied {
        /// The slot.
        slot: usize,
        /// The cartridge in it.
        barcode: String,
    },
    /// A load into a drive that holds a cartridge.
    #[error("drive {drive} already holds {barcode}")]
    DriveOccupied {
        /// The drive.
        drive: usize,
        /// The cartridge in it.
        barcode: String,
    },
    /// An unload of an empty drive.
    #[error("drive {drive} is empty")]
    DriveEmpty {
        /// The drive.
        drive: usize,
    },
    /// No empty slot to put an unloaded cartridge in.
    #[error("no empty slot to put the cartridge in")]
    NoEmptySlot,
    /// No empty drive to load a cartridge into.
    #[error("no empty drive to erase in")]
    NoEmptyDrive,
    /// A barcode that is in no slot and no drive.
    #[error("cartridge {barcode} is not in the library")]
    NoSuchBarcode {
        /// The barcode asked for.
        barcode: String,
    },
    /// No cleaning cartridge (barcode beginning with CLN) in a slot.
    #[error("no cleaning cartridge (a barcode beginning with CLN) in a slot of the library")]
    NoCleaningCartridge,
    /// Every cleaning cartridge in the library is used up.
    #[error("cleaning cartridge {barcode} is used up ({uses} cleanings; TapeAlert 16h Expired cleaning media)")]
    CleaningExpired {
        /// The cartridge.
        barcode: String,
        /// Cleanings it did.
        uses: u32,
    },
    /// A library that cannot make a cartridge blank.
    #[error("{library}: cannot erase cartridge {barcode}")]
    CannotErase {
        /// The library, as it describes itself.
        library: String,
        /// The cartridge.
        barcode: String,
    },
    /// A library that cannot set a cartridge's write protection (on a SCSI library
    /// the cartridge's tab is slid by hand).
    #[error(
        "{library}: cannot set the write protection of cartridge {barcode} (slide its tab by hand)"
    )]
    CannotProtect {
        /// The library, as it describes itself.
        library: String,
        /// The cartridge.
        barcode: String,
    },
    /// The changer refused a MOVE MEDIUM. [`ScsiError::sense`] of the cause says why
    /// (for instance ASC/ASCQ 3B/0D, the destination is full).
    #[error("{source}")]
    MoveRefused {
        /// The source element address.
        from: u16,
        /// The destination element address.
        to: u16,
        /// The command's failure.
        #[source]
        source: ScsiError,
    },
}

/// Stored state that makes no sense: what it is, and why.
#[derive(Debug, thiserror::Error)]
pub enum Corruption {
    /// A virtual library's `library.json` does not parse.
    #[error("library state {} is damaged: {source}", path.display())]
    LibraryState {
        /// The file.
        path: PathBuf,
        /// The parser's complaint.
        #[source]
        source: serde_json::Error,
    },
    /// A virtual library's state whose slots or drives disagree with its layout.
    #[error("library state {} does not match its layout", path.display())]
    LibraryLayout {
        /// The file.
        path: PathBuf,
    },
    /// A virtual library's state that could not be encoded.
    #[error("encode library state: {source}")]
    Encode {
        /// The encoder's complaint.
        #[source]
        source: serde_json::Error,
    },
    /// A virtual cartridge whose index did not match its data and could not be
    /// rebuilt with certainty from the data: it reads as far as it could be rebuilt,
    /// and refuses to append.
    #[error("the index of cartridge {barcode} does not match its data and could not be rebuilt from it with certainty; the cartridge reads but takes no more jobs")]
    CartridgeIndex {
        /// The cartridge.
        barcode: String,
    },
    /// A virtual library that names a drive model that does not exist.
    #[error("library names an unknown drive model '{model}'")]
    UnknownModel {
        /// The model named.
        model: String,
    },
}

/// Result of device operations.
pub type Result<T> = std::result::Result<T, DeviceError>;

pub(crate) fn io<T>(what: impl FnOnce() -> String, r: std::io::Result<T>) -> Result<T> {
    r.map_err(|e| DeviceError::Io(what(), e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error;

    #[test]
    fn causes_are_kept_as_sources() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e = DeviceError::Io("read library state /x/library.json".into(), io);
        assert_eq!(
            e.to_string(),
            "read library state /x/library.json: no such file"
        );
        let cause = e.source().expect("the I/O error is the source");
        assert_eq!(cause.to_string(), "no such file");
        let io = cause
            .downcast_ref::<std::io::Error>()
            .expect("an io::Error");
        assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
        assert!(cause.source().is_none());

        // A typed changer refusal has no cause; a corrupt state file has the parser's.
        let e = DeviceError::from(ChangerError::SlotOccupied {
            slot: 3,
            barcode: "TL0001L9".into(),
        });
        assert_eq!(e.to_string(), "slot 3 already holds TL0001L9");
        assert!(e.source().is_none());
        let json = serde_json::from_str::<u32>("{").unwrap_err();
        let e = DeviceError::from(Corruption::LibraryState {
            path: "/x/library.json".into(),
            source: json,
        });
        let mut chain = vec![e.to_string()];
        let mut at: &dyn Error = &e;
        while let Some(cause) = at.source() {
            chain.push(cause.to_string());
            at = cause;
        }
        assert_eq!(chain.len(), 2, "{chain:?}");
        assert!(chain[0].starts_with("library state /x/library.json is damaged: "));
        assert!(chain[0].ends_with(&chain[1]), "{chain:?}");
    }
}
