//! Release notifications on a Redis Cluster: sharded pub/sub (`SSUBSCRIBE`, Redis 7) on the
//! master of each key's slot, through one RESP3 cluster connection of its own whose
//! subscriptions redis-rs tracks and sends again after a reconnect, a `MOVED` or a failover
//! (to the node that serves the slot then). A message lost in such a move costs a waiter at
//! most [`POLL`]: every wait also ends then, and the waiter asks the store again. Waiters and
//! the idle subscriptions' linger are one server's (`linger.rs`), so a hot key's handoffs do
//! not pay an SSUBSCRIBE and an SUNSUBSCRIBE each.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use redis::cluster_async::ClusterConnection;
use redis::{PushInfo, PushKind, Value};
use tokio::sync::Notify;

use super::linger::{Channels, Lingering, Settled, start_sweeper};
use super::redis_err;
use crate::backends::Limits;
use crate::store::Watch;
use crate::{Error, Result};

/// The longest a waiter waits without asking the store again.
pub(super) const POLL: Duration = Duration::from_secs(1);

/// The sharded subscriber of one cluster store.
pub(crate) struct ShardSubscriber {
    seeds: Vec<String>,
    limits: Limits,
    channels: Channels,
    /// The subscribing connection (made on first use), and the lock that orders every
    /// SSUBSCRIBE and SUNSUBSCRIBE.
    conn: tokio::sync::Mutex<Option<ClusterConnection>>,
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
            channels: Channels::default(),
            conn: tokio::sync::Mutex::new(None),
        })
    }

    async fn connect(&self) -> Result<ClusterConnection> {
        let channels = self.channels.clone();
        // Called by the connection's task for every push: never blocks.
        let push = move |info: PushInfo| -> std::result::Result<(), std::convert::Infallible> {
            match info.kind {
                PushKind::SMessage => {
                    if let Some(c) = channel_of(&info) {
                        channels.notify_one(&c);
                    }
                }
                // Moved (the server unsubscribed us when the slot left its node) or
                // subscribed again after a move: a release may have been missed meanwhile.
                PushKind::SUnsubscribe | PushKind::SSubscribe => {
                    if let Some(c) = channel_of(&info) {
                        channels.notify_waiters(&c);
                    }
                }
                PushKind::Disconnection => channels.wake_all(),
                _ => {}
            }
            Ok(())
        };
        let client = super::cluster_url::builder(&self.seeds, self.limits)
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
        let (notify, fresh) = self.channels.join(&channel);
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
                self.channels.remove(&channel);
                return Err(e);
            }
        }
        Ok(w)
    }
}

#[async_trait]
impl Lingering for ShardSubscriber {
    fn channels(&self) -> &Channels {
        &self.channels
    }

    async fn unsubscribe_if_idle(&self, channel: &str) -> Settled {
        let mut guard = self.conn.lock().await;
        let settled = self.channels.settle(channel);
        if settled == Settled::Removed
            && let Some(c) = guard.as_mut()
        {
            let bounded = tokio::time::timeout(self.limits.op, c.sunsubscribe(channel));
            if !matches!(bounded.await, Ok(Ok(()))) {
                *guard = None; // a fresh connection has no stale subscriptions
            }
        }
        settled
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
        let start = self.sub.channels.leave(&self.channel);
        start_sweeper(&self.sub, &self.channel, start);
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
