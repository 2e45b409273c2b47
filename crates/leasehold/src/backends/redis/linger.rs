//! The waiters of each channel a release-notification subscriber listens on, shared by one
//! server's subscriber (`pubsub.rs`) and the cluster's (`shard_sub.rs`): waiters of one key
//! in this process queue on one `Notify`, so a release wakes one of them, and a channel's
//! subscription lingers for [`LINGER`] after its last waiter leaves, so a key with steady
//! contention does not pay a subscribe and an unsubscribe on every handoff.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::sync::Notify;

/// How long an idle subscription stays.
pub(super) const LINGER: Duration = Duration::from_secs(1);

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

/// Channel name → its waiters. Cloning shares the table.
#[derive(Debug, Default, Clone)]
pub(super) struct Channels(Arc<Mutex<HashMap<String, Channel>>>);

/// What a sweeper found under the subscription lock.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Settled {
    /// Idle for a whole linger: removed, to be unsubscribed.
    Removed,
    /// Used again meanwhile, idle now: look again later.
    Later,
    /// A waiter is back, or the channel is gone: this sweeper ends.
    Done,
}

impl Channels {
    fn map(&self) -> MutexGuard<'_, HashMap<String, Channel>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One more waiter on `channel`: its notify, and whether the channel is new (a lingering
    /// one, without waiters, is still subscribed: only a new one needs subscribing).
    pub(super) fn join(&self, channel: &str) -> (Arc<Notify>, bool) {
        let mut map = self.map();
        let fresh = !map.contains_key(channel);
        let e = map.entry(channel.to_owned()).or_insert_with(|| Channel {
            notify: Arc::new(Notify::new()),
            waiters: 0,
            idle_since: Instant::now(),
            sweeping: false,
        });
        e.waiters += 1;
        (e.notify.clone(), fresh)
    }

    /// One waiter fewer on `channel`: true if a sweeper is to start for it.
    pub(super) fn leave(&self, channel: &str) -> bool {
        let mut map = self.map();
        let Some(e) = map.get_mut(channel) else { return false };
        e.waiters = e.waiters.saturating_sub(1);
        if e.waiters == 0 {
            e.idle_since = Instant::now();
        }
        let start = e.waiters == 0 && !e.sweeping;
        e.sweeping |= start;
        start
    }

    /// Forgets `channel` at once (its subscription failed).
    pub(super) fn remove(&self, channel: &str) {
        self.map().remove(channel);
    }

    /// The channels in use or lingering, to subscribe again on a new connection.
    pub(super) fn names(&self) -> Vec<String> {
        self.map().keys().cloned().collect()
    }

    /// A release on `channel`: wakes one waiter (or the next to wait).
    pub(super) fn notify_one(&self, channel: &str) {
        if let Some(c) = self.map().get(channel) {
            c.notify.notify_one();
        }
    }

    /// Something may have been missed on `channel` (its subscription moved): wakes its
    /// waiters, who ask the store again.
    pub(super) fn notify_waiters(&self, channel: &str) {
        if let Some(c) = self.map().get(channel) {
            c.notify.notify_waiters();
        }
    }

    /// The connection went away: every waiter may have missed a release.
    pub(super) fn wake_all(&self) {
        for c in self.map().values() {
            c.notify.notify_waiters();
            c.notify.notify_one();
        }
    }

    /// When a sweeper of `channel` should look next; `None` once it is gone.
    fn due(&self, channel: &str) -> Option<Instant> {
        self.map().get(channel).map(|e| e.idle_since + LINGER)
    }

    /// Decides, under the caller's subscription lock (so a waiter arriving meanwhile keeps
    /// the subscription), whether `channel` has been idle for a whole linger.
    pub(super) fn settle(&self, channel: &str) -> Settled {
        let mut map = self.map();
        let Some(e) = map.get_mut(channel) else { return Settled::Done };
        if e.waiters > 0 {
            e.sweeping = false; // the next drop to zero starts a new sweeper
            return Settled::Done;
        }
        if e.idle_since.elapsed() < LINGER {
            return Settled::Later;
        }
        map.remove(channel);
        Settled::Removed
    }
}

/// A subscriber whose idle channels a sweeper unsubscribes.
#[async_trait]
pub(super) trait Lingering: Send + Sync + 'static {
    /// Its table of channels.
    fn channels(&self) -> &Channels;
    /// Takes the subscription lock, asks [`Channels::settle`], and unsubscribes the channel
    /// if it was removed.
    async fn unsubscribe_if_idle(&self, channel: &str) -> Settled;
}

/// Starts the sweeper of `channel` if `leave` said so (needs a runtime; without one the
/// subscription stays until the connection goes).
pub(super) fn start_sweeper<S: Lingering>(sub: &Arc<S>, channel: &str, start: bool) {
    if start && let Ok(rt) = tokio::runtime::Handle::try_current() {
        rt.spawn(sweep(Arc::downgrade(sub), channel.to_owned()));
    }
}

/// Unsubscribes `channel` once it has had no waiter for [`LINGER`] in a row.
async fn sweep<S: Lingering>(sub: Weak<S>, channel: String) {
    loop {
        let due = {
            let Some(me) = sub.upgrade() else { return };
            match me.channels().due(&channel) {
                Some(d) => d,
                None => return,
            }
        };
        tokio::time::sleep_until(due.into()).await;
        let Some(me) = sub.upgrade() else { return };
        if me.unsubscribe_if_idle(&channel).await != Settled::Later {
            return;
        }
    }
}
