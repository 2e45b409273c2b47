//! The entry point: a store plus the protocol around it.

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::held::{Shared, Timing};
use crate::store::{AcquireRequest, Attempt};
use crate::watchdog::Watchdog;
use crate::{Error, Guarantees, Holder, Key, Lease, LockKind, OwnerToken, Result, Store};

/// Longest accepted TTL (one year): longer ones are almost certainly a unit mistake.
pub const MAX_TTL: Duration = Duration::from_secs(365 * 24 * 3600);

/// Default bound on one store round trip.
pub const DEFAULT_OP_TIMEOUT: Duration = Duration::from_secs(5);

/// How long an acquire may wait for a busy key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// One attempt; busy is answered at once.
    No,
    /// Wait up to this long.
    For(Duration),
    /// Wait until granted.
    Forever,
}

/// Acquires, renews and releases leases on one store. Cheap to clone; clones share the
/// auto-renew task.
#[derive(Debug, Clone)]
pub struct Locker {
    store: Arc<dyn Store>,
    watchdog: Arc<Watchdog>,
    local: Arc<crate::local::Local>,
    op_timeout: Duration,
}

impl Locker {
    /// Wraps a store.
    pub fn new(store: impl Store) -> Self {
        Self::from_arc(Arc::new(store))
    }

    /// Wraps a shared store.
    pub fn from_arc(store: Arc<dyn Store>) -> Self {
        Locker {
            watchdog: Watchdog::new(store.clone()),
            store,
            local: Arc::default(),
            op_timeout: DEFAULT_OP_TIMEOUT,
        }
    }

    /// Opens the store named by `url`: `sqlite://PATH` or `file://DIR` (with their cargo
    /// features). Unknown schemes are [`Error::InvalidInput`]; an unreachable store is
    /// [`Error::Unavailable`].
    pub async fn connect(url: &str) -> Result<Self> {
        Ok(Self::from_arc(crate::backends::open(url).await?))
    }

    /// Sets the bound on one store round trip (default 5 s). An acquire that exceeds it has
    /// an unknown outcome and is cleaned up; a renewal that exceeds it extends nothing.
    pub fn with_op_timeout(mut self, t: Duration) -> Self {
        self.op_timeout = t.max(Duration::from_millis(1));
        self
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// What this store promises.
    pub fn guarantees(&self) -> Guarantees {
        self.store.guarantees()
    }

    /// Starts an acquisition of `key` for `ttl`; configure it, then `.await` it.
    ///
    /// Resolves to the [`Lease`], or [`Error::Busy`] when the key stayed held through the
    /// wait, or [`Error::UnknownOutcome`] when the store's answer never came (an
    /// owner-conditional cleanup is then scheduled, so no orphan blocks others for a TTL).
    /// Dropping the future mid-request schedules the same cleanup.
    pub fn acquire(&self, key: &str, ttl: Duration) -> Acquire<'_> {
        Acquire {
            locker: self,
            key: key.to_owned(),
            ttl,
            wait: Wait::No,
            auto_renew: false,
            drift: 0.01,
            margin: None,
        }
    }

    /// Renews a grant identified by key and owner token (for a holder in another process,
    /// such as the CLI). `Ok(false)`: not ours any more.
    pub async fn renew_by_owner(
        &self,
        key: &str,
        owner: &OwnerToken,
        ttl: Duration,
    ) -> Result<bool> {
        let key = Key::new(key)?;
        check_ttl(ttl)?;
        self.bounded("renewal", self.store.renew(&key, owner, ttl)).await
    }

    /// Releases a grant identified by key and owner token. `Ok(false)`: not ours any more; the
    /// current holder, if any, is untouched.
    pub async fn release_by_owner(&self, key: &str, owner: &OwnerToken) -> Result<bool> {
        let key = Key::new(key)?;
        self.bounded("release", self.store.release(&key, owner)).await
    }

    /// Current holders of `key`, or of every key.
    pub async fn holders(&self, key: Option<&str>) -> Result<Vec<Holder>> {
        let key = key.map(Key::new).transpose()?;
        self.bounded("status", self.store.holders(key.as_ref())).await
    }

    async fn bounded<T>(&self, what: &str, f: impl Future<Output = Result<T>>) -> Result<T> {
        tokio::time::timeout(self.op_timeout, f).await.map_err(|_| {
            Error::UnknownOutcome(format!("{what} got no answer within {:?}", self.op_timeout))
        })?
    }
}

fn check_ttl(ttl: Duration) -> Result<()> {
    if ttl < Duration::from_millis(1) {
        return Err(Error::invalid(format!("ttl must be at least 1ms, got {ttl:?}")));
    }
    if ttl > MAX_TTL {
        return Err(Error::invalid(format!("ttl {ttl:?} is longer than one year")));
    }
    Ok(())
}

/// A configured acquisition; `.await` it.
#[derive(Debug)]
#[must_use = "an acquisition does nothing until awaited"]
pub struct Acquire<'a> {
    locker: &'a Locker,
    key: String,
    ttl: Duration,
    wait: Wait,
    auto_renew: bool,
    drift: f64,
    margin: Option<Duration>,
}

impl<'a> Acquire<'a> {
    /// How long to wait for a busy key (default: one attempt). Waiting uses the store's
    /// notification, woken no later than the holder's expiry.
    pub fn wait(mut self, wait: Wait) -> Self {
        self.wait = wait;
        self
    }

    /// Renew in the background every ttl/3 (batched with the locker's other leases). The lease
    /// still goes lost at its local deadline if renewals are not confirmed.
    pub fn auto_renew(mut self, on: bool) -> Self {
        self.auto_renew = on;
        self
    }

    /// Assumed clock drift between this host and the store, as a fraction (default 0.01).
    pub fn drift(mut self, drift: f64) -> Self {
        self.drift = drift;
        self
    }

    /// Safety margin subtracted from the local deadline, and the window before it in which
    /// [`Lease::admit`] turns false. Default: ttl/10, at most 2 s.
    pub fn margin(mut self, margin: Duration) -> Self {
        self.margin = Some(margin);
        self
    }

    async fn run(self) -> Result<Lease> {
        let key = Key::new(self.key)?;
        check_ttl(self.ttl)?;
        if !(0.0..0.5).contains(&self.drift) {
            return Err(Error::invalid(format!("drift {} is outside [0, 0.5)", self.drift)));
        }
        let margin = self.margin.unwrap_or_else(|| (self.ttl / 10).min(Duration::from_secs(2)));
        if margin >= self.ttl.mul_f64(1.0 - self.drift) {
            return Err(Error::invalid(format!(
                "margin {margin:?} leaves no time inside a ttl of {:?}",
                self.ttl
            )));
        }
        let locker = self.locker;
        let store = locker.store.clone();
        let kind = store.guarantees().kind;
        let owner = OwnerToken::generate()?;
        let until = match self.wait {
            Wait::No => None,
            Wait::For(d) => Some(Instant::now().checked_add(d).unwrap_or_else(far_future)),
            Wait::Forever => Some(far_future()),
        };
        let req = AcquireRequest {
            key: &key,
            owner: &owner,
            ttl: self.ttl,
            op_timeout: locker.op_timeout,
        };

        // Waiters of this locker queue per key; only the head asks the store, and not while
        // another lease of this locker holds the key.
        let slot = match until {
            None => locker.local.peek(&key),
            Some(until) => locker
                .local
                .wait_turn(&key, until)
                .await
                .ok_or_else(|| Error::Busy { key: key.to_string() })?,
        };

        // From here until an answer is in hand, the store may have granted without us knowing:
        // a drop (cancellation) or an error leaves the guard armed and it cleans up.
        let mut cleanup = Cleanup { store: Some(store.clone()), key: key.clone(), owner };
        let attempt = store.acquire(&req, until).await;
        let grant = match attempt {
            Ok(Attempt::Granted(g)) => g,
            Ok(Attempt::Busy { .. }) => {
                cleanup.disarm();
                return Err(Error::Busy { key: key.to_string() });
            }
            Err(e) => {
                if matches!(e, Error::InvalidInput(_)) {
                    cleanup.disarm();
                }
                return Err(e);
            }
        };
        cleanup.disarm();
        let timing = Timing { drift: self.drift, margin };
        let shared = Arc::new(Shared::new(
            store,
            crate::fence::Fencing::new(key, grant.fence, owner),
            self.ttl,
            kind,
            timing,
            locker.op_timeout,
            grant.sent_at,
        ));
        if let Some(end) = grant.session_end {
            shared.watch_session(end);
        }
        if let Some(live) = grant.session_live {
            shared.set_session_live(live);
        }
        let watchdog = (self.auto_renew && kind == LockKind::Lease).then(|| {
            let id = locker.watchdog.register(&shared, grant.sent_at);
            (locker.watchdog.clone(), id)
        });
        let lease = Lease::new(shared, watchdog, slot.registration());
        // Only now, with this lease registered as the local holder, may the next waiter look.
        drop(slot);
        Ok(lease)
    }
}

fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600)
}

impl<'a> IntoFuture for Acquire<'a> {
    type Output = Result<Lease>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<Lease>> + Send + 'a>>;
    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.run())
    }
}

/// Owner-conditional cleanup of an acquire whose outcome is unknown.
struct Cleanup {
    store: Option<Arc<dyn Store>>,
    key: Key,
    owner: OwnerToken,
}

impl Cleanup {
    fn disarm(&mut self) {
        self.store = None;
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let Some(store) = self.store.take() else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (key, owner) = (self.key.clone(), self.owner);
        rt.spawn(async move {
            let mut pause = Duration::from_millis(50);
            for _ in 0..5 {
                let r = tokio::time::timeout(DEFAULT_OP_TIMEOUT, store.release(&key, &owner)).await;
                match r {
                    Ok(Ok(true)) => {
                        tracing::info!(
                            key = key.as_str(),
                            "removed the grant of an acquire whose outcome was unknown"
                        );
                        return;
                    }
                    Ok(Ok(false)) => return,
                    _ => {
                        tokio::time::sleep(pause).await;
                        pause *= 2;
                    }
                }
            }
            tracing::warn!(
                key = key.as_str(),
                "could not clean up an acquire with unknown outcome; the store's expiry will"
            );
        });
    }
}
