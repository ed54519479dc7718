//! Test data of a chosen compressibility, for the drive benchmark and the dataset
//! generator. Deterministic from a seed.

/// The most compressible data the ratio pattern makes: 100:1.
pub const MAX_RATIO: f64 = 100.0;

/// What the data looks like to a compressor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pattern {
    /// Incompressible.
    Random,
    /// All zeros (compresses as far as any compressor goes).
    Zero,
    /// Compresses about R:1 with an LZ-class compressor (LZ4, zstd -1, LTO's SLDC).
    Ratio(f64),
}

impl std::str::FromStr for Pattern {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "random" => Ok(Pattern::Random),
            "zero" => Ok(Pattern::Zero),
            _ => match s.strip_prefix("ratio:").map(str::parse::<f64>) {
                Some(Ok(r)) if (1.0..=MAX_RATIO).contains(&r) => Ok(Pattern::Ratio(r)),
                _ => Err(format!(
                    "pattern '{s}' is not random, zero or ratio:R (R from 1 to 100)"
                )),
            },
        }
    }
}

impl std::fmt::Display for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pattern::Random => f.write_str("random"),
            Pattern::Zero => f.write_str("zero"),
            Pattern::Ratio(r) => write!(f, "ratio:{r}"),
        }
    }
}

/// A fast deterministic generator (xorshift64).
pub struct Noise(u64);

impl Noise {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Noise(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    /// Fills `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        let mut chunks = buf.chunks_exact_mut(8);
        for c in &mut chunks {
            c.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        let rest = chunks.into_remainder();
        let last = self.next_u64().to_le_bytes();
        let n = rest.len();
        rest.copy_from_slice(&last[..n]);
    }
}

/// Bytes per unit of the ratio pattern: each unit is a random head and a run of a
/// repeated byte, so any LZ-class compressor stores the head and almost nothing of
/// the run.
const UNIT: usize = 512;

/// Fills `buf` with data of `pattern`.
pub fn fill(pattern: Pattern, noise: &mut Noise, buf: &mut [u8]) {
    match pattern {
        Pattern::Random => noise.fill(buf),
        Pattern::Zero => buf.fill(0),
        Pattern::Ratio(r) => {
            // The run part also costs the compressor a little; aim the head slightly
            // larger than UNIT / R so the achieved ratio lands on R.
            let head = ((UNIT as f64 / r) * 0.98).round().clamp(1.0, UNIT as f64) as usize;
            for unit in buf.chunks_mut(UNIT) {
                let h = head.min(unit.len());
                noise.fill(&mut unit[..h]);
                let fillb = unit[0];
                unit[h..].fill(fillb);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tapeloom_device::lto::CompressionEstimator;

    #[test]
    fn ratio_pattern_compresses_as_asked() {
        let mut e = CompressionEstimator::new();
        for r in [1.5, 1.86, 2.0, 3.0] {
            let mut buf = vec![0u8; 256 * 1024];
            fill(Pattern::Ratio(r), &mut Noise::new(1), &mut buf);
            let got = e.ratio(&buf, 100.0);
            assert!((got - r).abs() / r < 0.05, "asked {r}, LZ4 gives {got}");
        }
        let mut buf = vec![0u8; 65536];
        fill(Pattern::Random, &mut Noise::new(2), &mut buf);
        assert_eq!(e.ratio(&buf, 100.0), 1.0);
    }

    #[test]
    fn patterns_parse() {
        assert_eq!("ratio:1.86".parse::<Pattern>(), Ok(Pattern::Ratio(1.86)));
        assert_eq!("random".parse::<Pattern>(), Ok(Pattern::Random));
        assert!("ratio:0.5".parse::<Pattern>().is_err());
        assert!("bogus".parse::<Pattern>().is_err());
    }
}
