//! The parameters of each LTO generation. Where each figure comes from is in
//! `docs/DRIVE-MODEL.md`.

/// One LTO generation as the model sees it. Rates are in bytes per second of tape
/// data (before the drive's compression) unless named otherwise.
#[derive(Debug, Clone, PartialEq)]
pub struct LtoParams {
    /// `lto1` .. `lto10`.
    pub name: &'static str,
    /// Native (uncompressed) rate at the top speed step, MB/s.
    pub native_mb_s: f64,
    /// Lowest speed step of data-rate matching, MB/s. Equal to native when the
    /// drive has no speed matching.
    pub min_mb_s: f64,
    /// Number of speed steps from lowest to highest.
    pub steps: u32,
    /// Drive buffer, bytes.
    pub buffer_bytes: f64,
    /// Host interface limit, MB/s of host data.
    pub interface_mb_s: f64,
    /// Fixed cost of one READ or WRITE command, seconds.
    pub command_s: f64,
    /// Native capacity, bytes.
    pub capacity_bytes: f64,
    /// Highest compression ratio the drive's compressor reaches.
    pub max_compression: f64,
    /// Time to stop, rewind a little and get back up to speed after the buffer ran dry.
    pub backhitch_s: f64,
    /// Fill level (fraction of the buffer) at which a stopped drive starts again.
    pub restart_fill: f64,
    /// Cost of a filemark written with the immediate bit (it does not flush).
    pub filemark_immediate_s: f64,
    /// Load and thread time.
    pub load_s: f64,
    /// Unload time (after the rewind).
    pub unload_s: f64,
    /// One-time calibration of a new cartridge at its first load.
    pub first_load_calibration_s: f64,
    /// Tape length, metres.
    pub tape_m: f64,
    /// Wraps (the serpentine passes over the tape's length).
    pub wraps: u32,
    /// Tape speed while locating or rewinding, metres per second.
    pub locate_m_s: f64,
    /// Time to move the head from one wrap to another and settle.
    pub wrap_change_s: f64,
    /// Fixed cost of any locate (command, settle, first read).
    pub locate_overhead_s: f64,
}

const MB: f64 = 1e6;
const MIB: f64 = 1024.0 * 1024.0;
const GB: f64 = 1e9;

impl LtoParams {
    /// Native rate, bytes/s.
    pub fn native(&self) -> f64 {
        self.native_mb_s * MB
    }

    /// The speed steps, bytes/s, lowest first.
    pub fn speed_steps(&self) -> Vec<f64> {
        if self.steps <= 1 || self.min_mb_s >= self.native_mb_s {
            return vec![self.native()];
        }
        let n = self.steps as f64 - 1.0;
        (0..self.steps)
            .map(|i| (self.min_mb_s + (self.native_mb_s - self.min_mb_s) * i as f64 / n) * MB)
            .collect()
    }

    /// Bytes of native capacity on one wrap.
    pub fn wrap_bytes(&self) -> f64 {
        self.capacity_bytes / self.wraps as f64
    }

    /// Every rate and buffer multiplied by `f`; times kept (a faster-running
    /// experiment with the same dynamics).
    pub fn scaled(&self, f: f64) -> LtoParams {
        let mut p = self.clone();
        p.native_mb_s *= f;
        p.min_mb_s *= f;
        p.buffer_bytes *= f;
        p.interface_mb_s *= f;
        p.capacity_bytes *= f;
        p
    }
}

#[allow(clippy::too_many_arguments)]
const fn gen(
    name: &'static str,
    native: f64,
    min: f64,
    steps: u32,
    buffer_mib: f64,
    iface: f64,
    command_us: f64,
    capacity_gb: f64,
    backhitch: f64,
    tape_m: f64,
    wraps: u32,
    locate_m_s: f64,
    calibration_s: f64,
) -> LtoParams {
    LtoParams {
        name,
        native_mb_s: native,
        min_mb_s: min,
        steps,
        buffer_bytes: buffer_mib * MIB,
        interface_mb_s: iface,
        command_s: command_us * 1e-6,
        capacity_bytes: capacity_gb * GB,
        max_compression: 4.0,
        backhitch_s: backhitch,
        restart_fill: 0.5,
        filemark_immediate_s: 0.002,
        load_s: 17.0,
        unload_s: 17.0,
        first_load_calibration_s: calibration_s,
        tape_m,
        wraps,
        locate_m_s,
        wrap_change_s: 0.3,
        locate_overhead_s: 2.0,
    }
}

/// Every generation, LTO-1 first.
pub fn generations() -> Vec<LtoParams> {
    vec![
        gen(
            "lto1", 15.0, 15.0, 1, 32.0, 80.0, 150.0, 100.0, 2.5, 609.0, 48, 4.0, 0.0,
        ),
        gen(
            "lto2", 30.0, 10.0, 5, 64.0, 160.0, 60.0, 200.0, 2.5, 609.0, 64, 4.0, 0.0,
        ),
        gen(
            "lto3", 80.0, 27.0, 8, 128.0, 320.0, 40.0, 400.0, 2.0, 680.0, 44, 5.0, 0.0,
        ),
        gen(
            "lto4", 120.0, 40.0, 8, 256.0, 400.0, 30.0, 800.0, 2.0, 820.0, 56, 7.0, 0.0,
        ),
        gen(
            "lto5", 140.0, 47.0, 14, 256.0, 600.0, 25.0, 1500.0, 2.0, 846.0, 80, 10.0, 0.0,
        ),
        gen(
            "lto6", 160.0, 54.0, 14, 512.0, 600.0, 20.0, 2500.0, 1.5, 846.0, 136, 10.0, 0.0,
        ),
        gen(
            "lto7", 300.0, 101.0, 12, 1024.0, 1200.0, 15.0, 6000.0, 1.5, 960.0, 112, 10.0, 0.0,
        ),
        gen(
            "lto8", 360.0, 112.0, 12, 1024.0, 1200.0, 15.0, 12000.0, 1.5, 960.0, 208, 10.0, 0.0,
        ),
        gen(
            "lto9", 400.0, 177.0, 13, 1024.0, 1200.0, 15.0, 18000.0, 1.5, 1035.0, 280, 10.0, 3600.0,
        ),
        gen(
            "lto10", 400.0, 177.0, 13, 2048.0, 1200.0, 15.0, 30000.0, 1.5, 1100.0, 336, 10.0,
            3600.0,
        ),
    ]
}

/// The parameters of generation `name` (`lto1` .. `lto10`).
pub fn generation(name: &str) -> Option<LtoParams> {
    let n = name.to_ascii_lowercase().replace(['-', '_'], "");
    generations().into_iter().find(|g| g.name == n)
}
