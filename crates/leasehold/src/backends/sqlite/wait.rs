//! Waiting on `sqlite://`: tickets in `leasehold_queue`, rung by the doorbell.
//!
//! A refused waiter takes a ticket (`tickets + 1`) in its refused attempt's transaction; a
//! release calls the next ticket (`turn`) in its own. A ring (the doorbell, or a release by
//! this store) makes every waiter of the key *read* the key's state, which takes no write
//! lock; only the waiter whose ticket is called attempts at once, so a handoff costs one
//! attempt instead of one per waiter. The others attempt when their ticket is called, after
//! a stagger per ticket ahead of them when the key stays free (the called waiter gave up or
//! died), at the holder's expiry, or at `until`. Without a doorbell they read at a 1–50 ms
//! backoff; with one, once a second (a release by a build without the doorbell).

use std::time::{Duration, Instant};

use rusqlite::{Transaction, params};
use tokio::sync::watch;

use super::grant::grant_in;
use super::{SqlExt, SqliteStore, boot, fence, ns, shared};
use crate::store::{AcquireRequest, Attempt, Grant, within_op_timeout};
use crate::{Key, Result};

/// How long a waiter whose ticket was not called waits per ticket ahead of it, once the key
/// is free, before it tries anyway.
const STAGGER: Duration = Duration::from_millis(5);
const POLL_MIN: Duration = Duration::from_millis(1);
const POLL_MAX: Duration = Duration::from_millis(50);
/// With a doorbell: the slow look that still sees releases that rang nothing.
const SAFETY_POLL: Duration = Duration::from_secs(1);
/// How far ahead of now a waiter sets its key's `leasehold_queue.alive_ns`; it sets it again
/// every half of this while it waits, so a waiter that runs keeps it in the future and the
/// pruning task (`prune.rs`, which needs it a horizon in the past) never takes its row.
pub(super) const WAITER_LIVE: Duration = Duration::from_secs(10);

/// In a release's transaction: calls the next ticket, if anyone holds one.
pub(super) fn call_next(tx: &Transaction<'_>, key: &Key) -> Result<()> {
    tx.execute(
        "UPDATE leasehold_queue SET turn = max(turn, min(turn + 1, tickets)) WHERE key = ?1",
        [key.as_str()],
    )
    .sql()?;
    Ok(())
}

/// What a test counts: grant attempts by waiters, and their looks at the queue.
#[cfg(test)]
#[derive(Debug, Default)]
pub(super) struct Counts {
    pub attempts: std::sync::atomic::AtomicU64,
    pub looks: std::sync::atomic::AtomicU64,
    /// Rings of the doorbell (not of this store's own releases).
    pub doorbell_rings: std::sync::atomic::AtomicU64,
}

enum Queued {
    Granted(Grant),
    Busy { left: Duration, ticket: i64 },
}

/// The key's queue as a waiter reads it: the ticket called last, and whether the key is free.
struct Look {
    turn: i64,
    free: bool,
}

impl SqliteStore {
    async fn grant_queued(&self, req: &AcquireRequest<'_>, ticket: i64) -> Result<Queued> {
        #[cfg(test)]
        self.counts.attempts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let (key, owner, ttl) = (req.key.clone(), req.owner.to_string(), ns(req.ttl));
        let info = req.info.map(crate::HolderInfo::encode);
        let ask = shared::Ask::of(req, true);
        let live = ns(self.waiter_live);
        let sent = Instant::now();
        self.blocking(move |c, boot| {
            let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).sql()?;
            let now = boot::now_ns()?;
            let out = match grant_in(&tx, &key, &owner, ttl, boot, now, info.as_deref(), &ask)? {
                Ok(f) => {
                    if ticket > 0 {
                        tx.execute(
                            "UPDATE leasehold_queue SET turn = max(turn, ?2) WHERE key = ?1",
                            params![key.as_str(), ticket],
                        )
                        .sql()?;
                    }
                    Queued::Granted(Grant::new(fence(f), sent))
                }
                Err(left) => {
                    // No ticket yet, or ours was called and someone else took the key: the
                    // next one.
                    // The row stays while this waiter lives: `alive_ns` (the boot clock) is
                    // kept ahead of now by each attempt and by `refresh` (see `prune.rs`).
                    let ticket: i64 = tx
                        .query_row(
                            "INSERT INTO leasehold_queue (key, tickets, turn, boot_id, alive_ns)
                             VALUES (?1, 1, 0, ?3, ?4)
                             ON CONFLICT (key) DO UPDATE SET tickets = CASE
                                 WHEN ?2 > 0 AND ?2 > turn THEN tickets ELSE tickets + 1 END,
                                 boot_id = ?3,
                                 alive_ns = CASE WHEN boot_id IS ?3
                                     THEN max(coalesce(alive_ns, 0), ?4) ELSE ?4 END
                             RETURNING CASE WHEN ?2 > 0 AND ?2 > turn THEN ?2 ELSE tickets END",
                            params![key.as_str(), ticket, boot, now.saturating_add(live)],
                            |r| r.get(0),
                        )
                        .sql()?;
                    Queued::Busy { left, ticket }
                }
            };
            tx.commit().sql()?;
            Ok(out)
        })
        .await
    }

    #[cfg(test)]
    async fn look(&self, key: &Key) -> Result<Look> {
        self.look_as(key, crate::Mode::Exclusive, String::new()).await
    }

    async fn look_as(&self, key: &Key, mode: crate::Mode, owner: String) -> Result<Look> {
        #[cfg(test)]
        self.counts.looks.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let key = key.clone();
        self.blocking(move |c, boot| {
            let now = boot::now_ns()?;
            let (turn, live): (Option<i64>, Option<bool>) = c
                .query_row(
                    "SELECT (SELECT turn FROM leasehold_queue WHERE key = ?1),
                            (SELECT boot_id = ?2 AND expires_ns > ?3
                             FROM leasehold_leases WHERE key = ?1)",
                    params![key.as_str(), boot, now],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .sql()?;
            let free = live != Some(true) && shared::free_for(c, &key, mode, &owner, boot, now)?;
            Ok(Look { turn: turn.unwrap_or(0), free })
        })
        .await
    }

    /// Subscribes to `key`'s doorbell (off the runtime's threads: it may create files).
    async fn doorbell(&self, key: &Key) -> Result<Option<watch::Receiver<u64>>> {
        let (bell, key) = (self.doorbell.clone(), key.clone());
        tokio::task::spawn_blocking(move || bell.subscribe(&key))
            .await
            .map_err(|e| crate::Error::backend("sqlite", "worker thread failed", e))
    }

    /// Acquires, waiting by ticket until `until` (see the module docs).
    pub(super) async fn acquire_queued(
        &self,
        req: &AcquireRequest<'_>,
        until: Instant,
    ) -> Result<Attempt> {
        // Subscribed before the first attempt: no release after it goes unseen.
        let mut local = Some(self.bells.subscribe(req.key));
        let mut bell = self.doorbell(req.key).await?;
        let (fast, slow) =
            if bell.is_some() { (SAFETY_POLL, SAFETY_POLL) } else { (POLL_MIN, POLL_MAX) };
        let mut ticket = 0;
        loop {
            for rx in [&mut local, &mut bell].into_iter().flatten() {
                rx.borrow_and_update();
            }
            let (left, mine) = match within_op_timeout(req, self.grant_queued(req, ticket)).await? {
                Queued::Granted(g) => return Ok(Attempt::Granted(g)),
                Queued::Busy { left, ticket } => (left, ticket),
            };
            ticket = mine;
            let now = Instant::now();
            if now >= until {
                self.end_intent(req).await?;
                return Ok(Attempt::Busy { holder_expires_in: Some(left) });
            }
            // At the holder's expiry at the latest (plus a millisecond, so the clock has
            // passed it), or at the caller's deadline: then attempt, whatever was heard.
            let expiry = (now + left + Duration::from_millis(1)).min(until);
            let mut free_since: Option<Instant> = None;
            let mut stagger: Option<Instant> = None;
            let mut poll = fast;
            let mut refresh_at = Instant::now() + self.waiter_live / 2;
            loop {
                let wake = stagger.map_or(expiry, |s| s.min(expiry));
                let look_at = (Instant::now() + poll).min(wake);
                tokio::select! {
                    _ = tokio::time::sleep_until(refresh_at.into()) => {
                        // Housekeeping, not the wait: a refresh that cannot write (the write
                        // lock busy past the op timeout) at worst lets the pruning task take
                        // the row, which costs this waiter its place (`prune.rs`), never the
                        // key; the next attempt and the next refresh write it again.
                        if let Err(e) = self.refresh(req.key).await {
                            tracing::debug!("sqlite waiter could not refresh its queue row: {e}");
                        }
                        refresh_at = Instant::now() + self.waiter_live / 2;
                        continue;
                    }
                    _ = changed(&mut local) => poll = fast,
                    _ = changed(&mut bell) => {
                        #[cfg(test)]
                        self.counts.doorbell_rings.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        poll = fast;
                    }
                    _ = tokio::time::sleep_until(wake.into()) => break,
                    _ = tokio::time::sleep_until(look_at.into()) => poll = (poll * 2).min(slow),
                }
                let look = self.look_as(req.key, req.mode, req.owner.to_string()).await?;
                if !look.free {
                    (free_since, stagger) = (None, None);
                    continue;
                }
                if look.turn >= ticket {
                    break;
                }
                // Free, but an earlier ticket is called: try anyway if it does not answer.
                let since = *free_since.get_or_insert_with(Instant::now);
                let ahead = u32::try_from(ticket - look.turn).unwrap_or(u32::MAX).min(20);
                let at = since + STAGGER * ahead;
                if Instant::now() >= at {
                    break;
                }
                stagger = Some(at);
            }
        }
    }
}

impl SqliteStore {
    /// Keeps `key`'s queue row from the pruning task while this waiter waits: `alive_ns` at
    /// least [`WAITER_LIVE`] from now (one write transaction, no fence or grant touched).
    async fn refresh(&self, key: &Key) -> Result<()> {
        let (key, live) = (key.clone(), ns(self.waiter_live));
        self.blocking(move |c, boot| {
            let now = boot::now_ns()?;
            c.execute(
                "UPDATE leasehold_queue SET alive_ns = CASE WHEN boot_id IS ?2
                     THEN max(coalesce(alive_ns, 0), ?3) ELSE ?3 END, boot_id = ?2
                 WHERE key = ?1",
                params![key.as_str(), boot, now.saturating_add(live)],
            )
            .sql()?;
            Ok(())
        })
        .await
    }

    /// A writer whose wait ran out withdraws its intent, and readers it held back are rung.
    async fn end_intent(&self, req: &AcquireRequest<'_>) -> Result<()> {
        if req.mode != crate::Mode::Exclusive {
            return Ok(());
        }
        let (key, owner, db) = (req.key.clone(), req.owner.to_string(), self.path.clone());
        let k = key.clone();
        let had = self
            .blocking(move |c, _| {
                let tx =
                    c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).sql()?;
                let had = shared::clear_intent(&tx, &k, &owner)?;
                tx.commit().sql()?;
                if had {
                    super::doorbell::ring(&db, &k);
                }
                Ok(had)
            })
            .await?;
        if had {
            self.bells.ring(key.as_str());
        }
        Ok(())
    }
}

/// Returns at the next ring; never, once the sender is gone.
async fn changed(rx: &mut Option<watch::Receiver<u64>>) {
    let ok = match rx.as_mut() {
        Some(r) => r.changed().await.is_ok(),
        None => false,
    };
    if !ok {
        *rx = None;
        std::future::pending::<()>().await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering::SeqCst;

    use super::*;
    use crate::{Locker, OwnerToken, Store, Wait};

    fn req<'a>(key: &'a Key, owner: &'a OwnerToken) -> AcquireRequest<'a> {
        AcquireRequest {
            key,
            owner,
            ttl: Duration::from_secs(30),
            op_timeout: Duration::from_secs(5),
            info: None,
            mode: Default::default(),
            slot: None,
        }
    }

    /// The queue's arithmetic: tickets in order of refusal, a release calls the next one, a
    /// called waiter that lost the key to another acquirer takes a new ticket.
    #[tokio::test]
    async fn tickets_are_called_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("s.db")).await.unwrap();
        let key = Key::new("k").unwrap();
        let o: Vec<OwnerToken> = (0..4).map(|_| OwnerToken::generate().unwrap()).collect();
        let Attempt::Granted(_) = store.try_acquire(&req(&key, &o[0])).await.unwrap() else {
            panic!("the key is free")
        };
        let busy = |q: Queued| match q {
            Queued::Busy { ticket, .. } => ticket,
            Queued::Granted(_) => panic!("granted while held"),
        };
        assert_eq!(busy(store.grant_queued(&req(&key, &o[1]), 0).await.unwrap()), 1);
        assert_eq!(busy(store.grant_queued(&req(&key, &o[2]), 0).await.unwrap()), 2);
        assert_eq!(busy(store.grant_queued(&req(&key, &o[1]), 1).await.unwrap()), 1, "kept");
        assert_eq!(store.look(&key).await.unwrap().turn, 0);
        assert!(!store.look(&key).await.unwrap().free);
        assert!(store.release(&key, &o[0]).await.unwrap());
        let look = store.look(&key).await.unwrap();
        assert_eq!((look.turn, look.free), (1, true), "ticket 1 called");
        // Someone without a ticket takes it first: the called waiter queues again, at the end.
        let Attempt::Granted(_) = store.try_acquire(&req(&key, &o[3])).await.unwrap() else {
            panic!("the key is free")
        };
        assert_eq!(busy(store.grant_queued(&req(&key, &o[1]), 1).await.unwrap()), 3);
        assert!(store.release(&key, &o[3]).await.unwrap());
        assert_eq!(store.look(&key).await.unwrap().turn, 2);
        let Queued::Granted(_) = store.grant_queued(&req(&key, &o[2]), 2).await.unwrap() else {
            panic!("ticket 2 was called")
        };
        assert!(store.release(&key, &o[2]).await.unwrap());
        assert_eq!(store.look(&key).await.unwrap().turn, 3);
        assert!(!store.release(&key, &o[2]).await.unwrap());
        assert_eq!(store.look(&key).await.unwrap().turn, 3, "a release of nothing calls nobody");
    }

    /// A waiter's refresh of its queue row is housekeeping: when it cannot write (another
    /// connection holds the write lock past the op timeout, through several refreshes), the
    /// waiter keeps waiting and gets the key once it is released. Before, the first refresh
    /// that found the lock busy ended the acquire with the store's error.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refresh_that_cannot_write_does_not_end_the_wait() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let holder = Locker::new(SqliteStore::open(&path).await.unwrap());
        let mut w = SqliteStore::open(&path).await.unwrap();
        w.waiter_live = Duration::from_millis(200);
        let waiter = Locker::new(w).with_op_timeout(Duration::from_millis(300));
        let lease = holder.acquire("k", Duration::from_secs(30)).await.unwrap();
        let wait = tokio::spawn(async move {
            let w = waiter.acquire("k", Duration::from_secs(30));
            w.wait(Wait::For(Duration::from_secs(20))).await
        });
        let p = path.clone();
        tokio::task::spawn_blocking(move || {
            let c = rusqlite::Connection::open(&p).unwrap();
            let queued = || -> i64 {
                c.query_row("SELECT count(*) FROM leasehold_queue WHERE key = 'k'", [], |r| {
                    r.get(0)
                })
                .unwrap()
            };
            let until = Instant::now() + Duration::from_secs(10);
            while queued() == 0 {
                assert!(Instant::now() < until, "the waiter never queued");
                std::thread::sleep(Duration::from_millis(5));
            }
            // A refresh every 100 ms, each refused after the 300 ms busy timeout.
            c.execute_batch("BEGIN IMMEDIATE").unwrap();
            std::thread::sleep(Duration::from_secs(1));
            c.execute_batch("COMMIT").unwrap();
        })
        .await
        .unwrap();
        assert!(lease.release().await.unwrap().is_clean());
        let got = wait.await.unwrap().expect("the wait goes on past refreshes that failed");
        assert!(got.release().await.unwrap().is_clean());
    }

    /// A waiter of another store instance (as in another process: this store's own releases
    /// do not reach it) is woken by the doorbell: one refused attempt, one look after the
    /// ring, one granted attempt. Polling at 1–50 ms would have looked about a dozen times
    /// during the hold.
    #[cfg(target_os = "linux")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_release_elsewhere_rings_the_waiter() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let holder = Locker::new(SqliteStore::open(&path).await.unwrap());
        let waiter = SqliteStore::open(&path).await.unwrap();
        let counts = waiter.counts.clone();
        let waiter = Locker::new(waiter);
        let lease = holder.acquire("k", Duration::from_secs(30)).await.unwrap();
        let w = tokio::spawn(async move {
            waiter
                .acquire("k", Duration::from_secs(30))
                .wait(Wait::For(Duration::from_secs(20)))
                .await
        });
        while counts.attempts.load(SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(lease.release().await.unwrap().is_clean());
        let got = w.await.unwrap().unwrap();
        assert_eq!(counts.attempts.load(SeqCst), 2, "refused, then granted after the ring");
        assert!(counts.doorbell_rings.load(SeqCst) >= 1, "the release rang the doorbell");
        assert!(counts.looks.load(SeqCst) <= 2, "looks: {}", counts.looks.load(SeqCst));
        assert!(got.release().await.unwrap().is_clean());
    }
}
