//! Sizes on the command line: `262144`, `256K`, `64M`, `1T` (binary: K = 1024), or
//! `100MB`, `2GB` (decimal: MB = 10^6, as drive vendors count).
//!
//! Parsed here rather than with `bytesize`, which reads `K` and `KB` alike as 1000
//! bytes; printing sizes does use it (`output::bytes`).

/// Parses a size.
pub fn parse(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a size (try 256K, 64M, 1T)"))?;
    let mult: f64 = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1.0,
        "K" | "KI" | "KIB" => 1024.0,
        "M" | "MI" | "MIB" => 1024.0 * 1024.0,
        "G" | "GI" | "GIB" => 1024.0 * 1024.0 * 1024.0,
        "T" | "TI" | "TIB" => 1024f64.powi(4),
        "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        _ => {
            return Err(format!(
                "'{s}' has an unknown unit (try K, M, G, T or KB, MB, GB, TB)"
            ))
        }
    };
    let v = n * mult;
    if !v.is_finite() || v < 0.0 || v > u64::MAX as f64 {
        return Err(format!("'{s}' is out of range"));
    }
    Ok(v.round() as u64)
}

/// Parses a drive model's `--scale`: a finite factor above 0.
pub fn scale(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(f) if f.is_finite() && f > 0.0 => Ok(f),
        _ => Err(format!("'{s}' is not a factor above 0 (try 0.25)")),
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn sizes() {
        assert_eq!(parse("256K"), Ok(262144));
        assert_eq!(parse("64M"), Ok(64 << 20));
        assert_eq!(parse("1T"), Ok(1 << 40));
        assert_eq!(parse("1TiB"), Ok(1 << 40));
        assert_eq!(parse("150MB"), Ok(150_000_000));
        assert_eq!(parse("4096"), Ok(4096));
        assert!(parse("12Q").is_err());
        assert!(parse("M").is_err());
    }
}
