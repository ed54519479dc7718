//! `tapeloom devices [URL...]`: SCSI generic devices of this machine and the iSCSI
//! logical units named.

use crate::output::Output;
use anyhow::Result;
use serde::Serialize;
use tapeloom_device::scsi::discovery;
use tapeloom_engine::escape_controls;

#[derive(clap::Args)]
pub struct Args {
    /// iSCSI logical units to probe (iscsi://HOST:PORT/TARGET/LUN).
    urls: Vec<String>,
}

/// Every device found or named.
#[derive(Serialize)]
pub struct Devices {
    devices: Vec<Device>,
}

/// A device that answered, or why it did not.
#[derive(Serialize)]
#[serde(untagged)]
enum Device {
    Found {
        device: String,
        #[serde(rename = "type")]
        kind: &'static str,
        vendor: Option<String>,
        product: Option<String>,
        revision: Option<String>,
        serial: Option<String>,
        /// Only a device probed with INQUIRY names its quirks (null for none).
        #[serde(skip_serializing_if = "Option::is_none")]
        quirks: Option<Option<&'static str>>,
    },
    Failed {
        device: String,
        error: String,
    },
}

pub fn run(a: Args) -> Result<Devices> {
    let devices = discovery::discover(&a.urls)
        .into_iter()
        .map(|p| match p.result {
            Ok(d) => Device::Found {
                kind: d.kind(),
                quirks: (d.source == discovery::Source::Inquiry).then_some(d.quirks),
                device: d.address,
                vendor: d.vendor,
                product: d.product,
                revision: d.revision,
                serial: d.serial,
            },
            Err(e) => Device::Failed {
                device: p.address,
                error: e.to_string(),
            },
        })
        .collect();
    Ok(Devices { devices })
}

impl Output for Devices {
    fn print(&self) {
        if self.devices.is_empty() {
            outln!(
                "no SCSI devices found (name iSCSI logical units as iscsi://HOST:PORT/TARGET/LUN)"
            );
        }
        for d in &self.devices {
            match d {
                Device::Failed { device, error } => {
                    outln!("{}: {}", escape_controls(device), escape_controls(error))
                }
                Device::Found {
                    device,
                    kind,
                    vendor,
                    product,
                    revision,
                    serial,
                    ..
                } => {
                    // What a device says of itself is escaped with the rest.
                    let line = format!(
                        "{:<44} {:<8} {} {} {}{}",
                        device,
                        kind,
                        vendor.as_deref().unwrap_or(""),
                        product.as_deref().unwrap_or(""),
                        revision.as_deref().unwrap_or(""),
                        serial
                            .as_deref()
                            .map(|s| format!(" serial {s}"))
                            .unwrap_or_default()
                    );
                    outln!("{}", escape_controls(&line))
                }
            }
        }
    }

    /// A device that did not answer makes the exit status 1, without a message of
    /// its own: its line says why.
    fn exit_code(&self) -> i32 {
        let failed = self
            .devices
            .iter()
            .any(|d| matches!(d, Device::Failed { .. }));
        i32::from(failed)
    }
}
