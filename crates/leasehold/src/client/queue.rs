//! In-process coordination of one [`crate::Locker`]'s acquirers, per key.
//!
//! Waiting acquirers of a key form a FIFO queue, and only its head talks to the store. While
//! a lease of the same locker holds the key, the head does not ask the store at all: it
//! waits for that lease to be released (or lost). A handoff between tasks of one process so
//! costs exactly the release and the next grant, without barging or herds. The store stays
//! the only authority: this only decides *when* to ask it.
//!
//! It also keeps a locker from waiting on itself: every lease it grants is registered here
//! with the task (or thread) that acquired it, and an acquire of a key this locker holds
//! is answered at once when it could only wait on itself (`docs/design.md` §3).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use tokio::sync::watch;

use crate::client::lease_state::Shared;
use crate::{FenceToken, Key, LostReason, Mode, OwnerToken};

/// Who is asking: the tokio task, or (outside one, as in `block_on`) the thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ident {
    Task(tokio::task::Id),
    Thread(std::thread::ThreadId),
}

impl Ident {
    pub fn current() -> Self {
        tokio::task::try_id()
            .map_or_else(|| Ident::Thread(std::thread::current().id()), Ident::Task)
    }
}

/// Why [`Local::enter`] sends the acquirer away without asking the store.
#[derive(Debug)]
pub(crate) enum Refused {
    /// A live lease of this locker holds the key, and waiting would be waiting on itself.
    Ours(FenceToken),
    /// The wait ran out in the queue.
    Timeout,
}

#[derive(Debug, Default)]
pub(crate) struct Local {
    keys: Mutex<HashMap<Key, Arc<LocalKey>>>,
}

#[derive(Debug)]
pub(crate) struct LocalKey {
    key: Key,
    /// FIFO of waiting acquirers (made by the first one: one-shot acquires never queue).
    queue: std::sync::OnceLock<Arc<tokio::sync::Mutex<()>>>,
    /// The lease of this locker holding the key, if any, and who acquired it.
    holder: Mutex<Option<(Weak<Shared>, Ident)>>,
    /// Bumped whenever `holder` is set or cleared (made by the first waiter to subscribe).
    changes: std::sync::OnceLock<watch::Sender<u64>>,
    /// When `holder` was last cleared (for the handoff-wait metric).
    freed_at: Mutex<Option<Instant>>,
    /// One-shot acquires of this locker whose store request is out (changed with `holder`
    /// locked, announced like it): a one-shot answered busy waits for the others to land
    /// before it says whose grant it met.
    flights: std::sync::atomic::AtomicUsize,
}

impl Local {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Arc<LocalKey>>> {
        self.keys.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Admits an acquirer of `key` to the store. With `until` (a waiting acquire): takes a
    /// turn in the key's FIFO, then waits until no live lease of this locker holds the key.
    /// Without (one attempt): no queueing. Either way, a live lease of this locker on the key
    /// refuses at once when waiting could only be waiting on itself: a one-shot acquire, or
    /// the same task (thread) that acquired it asking again. A release of the key by this
    /// locker still in flight (a dropped lease) is waited for, up to `settle`, so that
    /// acquiring right after a drop does not meet our own grant.
    pub async fn enter(
        self: &Arc<Self>,
        key: &Key,
        until: Option<Instant>,
        me: Ident,
        settle: std::time::Duration,
    ) -> Result<Slot, Refused> {
        // The slot holds the only reference besides the map, so dropping it on any path tidies.
        let entry = self.get(key);
        let mut slot =
            Slot { local: self.clone(), entry: entry.clone(), _turn: None, flying: false };
        if let Some((h, who)) = entry.holder()
            && h.lost_now().is_none()
            && (until.is_none() || who == me)
        {
            return Err(Refused::Ours(h.id.token()));
        }
        if let Some(until) = until {
            // Queue for the turn, but give up at once if meanwhile a lease of this same task
            // (an earlier future of a `join!`) is granted the key: waiting would be on itself.
            let mut changes = entry.subscribe();
            let turn = entry.queue.get_or_init(Arc::default).clone().lock_owned();
            tokio::pin!(turn);
            let guard = loop {
                if let Some(fence) = entry.held_by(me) {
                    return Err(Refused::Ours(fence));
                }
                tokio::select! {
                    biased;
                    g = &mut turn => break g,
                    _ = changes.changed() => {}
                    _ = tokio::time::sleep_until(until.into()) => return Err(Refused::Timeout),
                }
            };
            slot._turn = Some(guard);
            entry.wait_not_held(until, me).await?;
        }
        let settle_until = Instant::now() + settle;
        entry.wait_released(until.map_or(settle_until, |u| u.min(settle_until))).await;
        Ok(slot)
    }

    fn get(&self, key: &Key) -> Arc<LocalKey> {
        self.map()
            .entry(key.clone())
            .or_insert_with(|| {
                Arc::new(LocalKey {
                    key: key.clone(),
                    queue: std::sync::OnceLock::new(),
                    holder: Mutex::new(None),
                    changes: std::sync::OnceLock::new(),
                    freed_at: Mutex::new(None),
                    flights: std::sync::atomic::AtomicUsize::new(0),
                })
            })
            .clone()
    }

    /// Drops the entry when nobody but the map (and the caller) uses it, once the map holds
    /// more than [`KEEP_IDLE`] entries: a key acquired over and over keeps its entry instead
    /// of building and dropping one per acquisition, and idle entries stay bounded (at most
    /// `KEEP_IDLE` survive: past it, every entry let go is removed).
    pub fn tidy(&self, lk: &Arc<LocalKey>) {
        let mut m = self.map();
        if m.len() > KEEP_IDLE
            && Arc::strong_count(lk) <= 2
            && lk.holder.lock().unwrap_or_else(|p| p.into_inner()).is_none()
        {
            m.remove(&lk.key);
        }
    }
}

/// The name under which the locker's per-key queue tracks a grant: the key itself for an
/// exclusive one; for a reader a name of its own (holding a NUL, so no caller's key equals
/// it), so that readers of one locker neither queue behind each other nor wait on each other.
pub(crate) fn local_key(key: &Key, mode: Mode, owner: &OwnerToken) -> Key {
    match mode {
        Mode::Shared => Key::internal(format!("{}\0shared\0{owner}", key.as_str())),
        _ => key.clone(),
    }
}

/// Idle per-key entries a locker keeps (see [`Local::tidy`]).
pub(crate) const KEEP_IDLE: usize = 256;

/// An acquirer's place in [`Local`]: holds the queue turn (if any) and tidies the key's entry
/// when dropped, on every path out of an acquire, cancellation included.
#[derive(Debug)]
pub(crate) struct Slot {
    local: Arc<Local>,
    entry: Arc<LocalKey>,
    _turn: Option<tokio::sync::OwnedMutexGuard<()>>,
    /// Whether this one-shot acquire is counted in the key's `flights`.
    flying: bool,
}

impl Slot {
    /// What a lease granted in this slot registers with.
    pub fn registration(&self) -> (Arc<Local>, Arc<LocalKey>) {
        (self.local.clone(), self.entry.clone())
    }

    /// When a lease of this locker last let the key go.
    pub fn freed_at(&self) -> Option<Instant> {
        *self.entry.freed_at.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts this one-shot acquire as in flight until the slot is dropped (after its lease,
    /// if granted, is registered as the holder).
    pub fn take_off(&mut self) {
        let _h = self.entry.holder.lock().unwrap_or_else(|p| p.into_inner());
        self.entry.flights.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.flying = true;
    }

    /// After the store answered this one-shot acquire busy: the fence of this locker's own
    /// grant of the key, if that is what it met. Waits (until `until`) for the other one-shot
    /// acquires of the key in flight (a `join!` of two) to land and register first.
    pub async fn ours_after_busy(&self, until: Instant) -> Option<FenceToken> {
        let mut rx = self.entry.subscribe();
        loop {
            {
                let h = self.entry.holder.lock().unwrap_or_else(|p| p.into_inner());
                let live =
                    h.as_ref().and_then(|(w, _)| w.upgrade()).filter(|s| s.lost_now().is_none());
                if let Some(s) = live {
                    return Some(s.id.token());
                }
                let others = self.entry.flights.load(std::sync::atomic::Ordering::SeqCst)
                    - usize::from(self.flying);
                if others == 0 {
                    return None;
                }
            }
            tokio::select! {
                _ = rx.changed() => {}
                _ = tokio::time::sleep_until(until.into()) => return None,
            }
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if self.flying {
            let _h = self.entry.holder.lock().unwrap_or_else(|p| p.into_inner());
            self.entry.flights.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            self.entry.changed();
        }
        // The turn passes on first, then the entry goes if nobody else uses it.
        self._turn = None;
        self.local.tidy(&self.entry);
    }
}

impl LocalKey {
    fn holder(&self) -> Option<(Arc<Shared>, Ident)> {
        let h = self.holder.lock().unwrap_or_else(|p| p.into_inner());
        h.as_ref().and_then(|(w, who)| Some((w.upgrade()?, *who)))
    }

    pub fn set_holder(&self, lease: &Arc<Shared>, who: Ident) {
        let mut h = self.holder.lock().unwrap_or_else(|p| p.into_inner());
        *h = Some((Arc::downgrade(lease), who));
        self.changed();
    }

    /// Tells the acquirers waiting on this key that its holder changed. Called with the holder
    /// locked: a waiter subscribes before it reads the holder (under the same lock), so one
    /// that read the old holder is counted here, and when nobody waits (the uncontended case)
    /// nothing is sent at all.
    fn changed(&self) {
        if let Some(tx) = self.changes.get()
            && tx.receiver_count() > 0
        {
            tx.send_modify(|n| *n += 1);
        }
    }

    /// A receiver of holder changes; subscribe before reading the holder (see `changed`).
    fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.get_or_init(|| watch::Sender::new(0)).subscribe()
    }

    /// The fence of a live lease of this locker on the key that `me` acquired.
    fn held_by(&self, me: Ident) -> Option<FenceToken> {
        let (h, who) = self.holder()?;
        (who == me && h.lost_now().is_none()).then(|| h.id.token())
    }

    /// Clears the holder if it is `lease`, waking the head of the queue.
    pub fn clear_holder(&self, lease: &Shared) {
        let mut h = self.holder.lock().unwrap_or_else(|p| p.into_inner());
        let ours = h.as_ref().is_some_and(|(w, _)| std::ptr::eq(w.as_ptr(), lease));
        if ours {
            *self.freed_at.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
            *h = None;
            self.changed();
        }
    }

    /// Waits until no live lease of this locker holds the key; refused at once if the holder
    /// is (or becomes) a lease `me` acquired, or when `until` passes.
    async fn wait_not_held(&self, until: Instant, me: Ident) -> Result<(), Refused> {
        let mut rx = self.subscribe();
        loop {
            let Some((h, who)) = self.holder() else { return Ok(()) };
            if h.lost_now().is_some() {
                return Ok(());
            }
            if who == me {
                return Err(Refused::Ours(h.id.token()));
            }
            let ended = h.ended();
            drop(h);
            tokio::select! {
                _ = rx.changed() => {}
                _ = ended => return Ok(()),
                _ = tokio::time::sleep_until(until.into()) => return Err(Refused::Timeout),
            }
        }
    }
}

impl LocalKey {
    /// Waits, up to `until`, while a lease of this locker that is being released (dropped,
    /// its release in flight) still holds the key.
    async fn wait_released(&self, until: Instant) {
        let mut rx = self.subscribe();
        loop {
            let releasing =
                self.holder().is_some_and(|(h, _)| h.lost_now() == Some(LostReason::Released));
            if !releasing {
                return;
            }
            tokio::select! {
                _ = rx.changed() => {}
                _ = tokio::time::sleep_until(until.into()) => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::time::Duration;

    fn enter(
        local: &Arc<Local>,
        key: &Key,
        wait: Option<Duration>,
    ) -> impl Future<Output = Result<Slot, Refused>> + Send + 'static {
        let (local, key) = (local.clone(), key.clone());
        async move {
            let until = wait.map(|w| Instant::now() + w);
            local.enter(&key, until, Ident::current(), Duration::ZERO).await
        }
    }

    /// Every way out of a wait leaves the key's entry idle: timeout, success, cancellation
    /// (no holder, no turn taken, nobody else holding it); and idle entries stay bounded.
    #[tokio::test]
    async fn entries_are_tidied() {
        let idle = |local: &Local| {
            local.map().values().all(|lk| {
                Arc::strong_count(lk) == 1
                    && lk.holder().is_none()
                    && lk.queue.get().is_none_or(|q| q.try_lock().is_ok())
            })
        };
        let local = Arc::new(Local::default());
        let key = Key::new("k").unwrap();
        let held = enter(&local, &key, Some(Duration::from_secs(1))).await.unwrap();
        let queued = tokio::spawn(enter(&local, &key, Some(Duration::from_secs(60))));
        tokio::time::sleep(Duration::from_millis(20)).await;
        queued.abort(); // cancelled while queued behind `held`
        let _ = queued.await;
        let timed_out = enter(&local, &key, Some(Duration::from_millis(20))).await;
        assert!(matches!(timed_out, Err(Refused::Timeout)), "the turn is taken");
        drop(held);
        assert!(idle(&local), "entries left in use: {:?}", local.map().keys().collect::<Vec<_>>());
        drop(enter(&local, &key, None).await.unwrap());
        assert!(idle(&local) && local.map().len() == 1);
        for i in 0..3 * KEEP_IDLE {
            let k = Key::new(format!("k{i}")).unwrap();
            drop(enter(&local, &k, Some(Duration::from_secs(1))).await.unwrap());
        }
        assert!(idle(&local), "entries left in use");
        assert!(local.map().len() <= KEEP_IDLE + 1, "{} idle entries kept", local.map().len());
    }
}
