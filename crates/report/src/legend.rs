//! The legend column beside each panel: drawn by hand rather than with plotters'
//! series labels, so a legend never covers data and long lists end in "… and N more".

use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::error::{draw_failed, Backend, ReportError};
use crate::font::FAMILY;

/// What a legend row shows before its text.
pub(crate) enum Swatch {
    Line(RGBColor, u32),
    Dashed(RGBColor, u32),
    Cross(RGBColor),
    /// A shaded span of the time axis.
    Band(RGBColor),
    Blank,
}

/// How opaque a shaded span is, in the plots and in their legend.
pub(crate) const BAND_ALPHA: f64 = 0.22;

const LEGEND_ROW: i32 = 21;
const LEGEND_TOP: i32 = 34;
/// Longer stream and drive names are shortened in the legends.
const NAME_CHARS: usize = 22;

/// Rows from the top of the legend column, as many as fit; the last row says how many
/// more there were.
pub(crate) fn draw_legend<DB: Backend>(
    area: &DrawingArea<DB, Shift>,
    rows: &[(Swatch, String)],
) -> Result<(), ReportError> {
    let (_, h) = area.dim_in_pixel();
    let fit = ((h as i32 - LEGEND_TOP) / LEGEND_ROW).max(1) as usize;
    let shown = if rows.len() > fit {
        fit - 1
    } else {
        rows.len()
    };
    let text_style = (FAMILY, 14)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    let x0 = 6;
    for (i, (swatch, text)) in rows.iter().take(shown).enumerate() {
        let y = LEGEND_TOP + i as i32 * LEGEND_ROW;
        let segment = vec![(x0, y), (x0 + 30, y)];
        match *swatch {
            Swatch::Line(color, width) => area
                .draw(&PathElement::new(segment, color.stroke_width(width)))
                .map_err(draw_failed)?,
            Swatch::Dashed(color, width) => area
                .draw(&DashedPathElement::new(
                    segment,
                    7,
                    4,
                    color.stroke_width(width),
                ))
                .map_err(draw_failed)?,
            Swatch::Cross(color) => area
                .draw(&Cross::new((x0 + 15, y), 6, color.stroke_width(2)))
                .map_err(draw_failed)?,
            Swatch::Band(color) => area
                .draw(&Rectangle::new(
                    [(x0 + 4, y - 7), (x0 + 27, y + 7)],
                    color.mix(BAND_ALPHA).filled(),
                ))
                .map_err(draw_failed)?,
            Swatch::Blank => {}
        }
        area.draw(&Text::new(text.as_str(), (x0 + 40, y), text_style.clone()))
            .map_err(draw_failed)?;
    }
    if shown < rows.len() {
        let y = LEGEND_TOP + shown as i32 * LEGEND_ROW;
        let more = format!("… and {} more", rows.len() - shown);
        area.draw(&Text::new(more, (x0 + 40, y), text_style.clone()))
            .map_err(draw_failed)?;
    }
    Ok(())
}

/// At most [`NAME_CHARS`] characters, so a legend row does not run off the figure.
/// The middle goes: names of one job often share a prefix and differ at the end.
pub(crate) fn shorten(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= NAME_CHARS {
        return text.to_string();
    }
    let head = (NAME_CHARS - 1) / 2;
    let tail = NAME_CHARS - 1 - head;
    let mut out: String = chars[..head].iter().collect();
    out.push('…');
    out.extend(&chars[chars.len() - tail..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shorten_keeps_both_ends() {
        let long = "stream-with-a-rather-long-name-11";
        let short = shorten(long);
        assert_eq!(short.chars().count(), NAME_CHARS);
        assert!(
            short.starts_with("stream-wit") && short.ends_with("name-11"),
            "{short}"
        );
        assert_eq!(shorten("st0"), "st0");
    }
}
