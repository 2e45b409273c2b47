//! Forgetting per-key rows past the horizon (`crate::horizon`, `docs/design.md` §4.6): a task
//! each store runs every quarter of the horizon while it lives, deleting in write
//! transactions of at most [`BATCH`] rows each (the store's connection is taken for one batch
//! at a time, so a grant waits at most one batch) the fence counters (`leasehold_fences`) of
//! keys no grant or reader held within the horizon, and the lease and reader rows that
//! expired more than the horizon ago without a release.
//!
//! A counter's fence is `max(counter + 1, the wall clock in µs)`, set by the key's last
//! grant: a fence older than the horizon means that grant was at least that long ago, and
//! the next grant, from the clock, issues more than it while
//! [`crate::horizon::HORIZON_ASSUMPTION`] holds (the same argument as the networked stores'
//! rows). The write transaction sees every committed grant (SQLite serialises writers).

use std::sync::{Mutex, Weak};
use std::time::Duration;

use rusqlite::{Connection, TransactionBehavior, params};

use super::{SqlExt, boot, ns};
use crate::Result;

/// Rows deleted per transaction.
pub(super) const BATCH: usize = 1000;

/// How often the task looks: a quarter of the horizon, between 250 ms and 10 minutes.
fn period(horizon: Duration) -> Duration {
    (horizon / 4).clamp(Duration::from_millis(250), Duration::from_secs(600))
}

/// One batch: at most [`BATCH`] rows of each table. Returns the rows deleted.
pub(super) fn batch(c: &mut Connection, horizon: Duration) -> Result<usize> {
    let tx = c.transaction_with_behavior(TransactionBehavior::Immediate).sql()?;
    let cut_ns = boot::now_ns()?.saturating_sub(ns(horizon));
    let cut_us =
        (crate::token::wall_clock_us() as i64).saturating_sub(crate::horizon::micros(horizon));
    let mut n = tx
        .execute(
            &format!(
                "DELETE FROM leasehold_fences WHERE rowid IN (
                   SELECT f.rowid FROM leasehold_fences f WHERE f.fence < ?1
                     AND NOT EXISTS (SELECT 1 FROM leasehold_leases l
                                     WHERE l.key = f.key AND l.expires_ns >= ?2)
                     AND NOT EXISTS (SELECT 1 FROM leasehold_readers r
                                     WHERE r.key = f.key AND r.expires_ns >= ?2)
                   LIMIT {BATCH})"
            ),
            params![cut_us, cut_ns],
        )
        .sql()?;
    for t in ["leasehold_leases", "leasehold_readers"] {
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
fn round(db: &Weak<Mutex<Connection>>, horizon: Duration) -> Option<Result<u64>> {
    let mut total = 0u64;
    loop {
        let db = db.upgrade()?;
        let mut c = db.lock().unwrap_or_else(|p| p.into_inner());
        match batch(&mut c, horizon) {
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
pub(super) fn start(db: Weak<Mutex<Connection>>, horizon: Duration) {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(period(horizon)).await;
            let db = db.clone();
            let r = tokio::task::spawn_blocking(move || round(&db, horizon)).await;
            match r {
                Ok(None) | Err(_) => return,
                Ok(Some(Err(e))) => tracing::debug!("sqlite pruning round failed: {e}"),
                Ok(Some(Ok(_))) => {}
            }
        }
    });
}
