//! The dataset generator: a tree of directories holding files of power-of-two sizes
//! with data of a chosen compressibility, as HP's HPcreatedata makes for assessing a
//! backup. Everything (names, sizes, bytes and times) follows from the options, so the
//! same options always give the same tree.

use crate::error::{io, Error, Result, ToolError};
use crate::tools::pattern::{fill, Noise, Pattern};
use std::fs::{File, FileTimes, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
    /// Stop before the total size would pass this many bytes (at the end of a full
    /// round of size classes, so every class keeps the same number of files).
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
}

/// Generates the tree `opts` describes under `dir`, which is created if missing and
/// must be empty if it exists.
///
/// The directories are `depth` levels below `dir` with `breadth` subdirectories
/// each, named `dir{level}_{index:03}` (index within the parent). Directories are
/// filled breadth first with `files_per_dir` files each; file `i` (counted across the
/// tree) is named `File{size}_{i:06}` and has size class `i % classes`.
pub fn generate(dir: &Path, opts: &GenOptions) -> Result<GenReport> {
    let sizes = size_classes(opts.min, opts.max)?;
    if !(opts.ratio >= 1.0 && opts.ratio.is_finite()) {
        return Err(ToolError::Ratio { ratio: opts.ratio }.into());
    }
    let dirs = tree(opts.depth, opts.breadth)?;
    let nclasses = sizes.len() as u64;
    let capacity = dirs.len() as u64 * u64::from(opts.files_per_dir);
    let nfiles = match opts.total {
        None => capacity,
        Some(total) => {
            let round = sizes.iter().fold(0u64, |a, &s| a.saturating_add(s));
            (total / round).min(capacity / nclasses) * nclasses
        }
    };
    let pattern = if opts.ratio > 1.0 {
        Pattern::Ratio(opts.ratio)
    } else {
        Pattern::Random
    };

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
            let class = (i % nclasses) as usize;
            let size = sizes[class];
            let path = dir.join(d).join(format!("File{size}_{i:06}"));
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
        for (total, rounds) in [(3 * round + round / 2, 3), (round - 1, 0), (u64::MAX, 7)] {
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
            // The whole tree is there even when the files run out.
            let snap = snapshot(t.path());
            assert_eq!(snap.values().filter(|v| v.0).count(), 6);
            assert_eq!(snap.values().filter(|v| !v.0).count() as u64, rounds * 5);
        }
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
