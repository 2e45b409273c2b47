//! One file: a cheap look for lock-related text, then parse, reduce to lock operations, and
//! run the rules.

mod advice;
mod ctx;
mod effects;
mod extract;
mod handlers;
mod inventory;
mod ir;
mod keys;
mod langs;
mod lua;
mod opindex;
mod ops;
mod owner;
mod protecting;
mod rules;
#[cfg(test)]
mod scale_tests;
mod sql;
mod usage;
mod work;

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

/// Whether a path is test code by the usual conventions (a `test`/`tests`/`spec` folder,
/// `test_x.py`, `x_test.go`, `x.test.ts`, `x_spec.rb`, `XTest.java`, and a Rust test
/// module's own file, `x_tests.rs`).
fn is_test_path(path: &Path) -> bool {
    let dirs = path.parent().into_iter().flat_map(|p| p.components()).any(|c| {
        matches!(
            c.as_os_str().to_str(),
            Some("test" | "tests" | "spec" | "__tests__" | "testing" | "testdata")
        )
    });
    let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    dirs || name.starts_with("test_")
        || name.ends_with("_test")
        || name.ends_with("_tests")
        || name.ends_with(".test")
        || name.ends_with(".spec")
        || name.ends_with("_spec")
        || name.ends_with("Test")
        || name.ends_with("Tests")
}

/// Byte ranges of test functions (`test…`) and of Rust's `#[cfg(test)]` modules.
fn test_ranges(ir: &ir::FileIr, src: &str) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = ir
        .funcs
        .iter()
        .skip(1)
        .filter(|f| f.name.starts_with("test") || f.name.starts_with("Test"))
        .map(|f| f.range)
        .collect();
    if let Some(at) = src.find("#[cfg(test)]") {
        out.push((at, src.len()));
    }
    out
}

/// The union of byte ranges as disjoint ranges in order (overlapping and nested ones joined).
fn merged(mut ranges: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    ranges.sort_unstable();
    let mut out: Vec<(usize, usize)> = Vec::with_capacity(ranges.len());
    for (a, b) in ranges {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
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
    let mut ops = ops::ops(lang, &ir);
    // A client library's own `def setnx(self, name, value)` is the API, not a use of it.
    ops.retain(|o| {
        let c = &ir.calls[o.call];
        let f = ops::normalize(&ir.funcs[c.func].name);
        !(o.kind == ops::OpKind::Acquire
            && (f == ops::normalize(&c.name)
                || matches!(f.as_str(), "set" | "setnx" | "setifabsent")))
    });
    let scripts = ops::scripts(&ir);
    let cx = ctx::Ctx {
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
    // Test code clears and sets lock keys on purpose; it is not where locks are used.
    if is_test_path(path) {
        out.findings.clear();
    } else {
        let tests = merged(test_ranges(&ir, src));
        out.findings.retain(|f| {
            // The last merged range starting at or before the finding is the only one that can
            // hold it.
            let at = f.span.start_byte;
            let i = tests.partition_point(|(a, _)| *a <= at);
            !(i > 0 && at < tests[i - 1].1)
        });
    }
    out.inventory = r.inventory;
    out
}

#[cfg(test)]
mod tests {
    use super::is_test_path;
    use std::path::Path;

    #[test]
    fn test_paths_by_convention() {
        for p in [
            "tests/lock.py",
            "src/lock_test.go",
            "a/spec/lock_spec.rb",
            "web/lock.test.ts",
            "LockTest.java",
            "test_lock.py",
            "src/analyze/scale_tests.rs",
        ] {
            assert!(is_test_path(Path::new(p)), "{p}");
        }
        for p in [
            "src/lock.py",
            "contest/lock.go",
            "latest/lock.rb",
            "corpus/bad/python-redis-py.py",
            "src/contests.rs",
        ] {
            assert!(!is_test_path(Path::new(p)), "{p}");
        }
    }
}
