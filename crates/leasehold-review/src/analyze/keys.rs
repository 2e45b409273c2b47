//! Which keys are locks: the keys an acquire sets, names that say so (`lock:job`,
//! `redisLock`, `order_mutex`), and values reached through a variable or constant.

use super::ir::{Expr, FileIr, FuncId, Kind};

/// Whether an identifier or string names a lock: `lock`, `mutex`, `leader`, `semaphore` as a
/// word or a camelCase part (`redisLock`, `lock:job`, `JOB_LOCK`), not inside another word
/// (`block`, `clock`, `unlocked_at` still counts as it starts a word).
pub(crate) fn lockish(t: &str) -> bool {
    ["lock", "mutex", "leader", "semaphore"].iter().any(|w| has_part(t, w))
}

fn has_part(t: &str, w: &str) -> bool {
    let lower = t.to_ascii_lowercase();
    let b = t.as_bytes();
    lower.match_indices(w).any(|(i, _)| {
        // `locked`, `lockout`: a state (an account locked out), not a lock.
        let rest = &lower[i + w.len()..];
        if w == "lock" && (rest.starts_with("ed") || rest.starts_with("out")) {
            return false;
        }
        let first = b[i];
        match i.checked_sub(1).map(|j| b[j]) {
            None => true,
            Some(p) if !p.is_ascii_alphanumeric() => true,
            // camelCase: `redisLock`; but not `CLOCK`, `Block`.
            Some(p) => {
                first.is_ascii_uppercase() && p.is_ascii_lowercase()
                    || (first.is_ascii_uppercase() && p.is_ascii_digit())
            }
        }
    })
}

/// A key expression, normalised so the same key reads the same at its acquire and release:
/// whitespace, `self.`/`this.`/`$this->`/`@`/`$`/`&` and trailing conversions dropped.
pub(crate) fn norm(e: &Expr) -> String {
    let mut t: String = e.text.chars().filter(|c| !c.is_whitespace()).collect();
    // A one-element list of keys (`del([$key])`) is that key.
    if t.starts_with('[') && t.ends_with(']') && !t.contains(',') {
        t = t[1..t.len() - 1].to_owned();
    }
    for p in ["self.", "this.", "$this->", "@", "&mut", "&", "*", "$"] {
        while let Some(s) = t.strip_prefix(p) {
            t = s.to_owned();
        }
    }
    for s in [".clone()", ".as_str()", ".to_string()", ".as_ref()", ".toString()"] {
        if let Some(x) = t.strip_suffix(s) {
            t = x.to_owned();
        }
    }
    t
}

/// Whether `e`, or the value it names, reads as a lock's key.
pub(crate) fn names_lock(ir: &FileIr, func: FuncId, e: &Expr) -> bool {
    if lockish(&e.text) {
        return true;
    }
    let mut cur = e.clone();
    let n = norm(e);
    if matches!(cur.kind, Kind::Other) && n.chars().all(|c| c.is_alphanumeric() || c == '_') {
        cur.kind = Kind::Name(n);
    }
    for _ in 0..3 {
        let next = match &cur.kind {
            Kind::Name(n) => ir.value_of(func, n, false, cur.span.start_byte),
            Kind::Field(n) => ir.value_of(func, n, true, cur.span.start_byte),
            _ => None,
        };
        match next {
            Some(v) if lockish(&v.text) => return true,
            Some(v) => cur = v.clone(),
            None => return false,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::lockish;

    #[test]
    fn lock_words_and_not_lookalikes() {
        for yes in [
            "lock:job",
            "redisLock",
            "JOB_LOCK",
            "lock_key",
            "order-mutex",
            "leaderKey",
            "LOCK",
            "Lock",
        ] {
            assert!(lockish(yes), "{yes}");
        }
        for no in [
            "block",
            "Block",
            "clock_skew",
            "CLOCK",
            "blockList",
            "session_key",
            "account:locked:7",
            "lockout_until",
        ] {
            assert!(!lockish(no), "{no}");
        }
    }
}
