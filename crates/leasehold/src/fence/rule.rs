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

/// Whether a resource with nothing installed for a claim must refuse its fence as older than
/// the horizon (`horizon_us`, µs), read against the resource's clock `now_us`: a clock-backed
/// fence (at least [`crate::horizon::CLOCK_FENCE_MIN`]) issued more than the horizon ago.
/// Fences without an age (revisions) are never past it.
// Used by the resources that check the horizon in Rust rather than in their SQL, and by the
// model (`tools`); a build with neither has no caller.
#[allow(dead_code)]
pub fn past_horizon(fence: u64, now_us: u64, horizon_us: u64) -> bool {
    fence >= crate::horizon::CLOCK_FENCE_MIN && fence.saturating_add(horizon_us) < now_us
}

/// Whether a resource may forget the claim `fence`, last claimed at `claimed_us`: its fence is
/// clock-backed and older than twice the horizon, and nobody claimed it within the horizon.
/// Every fence the forgotten one had refused is smaller, so older than the horizon at any
/// later instant (the resource's clock stepping back by less than the horizon), and
/// [`past_horizon`] refuses it; a holder that claims once per horizon keeps its claim.
#[cfg_attr(not(feature = "tools"), allow(dead_code))]
pub fn may_forget(fence: u64, claimed_us: u64, now_us: u64, horizon_us: u64) -> bool {
    fence >= crate::horizon::CLOCK_FENCE_MIN
        && fence.saturating_add(horizon_us.saturating_mul(2)) < now_us
        && claimed_us.saturating_add(horizon_us) < now_us
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

    #[test]
    fn horizon() {
        let (h, now) = (1_000_000, 2_000_000_000_000_000);
        assert!(past_horizon(now - h - 1, now, h));
        assert!(!past_horizon(now - h, now, h), "exactly the horizon old is kept");
        assert!(!past_horizon(42, now, h), "a revision has no age");
        assert!(may_forget(now - 2 * h - 1, now - h - 1, now, h));
        assert!(!may_forget(now - 2 * h - 1, now - h, now, h), "claimed within the horizon");
        assert!(!may_forget(now - 2 * h, now - h - 1, now, h), "fence not twice the horizon old");
        assert!(!may_forget(42, 0, now, h), "a revision's claim is kept");
        // What a forgotten claim refused stays refused: older fences are past the horizon.
        let forgotten = now - 2 * h - 1;
        assert!(past_horizon(forgotten - 1, now - h + 1, h), "even with the clock back < h");
    }
}
