//! Forgetting per-key rows past the horizon (`crate::horizon`, `docs/design.md` §4.6): a task
//! each store runs every quarter of the horizon while it lives, deleting in write
//! transactions of at most [`BATCH`] rows each (the store's connection is taken for one batch
//! at a time, so a grant waits at most one batch) the fence counters (`leasehold_fences`) of
//! keys no grant or reader held within the horizon, the lease, reader and waiting writers'
//! intent rows that expired more than the horizon ago without a release (an intent is left
//! by a writer killed while it waited; nothing reads one past its expiry), the permit counts
//! of semaphore slots (`leasehold_slots`) whose lease row is gone, and the waiting
//! queues
//! (`leasehold_queue`) of keys whose waiters are gone.
//!
//! A queue row is deleted when it was written in an earlier boot (every waiter then died), or
//! when its `alive_ns` (the boot clock) is more than the horizon in the past and no lease or
//! reader of its key lived within the horizon. Each waiter sets `alive_ns` at least
//! `WAITER_LIVE` (10 s) ahead of now with each attempt and again every half of that while it
//! waits (`wait.rs`), so a waiter's row is taken only once that waiter has made no progress
//! for half of `WAITER_LIVE` plus the horizon: it gave up, died, or was frozen that long.
//! Rows written by a version without `alive_ns` (NULL) are deleted once the key had no lease
//! or reader within the horizon. A waiter whose row was deleted anyway loses only its place:
//! its next attempt queues it again (exclusion never depended on the queue).
//!
//! A counter's fence is `max(counter + 1, the wall clock in µs)`, set by the key's last
//! grant: a fence older than the horizon means that grant was at least that long ago, and
//! the next grant, from the clock, issues more than it while
//! [`crate::horizon::HORIZON_ASSUMPTION`] holds (the same argument as the networked stores'
//! rows). The write transaction sees every committed grant (SQLite serialises writers).

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use rusqlite::{Connection, TransactionBehavior, params};

use super::{SqlExt, boot, ns};
use crate::Result;

/// Rows deleted per transaction.
pub(super) const BATCH: usize = 1000;

/// SQL true when no lease or reader of `alias`'s key (`alias.key`) expired at or after the
/// instant bound to `cut` (`CLOCK_BOOTTIME` ns): the key was idle since then.
fn idle_since(alias: &str, cut: &str) -> String {
    format!(
        "NOT EXISTS (SELECT 1 FROM leasehold_leases l WHERE l.key = {alias}.key AND l.expires_ns >= {cut})
         AND NOT EXISTS (SELECT 1 FROM leasehold_readers r
                         WHERE r.key = {alias}.key AND r.expires_ns >= {cut})"
    )
}

/// One batch: at most [`BATCH`] rows of each table. Returns the rows deleted.
pub(super) fn batch(c: &mut Connection, horizon: Duration, boot: &str) -> Result<usize> {
    let tx = c.transaction_with_behavior(TransactionBehavior::Immediate).sql()?;
    let cut_ns = boot::now_ns()?.saturating_sub(ns(horizon));
    let cut_us =
        (crate::token::wall_clock_us() as i64).saturating_sub(crate::horizon::micros(horizon));
    let mut n = tx
        .execute(
            &format!(
                "DELETE FROM leasehold_fences WHERE rowid IN (
                   SELECT f.rowid FROM leasehold_fences f WHERE f.fence < ?1 AND {idle}
                   LIMIT {BATCH})",
                idle = idle_since("f", "?2"),
            ),
            params![cut_us, cut_ns],
        )
        .sql()?;
    n += tx
        .execute(
            &format!(
                "DELETE FROM leasehold_queue WHERE rowid IN (
                   SELECT q.rowid FROM leasehold_queue q
                   WHERE q.boot_id IS NOT NULL AND q.boot_id <> ?2
                      OR (coalesce(q.alive_ns, 0) < ?1 AND {idle})
                   LIMIT {BATCH})",
                idle = idle_since("q", "?1"),
            ),
            params![cut_ns, boot],
        )
        .sql()?;
    // A slot's permit count means something only beside its lease row (`shared.rs` joins
    // them on key and owner, in the grant's transaction): once that row is released or
    // pruned, the slot's row is read by nothing.
    n += tx
        .execute(
            &format!(
                "DELETE FROM leasehold_slots WHERE rowid IN (
                   SELECT s.rowid FROM leasehold_slots s WHERE NOT EXISTS (
                     SELECT 1 FROM leasehold_leases l WHERE l.key = s.key AND l.owner = s.owner)
                   LIMIT {BATCH})"
            ),
            [],
        )
        .sql()?;
    for t in ["leasehold_leases", "leasehold_readers", "leasehold_intents"] {
        n += tx
            .execute(
                &format!(
                    "DELETE FROM {t} WHERE rowid IN (
                       SELECT rowid FROM {t} WHERE expires_ns < ?1 LIMIT {BATCH})"
                ),
                [cut_ns],
            )
            .sql()?;
    }
    tx.commit().sql()?;
    Ok(n)
}

/// One round: batches until one deletes fewer than [`BATCH`] rows of each table. `None` once
/// the store is gone.
fn round(db: &Weak<Mutex<Connection>>, horizon: Duration, boot: &str) -> Option<Result<u64>> {
    let mut total = 0u64;
    loop {
        let db = db.upgrade()?;
        let mut c = db.lock().unwrap_or_else(|p| p.into_inner());
        match batch(&mut c, horizon, boot) {
            Ok(n) => {
                total += n as u64;
                if n < BATCH {
                    return Some(Ok(total));
                }
            }
            Err(e) => return Some(Err(e)),
        }
    }
}

/// Starts the task of a store whose connection is `db`; it ends once the store is dropped
/// (every clone of it). Errors (another process holding the write lock past the busy
/// timeout) are left to the next round: nothing here is needed for safety.
pub(super) fn start(db: Weak<Mutex<Connection>>, horizon: Duration, boot: Arc<str>) {
    tokio::spawn(async move {
        // The first round at once: a process that lives less than a period (a `run` of a
        // short job) still forgets what earlier processes left past the horizon.
        loop {
            let (db, boot) = (db.clone(), boot.clone());
            let r = tokio::task::spawn_blocking(move || round(&db, horizon, &boot)).await;
            match r {
                Ok(None) | Err(_) => return,
                Ok(Some(Err(e))) => tracing::debug!("sqlite pruning round failed: {e}"),
                Ok(Some(Ok(_))) => {}
            }
            tokio::time::sleep(crate::horizon::prune_period(horizon)).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rusqlite::params;

    use super::batch;
    use crate::backends::Limits;
    use crate::backends::sqlite::{SqlExt, SqliteStore, boot};
    use crate::{Locker, Wait};

    /// A store's first round runs when it opens, not a period later: a process shorter than
    /// the period (a `run` of a short job) still forgets what earlier ones left past the
    /// horizon. With a 60 s horizon the period is 15 s; the row left 2 minutes ago must be
    /// gone within a second of the open. Before, it stayed until the first period ended.
    #[tokio::test]
    async fn the_first_round_runs_when_the_store_opens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let h = Duration::from_secs(60);
        let old = (crate::token::wall_clock_us() - 120_000_000) as i64;
        {
            let c = rusqlite::Connection::open(&path).unwrap();
            c.execute_batch(crate::backends::sqlite::open::SCHEMA).unwrap();
            c.execute("INSERT INTO leasehold_fences (key, fence) VALUES ('left', ?1)", [old])
                .unwrap();
        }
        let store = SqliteStore::open_within(&path, Limits::default(), h, false).await.unwrap();
        let count = |store: &SqliteStore| {
            let store = store.clone();
            async move {
                store
                    .blocking(|c, _| {
                        c.query_row("SELECT count(*) FROM leasehold_fences", [], |r| {
                            r.get::<_, i64>(0)
                        })
                        .sql()
                    })
                    .await
                    .unwrap()
            }
        };
        let until = std::time::Instant::now() + Duration::from_secs(1);
        while count(&store).await > 0 && std::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(count(&store).await, 0, "the row past the horizon is still there");
    }

    fn queue_keys(c: &rusqlite::Connection) -> Vec<String> {
        let mut st = c.prepare("SELECT key FROM leasehold_queue ORDER BY key").unwrap();
        st.query_map([], |r| r.get(0)).unwrap().collect::<rusqlite::Result<_>>().unwrap()
    }

    /// Which queue rows a batch takes (horizon 1 s): those of an earlier boot, and those
    /// whose `alive_ns` is more than the horizon past with no lease or reader of the key
    /// within it (a row of an older version, NULL, counts as long past). It keeps a row whose
    /// waiter keeps `alive_ns` ahead, and one whose key had a lease within the horizon.
    #[tokio::test]
    async fn a_batch_takes_only_gone_waiters_queues() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("s.db")).await.unwrap();
        let left = store
            .blocking(|c, me| {
                let now = boot::now_ns()?;
                let s = 1_000_000_000i64;
                let q = "INSERT INTO leasehold_queue (key, tickets, turn, boot_id, alive_ns)
                         VALUES (?1, 3, 1, ?2, ?3)";
                for (key, b, alive) in [
                    ("ahead", Some(me), Some(now + 5 * s)),
                    ("just-gone", Some(me), Some(now - s / 2)),
                    ("gone", Some(me), Some(now - 2 * s)),
                    ("gone-but-leased", Some(me), Some(now - 2 * s)),
                    ("other-boot", Some("another-boot"), Some(now + 5 * s)),
                    ("older-version", None, None),
                ] {
                    c.execute(q, params![key, b, alive]).sql()?;
                }
                c.execute(
                    "INSERT INTO leasehold_leases (key, owner, fence, boot_id, expires_ns)
                     VALUES ('gone-but-leased', 'o', 1, ?1, ?2)",
                    params![me, now - s / 2],
                )
                .sql()?;
                let n = batch(c, Duration::from_secs(1), me)?;
                Ok((n, queue_keys(c)))
            })
            .await
            .unwrap();
        assert_eq!(left.1, ["ahead", "gone-but-leased", "just-gone"]);
        assert_eq!(left.0, 3);
    }

    /// A writer killed while it waited leaves its intent row (one per owner, so one per
    /// killed `run`); a batch (horizon 1 s) takes the rows expired more than the horizon ago
    /// and keeps a live one and one expired within the horizon. Before, nothing deleted
    /// them until the next boot.
    #[tokio::test]
    async fn a_batch_takes_intents_expired_past_the_horizon() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("s.db")).await.unwrap();
        let left = store
            .blocking(|c, me| {
                let now = boot::now_ns()?;
                let s = 1_000_000_000i64;
                for (owner, expires) in
                    [("live", now + 5 * s), ("just-expired", now - s / 2), ("dead", now - 2 * s)]
                {
                    c.execute(
                        "INSERT INTO leasehold_intents (key, owner, boot_id, expires_ns)
                         VALUES ('k', ?1, ?2, ?3)",
                        params![owner, me, expires],
                    )
                    .sql()?;
                }
                let n = batch(c, Duration::from_secs(1), me)?;
                let mut st =
                    c.prepare("SELECT owner FROM leasehold_intents ORDER BY owner").sql()?;
                let left = st.query_map([], |r| r.get::<_, String>(0)).sql()?;
                Ok((n, left.collect::<rusqlite::Result<Vec<_>>>().sql()?))
            })
            .await
            .unwrap();
        assert_eq!(left.1, ["just-expired", "live"]);
        assert_eq!(left.0, 1);
    }

    /// A slot's permit count goes once its lease row is gone (released, or pruned past the
    /// horizon): a released permit's row is taken by the next batch, a held one's kept.
    /// Before, one row per slot key ever granted stayed for good.
    #[tokio::test]
    async fn a_batch_takes_the_slots_of_released_permits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let store = SqliteStore::open(&path).await.unwrap();
        let l = Locker::new(SqliteStore::open(&path).await.unwrap());
        let ttl = Duration::from_secs(30);
        let held = l.acquire_permit("sem", 2, ttl).await.unwrap();
        let gone = l.acquire_permit("sem", 2, ttl).await.unwrap();
        let gone_key = gone.lease().key().as_str().to_owned();
        assert!(gone.into_lease().release().await.unwrap().is_clean());
        let left = store
            .blocking(|c, me| {
                let n = batch(c, Duration::from_secs(1), me)?;
                let mut st = c.prepare("SELECT key FROM leasehold_slots").sql()?;
                let left = st.query_map([], |r| r.get::<_, String>(0)).sql()?;
                Ok((n, left.collect::<rusqlite::Result<Vec<_>>>().sql()?))
            })
            .await
            .unwrap();
        assert_eq!(left.1, [held.lease().key().as_str().to_owned()], "released: {gone_key}");
        // The batch took it, or the locker's store's own first round did, which runs when it
        // opens and may be scheduled after the release.
        assert!(left.0 <= 1, "{}", left.0);
        assert!(held.into_lease().release().await.unwrap().is_clean());
    }

    /// A waiter that gave up leaves its ticket in the key's queue; the store's own pruning
    /// task (horizon 1 s) deletes that row once `alive_ns` is a horizon past, while the
    /// queue of a key a live waiter still waits on stays, and that waiter gets the key.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn queues_of_gone_waiters_are_pruned_and_live_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let h = Duration::from_secs(1);
        let limits = crate::backends::Limits::default();
        let holder = Locker::new(SqliteStore::open_within(&path, limits, h, false).await.unwrap());
        let mut w = SqliteStore::open_within(&path, limits, h, false).await.unwrap();
        w.waiter_live = Duration::from_millis(400);
        let waiter = Locker::new(w);
        let ttl = Duration::from_secs(30);
        let gone = holder.acquire("gone", ttl).await.unwrap();
        let e = waiter.acquire("gone", ttl).wait(Wait::For(Duration::from_millis(300))).await;
        assert!(matches!(e, Err(crate::Error::Busy { .. })), "{e:?}");
        assert!(gone.release().await.unwrap().is_clean());
        let live = holder.acquire("live", ttl).await.unwrap();
        let w = tokio::spawn(async move {
            let l = waiter.acquire("live", ttl).wait(Wait::For(Duration::from_secs(30))).await;
            l.unwrap().release().await.unwrap().is_clean()
        });
        let c = rusqlite::Connection::open(&path).unwrap();
        let started = std::time::Instant::now();
        while queue_keys(&c) != ["gone", "live"] {
            assert!(started.elapsed() < Duration::from_secs(5), "{:?}", queue_keys(&c));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // `gone`'s row goes once its alive_ns (0.4 s after the last attempt) is 1 s past and
        // a round (every 0.25 s) ran; `live`'s row stays throughout.
        while queue_keys(&c) != ["live"] {
            assert_eq!(queue_keys(&c).last().map(String::as_str), Some("live"));
            assert!(started.elapsed() < Duration::from_secs(10), "{:?}", queue_keys(&c));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!(queue_keys(&c), ["live"], "a live waiter's queue was pruned");
        assert!(live.release().await.unwrap().is_clean());
        assert!(tokio::time::timeout(Duration::from_secs(10), w).await.unwrap().unwrap());
    }
}
