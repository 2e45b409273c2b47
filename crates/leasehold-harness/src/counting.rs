//! A store that counts what a locker asks of the store it wraps (renewals above all), so a
//! test or the bench can check the auto-renew rate by counting requests, not by timing them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use leasehold::store::Store;
use leasehold::store::{AcquireRequest, Attempt, RenewItem};
use leasehold::{Guarantees, Holder, Key, OwnerToken, Result};

/// Wraps a store; every method goes straight through, counted.
#[derive(Debug)]
pub struct Counting {
    inner: Arc<dyn Store>,
    renewals: AtomicU64,
    renew_calls: AtomicU64,
    acquires: AtomicU64,
    releases: AtomicU64,
}

impl Counting {
    /// Wraps `inner`. Give the result to [`leasehold::Locker::from_arc`].
    pub fn new(inner: Arc<dyn Store>) -> Arc<Counting> {
        Arc::new(Counting {
            inner,
            renewals: AtomicU64::new(0),
            renew_calls: AtomicU64::new(0),
            acquires: AtomicU64::new(0),
            releases: AtomicU64::new(0),
        })
    }

    /// Leases renewed so far (a batch of n counts n).
    pub fn renewals(&self) -> u64 {
        self.renewals.load(Ordering::Relaxed)
    }

    /// Renewal requests so far (a batch counts once).
    pub fn renew_calls(&self) -> u64 {
        self.renew_calls.load(Ordering::Relaxed)
    }

    /// Acquire attempts so far (`try_acquire` and `acquire` calls).
    pub fn acquires(&self) -> u64 {
        self.acquires.load(Ordering::Relaxed)
    }

    /// Releases so far.
    pub fn releases(&self) -> u64 {
        self.releases.load(Ordering::Relaxed)
    }
}

#[async_trait::async_trait]
impl Store for Counting {
    fn guarantees(&self) -> Guarantees {
        self.inner.guarantees()
    }

    async fn try_acquire(&self, req: &AcquireRequest<'_>) -> Result<Attempt> {
        self.acquires.fetch_add(1, Ordering::Relaxed);
        self.inner.try_acquire(req).await
    }

    async fn acquire(&self, req: &AcquireRequest<'_>, until: Option<Instant>) -> Result<Attempt> {
        self.acquires.fetch_add(1, Ordering::Relaxed);
        self.inner.acquire(req, until).await
    }

    async fn renew(&self, key: &Key, owner: &OwnerToken, ttl: Duration) -> Result<bool> {
        self.renewals.fetch_add(1, Ordering::Relaxed);
        self.renew_calls.fetch_add(1, Ordering::Relaxed);
        self.inner.renew(key, owner, ttl).await
    }

    async fn renew_many(&self, items: &[RenewItem]) -> Result<Vec<bool>> {
        self.renewals.fetch_add(items.len() as u64, Ordering::Relaxed);
        self.renew_calls.fetch_add(1, Ordering::Relaxed);
        self.inner.renew_many(items).await
    }

    async fn release(&self, key: &Key, owner: &OwnerToken) -> Result<bool> {
        self.releases.fetch_add(1, Ordering::Relaxed);
        self.inner.release(key, owner).await
    }

    async fn holders(&self, key: Option<&Key>) -> Result<Vec<Holder>> {
        self.inner.holders(key).await
    }

    async fn forget(&self, key: &Key) -> Result<()> {
        self.inner.forget(key).await
    }
}
