//! The whole read path on a mutated cartridge: a small job is written once with the
//! engine's public API; each input chooses edits of its blocks (payloads re-packed and
//! CRCs recomputed, so that they reach the record decoders), the cartridge is written
//! back, and restore, verify, listing and catalog rebuild run on it.

use super::decoders::{reseal_block, reseal_label};
use super::{Outcome, Violation};
use crate::{
    backup, rebuild, restore, verify, BackupOptions, Compress, Error, Home, Progress,
    RestoreOptions,
};
use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use tapeloom_format::{expand_block, BlockHeader, BLOCK_HEADER_LEN, LABEL_LEN, MIN_BLOCK_SIZE};

/// Most edits one input makes.
const MAX_EDITS: usize = 16;
/// What the canary files outside every restore target hold.
const CANARY: &[u8] = b"must stay as it is\n";
/// The path restored on its own.
const ONE_PATH: &[u8] = b"src1/dir";

/// A cartridge as its two files hold it: its objects in order.
#[derive(Clone)]
struct Cartridge {
    barcode: String,
    /// Block bytes, or `None` for a filemark.
    objects: Vec<Option<Vec<u8>>>,
}

/// A job written once, to be copied and mutated for every input.
pub struct ReadPath {
    root: tempfile::TempDir,
    job_id: i64,
    tapes: Vec<Cartridge>,
}

/// Runs one input through [`ReadPath`], the job written on first use.
pub fn read_path(data: &[u8]) -> Outcome {
    static JOB: OnceLock<std::result::Result<ReadPath, String>> = OnceLock::new();
    match JOB.get_or_init(|| ReadPath::new().map_err(|e| e.to_string())) {
        Ok(job) => job.run(data),
        Err(e) => Err(Violation(format!("could not write the job to mutate: {e}"))),
    }
}

fn write(path: &Path, data: &[u8]) -> std::io::Result<()> {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p)?;
    }
    std::fs::write(path, data)
}

/// Text that compresses, so that its blocks are stored as zstd frames.
fn text(lines: usize) -> Vec<u8> {
    (0..lines)
        .flat_map(|i| format!("line {i} of a file that compresses well\n").into_bytes())
        .collect()
}

/// Bytes that do not compress (xorshift).
fn noise(len: usize) -> Vec<u8> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    v
}

fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if e.file_type()?.is_dir() {
            copy_tree(&src, &dst)?;
        } else {
            std::fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

fn tapes_dir(home: &Path) -> PathBuf {
    home.join("library").join("tapes")
}

fn names(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

impl Cartridge {
    fn load(tapes: &Path, barcode: &str) -> std::io::Result<Self> {
        let data = std::fs::read(tapes.join(format!("{barcode}.data")))?;
        let idx = std::fs::read(tapes.join(format!("{barcode}.idx")))?;
        let mut objects = Vec::new();
        for c in idx.chunks_exact(16) {
            let at = u64::from_le_bytes(c[0..8].try_into().unwrap_or_default()) as usize;
            let len = u32::from_le_bytes(c[8..12].try_into().unwrap_or_default()) as usize;
            let kind = u32::from_le_bytes(c[12..16].try_into().unwrap_or_default());
            objects.push(match kind {
                0 => Some(data.get(at..at + len).unwrap_or(&[]).to_vec()),
                _ => None,
            });
        }
        Ok(Cartridge {
            barcode: barcode.to_string(),
            objects,
        })
    }

    fn store(&self, tapes: &Path) -> std::io::Result<()> {
        let (mut data, mut idx) = (Vec::new(), Vec::new());
        for o in &self.objects {
            idx.extend_from_slice(&(data.len() as u64).to_le_bytes());
            let (len, kind) = match o {
                Some(b) => (b.len() as u32, 0u32),
                None => (0, 1),
            };
            idx.extend_from_slice(&len.to_le_bytes());
            idx.extend_from_slice(&kind.to_le_bytes());
            if let Some(b) = o {
                data.extend_from_slice(b);
            }
        }
        std::fs::write(tapes.join(format!("{}.data", self.barcode)), data)?;
        std::fs::write(tapes.join(format!("{}.idx", self.barcode)), idx)
    }
}

/// Changes a block's payload as a writer would have written it: a compressed block is
/// expanded, edited and compressed again; either way the CRC is recomputed.
fn edit_payload(block: &mut Vec<u8>, edit: impl FnOnce(&mut Vec<u8>)) {
    let Ok(h) = BlockHeader::open(block) else {
        // Damaged already: edit the bytes after the header as they are.
        let mut rest = block.split_off(BLOCK_HEADER_LEN.min(block.len()));
        let len = rest.len();
        edit(&mut rest);
        rest.resize(len, 0);
        block.extend_from_slice(&rest);
        reseal_block(block);
        return;
    };
    let mut out = Vec::new();
    if expand_block(&h, block, &mut out).is_err() {
        return;
    }
    let len = h.payload_len as usize;
    let mut payload = out.split_off(BLOCK_HEADER_LEN);
    edit(&mut payload);
    payload.resize(len, 0);
    if h.compressed {
        let Ok(frame) = zstd::bulk::compress(&payload, 1) else {
            return;
        };
        block.truncate(BLOCK_HEADER_LEN);
        block.extend_from_slice(&frame);
    } else {
        block[BLOCK_HEADER_LEN..BLOCK_HEADER_LEN + len].copy_from_slice(&payload);
    }
    reseal_block(block);
}

fn overwrite(buf: &mut [u8], at: usize, val: &[u8]) {
    for (i, v) in val.iter().enumerate() {
        if let Some(b) = buf.get_mut(at + i) {
            *b = *v;
        }
    }
}

/// Applies one edit, chosen by `op`, to object `k` of `objects`.
fn apply(objects: &mut Vec<Option<Vec<u8>>>, k: usize, op: u8, off: usize, val: &[u8]) {
    let label = k == 0;
    match op % 8 {
        // The payload (or the label's fields), CRC recomputed.
        0 => match &mut objects[k] {
            Some(b) if label => {
                overwrite(b, off % (LABEL_LEN - 4), val);
                reseal_label(b);
            }
            Some(b) => edit_payload(b, |p| {
                let at = off % p.len().max(1);
                overwrite(p, at, val);
            }),
            None => {}
        },
        // The header's fields, CRC recomputed.
        1 => {
            if let Some(b) = &mut objects[k] {
                if label {
                    overwrite(b, off % 112, val);
                    reseal_label(b);
                } else {
                    let end = 60.min(b.len());
                    let head = &mut b[..end];
                    let at = off % 60;
                    overwrite(head, at, val);
                    reseal_block(b);
                }
            }
        }
        // Any bytes, CRC left as it was.
        2 => {
            if let Some(b) = &mut objects[k] {
                let at = off % b.len().max(1);
                overwrite(b, at, val);
            }
        }
        // A block cut short.
        3 => {
            if let Some(b) = &mut objects[k] {
                let to = off % b.len().max(1);
                b.truncate(to);
            }
        }
        // An object lost.
        4 => {
            objects.remove(k);
        }
        // Bytes inserted into the payload, the rest moved up.
        5 => {
            if let Some(b) = &mut objects[k] {
                if !label {
                    edit_payload(b, |p| {
                        let at = off % (p.len() + 1);
                        p.splice(at..at, val.iter().copied());
                    });
                }
            }
        }
        // An object written twice.
        6 => {
            let o = objects[k].clone();
            objects.insert(k, o);
        }
        // Two objects in the other order.
        _ => {
            if k + 1 < objects.len() {
                objects.swap(k, k + 1);
            }
        }
    }
}

/// A worker thread's panic comes back as [`Error::Panicked`]: as much a finding as a
/// panic of the caller.
pub(super) fn no_panic<T>(
    what: &str,
    r: crate::Result<T>,
) -> std::result::Result<Option<T>, Violation> {
    match r {
        Err(e @ Error::Panicked { .. }) => Err(Violation(format!("{what}: {e}"))),
        Err(_) => Ok(None),
        Ok(v) => Ok(Some(v)),
    }
}

/// A restore target's folder: the target and, beside it, a folder with a canary file
/// that a relative symlink on tape points at.
pub(super) fn target(run: &Path, name: &str) -> std::io::Result<PathBuf> {
    let w = run.join(name);
    write(&w.join("outside").join("keep"), CANARY)?;
    Ok(w.join("to"))
}

/// Nothing was written beside the target, through a symlink or as a hard link.
fn check_canary(dir: &Path) -> Outcome {
    let found = names(dir);
    if found.len() != 1 || !found.contains("keep") {
        return Err(Violation(format!(
            "restore wrote into {}: {found:?}",
            dir.display()
        )));
    }
    let keep = dir.join("keep");
    let meta = std::fs::symlink_metadata(&keep)
        .map_err(|e| Violation(format!("{}: {e}", keep.display())))?;
    let same = std::fs::read(&keep).map(|b| b == CANARY).unwrap_or(false);
    if !meta.is_file() || meta.nlink() != 1 || !same {
        return Err(Violation(format!(
            "restore changed {} (or linked to it)",
            keep.display()
        )));
    }
    Ok(())
}

pub(super) fn check_beside(to: &Path) -> Outcome {
    let w = to.parent().unwrap_or(to);
    let found = names(w);
    let want: BTreeSet<String> = ["outside", "to"].iter().map(|s| s.to_string()).collect();
    if !found.is_subset(&want) {
        return Err(Violation(format!(
            "restore wrote beside its target {}: {found:?}",
            to.display()
        )));
    }
    check_canary(&w.join("outside"))
}

impl ReadPath {
    /// Writes the job: two sources (one compressible, one not) with files, a hard
    /// link, an empty folder and symlinks that point outside any restore target.
    pub fn new() -> crate::Result<Self> {
        let io = |e: std::io::Error| Error::Io {
            what: "write the tree to back up".into(),
            source: e,
        };
        // In memory where there is a tmpfs: every run syncs the catalog and the
        // cartridges, which on a disk costs more than everything else.
        let shm = Path::new("/dev/shm");
        let base = if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        let root = tempfile::Builder::new()
            .prefix("tapeloom-fuzz")
            .tempdir_in(base)
            .map_err(io)?;
        let r = root.path();
        let (s1, s2) = (r.join("src1"), r.join("src2"));
        let canary = r.join("canary");
        (|| -> std::io::Result<()> {
            write(&canary.join("keep"), CANARY)?;
            write(&s1.join("dir/a.txt"), b"hello tape\n")?;
            write(&s1.join("dir/sub/text.txt"), &text(4000))?;
            std::os::unix::fs::symlink("../../../outside", s1.join("dir/esc"))?;
            std::os::unix::fs::symlink(&canary, s1.join("dir/abs"))?;
            write(&s1.join("c.txt"), b"c\n")?;
            std::fs::hard_link(s1.join("c.txt"), s1.join("hl"))?;
            std::fs::create_dir_all(s1.join("empty"))?;
            write(&s2.join("noise.bin"), &noise(70_000))?;
            write(&s2.join("f.txt"), b"second stream\n")?;
            std::fs::create_dir_all(r.join("runs"))
        })()
        .map_err(io)?;
        let home_dir = r.join("home");
        let job_id = {
            let home = Home::open(&home_dir)?;
            let opts = BackupOptions {
                name: "fuzz".into(),
                block_size: MIN_BLOCK_SIZE,
                compress: Compress::Zstd,
                ..BackupOptions::default()
            };
            backup(&home, &[s1, s2], &opts, Arc::new(Progress::default()))?.job_id
        };
        let tapes = tapes_dir(&home_dir);
        let mut carts = Vec::new();
        for name in names(&tapes) {
            if let Some(barcode) = name.strip_suffix(".idx") {
                let c = Cartridge::load(&tapes, barcode).map_err(io)?;
                if !c.objects.is_empty() {
                    carts.push(c);
                }
            }
        }
        Ok(ReadPath {
            root,
            job_id,
            tapes: carts,
        })
    }

    /// Blocks and filemarks of the job's cartridges.
    pub fn objects(&self) -> usize {
        self.tapes.iter().map(|t| t.objects.len()).sum()
    }

    /// Edits the cartridges as `data` says (five bytes per edit: operation, object,
    /// offset (u16), length, then that many bytes, modulo 33), then reads the job back
    /// every way there is.
    pub fn run(&self, data: &[u8]) -> Outcome {
        let r = self.root.path();
        let run = tempfile::Builder::new()
            .prefix("run")
            .tempdir_in(r.join("runs"))
            .map_err(|e| Violation(format!("no run folder: {e}")))?;
        let mut tapes = self.tapes.clone();
        let mut ops = data;
        for _ in 0..MAX_EDITS {
            let Some((head, rest)) = ops.split_first_chunk::<5>() else {
                break;
            };
            let n = (usize::from(head[4]) % 33).min(rest.len());
            let (val, rest) = rest.split_at(n);
            ops = rest;
            let total: usize = tapes.iter().map(|t| t.objects.len()).sum();
            if total == 0 {
                break;
            }
            let mut k = usize::from(head[1]) % total;
            if let Some(t) = tapes.iter_mut().find(|t| {
                let here = k < t.objects.len();
                if !here {
                    k -= t.objects.len();
                }
                here
            }) {
                let off = usize::from(u16::from_le_bytes([head[2], head[3]]));
                apply(&mut t.objects, k, head[0], off, val);
            }
        }
        let home_dir = run.path().join("home");
        let setup = (|| -> std::io::Result<()> {
            copy_tree(&r.join("home"), &home_dir)?;
            for t in &tapes {
                t.store(&tapes_dir(&home_dir))?;
            }
            Ok(())
        })();
        setup.map_err(|e| Violation(format!("could not set up the run: {e}")))?;
        let outcome = self.read_back(run.path(), &home_dir);
        let around = self.check_root();
        // A folder restored without write permission would keep its parent.
        make_removable(run.path());
        outcome.and(around)
    }

    fn read_back(&self, run: &Path, home_dir: &Path) -> Outcome {
        let io = |e: std::io::Error| Violation(format!("could not set up the run: {e}"));
        {
            let home = no_panic("open the home", Home::open(home_dir))?
                .ok_or_else(|| Violation("the copied home does not open".into()))?;
            let whole = target(run, "whole").map_err(io)?;
            self.restore_into(&home, self.job_id, &whole, Vec::new())?;
            let one = target(run, "one").map_err(io)?;
            self.restore_into(&home, self.job_id, &one, vec![ONE_PATH.to_vec()])?;
            no_panic("verify", verify(&home, self.job_id, None))?;
        }
        // A catalog made from the mutated cartridges alone: its positions and paths
        // come from the tape.
        let rebuilt = run.join("rebuilt");
        copy_tree(&home_dir.join("library"), &rebuilt.join("library")).map_err(io)?;
        let home = no_panic("open the home", Home::open(&rebuilt))?
            .ok_or_else(|| Violation("a new home does not open".into()))?;
        no_panic("catalog rebuild", rebuild(&home))?;
        let jobs = home.catalog.jobs().unwrap_or_default();
        for (i, job) in jobs.iter().enumerate() {
            let mut listed = 0u64;
            let _ = home.catalog.for_each_file(job.id, None, |row| {
                listed += 1;
                let _ = tapeloom_format::EntryType::from_u8(row.kind);
                let _ = crate::display_path(&row.path);
                Ok(())
            });
            let _ = home.catalog.files(job.id, Some(ONE_PATH));
            let to = target(run, &format!("rebuilt-{i}")).map_err(io)?;
            self.restore_into(&home, job.id, &to, Vec::new())?;
            no_panic("verify", verify(&home, job.id, None))?;
        }
        Ok(())
    }

    fn restore_into(&self, home: &Home, job: i64, to: &Path, paths: Vec<Vec<u8>>) -> Outcome {
        let opts = RestoreOptions {
            to: to.to_path_buf(),
            paths,
            drive: None,
            drives: None,
            stream: None,
            skip_by: Default::default(),
            overwrite: Default::default(),
            volumes: Vec::new(),
            order: Default::default(),
            samples_as: None,
            copy: None,
        };
        no_panic("restore", restore(home, job, &opts))?;
        check_beside(to)
    }

    /// Nothing appeared in the job's folder outside the runs, and the canary an
    /// absolute symlink on tape points at is as it was.
    fn check_root(&self) -> Outcome {
        let r = self.root.path();
        let want: BTreeSet<String> = ["canary", "home", "runs", "src1", "src2"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let found = names(r);
        if found != want {
            return Err(Violation(format!(
                "a file appeared in {}: {found:?}",
                r.display()
            )));
        }
        let runs = names(&r.join("runs"));
        if let Some(odd) = runs.iter().find(|n| !n.starts_with("run")) {
            return Err(Violation(format!("{odd} appeared among the runs")));
        }
        check_canary(&r.join("canary"))
    }
}

/// Gives every folder under `dir` (symlinks not followed) owner permissions.
fn make_removable(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                make_removable(&e.path());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checks that judge a run fire on each kind of write outside a target.
    #[test]
    fn the_outside_checks_fire() {
        let t = tempfile::tempdir().unwrap();
        let to = target(t.path(), "w").unwrap();
        std::fs::create_dir_all(&to).unwrap();
        let outside = t.path().join("w/outside");
        assert!(check_beside(&to).is_ok());
        // A file beside the canary.
        write(&outside.join("new"), b"x").unwrap();
        assert!(check_canary(&outside).is_err());
        std::fs::remove_file(outside.join("new")).unwrap();
        // The canary changed.
        write(&outside.join("keep"), b"changed").unwrap();
        assert!(check_canary(&outside).is_err());
        write(&outside.join("keep"), CANARY).unwrap();
        // The canary linked from inside the target.
        std::fs::hard_link(outside.join("keep"), to.join("link")).unwrap();
        assert!(check_canary(&outside).is_err());
        std::fs::remove_file(to.join("link")).unwrap();
        // The canary replaced by a symlink.
        std::fs::remove_file(outside.join("keep")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", outside.join("keep")).unwrap();
        assert!(check_canary(&outside).is_err());
        std::fs::remove_file(outside.join("keep")).unwrap();
        write(&outside.join("keep"), CANARY).unwrap();
        assert!(check_canary(&outside).is_ok());
        // A file beside the target.
        write(&t.path().join("w/stray"), b"x").unwrap();
        assert!(check_beside(&to).is_err());
    }

    /// A file that appears beside the runs fails the run that follows.
    #[test]
    fn a_write_outside_the_runs_is_a_violation() {
        let job = ReadPath::new().unwrap();
        job.run(&[]).unwrap();
        let stray = job.root.path().join("escaped");
        write(&stray, b"x").unwrap();
        let v = job.run(&[]).unwrap_err();
        assert!(v.0.contains("a file appeared"), "{v}");
        std::fs::remove_file(&stray).unwrap();
        write(&job.root.path().join("canary/keep"), b"changed").unwrap();
        assert!(job.run(&[]).is_err());
    }
}
