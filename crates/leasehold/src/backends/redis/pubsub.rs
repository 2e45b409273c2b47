//! Release notifications over Redis pub/sub: one subscriber connection per server, waiters
//! of a key queued on one `Notify`, idle subscriptions dropped after a linger (`linger.rs`).

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use futures_util::StreamExt;
use redis::aio::PubSubSink;
use tokio::sync::Notify;

use super::connect::redis_err;
use crate::backends::redis::linger::{Channels, Lingering, Settled, start_sweeper};
use crate::store::Watch;
use crate::{Error, Result};

/// Release notifications: one pub/sub connection per server, shared by every waiter of the
/// store. Waiters of one key in this process queue on one `Notify`, and a release wakes one
/// of them, so a handoff costs one attempt, not one per waiter.
#[derive(Debug)]
pub(crate) struct Subscriber {
    client: redis::Client,
    sink: tokio::sync::Mutex<Option<PubSubSink>>,
    channels: Channels,
}

impl Subscriber {
    pub(super) fn new(client: redis::Client) -> Arc<Self> {
        Arc::new(Subscriber {
            client,
            sink: tokio::sync::Mutex::new(None),
            channels: Channels::default(),
        })
    }

    /// Connects if needed (resubscribing every channel in use) and returns the sink.
    async fn sink<'a>(
        &self,
        guard: &'a mut tokio::sync::MutexGuard<'_, Option<PubSubSink>>,
    ) -> Result<&'a mut PubSubSink> {
        if guard.is_none() {
            let ps = self
                .client
                .get_async_pubsub()
                .await
                .map_err(|e| redis_err("redis", "pub/sub connect", e))?;
            let (mut sink, mut stream) = ps.split();
            let names = self.channels.names();
            if !names.is_empty() {
                sink.subscribe(&names).await.map_err(|e| redis_err("redis", "subscribe", e))?;
            }
            let channels = self.channels.clone();
            tokio::spawn(async move {
                while let Some(msg) = stream.next().await {
                    channels.notify_one(msg.get_channel_name());
                }
                // Connection gone: wake everyone (they may have missed a release).
                channels.wake_all();
            });
            **guard = Some(sink);
        }
        Ok(guard.as_mut().expect("just set"))
    }

    /// Subscribes (confirmed by the server) before returning, so the caller's next attempt
    /// cannot miss a release.
    pub async fn watch(self: &Arc<Self>, channel: String) -> Result<SubWatch> {
        let mut guard = self.sink.lock().await;
        let (notify, fresh) = self.channels.join(&channel);
        let had_conn = guard.is_some();
        let r = async {
            let sink = self.sink(&mut guard).await?;
            if fresh && had_conn {
                sink.subscribe(&channel).await.map_err(|e| redis_err("redis", "subscribe", e))?;
            }
            Ok::<_, Error>(())
        }
        .await;
        if let Err(e) = r {
            *guard = None;
            drop(guard);
            self.forget(&channel);
            return Err(e);
        }
        Ok(SubWatch { notify, channel, sub: self.clone() })
    }

    /// One waiter fewer on `channel`. The subscription lingers (`linger.rs`), so keys with
    /// steady contention do not pay SUBSCRIBE + UNSUBSCRIBE on every handoff.
    fn forget(self: &Arc<Self>, channel: &str) {
        let start = self.channels.leave(channel);
        start_sweeper(self, channel, start);
    }
}

#[async_trait]
impl Lingering for Subscriber {
    fn channels(&self) -> &Channels {
        &self.channels
    }

    async fn unsubscribe_if_idle(&self, channel: &str) -> Settled {
        // Decided under the sink lock: a watcher that came back meanwhile wins.
        let mut guard = self.sink.lock().await;
        let settled = self.channels.settle(channel);
        if settled == Settled::Removed
            && let Some(sink) = guard.as_mut()
            && sink.unsubscribe(channel).await.is_err()
        {
            *guard = None;
        }
        settled
    }
}

/// A subscription held by one waiter.
pub(crate) struct SubWatch {
    notify: Arc<Notify>,
    channel: String,
    sub: Arc<Subscriber>,
}

impl SubWatch {
    pub async fn changed(&self, until: Instant) {
        tokio::select! {
            _ = self.notify.notified() => {}
            _ = tokio::time::sleep_until(until.into()) => {}
        }
    }
}

impl Drop for SubWatch {
    fn drop(&mut self) {
        self.sub.forget(&self.channel);
    }
}

#[async_trait]
impl Watch for SubWatch {
    async fn changed(&mut self, until: Instant) {
        SubWatch::changed(self, until).await
    }
}
