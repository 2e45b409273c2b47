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
#[cfg_attr(not(feature = "mysql"), allow(dead_code))]
pub(crate) struct BellWatch {
    rx: watch::Receiver<u64>,
    /// The poll interval: from `min`, doubling to `max` while nothing rings.
    min: Duration,
    max: Duration,
    cur: Duration,
}

#[cfg_attr(not(feature = "mysql"), allow(dead_code))]
impl BellWatch {
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
