//! A held grant: local deadline, lost signal, renew and release.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::fence::Fencing;
use crate::held::Shared;
use crate::watchdog::Watchdog;
use crate::{Error, FenceToken, Key, LockKind, LostReason, OwnerToken, Result};

/// A grant held by this process.
///
/// Dropping a `Lease` without [`Lease::release`] logs a warning and releases it in the
/// background if a tokio runtime is running (owner-checked, so it can never delete a
/// successor's grant); otherwise the store's TTL or session end frees the key. `Drop` never
/// blocks.
#[derive(Debug)]
pub struct Lease {
    shared: Arc<Shared>,
    watchdog: Option<(Arc<Watchdog>, u64)>,
    local: Option<(Arc<crate::local::Local>, Arc<crate::local::LocalKey>)>,
    done: bool,
}

impl Lease {
    pub(crate) fn new(
        shared: Arc<Shared>,
        watchdog: Option<(Arc<Watchdog>, u64)>,
        local: Option<(Arc<crate::local::Local>, Arc<crate::local::LocalKey>)>,
    ) -> Self {
        if let Some((_, lk)) = &local {
            lk.set_holder(&shared);
        }
        Lease { shared, watchdog, local, done: false }
    }

    /// The key held.
    pub fn key(&self) -> &Key {
        self.shared.id.key()
    }

    /// This acquisition's owner token.
    pub fn owner(&self) -> OwnerToken {
        self.shared.id.owner()
    }

    /// The fence issued with this grant. Present it to the protected resource.
    pub fn fence(&self) -> FenceToken {
        self.shared.id.token()
    }

    /// What a fenced resource needs: key, fence and owner.
    pub fn fencing(&self) -> Fencing {
        self.shared.id.clone()
    }

    /// The lease length requested.
    pub fn ttl(&self) -> Duration {
        self.shared.ttl
    }

    /// Lease, session or transaction lock.
    pub fn kind(&self) -> LockKind {
        self.shared.kind
    }

    /// The local deadline: `t_sent + ttl·(1 − drift) − margin` of the last confirmed
    /// acquire/renew. A liveness aid, never a proof of ownership. `None` for session locks.
    pub fn deadline(&self) -> Option<Instant> {
        self.shared.deadline()
    }

    /// Time left before the local deadline (zero once passed); `None` for session locks.
    pub fn time_left(&self) -> Option<Duration> {
        self.deadline().map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// Whether the lease is known or presumed lost.
    pub fn is_lost(&self) -> bool {
        self.shared.lost_now().is_some()
    }

    /// Whether new work may start: false once lost, already within `margin` of the local
    /// deadline (so work stops being admitted *before* authority ends), and, on session
    /// stores, while the store cannot confirm the session (a ZooKeeper or etcd client that
    /// lost its connection): the lock may be gone, but `lost()` waits for the verdict.
    pub fn admit(&self) -> bool {
        if self.shared.lost_now().is_some() || !self.shared.session_live() {
            return false;
        }
        match self.deadline() {
            Some(d) => Instant::now() + self.shared.timing.margin < d,
            None => true,
        }
    }

    /// Resolves when the lease is lost: local deadline passed without a confirmed renewal,
    /// renewal answered not-owner, session ended, or released. `'static`, so it can be spawned.
    pub fn lost(&self) -> impl Future<Output = LostReason> + Send + 'static {
        self.shared.lost()
    }

    /// Runs `work`, cancelling it (dropping the future) as soon as the lease is lost.
    ///
    /// Cancellation happens at the work's next await point; a fenced resource, not this
    /// call, is what stops an effect already in flight.
    pub async fn guard<F: Future>(&self, work: F) -> Result<F::Output> {
        let lost = self.lost();
        tokio::select! {
            biased;
            reason = lost => Err(Error::Lost { key: self.shared.id.key().to_string(), reason }),
            out = work => Ok(out),
        }
    }

    /// Owner-checked renewal. On success the local deadline moves to
    /// `t_sent(renew) + ttl·(1 − drift) − margin`. A renewal that times out extends nothing
    /// ([`Error::UnknownOutcome`]); not-owner marks the lease lost ([`Error::NotOwner`]).
    pub async fn renew(&self) -> Result<()> {
        let s = &self.shared;
        if let Some(reason) = s.lost_now() {
            return Err(Error::Lost { key: s.id.key().to_string(), reason });
        }
        let sent = Instant::now();
        let limit = match s.kind {
            LockKind::Lease => s.op_timeout.min(s.ttl / 3).max(Duration::from_millis(1)),
            _ => s.op_timeout,
        };
        match tokio::time::timeout(limit, s.store.renew(s.id.key(), &s.id.owner(), s.ttl)).await {
            Err(_) => Err(Error::UnknownOutcome(format!(
                "renewal of {:?} got no answer within {limit:?}; the local deadline was not extended",
                s.id.key().as_str()
            ))),
            Ok(Err(e)) => Err(e),
            Ok(Ok(false)) => {
                s.mark_lost(LostReason::NotOwner);
                Err(Error::NotOwner { key: s.id.key().to_string() })
            }
            Ok(Ok(true)) => s
                .confirm(sent)
                .map_err(|reason| Error::Lost { key: s.id.key().to_string(), reason }),
        }
    }

    /// Owner-checked release. `Ok(true)`: it was still ours. `Ok(false)`: the store says it
    /// was not (it expired or was taken over), so the critical section may have overlapped
    /// with another holder's; unless the loss was already known, this is also logged as a
    /// warning.
    pub async fn release(mut self) -> Result<bool> {
        self.finish();
        let s = self.shared.clone();
        let owner = s.id.owner();
        let known_lost = s.lost_now().is_some();
        let res = tokio::time::timeout(s.op_timeout, s.store.release(s.id.key(), &owner)).await;
        s.mark_lost(LostReason::Released);
        self.leave_local();
        match res {
            Err(_) => Err(Error::UnknownOutcome(format!(
                "release of {:?} got no answer within {:?}; the store's expiry or session end \
                 will free it",
                s.id.key().as_str(),
                s.op_timeout
            ))),
            Ok(Ok(false)) if !known_lost => {
                tracing::warn!(
                    key = s.id.key().as_str(),
                    fence = s.id.token().get(),
                    "released a lease that was no longer ours: the critical section may have \
                     overlapped with another holder"
                );
                Ok(false)
            }
            Ok(r) => r,
        }
    }

    /// Stops tracking the lease without releasing it: the grant stays in the store until its
    /// TTL (or session) ends. Used by the CLI's `acquire`, which outlives the process.
    pub fn detach(mut self) -> Fencing {
        self.finish();
        self.leave_local();
        self.fencing()
    }

    fn finish(&mut self) {
        self.done = true;
        if let Some((wd, id)) = self.watchdog.take() {
            wd.unregister(id);
        }
    }

    /// Lets the next local waiter of this key go to the store.
    fn leave_local(&mut self) {
        if let Some((local, lk)) = self.local.take() {
            lk.clear_holder(&self.shared);
            local.tidy(&lk);
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.finish();
        let s = self.shared.clone();
        let was_lost = s.lost_now();
        s.mark_lost(LostReason::Released);
        let local = self.local.take();
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                if was_lost.is_none() {
                    tracing::warn!(
                        key = s.id.key().as_str(),
                        "lease dropped without release(): releasing it in the background"
                    );
                }
                rt.spawn(async move {
                    let owner = s.id.owner();
                    let r = tokio::time::timeout(s.op_timeout, s.store.release(s.id.key(), &owner));
                    if let Ok(Err(e)) = r.await {
                        tracing::warn!(key = s.id.key().as_str(), error = %e, "background release failed");
                    }
                    if let Some((local, lk)) = local {
                        lk.clear_holder(&s);
                        local.tidy(&lk);
                    }
                });
            }
            Err(_) => {
                tracing::warn!(
                    key = s.id.key().as_str(),
                    "lease dropped without release() and outside a tokio runtime: it stays held \
                     until the store's expiry or session end"
                );
                if let Some((local, lk)) = local {
                    lk.clear_holder(&s);
                    local.tidy(&lk);
                }
            }
        }
    }
}
