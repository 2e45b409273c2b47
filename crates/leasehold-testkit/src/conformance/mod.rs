//! Scenarios every store must pass. Each takes a [`Locker`] and panics on a violation.
//!
//! Keys are made unique per call, so the scenarios can share a long-lived store. Scenarios
//! about expiry only apply to stores whose grants are leases ([`leasehold::LockKind::Lease`]); on
//! session stores they check the session counterpart (nothing expires while the holder
//! lives) instead of silently passing.

mod handoff;
mod holders;
mod renewal;
mod same_locker;
mod support;

pub use handoff::{
    cancelled_acquire_leaves_no_orphan, cancelled_release_still_frees, dropped_lease_is_released,
    waiter_gets_lease_after_expiry, waiter_gets_lease_after_release,
};
pub use holders::{holders_lists_grant, holders_show_who_holds};
pub use renewal::{
    auto_renew_keeps_lease, guard_cancels_on_loss, lost_fires_by_local_deadline,
    many_leases_auto_renew, renew_answered_not_owner_marks_lost, renew_extends,
};
pub use same_locker::{
    acquire_right_after_drop, no_self_wait, no_self_wait_in_join, no_self_wait_in_join_one_shot,
    release_is_not_a_loss,
};
pub use support::{assert_fence_after, issues_fences, other, unique_key};

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use leasehold::{Error, Locker, OwnerToken, Wait};

use support::{BOUND, LONG, assert_holder_fence, is_lease};

/// Invalid keys and TTLs are typed errors, never panics; the longest valid key works.
pub async fn rejects_bad_input(l: &Locker) {
    let long = "k".repeat(513);
    for key in ["", "nul\0inside", long.as_str()] {
        let r = l.acquire(key, LONG).await;
        assert!(matches!(r, Err(Error::InvalidInput(_))), "key {key:?}: {r:?}");
        let r = l.release_by_owner(key, &OwnerToken::generate().unwrap()).await;
        assert!(matches!(r, Err(Error::InvalidInput(_))), "release {key:?}: {r:?}");
    }
    let key = unique_key("bad-input");
    for ttl in
        [Duration::ZERO, Duration::from_micros(999), leasehold::MAX_TTL + Duration::from_secs(1)]
    {
        let r = l.acquire(&key, ttl).await;
        assert!(matches!(r, Err(Error::InvalidInput(_))), "ttl {ttl:?}: {r:?}");
    }
    let r = l.acquire(&key, LONG).margin(LONG).await;
    assert!(matches!(r, Err(Error::InvalidInput(_))), "margin as long as the ttl: {r:?}");
    let max = format!("{}{}", key, "é".repeat((512 - key.len()) / 2));
    assert!(max.len() <= 512);
    let lease = l.acquire(&max, LONG).await.expect("a 512-byte key is valid");
    assert!(lease.release().await.unwrap().is_clean());
}

/// A held key is busy for everyone else, with or without a (short) wait.
pub async fn busy_when_held(l: &Locker) {
    let key = unique_key("busy");
    let a = l.acquire(&key, LONG).await.unwrap();
    let b = other(l);
    assert!(matches!(b.acquire(&key, LONG).await, Err(Error::Busy { .. })));
    let r = b.acquire(&key, LONG).wait(Wait::For(Duration::from_millis(200))).await;
    assert!(matches!(r, Err(Error::Busy { .. })), "{r:?}");
    // Asked by its holder, the answer says so (and does not wait on itself).
    let r = l.acquire(&key, LONG).await;
    assert!(
        matches!(&r, Err(Error::HeldByThisLocker { fence, .. }) if *fence == a.fence()),
        "{r:?}"
    );
    let fence = a.fence();
    assert!(a.release().await.unwrap().is_clean());
    let b = l.acquire(&key, LONG).await.expect("free after release");
    assert_fence_after(l, fence, b.fence());
    assert!(b.release().await.unwrap().is_clean());
}

/// A waiter that gives up must leave nothing behind that could block the next acquirer,
/// even for a moment (an abandoned blocking wait that grabs the lock on release would).
pub async fn abandoned_wait_does_not_block_others(l: &Locker) {
    let key = unique_key("abandoned-wait");
    let others = other(l);
    for round in 0..10 {
        let a = l.acquire(&key, LONG).await.unwrap();
        let r = others.acquire(&key, LONG).wait(Wait::For(Duration::from_millis(20))).await;
        assert!(matches!(r, Err(Error::Busy { .. })), "{r:?}");
        // And one cancelled mid-wait.
        let waiter = {
            let (l, key) = (others.clone(), key.clone());
            tokio::spawn(async move { l.acquire(&key, LONG).wait(Wait::For(LONG)).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        waiter.abort();
        let _ = waiter.await;
        assert!(a.release().await.unwrap().is_clean());
        // Right after the release, one attempt must get the key.
        let c = l.acquire(&key, LONG).await;
        let c = c.unwrap_or_else(|e| panic!("round {round}: a free key answered {e}"));
        assert!(c.release().await.unwrap().is_clean());
    }
}

/// 8 tasks × 25 iterations on one key: never two inside, fences increase in entry order.
pub async fn mutual_exclusion_tasks(l: &Locker) {
    let key = Arc::new(unique_key("mutex"));
    let inside = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let fences = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (l, key, inside, overlaps, fences) =
            (l.clone(), key.clone(), inside.clone(), overlaps.clone(), fences.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..25 {
                let lease =
                    l.acquire(&key, LONG).wait(Wait::For(Duration::from_secs(60))).await.unwrap();
                if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                fences.lock().unwrap().push(lease.fence());
                tokio::task::yield_now().await;
                tokio::time::sleep(Duration::from_micros(200)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                assert!(
                    lease.release().await.unwrap().is_clean(),
                    "release must find the lease ours"
                );
            }
        }));
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(120), t)
            .await
            .expect("mutex scenario timed out")
            .unwrap();
    }
    assert_eq!(overlaps.load(Ordering::SeqCst), 0, "critical sections overlapped");
    let f = fences.lock().unwrap();
    assert_eq!(f.len(), 200);
    for w in f.windows(2) {
        assert_fence_after(l, w[0], w[1]);
    }
}

/// Fences grow across release, drop, expiry (leases) and takeover.
pub async fn fences_increase(l: &Locker) {
    let key = unique_key("fences");
    let mut last = l.acquire(&key, LONG).await.unwrap();
    let mut seen = vec![last.fence()];
    for round in 0..3 {
        let prev = last.fence();
        match round {
            0 => assert!(last.release().await.unwrap().is_clean()),
            1 => drop(last),
            _ => {
                assert!(last.release().await.unwrap().is_clean());
                if is_lease(l) {
                    // A holder that "crashed": nobody releases, the store expires it.
                    let gone = l.acquire(&key, Duration::from_millis(100)).await.unwrap();
                    seen.push(gone.fence());
                    drop(gone.detach());
                }
            }
        }
        last = l.acquire(&key, LONG).wait(Wait::For(BOUND)).await.unwrap();
        assert_fence_after(l, prev, last.fence());
        seen.push(last.fence());
    }
    assert!(last.release().await.unwrap().is_clean());
    for w in seen.windows(2) {
        assert_fence_after(l, w[0], w[1]);
    }
}

/// Renew and release by a stale or foreign owner answer "not ours" and leave the holder in
/// place; on leases, the expired holder's release and renew answer not-owner once a successor
/// holds the key.
pub async fn owner_checked_renew_and_release(l: &Locker) {
    let key = unique_key("owner");
    let a = l.acquire(&key, LONG).await.unwrap();
    let stranger = OwnerToken::generate().unwrap();
    assert!(!l.release_by_owner(&key, &stranger).await.unwrap());
    assert!(!l.renew_by_owner(&key, &stranger, LONG).await.unwrap());
    let h = l.holders(Some(&key)).await.unwrap();
    assert_eq!(h.len(), 1, "{h:?}");
    assert_eq!(h[0].owner, a.owner());
    assert_holder_fence(&h[0], a.fence());
    assert!(a.release().await.unwrap().is_clean());

    if !is_lease(l) {
        return;
    }
    let key = unique_key("owner-expiry");
    let a = l.acquire(&key, Duration::from_millis(200)).auto_renew(false).await.unwrap();
    let b =
        other(l).acquire(&key, LONG).wait(Wait::For(BOUND)).await.expect("successor after expiry");
    assert_fence_after(l, a.fence(), b.fence());
    assert!(!l.renew_by_owner(&key, &a.owner(), LONG).await.unwrap(), "stale renew must fail");
    assert!(!l.release_by_owner(&key, &a.owner()).await.unwrap(), "stale release must fail");
    assert!(a.renew().await.is_err(), "the expired lease cannot be renewed");
    assert!(!a.release().await.unwrap().is_clean(), "release reports that it was no longer ours");
    let h = l.holders(Some(&key)).await.unwrap();
    assert_eq!(
        h.iter().map(|h| h.owner).collect::<Vec<_>>(),
        vec![b.owner()],
        "successor untouched"
    );
    assert!(b.release().await.unwrap().is_clean());
}
