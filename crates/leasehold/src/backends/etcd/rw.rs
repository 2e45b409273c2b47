//! Readers and writers in the layout of etcd's `contrib/recipes` `RWMutex`: under the lock
//! prefix `PREFIX/KEY/`, a writer's key is `PREFIX/KEY/write/OWNER` and a reader's
//! `PREFIX/KEY/read/OWNER` (the recipe's end in a timestamp instead of the owner token).
//!
//! A writer (leasehold's exclusive grant, the mutex) waits for every key under the prefix
//! with a lower create revision; a reader only for those that are not readers'. So a waiting
//! writer blocks every later reader (writer preference by revision, as the recipe), and since
//! `concurrency.Mutex` (`etcdctl lock`) also waits for every earlier key under the prefix,
//! leasehold's readers and writers, the recipe's, and `etcdctl lock` exclude each other as they
//! should. (The recipe's reader waits only for keys under `write`; a `concurrency.Mutex` holder
//! is invisible to it, which is the recipe's own limitation.)

use super::lock_name_in;
use super::rpc::prefix_end;
use crate::{Key, Mode, OwnerToken};

/// The key a grant in `mode` puts.
pub(super) fn grant_key(prefix: &str, key: &Key, owner: &OwnerToken, mode: Mode) -> String {
    let part = if mode == Mode::Shared { "read" } else { "write" };
    format!("{}/{part}/{owner}", lock_name_in(prefix, key))
}

/// The ranges `[key, range_end)` of the keys under `pfx` (`PREFIX/KEY/`) a grant in `mode`
/// waits for: all of them for an exclusive grant, all but `pfx/read/…` for a reader.
pub(super) fn blockers(pfx: &str, mode: Mode) -> Vec<(Vec<u8>, Vec<u8>)> {
    let all_end = prefix_end(pfx.as_bytes());
    if mode != Mode::Shared {
        return vec![(pfx.as_bytes().to_vec(), all_end)];
    }
    let readers = format!("{pfx}read/").into_bytes();
    let after_readers = prefix_end(&readers);
    vec![(pfx.as_bytes().to_vec(), readers), (after_readers, all_end)]
}

/// What a key under a lock prefix is, from the part after `NAME/`: `(mode, owner part)`.
/// `write/X` and `read/X` are the recipe's; a bare `X` is `concurrency.Mutex`'s (etcdctl).
pub(super) fn kind(rest: &str) -> (Mode, &str) {
    if let Some(r) = rest.strip_prefix("read/") {
        (Mode::Shared, r)
    } else {
        (Mode::Exclusive, rest.strip_prefix("write/").unwrap_or(rest))
    }
}

/// Splits a key under the store's prefix into its lock name and the part after it:
/// `NAME/write/X`, `NAME/read/X` or `NAME/X`.
pub(super) fn split(full: &str) -> Option<(&str, &str)> {
    for part in ["/write/", "/read/"] {
        if let Some(i) = full.rfind(part) {
            let rest = &full[i + 1..];
            if !rest[part.len() - 1..].contains('/') {
                return Some((&full[..i], rest));
            }
        }
    }
    let (name, _) = full.rsplit_once('/')?;
    Some((name, &full[name.len() + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_wait_for_everything_but_readers() {
        let r = blockers("lh/k/", Mode::Shared);
        assert_eq!(r[0], (b"lh/k/".to_vec(), b"lh/k/read/".to_vec()));
        assert_eq!(r[1], (b"lh/k/read0".to_vec(), b"lh/k0".to_vec()));
        let in_range = |k: &[u8]| r.iter().any(|(a, b)| k >= a.as_slice() && k < b.as_slice());
        assert!(in_range(b"lh/k/write/abc") && in_range(b"lh/k/694d7c5a1f2b3c4d"));
        assert!(!in_range(b"lh/k/read/abc"), "readers do not wait for readers");
        assert!(!in_range(b"lh/kx/write/a"), "nor for another lock");
        assert_eq!(blockers("lh/k/", Mode::Exclusive), [(b"lh/k/".to_vec(), b"lh/k0".to_vec())]);
        assert_eq!(split("lh/a/b/write/X"), Some(("lh/a/b", "write/X")));
        assert_eq!(split("lh/a/read/X"), Some(("lh/a", "read/X")));
        assert_eq!(split("lh/a/694d"), Some(("lh/a", "694d")));
        assert_eq!(kind("read/X"), (Mode::Shared, "X"));
        assert_eq!(kind("write/X"), (Mode::Exclusive, "X"));
        assert_eq!(kind("694d"), (Mode::Exclusive, "694d"));
    }
}
