//! Scenarios every store must pass. Each takes a [`Locker`] and panics on a violation.
//!
//! Keys are made unique per call, so the scenarios can share a long-lived store. Scenarios
//! about expiry only apply to stores whose grants are leases ([`LockKind::Lease`]); on
//! session stores they check the session counterpart (nothing expires while the holder
//! lives) instead of silently passing.

use std::future::IntoFuture;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use leasehold::HolderInfo;
use leasehold::{Error, FenceRepeat, FenceToken, LockKind, Locker, LostReason, OwnerToken, Wait};

/// A key no other scenario run uses.
pub fn unique_key(name: &str) -> String {
    format!("conformance:{name}:{}", OwnerToken::generate().expect("random"))
}

const LONG: Duration = Duration::from_secs(30);
const BOUND: Duration = Duration::from_secs(20);

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
fn assert_holder_fence(h: &leasehold::Holder, fence: FenceToken) {
    if let Some(f) = h.fence {
        assert_eq!(f, fence, "status shows another fence than the grant's");
    }
}

/// Another process's locker on the same store: its own owner identity, queue and renewals
/// (it shares only the connection).
pub fn other(l: &Locker) -> Locker {
    Locker::from_arc(l.store().clone())
}

fn is_lease(l: &Locker) -> bool {
    l.guarantees().kind == LockKind::Lease
}

async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(BOUND, f)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {BOUND:?}"))
}

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

/// `holders` shows the current grant with its owner and fence, and forgets it on release.
pub async fn holders_lists_grant(l: &Locker) {
    let key = unique_key("holders");
    let a = l.acquire(&key, LONG).await.unwrap();
    let h = l.holders(Some(&key)).await.unwrap();
    assert_eq!(h.len(), 1);
    assert_eq!((&h[0].key.to_string(), h[0].owner), (&key, a.owner()));
    assert_holder_fence(&h[0], a.fence());
    match h[0].expires_in {
        Some(left) => assert!(is_lease(l) && left <= LONG),
        None => assert!(!is_lease(l)),
    }
    let all = l.holders(None).await.unwrap();
    assert!(all.iter().any(|x| x.owner == a.owner()));
    assert!(a.release().await.unwrap().is_clean());
    assert!(l.holders(Some(&key)).await.unwrap().is_empty());
}

/// Who holds a key: the [`HolderInfo`] a locker writes at acquire comes back from `holders`
/// (asked through another locker on the store), unchanged after renewals, on every store
/// whose guarantees say it keeps it; a locker that records none shows none (no earlier
/// holder's info lingers). A store that cannot keep it must say so and show none.
pub async fn holders_show_who_holds(l: &Locker) {
    let keeps = l.guarantees().holders_know_info;
    let me = HolderInfo::this_process().with_command("conformance: holders_show_who_holds");
    let writer = l.clone().with_holder_info(Some(me.clone()));
    let reader = other(l);
    let key = unique_key("holder-info");
    let ttl = Duration::from_millis(1500);
    let info_of = async |owner: OwnerToken| {
        let found = reader.holders(Some(&key)).await.expect("holders");
        let h = found.into_iter().find(|h| h.owner == owner).expect("the grant is listed");
        h.info
    };
    let want = keeps.then(|| me.clone());
    let a = writer.acquire(&key, ttl).await.unwrap();
    assert_eq!(info_of(a.owner()).await, want, "holder info after the grant (keeps: {keeps})");
    // Several renewals (every ttl/3): the info lives as long as the grant.
    tokio::time::sleep(ttl * 2).await;
    assert!(!a.is_lost(), "the lease must survive its renewals");
    assert_eq!(info_of(a.owner()).await, want, "holder info after renewals (keeps: {keeps})");
    assert!(a.release().await.unwrap().is_clean());
    let anonymous = l.clone().with_holder_info(None);
    let b = anonymous.acquire(&key, ttl).await.unwrap();
    assert_eq!(info_of(b.owner()).await, None, "a grant without holder info shows none");
    assert!(b.release().await.unwrap().is_clean());
}

/// A locker never waits on itself: the task holding a key that asks for it again, even
/// willing to wait, is answered at once with the grant's fence; another task of the same
/// locker waits its turn and gets the key when the holder releases it.
pub async fn no_self_wait(l: &Locker) {
    let key = unique_key("self-wait");
    let a = l.acquire(&key, LONG).await.unwrap();
    let again =
        within("self-wait", l.acquire(&key, LONG).wait(Wait::For(LONG)).into_future()).await;
    assert!(
        matches!(&again, Err(Error::HeldByThisLocker { fence, .. }) if *fence == a.fence()),
        "{again:?}"
    );
    // Waiting on itself is not "another owner holds it".
    assert!(!again.as_ref().unwrap_err().is_busy() && !again.as_ref().unwrap_err().is_retryable());
    let waiter = tokio::spawn(l.acquire(&key, LONG).wait(Wait::For(BOUND)).into_future());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiter.is_finished(), "another task of the locker got a held key");
    let fence = a.fence();
    assert!(a.release().await.unwrap().is_clean());
    let b = within("waiter", waiter).await.unwrap().expect("the waiting task gets it");
    assert_fence_after(l, fence, b.fence());
    assert!(b.release().await.unwrap().is_clean());
}

/// Two acquires of one key joined in one task (`join!`) never wait on each other: one gets
/// the key, the other is answered `HeldByThisLocker` at once with that grant's fence, even
/// when both are willing to wait longer than the test allows.
pub async fn no_self_wait_in_join(l: &Locker) {
    let key = unique_key("self-wait-join");
    let both = async {
        tokio::join!(
            l.acquire(&key, LONG).wait(Wait::For(LONG)).into_future(),
            l.acquire(&key, LONG).wait(Wait::For(LONG)).into_future()
        )
    };
    let (held, refused) = match within("join! of two acquires", both).await {
        (Ok(held), Err(e)) | (Err(e), Ok(held)) => (held, e),
        other => panic!("expected one grant and one refusal: {other:?}"),
    };
    assert!(
        matches!(&refused, Error::HeldByThisLocker { fence, .. } if *fence == held.fence()),
        "{refused:?}"
    );
    // Queued behind a grant of another task, the same holds once this task's own grant lands.
    let other_task = tokio::spawn(l.acquire(&key, LONG).wait(Wait::For(BOUND)).into_future());
    assert!(held.release().await.unwrap().is_clean());
    let b = within("the other task", other_task).await.unwrap().expect("the other task gets it");
    let (c, d, ()) = within("join! queued behind another task", async {
        tokio::join!(
            l.acquire(&key, LONG).wait(Wait::For(LONG)).into_future(),
            l.acquire(&key, LONG).wait(Wait::For(LONG)).into_future(),
            async {
                tokio::time::sleep(Duration::from_millis(100)).await;
                assert!(b.release().await.unwrap().is_clean());
            }
        )
    })
    .await;
    let (held, refused) = match (c, d) {
        (Ok(held), Err(e)) | (Err(e), Ok(held)) => (held, e),
        other => panic!("expected one grant and one refusal: {other:?}"),
    };
    assert!(matches!(&refused, Error::HeldByThisLocker { .. }), "{refused:?}");
    assert!(held.release().await.unwrap().is_clean());
}

/// Two one-shot acquires of one key joined in one task: one gets the key, the other is
/// answered `HeldByThisLocker` with that grant's fence, as the waiting form is (issue 35:
/// it was `Busy`, "another owner", when the other owner was itself).
pub async fn no_self_wait_in_join_one_shot(l: &Locker) {
    let key = unique_key("self-wait-join-once");
    for round in 0..5 {
        let (a, b) = within("join! of two one-shot acquires", async {
            tokio::join!(l.acquire(&key, LONG).into_future(), l.acquire(&key, LONG).into_future())
        })
        .await;
        let (held, refused) = match (a, b) {
            (Ok(held), Err(e)) | (Err(e), Ok(held)) => (held, e),
            other => panic!("round {round}: expected one grant and one refusal: {other:?}"),
        };
        assert!(
            matches!(&refused, Error::HeldByThisLocker { fence, .. } if *fence == held.fence()),
            "round {round}: {refused:?}"
        );
        assert!(held.release().await.unwrap().is_clean());
    }
    // Another owner's grant is still busy, at once.
    let theirs = other(l).acquire(&key, LONG).await.unwrap();
    let busy = within("one-shot against another owner", l.acquire(&key, LONG).into_future()).await;
    assert!(matches!(&busy, Err(e) if e.is_busy()), "{busy:?}");
    assert!(theirs.release().await.unwrap().is_clean());
}

/// A normal release is not a loss: `lost()` stays pending after `release()` and after a drop,
/// while `ended()` resolves with `Released` (issue 35: a watcher alerting on `lost()` fired
/// at every normal end).
pub async fn release_is_not_a_loss(l: &Locker) {
    let key = unique_key("release-not-lost");
    for drop_it in [false, true] {
        let a = l.acquire(&key, LONG).await.unwrap();
        let lost = tokio::spawn(a.lost());
        let ended = a.ended();
        if drop_it {
            drop(a);
        } else {
            assert!(a.release().await.unwrap().is_clean());
        }
        assert_eq!(within("ended()", ended).await, LostReason::Released);
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!lost.is_finished(), "lost() fired on a normal end (dropped: {drop_it})");
        lost.abort();
        l.close().await.expect("nothing left in flight");
    }
}

/// A lease dropped without release is released in the background, and the same locker's
/// next one-shot acquire waits for that release instead of meeting its own grant.
pub async fn acquire_right_after_drop(l: &Locker) {
    let key = unique_key("drop-again");
    for round in 0..5 {
        let a = l.acquire(&key, LONG).await.unwrap();
        drop(a);
        let b = l.acquire(&key, LONG).await;
        let b = b.unwrap_or_else(|e| panic!("round {round}: right after a drop: {e}"));
        assert!(b.release().await.unwrap().is_clean());
    }
    l.close().await.expect("nothing left in flight");
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
