//! The SMC media changer driver: element addresses, element status with barcodes
//! and drive identifiers, MOVE MEDIUM and INITIALIZE ELEMENT STATUS.

use super::cdb::{self, Element, ElementAddresses, ElementType, InquiryData};
use super::ScsiError;
use super::{exec, failed, must, open_transport, sense, DataDir, ScsiTransport, LONG, SHORT};
use crate::{ChangerError, Result};

/// What is in each element of a changer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChangerStatus {
    /// Medium transport elements (the robot's hands).
    pub transports: Vec<Element>,
    /// Storage elements (slots).
    pub storage: Vec<Element>,
    /// Import/export elements (mail slots).
    pub import_export: Vec<Element>,
    /// Data transfer elements (drives).
    pub drives: Vec<Element>,
}

/// An open SCSI media changer.
pub struct ScsiChanger {
    t: Box<dyn ScsiTransport>,
    /// The changer's INQUIRY data.
    pub inquiry: InquiryData,
    /// Its element addresses.
    pub addresses: ElementAddresses,
}

/// Bytes to ask for per element descriptor: address, flags, sense, source, two
/// volume tags and a device identifier.
const DESCRIPTOR_ROOM: u32 = 12 + 36 + 36 + 4 + 64;

impl ScsiChanger {
    /// Opens the changer at `dev`, checks it is one and reads its element addresses.
    pub fn open(dev: &str) -> Result<Self> {
        Self::with_transport(open_transport(dev)?, dev)
    }

    /// [`ScsiChanger::open`] over a transport already open to `dev`.
    pub fn with_transport(mut t: Box<dyn ScsiTransport>, dev: &str) -> Result<Self> {
        // The first command after a connection usually reports a unit attention.
        let _ = exec(&mut *t, &cdb::test_unit_ready(), DataDir::None, SHORT)?;
        let inquiry = super::inquiry(&mut *t, dev)?;
        if inquiry.peripheral_type != 0x08 {
            return Err(ScsiError::WrongDeviceType {
                device: dev.to_string(),
                expected: "media changer",
                vendor: inquiry.vendor,
                product: inquiry.product,
                peripheral_type: inquiry.peripheral_type,
            }
            .into());
        }
        let mut buf = vec![0u8; 255];
        must(
            &mut *t,
            "MODE SENSE (element address assignment page)",
            &cdb::mode_sense6(0x1d, true, 255),
            DataDir::In(&mut buf),
            SHORT,
        )?;
        let malformed = |what, source| ScsiError::Malformed {
            device: dev.to_string(),
            what,
            source,
        };
        let mode = cdb::parse_mode_sense6(&buf).map_err(|e| malformed("MODE SENSE", e))?;
        let addresses = cdb::parse_element_address_page(&mode.pages)
            .map_err(|e| malformed("element address assignment page", e))?;
        Ok(ScsiChanger {
            t,
            inquiry,
            addresses,
        })
    }

    /// The changer's address.
    pub fn address(&self) -> String {
        self.t.address()
    }

    /// Reads the status of every element of one type, with volume tags, and with
    /// device identifiers for drives where the changer gives them. Asks for a few
    /// elements at a time: some changers (tgt) refuse allocation lengths above 4 KiB.
    fn elements(&mut self, etype: ElementType, (first, count): (u16, u16)) -> Result<Vec<Element>> {
        let per_request = ((4096 - 16) / DESCRIPTOR_ROOM) as u16;
        let mut all = Vec::new();
        let mut at = 0u16;
        while at < count {
            let n = per_request.min(count - at);
            let start = first.saturating_add(at);
            let mut v = self.some_elements(etype, start, n)?;
            v.retain(|e| e.etype == etype && e.address >= start && e.address - start < n);
            all.extend(v);
            at += n;
        }
        Ok(all)
    }

    fn some_elements(
        &mut self,
        etype: ElementType,
        first: u16,
        count: u16,
    ) -> Result<Vec<Element>> {
        let alloc = 16 + u32::from(count) * DESCRIPTOR_ROOM;
        let mut buf = vec![0u8; alloc as usize];
        let dvcid = etype == ElementType::DataTransfer;
        let cmd = cdb::read_element_status(etype, first, count, true, dvcid, alloc);
        let mut r = exec(&mut *self.t, &cmd, DataDir::In(&mut buf), SHORT)?;
        if dvcid && r.key() == Some(sense::ILLEGAL_REQUEST) {
            // A changer that cannot name its drives: ask without identifiers.
            buf.fill(0);
            let cmd = cdb::read_element_status(etype, first, count, true, false, alloc);
            r = exec(&mut *self.t, &cmd, DataDir::In(&mut buf), SHORT)?;
        }
        if !(r.good() || r.key() == Some(sense::RECOVERED_ERROR)) {
            return Err(failed(&self.t.address(), "READ ELEMENT STATUS", &r).into());
        }
        // Only what came back: a zero tail must not complete a cut-off descriptor.
        let got = buf.len().saturating_sub(r.residual).max(8).min(buf.len());
        cdb::parse_element_status(&buf[..got]).map_err(|source| {
            ScsiError::Malformed {
                device: self.t.address(),
                what: "READ ELEMENT STATUS",
                source,
            }
            .into()
        })
    }

    /// What is where: every element type asked one at a time (some changers answer
    /// only that way).
    pub fn status(&mut self) -> Result<ChangerStatus> {
        let a = self.addresses;
        Ok(ChangerStatus {
            transports: self.elements(ElementType::Transport, a.transport)?,
            storage: self.elements(ElementType::Storage, a.storage)?,
            import_export: self.elements(ElementType::ImportExport, a.import_export)?,
            drives: self.elements(ElementType::DataTransfer, a.data_transfer)?,
        })
    }

    /// Moves the cartridge at element `from` to element `to` with the first robot.
    pub fn move_medium(&mut self, from: u16, to: u16) -> Result<()> {
        let cmd = cdb::move_medium(self.addresses.transport.0, from, to);
        let r = exec(&mut *self.t, &cmd, DataDir::None, LONG)?;
        if r.good() || r.key() == Some(sense::RECOVERED_ERROR) {
            return Ok(());
        }
        let command = format!("MOVE MEDIUM from element {from} to element {to}");
        Err(ChangerError::MoveRefused {
            from,
            to,
            source: failed(&self.t.address(), command, &r),
        }
        .into())
    }

    /// Has the changer scan its elements again (barcodes included).
    pub fn initialize(&mut self) -> Result<()> {
        must(
            &mut *self.t,
            "INITIALIZE ELEMENT STATUS",
            &cdb::initialize_element_status(),
            DataDir::None,
            LONG,
        )?;
        Ok(())
    }
}
