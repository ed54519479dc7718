//! A model of LTO drives, generations 1 to 10, that adds time to any [`TapeDrive`].
//!
//! [`LtoDrive`] passes every command to the drive it wraps (the virtual drive, or a
//! [`crate::NullDrive`] when the data need not be kept) and runs the same command
//! through [`TapeModel`], which knows how long a real drive would take. With
//! [`Clock::Virtual`] modeled time is only added up, so a long benchmark runs in
//! seconds; with [`Clock::Real`] every command returns when a real drive's would, so a
//! multi-threaded writer feels real backpressure.

mod model;
mod params;

pub use model::TapeModel;
pub use params::{generation, generations, LtoParams};

use crate::{DriveHealth, DriveStats, ReadOutcome, Result, TapeDrive, Travel, WriteOutcome};
use std::time::{Duration, Instant};

/// How modeled time relates to wall-clock time. Stored (in `library.json`) and
/// parsed as `virtual` or `real`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Clock {
    /// Add up modeled time; never sleep.
    #[default]
    Virtual,
    /// Block the caller until the modeled time has passed.
    Real,
}

impl Clock {
    /// `virtual` or `real`.
    pub fn as_str(self) -> &'static str {
        match self {
            Clock::Virtual => "virtual",
            Clock::Real => "real",
        }
    }
}

impl std::fmt::Display for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A clock name other than `virtual` or `real`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown clock {0:?} (virtual or real)")]
pub struct UnknownClock(pub String);

impl std::str::FromStr for Clock {
    type Err = UnknownClock;
    fn from_str(s: &str) -> std::result::Result<Clock, UnknownClock> {
        match s {
            "virtual" => Ok(Clock::Virtual),
            "real" => Ok(Clock::Real),
            _ => Err(UnknownClock(s.to_string())),
        }
    }
}

/// How many host bytes the drive's compressor turns into one tape byte, estimated
/// from the data with LZ4 (a fast LZ77-class compressor, as LTO's SLDC is). Large
/// blocks are sampled: four 8 KiB slices spread over the block. Data that does not
/// shrink is stored as it is (ratio 1), as LTO-2 and later drives do.
pub struct CompressionEstimator {
    out: Vec<u8>,
}

impl Default for CompressionEstimator {
    fn default() -> Self {
        Self::new()
    }
}

impl CompressionEstimator {
    /// An estimator with its own scratch buffer.
    pub fn new() -> Self {
        CompressionEstimator { out: Vec::new() }
    }

    fn compressed(&mut self, data: &[u8]) -> usize {
        let need = lz4_flex::block::get_maximum_output_size(data.len());
        if self.out.len() < need {
            self.out.resize(need, 0);
        }
        lz4_flex::block::compress_into(data, &mut self.out).unwrap_or(data.len())
    }

    /// The ratio for `data`, between 1 and `max`.
    pub fn ratio(&mut self, data: &[u8], max: f64) -> f64 {
        if data.is_empty() {
            return 1.0;
        }
        const SLICE: usize = 8 * 1024;
        let (raw, packed) = if data.len() <= 4 * SLICE {
            (data.len(), self.compressed(data))
        } else {
            let stride = (data.len() - SLICE) / 3;
            let mut packed = 0;
            for i in 0..4 {
                let at = i * stride;
                packed += self.compressed(&data[at..at + SLICE]);
            }
            (4 * SLICE, packed)
        };
        (raw as f64 / packed.max(1) as f64).clamp(1.0, max)
    }
}

/// Blocks shorter than this do not count toward the compression seen in reads.
const MIN_SEEN: usize = 4096;

/// How far modeled time may run ahead of the wall clock with the real clock. A
/// command on a fast drive takes less than a sleep costs: a 256 KiB block crosses
/// LTO-9's 1,200 MB/s interface in 0.22 ms, and a sleep wakes 0.05 to 0.1 ms late.
/// Sleeping to the end of every command would add that lateness to each block
/// (the host would seem to offer its blocks a third slower than it does), so the
/// drive answers at once while the wall clock is within this of modeled time, and
/// sleeps only past it. Time still adds up: the wall clock never lags by more.
pub const REAL_LEAD: Duration = Duration::from_millis(2);

/// A tape drive with the timing of an LTO generation.
pub struct LtoDrive<D: TapeDrive> {
    inner: D,
    model: TapeModel,
    clock: Clock,
    compression: bool,
    estimator: CompressionEstimator,
    wall0: Instant,
    offered: f64,
    /// Tape offset (native bytes) of each logical block written, for locates.
    offsets: Vec<f64>,
    calibrated: bool,
    /// Host and tape bytes read so far: the compression seen, for placing blocks
    /// this drive did not write.
    read_host: f64,
    read_tape: f64,
    /// Host bytes per tape byte used to place the blocks this drive did not
    /// write, fixed at the first placing after a load: plans made from the
    /// places and the moves made to them then agree.
    map_ratio: std::cell::Cell<Option<f64>>,
}

impl<D: TapeDrive> LtoDrive<D> {
    /// Wraps `inner`. `calibrated` says whether the cartridge has had its first-load
    /// calibration (LTO-9 and later).
    pub fn new(inner: D, params: LtoParams, clock: Clock, compression: bool) -> Self {
        LtoDrive {
            inner,
            model: TapeModel::new(params),
            clock,
            compression,
            estimator: CompressionEstimator::new(),
            wall0: Instant::now(),
            offered: 0.0,
            offsets: Vec::new(),
            calibrated: true,
            read_host: 0.0,
            read_tape: 0.0,
            map_ratio: std::cell::Cell::new(None),
        }
    }

    /// Marks the cartridge as new: its first load runs the calibration.
    pub fn new_cartridge(mut self) -> Self {
        self.calibrated = false;
        self
    }

    /// The model, for reports.
    pub fn model(&self) -> &TapeModel {
        &self.model
    }

    /// The drive underneath.
    pub fn inner(&mut self) -> &mut D {
        &mut self.inner
    }

    /// The next write is offered no earlier than modeled time `t`: how a host slower
    /// than the drive is modeled.
    pub fn offer_at(&mut self, t: f64) {
        self.offered = t;
    }

    /// Modeled seconds so far.
    pub fn now(&self) -> f64 {
        self.model.now
    }

    /// With the real clock, returns once the wall clock is within [`REAL_LEAD`] of
    /// modeled time `t`.
    fn wait(&self, t: f64) {
        if self.clock == Clock::Real {
            let due = self.wall0 + Duration::from_secs_f64(t.max(0.0));
            let now = Instant::now();
            if due > now + REAL_LEAD {
                std::thread::sleep(due - now - REAL_LEAD);
            }
        }
    }

    /// Host bytes per tape byte seen so far (1 before anything was read or written).
    fn ratio_seen(&self) -> f64 {
        if self.read_tape > 0.0 {
            self.read_host / self.read_tape
        } else if self.model.stats.tape_bytes > 0 {
            self.model.stats.compression_ratio()
        } else {
            1.0
        }
    }

    /// Where block `lbn` lies on tape (native bytes), when known: as written by
    /// this drive, else as the drive that wrote it recorded it on the cartridge
    /// (its tape directory), else from the cartridge's block offsets and the
    /// compression seen when the first block was placed after the load.
    fn known_offset(&self, lbn: u64) -> Option<f64> {
        if let Some(&o) = self.offsets.get(lbn as usize) {
            return Some(o);
        }
        // Where the drive that wrote it recorded it on the cartridge.
        if let Some(o) = self.inner.tape_offset(lbn) {
            return Some(o);
        }
        let b = self.inner.block_offset(lbn)?;
        let ratio = match self.map_ratio.get() {
            Some(r) => r,
            None => {
                let r = self.ratio_seen();
                self.map_ratio.set(Some(r));
                r
            }
        };
        Some(b as f64 / ratio)
    }

    /// Where block `lbn` lies on tape (native bytes): [`Self::known_offset`], else
    /// estimated from the mean block written.
    fn offset_of(&self, lbn: u64) -> f64 {
        if let Some(o) = self.known_offset(lbn) {
            return o;
        }
        let n = self.offsets.len().max(1) as f64;
        let mean = self.model.stats.tape_bytes as f64 / n;
        lbn as f64 * mean
    }

    fn note_offset(&mut self, lbn: u64, at: f64) {
        // The cartridge keeps it too, for a drive that loads it later.
        self.inner.note_tape_offset(lbn, at);
        let i = lbn as usize;
        if i < self.offsets.len() {
            self.offsets.truncate(i);
        }
        if i == self.offsets.len() {
            self.offsets.push(at);
        }
    }
}

impl<D: TapeDrive> TapeDrive for LtoDrive<D> {
    fn describe(&self) -> String {
        format!(
            "{} model on {}",
            self.model.params().name,
            self.inner.describe()
        )
    }

    fn has_medium(&self) -> bool {
        self.inner.has_medium()
    }

    fn load(&mut self) -> Result<()> {
        self.inner.load()?;
        self.map_ratio.set(None);
        let t = self.model.load(!self.calibrated);
        self.calibrated = true;
        self.wait(t);
        Ok(())
    }

    fn unload(&mut self) -> Result<()> {
        self.inner.unload()?;
        self.map_ratio.set(None);
        let t = self.model.unload();
        self.wait(t);
        Ok(())
    }

    fn write_protected(&self) -> Result<bool> {
        self.inner.write_protected()
    }

    fn rewind(&mut self) -> Result<()> {
        self.inner.rewind()?;
        let t = self.model.rewind();
        self.wait(t);
        Ok(())
    }

    fn position(&mut self) -> Result<u64> {
        self.inner.position()
    }

    fn locate(&mut self, lbn: u64) -> Result<()> {
        self.inner.locate(lbn)?;
        let to = self.offset_of(lbn);
        let t = self.model.locate(to);
        self.wait(t);
        Ok(())
    }

    fn space_to_eod(&mut self) -> Result<()> {
        self.inner.space_to_eod()?;
        let lbn = self.inner.position()?;
        let to = self.offset_of(lbn);
        if (to - self.model.tape_pos).abs() > 0.5 {
            let t = self.model.locate(to);
            self.wait(t);
        }
        Ok(())
    }

    fn read_block(&mut self, buf: &mut [u8]) -> Result<ReadOutcome> {
        let r = self.inner.read_block(buf)?;
        if let ReadOutcome::Block(n) = r {
            let ratio = if self.compression {
                self.estimator
                    .ratio(&buf[..n], self.model.params().max_compression)
            } else {
                1.0
            };
            // Labels and other short records say nothing of the data's
            // compression: a zero-padded label alone would make every block
            // seem four times closer than it is.
            if n >= MIN_SEEN {
                self.read_host += n as f64;
                self.read_tape += n as f64 / ratio;
            }
            let t = self.model.read(n as f64, n as f64 / ratio);
            // The head stands where the next block is placed, so that locates
            // from here cost what a plan made from the places says.
            if let Some(at) = (self.inner.position().ok()).and_then(|l| self.known_offset(l)) {
                self.model.tape_pos = at;
            }
            self.wait(t);
        }
        Ok(r)
    }

    fn write_block(&mut self, data: &[u8]) -> Result<WriteOutcome> {
        let lbn = self.inner.position()?;
        let out = self.inner.write_block(data)?;
        let ratio = if self.compression {
            self.estimator
                .ratio(data, self.model.params().max_compression)
        } else {
            1.0
        };
        let at = self.model.tape_pos + 0.0;
        self.note_offset(lbn, at);
        if self.clock == Clock::Real {
            // The block arrives now: a host slower than the tape lets the buffer
            // drain in the meantime, as on a real drive.
            self.offered = self.offered.max(self.wall0.elapsed().as_secs_f64());
        }
        let t = self
            .model
            .write(data.len() as f64, data.len() as f64 / ratio, self.offered);
        self.wait(t);
        Ok(out)
    }

    fn write_filemarks(&mut self, count: u32, immediate: bool) -> Result<WriteOutcome> {
        let lbn = self.inner.position()?;
        let out = self.inner.write_filemarks(count, immediate)?;
        let mut t = self.model.now;
        for i in 0..count {
            self.note_offset(lbn + i as u64, self.model.tape_pos);
            t = self.model.filemark(immediate);
        }
        if count == 0 && !immediate {
            // No filemark, only the flush of the drive's buffer to tape.
            t = self.model.flush();
        }
        self.wait(t);
        Ok(out)
    }

    fn usage(&mut self) -> Result<(u64, u64)> {
        self.inner.usage()
    }

    fn stats(&self) -> Option<DriveStats> {
        Some(self.model.snapshot())
    }

    fn streaming_rate(&mut self, sample: &[u8]) -> Option<f64> {
        let ratio = if self.compression {
            self.estimator
                .ratio(sample, self.model.params().max_compression)
        } else {
            1.0
        };
        Some(self.model.params().native() * ratio)
    }

    fn tape_alerts(&mut self) -> Option<crate::TapeAlerts> {
        self.inner.tape_alerts()
    }

    /// The modeled buffer only times the writes: each block is in the cartridge
    /// file before the write returns, as the drive under the model has it.
    fn buffer_bytes(&self) -> Option<u64> {
        self.inner.buffer_bytes()
    }

    /// The cartridge's health as the drive under the model reports it, with the
    /// compression the model saw since this drive was opened.
    fn health(&mut self) -> DriveHealth {
        let mut h = self.inner.health();
        let s = self.model.snapshot();
        if let Some(v) = h.volume_statistics.as_mut() {
            if s.tape_bytes > 0 {
                v.last_load_write_compression_ratio =
                    Some((s.compression_ratio() * 100.0).round() / 100.0);
            }
        }
        h
    }

    fn block_offset(&self, lbn: u64) -> Option<u64> {
        self.inner.block_offset(lbn)
    }

    fn tape_offset(&self, lbn: u64) -> Option<f64> {
        self.known_offset(lbn)
    }

    fn note_tape_offset(&mut self, lbn: u64, offset: f64) {
        self.inner.note_tape_offset(lbn, offset);
    }

    fn set_compression(&mut self, on: bool) -> Result<bool> {
        self.compression = on;
        Ok(true)
    }

    fn travel_seconds(&self, from: u64, to: u64) -> Option<Travel> {
        let (a, b) = (self.offset_of(from), self.offset_of(to));
        let p = self.model.params();
        let host = match (self.inner.block_offset(from), self.inner.block_offset(to)) {
            (Some(x), Some(y)) => y.saturating_sub(x) as f64,
            _ => (b - a).max(0.0) * self.ratio_seen(),
        };
        let blocks = to.saturating_sub(from) as f64;
        // Reading takes the compression seen so far, as the reads themselves do.
        let tape = host / self.ratio_seen();
        let read = match to < from {
            true => f64::INFINITY,
            false => (tape.max(0.0) / p.native())
                .max(blocks * p.command_s + host / (p.interface_mb_s * 1e6)),
        };
        Some(Travel {
            locate: self.model.locate_seconds(a, b),
            read,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NullDrive;

    #[test]
    fn random_data_does_not_compress_and_zeros_do() {
        let mut e = CompressionEstimator::new();
        let mut x = 88172645463325252u64;
        let random: Vec<u8> = (0..262144)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        assert_eq!(e.ratio(&random, 4.0), 1.0);
        assert_eq!(e.ratio(&vec![0u8; 262144], 4.0), 4.0);
    }

    #[test]
    fn a_slow_source_makes_backhitches_and_a_fast_one_streams() {
        let p = generation("lto3").unwrap();
        let block = 262144.0;
        for (rate, expect_stops) in [(20e6, true), (40e6, false), (1e12, false)] {
            let mut m = TapeModel::new(p.clone());
            let mut offered = 0.0;
            for _ in 0..8000 {
                m.write(block, block, offered);
                offered += block / rate;
            }
            m.flush();
            let s = m.snapshot();
            // The final flush always stops the tape once.
            assert_eq!(s.backhitches > 1, expect_stops, "rate {rate}: {s:?}");
        }
    }

    #[test]
    fn a_block_larger_than_a_scaled_down_buffer_does_not_hang() {
        // LTO-3 at scale 0.001 has a 131 KiB buffer: a 256 KiB block once made the
        // model wait forever for room.
        let p = generation("lto3").unwrap().scaled(0.001);
        let block = 262144.0;
        assert!(p.buffer_bytes < block);
        let mut m = TapeModel::new(p.clone());
        for _ in 0..64 {
            m.write(block, block, 0.0);
        }
        m.flush();
        let s = m.snapshot();
        let rate = s.tape_bytes as f64 / s.modeled_seconds;
        // It cannot beat the native speed, and it still moves.
        assert!(
            rate > 0.0 && rate <= p.native_mb_s * 1e6 * 1.001,
            "{rate} {s:?}"
        );
    }

    /// Blocks of data that compress about 2:1 (half random bytes, half zeros).
    fn half_random(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        let mut b = vec![0u8; n];
        for v in b.iter_mut().take(n / 2) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *v = x as u8;
        }
        b
    }

    #[test]
    fn a_cartridge_loaded_again_is_placed_where_its_compressed_blocks_lie() {
        let dir = tempfile::tempdir().unwrap();
        let open = || {
            let t = crate::VirtualTape::open(dir.path(), "T1", 1 << 34, 1 << 20, false).unwrap();
            crate::VirtualDrive::new("d", Some(t))
        };
        let p = generation("lto3").unwrap().scaled(0.001);
        let mut d = LtoDrive::new(open(), p.clone(), Clock::Virtual, true);
        for i in 0..64 {
            d.write_block(&half_random(262144, i + 1)).unwrap();
        }
        d.write_filemarks(1, false).unwrap();
        let written: Vec<f64> = (0..65).map(|l| d.known_offset(l).unwrap()).collect();
        // Compressed about 2:1: the last block lies about half way along what
        // the host bytes would take.
        assert!(written[63] < 0.6 * 63.0 * 262144.0, "{}", written[63]);
        drop(d);
        // Loaded again by another drive: placed where they were written, not
        // where the host bytes alone would put them.
        let again = LtoDrive::new(open(), p.clone(), Clock::Virtual, true);
        let placed: Vec<f64> = (0..65).map(|l| again.known_offset(l).unwrap()).collect();
        assert_eq!(placed, written);
        // A cartridge written again from block 10 by a drive with no model
        // keeps its directory for the first 10 blocks only.
        let mut plain = open();
        plain.locate(10).unwrap();
        plain.write_block(&half_random(262144, 99)).unwrap();
        drop(plain);
        let after = LtoDrive::new(open(), p, Clock::Virtual, true);
        assert_eq!(after.inner.tape_offset(9), Some(written[9]));
        assert_eq!(after.inner.tape_offset(10), None);
    }

    #[test]
    fn null_drive_carries_the_model() {
        let mut d = LtoDrive::new(
            NullDrive::new(1 << 40, 1 << 30),
            generation("lto9").unwrap(),
            Clock::Virtual,
            false,
        );
        let block = vec![0u8; 262144];
        for _ in 0..40000 {
            d.write_block(&block).unwrap();
        }
        d.write_filemarks(1, false).unwrap();
        let s = d.stats().unwrap();
        let rate = s.host_bytes as f64 / s.modeled_seconds / 1e6;
        assert!(rate > 380.0 && rate < 410.0, "{rate}");
    }
}
