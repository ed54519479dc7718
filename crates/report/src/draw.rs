//! The figure: a title and three panels over a shared time axis (four for a job backed
//! up through the stages), each with its legend in a column to the right (see
//! `legend`). One drawing routine serves both backends; only the SVG and PNG wrappers
//! differ.

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::error::{draw_failed, Backend, ReportError};
use crate::font::FAMILY;
use crate::legend::{draw_legend, shorten, Swatch, BAND_ALPHA};
use crate::prepare::{percent, Prepared, StageLine};
use crate::Span;

const WIDTH: u32 = 1400;
const HEIGHT: u32 = 1050;
const LEGEND_WIDTH: u32 = 320;
/// The stage panel's height: the figure grows by it, so the other panels keep their
/// size.
const STAGE_HEIGHT: u32 = 250;

/// Drives draw thick and dark so they stand out from the streams that feed them.
const DRIVE_COLORS: [RGBColor; 5] = [
    RGBColor(0x1a, 0x1a, 0x1a),
    RGBColor(0x1f, 0x3b, 0x8c),
    RGBColor(0x6a, 0x1b, 0x9a),
    RGBColor(0x0b, 0x6e, 0x4f),
    RGBColor(0x8d, 0x40, 0x04),
];
/// Tableau 10 without its red, which is kept for backhitches.
const STREAM_COLORS: [RGBColor; 9] = [
    RGBColor(0x4e, 0x79, 0xa7),
    RGBColor(0xf2, 0x8e, 0x2b),
    RGBColor(0x59, 0xa1, 0x4f),
    RGBColor(0xb0, 0x7a, 0xa1),
    RGBColor(0x76, 0xb7, 0xb2),
    RGBColor(0xb8, 0x86, 0x0b),
    RGBColor(0xff, 0x9d, 0xa7),
    RGBColor(0x9c, 0x75, 0x5f),
    RGBColor(0x79, 0x70, 0x6e),
];
const BACKHITCH: RGBColor = RGBColor(0xd6, 0x27, 0x28);
const STAGE: RGBColor = RGBColor(0x00, 0x7c, 0x91);
const NOTE: RGBColor = RGBColor(0x70, 0x70, 0x70);

/// Shades of the spans without data, by what the drive was doing.
const SPAN_COLORS: [(&str, RGBColor); 3] = [
    ("loading", RGBColor(0x60, 0x60, 0x60)),
    ("positioning", RGBColor(0x1f, 0x77, 0xb4)),
    ("index", RGBColor(0xff, 0x9f, 0x1c)),
];
const SPAN_OTHER: RGBColor = RGBColor(0x9a, 0x60, 0xb4);

fn span_color(label: &str) -> RGBColor {
    SPAN_COLORS
        .iter()
        .find(|(l, _)| *l == label)
        .map_or(SPAN_OTHER, |(_, c)| *c)
}

/// Shades the spans without data across a panel; with `labels`, names each span
/// wide enough to hold its name at the top of the panel.
fn shade<DB: Backend>(
    chart: &mut Chart<'_, DB>,
    spans: &[Span],
    labels: bool,
) -> Result<(), ReportError> {
    let (x, y) = (chart.x_range(), chart.y_range());
    let bands = spans.iter().map(|s| {
        Rectangle::new(
            [(s.from, y.start), (s.to.max(s.from), y.end)],
            span_color(&s.label).mix(BAND_ALPHA).filled(),
        )
    });
    chart.draw_series(bands).map_err(draw_failed)?;
    if !labels {
        return Ok(());
    }
    let style = (FAMILY, 13)
        .into_font()
        .color(&NOTE)
        .pos(Pos::new(HPos::Center, VPos::Top));
    // A name needs about 7 px per character; the plot is about 1,000 px wide.
    let per_char = (x.end - x.start) / 1000.0 * 7.0;
    for s in spans {
        if s.to - s.from >= per_char * s.label.len() as f64 {
            let at = ((s.from + s.to) / 2.0, y.end * 0.98);
            chart
                .plotting_area()
                .draw(&Text::new(s.label.clone(), at, style.clone()))
                .map_err(draw_failed)?;
        }
    }
    Ok(())
}

/// Legend rows for the kinds of span the job has, in order of first appearance.
fn span_legend(spans: &[Span]) -> Vec<(Swatch, String)> {
    let mut seen: Vec<&str> = Vec::new();
    for s in spans {
        if !seen.contains(&s.label.as_str()) {
            seen.push(&s.label);
        }
    }
    seen.into_iter()
        .map(|l| (Swatch::Band(span_color(l)), l.to_string()))
        .collect()
}

const DRIVE_WIDTH: u32 = 3;
const STREAM_WIDTH: u32 = 2;

type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The figure's height in pixels.
fn height(p: &Prepared) -> u32 {
    match p.stage {
        Some(_) => HEIGHT + STAGE_HEIGHT,
        None => HEIGHT,
    }
}

/// The figure as an SVG document.
pub(crate) fn svg(p: &Prepared) -> Result<String, ReportError> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, height(p))).into_drawing_area();
        figure(&root, p)?;
        root.present().map_err(draw_failed)?;
    }
    Ok(out)
}

/// The figure as a PNG file's bytes.
pub(crate) fn png(p: &Prepared) -> Result<Vec<u8>, ReportError> {
    let height = height(p);
    let mut rgb = vec![0u8; WIDTH as usize * height as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (WIDTH, height)).into_drawing_area();
        figure(&root, p)?;
        root.present().map_err(draw_failed)?;
    }
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, WIDTH, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let encode = ReportError::EncodePng;
    let mut writer = encoder.write_header().map_err(encode)?;
    writer.write_image_data(&rgb).map_err(encode)?;
    writer.finish().map_err(encode)?;
    Ok(out)
}

fn figure<DB: Backend>(root: &DrawingArea<DB, Shift>, p: &Prepared) -> Result<(), ReportError> {
    root.fill(&WHITE).map_err(draw_failed)?;
    let root = root.margin(8, 4, 4, 8);
    let body = root.titled(&p.title, bold(26.0)).map_err(draw_failed)?;
    let (w, h) = body.dim_in_pixel();
    let (plots, legends) = body.split_horizontally(w.saturating_sub(LEGEND_WIDTH));
    let stage_height = if p.stage.is_some() { STAGE_HEIGHT } else { 0 };
    let h = h.saturating_sub(stage_height);
    let first = (h as f64 * 0.38) as i32;
    let second = (h as f64 * 0.31) as i32;
    let (p1, plots) = plots.split_vertically(first);
    let (l1, legends) = legends.split_vertically(first);
    throughput_panel(&p1, &l1, p)?;
    let (plots, legends) = match &p.stage {
        Some(stage) => {
            let (ps, plots) = plots.split_vertically(stage_height);
            let (ls, legends) = legends.split_vertically(stage_height);
            stage_panel(&ps, &ls, p, stage)?;
            (plots, legends)
        }
        None => (plots, legends),
    };
    let (p2, p3) = plots.split_vertically(second);
    let (l2, l3) = legends.split_vertically(second);
    fill_panel(&p2, &l2, p)?;
    speed_panel(&p3, &l3, p)
}

/// Built with `FontDesc::new`: `FontDesc::style` would keep the regular face's glyphs.
fn bold(size: f64) -> FontDesc<'static> {
    FontDesc::new(FontFamily::Name(FAMILY), size, FontStyle::Bold)
}

fn stream_color(i: usize) -> RGBColor {
    STREAM_COLORS[i % STREAM_COLORS.len()]
}

fn drive_color(i: usize) -> RGBColor {
    DRIVE_COLORS[i % DRIVE_COLORS.len()]
}

/// A panel's axes; only the bottom panel names the shared time axis.
fn axes<'a, DB: Backend>(
    area: &'a DrawingArea<DB, Shift>,
    caption: &str,
    t_end: f64,
    y_top: f64,
    y_desc: &str,
    bottom: bool,
) -> Result<Chart<'a, DB>, ReportError> {
    let mut chart = ChartBuilder::on(area)
        .caption(caption, bold(18.0))
        .margin_left(8)
        .margin_right(16)
        .margin_top(6)
        .x_label_area_size(if bottom { 46 } else { 26 })
        .y_label_area_size(78)
        // A little room left of 0 and below 0, so marks at the start and lines at
        // zero are not half hidden by the axes.
        .build_cartesian_2d(-t_end * 0.005..t_end, -y_top * 0.02..y_top)
        .map_err(draw_failed)?;
    let x_fmt = |v: &f64| number(*v, t_end);
    let y_fmt = |v: &f64| number(*v, y_top);
    let mut mesh = chart.configure_mesh();
    mesh.x_labels(14)
        .y_labels(6)
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 15))
        .bold_line_style(BLACK.mix(0.12))
        .light_line_style(BLACK.mix(0.04))
        .y_desc(y_desc);
    if bottom {
        mesh.x_desc("time since job start (s)");
    }
    mesh.draw().map_err(draw_failed)?;
    Ok(chart)
}

/// Tick labels without noise digits: whole numbers once the axis spans 10 or more.
fn number(v: f64, span: f64) -> String {
    if v.abs() < span * 1e-9 {
        "0".to_string()
    } else if span >= 10.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// Grey text in the middle of a panel, for what is missing.
fn note<DB: Backend>(chart: &Chart<'_, DB>, text: &str) -> Result<(), ReportError> {
    let (x, y) = (chart.x_range(), chart.y_range());
    let at = (x.end / 2.0, y.end / 2.0);
    let style = (FAMILY, 18)
        .into_font()
        .color(&NOTE)
        .pos(Pos::new(HPos::Center, VPos::Center));
    chart
        .plotting_area()
        .draw(&Text::new(text.to_string(), at, style))
        .map_err(draw_failed)
}

fn line_series<DB: Backend>(
    chart: &mut Chart<'_, DB>,
    points: &[(f64, f64)],
    style: ShapeStyle,
) -> Result<(), ReportError> {
    match points {
        [] => {}
        // A line needs two points; one sample still shows, as a dot.
        [only] => {
            let dot = Circle::new(*only, style.stroke_width + 2, style.filled());
            chart.draw_series([dot]).map_err(draw_failed)?;
        }
        _ => {
            chart
                .draw_series(LineSeries::new(points.iter().copied(), style))
                .map_err(draw_failed)?;
        }
    }
    Ok(())
}

fn throughput_panel<DB: Backend>(
    area: &DrawingArea<DB, Shift>,
    legend_area: &DrawingArea<DB, Shift>,
    p: &Prepared,
) -> Result<(), ReportError> {
    let mut chart = axes(
        area,
        "Throughput",
        p.t_end,
        p.throughput_top,
        "throughput (MB/s)",
        false,
    )?;
    shade(&mut chart, &p.spans, true)?;
    let mut legend = Vec::new();
    for (i, line) in p.drives.iter().enumerate() {
        legend.push((
            Swatch::Line(drive_color(i), DRIVE_WIDTH),
            format!("drive {}", shorten(&line.name)),
        ));
    }
    for (i, line) in p.streams.iter().enumerate() {
        let style = stream_color(i).stroke_width(STREAM_WIDTH);
        line_series(&mut chart, &line.throughput, style)?;
        legend.push((
            Swatch::Line(stream_color(i), STREAM_WIDTH),
            format!("stream {}", shorten(&line.name)),
        ));
    }
    // Drives on top: their line is the sum the streams add up to.
    for (i, line) in p.drives.iter().enumerate() {
        line_series(
            &mut chart,
            &line.throughput,
            drive_color(i).stroke_width(DRIVE_WIDTH),
        )?;
    }
    legend.extend(span_legend(&p.spans));
    let all = || p.streams.iter().chain(p.drives.iter());
    if !p.any_samples {
        note(&chart, "no samples recorded for this job")?;
    } else if all().all(|l| l.throughput.is_empty()) {
        note(
            &chart,
            "throughput needs at least two samples per stream or drive",
        )?;
    }
    draw_legend(legend_area, &legend)
}

fn fill_panel<DB: Backend>(
    area: &DrawingArea<DB, Shift>,
    legend_area: &DrawingArea<DB, Shift>,
    p: &Prepared,
) -> Result<(), ReportError> {
    let mut chart = axes(area, "Buffer fill", p.t_end, 105.0, "fill (%)", false)?;
    shade(&mut chart, &p.spans, false)?;
    let mut legend = Vec::new();
    for (i, line) in p.streams.iter().enumerate() {
        let style = stream_color(i).mix(0.9).stroke_width(STREAM_WIDTH);
        line_series(&mut chart, &line.pool_fill, style)?;
    }
    for (i, line) in p.drives.iter().enumerate() {
        let color = drive_color(i);
        line_series(&mut chart, &line.pool_fill, color.stroke_width(DRIVE_WIDTH))?;
        legend.push((
            Swatch::Line(color, DRIVE_WIDTH),
            format!("drive {}: pool fill", shorten(&line.name)),
        ));
        if line.buffer_fill.is_empty() {
            continue;
        }
        let style = color.stroke_width(DRIVE_WIDTH);
        if line.buffer_fill.len() == 1 {
            line_series(&mut chart, &line.buffer_fill, style)?;
        } else {
            let points = line.buffer_fill.iter().copied();
            chart
                .draw_series(DashedLineSeries::new(points, 9, 5, style))
                .map_err(draw_failed)?;
        }
        legend.push((
            Swatch::Dashed(color, DRIVE_WIDTH),
            format!("drive {}: drive buffer", shorten(&line.name)),
        ));
    }
    for (i, line) in p.streams.iter().enumerate() {
        legend.push((
            Swatch::Line(stream_color(i), STREAM_WIDTH),
            format!("stream {}: pool share", shorten(&line.name)),
        ));
    }
    draw_legend(legend_area, &legend)
}

/// The stages' fill in percent, shaded below the line, with its peak in the legend.
fn stage_panel<DB: Backend>(
    area: &DrawingArea<DB, Shift>,
    legend_area: &DrawingArea<DB, Shift>,
    p: &Prepared,
    stage: &StageLine,
) -> Result<(), ReportError> {
    let mut chart = axes(area, "Stage fill", p.t_end, 105.0, "stage fill (%)", false)?;
    shade(&mut chart, &p.spans, false)?;
    if let (Some(first), Some(last)) = (stage.fill.first(), stage.fill.last()) {
        let mut outline = vec![(first.0, 0.0)];
        outline.extend(stage.fill.iter().copied());
        outline.push((last.0, 0.0));
        chart
            .draw_series([Polygon::new(outline, STAGE.mix(0.18).filled())])
            .map_err(draw_failed)?;
    }
    line_series(&mut chart, &stage.fill, STAGE.stroke_width(DRIVE_WIDTH))?;
    let mut legend = vec![(Swatch::Line(STAGE, DRIVE_WIDTH), "stage fill".to_string())];
    let mb = |bytes: u64| bytes as f64 / 1e6;
    match (stage.peak, stage.size) {
        (Some(peak), Some(size)) => legend.push((
            Swatch::Blank,
            format!(
                "peak {:.1} of {:.1} MB ({:.0}%)",
                mb(peak.bytes),
                mb(size),
                percent(peak.share)
            ),
        )),
        (Some(_), None) => legend.push((Swatch::Blank, "the stages stayed empty".to_string())),
        (None, _) => note(&chart, "no stage samples recorded for this job")?,
    }
    draw_legend(legend_area, &legend)
}

/// What the bottom panel's y axis shows.
#[derive(Clone, Copy, PartialEq)]
enum Bottom {
    /// Speed steps in MB/s; backhitches are marked on their drive's step.
    Speed,
    /// No drive has a speed model: each drive's cumulative backhitch count, so the
    /// drives stay apart and the axis still means something.
    Count,
}

fn speed_panel<DB: Backend>(
    area: &DrawingArea<DB, Shift>,
    legend_area: &DrawingArea<DB, Shift>,
    p: &Prepared,
) -> Result<(), ReportError> {
    let any_speed = p.drives.iter().any(|l| !l.speed.is_empty());
    let any_backhitch = p.drives.iter().any(|l| l.backhitch_total > 0);
    let mode = if !any_speed && any_backhitch {
        Bottom::Count
    } else {
        Bottom::Speed
    };
    let mut chart = match mode {
        Bottom::Speed => axes(
            area,
            "Drive speed step and backhitches",
            p.t_end,
            p.speed_top,
            "speed step (MB/s)",
            true,
        )?,
        Bottom::Count => axes(
            area,
            "Drive backhitches (no speed model)",
            p.t_end,
            p.backhitch_top,
            "backhitches so far",
            true,
        )?,
    };
    shade(&mut chart, &p.spans, false)?;
    let mut legend = Vec::new();
    let lines: Vec<Vec<(f64, f64)>> = p
        .drives
        .iter()
        .map(|line| match mode {
            Bottom::Speed => line.speed.clone(),
            Bottom::Count => line.backhitch_staircase(),
        })
        .collect();
    let what = match mode {
        Bottom::Speed => "speed step",
        Bottom::Count => "backhitches",
    };
    for (i, (line, points)) in p.drives.iter().zip(&lines).enumerate() {
        if !points.is_empty() {
            legend.push((
                Swatch::Line(drive_color(i), DRIVE_WIDTH),
                format!("drive {}: {what}", shorten(&line.name)),
            ));
        }
    }
    // Marks go over a speed step, which they sit on; under a count line, which they
    // follow densely and would otherwise hide which drive is which.
    if mode == Bottom::Speed {
        drive_lines(&mut chart, &lines)?;
    }
    // Rules across the panel line a backhitch up with the panels above; past a few
    // dozen they only tint the panel. Dense marks get smaller crosses.
    let marks: usize = p.drives.iter().map(|l| l.backhitches.len()).sum();
    let plot_width = chart.plotting_area().dim_in_pixel().0 as usize;
    let style = MarkStyle {
        rules: marks <= MAX_RULES,
        cross: if marks * 14 <= plot_width { 6 } else { 3 },
    };
    let y_top = chart.y_range().end;
    let mut labels = Vec::new();
    for (i, line) in p.drives.iter().enumerate() {
        let baseline = y_top * (0.06 + 0.07 * (i % 8) as f64);
        let y_of = |t: f64, count: u64| match mode {
            Bottom::Speed => line.speed_at(t).unwrap_or(baseline),
            Bottom::Count => count as f64,
        };
        backhitch_marks(&mut chart, &line.backhitches, y_of, style, &mut labels)?;
    }
    if mode == Bottom::Count {
        drive_lines(&mut chart, &lines)?;
    }
    for line in &p.drives {
        let text = match line.backhitch_total {
            0 => format!("drive {}: no backhitches", shorten(&line.name)),
            1 => format!("drive {}: 1 backhitch", shorten(&line.name)),
            n => format!("drive {}: {n} backhitches", shorten(&line.name)),
        };
        let swatch = match line.backhitch_total {
            0 => Swatch::Blank,
            _ => Swatch::Cross(BACKHITCH),
        };
        legend.push((swatch, text));
    }
    if any_backhitch {
        legend.push((
            Swatch::Blank,
            "(number at a mark: count so far)".to_string(),
        ));
    }
    if p.drives.is_empty() {
        note(&chart, "no drives in this job")?;
    } else if p.any_samples && !any_speed && !any_backhitch {
        note(
            &chart,
            "no speed steps (no drive timing model) and no backhitches",
        )?;
    }
    draw_legend(legend_area, &legend)
}

fn drive_lines<DB: Backend>(
    chart: &mut Chart<'_, DB>,
    lines: &[Vec<(f64, f64)>],
) -> Result<(), ReportError> {
    for (i, points) in lines.iter().enumerate() {
        line_series(chart, points, drive_color(i).stroke_width(DRIVE_WIDTH))?;
    }
    Ok(())
}

/// More backhitch marks than this in one panel get no rules.
const MAX_RULES: usize = 80;

#[derive(Clone, Copy)]
struct MarkStyle {
    /// A faint rule across the panel at each mark.
    rules: bool,
    /// Half the size of the cross, in pixels.
    cross: i32,
}

/// A label's box in pixels: x from, x to, y from, y to.
type LabelBox = (i32, i32, i32, i32);

/// A red cross at each backhitch mark, at the height `y_of` gives, with the count so
/// far above it. A count whose box would overlap one in `labels` (from any drive) is
/// left out; the cross still shows.
fn backhitch_marks<DB: Backend>(
    chart: &mut Chart<'_, DB>,
    backhitches: &[(f64, u64)],
    y_of: impl Fn(f64, u64) -> f64,
    style: MarkStyle,
    labels: &mut Vec<LabelBox>,
) -> Result<(), ReportError> {
    if backhitches.is_empty() {
        return Ok(());
    }
    let y_top = chart.y_range().end;
    if style.rules {
        let rule = BACKHITCH.mix(0.22).stroke_width(1);
        chart
            .draw_series(
                backhitches
                    .iter()
                    .map(|&(t, _)| PathElement::new(vec![(t, 0.0), (t, y_top)], rule)),
            )
            .map_err(draw_failed)?;
    }
    let label_style = (FAMILY, 13)
        .into_font()
        .color(&BACKHITCH)
        .pos(Pos::new(HPos::Center, VPos::Bottom));
    let lift = style.cross + 3;
    let mut marks = Vec::with_capacity(backhitches.len());
    for &(t, count) in backhitches {
        let y = y_of(t, count);
        let text = count.to_string();
        let half_width = 4 * text.len() as i32 + 3;
        let (x_px, y_px) = chart.backend_coord(&(t, y));
        let bottom = y_px - lift;
        let label_box = (x_px - half_width, x_px + half_width, bottom - 14, bottom);
        let overlaps = |b: &LabelBox| {
            b.0 < label_box.1 && label_box.0 < b.1 && b.2 < label_box.3 && label_box.2 < b.3
        };
        let label = if labels.iter().any(overlaps) {
            String::new()
        } else {
            labels.push(label_box);
            text
        };
        marks.push(
            EmptyElement::at((t, y))
                + Cross::new((0, 0), style.cross, BACKHITCH.stroke_width(2))
                + Text::new(label, (0, -lift), label_style.clone()),
        );
    }
    chart.draw_series(marks).map_err(draw_failed)?;
    Ok(())
}
