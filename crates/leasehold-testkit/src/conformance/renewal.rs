//! Conformance: a lease's life: renewals that extend it or find it taken, auto-renew over
//! many TTLs, and `lost()` firing by the local deadline.

use std::time::{Duration, Instant};

use leasehold::{Error, Locker, LostReason, OwnerToken, Wait};

use super::support::{
    BOUND, LONG, assert_fence_after, assert_holder_fence, is_lease, other, unique_key, within,
};

/// A renewal answered not-owner marks the lease lost and fires `lost()`.
pub async fn renew_answered_not_owner_marks_lost(l: &Locker) {
    let key = unique_key("renew-not-owner");
    let a = l.acquire(&key, LONG).await.unwrap();
    if !is_lease(l) {
        // Session stores cannot be taken from a live holder; a foreign release must fail.
        assert!(!l.release_by_owner(&key, &OwnerToken::generate().unwrap()).await.unwrap());
        a.renew().await.expect("still held");
        assert!(a.release().await.unwrap().is_clean());
        return;
    }
    // Someone (an operator, a stale-token bug) deletes our grant out from under us.
    assert!(l.release_by_owner(&key, &a.owner()).await.unwrap());
    assert!(matches!(a.renew().await, Err(Error::NotOwner { .. })));
    assert!(a.is_lost() && !a.admit());
    assert_eq!(within("lost()", a.lost()).await, LostReason::NotOwner);
    assert!(!a.release().await.unwrap().is_clean());
}

/// A confirmed renewal moves the local deadline and keeps the store-side grant past the
/// original TTL.
pub async fn renew_extends(l: &Locker) {
    let key = unique_key("renew");
    let ttl = Duration::from_millis(800);
    let a = l.acquire(&key, ttl).margin(Duration::from_millis(100)).await.unwrap();
    if !is_lease(l) {
        a.renew().await.unwrap();
        assert!(a.deadline().is_none());
        assert!(a.release().await.unwrap().is_clean());
        return;
    }
    let granted = Instant::now();
    let d0 = a.deadline().unwrap();
    tokio::time::sleep(ttl / 4).await;
    a.renew().await.expect("renew while held");
    assert!(a.deadline().unwrap() > d0, "deadline moved");
    // Wait past the original expiry; the renewed grant must still be ours.
    tokio::time::sleep_until((granted + ttl + Duration::from_millis(50)).into()).await;
    if !a.is_lost() {
        let h = l.holders(Some(&key)).await.unwrap();
        assert_eq!(
            h.first().map(|h| h.owner),
            Some(a.owner()),
            "renewal did not extend the store's grant"
        );
    }
    let fence = a.fence();
    let _ = a.release().await.unwrap().is_clean();
    let b = l.acquire(&key, LONG).wait(Wait::For(BOUND)).await.unwrap();
    assert_fence_after(l, fence, b.fence());
    assert!(b.release().await.unwrap().is_clean());
}

/// With auto-renew, a lease outlives many TTLs and stays exclusive.
pub async fn auto_renew_keeps_lease(l: &Locker) {
    let key = unique_key("auto-renew");
    let ttl = Duration::from_millis(300);
    let a = l.acquire(&key, ttl).auto_renew(true).await.unwrap();
    tokio::time::sleep(ttl * 5).await;
    if a.is_lost() {
        panic!("auto-renewed lease lost: {}", a.lost().await);
    }
    assert!(matches!(other(l).acquire(&key, LONG).await, Err(Error::Busy { .. })));
    let h = l.holders(Some(&key)).await.unwrap();
    assert_eq!(h.first().map(|h| h.owner), Some(a.owner()));
    assert_holder_fence(&h[0], a.fence());
    assert!(a.release().await.unwrap().is_clean());
}

/// 300 auto-renewed leases on one locker all survive several TTLs.
pub async fn many_leases_auto_renew(l: &Locker) {
    let ttl = Duration::from_millis(600);
    let mut leases = Vec::new();
    for i in 0..300 {
        leases.push(
            l.acquire(&unique_key(&format!("many-{i}")), ttl).auto_renew(true).await.unwrap(),
        );
    }
    tokio::time::sleep(ttl * 3).await;
    let lost = leases.iter().filter(|l| l.is_lost()).count();
    assert_eq!(lost, 0, "{lost} of 300 auto-renewed leases were lost");
    for lease in leases {
        assert!(lease.release().await.unwrap().is_clean());
    }
}

/// Without renewals, `lost()` fires at the local deadline, while the store still holds the
/// grant (the holder stops before its authority ends); `admit()` turns false before that.
pub async fn lost_fires_by_local_deadline(l: &Locker) {
    let key = unique_key("deadline");
    let margin = Duration::from_millis(800);
    let a = l.acquire(&key, Duration::from_secs(3)).margin(margin).auto_renew(false).await.unwrap();
    let Some(deadline) = a.deadline() else {
        // Session lock: no deadline; it must not fire on its own.
        assert!(tokio::time::timeout(Duration::from_millis(500), a.lost()).await.is_err());
        assert!(a.admit());
        assert!(a.release().await.unwrap().is_clean());
        return;
    };
    assert!(a.admit());
    tokio::time::sleep_until((deadline - margin / 2).into()).await;
    assert!(!a.admit(), "admit() must turn false within the margin before the deadline");
    let reason = within("lost()", a.lost()).await;
    assert_eq!(reason, LostReason::DeadlinePassed);
    assert!(Instant::now() >= deadline);
    assert!(a.renew().await.is_err(), "lost is latched");
    let h = l.holders(Some(&key)).await.unwrap();
    assert_eq!(
        h.first().map(|h| h.owner),
        Some(a.owner()),
        "lost() fired after the store expired the lease"
    );
    let b =
        l.acquire(&key, LONG).wait(Wait::For(BOUND)).await.expect("free after the store's expiry");
    assert_fence_after(l, a.fence(), b.fence());
    assert!(b.release().await.unwrap().is_clean());
}

/// `guard` returns the work's output, and cancels the work when the lease is lost.
pub async fn guard_cancels_on_loss(l: &Locker) {
    let key = unique_key("guard");
    let a = l.acquire(&key, Duration::from_millis(500)).auto_renew(false).await.unwrap();
    assert_eq!(a.guard(async { 7 }).await.unwrap(), 7);
    if !is_lease(l) {
        assert!(a.release().await.unwrap().is_clean());
        return;
    }
    let r = within("guard", a.guard(tokio::time::sleep(Duration::from_secs(60)))).await;
    assert!(matches!(r, Err(Error::Lost { reason: LostReason::DeadlinePassed, .. })), "{r:?}");
    let _ = a.release().await;
}
