//! Render a backup or restore job's per-second measurement series as a figure, so an
//! admin can see at a glance where a job was slow and why: throughput per stream and
//! drive, how full the buffers were, and when a drive stepped its speed down or
//! backhitched.
//!
//! The caller turns whatever it recorded into a [`JobSeries`] and calls [`render`]; the
//! output format follows the file extension (`.svg`, `.png`, `.html`). This crate reads
//! no tapeloom state and never panics on odd data: samples with a non-finite time are
//! dropped, out-of-range values are clamped, and a job without samples still gets a
//! figure that says so.
//!
//! Units: time in seconds since the job started; MB means 10^6 bytes, as on tape drive
//! data sheets.
#![deny(missing_docs)]

mod draw;
mod error;
mod font;
mod html;
mod legend;
mod prepare;

use std::path::Path;

pub use error::ReportError;

/// A job's series, ready to draw.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobSeries {
    /// The figure's and the page's title, e.g. `job 3 (backup: home,srv)`.
    pub title: String,
    /// Rows of the HTML summary table, in order: (label, value). Only the `.html`
    /// output shows them.
    pub summary: Vec<(String, String)>,
    /// One track per stream (a source being read or a restore target being written).
    pub streams: Vec<Track>,
    /// One track per tape drive.
    pub drives: Vec<Track>,
}

/// The samples of one stream or one drive.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Track {
    /// Shown in the legends, e.g. `home` or `st0`.
    pub name: String,
    /// In time order, about one per second; the spacing may be irregular and tracks
    /// of one job may have different lengths.
    pub samples: Vec<Sample>,
}

/// One measurement of a stream or a drive.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sample {
    /// Seconds since the job started.
    pub t: f64,
    /// Cumulative bytes of this stream or drive so far. Throughput is drawn from the
    /// differences between samples.
    pub bytes: u64,
    /// Fill of the buffer pool, 0..=1; for a stream, the share of the pool its data
    /// holds.
    pub pool_fill: f64,
    /// Fill of the drive's own buffer, 0..=1; only drives with a timing model have it.
    pub buffer_fill: Option<f64>,
    /// Cumulative backhitches of a drive so far; 0 for streams.
    pub backhitches: u64,
    /// The drive's current speed step in MB/s; only drives with a timing model have it.
    pub speed_mb_s: Option<f64>,
}

/// Output formats, chosen by the file extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Svg,
    Png,
    Html,
}

impl Format {
    fn of(path: &Path) -> Result<Format, ReportError> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("svg") => Ok(Format::Svg),
            Some("png") => Ok(Format::Png),
            Some("html") => Ok(Format::Html),
            _ => Err(ReportError::UnknownExtension {
                path: path.to_path_buf(),
            }),
        }
    }
}

/// Draw `job` into the file `out`, in the format its extension names: `.svg`, `.png`
/// or `.html` (a self-contained page with the title, the summary table and the figure
/// as inline SVG).
///
/// The figure has three panels over a shared time axis: throughput in MB/s, buffer
/// fill in percent, and the drives' speed steps with a marker at each backhitch.
///
/// PNG needs a TrueType font for its text, loaded at run time: the file named by the
/// environment variable `TAPELOOM_REPORT_FONT`, else the first of a few common system
/// paths (on Debian `/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf`, package
/// `fonts-dejavu-core`). Without one, PNG output returns an error naming that package.
/// SVG and HTML need no font file and come out the same with or without one.
///
/// Errors ([`ReportError`]) have one-line messages: an unknown extension, a missing
/// font for PNG, or a failure to draw, encode or write the file.
pub fn render(job: &JobSeries, out: &Path) -> Result<(), ReportError> {
    let format = Format::of(out)?;
    let font = font::ensure_registered();
    let prepared = prepare::Prepared::from_job(job);
    let bytes = match format {
        Format::Svg => draw::svg(&prepared)?.into_bytes(),
        Format::Html => html::page(job, &draw::svg(&prepared)?).into_bytes(),
        Format::Png => {
            if !font.can_rasterize() {
                return Err(ReportError::NoFont {
                    looked_in: font.looked_in().to_vec(),
                });
            }
            draw::png(&prepared)?
        }
    };
    std::fs::write(out, bytes).map_err(|source| ReportError::Write {
        path: out.to_path_buf(),
        source,
    })
}
