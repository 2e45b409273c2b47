//! The two admission rules of a fenced resource (`docs/design.md` §4.1) as pure functions,
//! over any key and owner types: the resources' Rust code calls them, their SQL and Lua forms
//! are pinned to them by the testkit's `rules` test, and the protocol model
//! (`crates/leasehold-model`) checks them with small integers for keys and owners.
//!
//! A claim is `(lock key, fence, owner)`; `installed` is what the resource holds (`None`:
//! unclaimed).

/// Whether `presented` may be installed over `installed`: the fence is not 0 (a store that
/// issues no fences), and the resource is unclaimed, or guarded by the same lock key with a
/// smaller fence, or with the same fence and the same owner (an idempotent re-claim).
pub fn may_claim<K, O>(installed: Option<(&K, u64, &O)>, presented: (&K, u64, &O)) -> bool
where
    K: PartialEq + ?Sized,
    O: PartialEq + ?Sized,
{
    let (key, fence, owner) = presented;
    fence != 0
        && match installed {
            None => true,
            Some((k, f, o)) => k == key && (fence > f || (fence == f && o == owner)),
        }
}

/// Whether an effect under `presented` may apply: the installed claim is still exactly it
/// (same key, fence and owner). Checked atomically with the effect.
pub fn may_apply<K, O>(installed: Option<(&K, u64, &O)>, presented: (&K, u64, &O)) -> bool
where
    K: PartialEq + ?Sized,
    O: PartialEq + ?Sized,
{
    installed.is_some_and(|(k, f, o)| k == presented.0 && f == presented.1 && o == presented.2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_and_apply() {
        let i = Some(("k", 5, "a"));
        assert!(may_claim::<str, str>(None, ("k", 1, "a")));
        assert!(!may_claim::<str, str>(None, ("k", 0, "a")), "fence 0 never claims");
        assert!(may_claim(i, ("k", 6, "b")));
        assert!(may_claim(i, ("k", 5, "a")), "idempotent re-claim");
        assert!(!may_claim(i, ("k", 5, "b")), "same fence, other owner");
        assert!(!may_claim(i, ("k", 4, "a")));
        assert!(!may_claim(i, ("x", 9, "a")), "another lock key");
        assert!(may_apply(i, ("k", 5, "a")));
        assert!(!may_apply(i, ("k", 5, "b")) && !may_apply(i, ("k", 6, "a")));
        assert!(!may_apply::<str, str>(None, ("k", 5, "a")), "nothing installed");
    }
}
