//! A held grant: local deadline, lost signal, renew and release.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::background::{AtExit, Ticket};
use crate::client::lease_state::Shared;
use crate::client::queue::{Ident, Local, LocalKey};
use crate::client::renewal::Watchdog;
use crate::fence::Fencing;
use crate::{Error, FenceToken, Key, LockKind, LostReason, OwnerToken, Result};

type Registration = (Arc<Local>, Arc<LocalKey>);

/// What [`Lease::release`] found in the store. `#[must_use]`, so `lease.release().await?;`
/// warns: the answer is the only sign that the critical section may have overlapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "MayHaveOverlapped means the critical section may have overlapped another holder's"]
pub enum Released {
    /// The grant was still ours until the release removed it: no other holder had the key
    /// in between.
    Clean,
    /// The grant was no longer ours (it expired, was lost or taken over): the critical
    /// section may have overlapped another holder's.
    MayHaveOverlapped,
}

impl Released {
    /// Whether the grant was still ours until released.
    pub fn is_clean(self) -> bool {
        self == Released::Clean
    }

    /// Whether the critical section may have overlapped another holder's.
    pub fn may_have_overlapped(self) -> bool {
        self == Released::MayHaveOverlapped
    }
}

impl From<bool> for Released {
    fn from(still_ours: bool) -> Self {
        if still_ours { Released::Clean } else { Released::MayHaveOverlapped }
    }
}

/// A grant held by this process.
///
/// Dropping a `Lease` without [`Lease::release`] logs a warning and releases it in the
/// background (owner-checked, so it can never delete a successor's grant). The release is
/// not lost at process exit: the last handle of the [`crate::Locker`] and its leases to be
/// dropped waits for releases still in flight (at most the op timeout), so returning from
/// `#[tokio::main]` with `?` while holding a lease frees the key at once. That wait needs
/// a multi-threaded runtime; on a current-thread runtime call [`crate::Locker::close`]
/// before the runtime ends. Without any runtime, the store's TTL or session end frees the
/// key. An acquire of the same key by the same locker right after a drop waits for that
/// release (up to the op timeout) instead of meeting its own grant.
#[derive(Debug)]
#[must_use = "dropping a Lease releases it (in the background)"]
pub struct Lease {
    shared: Arc<Shared>,
    watchdog: Option<(Arc<Watchdog>, u64)>,
    local: Option<Registration>,
    done: bool,
    exit: Arc<AtExit>,
}

impl Lease {
    pub(crate) fn new(
        shared: Arc<Shared>,
        watchdog: Option<(Arc<Watchdog>, u64)>,
        local: Registration,
        exit: Arc<AtExit>,
        who: Ident,
    ) -> Self {
        local.1.set_holder(&shared, who);
        Lease { shared, watchdog, local: Some(local), done: false, exit }
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

    /// What a fenced resource needs: key, fence and owner, and this lease's local deadline,
    /// which the SQL fence resources bound their transactions by (see [`crate::fence`]).
    pub fn fencing(&self) -> Fencing {
        self.shared.id.clone().bound_to(&self.shared)
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

    /// Whether new work may start. False once lost; within `margin` of the local deadline
    /// (so work stops being admitted *before* authority ends); with auto-renew, as soon as a
    /// renewal is overdue (renewals are due ttl/3 after the last confirmed one: not
    /// confirmed `margin` after that, the store may be gone, and `admit` stays false until
    /// one is); and, on session stores, while the store cannot confirm the session (a
    /// ZooKeeper or etcd client that lost its connection): the lock may be gone, but
    /// `lost()` waits for the verdict.
    pub fn admit(&self) -> bool {
        let s = &self.shared;
        if s.lost_now().is_some() || !s.session_live() || s.renewal_overdue() {
            return false;
        }
        match self.deadline() {
            Some(d) => Instant::now() + self.shared.timing.margin < d,
            None => true,
        }
    }

    /// Resolves when the lease is lost: local deadline passed without a confirmed renewal,
    /// renewal answered not-owner, or session ended. `'static`, so it can be spawned.
    ///
    /// A normal end is not a loss: after [`Lease::release`] (or a drop, which releases in
    /// the background) this future never resolves. Select it against the work (as
    /// [`Lease::guard`] does); a task that only watches, and must finish when the lease
    /// does, awaits [`Lease::ended`] instead.
    pub fn lost(&self) -> impl Future<Output = LostReason> + Send + 'static {
        self.shared.lost()
    }

    /// Resolves when the lease ends for any cause: a loss, as [`Lease::lost`] reports it, or
    /// its holder's release ([`LostReason::Released`]). For a watcher task that must not
    /// outlive the lease: `tokio::spawn(async move { if lease_ended.await !=
    /// LostReason::Released { alert() } })`.
    pub fn ended(&self) -> impl Future<Output = LostReason> + Send + 'static {
        self.shared.ended()
    }

    /// Runs `work`, cancelling it (dropping the future) as soon as the lease is lost:
    /// `Ok(output)` if the work finished first, `Err(Error::Lost { reason, .. })` if the
    /// loss came first (also at once when it is already lost).
    ///
    /// Cancellation happens at the work's next await point; a fenced resource, not this
    /// call, is what stops an effect already in flight.
    pub async fn guard<F: Future>(&self, work: F) -> Result<F::Output> {
        let lost = self.lost();
        tokio::select! {
            biased;
            reason = lost => Err(Error::Lost { key: self.shared.id.key().clone(), reason }),
            out = work => Ok(out),
        }
    }

    /// Owner-checked renewal. On success the local deadline moves to
    /// `t_sent(renew) + ttl·(1 − drift) − margin`.
    ///
    /// Failures: a lease already lost (its local deadline passed, or any other cause) is
    /// [`Error::Lost`] at once, without asking the store (lost is never taken back); a
    /// renewal that times out extends nothing ([`Error::UnknownOutcome`]); not-owner marks
    /// the lease lost ([`Error::NotOwner`]); an unreachable store is [`Error::Unavailable`].
    pub async fn renew(&self) -> Result<()> {
        let s = &self.shared;
        if let Some(reason) = s.lost_now() {
            return Err(Error::Lost { key: s.id.key().clone(), reason });
        }
        let sent = Instant::now();
        let limit = match s.kind {
            LockKind::Lease => s.op_timeout.min(s.ttl / 3).max(Duration::from_millis(1)),
            _ => s.op_timeout,
        };
        let span = tracing::debug_span!("leasehold.renew", key = s.id.key().as_str());
        let owner = s.id.owner();
        let call = s.store.renew(s.id.key(), &owner, s.ttl);
        let answer = tokio::time::timeout(limit, tracing::Instrument::instrument(call, span)).await;
        let outcome = match &answer {
            Err(_) => "timeout",
            Ok(Err(_)) => "error",
            Ok(Ok(false)) => "not_owner",
            Ok(Ok(true)) => "ok",
        };
        s.tel.renewed(s.id.key(), outcome, sent.elapsed());
        match answer {
            Err(_) => Err(Error::UnknownOutcome(format!(
                "renewal of {:?} got no answer within {limit:?}; the local deadline was not extended",
                s.id.key().as_str()
            ))),
            Ok(Err(e)) => Err(e),
            Ok(Ok(false)) => {
                s.mark_lost(LostReason::NotOwner);
                Err(Error::NotOwner { key: s.id.key().clone() })
            }
            Ok(Ok(true)) => {
                s.confirm(sent).map_err(|reason| Error::Lost { key: s.id.key().clone(), reason })
            }
        }
    }

    /// Owner-checked release. [`Released::Clean`]: it was still ours.
    /// [`Released::MayHaveOverlapped`]: it was not (it expired or was taken over), so the
    /// critical section may have overlapped with another holder's; unless the loss was
    /// already known, this is also logged as a warning.
    ///
    /// A lease already known lost answers `MayHaveOverlapped` at once, without waiting on a
    /// store that may be gone: the owner-checked release is sent in the background (so a
    /// store that comes back frees the key; [`crate::Locker::close`] waits for it). Otherwise
    /// a release whose answer does not come within the op timeout is
    /// [`Error::UnknownOutcome`] (the store's expiry or session end frees the key), or
    /// `MayHaveOverlapped` if the lease was lost while it waited.
    pub async fn release(mut self) -> Result<Released> {
        // No renewal starts from here on; but `done` is set only once the answer is in: a
        // release whose future is dropped mid-request falls back to Drop's background release.
        self.stop_renewing();
        let s = self.shared.clone();
        if s.lost_now().is_some() {
            self.done = true;
            let local = self.local.take();
            spawn_release(s, local, self.exit.pending.ticket());
            return Ok(Released::MayHaveOverlapped);
        }
        let owner = s.id.owner();
        let span = tracing::debug_span!("leasehold.release", key = s.id.key().as_str());
        let call = tracing::Instrument::instrument(s.store.release(s.id.key(), &owner), span);
        let res = tokio::time::timeout(s.op_timeout, call).await;
        self.done = true;
        // A release that got no answer (a timeout, or the store unreachable) from a lease
        // that was lost meanwhile (its session ended or its deadline passed while the
        // request waited, as for a holder thawed after a freeze) is not an unknown: the grant
        // is gone or going by the store's own expiry, and the section may have overlapped,
        // which is what the answer says.
        let unanswered = match &res {
            Err(_) => true,
            Ok(Err(e)) => e.is_unavailable() || matches!(e, Error::UnknownOutcome(_)),
            Ok(Ok(_)) => false,
        };
        let lost_meanwhile = unanswered && s.lost_now().is_some();
        if res.is_err() && !lost_meanwhile {
            s.tel.count(crate::telemetry::UNKNOWN, s.id.key(), Some(("op", "release")));
        }
        s.mark_lost(LostReason::Released);
        self.leave_local();
        match res {
            _ if lost_meanwhile => Ok(Released::MayHaveOverlapped),
            Err(_) => Err(Error::UnknownOutcome(format!(
                "release of {:?} got no answer within {:?}; the store's expiry or session end \
                 will free it",
                s.id.key().as_str(),
                s.op_timeout
            ))),
            Ok(Ok(false)) => {
                tracing::warn!(
                    key = s.id.key().as_str(),
                    fence = s.id.token().get(),
                    "released a lease that was no longer ours: the critical section may have \
                     overlapped with another holder"
                );
                Ok(Released::MayHaveOverlapped)
            }
            Ok(r) => r.map(Released::from),
        }
    }

    /// Stops tracking the lease without releasing it: the grant stays in the store until its
    /// TTL (or session) ends. Used by the CLI's `acquire`, which outlives the process.
    pub fn detach(mut self) -> Fencing {
        self.finish();
        self.leave_local();
        let f = self.shared.id.clone();
        match self.deadline() {
            Some(d) => f.with_deadline(d),
            None => f,
        }
    }

    fn finish(&mut self) {
        self.done = true;
        self.stop_renewing();
    }

    fn stop_renewing(&mut self) {
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
        if s.lost_now().is_none() {
            tracing::warn!(
                key = s.id.key().as_str(),
                "lease dropped without release(): releasing it in the background"
            );
        }
        let local = self.local.take();
        spawn_release(s, local, self.exit.pending.ticket());
    }
}

/// The owner-checked release of a lease this process let go of (dropped, or released after
/// it was known lost), in a task counted by `ticket` so that exit waits for it. The key's
/// local entry stays held until the answer, so this locker's next acquire of it waits for
/// the release instead of meeting its own grant.
fn spawn_release(s: Arc<Shared>, local: Option<Registration>, ticket: Ticket) {
    s.mark_lost(LostReason::Released);
    let leave = move |s: &Shared, local: Option<Registration>| {
        if let Some((local, lk)) = local {
            lk.clear_holder(s);
            local.tidy(&lk);
        }
    };
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        tracing::warn!(
            key = s.id.key().as_str(),
            "lease let go outside a tokio runtime: it stays held until the store's expiry or \
             session end"
        );
        leave(&s, local);
        return;
    };
    rt.spawn(async move {
        let owner = s.id.owner();
        let r = tokio::time::timeout(s.op_timeout, s.store.release(s.id.key(), &owner)).await;
        match r {
            Ok(Err(e)) => {
                tracing::warn!(key = s.id.key().as_str(), error = %e, "background release failed")
            }
            Err(_) => tracing::warn!(
                key = s.id.key().as_str(),
                "background release got no answer; the store's expiry or session end will free it"
            ),
            Ok(Ok(_)) => {}
        }
        leave(&s, local);
        drop(ticket);
    });
}
