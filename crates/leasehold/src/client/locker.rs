//! The entry point: a store plus the protocol around it.

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::HolderInfo;
use crate::client::background::AtExit;
use crate::client::lease_state::{Shared, Timing, default_margin};
use crate::client::queue::{Ident, Refused, local_key};
use crate::client::renewal::Watchdog;
use crate::limits::{DEFAULT_CONNECT_TIMEOUT, DEFAULT_OP_TIMEOUT, Limits};
use crate::store::{AcquireRequest, Attempt};
use crate::telemetry::{ORPHAN_CLEANUPS, Telemetry};
use crate::{Error, Guarantees, Holder, Key, Lease, LockKind, OwnerToken, Result, Store, StoreUrl};

/// Longest accepted TTL (one year): longer ones are almost certainly a unit mistake.
pub const MAX_TTL: Duration = Duration::from_secs(365 * 24 * 3600);

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
/// store connection, the auto-renew task and the per-key queue: tasks of one process that
/// contend for a key through clones of one locker take turns in FIFO order, and only the
/// head of the queue asks the store.
///
/// An acquire of a key this locker holds is answered at once with
/// [`Error::HeldByThisLocker`] when it is a one-shot acquire, or when the task (outside a
/// task: the thread) that acquired the held lease asks again; other tasks wait their turn.
/// The rule follows the acquiring task, not the lease: a lease acquired in a spawned task,
/// or moved to another, and then waited for by the task holding it still waits (until its
/// wait runs out); concurrent futures of one task (`join!`) asking for one key get
/// `HeldByThisLocker` instead of taking turns.
#[derive(Debug, Clone)]
pub struct Locker {
    store: Arc<dyn Store>,
    watchdog: Arc<Watchdog>,
    local: Arc<crate::client::queue::Local>,
    op_timeout: Duration,
    exit: Arc<AtExit>,
    tel: Telemetry,
    info: Option<Arc<HolderInfo>>,
}

impl Locker {
    /// Wraps a store.
    pub fn new(store: impl Store) -> Self {
        Self::from_arc(Arc::new(store))
    }

    /// Wraps a shared store.
    pub fn from_arc(store: Arc<dyn Store>) -> Self {
        let tel = Telemetry { backend: store.guarantees().backend, keys: false };
        Locker {
            tel,
            watchdog: Watchdog::new(store.clone()),
            store,
            local: Arc::default(),
            op_timeout: DEFAULT_OP_TIMEOUT,
            exit: Arc::new(AtExit { pending: Arc::default(), limit: DEFAULT_OP_TIMEOUT }),
            info: Some(Arc::new(HolderInfo::this_process())),
        }
    }

    /// Opens the store named by `url`, each with its cargo feature (see the crate's feature
    /// table). Each store's module ([`crate::backends`]`::<store>`) documents its URL's
    /// options; the repository README's "Stores and their guarantees" table has every form
    /// with its guarantees, and `leasehold doctor URL` prints what a deployment guarantees:
    ///
    /// | URL | store |
    /// |---|---|
    /// | `sqlite://PATH` | the embedded SQLite lease table (default feature) |
    /// | `file://DIR` | `flock(2)` session locks, one file per key (Linux) |
    /// | `redis://[USER:PASS@]HOST:PORT[/DB]`, `rediss://…` | one Redis (or Valkey) primary |
    /// | `redis-sentinel://S1:P1[,S2:P2…]/SERVICE` | the primary a Redis Sentinel set names |
    /// | `redis-cluster://HOST:PORT[,HOST:PORT…]` | Redis Cluster (seed nodes) |
    /// | `redlock://HOST:PORT,HOST:PORT,…` | Redlock over independent Redis primaries |
    /// | `postgres://USER@HOST:PORT/DB` | lease table; `?mode=session` advisory session locks |
    /// | `mysql://USER@HOST:PORT/DB` | lease table; `?mode=session` `GET_LOCK` session locks |
    /// | `etcd://HOST:PORT[,HOST:PORT…]` | etcd v3 leases and revisions |
    /// | `zk://HOST:PORT[,HOST:PORT…][/CHROOT]` | ZooKeeper ephemeral sequential nodes |
    ///
    /// Durations in options take `500ms`, `2s`, `1m30s`. Failures: an unknown scheme, a
    /// scheme whose feature is compiled out, or an unknown option is
    /// [`Error::InvalidInput`] (before any connection); a store that refuses the
    /// credentials, the TLS certificate, the database (or DB index) named, or a path it
    /// cannot use is [`Error::Config`]; a store that cannot be reached or does not answer
    /// within [`DEFAULT_CONNECT_TIMEOUT`] is [`Error::Unavailable`]. Passwords never appear
    /// in errors (see [`crate::redact`]).
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_within(url, DEFAULT_CONNECT_TIMEOUT).await
    }

    /// [`Locker::connect`], every step of connecting (name lookup, TCP, TLS, authentication,
    /// creating a lease table) bounded by `limit`: no answer within it is
    /// [`Error::Unavailable`], with nothing held. The store keeps `limit` as the bound on
    /// each connection it opens later (a reconnect); where a URL takes `connect_timeout=`
    /// (PostgreSQL, MySQL), that option sets it instead.
    pub async fn connect_within(url: &str, limit: Duration) -> Result<Self> {
        Self::open(&StoreUrl::parse(url)?, limit).await
    }

    /// [`Locker::connect_within`] for a URL already parsed (and its options checked).
    pub async fn open(url: &StoreUrl, limit: Duration) -> Result<Self> {
        let limits = Limits { connect: limit, op: DEFAULT_OP_TIMEOUT };
        Ok(Self::from_arc(url.open(limits).await?))
    }

    /// Sets who this locker says it is, kept beside each grant where the store can (see
    /// [`HolderInfo`]); `None` records nothing. Default: [`HolderInfo::this_process`].
    pub fn with_holder_info(mut self, info: Option<HolderInfo>) -> Self {
        self.info = info.map(Arc::new);
        self
    }

    /// Sets the bound on one store round trip (default 5 s). An acquire that exceeds it has
    /// an unknown outcome and is cleaned up; a renewal that exceeds it extends nothing. Also
    /// bounds how long the last handle waits, at exit, for background releases, and (passed
    /// to the store, shared by every locker on it) the work a request leaves in the server:
    /// PostgreSQL's `statement_timeout` and `lock_timeout`, MySQL's `lock_wait_timeout`,
    /// `innodb_lock_wait_timeout` and MariaDB's `max_statement_time`, so a request behind
    /// another session's table or row lock answers within it and leaves nothing waiting.
    pub fn with_op_timeout(mut self, t: Duration) -> Self {
        self.op_timeout = t.max(Duration::from_millis(1));
        self.store.set_op_timeout(self.op_timeout);
        match Arc::get_mut(&mut self.exit) {
            Some(exit) => exit.limit = self.op_timeout,
            None => {
                let pending = self.exit.pending.clone();
                self.exit = Arc::new(AtExit { pending, limit: self.op_timeout });
            }
        }
        self
    }

    /// Adds the lock key as a `key` label to this locker's metrics (default off: keys can be
    /// unbounded, and each distinct label set is a time series in the recorder).
    ///
    /// Metrics go through the [`metrics`](https://docs.rs/metrics) facade, so nothing is
    /// recorded until the application installs a recorder; names are in
    /// [`crate::telemetry`]. Every metric has the label `backend`; acquire waits and renewals
    /// also `outcome`, losses `reason`, unknown outcomes `op`.
    pub fn with_key_label(mut self, on: bool) -> Self {
        self.tel.keys = on;
        self
    }

    /// Waits (up to the op timeout) for the background releases still in flight: those of
    /// leases dropped without [`Lease::release`] or released after they were lost, and the
    /// cleanups of acquires whose outcome was unknown. Call it before a current-thread
    /// runtime ends; on a multi-threaded runtime the last handle dropped does the same.
    /// Leases still held are not touched. [`Error::UnknownOutcome`] if some did not finish:
    /// the store's expiry or session end frees those keys.
    pub async fn close(&self) -> Result<()> {
        if self.exit.pending.settle(self.op_timeout).await {
            return Ok(());
        }
        Err(Error::UnknownOutcome(format!(
            "{} background release(s) did not finish within {:?}",
            self.exit.pending.in_flight(),
            self.op_timeout
        )))
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// What this store promises.
    pub fn guarantees(&self) -> Guarantees {
        self.store.guarantees()
    }

    /// Starts an acquisition of `key` for `ttl`; configure it, then `.await` it. The
    /// acquisition owns a clone of the locker, so it can be spawned.
    ///
    /// Resolves to the [`Lease`] (renewed in the background unless
    /// [`Acquire::auto_renew`]`(false)`), or:
    /// - [`Error::Busy`] when another owner held the key through the wait;
    /// - [`Error::HeldByThisLocker`] at once when this locker holds it and waiting could only
    ///   be waiting on itself (see [`Locker`]);
    /// - [`Error::UnknownOutcome`] when the store's answer never came (an owner-conditional
    ///   cleanup is then scheduled, so no orphan blocks others for a TTL); dropping the
    ///   future mid-request schedules the same cleanup;
    /// - [`Error::Unavailable`] when the store cannot be reached;
    /// - [`Error::InvalidInput`] for a bad key, ttl, drift or margin.
    pub fn acquire(&self, key: &str, ttl: Duration) -> Acquire {
        Acquire {
            locker: self.clone(),
            key: key.to_owned(),
            ttl,
            wait: Wait::No,
            auto_renew: true,
            drift: 0.01,
            margin: None,
            mode: crate::Mode::Exclusive,
            slot: None,
        }
    }

    /// Renews a grant identified by key and owner token (for a holder in another process,
    /// such as the CLI). `Ok(false)`: not ours any more.
    #[must_use = "Ok(false) means the grant is no longer ours"]
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
    #[must_use = "Ok(false) means the grant was no longer ours"]
    pub async fn release_by_owner(&self, key: &str, owner: &OwnerToken) -> Result<bool> {
        let key = Key::new(key)?;
        self.bounded("release", self.store.release(&key, owner)).await
    }

    /// Current holders of `key`, or of every key.
    pub async fn holders(&self, key: Option<&str>) -> Result<Vec<Holder>> {
        let key = key.map(Key::new).transpose()?;
        self.bounded("status", self.store.holders(key.as_ref())).await
    }

    /// [`Store::forget`], bounded by the op timeout (the sizing probe's clean-up).
    pub(crate) async fn forget(&self, key: &Key) -> Result<()> {
        self.bounded("clean-up", self.store.forget(key)).await
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
pub struct Acquire {
    pub(crate) locker: Locker,
    pub(crate) key: String,
    pub(crate) ttl: Duration,
    pub(crate) wait: Wait,
    pub(crate) auto_renew: bool,
    pub(crate) drift: f64,
    pub(crate) margin: Option<Duration>,
    /// Shared for a reader (`rwlock.rs`).
    pub(crate) mode: crate::Mode,
    /// For a semaphore's slot: the semaphore's key, the slot, the permits (`semaphore.rs`).
    pub(crate) slot: Option<(Key, u32, u32)>,
}

impl Acquire {
    /// How long to wait for a busy key (default: one attempt). Waiting uses the store's
    /// notification, woken no later than the holder's expiry.
    pub fn wait(mut self, wait: Wait) -> Self {
        self.wait = wait;
        self
    }

    /// Renew in the background every ttl/3, batched with the locker's other leases (default
    /// on). The lease still goes lost at its local deadline if renewals are not confirmed.
    /// Off, the lease lapses at its TTL unless [`Lease::renew`] is called: for work known to
    /// end well within it. Session and transaction locks need no renewal either way.
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
        use tracing::Instrument;
        let (tel, started) = (self.locker.tel, Instant::now());
        let key = Key::new(self.key.as_str())?;
        let span =
            tracing::debug_span!("leasehold.acquire", key = key.as_str(), backend = tel.backend);
        let r = self.attempt().instrument(span).await;
        match &r {
            Ok(_) => tel.acquired(&key, "granted", started.elapsed()),
            Err(e) => tel.acquired(&key, crate::telemetry::outcome_of(e), started.elapsed()),
        }
        r
    }

    async fn attempt(self) -> Result<Lease> {
        let key = Key::new(self.key)?;
        check_ttl(self.ttl)?;
        if !(0.0..0.5).contains(&self.drift) {
            return Err(Error::invalid(format!("drift {} is outside [0, 0.5)", self.drift)));
        }
        let margin = self.margin.unwrap_or_else(|| default_margin(self.ttl));
        if margin >= self.ttl.mul_f64(1.0 - self.drift) {
            return Err(Error::invalid(format!(
                "margin {margin:?} leaves no time inside a ttl of {:?}",
                self.ttl
            )));
        }
        let locker = &self.locker;
        let store = locker.store.clone();
        let guarantees = store.guarantees();
        guarantees.primitives.admit(guarantees.backend, self.mode, self.slot.is_some())?;
        let kind = guarantees.kind;
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
            info: locker.info.as_deref(),
            mode: self.mode,
            slot: self.slot.as_ref().map(|(semaphore, index, permits)| crate::store::SlotOf {
                semaphore,
                index: *index,
                permits: *permits,
            }),
        };

        // Waiters of this locker queue per key; only the head asks the store, and not while
        // another lease of this locker holds the key; none waits on itself.
        let who = Ident::current();
        let req_started = Instant::now();
        // Readers of one locker overlap: each queues under a local name of its own.
        let local_key = local_key(&key, self.mode, &owner);
        let mut slot = match locker.local.enter(&local_key, until, who, locker.op_timeout).await {
            Ok(slot) => slot,
            Err(Refused::Ours(fence)) => return Err(Error::HeldByThisLocker { key, fence }),
            Err(Refused::Timeout) => return Err(Error::Busy { key }),
        };

        // From here until an answer is in hand, the store may have granted without us knowing:
        // a drop (cancellation) or an error leaves the guard armed and it cleans up.
        let mut cleanup = Cleanup {
            tel: locker.tel,
            store: Some(store.clone()),
            key: key.clone(),
            owner,
            pending: Some(locker.exit.pending.clone()),
        };
        if until.is_none() {
            slot.take_off();
        }
        let attempt = store.acquire(&req, until).await;
        let grant = match attempt {
            Ok(Attempt::Granted(g)) => g,
            Ok(Attempt::Busy { .. }) => {
                cleanup.disarm();
                // A one-shot acquire that met this locker's own grant (another future of a
                // `join!` that got there first) says so, as the waiting form does.
                if until.is_none()
                    && let Some(fence) =
                        slot.ours_after_busy(Instant::now() + locker.op_timeout).await
                {
                    return Err(Error::HeldByThisLocker { key, fence });
                }
                return Err(Error::Busy { key });
            }
            Err(e) => {
                // Refused input or configuration: the store granted nothing, so there is
                // nothing to clean up (and a cleanup would be refused the same way).
                if matches!(
                    e,
                    Error::InvalidInput(_) | Error::Config { .. } | Error::Unsupported { .. }
                ) {
                    cleanup.disarm();
                }
                return Err(e);
            }
        };
        cleanup.disarm();
        let auto_renew = self.auto_renew && kind == LockKind::Lease;
        let renew_every = auto_renew.then(|| Watchdog::interval(self.ttl));
        let timing =
            Timing { drift: self.drift, margin, renew_every, op_timeout: locker.op_timeout };
        let key_for_tel = key.clone();
        let shared = Arc::new(Shared::new(
            store,
            crate::fence::Fencing::new(key, grant.fence, owner),
            self.ttl,
            kind,
            timing,
            grant.sent_at,
            locker.tel,
        ));
        if let (Some(_), Some(freed)) = (until, slot.freed_at())
            && freed >= req_started
        {
            // A handoff inside this process: from our previous holder letting go to now.
            locker.tel.time(crate::telemetry::HANDOFF_WAIT, &key_for_tel, None, freed.elapsed());
        }
        if let Some(end) = grant.session_end {
            shared.set_session_end(end);
        }
        if let Some(live) = grant.session_live {
            shared.set_session_live(live);
        }
        let watchdog = auto_renew.then(|| {
            let id = locker.watchdog.register(&shared, grant.sent_at);
            (locker.watchdog.clone(), id)
        });
        let lease = Lease::new(shared, watchdog, slot.registration(), locker.exit.clone(), who);
        // Only now, with this lease registered as the local holder, may the next waiter look.
        drop(slot);
        Ok(lease)
    }
}

fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600)
}

impl IntoFuture for Acquire {
    type Output = Result<Lease>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<Lease>> + Send + 'static>>;
    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.run())
    }
}

/// Owner-conditional cleanup of an acquire whose outcome is unknown.
struct Cleanup {
    tel: Telemetry,
    store: Option<Arc<dyn Store>>,
    key: Key,
    owner: OwnerToken,
    /// Where a spawned cleanup counts as a release in flight, so exit waits for it (only
    /// once spawned: an acquire still waiting is not a release in flight).
    pending: Option<Arc<crate::client::background::Pending>>,
}

impl Cleanup {
    fn disarm(&mut self) {
        self.store = None;
        self.pending = None;
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
        let ticket = self.pending.take().map(|p| p.ticket());
        let (key, owner, tel) = (self.key.clone(), self.owner, self.tel);
        rt.spawn(async move {
            let _ticket = ticket;
            let mut pause = Duration::from_millis(50);
            for _ in 0..5 {
                let r = tokio::time::timeout(DEFAULT_OP_TIMEOUT, store.release(&key, &owner)).await;
                match r {
                    Ok(Ok(true)) => {
                        tel.count(ORPHAN_CLEANUPS, &key, Some(("outcome", "removed")));
                        tracing::info!(
                            key = key.as_str(),
                            "removed the grant of an acquire whose outcome was unknown"
                        );
                        return;
                    }
                    Ok(Ok(false)) => {
                        tel.count(ORPHAN_CLEANUPS, &key, Some(("outcome", "none")));
                        return;
                    }
                    _ => {
                        tokio::time::sleep(pause).await;
                        pause *= 2;
                    }
                }
            }
            tel.count(ORPHAN_CLEANUPS, &key, Some(("outcome", "failed")));
            tracing::warn!(
                key = key.as_str(),
                "could not clean up an acquire with unknown outcome; the store's expiry will"
            );
        });
    }
}
