//! Finding SCSI devices: the SCSI generic nodes (`/dev/sgN`) of this machine, as
//! the kernel lists them in sysfs, and devices named by address (`/dev/sgN` or
//! `iscsi://HOST[:PORT]/TARGET/LUN`), probed with INQUIRY.
//!
//! Listing reads sysfs only, so it needs no access to the devices. Probing opens
//! the device and asks INQUIRY (retried through a UNIT ATTENTION or BUSY, as every
//! command of the drivers is) and the unit serial number page.

use super::ssc::quirk_entry;
use super::{inquiry, open_transport, unit_serial};
use crate::Result;
use std::path::Path;

/// Where the kernel lists SCSI generic devices.
const SYSFS_SG: &str = "/sys/class/scsi_generic";

/// How a device's description was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// From sysfs, without opening the device.
    Sysfs,
    /// From the device's own INQUIRY data.
    Inquiry,
}

/// A SCSI device found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// Its address: `/dev/sgN` or the `iscsi://` URL probed.
    pub address: String,
    /// The peripheral device type (01h tape, 08h changer); FFh when sysfs does
    /// not say.
    pub peripheral_type: u8,
    /// Vendor identification, where known.
    pub vendor: Option<String>,
    /// Product identification, where known.
    pub product: Option<String>,
    /// Product revision, where known.
    pub revision: Option<String>,
    /// Unit serial number, where the device gives one (probed devices only).
    pub serial: Option<String>,
    /// The note of the quirks table's row for this device, if it has one (probed
    /// devices only).
    pub quirks: Option<&'static str>,
    /// How the description was obtained.
    pub source: Source,
}

impl Device {
    /// The peripheral type as a word: "tape", "changer", "disk", "cd/dvd" or
    /// "other".
    pub fn kind(&self) -> &'static str {
        kind(self.peripheral_type)
    }
}

/// A peripheral device type as a word: "tape", "changer", "disk", "cd/dvd" or
/// "other".
pub fn kind(peripheral_type: u8) -> &'static str {
    match peripheral_type {
        0x01 => "tape",
        0x08 => "changer",
        0x00 => "disk",
        0x05 => "cd/dvd",
        _ => "other",
    }
}

/// What probing one address gave.
#[derive(Debug)]
pub struct Probed {
    /// The address probed.
    pub address: String,
    /// The device, or why it could not be probed.
    pub result: Result<Device>,
}

/// The SCSI generic devices of this machine, in the order of their numbers
/// (`sg0`, `sg1`, ... `sg10`); none where sysfs has no `scsi_generic` class.
pub fn list_sg() -> Vec<Device> {
    list_sg_in(Path::new(SYSFS_SG))
}

fn list_sg_in(base: &Path) -> Vec<Device> {
    let Ok(rd) = std::fs::read_dir(base) else {
        return Vec::new();
    };
    let mut names: Vec<String> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort_by_key(|n| {
        n.trim_start_matches("sg")
            .parse::<u32>()
            .unwrap_or(u32::MAX)
    });
    names
        .into_iter()
        .map(|n| {
            let dev = base.join(&n).join("device");
            Device {
                address: format!("/dev/{n}"),
                peripheral_type: sysfs(&dev, "type")
                    .and_then(|t| t.parse().ok())
                    .unwrap_or(0xff),
                vendor: sysfs(&dev, "vendor"),
                product: sysfs(&dev, "model"),
                revision: sysfs(&dev, "rev"),
                serial: None,
                quirks: None,
                source: Source::Sysfs,
            }
        })
        .collect()
}

fn sysfs(path: &Path, name: &str) -> Option<String> {
    std::fs::read_to_string(path.join(name))
        .ok()
        .map(|s| s.trim().to_string())
}

/// Opens the device at `address` and asks what it is: INQUIRY, the unit serial
/// number and the quirks table. Nothing but INQUIRY is sent, so probing neither
/// moves a tape nor a robot.
pub fn probe(address: &str) -> Result<Device> {
    let mut t = open_transport(address)?;
    let inq = inquiry(&mut *t, address)?;
    let serial = unit_serial(&mut *t);
    Ok(Device {
        address: address.to_string(),
        peripheral_type: inq.peripheral_type,
        quirks: quirk_entry(&inq).map(|q| q.note),
        vendor: Some(inq.vendor),
        product: Some(inq.product),
        revision: Some(inq.revision),
        serial,
        source: Source::Inquiry,
    })
}

/// Every SCSI generic device of this machine (from sysfs), then each of
/// `addresses` probed, in order.
pub fn discover(addresses: &[String]) -> Vec<Probed> {
    list_sg()
        .into_iter()
        .map(|d| Probed {
            address: d.address.clone(),
            result: Ok(d),
        })
        .chain(addresses.iter().map(|a| Probed {
            address: a.clone(),
            result: probe(a),
        }))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sg_nodes_are_listed_from_sysfs_in_number_order() {
        let dir = tempfile::tempdir().unwrap();
        for (n, ty, vendor) in [
            ("sg10", "8", "STK"),
            ("sg2", "1", "IBM"),
            ("sg0", "0", "ATA"),
        ] {
            let d = dir.path().join(n).join("device");
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("type"), format!("{ty}\n")).unwrap();
            std::fs::write(d.join("vendor"), format!("{vendor}     \n")).unwrap();
            std::fs::write(d.join("model"), "ULT3580-TD9     \n").unwrap();
        }
        let found = list_sg_in(dir.path());
        let names: Vec<&str> = found.iter().map(|d| d.address.as_str()).collect();
        assert_eq!(names, ["/dev/sg0", "/dev/sg2", "/dev/sg10"]);
        assert_eq!(found[1].kind(), "tape");
        assert_eq!(found[2].kind(), "changer");
        assert_eq!(found[1].vendor.as_deref(), Some("IBM"));
        assert_eq!(found[1].product.as_deref(), Some("ULT3580-TD9"));
        assert_eq!(found[1].revision, None);
        assert_eq!(found[1].source, Source::Sysfs);
        assert!(list_sg_in(&dir.path().join("missing")).is_empty());
    }

    #[test]
    fn a_bad_address_is_an_error_of_its_own() {
        let p = discover(&["tape0".to_string()]);
        let last = p.last().unwrap();
        assert_eq!(last.address, "tape0");
        let e = last.result.as_ref().unwrap_err();
        assert!(
            matches!(
                e,
                crate::DeviceError::Scsi(crate::scsi::ScsiError::NotAnAddress { .. })
            ),
            "{e}"
        );
    }
}
