//! The report as people and tools read it: rustc-style text, JSON, SARIF 2.1.0 for code
//! scanning, the lock inventory as a table or JSON, and each rule's explanation page.
//!
//! Every function here is pure over the [`Report`] except where it shows or hashes source
//! lines: [`text`] takes a function that returns a file's text (usually [`read_source`]) and
//! [`sarif`] reads the files again itself. A file that cannot be read again, or has changed
//! so a finding's line is gone, loses only its snippet.

mod explain;
mod inventory;
mod sarif;
mod style;
mod text;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::{LockSite, Report, Stats};

pub use explain::explain;
pub use inventory::inventory_text;
pub use sarif::{sarif, sarif_with};
pub use text::text;

/// The version of the JSON formats ([`json`], [`inventory_json`]): raised when a field changes
/// meaning or goes away, not when one is added.
pub const JSON_VERSION: u32 = 1;

/// A file's text as the review saw it (a UTF-8 byte-order mark removed), for snippets;
/// `None` when it cannot be read or is not UTF-8.
pub fn read_source(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    Some(match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_owned(),
        None => text,
    })
}

/// The report as pretty-printed JSON: `version` (1), then the report's `findings`,
/// `inventory`, `notes` and `stats`, each as its type serializes.
pub fn json(report: &Report) -> String {
    #[derive(Serialize)]
    struct Versioned<'a> {
        version: u32,
        #[serde(flatten)]
        report: &'a Report,
    }
    to_json(&Versioned { version: JSON_VERSION, report })
}

/// The lock inventory as pretty-printed JSON: `version` (1), `inventory` (every lock site) and
/// `stats`.
pub fn inventory_json(report: &Report) -> String {
    #[derive(Serialize)]
    struct Inventory<'a> {
        version: u32,
        inventory: &'a [LockSite],
        stats: &'a Stats,
    }
    to_json(&Inventory {
        version: JSON_VERSION,
        inventory: &report.inventory,
        stats: &report.stats,
    })
}

fn to_json(v: &impl Serialize) -> String {
    // The report's types serialize to plain JSON objects, strings and integers only.
    let mut s =
        serde_json::to_string_pretty(v).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    s.push('\n');
    s
}

/// One file's lines, read once however many findings it has (findings come sorted by path).
struct Lines<'a> {
    sources: &'a dyn Fn(&Path) -> Option<String>,
    path: Option<PathBuf>,
    text: Option<String>,
}

impl<'a> Lines<'a> {
    fn new(sources: &'a dyn Fn(&Path) -> Option<String>) -> Self {
        Lines { sources, path: None, text: None }
    }

    /// The text of `path`.
    fn file(&mut self, path: &Path) -> Option<&str> {
        if self.path.as_deref() != Some(path) {
            self.text = (self.sources)(path);
            self.path = Some(path.to_owned());
        }
        self.text.as_deref()
    }

    /// Line `n` (1-based) of `path`, without its line ending.
    fn line(&mut self, path: &Path, n: usize) -> Option<&str> {
        self.file(path)?.lines().nth(n.checked_sub(1)?)
    }
}

/// `n` and the noun, plural unless `n` is 1.
fn count(n: usize, noun: &str) -> String {
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
}

#[cfg(test)]
pub(crate) mod tests;
