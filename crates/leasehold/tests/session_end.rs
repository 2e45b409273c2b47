//! The session-end hook of the store trait: a session store's grant carries a future that
//! resolves when the session ends, and the lease must then go lost, cancel guarded work and
//! refuse new work. No built-in store ends sessions yet (flock sessions end only with the
//! process), so this drives the hook with a minimal store.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use leasehold::store::{AcquireRequest, Attempt, Grant, Store};
use leasehold::{
    Error, FenceToken, Guarantees, Holder, Key, LockKind, Locker, LostReason, OwnerToken, Result,
};
use tokio::sync::oneshot;

/// Grants every key once, as a session whose end the test triggers.
#[derive(Debug)]
struct OneSession {
    guarantees: Guarantees,
    end: Mutex<Option<oneshot::Receiver<String>>>,
}

#[async_trait]
impl Store for OneSession {
    fn guarantees(&self) -> Guarantees {
        self.guarantees.clone()
    }
    async fn try_acquire(&self, _req: &AcquireRequest<'_>) -> Result<Attempt> {
        let end = self.end.lock().unwrap().take().expect("one grant");
        let grant = Grant::new(FenceToken::new(1), Instant::now())
            .with_session_end(Box::pin(async move { end.await.unwrap_or_default() }));
        Ok(Attempt::Granted(grant))
    }
    async fn acquire(&self, req: &AcquireRequest<'_>, _: Option<Instant>) -> Result<Attempt> {
        // One attempt: this store is never busy.
        self.try_acquire(req).await
    }
    async fn renew(&self, _: &Key, _: &OwnerToken, _: Duration) -> Result<bool> {
        Ok(true)
    }
    async fn release(&self, _: &Key, _: &OwnerToken) -> Result<bool> {
        Ok(false)
    }
    async fn holders(&self, _: Option<&Key>) -> Result<Vec<Holder>> {
        Ok(vec![])
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_end_loses_the_lease() {
    // `Guarantees` is non-exhaustive: take a session store's and keep it.
    let dir = tempfile::tempdir().unwrap();
    let guarantees =
        Locker::connect(&format!("file://{}", dir.path().display())).await.unwrap().guarantees();
    assert_eq!(guarantees.kind, LockKind::Session);
    let (tx, rx) = oneshot::channel();
    let locker = Locker::new(OneSession { guarantees, end: Mutex::new(Some(rx)) });
    let lease = locker.acquire("k", Duration::from_secs(30)).await.unwrap();
    assert!(lease.admit() && lease.deadline().is_none());
    let work = lease.guard(tokio::time::sleep(Duration::from_secs(60)));
    tx.send("connection closed".into()).unwrap();
    let r = tokio::time::timeout(Duration::from_secs(10), work).await.expect("guard returns");
    assert!(
        matches!(&r, Err(Error::Lost { reason: LostReason::SessionEnded(why), .. }) if why == "connection closed"),
        "{r:?}"
    );
    assert!(lease.is_lost() && !lease.admit());
    assert!(matches!(lease.renew().await, Err(Error::Lost { .. })));
}

/// A session that outlives its lease (a connection carrying many locks in turn) must not keep
/// one watcher per lease ever granted: the watcher ends with the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_watcher_ends_with_the_lease() {
    let dir = tempfile::tempdir().unwrap();
    let guarantees =
        Locker::connect(&format!("file://{}", dir.path().display())).await.unwrap().guarantees();
    let (tx, rx) = oneshot::channel::<String>();
    let locker = Locker::new(OneSession { guarantees, end: Mutex::new(Some(rx)) });
    let lease = locker.acquire("k", Duration::from_secs(30)).await.unwrap();
    drop(lease.release().await);
    // The session-end future owned the receiver: once the watcher is gone, the sender sees it.
    let mut tx = tx;
    tokio::time::timeout(Duration::from_secs(5), tx.closed())
        .await
        .expect("the session watcher outlived its released lease");
}
