//! Semaphores on the mutex protocol (`docs/design.md` §9): N permits on KEY are N slots
//! `KEY#0 … KEY#(N-1)`, each an ordinary lease with its own owner token and its own
//! never-resetting fence, so a fenced resource fences per slot and at most N stale-proof
//! writers exist. The store records N beside each slot's grant and refuses a request naming
//! another N while a slot granted for it lives ([`crate::store::SlotOf`]).
//!
//! Acquiring tries every slot once (from a varying first slot, so contenders spread), then,
//! when the caller waits, waits on all of them at once with the store's notification and
//! keeps the first grant; the other waits are dropped, and the locker's usual cleanup
//! removes any grant whose answer was still in flight (owner-checked).

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use crate::Acquire;
use crate::mode::slot_key;
use crate::{Error, Key, Lease, Locker, Result, Wait};

/// The most permits one semaphore may have (each waiting acquirer watches every slot).
pub const MAX_PERMITS: u32 = 256;

type LeaseFuture = Pin<Box<dyn Future<Output = Result<Lease>> + Send + 'static>>;

impl Locker {
    /// Starts the acquisition of one of `permits` permits on `key` for `ttl`; configure it
    /// as an [`Acquire`] ([`AcquirePermit::wait`] …), then `.await` it for a [`Permit`].
    ///
    /// Failures: [`Error::InvalidInput`] for `permits` outside `1..=`[`MAX_PERMITS`], a key
    /// too long for its slot names (`KEY#index`), or when the store holds a live slot of
    /// `key` granted for another number of permits; [`Error::Busy`] (naming `key`) when
    /// every slot stayed held through the wait; [`Error::Unsupported`] where the store
    /// cannot check the permit count ([`crate::Primitives::permits`]); the rest as for
    /// [`Locker::acquire`].
    pub fn acquire_permit(&self, key: &str, permits: u32, ttl: Duration) -> AcquirePermit {
        AcquirePermit { base: self.acquire(key, ttl), permits }
    }
}

/// A configured semaphore acquisition; `.await` it.
#[derive(Debug)]
#[must_use = "an acquisition does nothing until awaited"]
pub struct AcquirePermit {
    base: Acquire,
    permits: u32,
}

impl AcquirePermit {
    /// How long to wait for a free slot (default: one attempt per slot).
    pub fn wait(mut self, wait: Wait) -> Self {
        self.base = self.base.wait(wait);
        self
    }

    lease_options!();

    /// The acquisition of slot `index`, waiting `wait`.
    fn slot(&self, sem: &Key, index: u32, wait: Wait) -> Acquire {
        let b = &self.base;
        let mut a = b.locker.acquire(&slot_key(sem.as_str(), index), b.ttl).wait(wait);
        (a.auto_renew, a.drift, a.margin) = (b.auto_renew, b.drift, b.margin);
        a.slot = Some((sem.clone(), index, self.permits));
        a
    }

    async fn run(self) -> Result<Permit> {
        let sem = Key::new(self.base.key.as_str())?;
        let n = self.permits;
        if !(1..=MAX_PERMITS).contains(&n) {
            return Err(Error::invalid(format!(
                "a semaphore has 1 to {MAX_PERMITS} permits, not {n}"
            )));
        }
        Key::new(slot_key(sem.as_str(), n - 1)).map_err(|e| {
            Error::invalid(format!("semaphore key {:?}: its slots' {}", sem, e.detail()))
        })?;
        let g = self.base.locker.guarantees();
        g.primitives.admit(g.backend, crate::Mode::Exclusive, true)?;
        let until = match self.base.wait {
            Wait::No => None,
            Wait::For(d) => Some(Instant::now().checked_add(d)),
            Wait::Forever => Some(None),
        };
        let first = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
            ^ std::process::id();
        let order: Vec<u32> = (0..n).map(|j| (first.wrapping_add(j)) % n).collect();
        for &i in &order {
            match self.slot(&sem, i, Wait::No).await {
                Ok(lease) => return Ok(Permit { lease, slot: i, permits: n }),
                Err(Error::Busy { .. } | Error::HeldByThisLocker { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        let Some(until) = until else { return Err(Error::Busy { key: sem }) };
        let wait = match until {
            Some(u) => Wait::For(u.saturating_duration_since(Instant::now())),
            None => Wait::Forever,
        };
        let mut waits: Vec<Option<(u32, LeaseFuture)>> =
            order.iter().map(|&i| Some((i, self.slot(&sem, i, wait).into_future()))).collect();
        // The first grant wins; the rest are dropped (an in-flight one is cleaned up).
        let won = std::future::poll_fn(|cx| {
            let mut failed = None;
            for w in waits.iter_mut() {
                let Some((i, f)) = w else { continue };
                if let Poll::Ready(r) = f.as_mut().poll(cx) {
                    let i = *i;
                    *w = None;
                    match r {
                        Ok(lease) => return Poll::Ready(Ok((i, lease))),
                        Err(Error::Busy { .. } | Error::HeldByThisLocker { .. }) => {}
                        Err(e) => failed = failed.or(Some(e)),
                    }
                }
            }
            if let Some(e) = failed {
                return Poll::Ready(Err(e));
            }
            if waits.iter().all(Option::is_none) {
                return Poll::Ready(Err(Error::Busy { key: sem.clone() }));
            }
            Poll::Pending
        })
        .await;
        drop(waits);
        won.map(|(slot, lease)| Permit { lease, slot, permits: n })
    }
}

impl IntoFuture for AcquirePermit {
    type Output = Result<Permit>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<Permit>> + Send + 'static>>;
    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.run())
    }
}

/// One permit of a semaphore: the [`Lease`] of one slot (it derefs to it: `fence()`,
/// `lost()`, `guard()`, `admit()`, `renew()` are that slot's), and which slot it is.
/// Release it with [`Permit::release`]; dropping it releases in the background, as a lease.
#[derive(Debug)]
#[must_use = "dropping a Permit releases it (in the background)"]
pub struct Permit {
    lease: Lease,
    slot: u32,
    permits: u32,
}

impl Permit {
    /// The slot held, `0..permits` (`LEASEHOLD_SLOT` in the CLI).
    pub fn slot(&self) -> u32 {
        self.slot
    }

    /// The number of permits of the semaphore.
    pub fn permits(&self) -> u32 {
        self.permits
    }

    /// The slot's lease.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// The slot's lease, to keep without the permit's view.
    pub fn into_lease(self) -> Lease {
        self.lease
    }

    /// Owner-checked release of the slot (see [`Lease::release`]).
    pub async fn release(self) -> Result<crate::Released> {
        self.lease.release().await
    }
}

impl std::ops::Deref for Permit {
    type Target = Lease;
    fn deref(&self) -> &Lease {
        &self.lease
    }
}
