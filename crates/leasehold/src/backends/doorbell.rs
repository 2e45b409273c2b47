//! Per-key doorbells inside one process: a release (or a store notification) rings the key,
//! and every receiver subscribed to it wakes. Rings are counted, so a ring between a refused
//! attempt and the wait is never missed.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::watch;

use crate::Key;

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
