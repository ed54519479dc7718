//! The restorer: the sink the job reader feeds decoded records to. It places each
//! wanted entry under the restore root, writes file data (small files through the
//! writer threads), checks each file's data (its length against its entry's, its
//! CRC against its `FileEnd`'s, its entry against the catalog's row) before the
//! file takes its name, and sets directories' metadata last. Every path of a
//! restore (local, per path, a set's, from the stage, handed from a server) ends
//! its entries here, so each one that is not restored whole is named.

use crate::decode::Sink;
use crate::error::Result;
use crate::restore::overwrite::{Overwrite, Verdict};
use crate::restore::place::{Placer, TempFile};
use crate::restore::writers::{Writers, SMALL};
use crate::restore::RestoreReport;
use crate::Expect;
use std::collections::{HashMap, HashSet};
use std::os::unix::fs::FileExt;
use tapeloom_format::{Entry, EntryType, Event, FileEnd, Kind};

/// Threads writing small files.
const WRITERS: usize = 3;

pub(crate) struct Open {
    entry: Entry,
    wanted: bool,
    /// A large file, written under its temporary name as its data comes.
    file: Option<TempFile>,
    /// A small file's data, gathered for the writers.
    buf: Option<Vec<u8>>,
    crc: u32,
    /// Bytes of its `Data` record taken so far.
    stored: u64,
    failed: Option<String>,
}

/// The entries a restore expects to meet on tape, by job and path: those it
/// wants that the catalog lists. An entry met is taken out; those left at the
/// end were never met, and are named. A job without a map expects nothing
/// known.
pub type Expected = HashMap<i64, HashMap<Vec<u8>, Expect>>;

/// Why a file's data on tape is not as long as its entry says: `stored` bytes
/// where its size (or its sparse extents) give another length.
pub fn length_mismatch(e: &Entry, stored: u64) -> String {
    match e.sparse {
        None => format!(
            "its data on tape is {stored} bytes, its entry's size {} bytes",
            e.size
        ),
        Some(_) => format!(
            "its data on tape is {stored} bytes, its entry's extents {} bytes",
            e.stored_len()
        ),
    }
}

/// What a set's point-in-time restore takes from each job, by job id.
#[derive(Debug, Default)]
pub struct SetWant {
    /// Entries placed from the job, with their data.
    pub data: HashMap<i64, HashSet<Vec<u8>>>,
    /// Metadata-only entries whose metadata goes over data placed from an earlier
    /// job.
    pub meta: HashMap<i64, HashSet<Vec<u8>>>,
}

pub struct Restorer {
    pub(crate) placer: Placer,
    pub want: Option<HashSet<Vec<u8>>>,
    /// Entries the job left out, though their records may be partly on tape
    /// (the engine's `plan::left_out`).
    pub left_out: HashSet<Vec<u8>>,
    /// Entries whose data is being read, by lane, job and stream.
    pub(crate) open: HashMap<(usize, i64, u16), Open>,
    /// The job whose records are being fed (set by the reader before each feed).
    pub job: i64,
    /// The decoding the records come from (set with `job`): drives that read
    /// parts of one stream at once each keep their own entries open.
    pub lane: usize,
    /// A set's point-in-time restore: what each job gives it.
    pub set: Option<SetWant>,
    /// A set's hard links, made once every file is placed (their targets may come
    /// from later jobs than they do).
    pub(crate) links: Vec<Entry>,
    /// A set's newer metadata of files whose data came from an earlier job, set
    /// once every file is placed.
    pub(crate) meta: Vec<Entry>,
    /// Metadata-only files a one-job restore left out (hard links to them go too).
    pub(crate) meta_left_out: HashSet<Vec<u8>>,
    pub(crate) dirs: Vec<Entry>,
    pub(crate) report: RestoreReport<()>,
    /// Small-file writers; taken when the reading is done.
    pub(crate) writers: Option<Writers>,
    /// Data bytes restored per stream, for the samples.
    pub per_stream: HashMap<u16, u64>,
    /// The entries the restore expects to meet, as the catalog lists them.
    pub expected: Expected,
    /// Why records of a stream did not decode, by job and stream (the first
    /// reason): said of the entries of that stream never met.
    damaged: HashMap<(i64, u16), String>,
}

impl Restorer {
    /// A restorer placing entries under `to`, over what is there by `overwrite`;
    /// `want` as the engine's `plan::select` gives it.
    pub fn new(
        to: &std::path::Path,
        overwrite: Overwrite,
        want: Option<HashSet<Vec<u8>>>,
    ) -> Result<Self> {
        Ok(Restorer {
            placer: Placer::new(to, overwrite)?,
            want,
            left_out: HashSet::new(),
            open: HashMap::new(),
            job: 0,
            lane: 0,
            set: None,
            links: Vec::new(),
            meta: Vec::new(),
            meta_left_out: HashSet::new(),
            dirs: Vec::new(),
            report: RestoreReport::default(),
            writers: Some(Writers::new(WRITERS)),
            per_stream: HashMap::new(),
            expected: Expected::new(),
            damaged: HashMap::new(),
        })
    }

    pub fn wanted(&self, path: &[u8]) -> bool {
        if let Some(set) = &self.set {
            return set.data.get(&self.job).is_some_and(|w| w.contains(path));
        }
        !self.left_out.contains(path) && self.want.as_ref().is_none_or(|w| w.contains(path))
    }

    /// Takes an entry that holds metadata alone (its data is in an earlier job): a
    /// set's restore applies it at the end; a one-job restore leaves it out and
    /// counts it.
    fn meta_only(&mut self, e: Entry) {
        match &self.set {
            Some(set) if set.meta.get(&self.job).is_some_and(|w| w.contains(&e.path)) => {
                self.meta.push(e);
            }
            Some(_) => {}
            None if self.wanted(&e.path) => {
                self.report.meta_only += 1;
                self.meta_left_out.insert(e.path);
            }
            None => {}
        }
    }

    /// Makes a set's hard links and applies its newer metadata, once the files they
    /// need are placed (the writers done).
    pub fn finish_set(&mut self) {
        for e in std::mem::take(&mut self.links) {
            let placed = match self.placer.check(&e) {
                Ok(Verdict::Place) => self.placer.create(&e).map(|_| true),
                Ok(Verdict::Same) => Ok(false),
                Ok(Verdict::Keep(why)) => {
                    (self.report.skipped).push((crate::display_path(&e.path), why));
                    Ok(false)
                }
                Err(err) => Err(err),
            };
            match placed {
                Ok(true) => self.report.files += 1,
                Ok(false) => {}
                Err(err) => self.fail(&e.path, err.to_string()),
            }
        }
        for e in std::mem::take(&mut self.meta) {
            if let Err(err) = self.placer.replace_meta(&e) {
                self.fail(&e.path, err.to_string());
            }
        }
    }

    pub fn fail(&mut self, path: &[u8], why: String) {
        self.report.errors.push((crate::display_path(path), why));
    }

    /// Names every entry the restore expected and never met on tape (its entry
    /// did not decode, or was not where the catalog has it), once the reading
    /// is done.
    pub fn unmet(&mut self) {
        let mut left: Vec<(i64, Vec<u8>, Expect)> = std::mem::take(&mut self.expected)
            .into_iter()
            .flat_map(|(job, rows)| rows.into_iter().map(move |(p, x)| (job, p, x)))
            .collect();
        left.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        for (job, path, x) in left {
            let why = match self.damaged.get(&(job, x.stream)) {
                Some(d) => format!(
                    "its entry was not found on tape (its stream was damaged before it: {d})"
                ),
                None => "its entry was not found on tape".to_string(),
            };
            self.fail(&path, why);
        }
    }

    fn close(&mut self, stream: u16, end: Option<FileEnd>) {
        let Some(mut o) = self.open.remove(&(self.lane, self.job, stream)) else {
            return;
        };
        if !o.wanted {
            return;
        }
        if o.failed.is_none() {
            match end {
                None if o.entry.has_data() => o.failed = Some("its data ends early".into()),
                _ if o.stored != o.entry.stored_len() => {
                    o.failed = Some(length_mismatch(&o.entry, o.stored))
                }
                Some(fe) if fe.crc != o.crc => {
                    o.failed = Some(format!(
                        "checksum mismatch (tape says {:08x}, data gives {:08x})",
                        fe.crc, o.crc
                    ))
                }
                _ => {}
            }
        }
        if o.failed.is_none() {
            if let Some(data) = o.buf.take() {
                let p = self.placer.path_of(&o.entry.path);
                let sent = match &self.writers {
                    Some(w) => w.submit(p, o.entry.clone(), data),
                    None => Err("the writers are closed".into()),
                };
                if let Err(e) = sent {
                    self.fail(&o.entry.path, e);
                }
                return;
            }
        }
        let file = o.file.take();
        match o.failed {
            Some(why) => {
                // Its temporary file goes with it (dropped); whatever was at its
                // name before stays as it was.
                drop(file);
                self.fail(&o.entry.path, why);
            }
            None => {
                let done = match file {
                    Some(t) => self.placer.place(t, &o.entry),
                    None => self.placer.finish(&o.entry),
                };
                if let Err(e) = done {
                    self.fail(&o.entry.path, e.to_string());
                    return;
                }
                self.report.files += 1;
                self.report.bytes += o.entry.size;
            }
        }
    }

    /// Takes entry `e`, listed by the catalog as something else (`why`): it is
    /// not placed, and is named once its data, if any, is passed over.
    fn refuse(&mut self, stream: u16, e: Entry, why: String) {
        if !e.has_data() {
            return self.fail(&e.path, why);
        }
        let o = Open {
            entry: e,
            wanted: true,
            file: None,
            buf: None,
            crc: 0,
            stored: 0,
            failed: Some(why),
        };
        self.open.insert((self.lane, self.job, stream), o);
    }

    fn entry(&mut self, stream: u16, e: Entry) {
        if self.open.contains_key(&(self.lane, self.job, stream)) {
            self.lost(stream, "the entry after it began before its data ended");
        }
        let listed = (self.expected.get_mut(&self.job)).and_then(|rows| rows.remove(&e.path));
        if let Some(why) = listed.and_then(|x| x.differs(&e)) {
            return self.refuse(stream, e, why);
        }
        if e.meta_only {
            return self.meta_only(e);
        }
        let mut wanted = self.wanted(&e.path);
        if wanted && e.kind == EntryType::HardLink {
            if self.set.is_some() {
                return self.links.push(e);
            }
            if self.meta_left_out.contains(&e.link) {
                // Its target's data is in an earlier job: it goes with it.
                self.report.meta_only += 1;
                return;
            }
        }
        let mut failed = None;
        if wanted && e.kind != EntryType::Socket {
            if e.kind == EntryType::HardLink {
                // Its target may still be with the writers.
                if let Some(w) = &self.writers {
                    w.wait();
                }
            }
            match self.placer.check(&e) {
                Ok(Verdict::Place) => {}
                Ok(Verdict::Same) => {
                    wanted = false;
                    self.report.files += 1;
                    self.report.unchanged += 1;
                }
                Ok(Verdict::Keep(why)) => {
                    wanted = false;
                    (self.report.skipped).push((crate::display_path(&e.path), why));
                }
                Err(err) => failed = Some(err.to_string()),
            }
        }
        let mut o = Open {
            entry: e,
            wanted,
            file: None,
            buf: None,
            crc: 0,
            stored: 0,
            failed,
        };
        let small =
            o.entry.kind == EntryType::Regular && o.entry.sparse.is_none() && o.entry.size <= SMALL;
        if wanted && o.failed.is_none() {
            if small {
                // `check` made its parents.
                o.buf = Some(Vec::with_capacity(o.entry.size as usize));
            } else {
                match self.placer.create(&o.entry) {
                    Ok(f) => o.file = f,
                    Err(err) => o.failed = Some(err.to_string()),
                }
            }
        }
        if o.entry.has_data() {
            self.open.insert((self.lane, self.job, stream), o);
        } else if wanted {
            if let Some(why) = o.failed {
                self.fail(&o.entry.path, why);
            } else if o.entry.kind == EntryType::Directory {
                self.report.files += 1;
                self.dirs.push(o.entry);
            } else {
                match self.placer.finish(&o.entry) {
                    Ok(()) => self.report.files += 1,
                    Err(err) => self.fail(&o.entry.path, err.to_string()),
                }
            }
        }
    }

    /// A `Data` record of `len` bytes begins: a file whose entry gives another
    /// length fails before any of it is written.
    fn data_start(&mut self, stream: u16, len: u64) {
        let Some(o) = self.open.get_mut(&(self.lane, self.job, stream)) else {
            return;
        };
        let total = o.stored.checked_add(len);
        if o.wanted && o.failed.is_none() && total != Some(o.entry.stored_len()) {
            o.failed = Some(length_mismatch(&o.entry, total.unwrap_or(u64::MAX)));
        }
    }

    fn data(&mut self, stream: u16, chunk: &[u8]) {
        let Some(o) = self.open.get_mut(&(self.lane, self.job, stream)) else {
            return;
        };
        if !o.wanted || o.failed.is_some() {
            return;
        }
        let n = chunk.len() as u64;
        if o.stored.saturating_add(n) > o.entry.stored_len() {
            o.failed = Some(length_mismatch(&o.entry, o.stored.saturating_add(n)));
            return;
        }
        *self.per_stream.entry(stream).or_default() += n;
        o.crc = crc32c::crc32c_append(o.crc, chunk);
        if let Some(buf) = o.buf.as_mut() {
            buf.extend_from_slice(chunk);
            o.stored += n;
            return;
        }
        let Some(f) = o.file.as_ref().map(TempFile::file) else {
            o.stored += n;
            return;
        };
        // Map stored bytes to file offsets: dense files in order, sparse ones by extent.
        let mut rest = chunk;
        while !rest.is_empty() {
            let (off, room) = match &o.entry.sparse {
                None => (o.stored, u64::MAX),
                Some(ext) => {
                    let mut skip = o.stored;
                    let mut found = None;
                    for &(eo, el) in ext {
                        if skip < el {
                            found = Some((eo + skip, el - skip));
                            break;
                        }
                        skip -= el;
                    }
                    match found {
                        Some(x) => x,
                        None => {
                            o.failed = Some("more data than its extents hold".into());
                            return;
                        }
                    }
                }
            };
            let n = (rest.len() as u64).min(room) as usize;
            if let Err(e) = f.write_all_at(&rest[..n], off) {
                o.failed = Some(format!("write failed: {e}"));
                return;
            }
            o.stored += n as u64;
            rest = &rest[n..];
        }
    }

    /// Ends the placing once the reading is done: the writers' files, then a
    /// set's hard links and newer metadata, then directories' metadata, then the
    /// entries never met. Returns what was placed, each error named once, and
    /// the data bytes restored per stream.
    pub fn finish(mut self) -> (RestoreReport<()>, HashMap<u16, u64>) {
        if let Some(w) = self.writers.take() {
            let (files, bytes, errors) = w.finish();
            self.report.files += files;
            self.report.bytes += bytes;
            self.report.errors.extend(errors);
        }
        self.finish_set();
        self.finish_dirs();
        self.unmet();
        let per_stream = std::mem::take(&mut self.per_stream);
        let mut report = std::mem::take(&mut self.report);
        // A file named for a bad block may also have failed its checksum: name it once.
        let mut seen = HashSet::new();
        report.errors.retain(|e| seen.insert(e.0.clone()));
        (report, per_stream)
    }

    pub fn finish_dirs(&mut self) {
        // Deepest first, so setting a parent's mtime comes after its children changed it.
        let mut dirs = std::mem::take(&mut self.dirs);
        dirs.sort_by_key(|d| {
            std::cmp::Reverse(
                d.path.iter().filter(|&&b| b == b'/').count() + usize::from(d.path != b"."),
            )
        });
        for d in dirs {
            if let Err(e) = self.placer.finish(&d) {
                self.fail(&d.path, e.to_string());
            }
        }
    }
}

impl Sink for Restorer {
    fn event(&mut self, stream: u16, ev: Event<'_>, _at: (u32, u64)) -> Result<()> {
        match ev {
            Event::Record {
                kind: Kind::Entry,
                body,
            } => match Entry::decode(body) {
                Ok(e) => self.entry(stream, e),
                Err(err) => {
                    self.lost(stream, &err.to_string());
                    self.fail(b"?", format!("an entry on tape is refused: {err}"));
                }
            },
            Event::Record {
                kind: Kind::FileEnd,
                body,
            } => {
                let fe = FileEnd::decode(body).ok();
                self.close(stream, fe);
            }
            Event::DataStart { len } => self.data_start(stream, len),
            Event::Data(chunk) => self.data(stream, chunk),
            _ => {}
        }
        Ok(())
    }

    fn lost(&mut self, stream: u16, why: &str) {
        (self.damaged)
            .entry((self.job, stream))
            .or_insert_with(|| why.to_string());
        if let Some(o) = self.open.get_mut(&(self.lane, self.job, stream)) {
            if o.failed.is_none() {
                o.failed = Some(why.to_string());
            }
            self.close(stream, None);
        }
    }
}
