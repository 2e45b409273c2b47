//! The text report, as rustc and ruff print theirs: a header per finding, where it is, the
//! source with the span underlined, the fix and leasehold's way; then the notes and a summary.

use std::fmt::Write as _;
use std::path::Path;

use super::style::{Paint, Style};
use super::{Lines, count};
use crate::{Finding, Report, Severity, Span};

/// Spans longer than this many lines show their first and last lines only.
const MAX_LINES: usize = 6;
const TAB: &str = "    ";

/// The report as text: each finding as `error[rule-id]: message` (or `warning[…]`), ` -->
/// path:line:col`, the source line(s) with the span underlined by `^`, `= fix: …` and
/// `= leasehold: …`; then `note: path: …` for each note; then `N errors, M warnings in K
/// files (L lines)`. `sources` returns a file's text for the snippets (see
/// [`read_source`](super::read_source)); a file it cannot return is shown without one. ANSI
/// colours only with `color`.
pub fn text(report: &Report, sources: &dyn Fn(&Path) -> Option<String>, color: bool) -> String {
    let style = Style { color };
    let mut lines = Lines::new(sources);
    let mut out = String::new();
    for f in &report.findings {
        finding(&mut out, f, &mut lines, style);
    }
    for n in &report.notes {
        let label = style.paint(Paint::Note, "note");
        let _ = writeln!(out, "{label}: {}: {}", n.path.display(), n.message);
    }
    if !report.notes.is_empty() {
        out.push('\n');
    }
    let errors = report.findings.iter().filter(|f| f.severity == Severity::Error).count();
    let warnings = report.findings.len() - errors;
    let summary = format!(
        "{}, {} in {} ({})",
        count(errors, "error"),
        count(warnings, "warning"),
        count(report.stats.files, "file"),
        count(report.stats.lines, "line")
    );
    let _ = writeln!(out, "{}", style.paint(Paint::Bold, &summary));
    out
}

fn finding(out: &mut String, f: &Finding, lines: &mut Lines<'_>, style: Style) {
    let sev = style.paint(f.severity.into(), &format!("{}[{}]", f.severity, f.rule.id()));
    let _ = writeln!(out, "{sev}{}", style.paint(Paint::Bold, &format!(": {}", f.message)));
    let shown = shown_lines(f.span);
    let width = shown.iter().flatten().max().map_or(1, |n| n.to_string().len());
    let pad = " ".repeat(width);
    let arrow = style.paint(Paint::Gutter, "-->");
    let (line, col) = (f.span.start_line, f.span.start_col);
    let _ = writeln!(out, "{pad}{arrow} {}:{line}:{col}", f.path.display());
    let bar = style.paint(Paint::Gutter, "|");
    let mut snippet = String::new();
    for n in &shown {
        let Some(n) = *n else {
            let _ = writeln!(snippet, "{}", style.paint(Paint::Gutter, "..."));
            continue;
        };
        let Some(src) = lines.line(&f.path, n) else {
            // The file is gone or changed: no snippet rather than a wrong one.
            snippet.clear();
            break;
        };
        let (shown_src, from, len) = underline(src, n, f.span);
        let num = style.paint(Paint::Gutter, &format!("{n:>width$} |"));
        let _ = writeln!(snippet, "{num} {}", shown_src.trim_end());
        let marks = style.paint(f.severity.into(), &"^".repeat(len));
        let _ = writeln!(snippet, "{pad} {bar} {}{marks}", " ".repeat(from));
    }
    if !snippet.is_empty() {
        let _ = writeln!(out, "{pad} {bar}");
        out.push_str(&snippet);
    }
    for (label, value) in [("fix", &f.fix), ("leasehold", &f.leasehold)] {
        if !value.is_empty() {
            let _ = writeln!(out, "{pad} {} {label}: {value}", style.paint(Paint::Gutter, "="));
        }
    }
    out.push('\n');
}

/// The line numbers to show for `span`: all of them, or the first and last few with a gap
/// (`None`) between.
fn shown_lines(span: Span) -> Vec<Option<usize>> {
    let first = span.start_line.max(1);
    // A span ending at column 1 ends with the line before.
    let last =
        if span.end_line > first && span.end_col <= 1 { span.end_line - 1 } else { span.end_line };
    let last = last.max(first);
    if last - first < MAX_LINES {
        (first..=last).map(Some).collect()
    } else {
        let mut v: Vec<Option<usize>> = (first..first + 3).map(Some).collect();
        v.push(None);
        v.extend((last - 1..=last).map(Some));
        v
    }
}

/// Line `n` as shown (tabs expanded, control characters blanked) and where its carets go:
/// from which display column, how many.
fn underline(src: &str, n: usize, span: Span) -> (String, usize, usize) {
    let chars: Vec<char> = src.chars().collect();
    let len = chars.len();
    // 1-based character columns, end exclusive.
    let from = if n == span.start_line {
        span.start_col.max(1)
    } else {
        chars.iter().position(|c| !c.is_whitespace()).map_or(1, |i| i + 1)
    };
    let to = if n == span.end_line { span.end_col } else { len + 1 };
    let from = from.min(len + 1);
    let to = to.clamp(from, len + 1);
    let mut shown = String::new();
    let (mut start, mut width) = (None, 0usize);
    for (i, c) in chars.iter().enumerate() {
        let col = i + 1;
        if col == from {
            start = Some(shown.chars().count());
        }
        let before = shown.chars().count();
        if *c == '\t' {
            shown.push_str(TAB);
        } else if c.is_control() {
            shown.push(' ');
        } else {
            shown.push(*c);
        }
        if col >= from && col < to {
            width += shown.chars().count() - before;
        }
    }
    let start = start.unwrap_or_else(|| shown.chars().count());
    // An empty span (or one past the end of its line) still gets one caret.
    (shown, start, width.max(1))
}
