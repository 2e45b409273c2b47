//! Release notifications on a Redis Cluster: sharded pub/sub (`SSUBSCRIBE`, Redis 7) on the
//! master of each key's slot, through one RESP3 cluster connection of its own whose
//! subscriptions redis-rs tracks and sends again after a reconnect, a `MOVED` or a failover
//! (to the node that serves the slot then). A message lost in such a move costs a waiter at
//! most [`POLL`]: every wait also ends then, and the waiter asks the store again. An idle
//! subscription lingers for [`LINGER`], as on one server (`pubsub.rs`), so a hot key's
//! handoffs do not pay an SSUBSCRIBE and an SUNSUBSCRIBE each.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use redis::cluster_async::ClusterConnection;
use redis::{PushInfo, PushKind, Value};
use tokio::sync::Notify;

use super::redis_err;
use crate::backends::Limits;
use crate::store::Watch;
use crate::{Error, Result};

/// The longest a waiter waits without asking the store again.
pub(super) const POLL: Duration = Duration::from_secs(1);

/// How long an idle subscription stays.
const LINGER: Duration = Duration::from_secs(1);

/// One subscribed channel.
struct Channel {
    notify: Arc<Notify>,
    waiters: usize,
    /// When `waiters` last dropped to zero.
    idle_since: Instant,
    /// A sweeper task is pending for this channel.
    sweeping: bool,
}

/// Channel name → its waiters.
type Channels = Arc<Mutex<HashMap<String, Channel>>>;

/// The sharded subscriber of one cluster store.
pub(crate) struct ShardSubscriber {
    seeds: Vec<String>,
    limits: Limits,
    channels: Channels,
    /// The subscribing connection (made on first use), and the lock that orders every
    /// SSUBSCRIBE and SUNSUBSCRIBE.
    conn: tokio::sync::Mutex<Option<ClusterConnection>>,
}

fn lock(c: &Channels) -> std::sync::MutexGuard<'_, HashMap<String, Channel>> {
    c.lock().unwrap_or_else(|p| p.into_inner())
}

/// The channel a push names, if any.
fn channel_of(info: &PushInfo) -> Option<String> {
    match info.data.first()? {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

impl ShardSubscriber {
    pub(super) fn new(seeds: Vec<String>, limits: Limits) -> Arc<Self> {
        Arc::new(ShardSubscriber {
            seeds,
            limits,
            channels: Arc::default(),
            conn: tokio::sync::Mutex::new(None),
        })
    }

    async fn connect(&self) -> Result<ClusterConnection> {
        let channels = self.channels.clone();
        // Called by the connection's task for every push: never blocks.
        let push = move |info: PushInfo| -> std::result::Result<(), std::convert::Infallible> {
            let map = lock(&channels);
            match info.kind {
                PushKind::SMessage => {
                    if let Some(c) = channel_of(&info).and_then(|c| map.get(&c)) {
                        c.notify.notify_one();
                    }
                }
                // Moved (the server unsubscribed us when the slot left its node) or
                // subscribed again after a move: a release may have been missed meanwhile.
                PushKind::SUnsubscribe | PushKind::SSubscribe => {
                    if let Some(c) = channel_of(&info).and_then(|c| map.get(&c)) {
                        c.notify.notify_waiters();
                    }
                }
                PushKind::Disconnection => {
                    for c in map.values() {
                        c.notify.notify_waiters();
                    }
                }
                _ => {}
            }
            Ok(())
        };
        let client = super::cluster::builder(&self.seeds, self.limits)
            .use_protocol(redis::ProtocolVersion::RESP3)
            .push_sender(push)
            .build()
            .map_err(|e| Error::invalid(format!("bad redis-cluster URL: {e}")))?;
        match tokio::time::timeout(self.limits.connect, client.get_async_connection()).await {
            Ok(Ok(c)) => Ok(c),
            Ok(Err(e)) => Err(redis_err("redis-cluster", "sharded pub/sub connect", e)),
            Err(_) => Err(Error::unavailable(
                format!("sharded pub/sub connect: no answer within {:?}", self.limits.connect),
                None,
            )),
        }
    }

    /// Subscribes `channel` (confirmed by the node serving its slot) before returning, so the
    /// caller's next attempt cannot miss a release.
    pub async fn watch(self: &Arc<Self>, channel: String) -> Result<ShardWatch> {
        let mut guard = self.conn.lock().await;
        let (notify, fresh) = {
            let mut map = lock(&self.channels);
            let fresh = !map.contains_key(&channel);
            let e = map.entry(channel.clone()).or_insert_with(|| Channel {
                notify: Arc::new(Notify::new()),
                waiters: 0,
                idle_since: Instant::now(),
                sweeping: false,
            });
            e.waiters += 1;
            (e.notify.clone(), fresh)
        };
        let w = ShardWatch { notify, channel: channel.clone(), sub: self.clone() };
        if fresh {
            let subscribed = async {
                if guard.is_none() {
                    *guard = Some(self.connect().await?);
                }
                let conn = guard.as_mut().expect("just set");
                conn.ssubscribe(&channel)
                    .await
                    .map_err(|e| redis_err("redis-cluster", "SSUBSCRIBE", e))
            };
            if let Err(e) = subscribed.await {
                // Not subscribed: no entry may linger as if it were (a fresh channel has no
                // other waiter, since they all pass the lock held here).
                lock(&self.channels).remove(&channel);
                return Err(e);
            }
        }
        Ok(w)
    }

    /// One waiter fewer on `channel`. The subscription lingers for [`LINGER`] after its last
    /// waiter leaves; a sweeper unsubscribes it then, unless a waiter came back.
    fn forget(self: &Arc<Self>, channel: &str) {
        let sweep = {
            let mut map = lock(&self.channels);
            match map.get_mut(channel) {
                Some(e) => {
                    e.waiters = e.waiters.saturating_sub(1);
                    if e.waiters == 0 {
                        e.idle_since = Instant::now();
                    }
                    let start = e.waiters == 0 && !e.sweeping;
                    e.sweeping |= start;
                    start
                }
                None => false,
            }
        };
        if sweep && let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(sweep_channel(Arc::downgrade(self), channel.to_owned()));
        }
    }
}

/// Unsubscribes `channel` once it has had no waiter for [`LINGER`] in a row (decided under
/// the subscription lock, so a waiter arriving meanwhile keeps it).
async fn sweep_channel(sub: std::sync::Weak<ShardSubscriber>, channel: String) {
    loop {
        let due = {
            let Some(me) = sub.upgrade() else { return };
            let map = lock(&me.channels);
            match map.get(&channel) {
                Some(e) => e.idle_since + LINGER,
                None => return,
            }
        };
        tokio::time::sleep_until(due.into()).await;
        let Some(me) = sub.upgrade() else { return };
        let mut guard = me.conn.lock().await;
        {
            let mut map = lock(&me.channels);
            let Some(e) = map.get_mut(&channel) else { return };
            if e.waiters > 0 {
                e.sweeping = false; // the next drop to zero starts a new sweeper
                return;
            }
            if e.idle_since.elapsed() < LINGER {
                continue; // used again meanwhile: look later
            }
            map.remove(&channel);
        }
        if let Some(c) = guard.as_mut() {
            let bounded = tokio::time::timeout(me.limits.op, c.sunsubscribe(&channel));
            if !matches!(bounded.await, Ok(Ok(()))) {
                *guard = None; // a fresh connection has no stale subscriptions
            }
        }
        return;
    }
}

/// A subscription held by one waiter.
pub(crate) struct ShardWatch {
    notify: Arc<Notify>,
    channel: String,
    sub: Arc<ShardSubscriber>,
}

impl Drop for ShardWatch {
    fn drop(&mut self) {
        self.sub.forget(&self.channel);
    }
}

#[async_trait]
impl Watch for ShardWatch {
    async fn changed(&mut self, until: Instant) {
        let poll = (Instant::now() + POLL).min(until);
        tokio::select! {
            _ = self.notify.notified() => {}
            _ = tokio::time::sleep_until(poll.into()) => {}
        }
    }
}
