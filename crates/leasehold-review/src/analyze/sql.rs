//! SQL held in string literals: which advisory-lock functions a statement calls, and whether
//! it writes. Tokenised, not searched as text: `x_pg_advisory_lock` is not the function.

/// The lock functions a statement calls.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Sql {
    /// The first lock-taking function called (`pg_try_advisory_lock`, `get_lock`, …).
    pub lock: Option<&'static str>,
    /// A lock-releasing function is called.
    pub unlock: bool,
    /// INSERT/UPDATE/DELETE/MERGE/UPSERT/REPLACE.
    pub writes: bool,
}

const LOCKS: &[&str] = &[
    "pg_try_advisory_lock",
    "pg_advisory_lock",
    "pg_try_advisory_lock_shared",
    "pg_advisory_lock_shared",
    "pg_try_advisory_xact_lock",
    "pg_advisory_xact_lock",
    "pg_try_advisory_xact_lock_shared",
    "pg_advisory_xact_lock_shared",
    "get_lock",
];
const UNLOCKS: &[&str] = &[
    "pg_advisory_unlock",
    "pg_advisory_unlock_shared",
    "pg_advisory_unlock_all",
    "release_lock",
    "release_all_locks",
];

/// Whether the function holds the lock for the session (not just the transaction).
pub(crate) fn is_session(f: &str) -> bool {
    !f.contains("xact")
}

/// Whether the function answers whether it got the lock (rather than waiting for it).
pub(crate) fn is_try(f: &str) -> bool {
    f.contains("try") || f == "get_lock"
}

pub(crate) fn analyze(s: &str) -> Option<Sql> {
    let lower = s.to_ascii_lowercase();
    if !lower.contains("lock") && !has_write(&lower) {
        return None;
    }
    let mut out = Sql::default();
    let bytes = lower.as_bytes();
    let mut i = 0;
    let mut first_word = true;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let word = &lower[start..i];
            let mut j = i;
            while j < bytes.len() && bytes[j].is_ascii_whitespace() {
                j += 1;
            }
            let called = j < bytes.len() && bytes[j] == b'(';
            if called {
                if out.lock.is_none()
                    && let Some(f) = LOCKS.iter().find(|f| **f == word)
                {
                    out.lock = Some(f);
                }
                if UNLOCKS.contains(&word) {
                    out.unlock = true;
                }
            }
            if first_word
                && matches!(word, "insert" | "update" | "delete" | "merge" | "upsert" | "replace")
            {
                out.writes = true;
            }
            first_word = false;
        } else {
            if c == b';' {
                first_word = true;
            }
            i += 1;
        }
    }
    (out.lock.is_some() || out.unlock || out.writes).then_some(out)
}

fn has_write(lower: &str) -> bool {
    ["insert", "update", "delete", "merge", "upsert", "replace"].iter().any(|w| lower.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_functions_not_substrings() {
        let s = analyze("SELECT pg_try_advisory_lock($1)").unwrap();
        assert_eq!(s.lock, Some("pg_try_advisory_lock"));
        assert!(analyze("SELECT my_pg_advisory_lock_table FROM t").is_none());
        assert!(analyze("SELECT RELEASE_LOCK('x')").unwrap().unlock);
        assert!(analyze("update jobs set done = true").unwrap().writes);
        assert!(!is_session("pg_try_advisory_xact_lock") && is_try("get_lock"));
    }
}
