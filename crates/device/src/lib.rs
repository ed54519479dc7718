//! Tape drives and media changers behind two small traits, and the file-backed
//! virtual library that is tapeloom's embedded default.
//!
//! A drive behaves like a tape: it writes sequentially, a write ends the data there,
//! filemarks and end of data are things a read runs into, and early warning near the
//! end of a cartridge is a value returned by a successful write, not an error.
#![deny(missing_docs)]

pub mod alert;
mod error;
#[cfg(any(test, feature = "faults"))]
pub mod faults;
pub mod fsio;
pub mod lto;
mod null_drive;
pub mod regenerate;
pub mod scsi;
mod virtual_drive;
mod virtual_index;
mod virtual_library;

pub use alert::{AlertAction, TapeAlerts};
pub(crate) use error::io;
pub use error::{ChangerError, Corruption, DeviceError, Result};
pub use lto::{Clock, LtoDrive};
pub use null_drive::NullDrive;
pub use virtual_drive::{VirtualDrive, VirtualTape};
pub use virtual_library::{
    valid_prefix, LibraryConfig, VirtualLibrary, MAX_CLEANING, MAX_DRIVES, MAX_MAIL_SLOTS,
    MAX_SLOTS, MIN_CAPACITY,
};

/// What a read found at the current position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadOutcome {
    /// A block of this many bytes was read into the buffer.
    Block(usize),
    /// A filemark was passed; the position is after it.
    Filemark,
    /// There is nothing more on the tape; the position is unchanged.
    EndOfData,
}

/// How a write went, when it went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Written, with room to spare.
    Written,
    /// Written, but the tape is in its early-warning zone: finish up and change
    /// cartridges. A few more blocks and filemarks still fit.
    EarlyWarning,
}

/// What a drive reports about its work, as real drives do in their log pages.
/// All counters are 64-bit: a busy drive wraps 32-bit byte counters in under a minute.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DriveStats {
    /// Bytes the host wrote.
    pub host_bytes: u64,
    /// Bytes that went to tape after the drive's compression.
    pub tape_bytes: u64,
    /// Bytes the host read.
    pub host_bytes_read: u64,
    /// Seconds the tape moved while writing or reading.
    pub streaming_seconds: f64,
    /// Seconds the tape stood while a job was under way.
    pub stopped_seconds: f64,
    /// Times the tape ran dry and had to stop, back up and restart.
    pub backhitches: u64,
    /// The speed steps, MB/s.
    pub speed_steps_mb_s: Vec<f64>,
    /// Seconds spent at each speed step.
    pub seconds_at_step: Vec<f64>,
    /// Filemarks written.
    pub filemarks: u64,
    /// Locates done.
    pub locates: u64,
    /// Seconds spent locating.
    pub locate_seconds: f64,
    /// Loads.
    pub loads: u64,
    /// Unloads.
    pub unloads: u64,
    /// Seconds of first-load calibration.
    pub calibration_seconds: f64,
    /// Modeled (or measured) seconds since the drive was opened.
    pub modeled_seconds: f64,
    /// Fill of the drive's buffer now, 0 to 1.
    pub buffer_fill: f64,
    /// The speed step the tape runs at now (MB/s of tape), or 0 when it stands.
    pub speed_now_mb_s: f64,
}

impl DriveStats {
    /// Host bytes per tape byte.
    pub fn compression_ratio(&self) -> f64 {
        if self.tape_bytes == 0 {
            1.0
        } else {
            self.host_bytes as f64 / self.tape_bytes as f64
        }
    }
}

/// What a drive says about itself and the cartridge in it, where it can: the
/// TapeAlert flags (log page 2Eh) and the cartridge's volume statistics (log page
/// 17h) of a SCSI drive. Read at the end of each mount, for job reports.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DriveHealth {
    /// TapeAlert flags set, as "14h Clean now"; `None` when the drive has no
    /// TapeAlert page.
    pub tape_alerts: Option<Vec<String>>,
    /// The cartridge's statistics; `None` when the drive does not report them.
    pub volume_statistics: Option<VolumeStatistics>,
}

/// The Volume Statistics log page (17h, SSC-4; LTO-5 and later): counters that the
/// drive keeps in the cartridge memory, so they follow the cartridge from drive to
/// drive. Each is `None` when the drive leaves it out.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct VolumeStatistics {
    /// Times the cartridge was mounted (0001h).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub mounts: Option<u64>,
    /// Data sets written over the cartridge's life (0002h).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub datasets_written: Option<u64>,
    /// Write errors the drive recovered from by rewriting (0003h).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub recovered_write_errors: Option<u64>,
    /// Write errors it could not recover from (0004h).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub unrecovered_write_errors: Option<u64>,
    /// Data sets read over the cartridge's life (0007h).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub datasets_read: Option<u64>,
    /// Read errors recovered (0008h).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub recovered_read_errors: Option<u64>,
    /// Read errors not recovered (0009h).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub unrecovered_read_errors: Option<u64>,
    /// Megabytes (10^6 bytes) written during the last mount (000Eh).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub last_mount_mb_written: Option<u64>,
    /// Megabytes read during the last mount (000Fh).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub last_mount_mb_read: Option<u64>,
    /// Megabytes written over the cartridge's life (0010h).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub lifetime_mb_written: Option<u64>,
    /// Megabytes read over the cartridge's life (0011h).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub lifetime_mb_read: Option<u64>,
    /// The drive's compression ratio for writes since the last load (0012h, which
    /// drives report multiplied by 100).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub last_load_write_compression_ratio: Option<f64>,
    /// Native capacity, megabytes (0016h).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub native_capacity_mb: Option<u64>,
    /// Native capacity used, megabytes (0017h).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub used_native_capacity_mb: Option<u64>,
    /// The cartridge's serial number from its memory (0040h).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub volume_serial: Option<String>,
    /// Write protected (0080h).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub write_protected: Option<bool>,
    /// A WORM cartridge (0081h).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub worm: Option<bool>,
    /// Passes over the beginning of the medium (0101h).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub beginning_of_medium_passes: Option<u64>,
    /// Passes over the middle of the medium (0102h): the wear figure.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub middle_of_medium_passes: Option<u64>,
}

/// A sequential-access tape drive.
///
/// Positions are logical block numbers (LBN): every block and every filemark takes one,
/// counted from the beginning of tape.
pub trait TapeDrive: Send {
    /// A short description of the drive, for logs and status.
    fn describe(&self) -> String;
    /// Whether a cartridge is loaded and ready.
    fn has_medium(&self) -> bool;
    /// Makes a cartridge that is in the drive ready, at the beginning of tape.
    fn load(&mut self) -> Result<()>;
    /// Rewinds and takes the cartridge offline, ready for the changer to take it out.
    /// Reads and writes fail with [`DeviceError::NoMedium`] until the next load.
    fn unload(&mut self) -> Result<()>;
    /// Whether the loaded cartridge refuses writes.
    fn write_protected(&self) -> Result<bool>;
    /// Moves to the beginning of tape.
    fn rewind(&mut self) -> Result<()>;
    /// The current logical block number.
    fn position(&mut self) -> Result<u64>;
    /// Moves to a logical block number at or before end of data.
    fn locate(&mut self, lbn: u64) -> Result<()>;
    /// Moves to end of data, where the next write appends.
    fn space_to_eod(&mut self) -> Result<()>;
    /// Reads the block at the current position into `buf`.
    fn read_block(&mut self, buf: &mut [u8]) -> Result<ReadOutcome>;
    /// Writes one block at the current position. Everything after it is lost, as on
    /// tape. Fails with [`DeviceError::EndOfMedium`] when the block does not fit.
    fn write_block(&mut self, data: &[u8]) -> Result<WriteOutcome>;
    /// Writes `count` filemarks. `immediate` returns before the drive's buffer is on
    /// tape; without it the call is also a flush (all data written so far is durable).
    fn write_filemarks(&mut self, count: u32, immediate: bool) -> Result<WriteOutcome>;
    /// Bytes written to the loaded cartridge and its capacity, where known.
    fn usage(&mut self) -> Result<(u64, u64)>;
    /// The drive's statistics, for drives that keep them.
    fn stats(&self) -> Option<DriveStats> {
        None
    }
    /// Host bytes per second the drive takes at its top speed for data like
    /// `sample` (a block), when it knows without measuring (a drive model); `None`
    /// for a drive whose rate can only be measured.
    fn streaming_rate(&mut self, _sample: &[u8]) -> Option<f64> {
        None
    }
    /// Switches the drive's own compression on or off. Returns false when the drive
    /// has no compressor.
    fn set_compression(&mut self, _on: bool) -> Result<bool> {
        Ok(false)
    }
    /// Where block `lbn` starts, in bytes of data from the beginning of the tape,
    /// where the drive knows (a real drive keeps a directory of this kind in the
    /// cartridge memory; it is what makes its locates fast).
    fn block_offset(&self, _lbn: u64) -> Option<u64> {
        None
    }
    /// Where block `lbn` lies along the tape, in native bytes from the beginning
    /// (after the drive's compression), as the drive that wrote it recorded it
    /// with [`TapeDrive::note_tape_offset`]: a modeled drive places the blocks of
    /// a cartridge it did not write by it, as a real drive places them by the
    /// directory in its cartridge memory. None where nothing was recorded.
    fn tape_offset(&self, _lbn: u64) -> Option<f64> {
        None
    }
    /// Records that block (or filemark) `lbn`, just written, lies `offset` native
    /// bytes along the tape: what [`TapeDrive::tape_offset`] gives back, also
    /// after the cartridge was unloaded. Drives that keep no such directory
    /// ignore it.
    fn note_tape_offset(&mut self, _lbn: u64, _offset: f64) {}
    /// Modeled seconds to get from block `from` to block `to` by locating and by
    /// reading through (infinite when `to` lies before `from`), for drives with a
    /// timing model. Restores use it to choose between the two, and to plan the
    /// order of their reads.
    fn travel_seconds(&self, _from: u64, _to: u64) -> Option<Travel> {
        None
    }
    /// The drive's own order for reading `extents` of the mounted cartridge (the
    /// first and last block of each), as indices into `extents`, where the drive
    /// can say (a SCSI drive with GENERATE / RECEIVE RECOMMENDED ACCESS ORDER).
    /// `None` when it cannot: the caller then plans the order itself or keeps
    /// the block order. Never fails a reading.
    fn recommended_order(&mut self, _extents: &[(u64, u64)]) -> Option<Vec<usize>> {
        None
    }
    /// TapeAlert flags and the cartridge's volume statistics, where the drive
    /// reports them. Never fails a job: what cannot be read is `None`.
    fn health(&mut self) -> DriveHealth {
        DriveHealth::default()
    }
    /// The TapeAlert flags set now, where the drive has them (`None`: it has no
    /// TapeAlert page, or the page could not be read). Writers ask for them every
    /// few blocks and after every error, so it must be cheap: one LOG SENSE.
    fn tape_alerts(&mut self) -> Option<TapeAlerts> {
        None
    }
    /// Bytes the drive may hold written but not yet on tape (its buffer), where
    /// known: `Some(0)` for a drive that writes each block before it answers.
    /// Writers keep that much to write again after a deferred write error.
    fn buffer_bytes(&self) -> Option<u64> {
        None
    }
}

/// What getting from one block to a later one costs, in modeled seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Travel {
    /// By locate.
    pub locate: f64,
    /// By reading every block in between.
    pub read: f64,
}

/// One drive as the changer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriveElement {
    /// Drive index, from 0.
    pub index: usize,
    /// Barcode of the loaded cartridge.
    pub loaded: Option<String>,
    /// Slot the loaded cartridge came from.
    pub from_slot: Option<usize>,
}

/// One storage slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotElement {
    /// Slot address, from 0.
    pub address: usize,
    /// Barcode of the cartridge in it.
    pub barcode: Option<String>,
}

/// What is where in a library.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inventory {
    /// The drives.
    pub drives: Vec<DriveElement>,
    /// The storage slots.
    pub slots: Vec<SlotElement>,
    /// Import/export elements (mail slots), where the library has them.
    pub import_export: Vec<SlotElement>,
}

impl Inventory {
    /// The slot holding `barcode`, if it is in a slot.
    pub fn slot_of(&self, barcode: &str) -> Option<usize> {
        self.slots
            .iter()
            .find(|s| s.barcode.as_deref() == Some(barcode))
            .map(|s| s.address)
    }
    /// The drive holding `barcode`, if it is in a drive.
    pub fn drive_of(&self, barcode: &str) -> Option<usize> {
        self.drives
            .iter()
            .find(|d| d.loaded.as_deref() == Some(barcode))
            .map(|d| d.index)
    }
    /// The import/export element holding `barcode`, if it is in one.
    pub fn mail_slot_of(&self, barcode: &str) -> Option<usize> {
        self.import_export
            .iter()
            .find(|s| s.barcode.as_deref() == Some(barcode))
            .map(|s| s.address)
    }
    /// Every barcode in the library (slots and drives; not the mail slots, which
    /// are outside it).
    pub fn barcodes(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .slots
            .iter()
            .filter_map(|s| s.barcode.clone())
            .chain(self.drives.iter().filter_map(|d| d.loaded.clone()))
            .collect();
        v.sort();
        v
    }
}

/// Whether a barcode is a cleaning cartridge's (LTO: `CLNnnnLn`, beginning with
/// CLN). Nothing is ever written to one.
pub fn is_cleaning(barcode: &str) -> bool {
    barcode.starts_with("CLN")
}

/// How long a drive may take to clean itself before the changer can take the
/// cleaning cartridge back (LTO drives take one to three minutes).
pub const CLEANING_TIME: std::time::Duration = std::time::Duration::from_secs(600);

/// A cleaning done by [`TapeLibrary::clean_drive`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Cleaned {
    /// The drive.
    pub drive: usize,
    /// The cleaning cartridge used.
    pub barcode: String,
    /// Cleanings that cartridge has done, this one counted, where the library knows.
    pub uses: Option<u32>,
    /// Cleanings it has left, where the library knows.
    pub uses_left: Option<u32>,
}

/// The slot of a cleaning cartridge to clean `drive` with, which must exist and be
/// empty; among several, the first for which `usable` says yes.
pub fn cleaning_slot(
    inv: &Inventory,
    drive: usize,
    usable: impl Fn(&str) -> bool,
) -> Result<(usize, String)> {
    let d = inv.drives.get(drive).ok_or(ChangerError::NoSuchDrive {
        drive,
        count: Some(inv.drives.len()),
    })?;
    if let Some(b) = &d.loaded {
        return Err(ChangerError::DriveOccupied {
            drive,
            barcode: b.clone(),
        }
        .into());
    }
    let mut found = None;
    for s in &inv.slots {
        if let Some(b) = s.barcode.as_deref().filter(|b| is_cleaning(b)) {
            if usable(b) {
                return Ok((s.address, b.to_string()));
            }
            found.get_or_insert(b);
        }
    }
    Err(match found {
        Some(b) => ChangerError::CleaningExpired {
            barcode: b.to_string(),
            uses: 0,
        },
        None => ChangerError::NoCleaningCartridge,
    }
    .into())
}

/// A media changer (robot) that moves cartridges between slots and drives.
pub trait Changer {
    /// What is where.
    fn inventory(&mut self) -> Result<Inventory>;
    /// Moves the cartridge in `slot` into `drive` and loads it.
    fn load(&mut self, slot: usize, drive: usize) -> Result<()>;
    /// Unloads `drive` and puts its cartridge into `slot`, or back where it came from.
    fn unload(&mut self, drive: usize, slot: Option<usize>) -> Result<()>;
    /// Moves the cartridge in slot `from` to the empty slot `to`.
    fn transfer(&mut self, from: usize, to: usize) -> Result<()>;
}

/// A library: a changer and its drives, virtual or of real devices. Everything
/// tapeloom does with cartridges goes through this.
///
/// What only looks ([`Changer::inventory`], [`TapeLibrary::drive_health`], the
/// descriptions) sends no command that moves a tape or the robot; moving is done
/// by [`Changer::load`], [`Changer::unload`], [`Changer::transfer`],
/// [`TapeLibrary::erase`] and the drives that [`TapeLibrary::open_tape_drive`]
/// opens.
pub trait TapeLibrary: Changer + Send {
    /// What the library is, for status lines ("virtual library in ...", "SCSI
    /// library iscsi://...").
    fn describe(&self) -> String;
    /// Opens drive `index` with whatever cartridge is in it, ready for use: its
    /// position known, which on a drive without READ POSITION means a REWIND.
    /// Each call opens the device anew (a drive is used from one thread).
    fn open_tape_drive(&self, index: usize) -> Result<Box<dyn TapeDrive>>;
    /// Whether the library knows a cartridge is write protected without loading it.
    fn is_write_protected(&self, _barcode: &str) -> bool {
        false
    }
    /// Bytes written on a cartridge, where the library knows without loading it.
    fn cartridge_bytes(&self, _barcode: &str) -> Option<u64> {
        None
    }
    /// Capacity of a cartridge, where known without loading it.
    fn capacity(&self) -> Option<u64> {
        None
    }
    /// The drive model of a virtual library's drives, if it has one.
    fn model(&self) -> Option<String> {
        None
    }
    /// The lowest speed step of the drives in MB/s, where the library knows it (a
    /// modeled drive): data sent slower than this stops the drive.
    fn lowest_speed_mb_s(&self) -> Option<f64> {
        None
    }
    /// Whether the drives are tape drives with a compressor of their own (a
    /// modeled or a real drive), as opposed to plain virtual drives.
    fn drives_compress(&self) -> bool {
        self.model().is_some()
    }
    /// The device of drive `index`, for listings.
    fn drive_device(&self, index: usize) -> String {
        format!("drive {index}")
    }
    /// Has the changer scan its slots and barcodes again, where it can.
    fn rescan(&mut self) -> Result<()> {
        Ok(())
    }
    /// What drive `index` says about itself and its cartridge (TapeAlert flags,
    /// volume statistics), where it reports them.
    ///
    /// Must not move anything: no command that moves a tape (REWIND, LOCATE,
    /// SPACE, READ, WRITE, LOAD/UNLOAD, ERASE) or the robot (MOVE MEDIUM), nor one
    /// that changes a setting (MODE SELECT). `library status` calls it on drives
    /// that may hold a cartridge positioned by someone else, so an implementation
    /// opens the drive only to look at it (as [`scsi::ssc::ScsiDrive::open_for_status`]
    /// does), never with [`TapeLibrary::open_tape_drive`], which readies the
    /// cartridge for use and may rewind it.
    fn drive_health(&self, _index: usize) -> Result<DriveHealth> {
        Ok(DriveHealth::default())
    }
    /// Cleans drive `drive`, which must be empty, with a cleaning cartridge from a
    /// slot: loads it (a drive cleans itself when one is loaded, then ejects it) and
    /// puts it back, trying the move back for up to [`CLEANING_TIME`] while the
    /// drive is still at it.
    fn clean_drive(&mut self, drive: usize) -> Result<Cleaned> {
        let inv = self.inventory()?;
        let (slot, barcode) = cleaning_slot(&inv, drive, |_| true)?;
        self.load(slot, drive)?;
        let t = std::time::Instant::now();
        loop {
            match self.unload(drive, Some(slot)) {
                Ok(()) => break,
                Err(_) if t.elapsed() < CLEANING_TIME => {
                    std::thread::sleep(std::time::Duration::from_secs(5))
                }
                Err(e) => return Err(e),
            }
        }
        Ok(Cleaned {
            drive,
            barcode,
            uses: None,
            uses_left: None,
        })
    }
    /// Sets (`on`) or clears a cartridge's write protection, where the library can
    /// ([`ChangerError::CannotProtect`] where it cannot). A protected cartridge
    /// refuses writes from its next load.
    fn set_write_protected(&mut self, barcode: &str, _on: bool) -> Result<()> {
        Err(ChangerError::CannotProtect {
            library: self.describe(),
            barcode: barcode.to_string(),
        }
        .into())
    }
    /// Makes a cartridge blank again, for scratch use by benchmarks, where the
    /// library can.
    fn erase(&mut self, barcode: &str) -> Result<()> {
        Err(ChangerError::CannotErase {
            library: self.describe(),
            barcode: barcode.to_string(),
        }
        .into())
    }
}
