//! The time model of an LTO drive: a buffer between the host and a tape that moves
//! at one of a few speeds, stops when the buffer runs dry, and positions along a
//! serpentine track. Pure arithmetic on modeled seconds; no I/O and no sleeping.

use super::params::LtoParams;
use crate::DriveStats;

/// How long the drive measures the host's rate before it trusts the figure.
const RATE_WINDOW_S: f64 = 1.0;

/// Where the drive is in its write cycle.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Motion {
    Streaming,
    Stopped,
}

/// The modeled state of one drive.
#[derive(Debug, Clone)]
pub struct TapeModel {
    p: LtoParams,
    steps: Vec<f64>,
    step: usize,
    motion: Motion,
    /// Modeled time, seconds.
    pub now: f64,
    /// Tape bytes waiting in the buffer.
    buf: f64,
    /// The tape cannot move before this time (backhitch, locate).
    ready_at: f64,
    /// Tape position, in native bytes from the beginning of the tape.
    pub tape_pos: f64,
    /// The host's rate as the drive measures it (tape bytes per second, smoothed).
    rate: f64,
    window_start: f64,
    window_bytes: f64,
    /// Counters.
    pub stats: DriveStats,
}

impl TapeModel {
    /// A drive with a loaded, positioned cartridge at time 0.
    pub fn new(p: LtoParams) -> Self {
        let steps = p.speed_steps();
        let stats = DriveStats {
            speed_steps_mb_s: steps.iter().map(|s| s / 1e6).collect(),
            seconds_at_step: vec![0.0; steps.len()],
            ..Default::default()
        };
        TapeModel {
            step: steps.len() - 1,
            steps,
            p,
            motion: Motion::Stopped,
            now: 0.0,
            buf: 0.0,
            ready_at: 0.0,
            tape_pos: 0.0,
            rate: f64::INFINITY,
            window_start: 0.0,
            window_bytes: 0.0,
            stats,
        }
    }

    /// The highest step at or below the host's rate (the lowest step when the host
    /// is slower than all of them): the buffer fills at this speed.
    fn step_below_rate(&self) -> usize {
        self.steps
            .iter()
            .rposition(|&s| s <= self.rate)
            .unwrap_or(0)
    }

    /// The lowest step at or above the host's rate (the top step when the host is
    /// faster): the buffer drains at this speed.
    fn step_above_rate(&self) -> usize {
        self.steps
            .iter()
            .position(|&s| s >= self.rate)
            .unwrap_or(self.steps.len() - 1)
    }

    /// The parameters in use (after scaling).
    pub fn params(&self) -> &LtoParams {
        &self.p
    }

    fn speed(&self) -> f64 {
        self.steps[self.step]
    }

    fn low_mark(&self) -> f64 {
        self.p.buffer_bytes * 0.25
    }

    fn high_mark(&self) -> f64 {
        self.p.buffer_bytes * 0.75
    }

    fn stream_for(&mut self, d: f64) {
        let moved = self.speed() * d;
        self.buf -= moved;
        if self.buf < 0.0 {
            self.buf = 0.0;
        }
        self.tape_pos += moved;
        self.stats.streaming_seconds += d;
        self.stats.seconds_at_step[self.step] += d;
        self.now += d;
    }

    fn start(&mut self) {
        if self.now < self.ready_at {
            self.stats.stopped_seconds += self.ready_at - self.now;
            self.now = self.ready_at;
        }
        self.motion = Motion::Streaming;
        self.step = self.step_above_rate();
    }

    /// Lets the tape run until `t`: it drains the buffer, steps down as the buffer
    /// falls, and stops (a backhitch) when it runs dry.
    pub fn advance(&mut self, t: f64) {
        while self.now < t {
            match self.motion {
                Motion::Stopped => {
                    let can_go = self.buf >= self.p.restart_fill * self.p.buffer_bytes
                        || self.buf >= self.p.buffer_bytes - 1.0;
                    if can_go && self.ready_at < t {
                        self.start();
                    } else {
                        self.stats.stopped_seconds += t - self.now;
                        self.now = t;
                    }
                }
                Motion::Streaming => {
                    let s = self.speed();
                    // Next event: the buffer falls to the low mark, where the drive slows
                    // to just below the host's rate, or it runs dry.
                    let low = self.low_mark();
                    let down = self.step_below_rate();
                    if down < self.step && self.buf <= low {
                        self.step = down;
                        continue;
                    }
                    let target = if down < self.step { low } else { 0.0 };
                    let dt = (self.buf - target) / s;
                    if self.now + dt <= t {
                        self.stream_for(dt);
                        if target > 0.0 {
                            self.step = down;
                        } else {
                            self.motion = Motion::Stopped;
                            self.stats.backhitches += 1;
                            self.ready_at = self.now + self.p.backhitch_s;
                        }
                    } else {
                        self.stream_for(t - self.now);
                    }
                }
            }
        }
    }

    /// The host writes one block of `host` bytes that take `tape` bytes on tape,
    /// offered at time `offered`. Returns when the command completes: when the block
    /// is in the drive's buffer.
    pub fn write(&mut self, host: f64, tape: f64, offered: f64) -> f64 {
        let t0 = self.now.max(offered);
        self.advance(t0);
        self.advance(t0 + self.p.command_s + host / (self.p.interface_mb_s * 1e6));
        let mut held = false;
        // A block larger than the whole buffer (a drive scaled far down) waits only
        // for an empty buffer, then streams through it.
        while self.buf > 0.0 && self.buf + tape > self.p.buffer_bytes {
            held = true;
            if self.motion == Motion::Stopped {
                self.start();
            }
            let wait = (self.buf + tape - self.p.buffer_bytes) / self.speed() + 1e-9;
            self.advance(self.now + wait);
        }
        self.buf += tape;
        self.stats.host_bytes += host as u64;
        self.stats.tape_bytes += tape as u64;
        // The drive measures the host's rate over windows of about a second.
        self.window_bytes += tape;
        let span = self.now - self.window_start;
        if span >= RATE_WINDOW_S {
            let measured = self.window_bytes / span;
            self.rate = if self.rate.is_finite() {
                (self.rate + measured) / 2.0
            } else {
                measured
            };
            self.window_start = self.now;
            self.window_bytes = 0.0;
        } else if !self.rate.is_finite() && span > 0.05 {
            self.rate = self.window_bytes / span;
        }
        if self.motion == Motion::Streaming && self.buf > self.high_mark() {
            // Filling up: speed up to just above the host's rate.
            self.step = self.step.max(self.step_above_rate());
            if held {
                // The host had to wait for room: its rate as measured is the tape's,
                // not what it could give. One step faster.
                self.step = (self.step + 1).min(self.steps.len() - 1);
            }
        }
        if self.motion == Motion::Stopped
            && self.buf >= self.p.restart_fill * self.p.buffer_bytes
            && self.now >= self.ready_at
        {
            self.motion = Motion::Streaming;
            self.step = self.step_above_rate();
        }
        self.now
    }

    /// Writes everything in the buffer to tape and stops: what a filemark without the
    /// immediate bit (or any flush) does. Costs the drain and a backhitch.
    pub fn flush(&mut self) -> f64 {
        if self.buf > 0.0 {
            if self.motion == Motion::Stopped {
                self.start();
            }
            let s = self.speed();
            let d = self.buf / s;
            self.stream_for(d);
        }
        if self.motion == Motion::Streaming {
            self.motion = Motion::Stopped;
            self.stats.backhitches += 1;
            self.ready_at = self.now + self.p.backhitch_s;
        }
        self.now
    }

    /// A filemark: with the immediate bit it costs a command; without it, a flush.
    pub fn filemark(&mut self, immediate: bool) -> f64 {
        self.stats.filemarks += 1;
        if immediate {
            let t = self.now + self.p.filemark_immediate_s;
            self.advance(t);
            self.now
        } else {
            self.flush()
        }
    }

    /// Longitudinal position (metres from the beginning) and wrap of a tape offset.
    pub fn geometry(&self, pos: f64) -> (f64, u32) {
        let wb = self.p.wrap_bytes();
        let wrap = ((pos / wb).floor() as u32).min(self.p.wraps - 1);
        let frac = ((pos - wrap as f64 * wb) / wb).clamp(0.0, 1.0);
        let along = if wrap.is_multiple_of(2) {
            frac
        } else {
            1.0 - frac
        };
        (along * self.p.tape_m, wrap)
    }

    /// Modeled seconds to locate from tape offset `from` to `to` (native bytes).
    pub fn locate_seconds(&self, from: f64, to: f64) -> f64 {
        let (xa, wa) = self.geometry(from);
        let (xb, wb) = self.geometry(to);
        let wraps = if wa == wb { 0.0 } else { self.p.wrap_change_s };
        self.p.locate_overhead_s + (xa - xb).abs() / self.p.locate_m_s + wraps
    }

    /// Locates to tape offset `to`: flushes what is buffered first.
    pub fn locate(&mut self, to: f64) -> f64 {
        self.flush();
        let d = self.locate_seconds(self.tape_pos, to);
        self.stats.locates += 1;
        self.stats.locate_seconds += d;
        self.now = self.now.max(self.ready_at) + d;
        self.ready_at = self.now;
        self.tape_pos = to;
        self.now
    }

    /// Reads `host` bytes that take `tape` bytes on tape, streaming at full speed.
    pub fn read(&mut self, host: f64, tape: f64) -> f64 {
        let tape_time = tape / self.p.native();
        let host_time = self.p.command_s + host / (self.p.interface_mb_s * 1e6);
        let d = tape_time.max(host_time);
        self.now = self.now.max(self.ready_at) + d;
        self.tape_pos += tape;
        self.stats.host_bytes_read += host as u64;
        self.stats.streaming_seconds += tape_time;
        self.now
    }

    /// Rewinds to the beginning of the tape.
    pub fn rewind(&mut self) -> f64 {
        self.flush();
        let (x, _) = self.geometry(self.tape_pos);
        self.now = self.now.max(self.ready_at) + x / self.p.locate_m_s + 1.0;
        self.tape_pos = 0.0;
        self.ready_at = self.now;
        self.now
    }

    /// Load (and, for a new cartridge of a generation that needs it, calibration).
    pub fn load(&mut self, new_cartridge: bool) -> f64 {
        self.stats.loads += 1;
        self.now += self.p.load_s;
        if new_cartridge && self.p.first_load_calibration_s > 0.0 {
            self.now += self.p.first_load_calibration_s;
            self.stats.calibration_seconds += self.p.first_load_calibration_s;
        }
        self.tape_pos = 0.0;
        self.ready_at = self.now;
        self.now
    }

    /// Rewind and unload.
    pub fn unload(&mut self) -> f64 {
        self.rewind();
        self.stats.unloads += 1;
        self.now += self.p.unload_s;
        self.now
    }

    /// The statistics with the modeled time filled in.
    pub fn snapshot(&self) -> DriveStats {
        let mut s = self.stats.clone();
        s.modeled_seconds = self.now;
        s.buffer_fill = (self.buf / self.p.buffer_bytes.max(1.0)).clamp(0.0, 1.0);
        s.speed_now_mb_s = match self.motion {
            Motion::Stopped => 0.0,
            _ => self.steps[self.step] / 1e6,
        };
        s
    }
}
