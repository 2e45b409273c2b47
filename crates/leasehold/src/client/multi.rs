//! Several keys at once (`docs/design.md` §9): all or nothing, one ordinary lease (and fence)
//! per key, acquired in one canonical order (the keys sorted bytewise, duplicates merged)
//! whatever order the caller names them in, so two callers naming the same keys in opposite
//! orders never deadlock: whoever holds the smaller key is never waiting for it. Works on
//! every store through the plain trait. The aggregate is lost when any of its leases is
//! lost; each lease is renewed by the locker's watchdog, batched with every other lease.

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use crate::Acquire;
use crate::{Error, FenceToken, Key, Lease, Locker, LostReason, Released, Result, Wait};

impl Locker {
    /// Starts the acquisition of every key of `keys` for `ttl` (exclusive grants, each the
    /// same grant as [`Locker::acquire`]); configure it, then `.await` it for [`Leases`].
    ///
    /// The keys are taken in sorted order, each waiting at most what is left of the wait;
    /// when one cannot be had, those already held are released (owner-checked) and its
    /// error is returned ([`Error::Busy`] names the key that stayed busy). An empty list is
    /// [`Error::InvalidInput`].
    pub fn acquire_all<I, S>(&self, keys: I, ttl: Duration) -> AcquireAll
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        AcquireAll {
            base: self.acquire("", ttl),
            keys: keys.into_iter().map(|k| k.as_ref().to_owned()).collect(),
        }
    }
}

/// A configured acquisition of several keys; `.await` it.
#[derive(Debug)]
#[must_use = "an acquisition does nothing until awaited"]
pub struct AcquireAll {
    base: Acquire,
    keys: Vec<String>,
}

impl AcquireAll {
    /// How long to wait, for all keys together (default: one attempt per key).
    pub fn wait(mut self, wait: Wait) -> Self {
        self.base = self.base.wait(wait);
        self
    }

    lease_options!();

    async fn run(self) -> Result<Leases> {
        let mut keys = self.keys.iter().map(Key::new).collect::<Result<Vec<_>>>()?;
        if keys.is_empty() {
            return Err(Error::invalid("no keys to acquire"));
        }
        keys.sort();
        keys.dedup();
        let until = match self.base.wait {
            Wait::No => None,
            Wait::For(d) => Some(Instant::now().checked_add(d)),
            Wait::Forever => Some(None),
        };
        let b = &self.base;
        let mut held: Vec<Lease> = Vec::with_capacity(keys.len());
        for key in &keys {
            let wait = match until {
                None => Wait::No,
                Some(None) => Wait::Forever,
                Some(Some(u)) => Wait::For(u.saturating_duration_since(Instant::now())),
            };
            let mut a = b.locker.acquire(key.as_str(), b.ttl).wait(wait);
            (a.auto_renew, a.drift, a.margin) = (b.auto_renew, b.drift, b.margin);
            match a.await {
                Ok(lease) => held.push(lease),
                Err(e) => {
                    release_all(held).await;
                    return Err(e);
                }
            }
        }
        Ok(Leases { leases: held })
    }
}

async fn release_all(held: Vec<Lease>) {
    for lease in held.into_iter().rev() {
        // Owner-checked; an answer that does not come leaves the key to its expiry.
        let _ = lease.release().await;
    }
}

impl IntoFuture for AcquireAll {
    type Output = Result<Leases>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<Leases>> + Send + 'static>>;
    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.run())
    }
}

/// The leases of several keys held together, in key order: lost when any is lost.
/// Dropping it drops each lease (background releases, as for a [`Lease`]).
#[derive(Debug)]
#[must_use = "dropping Leases releases them (in the background)"]
pub struct Leases {
    leases: Vec<Lease>,
}

impl Leases {
    /// The leases, in key order.
    pub fn iter(&self) -> impl Iterator<Item = &Lease> {
        self.leases.iter()
    }

    /// The lease of `key`, if it is one of these.
    pub fn get(&self, key: &str) -> Option<&Lease> {
        self.leases.iter().find(|l| l.key().as_str() == key)
    }

    /// Each key with the fence of its grant, in key order: a fenced resource checks the
    /// fence of the key that guards it.
    pub fn fences(&self) -> Vec<(Key, FenceToken)> {
        self.leases.iter().map(|l| (l.key().clone(), l.fence())).collect()
    }

    /// Whether any of the leases is known or presumed lost.
    pub fn is_lost(&self) -> bool {
        self.leases.iter().any(Lease::is_lost)
    }

    /// Whether new work may start: every lease admits it ([`Lease::admit`]).
    pub fn admit(&self) -> bool {
        self.leases.iter().all(Lease::admit)
    }

    /// Resolves, with the key and why, when the first of the leases is lost (as
    /// [`Lease::lost`]: not on a release).
    pub fn lost(&self) -> impl Future<Output = (Key, LostReason)> + Send + 'static {
        let mut each: Vec<_> =
            self.leases.iter().map(|l| (l.key().clone(), Box::pin(l.lost()))).collect();
        std::future::poll_fn(move |cx| {
            for (key, f) in each.iter_mut() {
                if let Poll::Ready(reason) = f.as_mut().poll(cx) {
                    return Poll::Ready((key.clone(), reason));
                }
            }
            Poll::Pending
        })
    }

    /// Runs `work`, cancelling it as soon as any lease is lost (see [`Lease::guard`]):
    /// `Err(Error::Lost)` names the key lost.
    pub async fn guard<F: Future>(&self, work: F) -> Result<F::Output> {
        let lost = self.lost();
        tokio::select! {
            biased;
            (key, reason) = lost => Err(Error::Lost { key, reason }),
            out = work => Ok(out),
        }
    }

    /// Releases every lease (owner-checked, in reverse key order). [`Released::Clean`] iff
    /// every one was still ours; an error of one release is returned after all were tried.
    pub async fn release(self) -> Result<Released> {
        let mut clean = true;
        let mut first_err = None;
        for lease in self.leases.into_iter().rev() {
            match lease.release().await {
                Ok(r) => clean &= r.is_clean(),
                Err(e) => first_err = first_err.or(Some(e)),
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(Released::from(clean)),
        }
    }

    /// The leases, in key order.
    pub fn into_leases(self) -> Vec<Lease> {
        self.leases
    }
}
