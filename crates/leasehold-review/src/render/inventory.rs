//! The lock inventory as a table: one row per lock site.

use std::fmt::Write as _;

use super::count;
use crate::{Checked, LockSite, Report};

/// Column headers and the widest each may grow (characters); the last column is never cut.
const COLUMNS: [(&str, usize); 10] = [
    ("location", 40),
    ("store", 9),
    ("api", 28),
    ("key", 28),
    ("expiry", 12),
    ("owner", 16),
    ("release", 13),
    ("renew", 13),
    ("fence", 10),
    ("findings", usize::MAX),
];

/// The lock inventory as a table: location (`file:line`), store, api, key, expiry, owner,
/// release, renew, fence and the rules with findings on the site, one row per lock site,
/// then a line counting them. Whitespace in an expression is shown as one space; a value
/// wider than its column is cut with `…` (a location keeps its end: the file name and line).
pub fn inventory_text(report: &Report) -> String {
    let rows: Vec<[String; 10]> = report.inventory.iter().map(row).collect();
    let mut widths = COLUMNS.map(|(h, _)| h.chars().count());
    for r in &rows {
        for (i, cell) in r.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count().min(COLUMNS[i].1));
        }
    }
    let mut out = String::new();
    if !rows.is_empty() {
        line(&mut out, &COLUMNS.map(|(h, _)| h.to_owned()), &widths);
        for r in &rows {
            line(&mut out, r, &widths);
        }
        out.push('\n');
    }
    let files: std::collections::BTreeSet<_> = report.inventory.iter().map(|s| &s.path).collect();
    let _ = writeln!(
        out,
        "{} in {} ({} reviewed)",
        count(report.inventory.len(), "lock site"),
        count(files.len(), "file"),
        report.stats.files,
    );
    out
}

fn line(out: &mut String, cells: &[String; 10], widths: &[usize; 10]) {
    let mut l = String::new();
    for (i, cell) in cells.iter().enumerate() {
        let cut = if i == 0 { cut_start(cell, widths[i]) } else { cut_end(cell, widths[i]) };
        if i + 1 == cells.len() {
            l.push_str(&cut);
        } else {
            let pad = widths[i] - cut.chars().count();
            let _ = write!(l, "{cut}{}  ", " ".repeat(pad));
        }
    }
    let _ = writeln!(out, "{}", l.trim_end());
}

fn row(s: &LockSite) -> [String; 10] {
    let findings: Vec<&str> = s.findings.iter().map(|r| r.id()).collect();
    [
        format!("{}:{}", s.path.display(), s.span.start_line),
        s.store.name().to_owned(),
        flat(&s.api),
        flat(&s.key),
        flat(&s.expiry),
        flat(&s.owner),
        checked(s.release).to_owned(),
        checked(s.renew).to_owned(),
        flat(&s.fence),
        if findings.is_empty() { "-".to_owned() } else { findings.join(",") },
    ]
}

fn checked(c: Checked) -> &'static str {
    match c {
        Checked::OwnerChecked => "owner-checked",
        Checked::Unchecked => "unchecked",
        Checked::None => "none",
        Checked::WithSession => "with-session",
    }
}

/// An expression on one line: runs of whitespace (newlines included) as one space.
fn flat(s: &str) -> String {
    let f = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if f.is_empty() { "-".to_owned() } else { f }
}

fn cut_end(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_owned();
    }
    let mut t: String = s.chars().take(width.saturating_sub(1)).collect();
    t.push('…');
    t
}

fn cut_start(s: &str, width: usize) -> String {
    let n = s.chars().count();
    if n <= width {
        return s.to_owned();
    }
    let mut t = String::from("…");
    t.extend(s.chars().skip(n - width.saturating_sub(1)));
    t
}
