//! A library's status never moves a tape: what `library status` asks of a SCSI
//! library (open, inventory, drive health) sends no motion command, checked by
//! recording every CDB sent to tgt's changer and drives.

use std::sync::{Arc, Mutex};
use std::time::Duration;
use tapeloom_device::scsi::ssc::ScsiDrive;
use tapeloom_device::scsi::{
    cdb, open_transport, CmdOutcome, DataDir, ScsiLibrary, ScsiTransport, TransportOpener,
    STATUS_GOOD,
};
use tapeloom_device::{Changer, Result, TapeDrive, TapeLibrary};
use tapeloom_testkit::tgt::{TgtLibrary, TgtOptions};

/// Commands that move a tape or the robot, or change a setting: REWIND, INITIALIZE
/// ELEMENT STATUS, READ(6), WRITE(6), WRITE FILEMARKS(6), SPACE(6), MODE
/// SELECT(6), ERASE(6), LOAD/UNLOAD, PREVENT ALLOW MEDIUM REMOVAL, LOCATE(10),
/// WRITE FILEMARKS(16), READ(16), WRITE(16), SPACE(16), LOCATE(16), MOVE MEDIUM.
const MOTION: &[u8] = &[
    0x01, 0x07, 0x08, 0x0A, 0x10, 0x11, 0x15, 0x19, 0x1B, 0x1E, 0x2B, 0x80, 0x88, 0x8A, 0x91, 0x92,
    0xA5,
];

/// A transport that records the operation code of every CDB it passes on.
struct Counting {
    inner: Box<dyn ScsiTransport>,
    sent: Arc<Mutex<Vec<(String, u8)>>>,
}

impl ScsiTransport for Counting {
    fn execute(&mut self, cdb: &[u8], data: DataDir<'_>, timeout: Duration) -> Result<CmdOutcome> {
        let op = cdb.first().copied().unwrap_or(0);
        self.sent.lock().unwrap().push((self.inner.address(), op));
        self.inner.execute(cdb, data, timeout)
    }
    fn address(&self) -> String {
        self.inner.address()
    }
}

/// Reads the next block straight through the transport (no driver, so no
/// rewind), `len` bytes.
fn next_block(dev: &str, len: usize) -> Vec<u8> {
    let mut t = open_transport(dev).unwrap();
    let mut buf = vec![0u8; len];
    // The first command after a login may report a unit attention.
    for _ in 0..3 {
        let out = t
            .execute(
                &cdb::read6(len as u32),
                DataDir::In(&mut buf),
                Duration::from_secs(60),
            )
            .unwrap();
        if out.status == STATUS_GOOD {
            return buf;
        }
        let sense = tapeloom_device::scsi::sense::parse(&out.sense);
        assert_eq!(
            sense.map(|s| s.key),
            Some(tapeloom_device::scsi::sense::UNIT_ATTENTION),
            "READ: {out:?}"
        );
    }
    panic!("READ kept failing");
}

#[test]
fn library_status_sends_no_motion_command() {
    let t = tempfile::tempdir().unwrap();
    let Some(tgt) =
        TgtLibrary::start_for_test(&TgtOptions::sized(t.path().join("vtl"), 2, 3, 8, "TLS"))
    else {
        return;
    };
    let cfg = tgt.config();
    // Drive 0 holds a cartridge stopped in the middle of its data: before block 3
    // of blocks that each hold their own number.
    {
        let mut lib = ScsiLibrary::open(&cfg).unwrap();
        let slot = lib.inventory().unwrap().slot_of(&tgt.barcodes[0]).unwrap();
        lib.load(slot, 0).unwrap();
        let mut d = ScsiDrive::open(&tgt.drive_urls[0]).unwrap();
        d.load().unwrap();
        for i in 0..6u8 {
            d.write_block(&[i; 512]).unwrap();
        }
        d.write_filemarks(1, false).unwrap();
        d.locate(3).unwrap();
    }
    // Read block 3 without the driver (which would rewind): the tape now stands
    // before block 4.
    assert_eq!(next_block(&tgt.drive_urls[0], 512), vec![3u8; 512]);
    // What `library status` does, through transports that record every command.
    let sent = Arc::new(Mutex::new(Vec::new()));
    let log = sent.clone();
    let opener: TransportOpener = Arc::new(move |dev: &str| {
        Ok(Box::new(Counting {
            inner: open_transport(dev)?,
            sent: log.clone(),
        }) as Box<dyn ScsiTransport>)
    });
    let mut lib = ScsiLibrary::open_with(&cfg, opener).unwrap();
    let inv = lib.inventory().unwrap();
    assert_eq!(inv.drive_of(&tgt.barcodes[0]), Some(0));
    for d in &inv.drives {
        lib.drive_health(d.index).unwrap();
    }
    drop(lib);
    let sent = sent.lock().unwrap().clone();
    let drive_cmds = sent.iter().filter(|(dev, _)| tgt.drive_urls.contains(dev));
    assert!(drive_cmds.count() > 0, "the drives were asked: {sent:02x?}");
    let moved: Vec<_> = sent.iter().filter(|(_, op)| MOTION.contains(op)).collect();
    assert!(
        moved.is_empty(),
        "status sent motion commands: {moved:02x?}"
    );
    // And the tape is where it was: the next block is block 4.
    assert_eq!(next_block(&tgt.drive_urls[0], 512), vec![4u8; 512]);
}

#[test]
fn opening_a_drive_for_use_does_rewind_without_read_position() {
    // The contrast that makes the status path necessary: on tgt (no READ
    // POSITION) opening a drive for use rewinds it to know where it is.
    let t = tempfile::tempdir().unwrap();
    let Some(tgt) =
        TgtLibrary::start_for_test(&TgtOptions::sized(t.path().join("vtl"), 1, 1, 8, "TLR"))
    else {
        return;
    };
    let cfg = tgt.config();
    let mut lib = ScsiLibrary::open(&cfg).unwrap();
    let slot = lib.inventory().unwrap().slot_of(&tgt.barcodes[0]).unwrap();
    lib.load(slot, 0).unwrap();
    let mut d = lib.open_tape_drive(0).unwrap();
    d.load().unwrap();
    for i in 0..3u8 {
        d.write_block(&[i; 512]).unwrap();
    }
    d.locate(2).unwrap();
    drop(d);
    let mut d = ScsiDrive::open_for_status(&tgt.drive_urls[0]).unwrap();
    assert!(!d.has_medium(), "not set up for use");
    let _ = d.health();
    drop(d);
    assert_eq!(next_block(&tgt.drive_urls[0], 512), vec![2u8; 512]);
    let d = lib.open_tape_drive(0).unwrap();
    drop(d);
    assert_eq!(next_block(&tgt.drive_urls[0], 512), vec![0u8; 512]);
}
