//! The S3 front end's tape side, run by the server: one thread archives the
//! buckets' objects to tape in batches, another starts the readings of the
//! restores asked of archived objects, one reading per free drive, each
//! reading on a thread of its own. They take drives as a scheduled job does (a
//! free drive of the server's, the home the jobs share) and show in the
//! server's queue, so that the status page and `/metrics` count them with the
//! clients' jobs.
//!
//! The rules are the operations layer's (`tapeloom_ops::s3::tape` and
//! `tapeloom_ops::s3::restores`): which objects make a batch and when it is
//! due, the job that archives it (its pool's rules applied as for every job),
//! when an object's disk copy may go, how restores gather per tier and how the
//! restore cache is kept. Everything either thread does is recorded in the
//! catalog as it goes, so a server killed at any moment starts again where it
//! was: a batch whose job a stop cut is resumed from the stages as every job
//! is, read back, and the objects it holds adopted ([`start`]); the others are
//! archived again, and a restore asked is read again.

use crate::work::Work;
use std::collections::{BTreeMap, HashSet};
use std::os::unix::ffi::OsStrExt;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tapeloom_engine::{BackupOptions, DriveSet, Progress, ReadOrder, RestoreOptions};
use tapeloom_ops::s3::restores::{self, Order, Settings};
use tapeloom_ops::s3::tape::{self, Batch, Spread};
use tapeloom_ops::s3::{S3Object, Store};
use tapeloom_ops::Conn;
use tracing::{info, warn};

/// How long a thread waits before it looks again when there was nothing to do.
const IDLE: Duration = Duration::from_millis(500);

/// How long a thread waits after a failure before it tries again.
const AFTER_FAILURE: Duration = Duration::from_secs(5);

/// When the server's S3 threads began: the origin of the times the restores'
/// log lines give.
static STARTED: LazyLock<Instant> = LazyLock::new(Instant::now);

/// The client name the S3 front end's jobs are shown under in the queue.
pub(crate) const CLIENT: &str = "s3";

/// Why an archive or a restore could not run.
#[derive(Debug, thiserror::Error)]
pub enum TapeError {
    /// The server stops: the work waits for its next start.
    #[error("the server is stopping")]
    Stopping,
    /// The catalog, the home or a pool's rules.
    #[error(transparent)]
    Ops(#[from] tapeloom_ops::OpsError),
    /// An S3 rule or the S3 stage.
    #[error(transparent)]
    S3(#[from] tapeloom_ops::s3::S3Failure),
    /// A batch's job held none of its objects.
    #[error("job {job} could not read any object of its batch")]
    NothingArchived {
        /// The job.
        job: i64,
    },
    /// The engine's backup, verify or restore.
    #[error(transparent)]
    Engine(#[from] Box<tapeloom_engine::Error>),
}

impl From<tapeloom_engine::Error> for TapeError {
    fn from(e: tapeloom_engine::Error) -> TapeError {
        TapeError::Engine(Box::new(e))
    }
}

/// Starts the archiving and the restoring threads. `left` are the jobs a
/// stopped server left on the stages, which the server resumes: those that
/// archive a batch are waited for, and the objects they hold adopted.
pub fn start(
    work: &Arc<Work>,
    (settings, spread): (Settings, Spread),
    left: Vec<i64>,
) -> std::io::Result<()> {
    let w = Arc::clone(work);
    let left = Mutex::new(left);
    std::thread::Builder::new()
        .name("s3-archive".into())
        .spawn(move || {
            run_loop(&w, "archive", |w| {
                if adopt_left(w, &left)? {
                    return Ok(false);
                }
                archive_once(w, &spread)
            })
        })?;
    LazyLock::force(&STARTED);
    let w = Arc::clone(work);
    let running = Readings::default();
    std::thread::Builder::new()
        .name("s3-restore".into())
        .spawn(move || run_loop(&w, "restore", |w| restore_once(w, &settings, &running)))?;
    Ok(())
}

/// Runs `once` until the server drains: at once again when it did something,
/// after a short wait when it had nothing to do or failed.
fn run_loop(work: &Arc<Work>, what: &str, once: impl Fn(&Arc<Work>) -> Result<bool, TapeError>) {
    while !work.draining() {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| once(work)));
        match r {
            Ok(Ok(true)) => {}
            Ok(Ok(false)) => std::thread::sleep(IDLE),
            Ok(Err(TapeError::Stopping)) => return,
            Ok(Err(e)) => {
                warn!("S3 {what}: {e}");
                std::thread::sleep(AFTER_FAILURE);
            }
            Err(panic) => {
                warn!(
                    "S3 {what}: panicked: {}",
                    crate::writer::panic_message(&panic)
                );
                std::thread::sleep(AFTER_FAILURE);
            }
        }
    }
}

/// Adopts the objects that the archive jobs of `left` hold, each once its
/// resume ended: its job read back whole, then each object of its bucket still
/// waiting for tape that it holds whole recorded as on tape in it, so that
/// only the others are archived again. Whether a job of `left` is still being
/// resumed (no batch is archived until it ends; the jobs of `left` that are
/// not a bucket's are let go at once).
fn adopt_left(work: &Work, left: &Mutex<Vec<i64>>) -> Result<bool, TapeError> {
    let jobs = left.lock().unwrap_or_else(PoisonError::into_inner).clone();
    if jobs.is_empty() {
        return Ok(false);
    }
    let resuming = (work.resuming.lock().unwrap_or_else(PoisonError::into_inner)).clone();
    let conn = Conn::open(&work.home)?;
    let mut waits = false;
    for job in jobs {
        let left_as = tape::left(&conn, job)?;
        if left_as != tape::Left::NotMine && resuming.contains(&job) {
            waits = true;
            continue;
        }
        match left_as {
            tape::Left::NotMine => {}
            tape::Left::Failed(bucket) => {
                warn!(%bucket, job, "S3 archive: the job left by a stopped server failed; its objects are archived again");
            }
            tape::Left::Ended(bucket) => {
                if read_back(work, job)? {
                    let done = tape::adopt(&conn, (job, &bucket))?;
                    info!(
                        %bucket,
                        job,
                        objects = done.objects,
                        bytes = done.bytes,
                        "S3 objects adopted from a job a stopped server left"
                    );
                    if done.objects > 0 {
                        crate::copies::after_job(work, job, CLIENT);
                    }
                } else {
                    warn!(%bucket, job, "S3 archive: the job left by a stopped server did not read back whole; its objects are archived again");
                }
            }
        }
        (left.lock().unwrap_or_else(PoisonError::into_inner)).retain(|j| *j != job);
    }
    Ok(waits)
}

/// Releases the disk copies that may go, then archives the first batch due,
/// in as many streams as `spread` and the free drives allow; whether there was
/// a batch.
fn archive_once(work: &Work, spread: &Spread) -> Result<bool, TapeError> {
    let conn = Conn::open(&work.home)?;
    let store = Store::open(&work.home)?;
    release(&conn, &store)?;
    // A job written but not read back (the server stopped in between) is
    // read back first, so that its objects' disk copies may go.
    if let Some(&job) = tape::unread(&conn)?.first() {
        if !read_back(work, job)? {
            warn!(
                job,
                "S3 archive: the job did not read back whole; its objects keep their disk copies"
            );
        }
        release(&conn, &store)?;
        return Ok(true);
    }
    let Some(mut batch) = tape::due(&conn)?.into_iter().next() else {
        return Ok(false);
    };
    let streams = tape::streams(&batch, work.drive_pool.free(), spread);
    let (folder, sources) = tape::gather(&store, &mut batch, streams)?;
    if batch.objects.is_empty() {
        // Every object of it was deleted meanwhile.
        return Ok(true);
    }
    let name = tape::job_name(&batch.bucket.name);
    let entry = work
        .queue
        .add(CLIENT, &name, &format!("S3 bucket {}", batch.bucket.name));
    crate::admission::enter_scheduled(work, entry, CLIENT);
    let r = archive(work, (&sources, entry, &batch));
    drop(folder);
    work.queue
        .ended(entry, r.as_ref().err().map(ToString::to_string));
    let (job, done) = r?;
    if done.objects == 0 {
        // Nothing could be read (the files are gone): the batch is not tried
        // again at once.
        return Err(TapeError::NothingArchived { job });
    }
    // The pool's copy, as for every job: a queued job of its own.
    crate::copies::after_job(work, job, CLIENT);
    release(&conn, &store)?;
    Ok(true)
}

/// Writes `batch` as one job of `sources` (its data files' second names, a
/// stream per source) on free drives, one per stream when as many are free
/// (at least one), records what it holds, and reads it back when it holds
/// objects whose disk copy will go; the job's id and what it holds.
fn archive(
    work: &Work,
    (sources, entry, batch): (&[std::path::PathBuf], u64, &Batch),
) -> Result<(i64, tape::Archived), TapeError> {
    let mut drive =
        (work.drive_pool.wait_for_one(|| work.draining())).ok_or(TapeError::Stopping)?;
    if sources.len() > 1 {
        drive.more(sources.len() - 1);
    }
    let mut home = work.drive_pool.enter(&work.home)?;
    let stages = home.stages.clone();
    let opts = tape::archive_options(&*home, batch)?;
    let mut opts = BackupOptions {
        drives: DriveSet::List(drive.indexes.clone()),
        stages: Some(stages),
        ..opts
    };
    tapeloom_ops::backup::prepare(&mut home, &mut opts, &work.keys)?;
    let progress = Arc::new(Progress::default());
    let report = tapeloom_engine::backup(&home, sources, &opts, Arc::clone(&progress))?;
    work.queue.writing(entry, report.job_id, progress);
    let done = tape::archived(&*home, batch, &report)?;
    info!(
        bucket = %batch.bucket.name,
        job = report.job_id,
        streams = sources.len(),
        drives = drive.indexes.len(),
        objects = done.objects,
        bytes = done.bytes,
        missed = done.missed,
        "S3 objects archived"
    );
    let kept_on_tape = (batch.objects.iter()).any(|o| restores::archived_class(&o.class));
    if kept_on_tape && done.objects > 0 {
        let at = drive.indexes.first().copied();
        let v = tapeloom_engine::verify_as(&home, report.job_id, at, "s3 archive")?;
        if !v.ok {
            warn!(
                job = report.job_id,
                "S3 archive: the job did not read back whole; its objects keep their disk copies"
            );
        }
    }
    Ok((report.job_id, done))
}

/// Reads job `job` back on a free drive; whether it read back whole.
fn read_back(work: &Work, job: i64) -> Result<bool, TapeError> {
    let drive = (work.drive_pool.wait_for_one(|| work.draining())).ok_or(TapeError::Stopping)?;
    let home = work.drive_pool.enter(&work.home)?;
    let at = drive.indexes.first().copied();
    let v = tapeloom_engine::verify_as(&home, job, at, "s3 archive")?;
    Ok(v.ok)
}

/// Removes the disk copies of archived objects that may go, and the files
/// that objects deleted through another server of the site left here.
fn release(conn: &Conn, store: &Store) -> Result<(), TapeError> {
    let left = tape::remove_left(conn, store)?;
    if left > 0 {
        info!(
            objects = left,
            "S3 files of objects deleted elsewhere removed"
        );
    }
    let mut n = 0u64;
    for o in tape::releasable(conn, 10_000)? {
        if tape::release(conn, store, &o)? {
            n += 1;
        }
    }
    if n > 0 {
        info!(objects = n, "S3 disk copies released");
    }
    Ok(())
}

/// The restores being read now: their objects and cartridges, and the
/// readings started that do not hold a drive yet.
#[derive(Default)]
struct Reading {
    objects: HashSet<i64>,
    cartridges: HashSet<String>,
    starting: usize,
}

type Readings = Arc<Mutex<Reading>>;

fn lock(r: &Readings) -> std::sync::MutexGuard<'_, Reading> {
    r.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Starts the readings of the restores due, if any, beside those that run:
/// those whose data is still on disk are restored at once, the others are
/// gathered per cartridge and dealt to as many readings as there are free
/// drives, each on a drive of its own (a cartridge a reading reads waits for
/// it to end). Whether it started anything.
fn restore_once(
    work: &Arc<Work>,
    settings: &Settings,
    running: &Readings,
) -> Result<bool, TapeError> {
    let conn = Conn::open(&work.home)?;
    let store = Store::open(&work.home)?;
    let reading = lock(running).objects.clone();
    let due = restores::due(&conn, settings, |o| reading.contains(&o.id))?;
    if due.is_empty() {
        return Ok(false);
    }
    let due = mine(work, &conn, &store, due)?;
    if due.is_empty() {
        return Ok(false);
    }
    let (on_disk, on_tape): (Vec<S3Object>, Vec<S3Object>) =
        (due.into_iter()).partition(|o| o.released_ns.is_none() || o.job_id.is_none());
    for o in &on_disk {
        restores::from_disk(&conn, &store, o)?;
    }
    let mut placed = Vec::new();
    for o in on_tape {
        match restores::on_tape(&conn, o.clone())? {
            Some(p) => placed.push(p),
            None => {
                warn!(
                    object = o.id,
                    job = ?o.job_id,
                    "S3 restore: its job has no entry of it; the restore is given up"
                );
                restores::failed(&conn, &o)?;
            }
        }
    }
    let started = start_readings(work, settings.order, placed, running);
    Ok(started || !on_disk.is_empty())
}

/// Starts a reading of `placed` on each drive free now, leaving out the
/// objects on a cartridge a running reading reads (they wait for it to end);
/// whether it started one.
fn start_readings(
    work: &Arc<Work>,
    order: Order,
    placed: Vec<restores::OnTape>,
    running: &Readings,
) -> bool {
    let mut r = lock(running);
    let placed: Vec<restores::OnTape> = (placed.into_iter())
        .filter(|p| !p.cartridges.iter().any(|c| r.cartridges.contains(c)))
        .collect();
    // Objects asked one by one, in the order asked, are read by one reading
    // at a time: the yardstick of the planned order.
    let free = match order {
        Order::Asked if !r.objects.is_empty() || r.starting > 0 => 0,
        Order::Asked => 1,
        Order::Planned | Order::Block => work.drive_pool.free().saturating_sub(r.starting),
    };
    if placed.is_empty() || free == 0 {
        return false;
    }
    let mut started = false;
    for reading in restores::readings(placed, free) {
        for p in &reading {
            r.objects.insert(p.object.id);
            r.cartridges.extend(p.cartridges.iter().cloned());
        }
        r.starting += 1;
        let (w, mine) = (Arc::clone(work), Arc::clone(running));
        let ids: Vec<i64> = reading.iter().map(|p| p.object.id).collect();
        let cartridges: Vec<String> = (reading.iter())
            .flat_map(|p| p.cartridges.iter().cloned())
            .collect();
        let spawned = std::thread::Builder::new()
            .name("s3-reading".into())
            .spawn(move || {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    reading_on_a_drive(&w, &mine, (&reading, order))
                }));
                let mut g = lock(&mine);
                for id in &ids {
                    g.objects.remove(id);
                }
                for c in &cartridges {
                    g.cartridges.remove(c);
                }
                drop(g);
                match r {
                    // The restores stay asked: read again at the next start.
                    Ok(Ok(())) | Ok(Err(TapeError::Stopping)) => {}
                    Ok(Err(e)) => warn!("S3 restore: {e}"),
                    Err(panic) => warn!(
                        "S3 restore: panicked: {}",
                        crate::writer::panic_message(&panic)
                    ),
                }
            });
        match spawned {
            Ok(_) => started = true,
            Err(e) => {
                warn!("S3 restore: start a reading: {e}");
                r.starting -= 1;
            }
        }
    }
    started
}

/// One reading of `reading`, shown in the queue: it waits for its place and a
/// free drive, reads, and keeps each whole object in the restore cache.
fn reading_on_a_drive(
    work: &Work,
    running: &Readings,
    (reading, order): (&[restores::OnTape], Order),
) -> Result<(), TapeError> {
    let mut starting = Some(Starting(running));
    let entry = work.queue.add(CLIENT, "s3-restore", "S3 restores");
    crate::admission::enter_scheduled(work, entry, CLIENT);
    let _reading = work.metrics.s3_reading(reading.len());
    let r = Store::open(&work.home)
        .map_err(TapeError::from)
        .and_then(|store| read(work, &store, (reading, order), &mut starting));
    drop(starting);
    work.queue
        .ended(entry, r.as_ref().err().map(ToString::to_string));
    let (done, failed) = r?;
    info!(objects = done, failed, "S3 restores read");
    Ok(())
}

/// A reading counted as starting until it holds a drive (or ends).
struct Starting<'a>(&'a Readings);

impl Drop for Starting<'_> {
    fn drop(&mut self) {
        let mut r = lock(self.0);
        r.starting = r.starting.saturating_sub(1);
    }
}

/// The restores of `due` this server can serve: all of them, but on a site of
/// several servers only those whose data file is on its disk or whose job's
/// cartridges are all in its library (the others are the other servers').
fn mine(
    work: &Work,
    conn: &Conn,
    store: &Store,
    due: Vec<S3Object>,
) -> Result<Vec<S3Object>, TapeError> {
    let Some(site) = &work.site else {
        return Ok(due);
    };
    let mut out = Vec::new();
    for o in due {
        let here = match (o.released_ns, o.job_id) {
            (None, _) | (_, None) => store.path(&o.file).exists(),
            (Some(_), Some(job)) => {
                (restores::cartridges(conn, job)?.iter()).all(|b| site.member.barcodes.contains(b))
            }
        };
        if here {
            out.push(o);
        }
    }
    Ok(out)
}

/// Reads the objects `asked` from tape in `order` on a free drive (planned:
/// each cartridge mounted once, its files in the order its drive's model says
/// is fastest) into a scratch folder of the S3 stage, then keeps each whole
/// one in the restore cache; how many were kept and how many failed.
fn read(
    work: &Work,
    store: &Store,
    (asked, order): (&[restores::OnTape], Order),
    starting: &mut Option<Starting<'_>>,
) -> Result<(u64, u64), TapeError> {
    let drive = (work.drive_pool.wait_for_one(|| work.draining())).ok_or(TapeError::Stopping)?;
    starting.take();
    let home = work.drive_pool.enter(&work.home)?;
    let scratch = store.scratch()?;
    let mut files: BTreeMap<i64, Vec<Vec<u8>>> = BTreeMap::new();
    let mut one_by_one: Vec<(i64, Vec<u8>)> = Vec::new();
    for p in asked {
        if let Some(job) = p.object.job_id {
            files.entry(job).or_default().push(p.path.clone());
            one_by_one.push((job, p.path.clone()));
        }
    }
    let opts = RestoreOptions {
        to: scratch.path().to_path_buf(),
        drive: drive.indexes.first().copied(),
        samples_as: Some("s3-restore".into()),
        order: match order {
            Order::Block => ReadOrder::Block,
            Order::Planned | Order::Asked => ReadOrder::Planned,
        },
        ..RestoreOptions::default()
    };
    let began = Instant::now();
    let report = match order {
        Order::Asked => tapeloom_engine::restore_files_in_order(&home, &one_by_one, &opts)?,
        Order::Planned | Order::Block => tapeloom_engine::restore_files(&home, &files, &opts)?,
    };
    for (path, why) in &report.errors {
        warn!("S3 restore: {path}: {why}");
    }
    let mut cartridges: Vec<&str> = (asked.iter())
        .flat_map(|p| p.cartridges.iter().map(String::as_str))
        .collect();
    cartridges.sort_unstable();
    cartridges.dedup();
    // One line a benchmark can read: the drive and cartridges read, when the
    // reading began and how long it took (milliseconds of the server's run),
    // what it took on the drives' model (-1 when the drives have none) and what
    // its plan predicted.
    info!(
        objects = asked.len(),
        order = ?order,
        drive = drive.indexes.first().copied().unwrap_or(0),
        cartridges = %cartridges.join(","),
        began_ms = began.duration_since(*STARTED).as_millis() as u64,
        took_ms = began.elapsed().as_millis() as u64,
        loads = report.loads,
        mounts = report.mounts,
        reordered = report.reordered,
        modeled_seconds = report.modeled_seconds.unwrap_or(-1.0),
        planned_seconds = report.planned_seconds.unwrap_or(-1.0),
        "S3 restores: one reading"
    );
    drop(home);
    drop(drive);
    let (mut kept, mut failed) = (0, 0);
    let conn = Conn::open(&work.home)?;
    for p in asked {
        let path = scratch.path().join(std::ffi::OsStr::from_bytes(&p.path));
        match restores::finished(&conn, store, &p.object, &path)? {
            true => kept += 1,
            false => failed += 1,
        }
    }
    Ok((kept, failed))
}
