//! `redlock://host1:port,host2:port,host3:port[,…][?prefix=P]`: the Redlock
//! algorithm over N independent Redis instances.
//!
//! A grant needs a majority (N/2+1) of instances to accept `SET NX PX` within the TTL; its
//! validity is `ttl − elapsed − (drift·ttl + 2 ms)`. A failed quorum is released on every
//! instance (owner-checked). Exclusion holds only **assuming bounded clock drift and process
//! pauses**; an instance that restarts without fsync'd persistence can re-grant a key
//! a majority still believes held.
//!
//! Redlock issues no fence of its own: grants carry fence 0, which fenced resources refuse,
//! unless a [`FenceSource`] is attached; validity is re-checked after the fence arrives.
//!
//! A refusal of the configuration ([`Error::Config`]: a password, an ACL, a database index)
//! is the answer only when every instance that failed refused that way and too few are left
//! for a majority; a minority refusing is one more failed instance.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::{Names, Node, RedlockUrl, SubWatch};
use crate::backends::Limits;
use crate::store::{AcquireRequest, Attempt, Grant, RenewItem, Watch};
use crate::{Error, FenceRepeat, FenceToken, Guarantees, Key, LockKind, OwnerToken, Result, Store};
use crate::{Holder, HolderInfo};

/// Issues fences for a store that has none (Redlock). Must be strictly increasing per key
/// across all clients and never go back, even after the source's own failure (an etcd
/// revision; a database counter bumped as `max(counter + 1, clock µs)`).
#[async_trait]
pub trait FenceSource: Send + Sync + std::fmt::Debug + 'static {
    /// The next fence for `key`.
    async fn next(&self, key: &Key) -> Result<FenceToken>;

    /// Whether (and under which assumption) this source's fences can go back; printed in
    /// the store's [`Guarantees`].
    fn promise(&self) -> FenceRepeat;
}

/// One instance slot: connected, or to be (re)connected on use.
#[derive(Debug)]
struct Slot {
    url: String,
    node: tokio::sync::Mutex<Option<Node>>,
    limits: Limits,
}

impl Slot {
    async fn node(&self) -> Result<Node> {
        let mut g = self.node.lock().await;
        if let Some(n) = g.as_ref() {
            return Ok(n.clone());
        }
        let n = Node::connect(&self.url, false, None, self.limits).await?;
        *g = Some(n.clone());
        Ok(n)
    }
}

/// The Redlock store.
#[derive(Debug, Clone)]
pub struct RedlockStore {
    slots: Arc<Vec<Slot>>,
    names: Names,
    drift: f64,
    fences: Option<Arc<dyn FenceSource>>,
}

impl RedlockStore {
    /// Connects to every instance listed, each within [`crate::DEFAULT_CONNECT_TIMEOUT`]; at
    /// least a majority must answer. [`Error::Config`] when the instances that fail all
    /// refuse the configuration (a password, an ACL, a database index).
    pub async fn connect(url: &str) -> Result<Self> {
        Self::open(&RedlockUrl::parse(url)?, Limits::default()).await
    }

    pub(crate) async fn open(u: &RedlockUrl, limits: Limits) -> Result<Self> {
        // The drift allowance: 1 % of the TTL (plus 2 ms).
        let drift = 0.01;
        let urls = u.hosts.iter().map(|h| format!("redis://{h}"));
        let slots: Vec<Slot> =
            urls.map(|url| Slot { url, node: tokio::sync::Mutex::new(None), limits }).collect();
        let store = RedlockStore {
            slots: Arc::new(slots),
            names: Names::new(u.opts.prefix.clone()),
            drift,
            fences: None,
        };
        let answers = futures_util::future::join_all(store.slots.iter().map(|s| s.node())).await;
        let up = answers.iter().filter(|r| r.is_ok()).count();
        if up < store.quorum() {
            let failed: Vec<Error> = answers.into_iter().filter_map(Result::err).collect();
            return Err(store.no_quorum(failed, "answered"));
        }
        Ok(store)
    }

    /// Too few instances answered: [`Error::Config`] if every failed one refused the
    /// configuration (the first such refusal), else [`Error::Unavailable`].
    fn no_quorum(&self, failed: Vec<Error>, what: &str) -> Error {
        let n = self.slots.len();
        let up = n - failed.len();
        if failed.iter().all(Error::is_config)
            && let Some(Error::Config { message, source }) = failed.into_iter().next()
        {
            return Error::Config {
                message: format!("{message} (and so did every other instance that failed)"),
                source,
            };
        }
        Error::unavailable(format!("only {up} of {n} redlock instances {what}"), None)
    }

    /// Attaches a fence source: grants then carry its fences.
    pub fn with_fence_source(mut self, source: Arc<dyn FenceSource>) -> Self {
        self.fences = Some(source);
        self
    }

    fn quorum(&self) -> usize {
        self.slots.len() / 2 + 1
    }

    /// Time one instance may take: a tenth of the TTL, between 5 ms and 1 s.
    fn per_node(ttl: Duration) -> Duration {
        (ttl / 10).clamp(Duration::from_millis(5), Duration::from_secs(1))
    }

    fn drift_of(&self, ttl: Duration) -> Duration {
        ttl.mul_f64(self.drift) + Duration::from_millis(2)
    }

    /// Runs `op` on every instance in parallel, each bounded by `limit`.
    async fn on_all<T, F, Fut>(&self, limit: Duration, op: F) -> Vec<Result<T>>
    where
        F: Fn(Node) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let op = &op;
        futures_util::future::join_all(self.slots.iter().map(|s| async move {
            // A (re)connect counts against the same limit: a dead instance must not hold up
            // the others' answer.
            tokio::time::timeout(limit, async { op(s.node().await?).await })
                .await
                .unwrap_or_else(|_| Err(Error::UnknownOutcome(format!("{} did not answer", s.url))))
        }))
        .await
    }

    async fn release_all(&self, key: &Key, owner: &OwnerToken) -> usize {
        let names = &self.names;
        self.on_all(Duration::from_secs(1), |n| async move { n.release(names, key, owner).await })
            .await
            .into_iter()
            .filter(|r| matches!(r, Ok(true)))
            .count()
    }
}

struct MultiWatch(Vec<SubWatch>);

#[async_trait]
impl Watch for MultiWatch {
    async fn changed(&mut self, until: Instant) {
        let waits = self.0.iter().map(|w| Box::pin(w.changed(until)));
        futures_util::future::select_all(waits).await;
        // Random jitter so clients that split a vote do not retry in lockstep.
        let mut b = [0u8; 1];
        if getrandom::fill(&mut b).is_ok() {
            let jitter = Duration::from_micros(u64::from(b[0]) * 12); // 0–3 ms
            tokio::time::sleep_until((Instant::now() + jitter).min(until).into()).await;
        }
    }
}

#[async_trait]
impl Store for RedlockStore {
    fn guarantees(&self) -> Guarantees {
        Guarantees {
            backend: "redlock",
            kind: LockKind::Lease,
            exclusion: "a majority of independent instances, assuming bounded clock drift and \
                        process pauses",
            store_failure: "survives the loss of a minority; an instance that restarts without \
                            fsync'd persistence can re-grant a key and break exclusion",
            expiry: "each instance's TTL, minus the client's elapsed time and drift",
            fence: if self.fences.is_some() {
                "the attached fence source, validity re-checked after it answers"
            } else {
                "none (fence 0, refused by fenced resources); attach a FenceSource"
            },
            fence_repeat: self.fences.as_ref().map_or(FenceRepeat::NoFence, |f| f.promise()),
            failure_admits_second_holder: true,
            // The instances never see an external source's fences.
            holders_know_fence: self.fences.is_none(),
            holders_know_info: true,
            waiting: "pub/sub on every instance, plus random jitter, else the holders' PTTL",
            primitives: crate::Primitives::MUTEX,
        }
    }

    async fn try_acquire(&self, req: &AcquireRequest<'_>) -> Result<Attempt> {
        let sent = Instant::now();
        let names = &self.names;
        let answers = self
            .on_all(Self::per_node(req.ttl), |n| async move {
                n.grant(names, req.key, req.owner, req.ttl, req.info).await
            })
            .await;
        let granted = answers.iter().filter(|a| matches!(a, Ok(Ok(_)))).count();
        let mut busy_pttls: Vec<Duration> =
            answers.iter().filter_map(|a| if let Ok(Err(p)) = a { *p } else { None }).collect();
        let failed: Vec<Error> = answers.into_iter().filter_map(Result::err).collect();
        let drift = self.drift_of(req.ttl);
        let valid = |now: Instant| {
            req.ttl.saturating_sub(now - sent).saturating_sub(drift) > Duration::ZERO
        };
        if granted >= self.quorum() && valid(Instant::now()) {
            let fence = match &self.fences {
                None => FenceToken::new(0),
                Some(src) => match src.next(req.key).await {
                    Ok(f) if valid(Instant::now()) => f,
                    outcome => {
                        self.release_all(req.key, req.owner).await;
                        return Err(outcome.err().unwrap_or_else(|| {
                            Error::unavailable(
                                "the fence arrived after the grant's validity ended; released",
                                None,
                            )
                        }));
                    }
                },
            };
            return Ok(Attempt::Granted(Grant::new(fence, sent)));
        }
        self.release_all(req.key, req.owner).await;
        if failed.len() > self.slots.len() - self.quorum() {
            return Err(self.no_quorum(failed, "answered"));
        }
        // The key frees on a majority when the quorum-th shortest remaining TTL runs out.
        busy_pttls.sort();
        Ok(Attempt::Busy {
            holder_expires_in: busy_pttls.get(self.quorum().saturating_sub(granted + 1)).copied(),
        })
    }

    async fn acquire(&self, req: &AcquireRequest<'_>, until: Option<Instant>) -> Result<Attempt> {
        crate::store::acquire_watching(self, req, until, || self.watch(req.key)).await
    }

    async fn renew(&self, key: &Key, owner: &OwnerToken, ttl: Duration) -> Result<bool> {
        let item = RenewItem { key: key.clone(), owner: *owner, ttl };
        Ok(self.renew_many(std::slice::from_ref(&item)).await?[0])
    }

    async fn renew_many(&self, items: &[RenewItem]) -> Result<Vec<bool>> {
        let sent = Instant::now();
        let ttl = items.iter().map(|i| i.ttl).min().unwrap_or_default();
        let names = &self.names;
        let answers = self
            .on_all(Self::per_node(ttl), |n| async move { n.renew_many(names, items).await })
            .await;
        let ok_nodes: Vec<&Vec<bool>> = answers.iter().filter_map(|a| a.as_ref().ok()).collect();
        if ok_nodes.len() < self.quorum() {
            return Err(Error::unavailable(
                "fewer than a majority of instances answered the renewal",
                None,
            ));
        }
        let in_time =
            ttl.saturating_sub(sent.elapsed()).saturating_sub(self.drift_of(ttl)) > Duration::ZERO;
        Ok((0..items.len())
            .map(|i| {
                in_time
                    && ok_nodes.iter().filter(|v| v.get(i) == Some(&true)).count() >= self.quorum()
            })
            .collect())
    }

    async fn release(&self, key: &Key, owner: &OwnerToken) -> Result<bool> {
        Ok(self.release_all(key, owner).await >= self.quorum())
    }

    fn set_op_timeout(&self, op_timeout: Duration) {
        self.names.set_op_timeout(op_timeout);
    }

    async fn holders(&self, key: Option<&Key>) -> Result<Vec<Holder>> {
        let names = &self.names;
        let answers = self
            .on_all(Duration::from_secs(2), |n| async move { n.holders(names, key, false).await })
            .await;
        type Votes = (Vec<Option<Duration>>, Option<HolderInfo>);
        let mut votes: std::collections::HashMap<(Key, OwnerToken), Votes> = Default::default();
        for h in answers.into_iter().flatten().flatten() {
            let v = votes.entry((h.key.clone(), h.owner)).or_default();
            v.0.push(h.expires_in);
            v.1 = v.1.take().or(h.info);
        }
        let mut out: Vec<Holder> = votes
            .into_iter()
            .filter(|(_, (v, _))| v.len() >= self.quorum())
            .map(|((k, o), (mut left, info))| {
                left.sort();
                // The instances never see an external source's fences.
                let fence = self.fences.is_none().then_some(FenceToken::new(0));
                Holder::new(k, o, fence, left.first().copied().flatten()).with_info(info)
            })
            .collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }
}

impl RedlockStore {
    /// Subscribes to changes of `key` (a release, an expiry), for [`crate::store::acquire_watching`].
    pub(crate) async fn watch(&self, key: &Key) -> Result<Box<dyn Watch>> {
        let channel = self.names.channel(key);
        let subs = futures_util::future::join_all(self.slots.iter().map(|s| {
            let channel = channel.clone();
            async move {
                let sub = async { s.node().await?.sub.watch(channel).await };
                tokio::time::timeout(Duration::from_secs(1), sub).await.ok()?.ok()
            }
        }))
        .await;
        let subs: Vec<SubWatch> = subs.into_iter().flatten().collect();
        if subs.len() < self.quorum() {
            return Err(Error::unavailable("could not subscribe on a majority of instances", None));
        }
        Ok(Box::new(MultiWatch(subs)))
    }
}

/// `redlock://H1:P1,H2:P2,H3:P3[,…]`.
pub(crate) const STORE: crate::backends::Descriptor = crate::backends::Descriptor {
    form: "redlock://H1:P1,H2:P2,H3:P3",
    usage: "redlock://H1:P1,H2:P2,H3:P3",
    summary: "Redlock over independent primaries",
    parse: |url| crate::backends::parsed(RedlockUrl::parse(url)),
};

impl crate::backends::StoreConfig for RedlockUrl {
    fn open(&self, limits: Limits) -> crate::backends::Boxed<'_, Result<Arc<dyn Store>>> {
        crate::backends::opened(RedlockStore::open(self, limits))
    }

    fn probe<'a>(
        &'a self,
        p: &'a mut crate::probe::findings::Probe,
    ) -> crate::backends::Boxed<'a, std::result::Result<(), String>> {
        Box::pin(super::probe::redlock(self, p))
    }
}
