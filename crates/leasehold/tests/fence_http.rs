//! The HTTP fence layer against a real store: fence headers are claims, confirmed with the
//! store before a newer one is installed. A wrapper store counts the round trips.
#![cfg(all(feature = "http", feature = "sqlite"))]

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use leasehold::fence::http::http::{HeaderName, Request, Response, StatusCode};
use leasehold::fence::http::{FenceGuard, FenceLayer, Refusal, request_headers};
use leasehold::store::Store;
use leasehold::store::{AcquireRequest, Attempt};
use leasehold::{Guarantees, Holder, Key, Locker, OwnerToken, Result, Wait};
use tower_layer::Layer;
use tower_service::Service;

/// Delegates to the real store; counts `holders` calls.
#[derive(Debug)]
struct Counting {
    inner: Arc<dyn Store>,
    holders: AtomicUsize,
}

#[async_trait]
impl Store for Counting {
    fn guarantees(&self) -> Guarantees {
        self.inner.guarantees()
    }
    async fn try_acquire(&self, req: &AcquireRequest<'_>) -> Result<Attempt> {
        self.inner.try_acquire(req).await
    }
    async fn acquire(&self, req: &AcquireRequest<'_>, until: Option<Instant>) -> Result<Attempt> {
        self.inner.acquire(req, until).await
    }
    async fn renew(&self, key: &Key, owner: &OwnerToken, ttl: Duration) -> Result<bool> {
        self.inner.renew(key, owner, ttl).await
    }
    async fn release(&self, key: &Key, owner: &OwnerToken) -> Result<bool> {
        self.inner.release(key, owner).await
    }
    async fn holders(&self, key: Option<&Key>) -> Result<Vec<Holder>> {
        self.holders.fetch_add(1, Ordering::SeqCst);
        self.inner.holders(key).await
    }
}

/// The protected service: records the bodies it accepted.
#[derive(Clone, Default)]
struct Record(Arc<std::sync::Mutex<Vec<String>>>);

impl Service<Request<String>> for Record {
    type Response = Response<String>;
    type Error = Infallible;
    type Future =
        Pin<Box<dyn Future<Output = std::result::Result<Response<String>, Infallible>> + Send>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<std::result::Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, req: Request<String>) -> Self::Future {
        self.0.lock().unwrap().push(req.into_body());
        Box::pin(async { Ok(Response::new("stored\n".to_string())) })
    }
}

async fn send<S>(svc: &mut S, headers: &[(String, String)], body: &str) -> Response<String>
where
    S: Service<Request<String>, Response = Response<String>, Error = Infallible>,
{
    std::future::poll_fn(|cx| svc.poll_ready(cx)).await.unwrap();
    let mut req = Request::new(body.to_string());
    for (k, v) in headers {
        req.headers_mut().insert(HeaderName::from_bytes(k.as_bytes()).unwrap(), v.parse().unwrap());
    }
    svc.call(req).await.unwrap()
}

fn headers_of(f: &leasehold::fence::Fencing) -> Vec<(String, String)> {
    request_headers(f).map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_owned())).to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_tokens_are_forbidden_and_stale_ones_refused_without_asking() {
    let dir = tempfile::tempdir().unwrap();
    let real = Locker::connect(&format!("sqlite://{}/s.db", dir.path().display())).await.unwrap();
    let store = Arc::new(Counting { inner: real.store().clone(), holders: AtomicUsize::new(0) });
    let locker = Locker::from_arc(store.clone());
    let guard = FenceGuard::new(Key::new("doc").unwrap(), store.clone()).unwrap();
    let record = Record::default();
    let mut svc = FenceLayer::new(guard.clone()).layer(record.clone());
    let asked = || store.holders.load(Ordering::SeqCst);

    let a = locker.acquire("doc", Duration::from_secs(2)).await.unwrap();
    let fa = a.fencing();
    assert_eq!(send(&mut svc, &headers_of(&fa), "a1").await.status(), StatusCode::OK);
    assert_eq!(asked(), 1, "one round trip for a new grant");
    assert_eq!(send(&mut svc, &headers_of(&fa), "a2").await.status(), StatusCode::OK);
    assert_eq!(asked(), 1, "none under the installed grant");

    // The forgery: the right key, the largest token, any owner.
    let forged = [
        ("fencing-token".to_string(), u64::MAX.to_string()),
        ("fencing-key".to_string(), "doc".to_string()),
        ("fencing-owner".to_string(), "0123456789abcdef0123456789abcdef".to_string()),
    ];
    let res = send(&mut svc, &forged, "forged").await;
    assert_eq!(res.status(), StatusCode::FORBIDDEN, "{}", res.body());
    assert!(res.body().contains("not the lock store's current grant"), "{}", res.body());
    assert!(matches!(res.extensions().get::<Refusal>(), Some(Refusal::Forbidden(_))));
    assert_eq!(guard.installed(), fa.token(), "the forgery installed nothing");
    assert_eq!(send(&mut svc, &headers_of(&fa), "a3").await.status(), StatusCode::OK);

    // A stalls past its lease; B takes the key and claims the service.
    drop(a.detach());
    let b = locker
        .acquire("doc", Duration::from_secs(30))
        .wait(Wait::For(Duration::from_secs(10)))
        .await
        .unwrap();
    let fb = b.fencing();
    assert_eq!(send(&mut svc, &headers_of(&fb), "b1").await.status(), StatusCode::OK);
    let before = asked();
    let late = send(&mut svc, &headers_of(&fa), "late a").await;
    assert_eq!(late.status(), StatusCode::CONFLICT, "{}", late.body());
    assert_eq!(asked(), before, "a stale token is refused without asking the store");
    assert_eq!(*record.0.lock().unwrap(), ["a1", "a2", "a3", "b1"]);
    assert!(b.release().await.unwrap().is_clean());
}

/// A reader's grant is real, and fenced, but it is never a writer's: the service refuses to
/// install it (403), and the writer after it is admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_readers_grant_is_not_confirmed_as_a_writer() {
    let dir = tempfile::tempdir().unwrap();
    let locker = Locker::connect(&format!("sqlite://{}/s.db", dir.path().display())).await.unwrap();
    let guard = FenceGuard::new(Key::new("doc").unwrap(), locker.store().clone()).unwrap();
    let record = Record::default();
    let mut svc = FenceLayer::new(guard.clone()).layer(record.clone());
    let r = locker.acquire_shared("doc", Duration::from_secs(30)).await.unwrap();
    let res = send(&mut svc, &headers_of(&r.fencing()), "reader").await;
    assert_eq!(res.status(), StatusCode::FORBIDDEN, "{}", res.body());
    assert!(r.release().await.unwrap().is_clean());
    let w = locker.acquire("doc", Duration::from_secs(30)).await.unwrap();
    assert_eq!(send(&mut svc, &headers_of(&w.fencing()), "writer").await.status(), StatusCode::OK);
    assert_eq!(*record.0.lock().unwrap(), ["writer"]);
    assert!(w.release().await.unwrap().is_clean());
}
