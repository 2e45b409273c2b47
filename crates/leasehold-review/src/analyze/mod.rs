//! One file: a cheap look for lock-related text, then parse, reduce to lock operations, and
//! run the rules.

mod advice;
mod extract;
mod ir;
mod keys;
mod langs;
mod lua;
mod ops;
mod rules;
mod sql;

use std::path::Path;

use crate::{FileReview, Lang, Note, NoteKind};

/// Text that every lock site the rules know contains, case-insensitively. A file with none of
/// it has no lock site, so it is not parsed (as ripgrep-style tools prefilter).
const NEEDLES: &[&str] = &["nx", "lock", "ifabsent", "mutex", "redis.call", "leader", "semaphore"];

/// Whether a file may hold a lock site.
pub(crate) fn may_lock(src: &str) -> bool {
    let b = src.as_bytes();
    // A case-insensitive scan for a few short needles, without allocating a lowered copy.
    NEEDLES.iter().any(|n| contains_ci(b, n.as_bytes()))
}

fn contains_ci(hay: &[u8], needle: &[u8]) -> bool {
    let first = needle[0];
    let upper = first.to_ascii_uppercase();
    let mut i = 0;
    while let Some(p) = memchr2(first, upper, &hay[i..]) {
        let at = i + p;
        if hay.len() - at >= needle.len() && hay[at..at + needle.len()].eq_ignore_ascii_case(needle)
        {
            return true;
        }
        i = at + 1;
    }
    false
}

fn memchr2(a: u8, b: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&c| c == a || c == b)
}

/// Reviews one file. Never panics on any input (the walker also catches a panic, as a
/// last resort, and turns it into a note).
pub(crate) fn file(path: &Path, lang: Lang, src: &str) -> FileReview {
    let mut out = FileReview::default();
    if !may_lock(src) {
        return out;
    }
    let Some(tree) = extract::parse(lang, src) else {
        out.notes.push(Note {
            path: path.to_path_buf(),
            kind: NoteKind::ParseError,
            message: format!(
                "the {lang} parser gave up within its time budget; the file was not reviewed"
            ),
        });
        return out;
    };
    let ir = extract::extract(lang, &tree, src);
    if ir.had_errors {
        out.notes.push(Note {
            path: path.to_path_buf(),
            kind: NoteKind::ParseError,
            message: format!("syntax errors: reviewed as far as it parsed ({} parses it)", lang),
        });
    }
    let ops = ops::ops(lang, &ir);
    let scripts = ops::scripts(&ir);
    let cx = rules::Ctx {
        facts: std::cell::OnceCell::new(),
        path,
        src,
        lang,
        ir: &ir,
        ops: &ops,
        scripts: &scripts,
    };
    let r = rules::run(&cx);
    out.findings = r.findings;
    out.inventory = r.inventory;
    out
}
