//! Sizes as people write them: `262144`, `256K`, `64M`, `1T` (binary: K = 1024), or
//! `100MB`, `2GB` (decimal: MB = 10^6, as drive vendors count), up to `1E`.
//!
//! Parsed here rather than with `bytesize`, which reads `K` and `KB` alike as 1000
//! bytes; the command line prints sizes with it.

/// The largest size any flag takes: 1 EiB (`1E`), far above any cartridge, disk
/// or rate, and small enough that adding or multiplying a few sizes never
/// overflows.
pub const MAX: u64 = 1 << 60;

/// Binary units, largest first, as flags write them.
pub const BINARY: [(u64, &str); 6] = [
    (1 << 60, "E"),
    (1 << 50, "P"),
    (1 << 40, "T"),
    (1 << 30, "G"),
    (1 << 20, "M"),
    (1 << 10, "K"),
];

/// Parses a size, from 0 to [`MAX`].
pub fn parse(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.parse::<f64>().is_err() {
        return Err(format!("'{s}' is not a size (try 256K, 64M, 1T)"));
    }
    let unit = unit.trim().to_ascii_uppercase();
    let binary = unit.strip_suffix("IB").or(unit.strip_suffix('I'));
    let mult: u64 = match (unit.as_str(), binary) {
        ("" | "B", _) => 1,
        ("KB", _) => 1_000,
        ("MB", _) => 1_000_000,
        ("GB", _) => 1_000_000_000,
        ("TB", _) => 1_000_000_000_000,
        ("PB", _) => 1_000_000_000_000_000,
        ("EB", _) => 1_000_000_000_000_000_000,
        (u, b) => match BINARY.iter().find(|(_, name)| *name == b.unwrap_or(u)) {
            Some((m, _)) => *m,
            None => {
                return Err(format!(
                    "'{s}' has an unknown unit (try K, M, G, T, P, E or KB, MB, GB, TB, PB, EB)"
                ))
            }
        },
    };
    // Whole numbers exactly; fractions (`1.5G`) as floating point, rounded.
    let v = match num.parse::<u64>() {
        Ok(n) => n.checked_mul(mult),
        Err(_) => {
            let v = num.parse::<f64>().unwrap_or(f64::INFINITY) * mult as f64;
            // MAX is a power of two, exact as an f64.
            (v.is_finite() && v <= MAX as f64).then(|| v.round() as u64)
        }
    };
    match v {
        Some(v) if v <= MAX => Ok(v),
        _ => Err(format!("'{s}' is out of range (at most 1E)")),
    }
}
