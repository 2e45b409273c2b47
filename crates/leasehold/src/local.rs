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
use crate::held::Shared;

#[derive(Debug, Default)]
pub(crate) struct Local {
    keys: Mutex<HashMap<Key, Arc<LocalKey>>>,
}

#[derive(Debug)]
pub(crate) struct LocalKey {
    key: Key,
    /// FIFO of waiting acquirers.
    queue: Arc<tokio::sync::Mutex<()>>,
    /// The lease of this locker holding the key, if any.
    holder: Mutex<Option<Weak<Shared>>>,
    /// Bumped whenever `holder` is cleared.
    freed: watch::Sender<u64>,
}

impl Local {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Arc<LocalKey>>> {
        self.keys.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// For one attempt: no queueing, but the key's entry if some waiter made one, so the
    /// grant can register there. A key nobody waits on costs nothing here.
    pub fn peek(self: &Arc<Self>, key: &Key) -> Slot {
        Slot { local: self.clone(), entry: self.map().get(key).cloned(), _turn: None }
    }

    /// For a waiting acquire: takes a turn in the key's FIFO, then waits until no live lease
    /// of this locker holds the key. `None` if `until` comes first.
    pub async fn wait_turn(self: &Arc<Self>, key: &Key, until: Instant) -> Option<Slot> {
        // The slot holds the only reference besides the map, so dropping it on any path tidies.
        let mut slot = Slot { local: self.clone(), entry: Some(self.get(key)), _turn: None };
        let queue = slot.entry.as_ref()?.queue.clone();
        slot._turn = Some(tokio::time::timeout_at(until.into(), queue.lock_owned()).await.ok()?);
        let free = slot.entry.as_ref()?.wait_not_held(until).await;
        free.then_some(slot)
    }

    fn get(&self, key: &Key) -> Arc<LocalKey> {
        self.map()
            .entry(key.clone())
            .or_insert_with(|| {
                Arc::new(LocalKey {
                    key: key.clone(),
                    queue: Arc::new(tokio::sync::Mutex::new(())),
                    holder: Mutex::new(None),
                    freed: watch::Sender::new(0),
                })
            })
            .clone()
    }

    /// Drops the entry when nobody but the map (and the caller) uses it.
    pub fn tidy(&self, lk: &Arc<LocalKey>) {
        let mut m = self.map();
        if Arc::strong_count(lk) <= 2 && lk.holder().is_none() {
            m.remove(&lk.key);
        }
    }
}

/// An acquirer's place in [`Local`]: holds the queue turn (if any) and tidies the key's entry
/// when dropped, on every path out of an acquire, cancellation included.
#[derive(Debug)]
pub(crate) struct Slot {
    local: Arc<Local>,
    entry: Option<Arc<LocalKey>>,
    _turn: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Slot {
    /// What a lease granted in this slot registers with.
    pub fn registration(&self) -> Option<(Arc<Local>, Arc<LocalKey>)> {
        self.entry.clone().map(|e| (self.local.clone(), e))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        // The turn passes on first, then the entry goes if nobody else uses it.
        self._turn = None;
        if let Some(e) = &self.entry {
            self.local.tidy(e);
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
    async fn wait_not_held(&self, until: Instant) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Every way out of a wait leaves no entry behind: timeout, success, cancellation.
    #[tokio::test]
    async fn entries_are_tidied() {
        let local = Arc::new(Local::default());
        let key = Key::new("k").unwrap();
        let held = local.wait_turn(&key, Instant::now() + Duration::from_secs(1)).await.unwrap();
        let queued = {
            let (local, key) = (local.clone(), key.clone());
            tokio::spawn(async move {
                local.wait_turn(&key, Instant::now() + Duration::from_secs(60)).await
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        queued.abort(); // cancelled while queued behind `held`
        let _ = queued.await;
        let timed_out = local.wait_turn(&key, Instant::now() + Duration::from_millis(20)).await;
        assert!(timed_out.is_none(), "the turn is taken");
        drop(held);
        assert!(
            local.map().is_empty(),
            "entries left: {:?}",
            local.map().keys().collect::<Vec<_>>()
        );
        drop(local.peek(&key));
        assert!(local.map().is_empty());
    }
}
