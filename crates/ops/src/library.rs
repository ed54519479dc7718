//! How a library's cartridges are named for people and documents.

use tapeloom_catalog::Volume;

/// What a cartridge is: cleaning, its volume's state when the catalog knows it,
/// else blank or foreign by the bytes on it (`used`), or unknown.
pub fn cartridge_state(barcode: &str, v: Option<&Volume>, used: Option<u64>) -> String {
    match (v, used) {
        _ if tapeloom_device::is_cleaning(barcode) => "cleaning".into(),
        (Some(v), _) => v.status.to_string(),
        (None, Some(0)) => "blank".into(),
        (None, Some(_)) => "foreign".into(),
        (None, None) => "unknown".into(),
    }
}
