//! The library conformance suite on the virtual library (plain and modeled
//! drives) and on tgt's changer and drives over iSCSI.

use tapeloom_device::scsi::ScsiLibrary;
use tapeloom_device::{LibraryConfig, VirtualLibrary};
use tapeloom_testkit::conformance::{library, Check, Skip};
use tapeloom_testkit::tgt::{TgtLibrary, TgtOptions};

fn virtual_library(dir: &std::path::Path, model: Option<&str>) -> VirtualLibrary {
    VirtualLibrary::create(
        dir,
        LibraryConfig {
            drives: 2,
            slots: 4,
            capacity: 64 << 20,
            model: model.map(String::from),
            clock: None,
            scale: None,
            cleaning: 0,
            prefix: None,
            mail_slots: 2,
            headers_only: false,
        },
    )
    .unwrap()
}

#[test]
fn virtual_library_passes_the_library_suite() {
    for model in [None, Some("lto3")] {
        let t = tempfile::tempdir().unwrap();
        let mut lib = virtual_library(t.path(), model);
        let outcome = library::run_all(&mut lib, &[]);
        eprint!("virtual library ({model:?}):\n{}", outcome.skipped_list());
        // Everything runs, the mail slots included.
        assert!(outcome.skipped.is_empty(), "{}", outcome.skipped_list());
        assert!(outcome.ran.contains(&Check::MailSlots));
        assert!(outcome.ran.contains(&Check::Erase));
    }
}

/// What tgt cannot do of the library suite, and why.
const TGT_SKIPS: &[Skip] = &[Skip {
    check: Check::Erase,
    why: "tgt 1.0.85 has no ERASE (ILLEGAL REQUEST), so a cartridge cannot be made blank",
}];

#[test]
fn tgt_library_passes_the_library_suite() {
    let t = tempfile::tempdir().unwrap();
    let Some(tgt) =
        TgtLibrary::start_for_test(&TgtOptions::sized(t.path().join("vtl"), 2, 3, 8, "TLC"))
    else {
        return;
    };
    let mut lib = ScsiLibrary::open(&tgt.config()).unwrap();
    let outcome = library::run_all(&mut lib, TGT_SKIPS);
    eprint!("tgt library:\n{}", outcome.skipped_list());
    assert_eq!(outcome.skipped, TGT_SKIPS, "mail slots and the rest ran");
    assert!(outcome.ran.contains(&Check::MailSlots));
}
