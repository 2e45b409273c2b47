use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use async_trait::async_trait;

use super::*;
use crate::store::{AcquireRequest, Attempt};
use crate::{Guarantees, Holder, LockKind};

/// A store whose one current grant the test sets; counts `holders` round trips.
#[derive(Debug)]
struct Fake {
    current: Mutex<Option<Holder>>,
    asked: AtomicUsize,
    down: AtomicBool,
    repeat: FenceRepeat,
    know: bool,
}

impl Fake {
    fn new() -> Arc<Fake> {
        Arc::new(Fake {
            current: Mutex::new(None),
            asked: AtomicUsize::new(0),
            down: AtomicBool::new(false),
            repeat: FenceRepeat::ClockBacked,
            know: true,
        })
    }
    fn grant(&self, f: &Fencing) {
        *self.current.lock().unwrap() =
            Some(Holder::new(f.key().clone(), f.owner(), Some(f.token()), None));
    }
    fn asked(&self) -> usize {
        self.asked.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Store for Fake {
    fn guarantees(&self) -> Guarantees {
        Guarantees {
            backend: "fake",
            kind: LockKind::Lease,
            exclusion: "",
            store_failure: "",
            expiry: "",
            fence: "",
            fence_repeat: self.repeat,
            failure_admits_second_holder: false,
            holders_know_fence: self.know,
            holders_know_info: false,
            waiting: "",
            primitives: crate::Primitives::MUTEX,
        }
    }
    async fn try_acquire(&self, _: &AcquireRequest<'_>) -> crate::Result<Attempt> {
        Ok(Attempt::Busy { holder_expires_in: None })
    }
    async fn acquire(&self, r: &AcquireRequest<'_>, _: Option<Instant>) -> crate::Result<Attempt> {
        self.try_acquire(r).await
    }
    async fn renew(&self, _: &Key, _: &OwnerToken, _: Duration) -> crate::Result<bool> {
        Ok(false)
    }
    async fn release(&self, _: &Key, _: &OwnerToken) -> crate::Result<bool> {
        Ok(false)
    }
    async fn holders(&self, key: Option<&Key>) -> crate::Result<Vec<Holder>> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        if self.down.load(Ordering::SeqCst) {
            return Err(Error::unavailable("the fake store is down", None));
        }
        let cur = self.current.lock().unwrap().clone();
        Ok(cur.into_iter().filter(|h| key.is_none_or(|k| &h.key == k)).collect())
    }
}

fn f(key: &str, token: u64, owner: OwnerToken) -> Fencing {
    Fencing::new(Key::new(key).unwrap(), FenceToken::new(token), owner)
}

fn guard(store: &Arc<Fake>) -> FenceGuard {
    FenceGuard::new(Key::new("res").unwrap(), store.clone()).unwrap()
}

#[tokio::test]
async fn admits_newest_refuses_stale_foreign_and_other_keys() {
    let store = Fake::new();
    let g = guard(&store);
    let (a, b) = (OwnerToken::generate().unwrap(), OwnerToken::generate().unwrap());
    store.grant(&f("res", 5, a));
    drop(g.admit(f("res", 5, a)).await.unwrap());
    drop(g.admit(f("res", 5, a)).await.unwrap()); // idempotent
    assert!(matches!(g.admit(f("res", 5, b)).await, Err(Refusal::Stale(_))));
    assert!(matches!(g.admit(f("res", 4, b)).await, Err(Refusal::Stale(_))));
    let other = g.admit(f("other", 9, b)).await.unwrap_err();
    assert!(other.message().contains("guarded by \"res\""), "{other:?}");
    assert_eq!(other.status(), StatusCode::FORBIDDEN);
    store.grant(&f("res", 6, b));
    drop(g.admit(f("res", 6, b)).await.unwrap());
    assert!(matches!(g.admit(f("res", 5, a)).await, Err(Refusal::Stale(_))));
    assert_eq!(g.installed().get(), 6);
    // One question per new grant (5, then 6); none for the rest.
    assert_eq!(store.asked(), 2);
}

#[tokio::test]
async fn a_newer_grant_waits_for_requests_of_the_older_one() {
    let store = Fake::new();
    let g = guard(&store);
    let (a, b) = (OwnerToken::generate().unwrap(), OwnerToken::generate().unwrap());
    store.grant(&f("res", 1, a));
    let running = g.admit(f("res", 1, a)).await.unwrap();
    // A clone (what a streamed response body keeps) holds the gate as well.
    let kept = running.clone();
    drop(running);
    store.grant(&f("res", 2, b));
    let newer = {
        let g = g.clone();
        tokio::spawn(async move { g.admit(f("res", 2, b)).await.map(|_| ()) })
    };
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert!(!newer.is_finished(), "installed while an older request was running");
    assert_eq!(g.installed().get(), 1);
    drop(kept);
    newer.await.unwrap().unwrap();
    assert_eq!(g.installed().get(), 2);
}

#[tokio::test]
async fn an_unconfirmed_grant_is_forbidden_and_installs_nothing() {
    let store = Fake::new();
    let g = guard(&store);
    let a = OwnerToken::generate().unwrap();
    store.grant(&f("res", 7, a));
    drop(g.admit(f("res", 7, a)).await.unwrap());
    let forged = g.admit(f("res", u64::MAX, OwnerToken::generate().unwrap())).await.unwrap_err();
    assert!(matches!(forged, Refusal::Forbidden(_)), "{forged:?}");
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
    assert!(forged.message().contains("not the lock store's current grant"), "{forged:?}");
    // The real holder's fence with a guessed larger number is no better.
    assert!(matches!(g.admit(f("res", 8, a)).await, Err(Refusal::Forbidden(_))));
    assert_eq!(g.installed().get(), 7);
    drop(g.admit(f("res", 7, a)).await.unwrap());
}

#[tokio::test]
async fn an_unreachable_store_fails_closed() {
    let store = Fake::new();
    let g = guard(&store);
    let a = OwnerToken::generate().unwrap();
    store.grant(&f("res", 3, a));
    store.down.store(true, Ordering::SeqCst);
    let r = g.admit(f("res", 3, a)).await.unwrap_err();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE, "{r:?}");
    assert_eq!(g.installed().get(), 0);
    store.down.store(false, Ordering::SeqCst);
    drop(g.admit(f("res", 3, a)).await.unwrap());
    assert_eq!(g.installed().get(), 3);
}

#[test]
fn stores_that_cannot_confirm_are_refused_at_construction() {
    for (repeat, know, says) in [
        (FenceRepeat::NoFence, true, "issues no fences"),
        (FenceRepeat::ClockBacked, false, "cannot say which fence"),
    ] {
        let store = Arc::new(Fake { repeat, know, ..Arc::into_inner(Fake::new()).unwrap() });
        let e = FenceGuard::new(Key::new("res").unwrap(), store).unwrap_err();
        assert!(matches!(&e, Error::InvalidInput(m) if m.contains(says)), "{e}");
    }
}

#[test]
fn headers_round_trip_with_odd_keys() {
    let fencing = f("a b%c\u{e9}", 77, OwnerToken::generate().unwrap());
    let mut h = HeaderMap::new();
    for (k, v) in request_headers(&fencing) {
        h.insert(k, v);
    }
    assert_eq!(read_headers(&h).unwrap(), fencing);
    assert!(matches!(read_headers(&HeaderMap::new()), Err(Refusal::Missing(_))));
    h.insert(TOKEN, HeaderValue::from_static("x"));
    assert!(matches!(read_headers(&h), Err(Refusal::Malformed(_))));
}
