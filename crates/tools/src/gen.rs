//! The dataset generator: a tree of directories holding files of power-of-two sizes
//! with data of a chosen compressibility, as HP's HPcreatedata makes for assessing a
//! backup. Everything (names, sizes, bytes and times) follows from the options, so the
//! same options always give the same tree.
//!
//! [`generate`] writes the tree to disk (`tapeloom gen`); [`Generator`] makes the
//! same tree for the engine, which backs up a generator source
//! (`gen:PRESET:SIZE[:SEED]`) from memory through its trait
//! `tapeloom_engine::Generator`.

use crate::error::{io, Error, Result, ToolError};
use crate::pattern::{fill, Noise, Pattern};
use std::fs::{File, FileTimes, OpenOptions};
use std::io::Write;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tapeloom_engine::{GeneratedFile, GeneratedTree};

/// The names [`GenOptions::preset`] knows.
pub const PRESETS: [&str; 2] = ["hp-typical", "small-files"];

/// Files are written through a buffer of at most this many bytes.
const CHUNK: u64 = 1 << 20;
/// 2024-01-01T00:00:00Z in seconds since the Unix epoch: file `i` gets this time plus
/// `i` seconds, directory `k` (in creation order) this time plus `k` seconds.
const BASE_TIME: u64 = 1_704_067_200;
/// Trees with more directories than this are refused.
const MAX_DIRS: u64 = 1_000_000;
/// Spreads file numbers over the seed space.
const SEED_MIX: u64 = 0x9E37_79B9_7F4A_7C15;

/// What to generate.
#[derive(Debug, Clone, PartialEq)]
pub struct GenOptions {
    /// Seed of the data: the same seed gives the same bytes.
    pub seed: u64,
    /// Levels of directories below the root.
    pub depth: u32,
    /// Subdirectories in each directory above the last level.
    pub breadth: u32,
    /// Files in each directory (the root included).
    pub files_per_dir: u32,
    /// Smallest file size in bytes, a power of two.
    pub min: u64,
    /// Largest file size in bytes, a power of two, at least `min`.
    pub max: u64,
    /// How far an LZ-class compressor shrinks the data (1 means incompressible).
    pub ratio: f64,
    /// Stop before the total size would pass this many bytes; see [`Layout`] for how
    /// the files are chosen.
    pub total: Option<u64>,
}

impl GenOptions {
    /// The options of a named preset (see [`PRESETS`]): `hp-typical` (64 KiB to
    /// 64 MiB, 8 files a directory) or `small-files` (4 KiB to 64 KiB, 64 files a
    /// directory); both have depth 3, breadth 4, ratio 2 and seed 1.
    pub fn preset(name: &str) -> Result<GenOptions> {
        let base = GenOptions {
            seed: 1,
            depth: 3,
            breadth: 4,
            files_per_dir: 8,
            min: 64 * 1024,
            max: 64 * 1024 * 1024,
            ratio: 2.0,
            total: None,
        };
        match name {
            "hp-typical" => Ok(base),
            "small-files" => Ok(GenOptions {
                files_per_dir: 64,
                min: 4 * 1024,
                max: 64 * 1024,
                ..base
            }),
            _ => Err(ToolError::NoPreset {
                name: name.to_string(),
                presets: PRESETS.join(", "),
            }
            .into()),
        }
    }
}

impl GenOptions {
    /// The options of a generator source's text without its `gen:` prefix
    /// (`PRESET:SIZE[:SEED]`, as in `gen:hp-typical:100G` or
    /// `gen:small-files:2G:7`); `Err` says in one line why the text names no tree.
    /// The preset's depth is raised, one level at a time, until its tree has room
    /// for files that reach the total; `tapeloom gen` with that `--depth` makes the
    /// same tree.
    pub fn of_source(spec: &str) -> std::result::Result<GenOptions, String> {
        let mut parts = spec.split(':');
        let preset = parts.next().unwrap_or_default();
        let mut o = GenOptions::preset(preset).map_err(|e| e.to_string())?;
        let total = parts
            .next()
            .ok_or_else(|| "it names no size".to_string())
            .and_then(tapeloom_engine::size::parse)?;
        if let Some(seed) = parts.next() {
            o.seed = seed
                .parse()
                .map_err(|_| format!("seed '{seed}' is not a whole number"))?;
        }
        if parts.next().is_some() {
            return Err("it has more than three parts".into());
        }
        let sizes = size_classes(o.min, o.max).map_err(|e| e.to_string())?;
        let round: u64 = sizes.iter().sum();
        let files = (total / round + 1).saturating_mul(sizes.len() as u64);
        loop {
            let dirs = tree(o.depth, o.breadth)
                .map_err(|_| format!("{total} bytes need more than {MAX_DIRS} folders"))?;
            if dirs.len() as u64 * u64::from(o.files_per_dir) >= files {
                break;
            }
            o.depth += 1;
        }
        o.total = Some(total);
        Ok(o)
    }
}

/// The generator of generator sources for the engine: the binary installs it with
/// `tapeloom_engine::install_generator`, and a backup of `gen:PRESET:SIZE[:SEED]`
/// then stores the tree [`generate`] would write with [`GenOptions::of_source`].
pub struct Generator;

impl tapeloom_engine::Generator for Generator {
    fn tree(&self, spec: &str) -> std::result::Result<Arc<dyn GeneratedTree>, String> {
        let opts = GenOptions::of_source(spec)?;
        let made = SourceTree::new(opts).map_err(|e| e.to_string())?;
        Ok(Arc::new(made))
    }
}

/// The tree of a generator source: its options and what follows from them.
struct SourceTree {
    opts: GenOptions,
    sizes: Vec<u64>,
    dirs: Vec<PathBuf>,
    layout: Layout,
    pattern: Pattern,
}

impl SourceTree {
    fn new(opts: GenOptions) -> Result<SourceTree> {
        let sizes = size_classes(opts.min, opts.max)?;
        let dirs = tree(opts.depth, opts.breadth)?;
        let capacity = dirs.len() as u64 * u64::from(opts.files_per_dir);
        let layout = Layout::plan(&sizes, capacity, opts.total)?;
        Ok(SourceTree {
            pattern: pattern_of(opts.ratio),
            opts,
            sizes,
            dirs,
            layout,
        })
    }
}

impl GeneratedTree for SourceTree {
    fn folders(&self) -> Vec<PathBuf> {
        self.dirs.clone()
    }

    fn folder_time(&self, index: usize) -> SystemTime {
        time(index as u64)
    }

    fn files_in(&self, index: usize) -> Vec<GeneratedFile> {
        // Folders are filled in order, files_per_dir files each, as generate does.
        let per = u64::from(self.opts.files_per_dir);
        let first = (index as u64).saturating_mul(per);
        let end = first.saturating_add(per).min(self.layout.files());
        (first..end)
            .map(|i| {
                let size = self.sizes[self.layout.class(i)];
                GeneratedFile {
                    number: i,
                    name: file_name(size, i),
                    size,
                    mtime: time(i),
                }
            })
            .collect()
    }

    fn bytes(&self) -> u64 {
        self.layout.counts(&self.sizes).1
    }

    fn make(
        &self,
        number: u64,
        size: u64,
        scratch: &mut Vec<u8>,
        put: &mut dyn FnMut(&[u8]) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        let chunk = CHUNK.min(self.opts.max) as usize;
        scratch.resize(chunk, 0);
        let mut noise = Noise::new(self.opts.seed ^ number.wrapping_mul(SEED_MIX));
        let mut left = size;
        while left > 0 {
            let n = left.min(chunk as u64) as usize;
            fill(self.pattern, &mut noise, &mut scratch[..n]);
            put(&scratch[..n])?;
            left -= n as u64;
        }
        ControlFlow::Continue(())
    }
}

/// The data pattern of compressibility `ratio`.
fn pattern_of(ratio: f64) -> Pattern {
    if ratio > 1.0 {
        Pattern::Ratio(ratio)
    } else {
        Pattern::Random
    }
}

/// The name of file `i` of `size` bytes.
fn file_name(size: u64, i: u64) -> String {
    format!("File{size}_{i:06}")
}

/// How many files one size class got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenClass {
    /// File size in bytes.
    pub size: u64,
    /// Files of that size.
    pub files: u64,
}

/// What was generated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenReport {
    /// Files written.
    pub files: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Directories in the tree, the root included.
    pub dirs: u64,
    /// Files per size class, smallest first.
    pub classes: Vec<GenClass>,
    /// The total asked for ([`GenOptions::total`]), if any.
    pub requested_bytes: Option<u64>,
    /// How far below the requested total the tree stayed: `requested_bytes - bytes`,
    /// never negative because the generator never passes the total (`None` when no
    /// total was asked for).
    pub shortfall_bytes: Option<u64>,
}

/// Which size class each file gets: `rounds` whole rounds of the first `kept` classes
/// (file `i` of them has class `i % kept`), then one file of each class in `extra`,
/// in that order.
///
/// A total of at least one round of every class makes whole rounds only, so every
/// class has the same number of files, as HPcreatedata makes them. A smaller total
/// cannot give every class a file; equal counts of the small sizes are what make the
/// tree a mix of small and large files (its per-file cost), so the largest classes
/// that would not fit once are left out, one round of the others is made, and the
/// rest is filled with at most one more file of each kept class, largest first. The
/// counts then differ by at most one, and the tree comes within one smallest file
/// of the total. A total below the smallest file is refused
/// ([`ToolError::TotalTooSmall`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Whole rounds.
    pub rounds: u64,
    /// Classes (from the smallest) in each round.
    pub kept: usize,
    /// Classes of the files after the rounds.
    pub extra: Vec<usize>,
}

impl Layout {
    /// The layout of up to `capacity` files of `sizes` (smallest first) that stays
    /// within `total` bytes, if given.
    pub fn plan(sizes: &[u64], capacity: u64, total: Option<u64>) -> Result<Layout> {
        let n = sizes.len();
        let whole = |rounds: u64| {
            let rounds = rounds.min(capacity / n as u64);
            let left = capacity - rounds * n as u64;
            Layout {
                rounds,
                kept: n,
                extra: Vec::new(),
            }
            .with_extra(if total.is_none() { left } else { 0 })
        };
        let Some(total) = total else {
            return Ok(whole(u64::MAX));
        };
        let round = sizes.iter().fold(0u64, |a, &s| a.saturating_add(s));
        if total >= round {
            return Ok(whole(total / round));
        }
        let min = sizes.first().copied().unwrap_or(0);
        if total < min {
            return Err(ToolError::TotalTooSmall { total, min }.into());
        }
        let mut kept = 0;
        let mut sum = 0u64;
        while kept < n && sum.saturating_add(sizes[kept]) <= total {
            sum += sizes[kept];
            kept += 1;
        }
        let mut left = total - sum;
        let mut extra = Vec::new();
        for c in (0..kept).rev() {
            if sizes[c] <= left {
                left -= sizes[c];
                extra.push(c);
            }
        }
        let mut l = Layout {
            rounds: 1,
            kept,
            extra,
        };
        if capacity < kept as u64 + l.extra.len() as u64 {
            // Too few places: the files that fit, in the same order.
            let mut order: Vec<usize> = (0..kept).chain(l.extra).collect();
            order.truncate(capacity as usize);
            l = Layout {
                rounds: 0,
                kept,
                extra: order,
            };
        }
        Ok(l)
    }

    /// Adds `k` files after the rounds, continuing the classes' cycle.
    fn with_extra(mut self, k: u64) -> Layout {
        self.extra = (0..k as usize).map(|j| j % self.kept.max(1)).collect();
        self
    }

    /// Files in all.
    pub fn files(&self) -> u64 {
        self.rounds * self.kept as u64 + self.extra.len() as u64
    }

    /// The class of file `i` (below [`Layout::files`]).
    pub fn class(&self, i: u64) -> usize {
        let in_rounds = self.rounds * self.kept as u64;
        if i < in_rounds {
            (i % self.kept as u64) as usize
        } else {
            self.extra[(i - in_rounds) as usize]
        }
    }

    /// Files per class and bytes in all.
    pub fn counts(&self, sizes: &[u64]) -> (Vec<u64>, u64) {
        let mut counts = vec![0u64; sizes.len()];
        for c in counts.iter_mut().take(self.kept) {
            *c = self.rounds;
        }
        for &c in &self.extra {
            counts[c] += 1;
        }
        let bytes = counts.iter().zip(sizes).map(|(&k, &s)| k * s).sum();
        (counts, bytes)
    }
}

/// Generates the tree `opts` describes under `dir`, which is created if missing and
/// must be empty if it exists.
///
/// The directories are `depth` levels below `dir` with `breadth` subdirectories
/// each, named `dir{level}_{index:03}` (index within the parent). Directories are
/// filled breadth first with `files_per_dir` files each; file `i` (counted across the
/// tree) is named `File{size}_{i:06}` and has the size class [`Layout::class`] gives
/// it (`i % classes` when there is no total, or a total of whole rounds).
pub fn generate(dir: &Path, opts: &GenOptions) -> Result<GenReport> {
    let sizes = size_classes(opts.min, opts.max)?;
    if !(1.0..=crate::pattern::MAX_RATIO).contains(&opts.ratio) {
        return Err(ToolError::Ratio { ratio: opts.ratio }.into());
    }
    let dirs = tree(opts.depth, opts.breadth)?;
    let capacity = dirs.len() as u64 * u64::from(opts.files_per_dir);
    let layout = Layout::plan(&sizes, capacity, opts.total)?;
    let nfiles = layout.files();
    let pattern = pattern_of(opts.ratio);

    prepare_root(dir)?;
    for d in &dirs[1..] {
        let p = dir.join(d);
        io(std::fs::create_dir(&p), || {
            format!("create {}", p.display())
        })?;
    }

    let mut buf = vec![0u8; CHUNK.min(opts.max) as usize];
    let mut counts = vec![0u64; sizes.len()];
    let mut bytes = 0u64;
    let mut i = 0u64;
    'dirs: for d in &dirs {
        for _ in 0..opts.files_per_dir {
            if i >= nfiles {
                break 'dirs;
            }
            let class = layout.class(i);
            let size = sizes[class];
            let path = dir.join(d).join(file_name(size, i));
            let mut noise = Noise::new(opts.seed ^ i.wrapping_mul(SEED_MIX));
            write_file(&path, size, pattern, &mut noise, &mut buf, time(i))?;
            counts[class] += 1;
            bytes += size;
            i += 1;
        }
    }

    // Last, so that creating entries no longer changes them; deepest first, the root
    // at the end.
    for (k, d) in dirs.iter().enumerate().rev() {
        let p = dir.join(d);
        let f = io(File::open(&p), || format!("open {}", p.display()))?;
        io(f.set_times(times(time(k as u64))), || {
            format!("set times of {}", p.display())
        })?;
    }

    Ok(GenReport {
        files: i,
        bytes,
        dirs: dirs.len() as u64,
        classes: sizes
            .iter()
            .zip(counts)
            .map(|(&size, files)| GenClass { size, files })
            .collect(),
        requested_bytes: opts.total,
        shortfall_bytes: opts.total.map(|t| t.saturating_sub(bytes)),
    })
}

/// The power-of-two sizes from `min` to `max`.
fn size_classes(min: u64, max: u64) -> Result<Vec<u64>> {
    if !min.is_power_of_two() || !max.is_power_of_two() || min > max {
        return Err(ToolError::SizeClasses { min, max }.into());
    }
    let mut sizes = vec![min];
    while let Some(&last) = sizes.last().filter(|&&s| s < max) {
        sizes.push(last * 2);
    }
    Ok(sizes)
}

/// The directories relative to the root (the root itself first, as an empty path), in
/// creation order: breadth first, children in index order.
fn tree(depth: u32, breadth: u32) -> Result<Vec<PathBuf>> {
    let too_big = || {
        Error::from(ToolError::TooManyDirs {
            depth,
            breadth,
            max: MAX_DIRS,
        })
    };
    let mut count = 0u64;
    let mut level = 1u64;
    for _ in 0..=depth {
        count = count.checked_add(level).ok_or_else(too_big)?;
        if count > MAX_DIRS {
            return Err(too_big());
        }
        level = level.saturating_mul(u64::from(breadth));
        if level == 0 {
            break;
        }
    }
    let mut dirs = Vec::with_capacity(count as usize);
    dirs.push(PathBuf::new());
    let mut start = 0;
    for lvl in 1..=depth {
        let end = dirs.len();
        if breadth == 0 || start == end {
            break;
        }
        for parent in start..end {
            for b in 0..breadth {
                let child = dirs[parent].join(format!("dir{lvl}_{b:03}"));
                dirs.push(child);
            }
        }
        start = end;
    }
    Ok(dirs)
}

/// Creates `dir` if missing; refuses one that is not an empty directory.
fn prepare_root(dir: &Path) -> Result<()> {
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => Err(ToolError::NotADirectory {
            dir: dir.to_path_buf(),
        }
        .into()),
        Ok(_) => {
            let mut rd = io(std::fs::read_dir(dir), || format!("list {}", dir.display()))?;
            if rd.next().is_some() {
                return Err(ToolError::NotEmpty {
                    dir: dir.to_path_buf(),
                }
                .into());
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            io(std::fs::create_dir_all(dir), || {
                format!("create {}", dir.display())
            })
        }
        Err(source) => Err(Error::Io {
            what: format!("inspect {}", dir.display()),
            source,
        }),
    }
}

/// Writes file `path` of `size` bytes of `pattern` through `buf`, with times `t`.
fn write_file(
    path: &Path,
    size: u64,
    pattern: Pattern,
    noise: &mut Noise,
    buf: &mut [u8],
    t: SystemTime,
) -> Result<()> {
    let mut f = io(
        OpenOptions::new().write(true).create_new(true).open(path),
        || format!("create {}", path.display()),
    )?;
    let mut left = size;
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        let chunk = &mut buf[..n];
        fill(pattern, noise, chunk);
        io(f.write_all(chunk), || format!("write {}", path.display()))?;
        left -= n as u64;
    }
    io(f.set_times(times(t)), || {
        format!("set times of {}", path.display())
    })
}

/// The fixed time of object `n`.
fn time(n: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(BASE_TIME.saturating_add(n))
}

/// Access and modification time `t`.
fn times(t: SystemTime) -> FileTimes {
    FileTimes::new().set_accessed(t).set_modified(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::os::unix::fs::MetadataExt;
    use tapeloom_device::lto::CompressionEstimator;

    fn small() -> GenOptions {
        GenOptions {
            seed: 7,
            depth: 2,
            breadth: 2,
            files_per_dir: 5,
            min: 1024,
            max: 16 * 1024,
            ratio: 2.0,
            total: None,
        }
    }

    /// Every object under `root`: relative path -> (is dir, mtime, bytes).
    fn snapshot(root: &Path) -> BTreeMap<PathBuf, (bool, i64, Vec<u8>)> {
        let mut out = BTreeMap::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                let m = std::fs::symlink_metadata(&p).unwrap();
                let rel = p.strip_prefix(root).unwrap().to_path_buf();
                if m.is_dir() {
                    stack.push(p.clone());
                    out.insert(rel, (true, m.mtime(), Vec::new()));
                } else {
                    out.insert(rel, (false, m.mtime(), std::fs::read(&p).unwrap()));
                }
            }
        }
        out
    }

    #[test]
    fn gen_same_seed_gives_identical_trees() {
        let t = tempfile::tempdir().unwrap();
        let (a, b, c) = (t.path().join("a"), t.path().join("b"), t.path().join("c"));
        let ra = generate(&a, &small()).unwrap();
        let rb = generate(&b, &small()).unwrap();
        assert_eq!(ra, rb);
        let sa = snapshot(&a);
        assert_eq!(sa, snapshot(&b));
        assert_eq!(
            std::fs::metadata(&a).unwrap().mtime(),
            std::fs::metadata(&b).unwrap().mtime()
        );
        // 1 + 2 + 4 directories, 5 files each, 5 classes of 7 files.
        assert_eq!(ra.dirs, 7);
        assert_eq!(ra.files, 35);
        assert_eq!(sa.values().filter(|v| v.0).count(), 6);
        assert_eq!(sa.values().filter(|v| !v.0).count(), 35);
        // Breadth first: root, dir1_000, dir1_001, dir1_000/dir2_000, ...
        assert!(sa.contains_key(Path::new("dir1_000/dir2_000/File4096_000017")));
        assert!(sa.contains_key(Path::new("dir1_001/dir2_000/File1024_000025")));
        assert!(sa.contains_key(Path::new("File1024_000000")));
        let sum: u64 = sa.values().map(|v| v.2.len() as u64).sum();
        assert_eq!(sum, ra.bytes);
        // Another seed, other bytes.
        generate(&c, &GenOptions { seed: 8, ..small() }).unwrap();
        assert_ne!(sa, snapshot(&c));
    }

    #[test]
    fn gen_classes_have_equal_counts() {
        let t = tempfile::tempdir().unwrap();
        let r = generate(t.path(), &small()).unwrap();
        let sizes: Vec<u64> = r.classes.iter().map(|c| c.size).collect();
        assert_eq!(sizes, [1024, 2048, 4096, 8192, 16384]);
        assert!(r.classes.iter().all(|c| c.files == 7));
        let mut by_size = BTreeMap::new();
        for (rel, (dir, _, data)) in snapshot(t.path()) {
            if !dir {
                let name = rel.file_name().unwrap().to_str().unwrap().to_string();
                let size: u64 = name[4..name.find('_').unwrap()].parse().unwrap();
                assert_eq!(data.len() as u64, size);
                *by_size.entry(size).or_insert(0u64) += 1;
            }
        }
        assert!(by_size.values().all(|&n| n == 7), "{by_size:?}");
    }

    #[test]
    fn gen_total_is_respected_in_whole_rounds() {
        let round = 1024 + 2048 + 4096 + 8192 + 16384;
        for (total, rounds) in [(3 * round + round / 2, 3), (round, 1), (u64::MAX, 7)] {
            let t = tempfile::tempdir().unwrap();
            let opts = GenOptions {
                total: Some(total),
                ..small()
            };
            let r = generate(t.path(), &opts).unwrap();
            assert_eq!(r.files, rounds * 5);
            assert_eq!(r.bytes, rounds * round);
            assert!(r.bytes <= total);
            assert!(r.classes.iter().all(|c| c.files == rounds));
            assert_eq!(r.requested_bytes, Some(total));
            assert_eq!(r.shortfall_bytes, Some(total - r.bytes));
            // The whole tree is there even when the files run out.
            let snap = snapshot(t.path());
            assert_eq!(snap.values().filter(|v| v.0).count(), 6);
            assert_eq!(snap.values().filter(|v| !v.0).count() as u64, rounds * 5);
        }
    }

    /// hp-typical's classes and the places its tree has.
    fn hp_typical() -> (Vec<u64>, u64) {
        let p = GenOptions::preset("hp-typical").unwrap();
        let sizes = size_classes(p.min, p.max).unwrap();
        let places = tree(p.depth, p.breadth).unwrap().len() as u64 * u64::from(p.files_per_dir);
        (sizes, places)
    }

    #[test]
    fn gen_total_below_one_round_drops_the_largest_classes() {
        // 100 MiB of hp-typical, whose round is 128 MiB less 64 KiB: the 64 MiB class
        // cannot have a file, the others get one or two.
        let (sizes, places) = hp_typical();
        let total = 100 << 20;
        let l = Layout::plan(&sizes, places, Some(total)).unwrap();
        let (counts, bytes) = l.counts(&sizes);
        assert!((90_000_000..=110_000_000).contains(&bytes), "{bytes}");
        assert!(bytes <= total && total - bytes < sizes[0], "{bytes}");
        assert_eq!(counts[10], 0, "{counts:?}");
        assert!(counts[..10].iter().all(|&c| c == 1 || c == 2), "{counts:?}");
        assert_eq!(l.files(), counts.iter().sum::<u64>());
        // The largest kept class first after the round.
        assert_eq!((l.rounds, l.kept, l.class(10)), (1, 10, 9));

        // Through the tree, on a small preset: one byte short of a round.
        let t = tempfile::tempdir().unwrap();
        let round = 1024 + 2048 + 4096 + 8192 + 16384;
        let opts = GenOptions {
            total: Some(round - 1),
            ..small()
        };
        let r = generate(t.path(), &opts).unwrap();
        let files: Vec<u64> = r.classes.iter().map(|c| c.files).collect();
        assert_eq!(files, [2, 2, 2, 2, 0]);
        assert_eq!(r.bytes, 2 * (1024 + 2048 + 4096 + 8192));
        assert_eq!(r.shortfall_bytes, Some(round - 1 - r.bytes));
        assert_eq!(snapshot(t.path()).values().filter(|v| !v.0).count(), 8);
    }

    #[test]
    fn gen_total_below_the_smallest_file_is_refused() {
        let (sizes, places) = hp_typical();
        for total in [0, 1, 65535] {
            assert!(matches!(
                Layout::plan(&sizes, places, Some(total)),
                Err(Error::Tool(ToolError::TotalTooSmall { total: t, min: 65536 })) if t == total
            ));
        }
        assert_eq!(
            Layout::plan(&sizes, places, Some(65536))
                .unwrap()
                .counts(&sizes),
            (vec![1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 65536)
        );
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("tiny");
        let opts = GenOptions {
            total: Some(1000),
            ..small()
        };
        assert!(generate(&d, &opts).is_err());
        assert!(!d.exists(), "a refused total touched the disk");
    }

    #[test]
    fn gen_total_of_whole_rounds_is_unchanged() {
        // 200 MiB: one round of every class (134 MB), as before.
        let (sizes, places) = hp_typical();
        let l = Layout::plan(&sizes, places, Some(200 << 20)).unwrap();
        assert_eq!(
            l,
            Layout {
                rounds: 1,
                kept: 11,
                extra: vec![]
            }
        );
        assert_eq!(l.counts(&sizes), (vec![1; 11], 134_152_192));
        // No total: every place, the classes in turn.
        let l = Layout::plan(&sizes, places, None).unwrap();
        assert_eq!(l.files(), places);
        assert!((0..places).all(|i| l.class(i) == (i % 11) as usize));
        // A total larger than the tree: whole rounds that fit.
        let l = Layout::plan(&sizes, places, Some(u64::MAX)).unwrap();
        assert_eq!((l.rounds, l.files()), (places / 11, places / 11 * 11));
    }

    #[test]
    fn gen_ratio_two_compresses_about_two() {
        let t = tempfile::tempdir().unwrap();
        let opts = GenOptions {
            seed: 3,
            depth: 1,
            breadth: 1,
            files_per_dir: 4,
            min: 4096,
            max: 2 << 20,
            ratio: 2.0,
            total: None,
        };
        let r = generate(t.path(), &opts).unwrap();
        assert_eq!(r.files, 8);
        let mut e = CompressionEstimator::new();
        let mut checked = 0;
        for (rel, (dir, _, data)) in snapshot(t.path()) {
            if dir {
                continue;
            }
            // The whole file, 32 KiB at a time (the estimator compresses pieces up to
            // that size whole).
            let packed: f64 = data
                .chunks(32 * 1024)
                .map(|c| c.len() as f64 / e.ratio(c, 100.0))
                .sum();
            let got = data.len() as f64 / packed;
            assert!((1.8..=2.2).contains(&got), "{rel:?}: LZ4 gives {got}");
            checked += 1;
        }
        assert_eq!(checked, 8);

        // Ratio 1 is incompressible.
        let u = tempfile::tempdir().unwrap();
        let opts = GenOptions {
            ratio: 1.0,
            depth: 0,
            files_per_dir: 1,
            ..opts
        };
        generate(u.path(), &opts).unwrap();
        let data = std::fs::read(u.path().join("File4096_000000")).unwrap();
        assert_eq!(e.ratio(&data, 100.0), 1.0);
    }

    #[test]
    fn a_generator_source_is_the_tree_gen_writes() {
        use tapeloom_engine::Generator as _;
        let made = Generator.tree("small-files:1M:5").unwrap();
        let opts = GenOptions::of_source("small-files:1M:5").unwrap();
        assert_eq!((opts.seed, opts.total), (5, Some(1 << 20)));
        let t = tempfile::tempdir().unwrap();
        let r = generate(t.path(), &opts).unwrap();
        let disk = snapshot(t.path());
        let mut seen = BTreeMap::new();
        let mut scratch = Vec::new();
        let folders = made.folders();
        assert_eq!(folders.len() as u64, r.dirs);
        for (k, f) in folders.iter().enumerate() {
            let secs = |t: SystemTime| t.duration_since(UNIX_EPOCH).unwrap().as_secs() as i64;
            if k > 0 {
                assert_eq!(
                    disk[f],
                    (true, secs(made.folder_time(k)), Vec::new()),
                    "{f:?}"
                );
            }
            for file in made.files_in(k) {
                let mut bytes = Vec::new();
                let done = made.make(file.number, file.size, &mut scratch, &mut |b| {
                    bytes.extend_from_slice(b);
                    ControlFlow::Continue(())
                });
                assert_eq!(done, ControlFlow::Continue(()));
                assert_eq!(bytes.len() as u64, file.size);
                seen.insert(f.join(&file.name), (false, secs(file.mtime), bytes));
            }
        }
        let files: BTreeMap<_, _> = disk.into_iter().filter(|(_, v)| !v.0).collect();
        assert_eq!(seen.len() as u64, r.files);
        assert_eq!(seen, files);
        assert_eq!(made.bytes(), r.bytes);
        // A stop asked for by the packer stops the file.
        let file = &made.files_in(0)[0];
        let mut pieces = 0;
        let stopped = made.make(file.number, 3 << 20, &mut scratch, &mut |_| {
            pieces += 1;
            ControlFlow::Break(())
        });
        assert_eq!((stopped, pieces), (ControlFlow::Break(()), 1));
        // Texts that name no tree say why.
        for (spec, why) in [
            ("nope:1G", "no dataset preset 'nope'"),
            ("hp-typical", "names no size"),
            ("hp-typical:1G:x", "seed 'x'"),
            ("hp-typical:1G:1:2", "more than three parts"),
        ] {
            let e = Generator.tree(spec).err().unwrap();
            assert!(e.contains(why), "{spec}: {e}");
        }
    }

    #[test]
    fn gen_bad_options_are_refused() {
        let t = tempfile::tempdir().unwrap();
        let bad = [
            GenOptions { min: 0, ..small() },
            GenOptions {
                min: 3000,
                ..small()
            },
            GenOptions {
                max: 5000,
                ..small()
            },
            GenOptions {
                min: 8192,
                max: 4096,
                ..small()
            },
            GenOptions {
                ratio: 0.5,
                ..small()
            },
            GenOptions {
                ratio: f64::NAN,
                ..small()
            },
            GenOptions {
                depth: 100,
                breadth: 10,
                ..small()
            },
        ];
        for (k, o) in bad.iter().enumerate() {
            let d = t.path().join(format!("bad{k}"));
            assert!(generate(&d, o).is_err(), "{o:?}");
            assert!(!d.exists(), "{o:?} touched the disk");
        }
        // Not empty, or not a directory.
        let full = t.path().join("full");
        std::fs::create_dir(&full).unwrap();
        std::fs::write(full.join("x"), b"x").unwrap();
        let e = generate(&full, &small()).unwrap_err().to_string();
        assert!(e.contains("not empty"), "{e}");
        let e = generate(&full.join("x"), &small()).unwrap_err().to_string();
        assert!(e.contains("not a directory"), "{e}");
        // Presets.
        let e = GenOptions::preset("nope").unwrap_err().to_string();
        assert!(e.contains("hp-typical") && e.contains("small-files"), "{e}");
        let p = GenOptions::preset("hp-typical").unwrap();
        assert_eq!((p.min, p.max, p.files_per_dir), (65536, 64 << 20, 8));
        let p = GenOptions::preset("small-files").unwrap();
        assert_eq!((p.min, p.max, p.files_per_dir), (4096, 65536, 64));
        assert_eq!(size_classes(1, 1).unwrap(), [1]);
        assert_eq!(tree(3, 4).unwrap().len(), 85);
        assert_eq!(tree(5, 0).unwrap().len(), 1);
    }
}
