//! What a review produces: findings, the lock inventory and notes on files passed over. The
//! output formats (text, JSON, SARIF) read these types; nothing downstream parses strings.

use std::path::PathBuf;

use serde::Serialize;

use crate::lang::Lang;
use crate::rule::{Rule, Severity};

/// A place in a file. Lines and columns are 1-based; columns count characters (Unicode
/// scalar values), as SARIF's default `charOffset` columns do; bytes are 0-based offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Span {
    /// First line.
    pub start_line: usize,
    /// First column.
    pub start_col: usize,
    /// Last line (inclusive).
    pub end_line: usize,
    /// Column just past the end.
    pub end_col: usize,
    /// Byte offset of the start.
    pub start_byte: usize,
    /// Byte offset just past the end.
    pub end_byte: usize,
}

/// The store a lock site talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Store {
    /// Redis (any client, any topology), including a Lua script run on it.
    Redis,
    /// PostgreSQL advisory locks.
    Postgres,
    /// MySQL/MariaDB `GET_LOCK`.
    Mysql,
    /// etcd leases and locks.
    Etcd,
    /// ZooKeeper (Curator and the like).
    Zookeeper,
    /// A lock library whose store the code does not show (Redisson, Laravel's `Cache::lock`, …).
    Other,
}

impl Store {
    /// Lower-case name, as in the inventory.
    pub fn name(self) -> &'static str {
        match self {
            Store::Redis => "redis",
            Store::Postgres => "postgres",
            Store::Mysql => "mysql",
            Store::Etcd => "etcd",
            Store::Zookeeper => "zookeeper",
            Store::Other => "other",
        }
    }
}

/// One problem found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The rule.
    pub rule: Rule,
    /// The rule's severity (repeated so a JSON reader need not know the rules).
    pub severity: Severity,
    /// The file, as it was named on the command line or found under it.
    pub path: PathBuf,
    /// The language the file was parsed as.
    pub lang: Lang,
    /// What the finding points at (the call, the script, the argument).
    pub span: Span,
    /// What breaks and when: the timeline, in one or two sentences.
    pub message: String,
    /// The fix, in the API of the client the code uses.
    pub fix: String,
    /// leasehold's equivalent.
    pub leasehold: String,
}

/// How a lock site's release or renewal checks ownership.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Checked {
    /// Compared with this holder's value in one atomic step (a script, a library that does).
    OwnerChecked,
    /// Done without comparing (a bare DEL, EXPIRE, GET then DEL).
    Unchecked,
    /// Not seen in the code reviewed.
    None,
    /// The lock ends with its session or transaction (advisory locks, `GET_LOCK`).
    WithSession,
}

/// One lock site: where a lock is taken, and what the code around it guarantees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LockSite {
    /// The file.
    pub path: PathBuf,
    /// The language.
    pub lang: Lang,
    /// The acquire call.
    pub span: Span,
    /// The store.
    pub store: Store,
    /// The client API as written (`redis-py set(nx=True)`, `pg_try_advisory_lock`, `tryLock`).
    pub api: String,
    /// The key expression as written.
    pub key: String,
    /// The expiry as written, or `none`.
    pub expiry: String,
    /// How the owner value is made (`random`, `uuid`, `constant "1"`, `hostname`, `pid`, …).
    pub owner: String,
    /// How it is released.
    pub release: Checked,
    /// How it is renewed.
    pub renew: Checked,
    /// Whether a fence token or idempotency key reaches a write, as seen (`fence`, `none`).
    pub fence: String,
    /// The rules with findings on this site.
    pub findings: Vec<Rule>,
}

/// Why a file was passed over, or only partly read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NoteKind {
    /// Larger than the size limit.
    TooLarge,
    /// Not valid UTF-8, or containing NUL bytes.
    Binary,
    /// Minified or generated (very long lines, a generated-code marker).
    Generated,
    /// It has syntax errors; what parsed was still reviewed.
    ParseError,
    /// It could not be read.
    Unreadable,
    /// A suppression comment that names no rule or gives no reason.
    BadSuppression,
}

/// A note about one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Note {
    /// The file.
    pub path: PathBuf,
    /// What happened.
    pub kind: NoteKind,
    /// In words.
    pub message: String,
}

/// Counts for the run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// Files whose language is known and which were read.
    pub files: usize,
    /// Of those, files that held lock-related text and were parsed.
    pub parsed: usize,
    /// Lines read.
    pub lines: usize,
    /// Bytes read.
    pub bytes: u64,
}

/// Everything one review found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// Findings, sorted by path and position.
    pub findings: Vec<Finding>,
    /// Every lock site, sorted by path and position.
    pub inventory: Vec<LockSite>,
    /// Files passed over or only partly read.
    pub notes: Vec<Note>,
    /// Counts.
    pub stats: Stats,
}

impl Report {
    /// Whether an error-level finding exists (the CLI then exits 1).
    pub fn has_errors(&self) -> bool {
        self.findings.iter().any(|f| f.severity == Severity::Error)
    }
}
