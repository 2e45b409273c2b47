//! Background releases that must finish before the process exits.
//!
//! A `Lease` dropped without `release()` (and an acquire whose outcome was unknown) is
//! released by a spawned task. Returning from `#[tokio::main]` drops the leases and then the
//! runtime, which would cancel that task before it ran: the key would stay held for a whole
//! TTL. So every locker and lease shares one [`AtExit`]; the last of them to go waits, bounded,
//! for the releases still in flight (see `docs/design.md` §3, "release at exit").

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Count of background releases in flight, with a condition to wait on.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    count: Mutex<usize>,
    /// Set once `Locker::close` has waited: exit does not wait a second time.
    closed: std::sync::atomic::AtomicBool,
    done: Condvar,
    /// Woken whenever the count falls to zero (for the async `Locker::close`).
    zero: tokio::sync::Notify,
}

impl Pending {
    fn count(&self) -> std::sync::MutexGuard<'_, usize> {
        self.count.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts one release in flight until the ticket is dropped (when the task finishes, or
    /// is dropped unfinished by a runtime shutting down).
    pub fn ticket(self: &Arc<Self>) -> Ticket {
        *self.count() += 1;
        Ticket(self.clone())
    }

    /// Releases in flight now.
    pub fn in_flight(&self) -> usize {
        *self.count()
    }

    /// Waits until none is in flight, or `limit`. True if none is. Exit will not wait again.
    pub async fn settle(&self, limit: Duration) -> bool {
        self.closed.store(true, std::sync::atomic::Ordering::Relaxed);
        let until = tokio::time::Instant::now() + limit;
        loop {
            let woken = self.zero.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if self.in_flight() == 0 {
                return true;
            }
            if tokio::time::timeout_at(until, woken).await.is_err() {
                return self.in_flight() == 0;
            }
        }
    }

    /// Blocks this thread until none is in flight, or `limit`, without a tokio timer (the
    /// runtime may be shutting down). True if none is.
    fn settle_blocking(&self, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        let mut n = self.count();
        while *n > 0 {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            n = self.done.wait_timeout(n, left).unwrap_or_else(|p| p.into_inner()).0;
        }
        true
    }
}

/// One release in flight; see [`Pending::ticket`].
#[derive(Debug)]
pub(crate) struct Ticket(Arc<Pending>);

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut n = self.0.count();
        *n = n.saturating_sub(1);
        if *n == 0 {
            drop(n);
            self.0.done.notify_all();
            self.0.zero.notify_waiters();
        }
    }
}

/// Held by a locker, its clones and its leases; the last one dropped waits for the releases
/// still in flight, up to `limit`.
#[derive(Debug)]
pub(crate) struct AtExit {
    pub pending: Arc<Pending>,
    pub limit: Duration,
}

impl Drop for AtExit {
    fn drop(&mut self) {
        if self.pending.in_flight() == 0
            || self.pending.closed.load(std::sync::atomic::Ordering::Relaxed)
        {
            return;
        }
        use tokio::runtime::{Handle, RuntimeFlavor};
        let multi =
            Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread);
        if multi {
            // Other worker threads drive the release tasks while this one waits.
            let settled = tokio::task::block_in_place(|| self.pending.settle_blocking(self.limit));
            if !settled {
                tracing::warn!(
                    in_flight = self.pending.in_flight(),
                    "background releases did not finish within {:?}; the store's expiry or \
                     session end will free those keys",
                    self.limit
                );
            }
        } else {
            tracing::warn!(
                in_flight = self.pending.in_flight(),
                "the last locker handle was dropped with background releases in flight and no \
                 multi-threaded runtime to finish them: call Locker::close().await before the \
                 runtime ends, or the store's expiry or session end frees those keys"
            );
        }
    }
}
