//! Sizes on the command line: `262144`, `256K`, `64M`, `1T` (binary: K = 1024), or
//! `100MB`, `2GB` (decimal: MB = 10^6, as drive vendors count), up to `1E`. The
//! parser itself is the engine's, which also reads sizes in generator sources
//! (`gen:hp-typical:100G`).

pub use tapeloom_engine::size::{parse, BINARY, MAX};

/// A size flag's parser that takes sizes from `min` to `max` bytes only, so that a
/// size that means nothing (a block of 0 bytes) is refused when it is parsed.
pub fn within(
    min: u64,
    max: u64,
) -> impl Fn(&str) -> Result<u64, String> + Clone + Send + Sync + 'static {
    move |s| {
        let v = parse(s)?;
        if (min..=max).contains(&v) {
            Ok(v)
        } else {
            Err(format!(
                "'{s}' is out of range (from {} to {})",
                flag_form(min),
                flag_form(max)
            ))
        }
    }
}

/// `n` bytes as a flag would write them: in the largest binary unit that divides
/// them (`64K`, `1E`), else in bytes.
fn flag_form(n: u64) -> String {
    match BINARY.iter().find(|(m, _)| n >= *m && n.is_multiple_of(*m)) {
        Some((m, unit)) => format!("{}{unit}", n / m),
        None => n.to_string(),
    }
}

/// The smallest and largest factor a drive model's `--scale` takes.
pub const SCALE: (f64, f64) = (0.001, 1000.0);

/// The smallest factor a virtual library's model takes with the virtual clock:
/// a cartridge of full geometry (every wrap, every metre) that holds only a few
/// hundred megabytes, for experiments with the order of reads.
pub const SCALE_VIRTUAL: f64 = 0.000001;

/// Parses `library create --scale`: as [`scale`], or down to [`SCALE_VIRTUAL`]
/// (the command refuses such a factor with the real clock).
pub fn library_scale(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(f) if (SCALE_VIRTUAL..=SCALE.1).contains(&f) => Ok(f),
        _ => Err(format!(
            "'{s}' is not a factor from {SCALE_VIRTUAL} to {} (try 0.25)",
            SCALE.1
        )),
    }
}

/// Parses a drive model's `--scale`: a factor from 0.001 to 1000 (at 0.001 an LTO-9
/// drive moves 0.4 MB/s, and smaller factors would never end a command).
pub fn scale(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(f) if (SCALE.0..=SCALE.1).contains(&f) => Ok(f),
        _ => Err(format!(
            "'{s}' is not a factor from {} to {} (try 0.25)",
            SCALE.0, SCALE.1
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse("256K"), Ok(262144));
        assert_eq!(parse("64M"), Ok(64 << 20));
        assert_eq!(parse("1T"), Ok(1 << 40));
        assert_eq!(parse("1TiB"), Ok(1 << 40));
        assert_eq!(parse("2Pi"), Ok(2 << 50));
        assert_eq!(parse("1E"), Ok(MAX));
        assert_eq!(parse("150MB"), Ok(150_000_000));
        assert_eq!(parse("4096"), Ok(4096));
        assert_eq!(parse("0"), Ok(0));
        assert!(parse("12Q").is_err());
        assert!(parse("M").is_err());
        assert!(parse("-1").is_err());
    }

    #[test]
    fn sizes_past_one_exbibyte_are_refused() {
        for s in [
            "16E",
            "1025P",
            "2EB",
            "18446744073709551616",
            "18446744073709551615",
            "9223372036854775808",
            "99999999999999999999",
            "1e400",
        ] {
            assert!(parse(s).is_err(), "{s}");
        }
        assert_eq!(parse("1152921504606846976"), Ok(MAX));
        assert!(parse("1152921504606846977").is_err());
    }

    #[test]
    fn a_range_is_checked_and_said_in_the_flags_units() {
        let block = within(64 << 10, 8 << 20);
        assert_eq!(block("256K"), Ok(256 << 10));
        assert_eq!(
            block("0"),
            Err("'0' is out of range (from 64K to 8M)".to_string())
        );
        assert!(block("9M").is_err());
        assert_eq!(
            within(1, MAX)("0"),
            Err("'0' is out of range (from 1 to 1E)".to_string())
        );
    }

    #[test]
    fn scales() {
        assert_eq!(scale("0.25"), Ok(0.25));
        for s in ["0", "-1", "nan", "inf", "1e20", "0.0001", "1001"] {
            assert!(scale(s).is_err(), "{s}");
        }
    }
}
