//! The state of one held grant, shared by its [`crate::Lease`], the watchdog that renews it
//! and the per-key queue of its [`crate::Locker`]: the local deadline, the latched loss, and
//! the session signals. A module of its own so that those three depend on it and not on
//! each other.

use std::future::Future;
use std::sync::{Arc, Weak};
use std::task::Waker;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::fence::Fencing;
use crate::{LockKind, LostReason, Store};

/// How the local deadline is derived from the time a request was sent.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    pub drift: f64,
    pub margin: Duration,
    /// The auto-renew interval, when auto-renew is on.
    pub renew_every: Option<Duration>,
    /// Bound on one store round trip.
    pub op_timeout: Duration,
}

/// The margin an acquire uses unless it sets one (`Acquire::margin`): ttl/10, at most 2 s.
/// The local deadline falls this long before the store's expiry, on a clock within the drift.
pub fn default_margin(ttl: Duration) -> Duration {
    (ttl / 10).min(Duration::from_secs(2))
}

/// How long after sending a request that the store granted or renewed the holder keeps its
/// authority: `ttl·(1 − drift) − margin`, zero if the margin leaves nothing (`docs/design.md`
/// §2, local deadline). `drift` is the fraction by which this host's clock may run slow
/// against the store's; the store's expiry is at least `ttl` after it received the request,
/// so on a clock within that drift the local deadline falls `margin` before it.
/// A drift outside `[0, 1]` (or NaN) gives zero rather than a panic; `Acquire` admits only
/// `[0, 0.5)`.
#[inline]
pub fn deadline_after(ttl: Duration, drift: f64, margin: Duration) -> Duration {
    // What `ttl.mul_f64(1.0 - drift)` computes, without its panics.
    Duration::try_from_secs_f64(ttl.as_secs_f64() * (1.0 - drift))
        .unwrap_or(Duration::ZERO)
        .saturating_sub(margin)
}

impl Timing {
    /// `sent + ttl·(1 − drift) − margin` ([`deadline_after`]), never before `sent`.
    pub fn deadline(&self, sent: Instant, ttl: Duration) -> Instant {
        sent + deadline_after(ttl, self.drift, self.margin)
    }

    /// When the renewal after a confirmation of a request sent at `sent` is overdue: due at
    /// `sent + renew_every`, overdue `margin` later. `None` without auto-renew.
    pub fn overdue(&self, sent: Instant) -> Option<Instant> {
        self.renew_every.map(|every| sent + every + self.margin)
    }
}

#[derive(Debug, Clone)]
struct State {
    /// `None` for session and transaction locks, which have no time limit of their own.
    deadline: Option<Instant>,
    /// Latched: once set it never clears.
    lost: Option<LostReason>,
    /// From then on a renewal is overdue (see [`Timing::overdue`]).
    overdue: Option<Instant>,
}

/// State shared by a [`crate::Lease`], its watchdog entry and its lost-signal futures.
#[derive(Debug)]
pub(crate) struct Shared {
    pub store: Arc<dyn Store>,
    /// Key, fence and owner of the grant.
    pub id: Fencing,
    pub ttl: Duration,
    pub kind: LockKind,
    pub timing: Timing,
    pub op_timeout: Duration,
    /// Where this lease's metrics go, and when it was granted (for the hold time).
    pub tel: crate::telemetry::Telemetry,
    granted: Instant,
    state: std::sync::Mutex<State>,
    /// Woken when `state.lost` is set. (A moved deadline wakes nobody: a `lost()` future that
    /// wakes at the old deadline re-reads the new one.)
    lost_notify: Notify,
    /// The store's session-end future, polled by whoever asks whether the lease is lost
    /// (see `set_session_end`): no task per lease.
    session_end: std::sync::OnceLock<SessionWatch>,
    /// `false` while the store cannot confirm the session (see `Grant::session_live`).
    session_live: std::sync::OnceLock<tokio::sync::watch::Receiver<bool>>,
}

impl Shared {
    pub fn new(
        store: Arc<dyn Store>,
        id: Fencing,
        ttl: Duration,
        kind: LockKind,
        timing: Timing,
        sent: Instant,
        tel: crate::telemetry::Telemetry,
    ) -> Self {
        let deadline = (kind == LockKind::Lease).then(|| timing.deadline(sent, ttl));
        let overdue = if kind == LockKind::Lease { timing.overdue(sent) } else { None };
        Shared {
            store,
            id,
            ttl,
            kind,
            timing,
            op_timeout: timing.op_timeout,
            tel,
            granted: Instant::now(),
            state: std::sync::Mutex::new(State { deadline, lost: None, overdue }),
            lost_notify: Notify::new(),
            session_end: std::sync::OnceLock::new(),
            session_live: std::sync::OnceLock::new(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The loss cause, latching `DeadlinePassed` if the deadline has gone by, or
    /// `SessionEnded` if the store's session has ended.
    pub fn lost_now(&self) -> Option<LostReason> {
        {
            let s = self.state();
            if s.lost.is_some() {
                return s.lost.clone();
            }
            if s.deadline.is_some_and(|d| Instant::now() >= d) {
                self.latch(s, LostReason::DeadlinePassed);
                return Some(LostReason::DeadlinePassed);
            }
        }
        let why = self.session_end.get()?.ended()?;
        self.mark_lost(LostReason::SessionEnded(why));
        self.state().lost.clone()
    }

    /// Latches a loss cause; the first cause wins.
    pub fn mark_lost(&self, reason: LostReason) {
        let s = self.state();
        if s.lost.is_none() {
            self.latch(s, reason);
        }
    }

    /// Sets the (first) loss cause, wakes the `lost()` futures and records it.
    fn latch(&self, mut s: std::sync::MutexGuard<'_, State>, reason: LostReason) {
        s.lost = Some(reason.clone());
        drop(s);
        self.lost_notify.notify_waiters();
        let key = self.id.key();
        self.tel.lost(key, &reason);
        let ended = match reason {
            LostReason::Released => "released",
            _ => "lost",
        };
        self.tel.time(
            crate::telemetry::HOLD,
            key,
            Some(("outcome", ended)),
            self.granted.elapsed(),
        );
    }

    /// A renewal sent at `sent` was confirmed: move the deadline, unless already lost.
    pub fn confirm(&self, sent: Instant) -> std::result::Result<(), LostReason> {
        let mut s = self.state();
        if let Some(l) = &s.lost {
            return Err(l.clone());
        }
        let Some(d) = s.deadline else { return Ok(()) };
        if Instant::now() >= d {
            // The confirmation came too late: anyone asking in between was told "lost",
            // and lost is never taken back.
            self.latch(s, LostReason::DeadlinePassed);
            return Err(LostReason::DeadlinePassed);
        }
        let nd = self.timing.deadline(sent, self.ttl);
        if nd > d {
            s.deadline = Some(nd);
            s.overdue = self.timing.overdue(sent);
        }
        Ok(())
    }

    /// Whether auto-renew's renewal is overdue: not confirmed `margin` after it was due.
    pub fn renewal_overdue(&self) -> bool {
        self.state().overdue.is_some_and(|o| Instant::now() >= o)
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.state().deadline
    }

    /// Resolves when the lease is lost (any cause but its holder's release); after a
    /// release, never (see [`crate::Lease::lost`]).
    pub fn lost(self: &Arc<Self>) -> impl Future<Output = LostReason> + Send + 'static {
        let ended = self.ended();
        async move {
            match ended.await {
                LostReason::Released => std::future::pending().await,
                lost => lost,
            }
        }
    }

    /// Resolves when the grant ends for any cause, its holder's release included.
    pub fn ended(self: &Arc<Self>) -> impl Future<Output = LostReason> + Send + 'static {
        let me = self.clone();
        async move {
            loop {
                // Register before checking, so a loss between the check and the wait wakes us.
                let woken = me.lost_notify.notified();
                tokio::pin!(woken);
                woken.as_mut().enable();
                if let Some(r) = me.lost_now() {
                    return r;
                }
                match me.deadline() {
                    Some(d) => {
                        tokio::select! {
                            _ = woken => {}
                            _ = tokio::time::sleep_until(d.into()) => {}
                        }
                    }
                    None => woken.await,
                }
            }
        }
    }

    /// Attaches the store's session-liveness signal.
    pub fn set_session_live(&self, live: tokio::sync::watch::Receiver<bool>) {
        let _ = self.session_live.set(live);
    }

    /// Whether the store currently confirms the session (always true without a signal).
    pub fn session_live(&self) -> bool {
        self.session_live.get().is_none_or(|l| *l.borrow())
    }

    /// Attaches the store's session-end future. It is polled, not spawned: by `lost_now`
    /// (so `is_lost`, `admit`, `release` see the end) and by every `lost()` future, with a
    /// waker that wakes all of them, so the end is latched as soon as anyone is listening.
    /// (A task per lease, which this replaces, cost a spawn and two polls per grant.)
    pub fn set_session_end(self: &Arc<Self>, end: crate::store::SessionEnd) {
        let waker = Waker::from(Arc::new(WakeLost(Arc::downgrade(self))));
        let _ = self.session_end.set(SessionWatch { end: std::sync::Mutex::new(Some(end)), waker });
    }
}

/// A session-end future and the waker it is polled with.
struct SessionWatch {
    end: std::sync::Mutex<Option<crate::store::SessionEnd>>,
    waker: Waker,
}

impl std::fmt::Debug for SessionWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionWatch")
    }
}

impl SessionWatch {
    /// Why the session ended, once it has (the future is polled, never after it resolved).
    fn ended(&self) -> Option<String> {
        let mut slot = self.end.lock().unwrap_or_else(|p| p.into_inner());
        let fut = slot.as_mut()?;
        match fut.as_mut().poll(&mut std::task::Context::from_waker(&self.waker)) {
            std::task::Poll::Ready(why) => {
                *slot = None;
                Some(why)
            }
            std::task::Poll::Pending => None,
        }
    }
}

/// Wakes every `lost()` future of a lease when its session-end future can make progress.
struct WakeLost(Weak<Shared>);

impl std::task::Wake for WakeLost {
    fn wake(self: Arc<Self>) {
        if let Some(s) = self.0.upgrade() {
            s.lost_notify.notify_waiters();
        }
    }
}

impl crate::fence::Authority for Shared {
    fn lost_now(&self) -> Option<LostReason> {
        Shared::lost_now(self)
    }
    fn deadline(&self) -> Option<Instant> {
        Shared::deadline(self)
    }
    fn window(&self) -> Option<Duration> {
        self.deadline().map(|_| deadline_after(self.ttl, self.timing.drift, self.timing.margin))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadline_after_is_the_ttl_less_drift_and_margin() {
        let s = Duration::from_secs;
        assert_eq!(deadline_after(s(30), 0.01, s(2)), Duration::from_millis(27_700));
        assert_eq!(deadline_after(s(4), 0.25, s(1)), s(2));
        assert_eq!(deadline_after(s(1), 0.0, s(2)), Duration::ZERO, "no time left");
        assert_eq!(deadline_after(s(1), f64::NAN, s(0)), Duration::ZERO, "no panic");
        assert_eq!(deadline_after(s(1), 2.0, s(0)), Duration::ZERO, "no panic");
    }
}
