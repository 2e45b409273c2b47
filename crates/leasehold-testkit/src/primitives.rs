//! Scenarios for the primitives beyond the mutex (`docs/design.md` §9): semaphores, readers
//! and writers, several keys at once. Each takes a [`Locker`] and panics on a violation; on a
//! store whose [`leasehold::Primitives`] says it cannot hold a primitive, the scenario checks
//! the refusal ([`Error::Unsupported`], nothing asked of the store) instead of passing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leasehold::{Error, Locker, LostReason, OwnerToken, Wait};

use crate::conformance::{assert_fence_after, issues_fences, other, unique_key};

const LONG: Duration = Duration::from_secs(30);
const BOUND: Duration = Duration::from_secs(20);

async fn within<T>(what: &str, limit: Duration, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(limit, f)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {limit:?}"))
}

fn permits(l: &Locker) -> bool {
    l.guarantees().primitives.permits
}

fn shared(l: &Locker) -> bool {
    l.guarantees().primitives.shared
}

/// Where the store cannot hold semaphores, asking is refused at once, typed.
async fn assert_permits_refused(l: &Locker) {
    let r = l.acquire_permit(&unique_key("no-permits"), 3, LONG).await;
    assert!(matches!(r, Err(Error::Unsupported { .. })), "{r:?}");
}

/// Where the store cannot hold readers, asking is refused at once, typed.
async fn assert_shared_refused(l: &Locker) {
    let r = l.acquire_shared(&unique_key("no-readers"), LONG).await;
    assert!(matches!(r, Err(Error::Unsupported { .. })), "{r:?}");
}

/// Eight lockers (own owners, queues and renewals) take 3 permits over and over: never more
/// than three hold at once, never two the same slot.
pub async fn permits_never_exceed_n(l: &Locker) {
    if !permits(l) {
        return assert_permits_refused(l).await;
    }
    let key = unique_key("permits");
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let slots = Arc::new(Mutex::new(std::collections::HashSet::new()));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (l, key, inside, most, slots) =
            (other(l), key.clone(), inside.clone(), most.clone(), slots.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..6 {
                let p = l.acquire_permit(&key, 3, LONG).wait(Wait::For(BOUND)).await.unwrap();
                assert!(p.slot() < 3 && p.permits() == 3);
                assert!(slots.lock().unwrap().insert(p.slot()), "slot {} held twice", p.slot());
                let n = inside.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(n, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                slots.lock().unwrap().remove(&p.slot());
                assert!(p.release().await.unwrap().is_clean());
            }
        }));
    }
    for t in tasks {
        within("permit holders", BOUND * 3, t).await.unwrap();
    }
    let most = most.load(Ordering::SeqCst);
    assert!((1..=3).contains(&most), "{most} permit holders at once");
}

/// Each slot's fence grows across grants, releases and expiries, and is the slot's own.
pub async fn permit_fences_increase_per_slot(l: &Locker) {
    if !permits(l) {
        return assert_permits_refused(l).await;
    }
    let key = unique_key("permit-fences");
    let mut last: HashMap<u32, leasehold::FenceToken> = HashMap::new();
    for _ in 0..6 {
        let a = l.acquire_permit(&key, 2, LONG).await.unwrap();
        let b = other(l).acquire_permit(&key, 2, LONG).await.unwrap();
        assert_ne!(a.slot(), b.slot());
        for p in [&a, &b] {
            if let Some(prev) = last.insert(p.slot(), p.fence()) {
                assert_fence_after(l, prev, p.fence());
            }
            assert_eq!(p.key().as_str(), format!("{key}#{}", p.slot()), "the slot's own key");
        }
        let c = other(l).acquire_permit(&key, 2, LONG).await;
        assert!(matches!(c, Err(Error::Busy { .. })), "a third permit of two: {c:?}");
        assert!(a.release().await.unwrap().is_clean());
        assert!(b.release().await.unwrap().is_clean());
    }
    if l.guarantees().kind == leasehold::LockKind::Lease {
        // Expiry: a slot that lapsed is granted again with a larger fence.
        let one = unique_key("permit-expiry");
        let a = l
            .acquire_permit(&one, 1, Duration::from_millis(300))
            .auto_renew(false)
            .margin(Duration::from_millis(50))
            .await
            .unwrap();
        let b = other(l).acquire_permit(&one, 1, LONG).wait(Wait::For(BOUND)).await.unwrap();
        assert_eq!(b.slot(), 0);
        assert_fence_after(l, a.fence(), b.fence());
        assert!(a.release().await.unwrap().may_have_overlapped());
        assert!(b.release().await.unwrap().is_clean());
    }
}

/// Two callers naming different N for one semaphore: the second is refused with a clear
/// error while the first holds, and the semaphore takes the new N once nobody holds it.
pub async fn different_permits_refused(l: &Locker) {
    if !permits(l) {
        return assert_permits_refused(l).await;
    }
    let key = unique_key("permit-count");
    let a = l.acquire_permit(&key, 3, LONG).await.unwrap();
    for n in [2, 4] {
        let r =
            other(l).acquire_permit(&key, n, LONG).wait(Wait::For(Duration::from_secs(1))).await;
        match r {
            Err(Error::InvalidInput(m)) => assert!(m.contains('3'), "names the count held: {m}"),
            other => panic!("{n} permits while 3 are held: {other:?}"),
        }
    }
    for n in [0, leasehold::MAX_PERMITS + 1] {
        let r = l.acquire_permit(&unique_key("permit-n"), n, LONG).await;
        assert!(matches!(r, Err(Error::InvalidInput(_))), "{n} permits: {r:?}");
    }
    assert!(a.release().await.unwrap().is_clean());
    let b = other(l).acquire_permit(&key, 2, LONG).await.unwrap();
    assert!(b.release().await.unwrap().is_clean());
}

/// A permit's renew and release are owner-checked, as a mutex grant's; its local deadline
/// fires `lost()`.
pub async fn permit_owner_safe_and_lost(l: &Locker) {
    if !permits(l) {
        return assert_permits_refused(l).await;
    }
    let key = unique_key("permit-owner");
    let p = l.acquire_permit(&key, 2, LONG).await.unwrap();
    let slot = p.key().as_str().to_owned();
    let stranger = OwnerToken::generate().unwrap();
    assert!(!l.release_by_owner(&slot, &stranger).await.unwrap());
    assert!(!l.renew_by_owner(&slot, &stranger, LONG).await.unwrap());
    assert!(l.renew_by_owner(&slot, &p.owner(), LONG).await.unwrap());
    assert!(p.release().await.unwrap().is_clean());
    if l.guarantees().kind != leasehold::LockKind::Lease {
        return;
    }
    let margin = Duration::from_millis(200);
    let p =
        l.acquire_permit(&key, 2, Duration::from_secs(1)).auto_renew(false).margin(margin).await;
    let p = p.unwrap();
    let deadline = p.deadline().expect("a lease");
    assert_eq!(within("lost()", BOUND, p.lost()).await, LostReason::DeadlinePassed);
    assert!(Instant::now() >= deadline && !p.admit());
    let _ = p.release().await.unwrap();
}

/// Readers overlap; a writer (the plain grant) excludes readers and writers, and a reader
/// excludes writers; each grant's fence follows every earlier grant's of the key.
pub async fn readers_overlap_writers_exclude(l: &Locker) {
    if !shared(l) {
        return assert_shared_refused(l).await;
    }
    let key = unique_key("rw");
    let w0 = l.acquire(&key, LONG).await.unwrap();
    let r = other(l).acquire_shared(&key, LONG).await;
    assert!(matches!(r, Err(Error::Busy { .. })), "a reader while a writer holds: {r:?}");
    let w0_fence = w0.fence();
    assert!(w0.release().await.unwrap().is_clean());
    let r1 = l.acquire_shared(&key, LONG).await.unwrap();
    let r2 = other(l).acquire_shared(&key, LONG).await.expect("readers overlap");
    let r3 = l.acquire_shared(&key, LONG).await.expect("readers of one locker overlap too");
    assert_fence_after(l, w0_fence, r1.fence());
    if l.guarantees().primitives.shared_fence {
        assert_fence_after(l, r1.fence(), r2.fence());
    }
    for w in [l.acquire(&key, LONG).await, other(l).acquire_exclusive(&key, LONG).await] {
        assert!(matches!(w, Err(Error::Busy { .. })), "a writer while readers hold: {w:?}");
    }
    let h = l.holders(Some(&key)).await.unwrap();
    let readers = h.iter().filter(|h| h.mode == leasehold::Mode::Shared).count();
    assert_eq!(readers, 3, "status lists the readers: {h:?}");
    let stranger = OwnerToken::generate().unwrap();
    assert!(!l.release_by_owner(&key, &stranger).await.unwrap(), "owner-checked");
    assert!(!l.renew_by_owner(&key, &stranger, LONG).await.unwrap(), "owner-checked");
    assert!(r1.renew().await.is_ok(), "a reader renews");
    for r in [r1, r2] {
        assert!(r.release().await.unwrap().is_clean());
    }
    let w = other(l).acquire(&key, LONG).await;
    assert!(matches!(w, Err(Error::Busy { .. })), "one reader left: {w:?}");
    let last = r3.fence();
    assert!(r3.release().await.unwrap().is_clean());
    let w = other(l).acquire(&key, LONG).await.expect("free once the readers left");
    if l.guarantees().primitives.shared_fence {
        assert_fence_after(l, last, w.fence());
    }
    assert!(w.release().await.unwrap().is_clean());
}

/// A waiting writer is granted within the bound while readers keep coming (each new reader
/// overlaps the last), on a store with writer preference; then the readers resume. Without
/// writer preference (`flock`), the writer waiting behind the stream is granted as soon as
/// the stream stops. With it, first the direct check: a reader asking after a writer began
/// to wait is not granted before that writer (`late_reader_waits_for_the_writer`).
pub async fn writer_not_starved(l: &Locker) {
    if !shared(l) {
        return assert_shared_refused(l).await;
    }
    let preference = l.guarantees().primitives.writer_preference;
    if preference {
        late_reader_waits_for_the_writer(l).await;
    }
    let key = unique_key("starve");
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reads = Arc::new(AtomicUsize::new(0));
    // Readers inside now: counted up after their grant, down before their release.
    let reading = Arc::new(AtomicUsize::new(0));
    let mut readers = Vec::new();
    for i in 0..4u64 {
        let (l, key, stop) = (other(l), key.clone(), stop.clone());
        let (reads, reading) = (reads.clone(), reading.clone());
        readers.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(15 * i)).await;
            for n in 0u64.. {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let r = l.acquire_shared(&key, LONG).wait(Wait::For(BOUND)).await.unwrap();
                reading.fetch_add(1, Ordering::SeqCst);
                reads.fetch_add(1, Ordering::SeqCst);
                // 45 to 75 ms, varying, so readers granted together drift apart again.
                let hold = 45 + (17 * n + 11 * i) % 31;
                tokio::time::sleep(Duration::from_millis(hold)).await;
                reading.fetch_sub(1, Ordering::SeqCst);
                let _ = r.release().await.unwrap();
            }
        }));
    }
    while reads.load(Ordering::SeqCst) < 4 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Four readers of about 60 ms each, 15 ms apart: three hold at any time, so without the
    // writer's intent there is no gap to take for seconds on end.
    if !preference {
        let stopper = (stop.clone(), tokio::time::sleep(Duration::from_millis(500)));
        tokio::spawn(async move {
            stopper.1.await;
            stopper.0.store(true, Ordering::SeqCst);
        });
    }
    // Three writers in turn, so a pass-through of readers cannot hide behind a lucky moment.
    for _ in 0..3 {
        let w = l.acquire(&key, LONG).wait(Wait::For(Duration::from_secs(3))).await;
        let w = w.expect("a writer behind a stream of readers is granted within 3 s");
        let h = l.holders(Some(&key)).await.unwrap();
        assert!(h.iter().all(|h| h.mode == leasehold::Mode::Exclusive), "writer alone: {h:?}");
        // No reader inside while the writer holds: checked at once, and after the readers
        // that queued during its wait would have been granted (a store that lets later
        // readers pass a waiting writer in a queue that does not wait for them fails here).
        for _ in 0..2 {
            assert_eq!(reading.load(Ordering::SeqCst), 0, "readers inside beside the writer");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let before = reads.load(Ordering::SeqCst);
        assert!(w.release().await.unwrap().is_clean());
        if preference {
            // The readers resume once the writer is gone.
            within("a reader after the writer", BOUND, async {
                while reads.load(Ordering::SeqCst) == before {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
            .await;
        }
    }
    stop.store(true, Ordering::SeqCst);
    for r in readers {
        within("readers", BOUND, r).await.unwrap();
    }
}

/// Writer preference, directly, independent of how fast the store grants: a reader holds, a
/// writer waits; once the writer's wait is known to the store, a reader's one-shot attempt is
/// refused, and a reader that then waits is granted only after the writer's grant (and
/// release), with a larger fence. A store that lets a reader in beside the holding readers
/// while a writer waits fails at the one-shot attempt, however its timing goes.
async fn late_reader_waits_for_the_writer(l: &Locker) {
    let key = unique_key("late-reader");
    let first = other(l).acquire_shared(&key, LONG).await.unwrap();
    let w = other(l);
    let (wk, wait) = (key.clone(), Wait::For(BOUND));
    let writer = tokio::spawn(async move {
        let g = w.acquire(&wk, LONG).wait(wait).await;
        (g, w)
    });
    // The writer's first refused attempt tells the store it waits; until then a reader may
    // still get in (and is let go at once). Polled, so a slow store is not a failure, and a
    // store that never holds readers back is.
    let late = other(l);
    within("a reader refused while a writer waits", Duration::from_secs(10), async {
        loop {
            match late.acquire_shared(&key, LONG).await {
                Err(Error::Busy { .. }) => break,
                Ok(r) => {
                    assert!(r.release().await.unwrap().is_clean());
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => panic!("a reader's attempt while a writer waits: {e:?}"),
            }
        }
    })
    .await;
    assert!(!writer.is_finished(), "the writer was granted beside a reader");
    let (lk, wait) = (key.clone(), Wait::For(BOUND));
    let reader = tokio::spawn(async move {
        let r = late.acquire_shared(&lk, LONG).wait(wait).await;
        (r.map(|r| (r, Instant::now())), late)
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!reader.is_finished(), "a reader asking after a waiting writer got in first");
    assert!(first.release().await.unwrap().is_clean());
    let (g, _w) = within("the waiting writer", BOUND, writer).await.unwrap();
    let g = g.expect("the writer, once the first reader left");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!reader.is_finished(), "a reader beside the writer");
    let (fence, released) = (g.fence(), Instant::now());
    assert!(g.release().await.unwrap().is_clean());
    let (r, _late) = within("the late reader", BOUND, reader).await.unwrap();
    let (r, got) = r.expect("the late reader, once the writer left");
    assert!(got >= released, "the late reader was granted before the writer left");
    if l.guarantees().primitives.shared_fence {
        assert_fence_after(l, fence, r.fence());
    }
    assert!(r.release().await.unwrap().is_clean());
}

/// A reader's lost() fires by its local deadline; the key is free for a writer afterwards.
pub async fn reader_lost_by_deadline(l: &Locker) {
    if !shared(l) {
        return assert_shared_refused(l).await;
    }
    let key = unique_key("reader-deadline");
    let r = l
        .acquire_shared(&key, Duration::from_secs(1))
        .auto_renew(false)
        .margin(Duration::from_millis(200));
    let r = r.await.unwrap();
    if let Some(deadline) = r.deadline() {
        assert_eq!(within("lost()", BOUND, r.lost()).await, LostReason::DeadlinePassed);
        assert!(Instant::now() >= deadline);
        let w = other(l).acquire(&key, LONG).wait(Wait::For(BOUND)).await.unwrap();
        assert_fence_after(l, r.fence(), w.fence());
        assert!(w.release().await.unwrap().is_clean());
    }
    let _ = r.release().await.unwrap();
}

/// `a b`, `b a` and `b` by three lockers, 1,000 rounds together: all finish (no deadlock),
/// never two holders of `b` at once, one fence per key growing per key.
pub async fn several_keys_never_deadlock(l: &Locker) {
    let (a, b) = (unique_key("multi-a"), unique_key("multi-b"));
    let on_b = Arc::new(AtomicUsize::new(0));
    let fences: Arc<Mutex<HashMap<String, Vec<u64>>>> = Arc::default();
    let callers: [Vec<String>; 3] =
        [vec![a.clone(), b.clone()], vec![b.clone(), a.clone()], vec![b.clone()]];
    let rounds = 1000 / callers.len() + 1;
    let mut tasks = Vec::new();
    for keys in callers {
        let (l, on_b, fences, b) = (other(l), on_b.clone(), fences.clone(), b.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..rounds {
                let all = l.acquire_all(&keys, LONG).wait(Wait::For(BOUND)).await.unwrap();
                assert_eq!(all.fences().len(), keys.len(), "one fence per key");
                assert_eq!(on_b.fetch_add(1, Ordering::SeqCst), 0, "two holders of b");
                for (k, f) in all.fences() {
                    fences.lock().unwrap().entry(k.as_str().to_owned()).or_default().push(f.get());
                }
                tokio::task::yield_now().await;
                on_b.fetch_sub(1, Ordering::SeqCst);
                assert!(all.release().await.unwrap().is_clean());
                let _ = &b;
            }
        }));
    }
    for t in tasks {
        within("1,000 rounds of a b / b a / b", Duration::from_secs(240), t).await.unwrap();
    }
    if issues_fences(l) {
        for (k, mut fs) in fences.lock().unwrap().clone() {
            let n = fs.len();
            fs.sort_unstable();
            fs.dedup();
            assert_eq!(fs.len(), n, "a fence of {k} issued twice");
        }
    }
}

/// All or nothing: with one key held elsewhere, nothing is kept and the busy key is named;
/// the aggregate is lost when one of its leases is.
pub async fn several_keys_all_or_nothing(l: &Locker) {
    let (a, b) = (unique_key("aon-a"), unique_key("aon-b"));
    let hold_b = other(l).acquire(&b, LONG).await.unwrap();
    match l.acquire_all([&a, &b], LONG).wait(Wait::For(Duration::from_millis(300))).await {
        Err(Error::Busy { key }) => assert_eq!(key.as_str(), b),
        r => panic!("acquired with b held elsewhere: {r:?}"),
    }
    let free_a = other(l).acquire(&a, LONG).await.expect("a was given back");
    assert!(free_a.release().await.unwrap().is_clean());
    assert!(hold_b.release().await.unwrap().is_clean());
    let r = l.acquire_all(Vec::<String>::new(), LONG).await;
    assert!(matches!(r, Err(Error::InvalidInput(_))), "{r:?}");
    let all = l.acquire_all([&b, &a, &b], LONG).await.unwrap();
    assert_eq!(all.iter().map(|l| l.key().as_str()).collect::<Vec<_>>(), {
        let mut v = vec![a.as_str(), b.as_str()];
        v.sort();
        v
    });
    assert!(all.admit());
    // One of them taken away: the aggregate is lost.
    let owner_b = all.get(&b).unwrap().owner();
    assert!(l.release_by_owner(&b, &owner_b).await.unwrap());
    let renewed = all.get(&b).unwrap().renew().await;
    assert!(renewed.is_err(), "b is not ours any more");
    let (key, _) = within("lost()", BOUND, all.lost()).await;
    assert_eq!(key.as_str(), b);
    assert!(all.is_lost() && !all.admit());
    assert!(all.release().await.unwrap().may_have_overlapped());
}

/// Generates one `#[tokio::test]` per primitives scenario, each on a fresh fixture made by
/// `$fixture` (an expression evaluating to a future of [`crate::Fixture`]).
#[macro_export]
macro_rules! primitives_suite {
    ($fixture:expr) => {
        $crate::primitives_suite!(@tests $fixture;
            permits_never_exceed_n, permit_fences_increase_per_slot, different_permits_refused,
            permit_owner_safe_and_lost, readers_overlap_writers_exclude, writer_not_starved,
            reader_lost_by_deadline, several_keys_never_deadlock, several_keys_all_or_nothing);
    };
    (@tests $fixture:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let fx: $crate::Fixture = $fixture.await;
                $crate::primitives::$name(&fx.locker).await;
            }
        )*
    };
}
