//! `redis-sentinel://[user:pass@]S1:P1[,S2:P2…]/SERVICE[?db=N&prefix=P&sentinel_auth=url&wait_replicas=N&wait_timeout=DUR]`:
//! leases on the primary a set of Redis Sentinels names for `SERVICE`.
//!
//! The primary is asked of the sentinels in turn (`SENTINEL GET-MASTER-ADDR-BY-NAME`), the
//! first that answers decides, and the node it names must say `master` to `ROLE` before it is
//! used (a sentinel that has not seen a failover yet names a node that is a replica now: the
//! next sentinel is asked, then all of them again, within the connect limit). The user,
//! password and database in the URL are the data nodes'; the sentinels are asked without a
//! password, or with the URL's user and password given `sentinel_auth=url` (sentinels with
//! `requirepass`). A sentinel that refuses is [`Error::Config`], naming the option.
//!
//! The primary is found again after a failover: on a request that finds it gone or
//! read-only (a connection refused or broken, `READONLY`), which is then retried once on the
//! new primary (a grant meeting its own lease there answers its fence, a release its own
//! tombstone; a release whose first attempt may have applied and whose retry finds neither
//! the grant nor the tombstone, which the failover can lose, is [`Error::UnknownOutcome`]); and
//! when a sentinel announces `+switch-master` for the service, which also moves every
//! waiter's subscription to the new primary. Grants, keys, scripts and fences are
//! `redis://`'s ([`super`]), semaphores' and readers' too (`prims.rs`: each of their
//! requests goes to the primary in use and is retried there once, as the mutex's: a retried
//! slot grant meets its own lease, a retried reader grant or intent is written again);
//! replication is asynchronous, so a failover can lose a grant and admit a second holder,
//! with a larger fence under the clock assumption.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures_util::StreamExt;
use redis::aio::ConnectionManager;
use tokio::sync::Notify;

use super::form::{Form, form_store};
use super::script_calls::{Answer, On};
use super::sentinel_url::{SentinelUrl, Unanswered, ask_sentinel, parse_url};
use super::wait::Intents;
use super::{Names, Node, SubWatch};
use crate::Holder;
use crate::backends::Limits;
use crate::store::{AcquireRequest, RenewItem, Watch};
use crate::{Error, FenceRepeat, Guarantees, Key, LockKind, OwnerToken, Result};

const BACKEND: &str = "redis-sentinel";
/// The longest a waiter waits without asking the store again (a subscription on a primary
/// that was demoted without dying hears no release).
const POLL: Duration = Duration::from_secs(1);

/// What every handle of one store shares.
struct Shared {
    url: SentinelUrl,
    names: Names,
    limits: Limits,
    /// The primary in use, `None` until found (again).
    node: tokio::sync::Mutex<Option<Node>>,
    /// Bumped whenever the primary in use is dropped.
    generation: AtomicU64,
    /// Woken with it, for waiters.
    switched: Notify,
}

/// The Redis Sentinel lease store.
#[derive(Clone)]
pub struct RedisSentinelStore {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for RedisSentinelStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisSentinelStore").field("service", &self.shared.url.service).finish()
    }
}

/// Whether an error says the primary in use may be gone or demoted (nothing is known to
/// be applied, or the outcome is unknown): find it again and retry once.
fn moved_on(e: &Error) -> bool {
    e.is_unavailable() || matches!(e, Error::UnknownOutcome(_))
}

impl Shared {
    /// The primary in use, found if there is none.
    async fn node(&self) -> Result<Node> {
        let mut g = self.node.lock().await;
        if let Some(n) = g.as_ref() {
            return Ok(n.clone());
        }
        let n = self.discover().await?;
        *g = Some(n.clone());
        Ok(n)
    }

    /// Asks the sentinels, connects to the node named and checks its `ROLE`, again and
    /// again within the connect limit.
    async fn discover(&self) -> Result<Node> {
        let deadline = Instant::now() + self.limits.connect;
        let mut why = Vec::new();
        loop {
            for s in &self.url.sentinels {
                let left = deadline.saturating_duration_since(Instant::now());
                let addr = match ask_sentinel(&self.url, s, left).await {
                    Ok(a) => a,
                    Err(Unanswered::Refused(why)) => return Err(Error::config(why, None)),
                    Err(Unanswered::Other(e)) => {
                        why.push(e);
                        continue;
                    }
                };
                let limits =
                    Limits { connect: left.max(Duration::from_millis(100)), ..self.limits };
                let node = match Node::connect(&self.url.node_url(&addr), true, None, limits).await
                {
                    Ok(n) => n,
                    Err(e) if e.is_config() => return Err(e),
                    Err(e) => {
                        why.push(format!("primary {addr} (from {s}): {e}"));
                        continue;
                    }
                };
                let mut c = node.conn.clone();
                let role = tokio::time::timeout(
                    left,
                    redis::cmd("ROLE").query_async::<Vec<redis::Value>>(&mut c),
                )
                .await;
                match role {
                    Ok(Ok(v))
                        if v.first()
                            .and_then(|r| redis::from_redis_value::<String>(r.clone()).ok())
                            .as_deref()
                            == Some("master") =>
                    {
                        return Ok(node);
                    }
                    Ok(Ok(_)) => why.push(format!(
                        "{addr}, named by sentinel {s}, is not the master (ROLE): refused"
                    )),
                    Ok(Err(e)) => why.push(format!("ROLE on {addr}: {e}")),
                    Err(_) => why.push(format!("ROLE on {addr}: no answer")),
                }
            }
            if Instant::now() + Duration::from_millis(100) >= deadline {
                why.dedup();
                return Err(Error::unavailable(
                    format!(
                        "no primary for service {:?} within {:?}: {}",
                        self.url.service,
                        self.limits.connect,
                        why.join("; ")
                    ),
                    None,
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Drops the primary in use if it is `addr` (or whichever it is, for `None`).
    async fn drop_node(&self, addr: Option<&str>) {
        let mut g = self.node.lock().await;
        if g.as_ref().is_some_and(|n| addr.is_none_or(|a| n.addr == a)) {
            *g = None;
            self.generation.fetch_add(1, Ordering::SeqCst);
            self.switched.notify_waiters();
        }
    }
}

impl RedisSentinelStore {
    /// Finds the primary through the sentinels and connects, within
    /// [`crate::DEFAULT_CONNECT_TIMEOUT`]. [`Error::Config`] when the primary refuses the
    /// password, database index or ACL user; [`Error::Unavailable`] when no sentinel names a
    /// primary that says it is one.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::open(&parse_url(url)?, Limits::default()).await
    }

    pub(crate) async fn open(u: &SentinelUrl, limits: Limits) -> Result<Self> {
        let u = u.clone();
        let names = Names::new(u.opts.prefix.clone()).with_horizon(u.opts.horizon);
        let shared = Arc::new(Shared {
            url: u,
            names,
            limits,
            node: tokio::sync::Mutex::new(None),
            generation: AtomicU64::new(0),
            switched: Notify::new(),
        });
        // Sentinels speak RESP: another service at the first one's address is named as such
        // (`backends::peer`).
        let first = shared.url.sentinels.first().and_then(|s| crate::backends::peer::host_port(s));
        let first = first.as_ref().map(|(h, p)| (h.as_str(), *p));
        let redis = crate::backends::peer::Speaks::Redis;
        crate::backends::peer::guarded("redis-sentinel", redis, first, shared.node()).await?;
        tokio::spawn(listen_switches(Arc::downgrade(&shared)));
        Ok(RedisSentinelStore { shared })
    }

    /// `op` on the primary; once more on a primary found again when it failed as a gone or
    /// demoted primary would.
    async fn on_primary<T, F, Fut>(&self, op: F) -> Result<(T, bool)>
    where
        F: Fn(Node) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let node = self.shared.node().await?;
        match op(node.clone()).await {
            Err(e) if moved_on(&e) => {
                self.shared.drop_node(Some(&node.addr)).await;
                let next = self.shared.node().await.map_err(|e2| {
                    let (e, e2) = (e.detail(), e2.detail());
                    Error::unavailable(format!("{e}; finding the primary again: {e2}"), None)
                })?;
                let unknown = matches!(e, Error::UnknownOutcome(_));
                op(next).await.map(|v| (v, unknown))
            }
            r => r.map(|v| (v, false)),
        }
    }
}

/// Listens for `+switch-master` on the sentinels (one at a time, the next when one goes
/// away) and drops the primary in use when the service's moves; ends with the store.
async fn listen_switches(shared: Weak<Shared>) {
    let mut i = 0usize;
    loop {
        let Some((sentinel, service, limit)) = shared.upgrade().map(|s| {
            let n = s.url.sentinels.len();
            (s.url.sentinel_url(&s.url.sentinels[i % n]), s.url.service.clone(), s.limits.connect)
        }) else {
            return;
        };
        i += 1;
        let sub = async {
            let client = redis::Client::open(sentinel.as_str()).ok()?;
            let mut ps = client.get_async_pubsub().await.ok()?;
            ps.subscribe("+switch-master").await.ok()?;
            Some(ps)
        };
        if let Ok(Some(ps)) = tokio::time::timeout(limit, sub).await {
            let mut stream = ps.into_on_message();
            loop {
                match tokio::time::timeout(Duration::from_secs(2), stream.next()).await {
                    Ok(Some(msg)) => {
                        let text: String = msg.get_payload().unwrap_or_default();
                        // `name old-ip old-port new-ip new-port`
                        if text.split(' ').next() == Some(service.as_str()) {
                            let Some(s) = shared.upgrade() else { return };
                            s.drop_node(None).await;
                        }
                    }
                    Ok(None) => break,
                    Err(_) if shared.strong_count() == 0 => return,
                    Err(_) => {}
                }
            }
        }
        if shared.strong_count() == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

form_store!(RedisSentinelStore {
        fn guarantees(&self) -> Guarantees {
            Guarantees {
                backend: BACKEND,
                kind: LockKind::Lease,
                exclusion: "linearizable while the primary lives (single-threaded script execution)",
                store_failure: "replication is asynchronous: a failover to a replica that missed a \
                                grant admits a second holder; its fence is larger than the stale \
                                holder's under the clock assumption, so a fenced resource refuses \
                                the stale one (wait_replicas narrows the window, does not close it)",
                expiry: "the primary's clock (SET PX, PEXPIRE)",
                fence: "max(counter + 1, server TIME in µs) of a per-key counter, in the granting \
                        script; the counter expires ttl + horizon after the last grant or renewal \
                        (horizon=, a day by default)",
                fence_repeat: FenceRepeat::ClockBacked,
                failure_admits_second_holder: true,
                holders_know_fence: true,
                holders_know_info: true,
                waiting: "pub/sub on the primary, moved to the new one on +switch-master, a poll \
                          every second; else the holder's PTTL",
                primitives: crate::Primitives {
                    note: super::PRIMITIVES_NOTE,
                    ..crate::Primitives::ALL
                },
            }
        }

        async fn renew_many(&self, items: &[RenewItem]) -> Result<Vec<bool>> {
            let names = &self.shared.names;
            Ok(self.on_primary(|n| async move { n.renew_many(names, items).await }).await?.0)
        }

        async fn release(&self, key: &Key, owner: &OwnerToken) -> Result<bool> {
            let names = &self.shared.names;
            match self.on_primary(|n| async move { n.release(names, key, owner).await }).await? {
                (false, true) => Err(Error::UnknownOutcome(format!(
                    "release of {key:?}: the primary went away mid-request and the new primary has \
                     no grant (removed by the first attempt, lost in the failover, or ended)"
                ))),
                (released, _) => Ok(released),
            }
        }

        async fn holders(&self, key: Option<&Key>) -> Result<Vec<Holder>> {
            let names = &self.shared.names;
            let read = |n: Node| async move { n.holders_with_readers(names, key, BACKEND).await };
            Ok(self.on_primary(read).await?.0)
        }
});

#[async_trait]
impl Form for RedisSentinelStore {
    type Conn = ConnectionManager;

    fn names(&self) -> &Names {
        &self.shared.names
    }

    /// The primary in use (found first if none is).
    async fn scripts(&self) -> Result<On<'_, ConnectionManager>> {
        Ok(self.shared.node().await?.on(&self.shared.names, BACKEND))
    }

    /// On the primary, retried once on a primary found again (as every request); then,
    /// with `wait_replicas`, the replicas' acknowledgement: short of it, the grant is
    /// released and the attempt fails closed.
    async fn grant(&self, req: &AcquireRequest<'_>) -> Result<Answer> {
        let names = &self.shared.names;
        let wait = self.shared.url.opts.wait_replicas;
        let (r, _) = self
            .on_primary(|n| async move {
                let r = n.on(names, BACKEND).grant(req).await?;
                if let (Ok(_), Some((want, t))) = (&r, wait) {
                    let acked = n.wait_replicas(want, t).await?;
                    if acked < want {
                        let _ = n.release(names, req.key, req.owner).await;
                        return Err(Error::unavailable(
                            format!(
                                "grant acknowledged by {acked} of the {want} replicas required \
                                 within {t:?}; released it"
                            ),
                            None,
                        ));
                    }
                }
                Ok(r)
            })
            .await?;
        Ok(r)
    }
}

#[async_trait]
impl Intents for RedisSentinelStore {
    async fn note_intent(&self, req: &AcquireRequest<'_>, left: Option<Duration>) -> Result<bool> {
        let names = &self.shared.names;
        let note = |n: Node| async move { n.on(names, BACKEND).note_intent(req, left).await };
        Ok(self.on_primary(note).await?.0)
    }

    async fn clear_intent(&self, key: &Key, owner: &OwnerToken) -> Result<()> {
        let names = &self.shared.names;
        let clear = |n: Node| async move { n.on(names, BACKEND).clear_intent(key, owner).await };
        self.on_primary(clear).await.map(drop)
    }

    async fn watch_key(&self, key: &Key) -> Result<Box<dyn Watch>> {
        let mut w = SentinelWatch {
            shared: self.shared.clone(),
            channel: self.shared.names.channel(key),
            generation: u64::MAX,
            inner: None,
        };
        w.follow().await?;
        Ok(Box::new(w))
    }
}

/// A waiter's subscription, on whichever node is the primary.
struct SentinelWatch {
    shared: Arc<Shared>,
    channel: String,
    /// The generation `inner` was made in.
    generation: u64,
    inner: Option<SubWatch>,
}

impl SentinelWatch {
    /// Subscribes on the primary in use, if the subscription is not there already.
    async fn follow(&mut self) -> Result<()> {
        let g = self.shared.generation.load(Ordering::SeqCst);
        if g == self.generation && self.inner.is_some() {
            return Ok(());
        }
        self.inner = None;
        let node = self.shared.node().await?;
        self.inner = Some(node.sub.watch(self.channel.clone()).await?);
        self.generation = g;
        Ok(())
    }
}

#[async_trait]
impl Watch for SentinelWatch {
    async fn changed(&mut self, until: Instant) {
        let poll = (Instant::now() + POLL).min(until);
        // Moved since the last wait: subscribe on the new primary first (bounded; failing
        // that, the poll is the fallback).
        let op = self.shared.limits.op;
        let _ = tokio::time::timeout(op.min(POLL), self.follow()).await;
        let switched = self.shared.switched.notified();
        match &self.inner {
            Some(w) => tokio::select! {
                _ = w.changed(poll) => {}
                _ = switched => {}
            },
            None => tokio::select! {
                _ = tokio::time::sleep_until(poll.into()) => {}
                _ = switched => {}
            },
        }
    }
}

/// `redis-sentinel://S1:P1[,S2:P2…]/SERVICE`.
pub(crate) const STORE: crate::backends::Descriptor = crate::backends::Descriptor {
    form: "redis-sentinel://S1:P1[,S2:P2…]/SERVICE",
    usage: "redis-sentinel://[USER:PASS@]S1:P1[,S2:P2…]/SERVICE[?db=N&prefix=P&wait_replicas=N]",
    summary: "the primary Redis Sentinels name",
    parse: |url| crate::backends::parsed(parse_url(url)),
};

impl crate::backends::StoreConfig for SentinelUrl {
    fn open(&self, limits: Limits) -> crate::backends::Boxed<'_, Result<Arc<dyn crate::Store>>> {
        crate::backends::opened(RedisSentinelStore::open(self, limits))
    }

    fn probe<'a>(
        &'a self,
        p: &'a mut crate::probe::findings::Probe,
    ) -> crate::backends::Boxed<'a, std::result::Result<(), String>> {
        Box::pin(super::probe_ha::sentinel(self, p))
    }
}
