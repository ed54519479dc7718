//! Fonts for plotters' `ab_glyph` text backend, registered once per process.
//!
//! plotters measures every label (axis ticks, title) through the registered font, for
//! SVG as well as PNG, but only PNG needs glyph outlines: SVG writes `<text>` elements
//! and lets the viewer pick a font. So a TrueType file is looked up at run time (no
//! fontconfig, no C library) and, when none is found, a tiny generated font with only
//! advance widths is registered instead. It measures text about as wide as DejaVu Sans
//! does, which keeps SVG and HTML output independent of any font file, while PNG
//! output is refused with a message that names the package to install.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::style::{register_font, FontStyle};

/// The family every text style of this crate asks for.
pub(crate) const FAMILY: &str = "sans-serif";

/// Names a TrueType font file to use before the system paths.
pub(crate) const FONT_ENV: &str = "TAPELOOM_REPORT_FONT";

/// The Debian package that provides the first system path below.
pub(crate) const DEBIAN_PACKAGE: &str = "fonts-dejavu-core";

/// (regular, bold) TrueType files tried in order; the bold one is optional.
const SYSTEM_FONTS: &[(&str, &str)] = &[
    (
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf",
    ),
    (
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans-Bold.ttf",
    ),
    (
        "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans-Bold.ttf",
    ),
    (
        "/usr/share/fonts/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu/DejaVuSans-Bold.ttf",
    ),
    (
        "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
        "/usr/share/fonts/truetype/liberation/LiberationSans-Bold.ttf",
    ),
    (
        "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
        "/usr/share/fonts/liberation-sans/LiberationSans-Bold.ttf",
    ),
    (
        "/System/Library/Fonts/Supplemental/Arial.ttf",
        "/System/Library/Fonts/Supplemental/Arial Bold.ttf",
    ),
];

/// What got registered under [`FAMILY`].
#[derive(Debug)]
pub(crate) enum Registered {
    /// A real font file: text can be measured and drawn.
    File,
    /// Only the generated metrics font: text can be measured, not drawn as pixels.
    MetricsOnly { looked_in: Vec<PathBuf> },
}

impl Registered {
    /// Whether bitmap output can draw its text.
    pub(crate) fn can_rasterize(&self) -> bool {
        matches!(self, Registered::File)
    }

    /// The font files looked for in vain (none when one was found).
    pub(crate) fn looked_in(&self) -> &[PathBuf] {
        match self {
            Registered::File => &[],
            Registered::MetricsOnly { looked_in } => looked_in,
        }
    }
}

/// Registers a font under [`FAMILY`] the first time it is called, and says which.
pub(crate) fn ensure_registered() -> &'static Registered {
    static REGISTERED: OnceLock<Registered> = OnceLock::new();
    REGISTERED.get_or_init(register_first_found)
}

fn register_first_found() -> Registered {
    let mut candidates: Vec<(PathBuf, Option<PathBuf>)> = Vec::new();
    if let Some(path) = std::env::var_os(FONT_ENV).filter(|p| !p.is_empty()) {
        candidates.push((PathBuf::from(path), None));
    }
    candidates.extend(
        SYSTEM_FONTS
            .iter()
            .map(|(regular, bold)| (PathBuf::from(regular), Some(PathBuf::from(bold)))),
    );
    for (regular, bold) in &candidates {
        if register_file(regular, FontStyle::Normal) {
            if let Some(bold) = bold {
                // Without it, plotters falls back to the regular face for bold text.
                register_file(bold, FontStyle::Bold);
            }
            return Registered::File;
        }
    }
    // Cannot fail for the fixed bytes built here; a unit test pins that.
    let _ = register_font(FAMILY, FontStyle::Normal, metrics_font());
    Registered::MetricsOnly {
        looked_in: candidates.into_iter().map(|(regular, _)| regular).collect(),
    }
}

/// Reads and registers one font file; false if it is missing or not a font.
fn register_file(path: &Path, style: FontStyle) -> bool {
    let Ok(bytes) = std::fs::read(path) else {
        return false;
    };
    // plotters keeps a `&'static` reference; this runs at most a few times per process.
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    register_font(FAMILY, style, bytes).is_ok()
}

/// Units per em of the generated font; ascender minus descender equals it, so an
/// advance of `ADVANCE` units is `ADVANCE / 1000` of the requested text size, the same
/// scale ab_glyph applies to real fonts.
const UNITS_PER_EM: u16 = 1000;
const ASCENDER: i16 = 800;
const DESCENDER: i16 = -200;
/// DejaVu Sans digits are 0.636 em of a 1.164 em line: 0.546 of the text size.
const ADVANCE: u16 = 550;

/// A minimal TrueType font (`head`, `hhea`, `hmtx`, `maxp`) with one empty glyph that
/// every character maps to: it has widths and no outlines.
pub(crate) fn metrics_font() -> &'static [u8] {
    static FONT: OnceLock<Vec<u8>> = OnceLock::new();
    FONT.get_or_init(build_metrics_font)
}

fn build_metrics_font() -> Vec<u8> {
    let mut head = Vec::with_capacity(54);
    put32(&mut head, 0x0001_0000); // version
    put32(&mut head, 0x0001_0000); // font revision
    put32(&mut head, 0); // checksum adjustment
    put32(&mut head, 0x5F0F_3CF5); // magic
    put16(&mut head, 0); // flags
    put16(&mut head, UNITS_PER_EM);
    head.extend_from_slice(&[0; 16]); // created, modified
    for v in [0, DESCENDER, ADVANCE as i16, ASCENDER] {
        put16(&mut head, v as u16); // x min, y min, x max, y max
    }
    put16(&mut head, 0); // mac style
    put16(&mut head, 8); // lowest readable size
    put16(&mut head, 2); // direction hint
    put16(&mut head, 0); // short loca offsets
    put16(&mut head, 0); // glyph data format

    let mut hhea = Vec::with_capacity(36);
    put32(&mut hhea, 0x0001_0000);
    put16(&mut hhea, ASCENDER as u16);
    put16(&mut hhea, DESCENDER as u16);
    put16(&mut hhea, 0); // line gap
    put16(&mut hhea, ADVANCE); // advance width max
    for _ in 0..3 {
        put16(&mut hhea, 0); // min lsb, min rsb, x max extent
    }
    put16(&mut hhea, 1); // caret slope rise
    hhea.extend_from_slice(&[0; 14]); // caret run, caret offset, 4 reserved, format
    put16(&mut hhea, 1); // number of horizontal metrics

    let mut hmtx = Vec::with_capacity(4);
    put16(&mut hmtx, ADVANCE);
    put16(&mut hmtx, 0);

    let mut maxp = Vec::with_capacity(6);
    put32(&mut maxp, 0x0000_5000); // version 0.5: glyph count only
    put16(&mut maxp, 1);

    // The table directory must be sorted by tag.
    let tables: [(&[u8; 4], Vec<u8>); 4] = [
        (b"head", head),
        (b"hhea", hhea),
        (b"hmtx", hmtx),
        (b"maxp", maxp),
    ];
    let mut font = Vec::new();
    put32(&mut font, 0x0001_0000);
    put16(&mut font, tables.len() as u16);
    put16(&mut font, 64); // search range: 16 * 2^floor(log2 4)
    put16(&mut font, 2); // entry selector
    put16(&mut font, 0); // range shift
    let mut offset = 12 + 16 * tables.len();
    for (tag, data) in &tables {
        font.extend_from_slice(*tag);
        put32(&mut font, checksum(data));
        put32(&mut font, offset as u32);
        put32(&mut font, data.len() as u32);
        offset += data.len().next_multiple_of(4);
    }
    for (_, data) in &tables {
        font.extend_from_slice(data);
        font.resize(font.len().next_multiple_of(4), 0);
    }
    font
}

fn put16(buf: &mut Vec<u8>, v: u16) {
    buf.extend_from_slice(&v.to_be_bytes());
}

fn put32(buf: &mut Vec<u8>, v: u32) {
    buf.extend_from_slice(&v.to_be_bytes());
}

fn checksum(data: &[u8]) -> u32 {
    data.chunks(4).fold(0u32, |sum, chunk| {
        let mut word = [0u8; 4];
        word[..chunk.len()].copy_from_slice(chunk);
        sum.wrapping_add(u32::from_be_bytes(word))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use plotters::style::{FontDesc, FontFamily};

    #[test]
    fn metrics_font_parses_and_measures_like_a_sans_font() {
        let family = "tapeloom-metrics-test";
        assert!(register_font(family, FontStyle::Normal, metrics_font()).is_ok());
        let font = FontDesc::new(FontFamily::Name(family), 20.0, FontStyle::Normal);
        let (w, h) = font.box_size("0123456789").unwrap();
        // 10 characters at 0.55 of 20 px.
        assert!((100..=120).contains(&w), "width {w}");
        assert!(h > 0);
    }

    #[test]
    fn missing_font_message_names_the_debian_package() {
        let state = Registered::MetricsOnly {
            looked_in: vec![PathBuf::from(SYSTEM_FONTS[0].0)],
        };
        assert!(!state.can_rasterize());
        let message = crate::ReportError::NoFont {
            looked_in: state.looked_in().to_vec(),
        }
        .to_string();
        assert!(message.contains(DEBIAN_PACKAGE), "{message}");
        assert!(!message.contains('\n'));
    }
}
