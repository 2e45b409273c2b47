//! In-process coordination of one [`crate::Locker`]'s acquirers, per key.
//!
//! Waiting acquirers of a key form a FIFO queue, and only its head talks to the store. While
//! a lease of the same locker holds the key, the head does not ask the store at all: it
//! waits for that lease to be released (or lost). A handoff between tasks of one process so
//! costs exactly the release and the next grant, without barging or herds. The store stays
//! the only authority: this only decides *when* to ask it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use tokio::sync::watch;

use crate::Key;
use crate::lease::Shared;

#[derive(Debug, Default)]
pub(crate) struct Local {
    keys: Mutex<HashMap<Key, Arc<LocalKey>>>,
}

#[derive(Debug)]
pub(crate) struct LocalKey {
    key: Key,
    /// FIFO of waiting acquirers.
    pub queue: tokio::sync::Mutex<()>,
    /// The lease of this locker holding the key, if any.
    holder: Mutex<Option<Weak<Shared>>>,
    /// Bumped whenever `holder` is cleared.
    freed: watch::Sender<u64>,
}

impl Local {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Arc<LocalKey>>> {
        self.keys.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The entry of `key` if some waiter made one. Holders register only there, so a key
    /// nobody waits on costs nothing here.
    pub fn existing(&self, key: &Key) -> Option<Arc<LocalKey>> {
        self.map().get(key).cloned()
    }

    pub fn get(&self, key: &Key) -> Arc<LocalKey> {
        self.map()
            .entry(key.clone())
            .or_insert_with(|| {
                Arc::new(LocalKey {
                    key: key.clone(),
                    queue: tokio::sync::Mutex::new(()),
                    holder: Mutex::new(None),
                    freed: watch::Sender::new(0),
                })
            })
            .clone()
    }

    /// Drops the entry when nobody but the map (and the caller's `lk`) uses it.
    pub fn tidy(&self, lk: &Arc<LocalKey>) {
        let mut m = self.map();
        if Arc::strong_count(lk) <= 2 && lk.holder().is_none() {
            m.remove(&lk.key);
        }
    }
}

impl LocalKey {
    fn holder(&self) -> Option<Arc<Shared>> {
        self.holder.lock().unwrap_or_else(|p| p.into_inner()).as_ref().and_then(Weak::upgrade)
    }

    pub fn set_holder(&self, lease: &Arc<Shared>) {
        *self.holder.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::downgrade(lease));
    }

    /// Clears the holder if it is `lease`, waking the head of the queue.
    pub fn clear_holder(&self, lease: &Shared) {
        let mut h = self.holder.lock().unwrap_or_else(|p| p.into_inner());
        let ours = h.as_ref().is_some_and(|w| std::ptr::eq(w.as_ptr(), lease));
        if ours {
            *h = None;
            drop(h);
            self.freed.send_modify(|n| *n += 1);
        }
    }

    /// Waits until no live lease of this locker holds the key, or `until`. True if free.
    pub async fn wait_not_held(&self, until: Instant) -> bool {
        let mut rx = self.freed.subscribe();
        loop {
            let Some(h) = self.holder() else { return true };
            if h.lost_now().is_some() {
                return true;
            }
            let lost = h.lost();
            drop(h);
            tokio::select! {
                _ = rx.changed() => {}
                _ = lost => return true,
                _ = tokio::time::sleep_until(until.into()) => return false,
            }
        }
    }
}
