//! What the conformance scenarios share: unique keys, fence assertions, another process's
//! locker on the same store, and the bound on every step.

use std::time::Duration;

use leasehold::{FenceRepeat, FenceToken, LockKind, Locker, OwnerToken};

/// A key no other scenario run uses.
pub fn unique_key(name: &str) -> String {
    format!("conformance:{name}:{}", OwnerToken::generate().expect("random"))
}

pub(super) const LONG: Duration = Duration::from_secs(30);
pub(super) const BOUND: Duration = Duration::from_secs(20);

/// Whether the store issues fences (else every grant carries fence 0).
pub fn issues_fences(l: &Locker) -> bool {
    l.guarantees().fence_repeat != FenceRepeat::NoFence
}

/// `after` was granted after `before`: its fence is larger, or both are 0 on a store that
/// issues no fences.
#[track_caller]
pub fn assert_fence_after(l: &Locker, before: FenceToken, after: FenceToken) {
    if issues_fences(l) {
        assert!(after > before, "fence {after} granted after {before}");
    } else {
        assert_eq!((before.get(), after.get()), (0, 0), "a store without fences issued one");
    }
}

/// `status` shows the holder's fence, where the store knows it.
#[track_caller]
pub(super) fn assert_holder_fence(h: &leasehold::Holder, fence: FenceToken) {
    if let Some(f) = h.fence {
        assert_eq!(f, fence, "status shows another fence than the grant's");
    }
}

/// Another process's locker on the same store: its own owner identity, queue and renewals
/// (it shares only the connection).
pub fn other(l: &Locker) -> Locker {
    Locker::from_arc(l.store().clone())
}

pub(super) fn is_lease(l: &Locker) -> bool {
    l.guarantees().kind == LockKind::Lease
}

pub(super) async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(BOUND, f)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {BOUND:?}"))
}
