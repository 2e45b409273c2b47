//! Conformance: handing the key to the next holder: after a release, an expiry, a drop, a
//! cancelled acquire or a cancelled release, promptly and never early.

use std::time::{Duration, Instant};

use leasehold::{Locker, Wait};

use super::support::{BOUND, LONG, assert_fence_after, is_lease, other, unique_key, within};

/// A waiter gets the key promptly after a release, long before the holder's TTL.
pub async fn waiter_gets_lease_after_release(l: &Locker) {
    let key = unique_key("handoff");
    let a = l.acquire(&key, Duration::from_secs(60)).await.unwrap();
    let waiter = {
        let (l, key) = (l.clone(), key.clone());
        tokio::spawn(async move {
            let b = l.acquire(&key, LONG).wait(Wait::For(Duration::from_secs(50))).await;
            (b, Instant::now())
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiter.is_finished(), "waiter got a held key");
    let fence = a.fence();
    let released = Instant::now();
    assert!(a.release().await.unwrap().is_clean());
    let (b, got) = within("waiter", waiter).await.unwrap();
    let b = b.expect("waiter acquires after release");
    assert_fence_after(l, fence, b.fence());
    // Woken by the release, not by the holder's 60 s expiry.
    assert!(got - released < Duration::from_secs(10), "handoff took {:?}", got - released);
    assert!(b.release().await.unwrap().is_clean());
}

/// A crashed holder's lease is handed to a waiter when the store expires it, never before.
pub async fn waiter_gets_lease_after_expiry(l: &Locker) {
    if !is_lease(l) {
        return waiter_gets_lease_after_release(l).await;
    }
    let key = unique_key("expiry-handoff");
    let ttl = Duration::from_millis(700);
    let sent = Instant::now();
    let a = l.acquire(&key, ttl).await.unwrap();
    let fence = a.fence();
    drop(a.detach()); // the holder "crashed": nobody releases
    let b = l.acquire(&key, LONG).wait(Wait::For(BOUND)).await.expect("waiter after expiry");
    let got = Instant::now();
    assert!(got - sent >= ttl, "granted {:?} after a {ttl:?} lease was taken", got - sent);
    assert_fence_after(l, fence, b.fence());
    assert!(b.release().await.unwrap().is_clean());
}

/// Dropping a lease without release frees the key in the background, long before its TTL.
pub async fn dropped_lease_is_released(l: &Locker) {
    let key = unique_key("drop");
    let a = l.acquire(&key, Duration::from_secs(60)).await.unwrap();
    drop(a);
    let start = Instant::now();
    let b = l
        .acquire(&key, LONG)
        .wait(Wait::For(Duration::from_secs(30)))
        .await
        .expect("free after drop");
    assert!(start.elapsed() < Duration::from_secs(20));
    assert!(b.release().await.unwrap().is_clean());
}

/// Acquires cancelled at arbitrary points leave no orphan grant behind: the key is free again
/// long before the orphan's TTL would have ended.
pub async fn cancelled_acquire_leaves_no_orphan(l: &Locker) {
    let key = unique_key("cancel");
    for i in 0..20u64 {
        let task = {
            let (l, key) = (l.clone(), key.clone());
            tokio::spawn(async move { l.acquire(&key, Duration::from_secs(120)).await })
        };
        tokio::time::sleep(Duration::from_micros(150 * i)).await;
        task.abort();
        if let Ok(Ok(lease)) = task.await {
            assert!(lease.release().await.unwrap().is_clean());
        }
        let b = l
            .acquire(&key, LONG)
            .wait(Wait::For(Duration::from_secs(15)))
            .await
            .unwrap_or_else(|e| panic!("round {i}: an orphan kept the key: {e}"));
        assert!(b.release().await.unwrap().is_clean());
    }
}

/// A release whose future is dropped mid-request (a timeout around it, a `select!` at
/// shutdown) still frees the key: the lease falls back to its owner-checked background
/// release, so another owner gets the key long before the TTL.
pub async fn cancelled_release_still_frees(l: &Locker) {
    let key = unique_key("cancelled-release");
    for round in 0..5 {
        let a = l.acquire(&key, LONG).await.unwrap();
        // Polled once (the request goes out), then dropped.
        let _ = tokio::time::timeout(Duration::ZERO, a.release()).await;
        let b = other(l).acquire(&key, LONG).wait(Wait::For(BOUND)).await;
        let b =
            b.unwrap_or_else(|e| panic!("round {round}: a cancelled release kept the key: {e}"));
        assert!(b.release().await.unwrap().is_clean());
    }
}
