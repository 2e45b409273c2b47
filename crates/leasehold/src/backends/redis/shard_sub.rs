//! Release notifications on a Redis Cluster: sharded pub/sub (`SSUBSCRIBE`, Redis 7) on the
//! master of each key's slot, through one RESP3 cluster connection of its own whose
//! subscriptions redis-rs tracks and sends again after a reconnect, a `MOVED` or a failover
//! (to the node that serves the slot then). A message lost in such a move costs a waiter at
//! most [`POLL`]: every wait also ends then, and the waiter asks the store again.

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

/// Channel name → its waiters' notify and how many they are.
type Channels = Arc<Mutex<HashMap<String, (Arc<Notify>, usize)>>>;

/// The sharded subscriber of one cluster store.
pub(crate) struct ShardSubscriber {
    seeds: Vec<String>,
    limits: Limits,
    channels: Channels,
    /// The subscribing connection (made on first use), and the lock that orders every
    /// SSUBSCRIBE and SUNSUBSCRIBE.
    conn: tokio::sync::Mutex<Option<ClusterConnection>>,
}

fn lock(c: &Channels) -> std::sync::MutexGuard<'_, HashMap<String, (Arc<Notify>, usize)>> {
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
                    if let Some((n, _)) = channel_of(&info).and_then(|c| map.get(&c)) {
                        n.notify_one();
                    }
                }
                // Moved (the server unsubscribed us when the slot left its node) or
                // subscribed again after a move: a release may have been missed meanwhile.
                PushKind::SUnsubscribe | PushKind::SSubscribe => {
                    if let Some((n, _)) = channel_of(&info).and_then(|c| map.get(&c)) {
                        n.notify_waiters();
                    }
                }
                PushKind::Disconnection => {
                    for (n, _) in map.values() {
                        n.notify_waiters();
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
            let e = map.entry(channel.clone()).or_insert_with(|| (Arc::new(Notify::new()), 0));
            e.1 += 1;
            (e.0.clone(), fresh)
        };
        let w = ShardWatch { notify, channel: channel.clone(), sub: self.clone() };
        if fresh {
            if guard.is_none() {
                *guard = Some(self.connect().await?);
            }
            let conn = guard.as_mut().expect("just set");
            if let Err(e) = conn.ssubscribe(&channel).await {
                return Err(redis_err("redis-cluster", "SSUBSCRIBE", e));
            }
        }
        Ok(w)
    }

    /// One waiter fewer on `channel`; the last one's leaving unsubscribes it (decided under
    /// the subscription lock, so a waiter arriving meanwhile keeps it).
    fn forget(self: &Arc<Self>, channel: &str) {
        let last = {
            let mut map = lock(&self.channels);
            match map.get_mut(channel) {
                Some(e) => {
                    e.1 = e.1.saturating_sub(1);
                    e.1 == 0
                }
                None => false,
            }
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else { return };
        if last {
            let (me, channel) = (Arc::downgrade(self), channel.to_owned());
            rt.spawn(async move {
                let Some(me) = me.upgrade() else { return };
                let mut guard = me.conn.lock().await;
                {
                    let mut map = lock(&me.channels);
                    if map.get(&channel).is_none_or(|e| e.1 > 0) {
                        return;
                    }
                    map.remove(&channel);
                }
                if let Some(c) = guard.as_mut() {
                    let bounded = tokio::time::timeout(me.limits.op, c.sunsubscribe(&channel));
                    if !matches!(bounded.await, Ok(Ok(()))) {
                        *guard = None; // a fresh connection has no stale subscriptions
                    }
                }
            });
        }
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
