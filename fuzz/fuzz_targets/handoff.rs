#![no_main]
//! `tapeloom_engine::fuzzing::handoff`; see docs/FUZZING.md.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(v) = tapeloom_engine::fuzzing::handoff(data) {
        panic!("{v}");
    }
});
