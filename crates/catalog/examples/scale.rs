//! The catalog at scale: fills a catalog (an SQLite file, or a PostgreSQL URL)
//! with generated jobs of generated file rows, as backups record them, and times
//! the lookups users wait on. One JSON document on stdout.
//!
//!   scale TARGET [JOBS] [FILES_PER_JOB]
//!
//! TARGET is a path (a new SQLite file) or a `postgresql://` URL of an empty
//! database. Each job is one of a backup set's chain (a full, then
//! incrementals); its rows are recorded 10,000 at a time, each batch in one
//! transaction, as a backup's index is. Its files are in 1,000 folders, folder by folder as a walk finds them.
//! Timed: the rows recorded per second (all jobs), listing one folder of the
//! last job, the rows of one file (what a restore's plan reads: the file's row,
//! the job's segments and extents), one folder of the set's tree at its last
//! job (what `ls --set S --at T FOLDER` reads), and the set's whole tree there
//! (what a listing of the whole set reads).

use std::time::Instant;
use tapeloom_catalog::{Catalog, FileRow};
use tapeloom_format::Level;

const BATCH: usize = 10_000;
const FOLDERS: u64 = 1_000;

/// The row of file `i` of `per_job` in job `job`: files come folder by folder,
/// as a backup's walk finds them.
fn row(i: u64, per_job: u64, job: u64) -> FileRow {
    let path = format!("data/d{:04}/f{:08}", i * FOLDERS / per_job.max(1), i);
    FileRow {
        path: path.into_bytes(),
        stream: 1,
        kind: 1,
        mode: 0o644,
        size: 4096 + i % 100_000,
        mtime_ns: (job * 1_000_000 + i) as i64,
        start_lbn: 2 + i / 64,
        start_off: (i % 64 * 4096) as u32,
        end_lbn: 2 + i / 64,
        crc: i as u32,
        ctime_ns: 1,
        ino: i,
        ..FileRow::default()
    }
}

fn ms(t: Instant) -> f64 {
    (t.elapsed().as_secs_f64() * 1e6).round() / 1e3
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let target = args
        .first()
        .ok_or("usage: scale TARGET [JOBS] [FILES_PER_JOB]")?;
    let jobs: u64 = args.get(1).map_or(Ok(10), |a| a.parse())?;
    let per_job: u64 = args.get(2).map_or(Ok(1_000_000), |a| a.parse())?;
    let c = if target.starts_with("postgresql://") {
        Catalog::connect(target)?
    } else {
        Catalog::open(std::path::Path::new(target))?
    };
    let v = c.add_volume("TL0001L9", [1; 16], "default", 262144, 0)?;
    let mut ids = Vec::new();
    let mut insert_s = 0.0;
    let mut base = None;
    for n in 0..jobs {
        let j = c.begin_job(n + 1, "scale", 0, 262144, &[])?;
        let level = if n == 0 {
            Level::Full
        } else {
            Level::Incremental
        };
        c.set_job_set(j, "scale", level, base)?;
        c.add_job_volume(j, 0, 0, v.id, 2)?;
        let t = Instant::now();
        let mut i = 0;
        while i < per_job {
            let end = (i + BATCH as u64).min(per_job);
            let rows: Vec<FileRow> = (i..end).map(|k| row(k, per_job, n)).collect();
            c.add_files(j, &rows)?;
            i = end;
        }
        insert_s += t.elapsed().as_secs_f64();
        c.end_job_volume(j, 0, 2 + per_job / 64)?;
        c.finish_job(
            j,
            tapeloom_catalog::JobState::Ok,
            per_job,
            per_job * 4096,
            1.0,
            0,
        )?;
        eprintln!(
            "job {j}: {per_job} rows, {:.0} rows/s so far",
            ((n + 1) * per_job) as f64 / insert_s
        );
        ids.push(j);
        base = Some(j);
    }
    let last = *ids.last().ok_or("no job")?;
    let t = Instant::now();
    let folder = c.files(last, Some(b"data/d0500"))?;
    let ls_ms = ms(t);
    let t = Instant::now();
    let one = format!("data/d{:04}/f{:08}", 777 * FOLDERS / per_job.max(1), 777);
    let file = c.files(last, Some(one.as_bytes()))?;
    let segments = c.job_volumes(last)?;
    let extents = c.extents(last)?;
    let plan_ms = ms(t);
    let t = Instant::now();
    let part = c.tree_under(last, b"data/d0500")?;
    let part_ms = ms(t);
    let t = Instant::now();
    let tree = c.tree_at(last)?;
    let tree_ms = ms(t);
    let doc = format!(
        "{{\"target\": \"{}\", \"jobs\": {jobs}, \"rows\": {}, \"insert_rows_per_s\": {:.0}, \
         \"ls_folder_ms\": {ls_ms}, \"ls_folder_rows\": {}, \"plan_one_file_ms\": {plan_ms}, \
         \"plan_rows\": {}, \"set_folder_at_ms\": {part_ms}, \"set_folder_files\": {}, \
         \"set_tree_at_ms\": {tree_ms}, \"set_tree_files\": {}}}",
        if target.starts_with("postgresql://") {
            "postgresql"
        } else {
            "sqlite"
        },
        jobs * per_job,
        (jobs * per_job) as f64 / insert_s,
        folder.len(),
        file.len() + segments.len() + extents.len(),
        part.len(),
        tree.len()
    );
    println!("{doc}");
    Ok(())
}
