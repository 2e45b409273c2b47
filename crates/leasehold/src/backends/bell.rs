//! Per-key doorbells inside one process: a release (or a store notification) rings the key,
//! and every [`BellWatch`] on it wakes. Rings are counted, so a ring between a refused
//! attempt and the wait is never missed.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::sync::watch;

use crate::Key;
use crate::store::Watch;

/// The doorbells of one store (or one scope shared by several stores).
#[derive(Debug, Default)]
pub(crate) struct Bells(Mutex<HashMap<String, watch::Sender<u64>>>);

#[cfg_attr(not(feature = "mysql"), allow(dead_code))]
impl Bells {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, watch::Sender<u64>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A receiver that sees every later ring of `key`.
    pub fn subscribe(&self, key: &Key) -> watch::Receiver<u64> {
        self.map()
            .entry(key.as_str().to_owned())
            .or_insert_with(|| watch::Sender::new(0))
            .subscribe()
    }

    /// Wakes the watchers of `key`, if any (and forgets the key if none is left).
    pub fn ring(&self, key: &str) {
        let mut map = self.map();
        let Some(tx) = map.get(key) else { return };
        if tx.receiver_count() == 0 {
            map.remove(key);
        } else {
            tx.send_modify(|n| *n += 1);
        }
    }
}

/// Waits for a ring, or for a timer that also fires after a short, doubling interval: for
/// stores whose releases in other processes ring nothing here.
pub(crate) struct BellWatch {
    rx: watch::Receiver<u64>,
    /// The poll interval: from `min`, doubling to `max` while nothing rings.
    min: Duration,
    max: Duration,
    cur: Duration,
}

impl BellWatch {
    #[cfg_attr(not(any(feature = "mysql", feature = "sqlite")), allow(dead_code))]
    /// Rings, plus a poll every `min`, doubling up to `max` while nothing rings.
    pub fn polling(rx: watch::Receiver<u64>, min: Duration, max: Duration) -> Self {
        BellWatch { rx, min, max, cur: min }
    }

    /// Returns at a ring, at the backoff timer, or at `until`.
    pub async fn wait(&mut self, until: Instant) {
        let wake = until.min(Instant::now() + self.cur);
        tokio::select! {
            r = self.rx.changed() => {
                if r.is_err() {
                    // The sender went away (cannot happen while we hold a receiver); use
                    // the timer.
                    tokio::time::sleep_until(wake.into()).await;
                }
                self.cur = self.min;
            }
            _ = tokio::time::sleep_until(wake.into()) => {
                self.cur = (self.cur * 2).min(self.max);
            }
        }
    }
}

#[async_trait]
impl Watch for BellWatch {
    async fn changed(&mut self, until: Instant) {
        self.wait(until).await;
    }
}

/// For stores that wait inside the server (their `acquire` is overridden): sleeps to `until`.
#[cfg_attr(not(any(feature = "postgres", feature = "mysql")), allow(dead_code))]
pub(crate) struct SleepWatch;

#[async_trait]
impl Watch for SleepWatch {
    async fn changed(&mut self, until: Instant) {
        tokio::time::sleep_until(until.into()).await;
    }
}

/// Keys whose abandoned requests are still being undone, so a release in this process can
/// wait until no abandoned request can grab the lock it frees.
#[cfg_attr(not(any(feature = "postgres", feature = "mysql")), allow(dead_code))]
#[derive(Default)]
pub(crate) struct Undoing {
    keys: Mutex<HashMap<String, usize>>,
    done: tokio::sync::Notify,
}

#[cfg_attr(not(any(feature = "postgres", feature = "mysql")), allow(dead_code))]
impl Undoing {
    pub fn start(&self, name: &str) {
        *self.keys.lock().unwrap_or_else(|p| p.into_inner()).entry(name.to_owned()).or_default() +=
            1;
    }

    pub fn finish(&self, name: &str) {
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = keys.get_mut(name) {
            *n -= 1;
            if *n == 0 {
                keys.remove(name);
            }
        }
        drop(keys);
        self.done.notify_waiters();
    }

    pub async fn settled(&self, name: &str, limit: Duration) {
        // The common case, nothing being undone: no timer.
        if !self.keys.lock().unwrap_or_else(|p| p.into_inner()).contains_key(name) {
            return;
        }
        let _ = tokio::time::timeout(limit, async {
            loop {
                let done = self.done.notified();
                if !self.keys.lock().unwrap_or_else(|p| p.into_inner()).contains_key(name) {
                    return;
                }
                done.await;
            }
        })
        .await;
    }
}

/// `acquire` for stores that wait inside the server (or in a server-side queue): one call
/// carrying the whole wait (`grant(None)`: a single attempt), whose answer must come within
/// the wait plus the op timeout, else the outcome is unknown.
#[cfg_attr(
    not(any(feature = "postgres", feature = "mysql", feature = "etcd", feature = "zookeeper")),
    allow(dead_code)
)]
pub(crate) async fn server_side_acquire<F, Fut>(
    req: &crate::store::AcquireRequest<'_>,
    until: Option<Instant>,
    grant: F,
) -> crate::Result<crate::store::Attempt>
where
    F: FnOnce(Option<Duration>) -> Fut,
    Fut: std::future::Future<Output = crate::Result<crate::store::Attempt>>,
{
    let wait = until.map(|u| u.saturating_duration_since(Instant::now())).filter(|w| !w.is_zero());
    let limit = wait.map_or(req.op_timeout, |w| w + req.op_timeout);
    tokio::time::timeout(limit, grant(wait)).await.map_err(|_| {
        crate::Error::UnknownOutcome(format!("acquire of {:?} got no answer", req.key))
    })?
}

/// The two signals of a store-side session (an etcd lease, a ZooKeeper session) that every
/// grant on it carries: whether the store confirms it right now (`admit()`), and why it ended
/// (`lost()`). The task that follows the session holds the senders.
#[cfg(any(feature = "etcd", feature = "zookeeper"))]
#[derive(Debug, Clone)]
pub(crate) struct SessionSignals {
    live: watch::Receiver<bool>,
    end: watch::Receiver<Option<String>>,
}

#[cfg(any(feature = "etcd", feature = "zookeeper"))]
impl SessionSignals {
    /// A live session's signals and the senders that change them.
    pub fn new() -> (watch::Sender<bool>, watch::Sender<Option<String>>, Self) {
        let (live_tx, live) = watch::channel(true);
        let (end_tx, end) = watch::channel(None);
        (live_tx, end_tx, SessionSignals { live, end })
    }

    /// Why the session ended, once it has.
    #[cfg_attr(not(feature = "zookeeper"), allow(dead_code))]
    pub fn ended_because(&self) -> Option<String> {
        self.end.borrow().clone()
    }

    /// Whether the session has ended.
    pub fn ended(&self) -> bool {
        self.end.borrow().is_some()
    }

    /// A grant of `fence` on this session, carrying both signals.
    pub fn grant(
        &self,
        fence: crate::FenceToken,
        sent: Instant,
        store: &'static str,
    ) -> crate::store::Grant {
        let mut end = self.end.clone();
        crate::store::Grant::new(fence, sent)
            .with_session_end(Box::pin(async move {
                match end.wait_for(|e| e.is_some()).await {
                    Ok(e) => e.clone().unwrap_or_default(),
                    Err(_) => format!("the {store} session was closed"),
                }
            }))
            .with_session_live(self.live.clone())
    }
}
