//! Release notifications over Redis pub/sub: one subscriber connection per server, waiters
//! of a key queued on one `Notify`, idle subscriptions dropped after a linger.

use super::*;

/// Release notifications: one pub/sub connection per server, shared by every waiter of the
/// store. Waiters of one key in this process queue on one `Notify`, and a release wakes one
/// of them, so a handoff costs one attempt, not one per waiter.
#[derive(Debug)]
pub(crate) struct Subscriber {
    client: redis::Client,
    sink: tokio::sync::Mutex<Option<PubSubSink>>,
    channels: Channels,
}

/// Channel name → (waiters' notify, number of waiters).
type Channels = Arc<Mutex<HashMap<String, Channel>>>;

/// One subscribed channel.
#[derive(Debug)]
struct Channel {
    notify: Arc<Notify>,
    waiters: usize,
    /// When `waiters` last dropped to zero.
    idle_since: Instant,
    /// A sweeper task is pending for this channel.
    sweeping: bool,
}

impl Subscriber {
    pub(super) fn new(client: redis::Client) -> Arc<Self> {
        Arc::new(Subscriber {
            client,
            sink: tokio::sync::Mutex::new(None),
            channels: Arc::default(),
        })
    }

    fn channels(&self) -> std::sync::MutexGuard<'_, HashMap<String, Channel>> {
        self.channels.lock().unwrap_or_else(|p| p.into_inner())
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
            let names: Vec<String> = self.channels().keys().cloned().collect();
            if !names.is_empty() {
                sink.subscribe(&names).await.map_err(|e| redis_err("redis", "subscribe", e))?;
            }
            let channels = self.channels.clone();
            tokio::spawn(async move {
                while let Some(msg) = stream.next().await {
                    let map = channels.lock().unwrap_or_else(|p| p.into_inner());
                    if let Some(c) = map.get(msg.get_channel_name()) {
                        c.notify.notify_one();
                    }
                }
                // Connection gone: wake everyone (they may have missed a release).
                for c in channels.lock().unwrap_or_else(|p| p.into_inner()).values() {
                    c.notify.notify_waiters();
                    c.notify.notify_one();
                }
            });
            **guard = Some(sink);
        }
        Ok(guard.as_mut().expect("just set"))
    }

    /// Subscribes (confirmed by the server) before returning, so the caller's next attempt
    /// cannot miss a release.
    pub async fn watch(self: &Arc<Self>, channel: String) -> Result<SubWatch> {
        let mut guard = self.sink.lock().await;
        let (notify, fresh) = {
            let mut map = self.channels();
            // A lingering entry (no waiters) is still subscribed: only a new one needs SUBSCRIBE.
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

    /// One waiter fewer on `channel`. The subscription lingers for [`LINGER`] after its last
    /// waiter leaves, so keys with steady contention do not pay SUBSCRIBE + UNSUBSCRIBE on
    /// every handoff.
    fn forget(self: &Arc<Self>, channel: &str) {
        let sweep = {
            let mut map = self.channels();
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

/// Unsubscribes `channel` once it has had no waiter for [`LINGER`] in a row.
async fn sweep_channel(sub: std::sync::Weak<Subscriber>, channel: String) {
    loop {
        let due = {
            let Some(me) = sub.upgrade() else { return };
            let map = me.channels();
            match map.get(&channel) {
                Some(e) => e.idle_since + LINGER,
                None => return,
            }
        };
        tokio::time::sleep_until(due.into()).await;
        let Some(me) = sub.upgrade() else { return };
        // Decided under the sink lock: a watcher that came back meanwhile wins.
        let mut guard = me.sink.lock().await;
        {
            let mut map = me.channels();
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
        if let Some(sink) = guard.as_mut()
            && sink.unsubscribe(&channel).await.is_err()
        {
            *guard = None;
        }
        return;
    }
}

/// How long an idle subscription stays.
const LINGER: Duration = Duration::from_secs(1);

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
