//! Jobs of one, 256, 1,200 and the most streams the format allows, with long and
//! non-UTF-8 names, rebuilt from their tapes alone: every job, stream, segment, file
//! row and extent is what the catalog they replace held. A job whose start record
//! spans blocks (its stream table is larger than one) is found like any other.

use crate::common;
use crate::common::{forget_catalog, ok, open_catalog, run, write};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use tapeloom_catalog::{Extent, FileRow, Job, JobVolume, Stream};

/// What the catalog holds of its jobs.
#[derive(Debug, PartialEq)]
struct View {
    jobs: Vec<JobView>,
}

/// One job, its streams, segments, file rows and extents.
type JobView = (Job, Vec<Stream>, Vec<JobVolume>, Vec<FileRow>, Vec<Extent>);

/// Extents with the ones that continue each other joined: a writer may store a run
/// in pieces (it closes its open extent when it flushes a staged job's rows).
fn joined(mut x: Vec<Extent>) -> Vec<Extent> {
    x.sort_by_key(|e| (e.seq, e.first_lbn));
    let mut out: Vec<Extent> = Vec::new();
    for e in x {
        match out.last_mut() {
            Some(l)
                if l.stream == e.stream
                    && l.seq == e.seq
                    && l.first_lbn + l.blocks == e.first_lbn =>
            {
                l.blocks += e.blocks
            }
            _ => out.push(e),
        }
    }
    out
}

fn view(home: &Path) -> View {
    let cat = open_catalog(home);
    let mut jobs = Vec::new();
    for mut j in cat.jobs().expect("jobs") {
        // Seconds are timed by the writer; the tapes give the start and end times.
        j.seconds = 0.0;
        let mut files = cat.files(j.id, None).expect("files");
        files.sort_by(|a, b| a.path.cmp(&b.path));
        jobs.push((
            j.clone(),
            cat.streams(j.id).expect("streams"),
            cat.job_volumes(j.id).expect("volumes"),
            files,
            joined(cat.extents(j.id).expect("extents")),
        ));
    }
    View { jobs }
}

/// `n` source folders in `dir`, each holding one file; their names are long (86
/// bytes, as a site names them), and every tenth is 255 bytes or not UTF-8.
fn sources(dir: &Path, n: usize) -> Vec<PathBuf> {
    (0..n)
        .map(|i| {
            let name: OsString = match i % 10 {
                3 => OsString::from(format!("{i:04}-{}", "l".repeat(250))),
                7 => OsString::from_vec(
                    [format!("{i:04}-").into_bytes(), vec![0xff, 0xfe, b'x']].concat(),
                ),
                _ => OsString::from(format!(
                    "source-directory-with-a-rather-long-name-number-{i:04}-{}",
                    "abcdefgh".repeat(4)
                )),
            };
            let d = dir.join(name);
            write(&d.join("file.txt"), format!("file {i}\n").as_bytes());
            d
        })
        .collect()
}

fn rebuilds_identical(n: usize) {
    rebuilds_identical_on(n, None)
}

/// Backs up `n` sources (on cartridges of `capacity`, when given, so that the job
/// spans them and each later cartridge begins with a `Continuation` larger than a
/// block), rebuilds the catalog from the tapes and compares.
fn rebuilds_identical_on(n: usize, capacity: Option<&str>) {
    let t = tempfile::tempdir().unwrap();
    let (home, src) = (t.path().join("home"), t.path().join("src"));
    if let Some(c) = capacity {
        common::library(&home, 1, 30, c);
    }
    let dirs = sources(&src, n);
    let mut args: Vec<&OsStr> = vec![
        OsStr::new("backup"),
        OsStr::new("--block-size"),
        OsStr::new("64K"),
    ];
    args.extend(dirs.iter().map(|d| d.as_os_str()));
    let (code, b, err) = run(&home, &args);
    assert_eq!(code, 0, "backup of {n} sources: {err}");
    assert_eq!(b["status"], "ok", "{b}");
    let before = view(&home);
    assert_eq!(before.jobs.len(), 1);
    assert_eq!(before.jobs[0].1.len(), n);
    assert_eq!(before.jobs[0].3.len(), n * 2, "rows of {n} sources");
    forget_catalog(&home);
    let r = ok(&home, &["catalog", "rebuild"]);
    assert_eq!(r["unusable"].as_array().map(|a| a.len()), Some(0), "{r}");
    assert_eq!(r["jobs_added"].as_array().map(|a| a.len()), Some(1), "{r}");
    let mut after = view(&home);
    if capacity.is_some() {
        // Two things of a spanned job's volumes are not on tape: which drive's chain
        // each belongs to (FORMAT.md 4, rule 7: inferred from the streams they share,
        // and here no stream crosses a cartridge), and that the writer left each but
        // the last at early warning (a rebuilt volume takes jobs until the next
        // backup meets early warning on it). The rest is identical.
        for (b, a) in before.jobs.iter().zip(after.jobs.iter_mut()) {
            for (x, y) in b.2.iter().zip(a.2.iter_mut()) {
                y.chain = x.chain;
                y.volume.status = x.volume.status;
            }
        }
    }
    for (b, a) in before.jobs.iter().zip(&after.jobs) {
        assert_eq!(b.0, a.0, "{n} streams: the job");
        assert!(b.1 == a.1, "{n} streams: the streams differ");
        assert_eq!(b.2, a.2, "{n} streams: the segments");
        let rows = b.3.iter().zip(&a.3).find(|(x, y)| x != y);
        assert!(rows.is_none(), "{n} streams: a file row differs: {rows:?}");
        assert_eq!(b.3.len(), a.3.len(), "{n} streams: the file rows");
        let ext = b.4.iter().zip(&a.4).find(|(x, y)| x != y);
        assert!(ext.is_none(), "{n} streams: an extent differs: {ext:?}");
        assert_eq!(b.4.len(), a.4.len(), "{n} streams: the extents");
    }
    assert!(before == after, "{n} streams: the rebuilt catalog differs");
}

#[test]
fn a_job_of_one_stream_is_rebuilt_identical() {
    rebuilds_identical(1);
}

#[test]
fn a_job_of_256_streams_is_rebuilt_identical() {
    rebuilds_identical(256);
}

#[test]
fn a_job_of_1200_streams_whose_start_spans_blocks_is_rebuilt_identical() {
    rebuilds_identical(1200);
}

#[test]
fn a_job_of_1200_streams_spanning_cartridges_is_rebuilt_identical() {
    rebuilds_identical_on(1200, Some("16M"));
}

#[test]
fn a_job_of_the_most_streams_the_format_allows_is_rebuilt_identical() {
    rebuilds_identical(tapeloom_format::MAX_STREAMS);
}

#[test]
fn one_source_more_than_the_format_allows_is_refused_before_anything_is_written() {
    let t = tempfile::tempdir().unwrap();
    let (home, src) = (t.path().join("home"), t.path().join("src"));
    std::fs::create_dir_all(&src).unwrap();
    // The same folder named many times: refused on the count, before names are checked.
    let many = vec![src.as_os_str(); tapeloom_format::MAX_STREAMS + 1];
    let mut args: Vec<&OsStr> = vec![OsStr::new("backup")];
    args.extend(many);
    let (code, _, err) = run(&home, &args);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("at most 4096"), "{err}");
}

/// Seals a block again after a change: its CRC over bytes 0..60 and 64.. (FORMAT.md
/// 4.2), so that the change reaches the record decoder.
pub(crate) fn reseal(block: &mut [u8]) {
    let crc = crc32c::crc32c_append(crc32c::crc32c(&block[..60]), &block[64..]);
    block[60..64].copy_from_slice(&crc.to_le_bytes());
}

#[test]
fn an_absurd_job_start_makes_rebuild_fail_naming_its_volume_and_block() {
    let t = tempfile::tempdir().unwrap();
    let (base, src) = (t.path().join("base"), t.path().join("src"));
    write(&src.join("a.txt"), b"a");
    ok(
        &base,
        &["backup", src.to_str().unwrap(), "--block-size", "64K"],
    );
    let data = std::fs::read(base.join("library/tapes/TL0001L9.data")).unwrap();
    // The job's first block follows the 1024-byte label; its payload begins with the
    // JobStart record (16-byte header, then the body).
    let at = 1024;
    let body = at + 64 + 16;
    let start = tapeloom_format::JobStart::decode(
        &data[body..body
            + u64::from_le_bytes(data[at + 64 + 8..at + 64 + 16].try_into().unwrap()) as usize],
    )
    .unwrap();
    let count_at = body + 28 + 2 + start.name.len() + 2 + start.host.len();
    let cases: [(&str, usize, &[u8]); 5] = [
        ("a block size of 4 GiB", body + 20, &u32::MAX.to_le_bytes()),
        ("a block size of 1 byte", body + 20, &1u32.to_le_bytes()),
        ("60,000 streams", count_at, &60_000u16.to_le_bytes()),
        ("a reserved field set", at + 64 + 2, &[1]),
        ("a length of 2^63", at + 64 + 8, &(1u64 << 63).to_le_bytes()),
    ];
    for (what, off, bytes) in cases {
        let home = t.path().join("home");
        let _ = std::fs::remove_dir_all(&home);
        common::copy_tree(&base, &home);
        let mut d = data.clone();
        d[off..off + bytes.len()].copy_from_slice(bytes);
        let len = d.len();
        reseal(&mut d[at..(at + 65536).min(len)]);
        std::fs::write(home.join("library/tapes/TL0001L9.data"), &d).unwrap();
        forget_catalog(&home);
        let (code, v, err) = run(&home, &[OsStr::new("catalog"), OsStr::new("rebuild")]);
        assert_eq!(code, 1, "{what}: {v} {err}");
        assert_eq!(err.lines().count(), 1, "{what}: {err}");
        let u = &v["unusable"][0];
        assert_eq!(
            (u["volume"].as_str(), u["block"].as_u64()),
            (Some("TL0001L9"), Some(2)),
            "{what}: {v}"
        );
        assert!(
            !u["what"].as_str().unwrap_or_default().is_empty(),
            "{what}: {v}"
        );
        assert_eq!(
            v["jobs_added"].as_array().map(|a| a.len()),
            Some(0),
            "{what}: {v}"
        );
        // The job is salvaged from its blocks all the same, and its file restores.
        let salvaged = v["jobs_salvaged"].as_array().cloned().unwrap_or_default();
        assert_eq!(salvaged.len(), 1, "{what}: {v}");
        let out = t.path().join("out");
        let _ = std::fs::remove_dir_all(&out);
        ok(
            &home,
            &[
                "restore",
                &salvaged[0].to_string(),
                "--to",
                out.to_str().unwrap(),
            ],
        );
        assert_eq!(
            std::fs::read(out.join("a.txt")).ok(),
            Some(b"a".to_vec()),
            "{what}"
        );
    }
}
