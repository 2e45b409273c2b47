//! What a lease-table store's process has heard of each key's waiting queue: the ticket a
//! release called last, whether the key is free, and the pokes that make every waiter look.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use tokio::sync::watch;

use crate::Key;

/// What this process has heard about the waiting queue of each key (from notifications and
/// its own releases): the ticket called last, and since when the key is free if it was
/// released and not taken since. Waiters sleep on a per-key change counter.
#[derive(Default)]
pub(super) struct Queues(Mutex<HashMap<String, KeyQueue>>);

pub(super) struct KeyQueue {
    changes: watch::Sender<u64>,
    turn: i64,
    free_since: Option<Instant>,
    /// Bumped when every waiter must look again (a notification of an older format, or a
    /// listener reconnected after releases may have gone unseen).
    pokes: u64,
}

/// A key's queue as a waiter sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct QueueState {
    pub(super) turn: i64,
    pub(super) free_since: Option<Instant>,
    pub(super) pokes: u64,
}

impl Queues {
    pub(super) fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, KeyQueue>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn subscribe(&self, key: &Key) -> watch::Receiver<u64> {
        self.map()
            .entry(key.as_str().to_owned())
            .or_insert_with(|| KeyQueue {
                changes: watch::Sender::new(0),
                turn: 0,
                free_since: None,
                pokes: 0,
            })
            .changes
            .subscribe()
    }

    pub(super) fn state(&self, key: &Key) -> QueueState {
        self.map().get(key.as_str()).map_or(
            QueueState { turn: 0, free_since: None, pokes: 0 },
            |q| QueueState { turn: q.turn, free_since: q.free_since, pokes: q.pokes },
        )
    }

    /// Applies a change to `key`'s queue, if anyone here waits on it.
    pub(super) fn update(&self, key: &str, f: impl FnOnce(&mut KeyQueue)) {
        let mut map = self.map();
        let Some(q) = map.get_mut(key) else { return };
        if q.changes.receiver_count() == 0 {
            map.remove(key);
            return;
        }
        f(q);
        q.changes.send_modify(|n| *n += 1);
    }

    /// The key was released and ticket `turn` called.
    pub(super) fn released(&self, key: &str, turn: i64) {
        self.update(key, |q| {
            q.turn = q.turn.max(turn);
            q.free_since = Some(Instant::now());
        });
    }

    /// The waiter holding ticket `turn` took the key.
    pub(super) fn taken(&self, key: &str, turn: i64) {
        self.update(key, |q| {
            q.turn = q.turn.max(turn);
            q.free_since = None;
        });
    }

    /// A notification: `r TURN KEY` (released), `g TURN KEY` (taken by the called waiter),
    /// `s 0 KEY` (the holder shortened its lease: every waiter reads the new expiry), or a
    /// bare key (a release by a version without queues: everyone looks again).
    pub(super) fn notified(&self, payload: &str) {
        let mut parts = payload.splitn(3, ' ');
        match (parts.next(), parts.next().map(str::parse::<i64>), parts.next()) {
            (Some("r"), Some(Ok(turn)), Some(key)) => self.released(key, turn),
            (Some("g"), Some(Ok(turn)), Some(key)) => self.taken(key, turn),
            (Some("s"), Some(Ok(_)), Some(key)) => self.update(key, |q| q.pokes += 1),
            _ => self.update(payload, |q| q.pokes += 1),
        }
    }

    /// Every waiter looks again.
    pub(super) fn poke_all(&self) {
        let mut map = self.map();
        map.retain(|_, q| q.changes.receiver_count() > 0);
        for q in map.values_mut() {
            q.pokes += 1;
            q.changes.send_modify(|n| *n += 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The notification formats: `r TURN KEY` calls a ticket and frees the key, `g TURN KEY`
    /// says the called waiter took it, and a bare key (a release by a version without the
    /// queue) makes every waiter look again. Keys may contain spaces.
    #[test]
    fn queue_notifications() {
        let q = Queues::default();
        let key = Key::new("a key").unwrap();
        let _rx = q.subscribe(&key);
        q.notified("r 3 a key");
        let s = q.state(&key);
        assert_eq!(s.turn, 3);
        assert!(s.free_since.is_some());
        q.notified("g 2 a key");
        let s = q.state(&key);
        assert_eq!((s.turn, s.free_since, s.pokes), (3, None, 0), "turns never go back");
        q.notified("a key");
        assert_eq!(q.state(&key).pokes, 1);
        q.notified("r x a key");
        assert_eq!(q.state(&key).pokes, 1, "a malformed payload names no waited-on key");
        q.notified("r 9 other");
        assert_eq!(q.state(&key).turn, 3);
        q.notified("s 0 a key");
        let s = q.state(&key);
        assert_eq!((s.turn, s.pokes), (3, 2), "a shortened lease makes every waiter look");
    }
}
