//! The peer crates `leasehold bench` measures on one Redis server beside leasehold, each
//! driven the way its documentation shows: rslock (feature `peer-rslock`) in the uncontended
//! and handoff scenarios, and the `distributed-lock` crate family's Redis backend (feature
//! `peer-distributed-lock`) in the primitives scenario. None of them issues a fencing token.

use leasehold::StoreUrl;
use leasehold::backends::redis::tools;

use super::baseline::{TTL, err};
use crate::baseline::{RawError, RawHeld};

#[cfg(feature = "peer-rslock")]
pub use self::rslock_peer::{RSLOCK_REQUESTS, rslock_baseline, rslock_handoff};

#[cfg(feature = "peer-distributed-lock")]
pub use self::distributed_lock::primitive_peer;

/// A held grant of a peer crate, released by its own call.
struct Held<F>(Option<F>);

#[async_trait::async_trait]
impl<F, Fut> RawHeld for Held<F>
where
    F: FnOnce() -> Fut + Send,
    Fut: std::future::Future<Output = Result<(), RawError>> + Send,
{
    async fn release(mut self: Box<Self>) -> Result<(), RawError> {
        match self.0.take() {
            Some(f) => f().await,
            None => Ok(()),
        }
    }
}

/// The URL a peer crate connects with: the one the store's driver connects with.
fn driver_url(url: &StoreUrl) -> Result<String, RawError> {
    Ok(tools::driver_url(url).map_err(err)?.to_owned())
}

#[cfg(feature = "peer-rslock")]
mod rslock_peer {
    use std::sync::Arc;
    use std::time::Duration;

    use leasehold::StoreUrl;
    use rslock::LockManager;

    use super::{Held, TTL, driver_url, err};
    use crate::baseline::{Baseline, HandoffBaseline, Paired, RawClient, RawError, RawHeld};

    /// What rslock sends: a plain SET NX PX to lock, a script to unlock.
    pub const RSLOCK_REQUESTS: &[&str] = &["set", "eval", "evalsha"];

    /// rslock: `lock` (3 tries, 0-200 ms apart) for one attempt, `acquire_no_guard` (loops on
    /// `lock`) to wait, `unlock` to release.
    struct Rslock(LockManager);

    fn held(m: LockManager, lock: rslock::Lock) -> Box<dyn RawHeld> {
        Box::new(Held(Some(move || async move {
            m.unlock(&lock).await;
            Ok(())
        })))
    }

    #[async_trait::async_trait]
    impl RawClient for Rslock {
        async fn acquire(&self, key: &str) -> Result<Option<Box<dyn RawHeld>>, RawError> {
            let lock = self.0.lock(key.as_bytes(), TTL).await.map_err(err)?;
            Ok(Some(held(self.0.clone(), lock)))
        }

        async fn acquire_within(
            &self,
            key: &str,
            wait: Duration,
        ) -> Result<Option<Box<dyn RawHeld>>, RawError> {
            if wait.is_zero() {
                return self.acquire(key).await;
            }
            match tokio::time::timeout(wait, self.0.acquire_no_guard(key.as_bytes(), TTL)).await {
                Ok(r) => Ok(Some(held(self.0.clone(), r.map_err(err)?))),
                Err(_) => Ok(None),
            }
        }
    }

    fn manager(url: &StoreUrl) -> Result<Arc<dyn RawClient>, RawError> {
        Ok(Arc::new(Rslock(LockManager::new(vec![driver_url(url)?]))))
    }

    /// rslock as a row of the uncontended scenario.
    pub fn rslock_baseline(url: &StoreUrl) -> Result<Baseline, RawError> {
        Ok(Baseline {
            label: "rslock 0.10 (lock + unlock)",
            paired: Paired::No,
            ratio_name: None,
            client: manager(url)?,
        })
    }

    /// rslock in the handoff scenario: one lock manager shared by every task.
    pub fn rslock_handoff(url: &StoreUrl, tasks: usize) -> Result<HandoffBaseline, RawError> {
        let m = manager(url)?;
        Ok(HandoffBaseline {
            label: "rslock 0.10 (acquire_no_guard: retries with 0-200 ms sleeps)",
            clients: vec![m; tasks],
            peer: true,
            requests: RSLOCK_REQUESTS,
        })
    }
}

#[cfg(feature = "peer-distributed-lock")]
mod distributed_lock {
    //! `distributed-lock-redis`: its mutex, its reader-writer lock's reader and its
    //! semaphore, each driven through the provider and the `distributed-lock-core` traits the
    //! way its README shows (`create_*` by name, then acquire and `release`). A handle has
    //! only `lost_token()` and `release()`.

    use std::sync::Arc;
    use std::time::Duration;

    use leasehold::StoreUrl;

    use super::{Held, TTL, driver_url};
    use crate::baseline::{PeerPrimitive, PrimitivePeer, RawClient, RawError, RawHeld};
    use distributed_lock_core::error::LockError;
    use distributed_lock_core::traits::{
        DistributedLock, DistributedReaderWriterLock, DistributedSemaphore, LockHandle,
        LockProvider, ReaderWriterLockProvider, SemaphoreProvider,
    };
    use distributed_lock_redis::RedisLockProvider;

    /// The peer's name in the report.
    const PEER: &str = "distributed-lock-redis 0.2";

    fn dl(e: LockError) -> RawError {
        format!("distributed-lock-redis: {e}")
    }

    /// A timed-out wait is "not granted"; any other error is a failure.
    fn waited<H>(r: Result<H, LockError>) -> Result<Option<H>, RawError> {
        match r {
            Ok(h) => Ok(Some(h)),
            Err(LockError::Timeout(_)) => Ok(None),
            Err(e) => Err(dl(e)),
        }
    }

    fn held<H: LockHandle + Send + 'static>(h: Option<H>) -> Option<Box<dyn RawHeld>> {
        h.map(|h| {
            Box::new(Held(Some(move || async move { h.release().await.map_err(dl) })))
                as Box<dyn RawHeld>
        })
    }

    /// Which of the provider's primitives.
    #[derive(Clone, Copy)]
    enum Prim {
        Mutex,
        Permit(u32),
        Reader,
    }

    struct Dl(Arc<RedisLockProvider>, Prim);

    #[async_trait::async_trait]
    impl RawClient for Dl {
        async fn acquire(&self, key: &str) -> Result<Option<Box<dyn RawHeld>>, RawError> {
            self.acquire_within(key, Duration::ZERO).await
        }

        async fn acquire_within(
            &self,
            key: &str,
            wait: Duration,
        ) -> Result<Option<Box<dyn RawHeld>>, RawError> {
            let once = wait.is_zero();
            Ok(match self.1 {
                Prim::Mutex => {
                    let lock = self.0.create_lock(key);
                    held(if once {
                        lock.try_acquire().await.map_err(dl)?
                    } else {
                        waited(lock.acquire(Some(wait)).await)?
                    })
                }
                Prim::Permit(n) => {
                    let sem = self.0.create_semaphore(key, n);
                    held(if once {
                        sem.try_acquire().await.map_err(dl)?
                    } else {
                        waited(sem.acquire(Some(wait)).await)?
                    })
                }
                Prim::Reader => {
                    let rw = self.0.create_reader_writer_lock(key);
                    held(if once {
                        rw.try_acquire_read().await.map_err(dl)?
                    } else {
                        waited(rw.acquire_read(Some(wait)).await)?
                    })
                }
            })
        }
    }

    /// One provider on the server `url` names (its own client, fred; the crate's
    /// single-client path, no RedLock quorum), its expiry the bench's TTL, shared by its
    /// mutex, permit (of a semaphore of `permits`) and reader. The labels say what each
    /// call sends per cycle (read from the crate's source).
    pub async fn primitive_peer(url: &StoreUrl, permits: u32) -> Result<PrimitivePeer, RawError> {
        let provider = RedisLockProvider::builder()
            .url(&driver_url(url)?)
            .expiry(TTL)
            .build()
            .await
            .map_err(dl)?;
        let p = Arc::new(provider);
        let one = |prim: Prim, label: String, requests: &'static [&'static str]| PeerPrimitive {
            label,
            requests,
            client: Arc::new(Dl(p.clone(), prim)),
        };
        Ok(PrimitivePeer {
            name: PEER,
            mutex: one(
                Prim::Mutex,
                format!(
                    "{PEER} mutex: create_lock + try_acquire (SET NX PX) + release (EVAL compare-and-delete)"
                ),
                &["set", "eval", "evalsha"],
            ),
            permit: one(
                Prim::Permit(permits),
                format!(
                    "{PEER} semaphore of {permits}: create_semaphore + try_acquire (EVAL: ZREMRANGEBYSCORE, ZCARD, ZADD) + release (EVAL ZREM)"
                ),
                &["eval", "evalsha"],
            ),
            reader: one(
                Prim::Reader,
                format!(
                    "{PEER} reader: create_reader_writer_lock + try_acquire_read (EXISTS, SADD, PTTL, PEXPIRE) + release (SREM)"
                ),
                &["exists", "sadd", "pttl", "pexpire", "srem", "sismember"],
            ),
        })
    }
}
