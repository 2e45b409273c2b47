//! The `distributed-lock` crate family's Redis backend (`distributed-lock-redis`) as the peer
//! of the primitives scenario: its mutex, its reader-writer lock's reader and its semaphore,
//! each driven through the provider and the `distributed-lock-core` traits the way its
//! README shows (`create_*` by name, then acquire and `release`).
//!
//! None of them issues a fencing token: a handle has only `lost_token()` and `release()`.

use super::{BenchResult, Contender, TTL};
use distributed_lock_core::error::LockError;
use distributed_lock_core::traits::{
    DistributedLock, DistributedReaderWriterLock, DistributedSemaphore, LockHandle, LockProvider,
    ReaderWriterLockProvider, SemaphoreProvider,
};
use distributed_lock_redis::{
    RedisLockHandle, RedisLockProvider, RedisReadLockHandle, RedisSemaphoreHandle,
};
use std::sync::Arc;
use std::time::Duration;

/// One provider on one Redis server (its own client, fred), shared by the three contenders.
#[derive(Clone)]
pub(super) struct Peer(Arc<RedisLockProvider>);

impl Peer {
    /// Connects a provider to `url` (one server: the crate's single-client path, no RedLock
    /// quorum), its expiry the bench's TTL.
    pub(super) async fn connect(url: &str) -> BenchResult<Self> {
        let provider = RedisLockProvider::builder()
            .url(url)
            .expiry(TTL)
            .build()
            .await
            .map_err(|e| format!("distributed-lock-redis: {e}"))?;
        Ok(Peer(Arc::new(provider)))
    }

    pub(super) fn mutex(&self) -> DlMutex {
        DlMutex(self.0.clone())
    }

    pub(super) fn reader(&self) -> DlReader {
        DlReader(self.0.clone())
    }

    pub(super) fn permit(&self, max_count: u32) -> DlPermit {
        DlPermit(self.0.clone(), max_count)
    }
}

fn err(e: LockError) -> String {
    format!("distributed-lock-redis: {e}")
}

/// A timed-out wait is "not granted"; any other error is a failure.
fn waited<H>(r: Result<H, LockError>) -> BenchResult<Option<H>> {
    match r {
        Ok(h) => Ok(Some(h)),
        Err(LockError::Timeout(_)) => Ok(None),
        Err(e) => Err(err(e)),
    }
}

/// The crate's mutex (`RedisDistributedLock`).
#[derive(Clone)]
pub(super) struct DlMutex(Arc<RedisLockProvider>);

impl Contender for DlMutex {
    type Guard = RedisLockHandle;
    async fn acquire(&self, key: &str, wait: Duration) -> BenchResult<Option<Self::Guard>> {
        let lock = self.0.create_lock(key);
        if wait.is_zero() {
            lock.try_acquire().await.map_err(err)
        } else {
            waited(lock.acquire(Some(wait)).await)
        }
    }
    async fn release(&self, h: Self::Guard) -> BenchResult<()> {
        h.release().await.map_err(err)
    }
}

/// A reader of the crate's reader-writer lock (`RedisDistributedReaderWriterLock`).
#[derive(Clone)]
pub(super) struct DlReader(Arc<RedisLockProvider>);

impl Contender for DlReader {
    type Guard = RedisReadLockHandle;
    async fn acquire(&self, key: &str, wait: Duration) -> BenchResult<Option<Self::Guard>> {
        let rw = self.0.create_reader_writer_lock(key);
        if wait.is_zero() {
            rw.try_acquire_read().await.map_err(err)
        } else {
            waited(rw.acquire_read(Some(wait)).await)
        }
    }
    async fn release(&self, h: Self::Guard) -> BenchResult<()> {
        h.release().await.map_err(err)
    }
}

/// A ticket of the crate's semaphore (`RedisDistributedSemaphore`) of the given size.
#[derive(Clone)]
pub(super) struct DlPermit(Arc<RedisLockProvider>, u32);

impl Contender for DlPermit {
    type Guard = RedisSemaphoreHandle;
    async fn acquire(&self, key: &str, wait: Duration) -> BenchResult<Option<Self::Guard>> {
        let sem = self.0.create_semaphore(key, self.1);
        if wait.is_zero() {
            sem.try_acquire().await.map_err(err)
        } else {
            waited(sem.acquire(Some(wait)).await)
        }
    }
    async fn release(&self, h: Self::Guard) -> BenchResult<()> {
        h.release().await.map_err(err)
    }
}
