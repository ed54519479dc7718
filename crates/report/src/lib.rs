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
#![forbid(unsafe_code)]

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
    /// Spans of the time axis in which a drive moved no data because it was loading
    /// a cartridge, finding its place on one, or writing the index; shaded and named
    /// in the figure so that a blank start or a gap in the lines is explained.
    pub spans: Vec<Span>,
}

/// How full the disk stages were during a job backed up through them: drawn in a
/// panel of its own, under the throughput, by [`render_staged`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StageFill {
    /// In time order, about one per second; the spacing may be irregular.
    pub samples: Vec<StageSample>,
}

/// One measurement of the stages.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StageSample {
    /// Seconds since the job started.
    pub t: f64,
    /// Bytes held on the stages now: staged and not yet given back.
    pub bytes: u64,
    /// The same as a share of the stages' size, 0..=1.
    pub share: f64,
}

impl StageFill {
    /// The sample that held the most; `None` without a sample of usable time and
    /// share.
    pub fn peak(&self) -> Option<StageSample> {
        self.samples
            .iter()
            .filter(|s| s.t.is_finite() && s.share.is_finite())
            .copied()
            .reduce(|a, b| if b.bytes > a.bytes { b } else { a })
    }

    /// The stages' size in bytes, as the peak's bytes and share give it; `None` when
    /// they never held anything.
    pub fn size(&self) -> Option<u64> {
        let peak = self.peak()?;
        (peak.share > 0.0 && peak.bytes > 0)
            .then(|| (peak.bytes as f64 / peak.share).round() as u64)
    }
}

/// A span of the time axis in which a drive did something other than move data.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Span {
    /// What the drive was doing, e.g. `loading`, `positioning`, `index`.
    pub label: String,
    /// The drive's name as in [`JobSeries::drives`], when known.
    pub drive: Option<String>,
    /// Seconds since the job started.
    pub from: f64,
    /// Seconds since the job started, >= `from`.
    pub to: f64,
}

/// Where data moved on a track: from the last sample before its bytes first grew to
/// the first sample at its final count. Whole-job rates divide by the job's time,
/// loads and the index write included; this is the rate while data flowed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DataPhase {
    /// Seconds since the job started, when data began to move.
    pub from: f64,
    /// When the last byte had moved.
    pub to: f64,
    /// Bytes moved between the two.
    pub bytes: u64,
}

impl DataPhase {
    /// MB/s while data moved; `None` for a phase of no length.
    pub fn mb_per_s(&self) -> Option<f64> {
        let dt = self.to - self.from;
        (dt > 0.0).then(|| self.bytes as f64 / 1e6 / dt)
    }

    /// The data phase of one track; `None` when its bytes never grew.
    pub fn of(track: &Track) -> Option<DataPhase> {
        let samples: Vec<&Sample> = track.samples.iter().filter(|s| s.t.is_finite()).collect();
        let first_growth = samples.windows(2).position(|w| w[1].bytes > w[0].bytes)?;
        let start = samples[first_growth];
        let last = samples.last()?;
        let end = samples[first_growth..]
            .iter()
            .find(|s| s.bytes >= last.bytes)?;
        Some(DataPhase {
            from: start.t,
            to: end.t,
            bytes: last.bytes.saturating_sub(start.bytes),
        })
    }

    /// The data phase of several tracks together (a job's drives): from the first
    /// to start to the last to end, with the bytes of all.
    pub fn of_all<'a>(tracks: impl IntoIterator<Item = &'a Track>) -> Option<DataPhase> {
        tracks
            .into_iter()
            .filter_map(DataPhase::of)
            .reduce(|a, b| DataPhase {
                from: a.from.min(b.from),
                to: a.to.max(b.to),
                bytes: a.bytes + b.bytes,
            })
    }
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
    figure(job, None, out)
}

/// [`render`] for a job backed up through the disk stages: the figure gains a panel
/// under the throughput with the stages' fill in percent over the same time axis,
/// its peak in bytes named in the legend.
pub fn render_staged(job: &JobSeries, stage: &StageFill, out: &Path) -> Result<(), ReportError> {
    figure(job, Some(stage), out)
}

/// The figure [`render`] (with `stage`: [`render_staged`]) writes to an `.svg`
/// file, as a string: for a page that shows it inline.
pub fn svg(job: &JobSeries, stage: Option<&StageFill>) -> Result<String, ReportError> {
    font::ensure_registered();
    draw::svg(&prepare::Prepared::from_job(job, stage))
}

fn figure(job: &JobSeries, stage: Option<&StageFill>, out: &Path) -> Result<(), ReportError> {
    let format = Format::of(out)?;
    let font = font::ensure_registered();
    let prepared = prepare::Prepared::from_job(job, stage);
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
