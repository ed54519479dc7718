//! Verify: read every block of a job, check block CRCs and every file's checksum.

use crate::error::Result;
use crate::home::Home;
use crate::media::reader::CopyMap;
use crate::media::reader::{Got, JobReader};
use std::collections::BTreeMap;
use std::time::Instant;
use tapeloom_tree::decode::Streams;
use tapeloom_tree::verify::Checker;
pub use tapeloom_tree::verify::VerifyReport;

/// Verifies job `job_id`.
pub fn verify(home: &Home, job_id: i64, drive: Option<usize>) -> Result<VerifyReport> {
    verify_as(home, job_id, drive, "verify")
}

/// [`verify`], recorded with the job as run `how` (`verify` by hand, `schedule
/// NAME` on a schedule): the job's last read-back (`jobs` shows it). Each
/// cartridge a bad block was found on is marked suspect, with a note saying
/// which job found how many, so that it is read no more than it must and its jobs
/// are copied elsewhere.
pub fn verify_as(
    home: &Home,
    job_id: i64,
    drive: Option<usize>,
    how: &str,
) -> Result<VerifyReport> {
    verify_copy_as(home, (job_id, None), drive, how)
}

/// [`verify_as`] of copy `copy` of the job (`None` or 1: its own cartridges; a
/// further copy must be whole). A bad block marks the copy's cartridge suspect.
pub fn verify_copy_as(
    home: &Home,
    (job_id, copy): (i64, Option<u32>),
    drive: Option<usize>,
    how: &str,
) -> Result<VerifyReport> {
    let cat = &home.catalog;
    let map = match copy.filter(|n| *n > 1) {
        Some(n) => Some(CopyMap::load(cat, job_id, n)?),
        // A job moved off its own cartridges: the copy that stands in for them.
        None => (cat.moved_to(job_id)?)
            .map(|n| CopyMap::load(cat, job_id, n))
            .transpose()?,
    };
    let report = read_back(home, (job_id, map), drive)?;
    // A home on a read-only file system is read back without a record of it.
    if home.is_read_only() {
        return Ok(report);
    }
    let now = crate::clock::now()?.as_nanos();
    cat.record_verify(&tapeloom_catalog::LastVerify {
        job_id,
        at_ns: now,
        ok: report.ok,
        blocks: report.blocks_checked,
        bad_blocks: report.bad_blocks.len() as u64,
        how: how.to_string(),
    })?;
    let mut bad: BTreeMap<&str, u64> = BTreeMap::new();
    for (barcode, _) in &report.bad_blocks {
        *bad.entry(barcode.as_str()).or_default() += 1;
    }
    for (barcode, n) in bad {
        if let Some(v) = cat.volume_by_barcode(barcode)? {
            cat.set_volume_status(v.id, tapeloom_catalog::VolumeState::Suspect)?;
            let note = format!("verify of job {job_id} found {n} bad blocks on it");
            cat.add_volume_note(v.id, now, &note)?;
        }
    }
    Ok(report)
}

/// The finished jobs of `pool` (by the pool of their first cartridge) to read
/// back at `now_ns`: those not read back within `older_than` (every one without
/// it); and those left alone, read back lately. Job ids, oldest first.
pub fn read_back_due(
    cat: &tapeloom_catalog::Catalog,
    pool: &str,
    older_than: Option<std::time::Duration>,
    now_ns: i64,
) -> Result<(Vec<i64>, Vec<i64>)> {
    let since =
        older_than.map(|d| now_ns.saturating_sub(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)));
    let (mut due, mut recent) = (Vec::new(), Vec::new());
    for j in cat.jobs()? {
        let done = matches!(
            j.status,
            tapeloom_catalog::JobState::Ok | tapeloom_catalog::JobState::Partial
        );
        let vols = cat.job_volumes(j.id)?;
        if !done || vols.first().is_none_or(|v| v.volume.pool != pool) {
            continue;
        }
        let last = cat.last_verify(j.id)?;
        match (since, last) {
            (Some(since), Some(l)) if l.at_ns > since => recent.push(j.id),
            _ => due.push(j.id),
        }
    }
    Ok((due, recent))
}

/// Reads copy `copy_no` of job `job_id` back whole, a copy a move wrote and
/// has not made the job's place yet (state `writing`) included, and checks every
/// block and file. Nothing is recorded: the move decides.
pub(crate) fn read_back_new_copy(
    home: &Home,
    (job_id, copy_no): (i64, u32),
    drive: Option<usize>,
) -> Result<VerifyReport> {
    use tapeloom_catalog::CopyState;
    let states = [CopyState::Writing, CopyState::Ok];
    let map = CopyMap::load_in(&home.catalog, job_id, copy_no, &states)?;
    read_back(home, (job_id, Some(map)), drive)
}

/// Reads job `job_id` back whole, from the copy `copy` maps (else its own
/// cartridges), and checks every block and file.
fn read_back(
    home: &Home,
    (job_id, copy): (i64, Option<CopyMap>),
    drive: Option<usize>,
) -> Result<VerifyReport> {
    let t0 = Instant::now();
    let cat = &home.catalog;
    let (mut reader, vols) = JobReader::open(home, job_id, drive)?;
    let via_copy = copy.is_some();
    if let Some(map) = copy {
        reader.set_copies(Some(map), Vec::new());
    }
    reader.seek(vols[0].seq, vols[0].first_lbn)?;
    let mut streams = Streams::default();
    let mut ck = Checker::new(crate::restore::plan::left_out(cat, job_id)?);
    ck.expected = crate::restore::plan::expected(cat, job_id, &[], true)?;
    let expected = ck.expected.len() as u64;
    let mut report = VerifyReport::default();
    loop {
        match reader.next()? {
            Got::End => break,
            Got::Bad { seq, lbn, .. } => {
                // The cartridge it was read from (a copy's, when a copy is read)
                // and its place there.
                let (barcode, at) = match reader.mounted_barcode() {
                    Some(b) if via_copy => (b, reader.last_place()),
                    _ => (
                        (vols.iter().find(|v| v.seq == seq))
                            .map(|v| v.volume.barcode.clone())
                            .unwrap_or_default(),
                        lbn,
                    ),
                };
                report.bad_blocks.push((barcode, at));
                for p in cat.files_in_block(job_id, seq, lbn)? {
                    ck.affected.insert(p);
                }
            }
            Got::Block { seq, lbn, header } => {
                // The block as read is opened: header and plain payload (an
                // encrypted one's tail is not there to leave off).
                let clear = tapeloom_format::BlockHeader {
                    compressed: false,
                    encrypted: false,
                    ..header
                };
                let block = reader.block();
                streams.feed(&header, clear.payload(block), (seq, lbn), None, &mut ck)?;
            }
        }
    }
    streams.finish(&mut ck);
    report.blocks_checked = reader.blocks_read;
    report.bytes_read_from_tape = reader.bytes_read;
    ck.report(expected, &mut report);
    report.seconds = t0.elapsed().as_secs_f64();
    Ok(report)
}
