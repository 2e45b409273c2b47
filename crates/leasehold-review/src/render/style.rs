//! ANSI colours for the text report, as rustc uses them, or none at all.

use crate::Severity;

/// What a piece of text is, for its colour.
#[derive(Clone, Copy)]
pub(super) enum Paint {
    Error,
    Warning,
    Note,
    /// The gutter and the ` --> ` arrow.
    Gutter,
    /// The header's message and the summary.
    Bold,
}

impl From<Severity> for Paint {
    fn from(s: Severity) -> Self {
        match s {
            Severity::Error => Paint::Error,
            Severity::Warning => Paint::Warning,
        }
    }
}

/// Colours on or off.
#[derive(Clone, Copy)]
pub(super) struct Style {
    pub(super) color: bool,
}

impl Style {
    /// `text` in `paint`'s colour, or as it is without colours.
    pub(super) fn paint(self, paint: Paint, text: &str) -> String {
        if !self.color || text.is_empty() {
            return text.to_owned();
        }
        let code = match paint {
            Paint::Error => "1;31",
            Paint::Warning => "1;33",
            Paint::Note => "1;32",
            Paint::Gutter => "1;34",
            Paint::Bold => "1",
        };
        format!("\x1b[{code}m{text}\x1b[0m")
    }
}
