//! A tape drive backed by two files per cartridge (FORMAT.md 8).
//!
//! `BARCODE.data` holds the bytes of every block, one after another; `BARCODE.idx`
//! holds 16 bytes per logical object (data offset, length, kind). A block is written to
//! the data file before its index entry, so a crash can only leave data past the last
//! indexed block. Opening a cartridge never changes its data: an index that does not
//! match the data is rebuilt from the blocks' own headers ([`crate::virtual_index`]),
//! and bytes past the last whole block (a torn write) are cut only when a block is
//! about to be appended after them.

use crate::virtual_index::{self, Object, IDX_LEN, KIND_BLOCK, KIND_FILEMARK, KIND_HEADER_ONLY};
use crate::{
    io, Corruption, DeviceError, DriveHealth, ReadOutcome, Result, TapeDrive, VolumeStatistics,
    WriteOutcome,
};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Written data is handed to the disk every this many bytes, so that the flush at a
/// synchronous filemark or an unload waits for little (as a drive's buffer drains to
/// tape as it goes) instead of for everything written since the last one. The window
/// handed over before is then waited for and dropped from the page cache: a cartridge
/// being written holds at most about two windows of memory, as a drive holds its
/// buffer, and the pages it frees are the ones its next writes reuse.
const WRITE_BEHIND: u64 = 32 << 20;

/// One virtual cartridge, open.
pub struct VirtualTape {
    name: String,
    data: File,
    idx: File,
    objects: Vec<Object>,
    pos: usize,
    capacity: u64,
    early_warning: u64,
    write_protected: bool,
    /// The data file's length: past the last object's end lie the bytes of a torn
    /// write, which the next append cuts.
    data_len: u64,
    /// The objects are known to be the cartridge's (its index was whole, or was
    /// rebuilt with certainty): blocks may be appended after them.
    certain: bool,
    /// The files could be opened for reading only (a read-only file system).
    read_only: bool,
    /// Data before this offset has been handed to the disk.
    handed: u64,
    /// Data before this offset is on disk and out of the page cache.
    dropped: u64,
    /// Data blocks keep their header only (a library made with `--payload none`).
    headers_only: bool,
    /// The tape directory, `BARCODE.pos`: where each object lies along the tape
    /// (native bytes, after the drive's compression), as the modeled drive that
    /// wrote it recorded it; none on a read-only file system.
    pos_file: Option<File>,
    /// Its entries, for the objects from the first on.
    tape_offsets: Vec<f64>,
}

/// Bytes of one entry of the tape directory (an `f64`, little-endian).
const POS_LEN: u64 = 8;

impl VirtualTape {
    /// The two files of cartridge `barcode` in `dir`.
    pub fn paths(dir: &Path, barcode: &str) -> (PathBuf, PathBuf) {
        (
            dir.join(format!("{barcode}.data")),
            dir.join(format!("{barcode}.idx")),
        )
    }

    /// The tape directory of cartridge `barcode` in `dir` (FORMAT.md 8).
    pub fn directory_path(dir: &Path, barcode: &str) -> PathBuf {
        dir.join(format!("{barcode}.pos"))
    }

    /// Opens (creating when missing) cartridge `barcode` in `dir`. `early_warning` is
    /// the size of the early-warning zone before `capacity`.
    ///
    /// Nothing in the data file changes. An index that does not match the data is
    /// rebuilt from the data; a certain rebuild replaces the index file (a damaged
    /// one is kept beside it as `BARCODE.idx.damaged`), an uncertain one is used to
    /// read and the cartridge then refuses to append.
    pub fn open(
        dir: &Path,
        barcode: &str,
        capacity: u64,
        early_warning: u64,
        write_protected: bool,
    ) -> Result<Self> {
        let (dp, ip) = Self::paths(dir, barcode);
        let blank = !dp.exists() && !ip.exists();
        let open = |p: &Path| -> Result<(File, bool)> {
            let what = || format!("open cartridge file {}", p.display());
            let rw = OpenOptions::new()
                .read(true)
                .write(true)
                .create(blank)
                .truncate(false)
                .open(p);
            match rw {
                Ok(f) => Ok((f, false)),
                Err(e) if is_read_only(&e) => {
                    Ok((io(what, OpenOptions::new().read(true).open(p))?, true))
                }
                // A missing index beside its data is rebuilt from the data.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && !blank => {
                    let f = OpenOptions::new()
                        .read(true)
                        .write(true)
                        .create(true)
                        .truncate(false)
                        .open(p);
                    match f {
                        Ok(f) => Ok((f, false)),
                        Err(e) => Err(DeviceError::Io(what(), e)),
                    }
                }
                Err(e) => Err(DeviceError::Io(what(), e)),
            }
        };
        let (data, ro_data) = open(&dp)?;
        let (idx, ro_idx) = open(&ip)?;
        let what = || format!("read cartridge index {}", ip.display());
        let mut raw = Vec::new();
        io(what, std::io::Read::read_to_end(&mut &idx, &mut raw))?;
        let data_len = io(what, data.metadata())?.len();
        let checked = virtual_index::check(&raw, &data, data_len, barcode)?;
        let (pos_file, tape_offsets) = open_directory(dir, barcode, checked.objects.len());
        let tape = VirtualTape {
            name: barcode.to_string(),
            data,
            idx,
            objects: checked.objects,
            pos: 0,
            capacity,
            early_warning,
            write_protected,
            data_len,
            certain: checked.certain,
            read_only: ro_data || ro_idx,
            handed: 0,
            dropped: 0,
            headers_only: false,
            pos_file,
            tape_offsets,
        };
        if checked.changed && checked.certain && !tape.read_only {
            tape.write_index(&ip, &raw, checked.damaged)?;
        }
        Ok(tape)
    }

    /// Makes the cartridge keep only the headers of the data blocks written to it
    /// from now on (`true`): their payload becomes a hole in the data file, and
    /// reading such a block back is [`DeviceError::NoPayloadKept`] unless the
    /// process's [`crate::regenerate`] makes it again. Labels and the blocks
    /// of a job's own records are kept whole: stream 0 (`JobStart`, the index,
    /// `JobEnd`) and stream 65535 (the `Continuation` that opens each further
    /// cartridge of a job, and each segment after a filemark). For experiments
    /// whose drives write faster than this machine's disk.
    pub fn headers_only(mut self, yes: bool) -> Self {
        self.headers_only = yes;
        self
    }

    /// Replaces the index file with the objects rebuilt from the data, keeping a
    /// damaged one beside it.
    fn write_index(&self, path: &Path, old: &[u8], damaged: bool) -> Result<()> {
        let what = || format!("write cartridge index {}", path.display());
        if damaged && !old.is_empty() {
            let mut kept = path.as_os_str().to_owned();
            kept.push(".damaged");
            io(what, crate::fsio::write_atomic(Path::new(&kept), old))?;
        }
        let bytes: Vec<u8> = self.objects.iter().flat_map(|o| o.encode()).collect();
        io(what, self.idx.write_all_at(&bytes, 0))?;
        io(what, self.idx.set_len(bytes.len() as u64))?;
        io(what, self.idx.sync_data())
    }

    /// Ends the tape directory before object `at`, which is being written
    /// again: its old place no longer holds (the drive that writes it notes the
    /// new one).
    fn cut_directory(&mut self, at: usize) {
        if self.tape_offsets.len() > at {
            self.tape_offsets.truncate(at);
            if let Some(f) = &self.pos_file {
                let _ = f.set_len(at as u64 * POS_LEN);
            }
        }
    }

    /// Records where object `lbn` lies along the tape; only a directory that
    /// runs from the first object without a gap is kept.
    fn note_tape_offset(&mut self, lbn: u64, offset: f64) {
        let i = lbn as usize;
        if i > self.tape_offsets.len() || i >= self.objects.len() {
            return;
        }
        self.tape_offsets.truncate(i);
        self.tape_offsets.push(offset);
        if let Some(f) = &self.pos_file {
            // Advisory, as a cartridge memory is: a write that fails leaves the
            // directory shorter, and the blocks past it are placed by estimate.
            if f.write_all_at(&offset.to_le_bytes(), lbn * POS_LEN)
                .is_err()
            {
                self.tape_offsets.truncate(i);
                let _ = f.set_len(lbn * POS_LEN);
            }
        }
    }

    fn end_offset(&self) -> u64 {
        self.objects.last().map(|o| o.end()).unwrap_or(0)
    }

    /// Ends the cartridge at object `pos` (a write there replaces everything after
    /// it, as on tape), and cuts a torn write's bytes after the last object.
    fn truncate_files(&mut self, pos: usize) -> Result<()> {
        self.objects.truncate(pos);
        self.cut_directory(pos);
        let end = self.end_offset();
        let what = || format!("truncate cartridge {}", self.name);
        io(what, self.data.set_len(end))?;
        io(what, self.idx.set_len(self.objects.len() as u64 * IDX_LEN))?;
        self.data_len = end;
        Ok(())
    }

    fn append(&mut self, kind: u32, data: &[u8]) -> Result<()> {
        if self.write_protected {
            return Err(DeviceError::WriteProtected);
        }
        if self.read_only {
            return Err(DeviceError::Io(
                format!("write cartridge {}", self.name),
                std::io::Error::from_raw_os_error(libc::EROFS),
            ));
        }
        if !self.certain && self.pos > 0 {
            // Appending after objects that are only a guess could bury or cut data.
            return Err(Corruption::CartridgeIndex {
                barcode: self.name.clone(),
            }
            .into());
        }
        if self.pos < self.objects.len() || self.data_len > self.end_offset() {
            self.truncate_files(self.pos)?;
            self.certain = true;
        }
        let offset = self.end_offset();
        let what = || format!("write cartridge {}", self.name);
        let header_only = self.headers_only
            && kind == KIND_BLOCK
            && tapeloom_format::block_stream(data).is_some_and(|s| {
                s != tapeloom_format::CONTROL_STREAM && s != tapeloom_format::CONTINUATION_STREAM
            });
        let kind = if header_only {
            let kept = &data[..tapeloom_format::BLOCK_HEADER_LEN];
            io(what, self.data.write_all_at(kept, offset))?;
            // The rest of the block is a hole, so the data file still ends where
            // the index says the cartridge does.
            io(what, self.data.set_len(offset + data.len() as u64))?;
            KIND_HEADER_ONLY
        } else {
            io(what, self.data.write_all_at(data, offset))?;
            kind
        };
        let o = Object {
            offset,
            len: data.len() as u32,
            kind,
        };
        io(
            what,
            self.idx
                .write_all_at(&o.encode(), self.objects.len() as u64 * IDX_LEN),
        )?;
        self.data_len = self.data_len.max(o.end());
        self.cut_directory(self.objects.len());
        self.objects.push(o);
        self.pos = self.objects.len();
        self.write_behind();
        Ok(())
    }

    /// Starts writing the data written since the last call out to disk, without
    /// waiting for it, once there is enough of it; then waits for the window handed
    /// over the time before and drops it from the page cache.
    fn write_behind(&mut self) {
        let end = self.end_offset();
        if end < self.handed {
            // Rewritten from an earlier point.
            self.handed = end;
            self.dropped = self.dropped.min(end);
        }
        if end - self.handed < WRITE_BEHIND {
            return;
        }
        // Only advice: a failure leaves dirty pages to the kernel's own writeback, and
        // the flush at the next filemark or unload reports any write error.
        let _ = crate::fsio::start_writeback(&self.data, self.handed, end - self.handed);
        if self.dropped < self.handed {
            let (from, len) = (self.dropped, self.handed - self.dropped);
            if crate::fsio::wait_writeback(&self.data, from, len).is_ok() {
                let len = std::num::NonZeroU64::new(len);
                let _ = rustix::fs::fadvise(&self.data, from, len, rustix::fs::Advice::DontNeed);
            }
        }
        self.dropped = self.handed;
        self.handed = end;
    }

    fn outcome(&self) -> WriteOutcome {
        if self.end_offset() >= self.capacity.saturating_sub(self.early_warning) {
            WriteOutcome::EarlyWarning
        } else {
            WriteOutcome::Written
        }
    }

    fn sync(&self) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        let what = || format!("sync cartridge {}", self.name);
        io(what, self.data.sync_data())?;
        io(what, self.idx.sync_data())
    }
}

/// A drive of the virtual library, or a stand-alone one for tests.
pub struct VirtualDrive {
    name: String,
    tape: Option<VirtualTape>,
    offline: bool,
    /// Bytes written and read since the last load, for the volume statistics.
    mount_written: u64,
    mount_read: u64,
    /// A write was refused because the cartridge is write protected (TapeAlert 09h).
    refused_write: bool,
}

impl VirtualDrive {
    /// A drive with `tape` loaded (or empty).
    pub fn new(name: impl Into<String>, tape: Option<VirtualTape>) -> Self {
        VirtualDrive {
            name: name.into(),
            tape,
            offline: false,
            mount_written: 0,
            mount_read: 0,
            refused_write: false,
        }
    }

    /// Takes the cartridge out, leaving the drive empty.
    pub fn eject(&mut self) -> Option<VirtualTape> {
        self.tape.take()
    }

    fn tape(&mut self) -> Result<&mut VirtualTape> {
        if self.offline {
            return Err(DeviceError::NoMedium);
        }
        self.tape.as_mut().ok_or(DeviceError::NoMedium)
    }
}

impl TapeDrive for VirtualDrive {
    fn describe(&self) -> String {
        match &self.tape {
            Some(t) => format!("virtual drive {} with {}", self.name, t.name),
            None => format!("virtual drive {} (empty)", self.name),
        }
    }

    fn has_medium(&self) -> bool {
        self.tape.is_some() && !self.offline
    }

    fn load(&mut self) -> Result<()> {
        let t = self.tape.as_mut().ok_or(DeviceError::NoMedium)?;
        t.pos = 0;
        self.offline = false;
        self.mount_written = 0;
        self.mount_read = 0;
        self.refused_write = false;
        Ok(())
    }

    fn unload(&mut self) -> Result<()> {
        let t = self.tape()?;
        t.pos = 0;
        t.sync()?;
        self.offline = true;
        Ok(())
    }

    fn write_protected(&self) -> Result<bool> {
        if self.offline {
            return Err(DeviceError::NoMedium);
        }
        Ok(self
            .tape
            .as_ref()
            .ok_or(DeviceError::NoMedium)?
            .write_protected)
    }

    fn rewind(&mut self) -> Result<()> {
        self.tape()?.pos = 0;
        Ok(())
    }

    fn tape_offset(&self, lbn: u64) -> Option<f64> {
        let t = self.tape.as_ref()?;
        t.tape_offsets.get(lbn as usize).copied()
    }

    fn note_tape_offset(&mut self, lbn: u64, offset: f64) {
        if let Some(t) = self.tape.as_mut() {
            t.note_tape_offset(lbn, offset);
        }
    }

    fn block_offset(&self, lbn: u64) -> Option<u64> {
        let t = self.tape.as_ref()?;
        match t.objects.get(lbn as usize) {
            Some(o) => Some(o.offset),
            None => t.objects.last().map(|o| o.offset + o.len as u64),
        }
    }

    fn position(&mut self) -> Result<u64> {
        Ok(self.tape()?.pos as u64)
    }

    fn locate(&mut self, lbn: u64) -> Result<()> {
        let t = self.tape()?;
        if lbn > t.objects.len() as u64 {
            t.pos = t.objects.len();
            return Err(DeviceError::BeyondEndOfData { lbn });
        }
        t.pos = lbn as usize;
        Ok(())
    }

    fn space_to_eod(&mut self) -> Result<()> {
        let t = self.tape()?;
        t.pos = t.objects.len();
        Ok(())
    }

    fn read_block(&mut self, buf: &mut [u8]) -> Result<ReadOutcome> {
        let t = self.tape()?;
        let Some(o) = t.objects.get(t.pos).copied() else {
            return Ok(ReadOutcome::EndOfData);
        };
        t.pos += 1;
        if o.kind == KIND_FILEMARK {
            return Ok(ReadOutcome::Filemark);
        }
        let len = o.len as usize;
        if len > buf.len() {
            return Err(DeviceError::BlockTooLarge { actual: len });
        }
        let name = t.name.clone();
        io(
            || format!("read cartridge {name}"),
            t.data.read_exact_at(&mut buf[..len], o.offset),
        )?;
        // The kept header and a hole: the payload is made again when its source
        // was a generator.
        if o.kind == KIND_HEADER_ONLY && !crate::regenerate::fill(&mut buf[..len]) {
            return Err(DeviceError::NoPayloadKept {
                barcode: name,
                lbn: t.pos as u64 - 1,
            });
        }
        self.mount_read += len as u64;
        Ok(ReadOutcome::Block(len))
    }

    fn write_block(&mut self, data: &[u8]) -> Result<WriteOutcome> {
        let t = self.tape()?;
        if t.write_protected {
            self.refused_write = true;
            return Err(DeviceError::WriteProtected);
        }
        let start = t
            .objects
            .get(t.pos)
            .map(|o| o.offset)
            .unwrap_or_else(|| t.end_offset());
        if start + data.len() as u64 > t.capacity {
            return Err(DeviceError::EndOfMedium);
        }
        t.append(KIND_BLOCK, data)?;
        let outcome = t.outcome();
        self.mount_written += data.len() as u64;
        Ok(outcome)
    }

    fn write_filemarks(&mut self, count: u32, immediate: bool) -> Result<WriteOutcome> {
        let t = self.tape()?;
        for _ in 0..count {
            t.append(KIND_FILEMARK, &[])?;
        }
        if !immediate {
            t.sync()?;
        }
        Ok(t.outcome())
    }

    fn usage(&mut self) -> Result<(u64, u64)> {
        let t = self.tape()?;
        Ok((t.end_offset(), t.capacity))
    }

    /// Each block is in the cartridge file before the write returns.
    fn buffer_bytes(&self) -> Option<u64> {
        Some(0)
    }

    /// Write protect (09h) after a refused write; a virtual drive has no other.
    fn tape_alerts(&mut self) -> Option<crate::TapeAlerts> {
        let mut a = crate::TapeAlerts::default();
        if self.refused_write {
            a = a.with(0x09);
        }
        Some(a)
    }

    /// What a drive with the log pages would say: no TapeAlert flag but Write
    /// protect (09h, a write was refused), and the statistics the cartridge file
    /// gives (this mount's megabytes, capacity, use, write protection).
    fn health(&mut self) -> DriveHealth {
        let Ok(t) = self.tape() else {
            return DriveHealth::default();
        };
        let (used, capacity, protected) = (t.end_offset(), t.capacity, t.write_protected);
        let alerts = if self.refused_write {
            vec!["09h Write protect".to_string()]
        } else {
            Vec::new()
        };
        DriveHealth {
            tape_alerts: Some(alerts),
            volume_statistics: Some(VolumeStatistics {
                last_mount_mb_written: Some(self.mount_written / 1_000_000),
                last_mount_mb_read: Some(self.mount_read / 1_000_000),
                native_capacity_mb: Some(capacity / 1_000_000),
                used_native_capacity_mb: Some(used / 1_000_000),
                write_protected: Some(protected),
                ..Default::default()
            }),
        }
    }
}

/// Whether opening a file to write failed because it may only be read.
/// Opens the tape directory of cartridge `barcode` in `dir` (`BARCODE.pos`,
/// made when missing), and reads its entries for the first `objects` objects;
/// none that is not a finite, rising offset is kept, nor any after it. On a
/// read-only file system the entries are read and none is written.
fn open_directory(dir: &Path, barcode: &str, objects: usize) -> (Option<File>, Vec<f64>) {
    let p = VirtualTape::directory_path(dir, barcode);
    let rw = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&p);
    let writable = rw.is_ok();
    let f = match rw {
        Ok(f) => Some(f),
        Err(_) => OpenOptions::new().read(true).open(&p).ok(),
    };
    let mut raw = Vec::new();
    if let Some(f) = &f {
        let _ = std::io::Read::read_to_end(&mut &*f, &mut raw);
    }
    if objects == 0 {
        // A blank cartridge: what a file left behind says is not of it.
        if let (Some(f), true) = (&f, writable) {
            let _ = f.set_len(0);
        }
        raw.clear();
    }
    let mut offsets = Vec::new();
    for c in raw.chunks_exact(POS_LEN as usize).take(objects) {
        let Ok(b) = <[u8; 8]>::try_from(c) else { break };
        let o = f64::from_le_bytes(b);
        if !o.is_finite() || o < 0.0 || offsets.last().is_some_and(|l: &f64| o < *l) {
            break;
        }
        offsets.push(o);
    }
    (f.filter(|_| writable), offsets)
}

fn is_read_only(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EROFS) | Some(libc::EACCES) | Some(libc::EPERM)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drive(dir: &Path, capacity: u64, ew: u64) -> VirtualDrive {
        VirtualDrive::new(
            "t",
            Some(VirtualTape::open(dir, "T1", capacity, ew, false).unwrap()),
        )
    }

    /// Bytes of `path` in the page cache, as util-linux `fincore` counts them.
    fn cached(path: &Path) -> u64 {
        let out = std::process::Command::new("fincore")
            .args(["--bytes", "--noheadings", "--raw", "--output", "RES"])
            .arg(path)
            .output()
            .expect("fincore (util-linux) runs");
        assert!(out.status.success(), "fincore failed: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    }

    #[test]
    fn a_cartridge_being_written_holds_about_two_windows_of_page_cache() {
        use tapeloom_testkit::need::{need, program};
        if !need(program("fincore", "util-linux-extra")) {
            return;
        }
        // On the disk the build uses, not a tmpfs, whose pages cannot be dropped.
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let mut d = drive(dir.path(), 1 << 30, 1 << 20);
        let block = vec![7u8; 256 << 10];
        let total = 8 * WRITE_BEHIND;
        for _ in 0..total / block.len() as u64 {
            d.write_block(&block).unwrap();
        }
        let (dp, _) = VirtualTape::paths(dir.path(), "T1");
        let held = cached(&dp);
        assert!(
            held <= 3 * WRITE_BEHIND,
            "{held} bytes of {total} written still in the page cache"
        );
        // What was dropped is on disk and reads back.
        d.rewind().unwrap();
        let mut buf = vec![0u8; 1 << 20];
        assert_eq!(
            d.read_block(&mut buf).unwrap(),
            ReadOutcome::Block(block.len())
        );
        assert_eq!(&buf[..block.len()], &block[..]);
    }

    #[test]
    fn survives_reopen_and_torn_writes() {
        let dir = tempfile::tempdir().unwrap();
        let mut d = drive(dir.path(), 1 << 20, 1 << 10);
        d.write_block(&[1; 100]).unwrap();
        d.write_filemarks(1, false).unwrap();
        d.write_block(&[2; 50]).unwrap();
        drop(d);
        // A torn write: bytes in the data file with no index entry, and half an entry.
        let (dp, ip) = VirtualTape::paths(dir.path(), "T1");
        let f = OpenOptions::new().append(true).open(&dp).unwrap();
        // The beginning of a block (its magic) that the crash cut short.
        f.write_all_at(&[&b"TLBK"[..], &[9; 73]].concat(), 150)
            .unwrap();
        let f = OpenOptions::new().append(true).open(&ip).unwrap();
        f.write_all_at(&[1; 7], 48).unwrap();
        let mut d = drive(dir.path(), 1 << 20, 1 << 10);
        d.space_to_eod().unwrap();
        assert_eq!(d.position().unwrap(), 3);
        assert_eq!(d.usage().unwrap().0, 150);
        d.locate(2).unwrap();
        let mut buf = vec![0; 200];
        assert_eq!(d.read_block(&mut buf).unwrap(), ReadOutcome::Block(50));
        // Reading changed nothing in the data; the next write cuts the torn bytes.
        assert_eq!(std::fs::metadata(&dp).unwrap().len(), 227);
        d.write_block(&[3; 10]).unwrap();
        assert_eq!(std::fs::metadata(&dp).unwrap().len(), 160);
        assert_eq!(std::fs::metadata(&ip).unwrap().len(), 64);
    }

    #[test]
    fn write_protect() {
        let dir = tempfile::tempdir().unwrap();
        let mut d = VirtualDrive::new(
            "t",
            Some(VirtualTape::open(dir.path(), "T1", 1 << 20, 1024, true).unwrap()),
        );
        assert!(matches!(
            d.write_block(&[0; 10]),
            Err(DeviceError::WriteProtected)
        ));
        assert!(d.write_protected().unwrap());
        // The refused write raises TapeAlert 09h until the next load.
        let h = d.health();
        assert_eq!(h.tape_alerts, Some(vec!["09h Write protect".to_string()]));
        assert_eq!(h.volume_statistics.unwrap().write_protected, Some(true));
        d.load().unwrap();
        assert_eq!(d.health().tape_alerts, Some(vec![]));
    }

    #[test]
    fn health_counts_this_mount() {
        let dir = tempfile::tempdir().unwrap();
        let mut d = drive(dir.path(), 10_000_000, 1 << 10);
        for _ in 0..3 {
            d.write_block(&[7; 1_000_000]).unwrap();
        }
        d.rewind().unwrap();
        let mut buf = vec![0; 1 << 20];
        d.read_block(&mut buf).unwrap();
        let v = d.health().volume_statistics.unwrap();
        assert_eq!(v.last_mount_mb_written, Some(3));
        assert_eq!(v.last_mount_mb_read, Some(1));
        assert_eq!(v.used_native_capacity_mb, Some(3));
        assert_eq!(v.native_capacity_mb, Some(10));
        d.unload().unwrap();
        assert_eq!(d.health(), DriveHealth::default());
        d.load().unwrap();
        let v = d.health().volume_statistics.unwrap();
        assert_eq!(
            (v.last_mount_mb_written, v.last_mount_mb_read),
            (Some(0), Some(0))
        );
        assert_eq!(v.used_native_capacity_mb, Some(3));
    }
}
