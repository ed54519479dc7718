//! Objects to tape: which wait, gathered into batches per bucket ([`due`]);
//! the backup that archives a batch ([`archive_options`]); what the catalog
//! records once its job ends ([`archived`]); and the release of the disk copy
//! of an object kept on tape only ([`releasable`], [`release`]).
//!
//! A batch is one job of the bucket's pool (named and in the set `s3-BUCKET`),
//! whose source is a folder of second names (hard links) of the batch's data
//! files ([`gather`]): many small objects are one stream of blocks, not a tape file each,
//! and an object is one contiguous file of its job, whatever parts it was
//! uploaded in. The job follows its pool's rules as every job does (its key,
//! its copy pool, its retention).
//!
//! A GLACIER or DEEP_ARCHIVE object's disk copy goes only once its job was read
//! back whole and every copy its pool asks for is on tape, as an HSM release's.

use super::{now_ns, Bucket, Result, S3Object, Store};
use crate::access::Catalogued;
use std::collections::BTreeMap;
use tapeloom_catalog::{FileRow, JobState};
use tapeloom_engine::{BackupOptions, BackupReport, Via};

/// The most objects one look at the catalog considers for batches.
const LOOK: usize = 200_000;

/// A batch of one bucket's objects due for tape.
#[derive(Debug, Clone)]
pub struct Batch {
    /// The bucket.
    pub bucket: Bucket,
    /// Its objects, oldest first.
    pub objects: Vec<S3Object>,
}

impl Batch {
    /// Its bytes.
    pub fn bytes(&self) -> u64 {
        self.objects.iter().map(|o| o.size).sum()
    }
}

/// The batches due for tape now: per bucket, its waiting objects cut into
/// batches of at most its count and size; a full batch is due, and so is the
/// last one once its oldest object has waited the bucket's age.
pub fn due(at: &impl Catalogued) -> Result<Vec<Batch>> {
    let cat = at.ops_catalog();
    let now = now_ns()?;
    let buckets: BTreeMap<String, Bucket> = (cat.buckets()?.into_iter())
        .map(|b| (b.name.clone(), b))
        .collect();
    let mut waiting: BTreeMap<String, Vec<S3Object>> = BTreeMap::new();
    for o in cat.objects_to_archive(LOOK)? {
        waiting.entry(o.bucket.clone()).or_default().push(o);
    }
    let mut out = Vec::new();
    for (name, objects) in waiting {
        let Some(bucket) = buckets.get(&name) else {
            continue;
        };
        out.extend(cut(bucket, objects, now));
    }
    Ok(out)
}

/// `objects` of `bucket` cut into its batches, those due at `now`.
fn cut(bucket: &Bucket, objects: Vec<S3Object>, now: i64) -> Vec<Batch> {
    let b = bucket.batching;
    let mut batches = Vec::new();
    let mut open = Batch {
        bucket: bucket.clone(),
        objects: Vec::new(),
    };
    let mut bytes = 0u64;
    for o in objects {
        let over = bytes.saturating_add(o.size) > b.bytes || open.objects.len() as u64 >= b.objects;
        if over && !open.objects.is_empty() {
            let full = std::mem::take(&mut open.objects);
            batches.push(Batch {
                bucket: bucket.clone(),
                objects: full,
            });
            bytes = 0;
        }
        bytes = bytes.saturating_add(o.size);
        open.objects.push(o);
    }
    let age_ns = b.age_s.saturating_mul(1_000_000_000);
    let full = bytes >= b.bytes || open.objects.len() as u64 >= b.objects;
    let old = (open.objects.first()).is_some_and(|o| now.saturating_sub(o.created_ns) >= age_ns);
    if !open.objects.is_empty() && (full || old) {
        batches.push(open);
    }
    batches
}

/// The name, and the set, of the jobs that archive bucket `bucket`'s objects.
pub fn job_name(bucket: &str) -> String {
    format!("s3-{bucket}")
}

/// How the batches are spread over drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spread {
    /// The most drives one batch's job takes; none: as many as are free.
    pub drives: Option<usize>,
    /// The least bytes each stream of a batch holds: a batch is cut into as
    /// many streams as it holds this many bytes, at most one per free drive.
    pub stream_bytes: u64,
}

impl Default for Spread {
    /// Every free drive, once each stream holds 8 GiB: a drive that writes
    /// 300 MB/s (LTO-9) takes half a minute over it, longer than a cartridge
    /// takes to load, so that a second drive ends the batch sooner.
    fn default() -> Spread {
        Spread {
            drives: None,
            stream_bytes: 8 << 30,
        }
    }
}

/// The streams `batch` is written as when `free` drives are free, each on a
/// drive of its own: one per `spread.stream_bytes` of it, at most one per
/// object, per free drive and per drive `spread` allows, and at least one.
pub fn streams(batch: &Batch, free: usize, spread: &Spread) -> usize {
    let by_size = batch.bytes() / spread.stream_bytes.max(1);
    let by_size = usize::try_from(by_size).unwrap_or(usize::MAX);
    (free.min(spread.drives.unwrap_or(usize::MAX)))
        .min(batch.objects.len())
        .min(by_size)
        .max(1)
}

/// The folder a batch's job backs up, and its sources: a second name of each
/// data file of `batch` that is still there (an object deleted since is left
/// out), so that each object's entry in the job is its data file's name (in
/// its stream's folder when there are several, [`entry`]), and a delete while
/// the job runs does not cut it. With `streams` over one, the objects are
/// dealt to that many folders, the largest first to the one with the fewest
/// bytes, each the source of a stream. `batch` keeps only the objects linked.
pub fn gather(
    store: &Store,
    batch: &mut Batch,
    streams: usize,
) -> Result<(tempfile::TempDir, Vec<std::path::PathBuf>)> {
    let mut folders: Vec<(u64, Vec<&str>)> = vec![(0, Vec::new()); streams.max(1)];
    let mut by_size: Vec<&S3Object> = batch.objects.iter().collect();
    by_size.sort_by(|a, b| b.size.cmp(&a.size).then(a.id.cmp(&b.id)));
    for o in by_size {
        if let Some(least) = folders.iter_mut().min_by_key(|f| f.0) {
            least.0 += o.size;
            least.1.push(o.file.as_str());
        }
    }
    let folders: Vec<Vec<&str>> = folders.into_iter().map(|f| f.1).collect();
    let (dir, sources, linked) = store.batch(&folders)?;
    let linked: std::collections::HashSet<String> = linked.into_iter().collect();
    batch.objects.retain(|o| linked.contains(&o.file));
    Ok((dir, sources))
}

/// The backup that archives `batch`: a job of its bucket's pool, named and in
/// the set `s3-BUCKET`, of the batch's folder ([`gather`]), through the disk
/// stage when the home has one.
pub fn archive_options(at: &impl Catalogued, batch: &Batch) -> Result<BackupOptions> {
    let via = match at.ops_catalog().stages()?.is_empty() {
        true => Via::Direct,
        false => Via::Stage,
    };
    Ok(BackupOptions {
        name: job_name(&batch.bucket.name),
        pool: Some(batch.bucket.pool.clone()),
        set: Some(job_name(&batch.bucket.name)),
        via,
        ..BackupOptions::default()
    })
}

/// The entry of data file `file` in job `job`: its path in the job and its
/// row; none when the job has no entry of it. A batch archived as one stream
/// names each file by its own name; one spread over several streams names it
/// in its stream's folder (`STREAM/FILE`).
pub fn entry(at: &impl Catalogued, job: i64, file: &str) -> Result<Option<(Vec<u8>, FileRow)>> {
    let cat = at.ops_catalog();
    if let Some(row) = cat.file(job, file.as_bytes())? {
        return Ok(Some((file.as_bytes().to_vec(), row)));
    }
    let streams = cat.streams(job)?;
    if streams.len() < 2 {
        return Ok(None);
    }
    for s in streams {
        let path = format!("{}/{file}", s.name).into_bytes();
        if let Some(row) = cat.file(job, &path)? {
            return Ok(Some((path, row)));
        }
    }
    Ok(None)
}

/// What the catalog recorded of a batch's job.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Archived {
    /// The objects the job holds whole, now recorded as on tape.
    pub objects: u64,
    /// Their bytes.
    pub bytes: u64,
    /// The objects it does not hold (deleted while it ran, or unreadable); they
    /// wait for the next batch when they are still live.
    pub missed: u64,
}

/// Records each object of `batch` that the job of `report` holds whole (an
/// entry of its data file's name and size) as on tape in that job. Nothing is
/// recorded of a job that did not end ok or partial.
pub fn archived(at: &impl Catalogued, batch: &Batch, report: &BackupReport) -> Result<Archived> {
    let mut out = Archived::default();
    if !crate::hsm::job_ended(report) {
        out.missed = batch.objects.len() as u64;
        return Ok(out);
    }
    held(at, report.job_id, &batch.objects, out)
}

/// Records each of `objects` that job `job` holds whole as on tape in it,
/// counting them in `out` (the others as missed).
fn held(
    at: &impl Catalogued,
    job: i64,
    objects: &[S3Object],
    mut out: Archived,
) -> Result<Archived> {
    let mut ids = Vec::new();
    for o in objects {
        let whole =
            (entry(at, job, &o.file)?).is_some_and(|(_, row)| row.size == o.size && !row.meta_only);
        match whole {
            true => {
                ids.push(o.id);
                out.objects += 1;
                out.bytes += o.size;
            }
            false => out.missed += 1,
        }
    }
    at.ops_catalog().objects_archived(&ids, job)?;
    Ok(out)
}

/// What became of a job a stopped server left unfinished, once resumed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Left {
    /// Not an archive job of a bucket there still is.
    NotMine,
    /// An archive job of this bucket that ended with what it holds (ok or
    /// partial): its objects may be adopted ([`adopt`]).
    Ended(String),
    /// An archive job of this bucket that failed: it holds nothing to adopt.
    Failed(String),
}

/// What became of job `job`, which a stopped server left unfinished and which
/// was resumed since.
pub fn left(at: &impl Catalogued, job: i64) -> Result<Left> {
    let cat = at.ops_catalog();
    let Some(j) = cat.job(job)? else {
        return Ok(Left::NotMine);
    };
    let bucket = (cat.buckets()?.into_iter())
        .find(|b| job_name(&b.name) == j.name && j.set == j.name)
        .map(|b| b.name);
    Ok(match (bucket, j.status) {
        (None, _) => Left::NotMine,
        (Some(b), JobState::Ok | JobState::Partial) => Left::Ended(b),
        (Some(b), _) => Left::Failed(b),
    })
}

/// Adopts what job `job`, an archive job of bucket `bucket` that a stopped
/// server left and that was resumed and read back since, holds: each object of
/// the bucket still waiting for tape that the job holds whole is recorded as on
/// tape in it, so that it is not archived again. The others wait for the next
/// batch.
pub fn adopt(at: &impl Catalogued, (job, bucket): (i64, &str)) -> Result<Archived> {
    let waiting: Vec<S3Object> = (at.ops_catalog().objects_to_archive(LOOK)?.into_iter())
        .filter(|o| o.bucket == bucket)
        .collect();
    held(at, job, &waiting, Archived::default())
}

/// The archive jobs whose objects wait for a read-back that never ran (a
/// server stopped between writing the job and reading it back): their disk
/// copies go only once the job has read back whole.
pub fn unread(at: &impl Catalogued) -> Result<Vec<i64>> {
    let cat = at.ops_catalog();
    let mut jobs: Vec<i64> = (cat.objects_to_release(10_000)?.iter())
        .filter_map(|o| o.job_id)
        .collect();
    jobs.sort_unstable();
    jobs.dedup();
    let mut out = Vec::new();
    for job in jobs {
        if cat.last_verify(job)?.is_none() {
            out.push(job);
        }
    }
    Ok(out)
}

/// The archived objects (at most `limit`) whose disk copy may go now: of a
/// class kept on tape only, their job read back whole and every copy their
/// pool asks for on tape.
pub fn releasable(at: &impl Catalogued, limit: usize) -> Result<Vec<S3Object>> {
    let cat = at.ops_catalog();
    let mut ok_jobs: BTreeMap<i64, bool> = BTreeMap::new();
    let mut out = Vec::new();
    for o in cat.objects_to_release(limit)? {
        let Some(job) = o.job_id else { continue };
        let ok = match ok_jobs.get(&job) {
            Some(ok) => *ok,
            None => {
                let read_back = cat.last_verify(job)?.is_some_and(|v| v.ok);
                let ok = read_back && crate::copies::missing(cat, job)?.is_empty();
                ok_jobs.insert(job, ok);
                ok
            }
        };
        if ok {
            out.push(o);
        }
    }
    Ok(out)
}

/// Releases object `o`'s disk copy: recorded first, then its data file removed
/// (a server killed in between leaves a file that the sweep at its next start
/// removes). False when the object was deleted or released meanwhile.
pub fn release(at: &impl Catalogued, store: &Store, o: &S3Object) -> Result<bool> {
    if !at.ops_catalog().release_object(o.id, now_ns()?)? {
        return Ok(false);
    }
    store.remove(&o.file)?;
    Ok(true)
}

/// Removes the data files that objects deleted or replaced through another
/// server of the site left on this server's disk; how many objects' files
/// were removed.
pub fn remove_left(at: &impl Catalogued, store: &Store) -> Result<usize> {
    let cat = at.ops_catalog();
    let left = cat.left_files()?;
    for (id, files) in &left {
        for f in files {
            store.remove(f)?;
        }
        cat.left_files_removed(*id)?;
    }
    Ok(left.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tapeloom_catalog::Batching;

    fn object(id: i64, size: u64, created_ns: i64) -> S3Object {
        S3Object {
            id,
            bucket: "b".into(),
            size,
            created_ns,
            ..S3Object::default()
        }
    }

    #[test]
    fn a_batch_takes_a_drive_per_stream_of_its_size() {
        let bucket = Bucket {
            name: "b".into(),
            pool: "default".into(),
            created_ns: 0,
            batching: Batching {
                age_s: 10,
                objects: 100,
                bytes: 1 << 30,
            },
        };
        let batch = |sizes: &[u64]| Batch {
            bucket: bucket.clone(),
            objects: (sizes.iter().enumerate())
                .map(|(i, s)| object(i as i64, *s, 0))
                .collect(),
        };
        let spread = Spread {
            drives: None,
            stream_bytes: 100,
        };
        // 450 bytes: four streams' worth, as many as drives are free.
        assert_eq!(streams(&batch(&[150, 150, 150]), 2, &spread), 2);
        assert_eq!(streams(&batch(&[150, 150, 150]), 8, &spread), 3);
        assert_eq!(streams(&batch(&[200, 250]), 8, &spread), 2);
        assert_eq!(streams(&batch(&[50; 9]), 8, &spread), 4);
        // Under a stream's bytes, or no drive free: one stream.
        assert_eq!(streams(&batch(&[99]), 8, &spread), 1);
        assert_eq!(streams(&batch(&[500, 500]), 0, &spread), 1);
        // The setting's most drives.
        let two = Spread {
            drives: Some(2),
            ..spread
        };
        assert_eq!(streams(&batch(&[50; 20]), 8, &two), 2);
        assert_eq!(streams(&batch(&[1 << 40]), 8, &Spread::default()), 1);
    }

    #[test]
    fn a_job_written_and_never_read_back_is_named_until_it_is() {
        use std::io::Write;
        let d = tempfile::tempdir().unwrap();
        let home = tapeloom_engine::Home::open(d.path()).unwrap();
        let store = Store::open(d.path()).unwrap();
        super::super::buckets::create(&home, "bkt", None, Batching::default()).unwrap();
        let (file, mut f) = store.create().unwrap();
        f.write_all(b"cold").unwrap();
        store.sync(&f).unwrap();
        let new = super::super::objects::New {
            bucket: "bkt".into(),
            key: b"k".to_vec(),
            size: 4,
            etag: "e".into(),
            class: "GLACIER",
            meta: Default::default(),
            file,
        };
        let o = super::super::objects::put(&home, &store, new).unwrap();
        let cat = home.ops_catalog();
        let job = cat.begin_job(1, "s3-bkt", 1, 262_144, &[]).unwrap();
        assert!(unread(&home).unwrap().is_empty());
        cat.objects_archived(&[o.id], job).unwrap();
        // Written, not read back: named, and its object's disk copy stays.
        assert_eq!(unread(&home).unwrap(), vec![job]);
        assert!(releasable(&home, 10).unwrap().is_empty());
        cat.record_verify(&tapeloom_catalog::LastVerify {
            job_id: job,
            at_ns: 2,
            ok: true,
            blocks: 1,
            bad_blocks: 0,
            how: "s3 archive".into(),
        })
        .unwrap();
        assert!(unread(&home).unwrap().is_empty());
        assert_eq!(releasable(&home, 10).unwrap().len(), 1);
    }

    #[test]
    fn a_batch_closes_on_count_size_or_age() {
        let bucket = Bucket {
            name: "b".into(),
            pool: "default".into(),
            created_ns: 0,
            batching: Batching {
                age_s: 10,
                objects: 3,
                bytes: 100,
            },
        };
        let ids = |bs: &[Batch]| -> Vec<Vec<i64>> {
            bs.iter()
                .map(|b| b.objects.iter().map(|o| o.id).collect())
                .collect()
        };
        let s = 1_000_000_000;
        // Two young objects: nothing is due; once the first is 10 s old, both are.
        let young = vec![object(1, 10, 5 * s), object(2, 10, 6 * s)];
        assert!(cut(&bucket, young.clone(), 14 * s).is_empty());
        assert_eq!(ids(&cut(&bucket, young, 15 * s)), vec![vec![1, 2]]);
        // Seven young objects: two full batches of three; the seventh waits.
        let many: Vec<_> = (1..=7).map(|i| object(i, 1, 100 * s)).collect();
        assert_eq!(
            ids(&cut(&bucket, many, 100 * s)),
            vec![vec![1, 2, 3], vec![4, 5, 6]]
        );
        // Sizes: 60 + 60 is over 100, so each goes alone; a 500-byte object too.
        let big = vec![object(1, 60, 0), object(2, 60, 0), object(3, 500, 0)];
        assert_eq!(ids(&cut(&bucket, big, 0)), vec![vec![1], vec![2], vec![3]]);
    }
}
