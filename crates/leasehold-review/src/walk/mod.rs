//! Walking a tree: which files are read, in parallel, and the report they add up to.

mod guard;
mod progress;
mod read;

use std::collections::{HashMap, HashSet};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use ignore::{WalkBuilder, WalkState};

use crate::{FileReview, Lang, Note, NoteKind, Options, Report};
use progress::{Counters, Progress};
use read::Loaded;

/// Directories of code nobody here wrote: passed over when met under a walked root (naming
/// one on the command line still reviews it).
const VENDORED_DIRS: &[&str] = &[
    "vendor",
    "node_modules",
    "third_party",
    "site-packages",
    ".venv",
    "venv",
    "dist",
    "build",
    "target",
];

/// Reviews every source file under `paths` (files or directories), in parallel.
///
/// Directories are walked as ripgrep walks them: `.gitignore` (in or out of a git
/// repository), `.ignore` and global git excludes are honoured; hidden files and directories,
/// and directories named `vendor`, `node_modules`, `third_party`, `site-packages`, `.venv`,
/// `venv`, `dist`, `build` or `target` below a named one, are passed over; symbolic links are
/// not followed. A file named in
/// `paths` is always read. Only files whose language [`Lang::of_path`] knows are read; one
/// too large, binary, minified or generated, or unreadable gets a [`Note`] instead, and so
/// does a path that does not exist (the CLI refuses those before calling this). A panic while
/// reviewing a file is caught and becomes a [`NoteKind::ParseError`] note; the run goes on.
/// Everything in the report is sorted by path and position, whatever order the threads
/// finished in; a file reached twice (`review . src`) is reviewed once.
pub fn review(paths: &[PathBuf], opts: &Options) -> Report {
    review_with(paths, opts, &crate::review_source)
}

/// What reviews one file's text (the real analysis, or a stand-in in tests).
type ReviewFn<'a> = dyn Fn(&Path, Lang, &str, &Options) -> FileReview + Sync + 'a;

fn review_with(paths: &[PathBuf], opts: &Options, review_file: &ReviewFn<'_>) -> Report {
    let Some((first, rest)) = paths.split_first() else {
        return Report::default();
    };
    let counters = Arc::new(Counters::default());
    let progress = Progress::start(opts.progress, counters.clone());
    let report = Mutex::new(Report::default());
    let seen = Mutex::new(HashSet::new());

    let mut walk = WalkBuilder::new(first);
    for p in rest {
        walk.add(p);
    }
    let threads = match opts.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    walk.hidden(true)
        .require_git(false)
        .follow_links(false)
        .threads(threads)
        .filter_entry(|e| !(e.depth() > 0 && is_dir(e) && is_vendored(e.file_name())));
    walk.build_parallel().run(|| {
        let (report, seen, counters) = (&report, &seen, &counters);
        Box::new(move |entry| {
            let entry = match entry {
                Ok(e) => e,
                Err(e) => {
                    let path = error_path(&e).unwrap_or_else(|| PathBuf::from("."));
                    let note = Note { path, kind: NoteKind::Unreadable, message: error_text(&e) };
                    report.lock().unwrap_or_else(|p| p.into_inner()).notes.push(note);
                    return WalkState::Continue;
                }
            };
            // Files found in a walk; a root is read whatever it is (a link to a file, say).
            let file = entry.file_type().is_some_and(|t| t.is_file())
                || (entry.depth() == 0 && entry.path().is_file());
            let Some(lang) = file.then(|| Lang::of_path(entry.path())).flatten() else {
                return WalkState::Continue;
            };
            let path = tidy(entry.path());
            if !seen.lock().unwrap_or_else(|p| p.into_inner()).insert(path.clone()) {
                return WalkState::Continue;
            }
            let done = one_file(&path, lang, opts, review_file);
            counters.add(done.lines);
            done.add_to(&mut report.lock().unwrap_or_else(|p| p.into_inner()));
            WalkState::Continue
        })
    });
    if let Some(p) = progress {
        p.finish();
    }
    let mut report = report.into_inner().unwrap_or_else(|p| p.into_inner());
    sort(&mut report);
    report
}

/// One file's part of the report.
struct Done {
    review: FileReview,
    /// Read (its language known, not too large, readable).
    read: bool,
    /// Its text went to the analysis.
    parsed: bool,
    lines: usize,
    bytes: u64,
}

impl Done {
    fn add_to(self, r: &mut Report) {
        r.stats.files += usize::from(self.read);
        r.stats.parsed += usize::from(self.parsed);
        r.stats.lines += self.lines;
        r.stats.bytes += self.bytes;
        r.findings.extend(self.review.findings);
        r.inventory.extend(self.review.inventory);
        r.notes.extend(self.review.notes);
    }
}

fn one_file(path: &Path, lang: Lang, opts: &Options, review_file: &ReviewFn<'_>) -> Done {
    let (text, bytes) = match read::read(path, opts.max_file_bytes) {
        Loaded::Text(text, bytes) => (text, bytes),
        Loaded::Skipped(note, bytes) => {
            let read = !matches!(note.kind, NoteKind::TooLarge | NoteKind::Unreadable);
            let review = FileReview { notes: vec![note], ..FileReview::default() };
            return Done { review, read, parsed: false, lines: 0, bytes };
        }
    };
    let lines = text.lines().count();
    let review = guard::catch(|| review_file(path, lang, &text, opts)).unwrap_or_else(|msg| {
        let message = format!("internal error while reviewing: {msg}");
        FileReview {
            notes: vec![Note { path: path.to_owned(), kind: NoteKind::ParseError, message }],
            ..FileReview::default()
        }
    });
    // A file with no lock-related text is read but not parsed (see `analyze::may_lock`).
    let parsed = crate::analyze::may_lock(&text);
    Done { review, read: true, parsed, lines, bytes }
}

/// Sorts by path, then position. Paths are ranked once: comparing two `Path`s walks their
/// components, and doing so at each of a sort's n log n comparisons took a quarter of the time
/// on a file with 40,000 findings.
fn sort(r: &mut Report) {
    let mut paths: Vec<&Path> = r
        .findings
        .iter()
        .map(|f| f.path.as_path())
        .chain(r.inventory.iter().map(|s| s.path.as_path()))
        .collect();
    paths.sort();
    paths.dedup();
    let rank: HashMap<PathBuf, usize> =
        paths.into_iter().enumerate().map(|(i, p)| (p.to_path_buf(), i)).collect();
    let rank_of = |p: &Path| rank.get(p).copied().unwrap_or(usize::MAX);
    r.findings.sort_by_cached_key(|f| (rank_of(&f.path), f.span, f.rule));
    r.inventory.sort_by_cached_key(|s| (rank_of(&s.path), s.span));
    r.notes.sort_by(|a, b| (&a.path, &a.message).cmp(&(&b.path, &b.message)));
}

fn is_dir(e: &ignore::DirEntry) -> bool {
    e.file_type().is_some_and(|t| t.is_dir())
}

fn is_vendored(name: &std::ffi::OsStr) -> bool {
    name.to_str().is_some_and(|n| VENDORED_DIRS.contains(&n))
}

/// `./src/a.py` as `src/a.py`, the way it is reported (and so the same file when named twice).
fn tidy(path: &Path) -> PathBuf {
    let mut c = path.components().peekable();
    while c.peek() == Some(&Component::CurDir) {
        c.next();
    }
    let tidy: PathBuf = c.collect();
    if tidy.as_os_str().is_empty() { path.to_owned() } else { tidy }
}

fn error_path(e: &ignore::Error) -> Option<PathBuf> {
    match e {
        ignore::Error::WithPath { path, .. } => Some(tidy(path)),
        ignore::Error::Loop { child, .. } => Some(tidy(child)),
        ignore::Error::Partial(errs) => errs.iter().find_map(error_path),
        ignore::Error::WithLineNumber { err, .. } | ignore::Error::WithDepth { err, .. } => {
            error_path(err)
        }
        _ => None,
    }
}

/// The error without the path the note already names.
fn error_text(e: &ignore::Error) -> String {
    match e {
        ignore::Error::WithPath { err, .. } | ignore::Error::WithDepth { err, .. } => {
            error_text(err)
        }
        ignore::Error::Io(io) if io.kind() == std::io::ErrorKind::NotFound => {
            "no such file or directory".into()
        }
        other => format!("cannot read: {other}"),
    }
}

#[cfg(test)]
mod tests;
