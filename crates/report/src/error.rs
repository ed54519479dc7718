//! The report's error type.

use plotters::prelude::DrawingBackend;
use std::path::PathBuf;

use crate::font::{DEBIAN_PACKAGE, FONT_ENV};

/// Why a figure could not be rendered. Each message is one line.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The output file's extension names no format this crate writes.
    #[error(
        "cannot render {}: unknown output extension, expected .svg, .png or .html",
        path.display()
    )]
    UnknownExtension {
        /// The output file.
        path: PathBuf,
    },
    /// PNG output needs a TrueType font file and none was found.
    #[error(
        "PNG output needs a TrueType font and none was found (looked in {}): install the \
         Debian package {DEBIAN_PACKAGE}, or set {FONT_ENV} to a .ttf file; \
         .svg and .html need no font",
        paths(looked_in)
    )]
    NoFont {
        /// The font files looked for, in order.
        looked_in: Vec<PathBuf>,
    },
    /// plotters could not draw the figure.
    #[error("draw the figure: {0}")]
    Draw(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The PNG encoder failed.
    #[error("encode the PNG: {0}")]
    EncodePng(#[source] png::EncodingError),
    /// The output file could not be written.
    #[error("write {}: {source}", path.display())]
    Write {
        /// The output file.
        path: PathBuf,
        /// The file system's error.
        #[source]
        source: std::io::Error,
    },
}

fn paths(looked_in: &[PathBuf]) -> String {
    let paths: Vec<String> = looked_in.iter().map(|p| p.display().to_string()).collect();
    paths.join(", ")
}

/// A plotters backend whose errors can be kept as a [`ReportError`]'s source.
pub(crate) trait Backend: DrawingBackend<ErrorType: 'static> {}

impl<B: DrawingBackend<ErrorType: 'static>> Backend for B {}

/// A plotters drawing error as a [`ReportError::Draw`].
pub(crate) fn draw_failed<E: std::error::Error + Send + Sync + 'static>(e: E) -> ReportError {
    ReportError::Draw(Box::new(e))
}
