//! `leasehold review`: the design guide's review procedure as a static check over the lock code
//! people already have, in Python, Java, Go, JavaScript, TypeScript, Rust, PHP and Ruby.
//!
//! Each file is parsed with its language's tree-sitter grammar (Lua scripts inside string
//! literals with tree-sitter-lua), reduced to the calls, strings, assignments and error
//! handlers that matter for locking, and the client APIs it uses (redis-py, Jedis, go-redis,
//! ioredis, redis-rs, SQL advisory locks, …) are read into lock operations. The rules then
//! run over those operations. A review never panics on input and never aborts on a file: a
//! file that does not parse is reviewed as far as it parsed and named in a [`Note`].
//!
//! ```
//! use leasehold_review::{Lang, Options, review_source};
//! let src = "import redis\nr = redis.Redis()\nr.setnx('lock:job', '1')\nr.expire('lock:job', 30)\n";
//! let out = review_source("job.py".as_ref(), Lang::Python, src, &Options::default());
//! assert!(out.findings.iter().any(|f| f.rule.id() == "nx-without-expiry"));
//! ```
#![deny(missing_docs)]

mod analyze;
mod lang;
pub mod render;
mod report;
mod rule;
mod suppress;
mod walk;

use std::path::Path;

pub use lang::Lang;
pub use report::{Checked, Finding, LockSite, Note, NoteKind, Report, Span, Stats, Store};
pub use rule::{Rule, Severity, UnknownRule};
pub use walk::review;

/// What to check and how to walk.
#[derive(Debug, Clone)]
pub struct Options {
    /// Only these rules (`--select`); empty means all.
    pub select: Vec<Rule>,
    /// Never these rules (`--ignore`).
    pub ignore: Vec<Rule>,
    /// Files larger than this are passed over with a note.
    pub max_file_bytes: u64,
    /// Worker threads; 0 means one per core.
    pub threads: usize,
    /// Print a progress line to stderr on long runs (the CLI sets it when stderr is a terminal).
    pub progress: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            select: Vec::new(),
            ignore: Vec::new(),
            max_file_bytes: 2 << 20,
            threads: 0,
            progress: false,
        }
    }
}

impl Options {
    /// Whether `rule` is checked under `--select` and `--ignore`.
    pub fn enabled(&self, rule: Rule) -> bool {
        (self.select.is_empty() || self.select.contains(&rule)) && !self.ignore.contains(&rule)
    }
}

/// What one file's review found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileReview {
    /// Findings, after `--select`/`--ignore` and suppression comments.
    pub findings: Vec<Finding>,
    /// Lock sites.
    pub inventory: Vec<LockSite>,
    /// Parse errors and bad suppression comments.
    pub notes: Vec<Note>,
}

/// Reviews one file's text as `lang`. `path` is only reported, never read.
pub fn review_source(path: &Path, lang: Lang, src: &str, opts: &Options) -> FileReview {
    let mut out = analyze::file(path, lang, src);
    out.findings.retain(|f| opts.enabled(f.rule));
    suppress::apply(path, src, &mut out);
    out
}
