//! Replays the fuzz corpus and the inputs that once broke a decoder
//! (`fuzz/corpus/TARGET/`, `fuzz/regressions/TARGET/`) through the same entry points
//! the cargo-fuzz targets call, on the stable toolchain: none may panic, hang or write
//! outside its restore target. See docs/FUZZING.md.

use std::path::{Path, PathBuf};
use tapeloom_engine::fuzzing::{ReadPath, TARGETS};

fn inputs(target: &str) -> Vec<PathBuf> {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut files = Vec::new();
    for set in ["corpus", "regressions"] {
        if let Ok(rd) = std::fs::read_dir(fuzz.join(set).join(target)) {
            files.extend(rd.filter_map(|e| e.ok()).map(|e| e.path()));
        }
    }
    files.sort();
    files
}

#[test]
fn every_decoder_survives_its_corpus() {
    let mut ran = 0;
    for (name, run) in TARGETS.iter().filter(|(n, _)| *n != "read_path") {
        let files = inputs(name);
        assert!(!files.is_empty(), "no corpus for {name}");
        for f in files {
            let data = std::fs::read(&f).unwrap();
            if let Err(v) = run(&data) {
                panic!("{name} {}: {v}", f.display());
            }
            ran += 1;
        }
    }
    assert!(ran > 0);
}

#[test]
fn the_read_path_survives_its_corpus_and_writes_only_under_its_targets() {
    let job = ReadPath::new().expect("write the job to mutate");
    assert!(job.objects() > 3, "{} objects", job.objects());
    // Unchanged, the job reads back.
    job.run(&[]).unwrap();
    let files = inputs("read_path");
    assert!(!files.is_empty(), "no corpus for read_path");
    for f in files {
        let data = std::fs::read(&f).unwrap();
        if let Err(v) = job.run(&data) {
            panic!("read_path {}: {v}", f.display());
        }
    }
}
