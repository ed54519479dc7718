//! The `.html` output: one self-contained page, no scripts and no external resources,
//! so it can be mailed or archived next to the job's logs and still open years later.

use crate::JobSeries;

const STYLE: &str = "\
body{font-family:sans-serif;margin:1.5em;color:#222;background:#fff}\
h1{font-size:1.4em;margin:0 0 .8em}\
table{border-collapse:collapse;margin-bottom:1.5em}\
th,td{text-align:left;padding:.25em .9em;border-bottom:1px solid #ddd;vertical-align:top}\
th{font-weight:600;color:#444;white-space:nowrap}\
td{font-variant-numeric:tabular-nums}\
figure{margin:0;overflow-x:auto}\
figure svg{max-width:100%;height:auto}";

/// The page for `job` around an already rendered SVG figure.
pub(crate) fn page(job: &JobSeries, svg: &str) -> String {
    let title = escape(&job.title);
    let mut out = String::with_capacity(svg.len() + 2048);
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str(&format!("<title>{title}</title>\n<style>{STYLE}</style>\n"));
    out.push_str("</head>\n<body>\n");
    out.push_str(&format!("<h1>{title}</h1>\n"));
    if !job.summary.is_empty() {
        out.push_str("<table class=\"summary\">\n<tbody>\n");
        for (label, value) in &job.summary {
            out.push_str(&format!(
                "<tr><th scope=\"row\">{}</th><td>{}</td></tr>\n",
                escape(label),
                escape(value)
            ));
        }
        out.push_str("</tbody>\n</table>\n");
    }
    out.push_str("<figure>\n");
    out.push_str(inline_svg(svg));
    out.push_str("\n</figure>\n</body>\n</html>\n");
    out
}

/// The `<svg>` element itself: an XML declaration before it is not allowed inside
/// HTML.
fn inline_svg(svg: &str) -> &str {
    svg.find("<svg").map_or(svg, |start| &svg[start..])
}

/// Text safe in element content and in quoted attribute values.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_covers_markup_and_quotes() {
        assert_eq!(
            escape(r#"<b>&"x"'y'"#),
            "&lt;b&gt;&amp;&quot;x&quot;&#39;y&#39;"
        );
    }

    #[test]
    fn inline_svg_drops_an_xml_declaration() {
        assert_eq!(inline_svg("<?xml version=\"1.0\"?>\n<svg/>"), "<svg/>");
    }
}
