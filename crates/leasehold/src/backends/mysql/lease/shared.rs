//! Readers, writer intents and semaphore slots on the MySQL lease table (`docs/design.md`
//! §9). Each reader's and slot's grant is one `READ COMMITTED` transaction on its own pooled
//! connection that first locks a row (the key's lease row; the semaphore's row), so every
//! later statement in it reads what the grants before it committed.
//!
//! - The key's lease row carries `shared_until`, the latest expiry among its live readers,
//!   recomputed from `TABLE_readers` by every reader's grant, renewal and release under the
//!   row lock; the plain grant (one statement) refuses while it lies ahead.
//! - `TABLE_readers(lock_key, owner, fence, expires_at, info)`: one row per reader, its fence
//!   from the key's counter (the lease row's, the mutex's), so every writer's fence exceeds
//!   every earlier reader's.
//! - `intent_owner`, `intent_until` on the lease row: a writer refused while it waits records
//!   its intent (until the blockers' expiry plus its ttl, refreshed by each attempt); new
//!   readers are refused while it lives. Its grant or the end of its wait clears it.
//! - `TABLE_slots(lock_key, semaphore, owner, permits)` and `TABLE_semaphores(semaphore)`:
//!   a slot's grant locks the semaphore's row, refuses while a live slot was granted for
//!   another count, grants as the mutex does and records its count.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, IsolationLevel, TxOpts, Value};

use crate::backends::mysql::{CLOCK_US, my_err};
use crate::{Error, Result};

const NOW: &str = "UTC_TIMESTAMP(6)";

/// A writer may be granted: no reader's grant still runs (a condition on the lease row).
pub(super) const NO_READERS: &str = "(shared_until IS NULL OR shared_until <= UTC_TIMESTAMP(6))";

/// The tables beside the lease table `t` (its name, unquoted).
pub(super) struct Tables {
    pub lease: String,
    pub readers: String,
    pub slots: String,
    pub semaphores: String,
}

impl Tables {
    pub fn new(table: &str) -> Tables {
        // Identifiers are 64 characters at most.
        let base: String = table.chars().take(52).collect();
        Tables {
            lease: format!("`{table}`"),
            readers: format!("`{base}_readers`"),
            slots: format!("`{base}_slots`"),
            semaphores: format!("`{base}_semaphores`"),
        }
    }

    /// Creates what the primitives keep (the lease table exists).
    pub async fn create(&self, c: &mut Conn, table: &str) -> Result<()> {
        let Tables { lease, readers, slots, semaphores } = self;
        for ddl in [
            format!(
                "CREATE TABLE IF NOT EXISTS {readers} (
                    lock_key   VARBINARY(512) NOT NULL,
                    owner      VARBINARY(64) NOT NULL,
                    fence      BIGINT UNSIGNED NOT NULL,
                    expires_at DATETIME(6) NOT NULL,
                    info       VARBINARY(1024) NULL,
                    PRIMARY KEY (lock_key, owner)
                ) ENGINE = InnoDB"
            ),
            format!(
                "CREATE TABLE IF NOT EXISTS {slots} (
                    lock_key  VARBINARY(512) NOT NULL PRIMARY KEY,
                    semaphore VARBINARY(512) NOT NULL,
                    owner     VARBINARY(64) NOT NULL,
                    permits   INT UNSIGNED NOT NULL,
                    KEY (semaphore)
                ) ENGINE = InnoDB"
            ),
            format!(
                "CREATE TABLE IF NOT EXISTS {semaphores} (
                    semaphore VARBINARY(512) NOT NULL PRIMARY KEY
                ) ENGINE = InnoDB"
            ),
        ] {
            c.query_drop(ddl).await.map_err(|e| my_err("creating the primitives' tables", e))?;
        }
        let has: Option<i64> = c
            .exec_first(
                "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE()
                   AND table_name = ? AND column_name = 'shared_until'",
                (table,),
            )
            .await
            .map_err(|e| my_err("reading the lease table's columns", e))?;
        if has == Some(0) {
            let alter = format!(
                "ALTER TABLE {lease} ADD COLUMN shared_until DATETIME(6) NULL,
                   ADD COLUMN intent_owner VARBINARY(64) NULL,
                   ADD COLUMN intent_until DATETIME(6) NULL"
            );
            match c.query_drop(alter).await {
                // 1060: another process added them first.
                Err(mysql_async::Error::Server(e)) if e.code == 1060 => {}
                r => r.map_err(|e| my_err("adding the lease table's reader columns", e))?,
            }
        }
        Ok(())
    }
}

/// A transaction in which each statement reads what committed before it.
fn read_committed() -> TxOpts {
    let mut opts = TxOpts::default();
    opts.with_isolation_level(IsolationLevel::ReadCommitted);
    opts
}

fn left(us: Option<i64>) -> std::time::Duration {
    std::time::Duration::from_micros(u64::try_from(us.unwrap_or(0)).unwrap_or(0))
}

/// Starts a `READ COMMITTED` transaction and locks `key`'s lease row (made if missing, with
/// no holder and counter 0, so the next grant's fence follows the clock rule).
async fn lock_key<'a>(
    c: &'a mut Conn,
    t: &Tables,
    key: &[u8],
) -> Result<mysql_async::Transaction<'a>> {
    let opts = read_committed();
    let mut tx = c.start_transaction(opts).await.map_err(|e| my_err("BEGIN", e))?;
    let lease = &t.lease;
    tx.exec_drop(
        format!(
            "INSERT INTO {lease} (lock_key, owner, fence, expires_at) VALUES (?, NULL, 0, {NOW})
             ON DUPLICATE KEY UPDATE lock_key = lock_key"
        ),
        (key,),
    )
    .await
    .map_err(|e| my_err("locking the key's row", e))?;
    tx.exec_drop(format!("SELECT 1 FROM {lease} WHERE lock_key = ? FOR UPDATE"), (key,))
        .await
        .map_err(|e| my_err("locking the key's row", e))?;
    Ok(tx)
}

/// Sets the key's `shared_until` to its live readers' latest expiry (under the row lock).
async fn recompute(tx: &mut mysql_async::Transaction<'_>, t: &Tables, key: &[u8]) -> Result<()> {
    let (lease, readers) = (&t.lease, &t.readers);
    tx.exec_drop(
        format!(
            "UPDATE {lease} SET shared_until = (SELECT MAX(expires_at) FROM {readers}
                 WHERE lock_key = ? AND expires_at > {NOW})
             WHERE lock_key = ?"
        ),
        (key, key),
    )
    .await
    .map_err(|e| my_err("recording the readers' expiry", e))
}

/// A reader's attempt: `Ok(fence)`, or `Err(time left)` while an exclusive grant or another
/// writer's intent lives.
pub(super) async fn grant_shared(
    c: &mut Conn,
    t: &Tables,
    key: &[u8],
    owner: &str,
    ttl_us: u64,
    info: Option<&[u8]>,
) -> Result<std::result::Result<u64, std::time::Duration>> {
    let mut tx = lock_key(c, t, key).await?;
    let lease = &t.lease;
    let (blocked, busy): (i64, Option<i64>) = tx
        .exec_first(
            format!(
                "SELECT (owner IS NOT NULL AND expires_at > {NOW})
                        OR COALESCE(intent_until > {NOW}, 0),
                        TIMESTAMPDIFF(MICROSECOND, {NOW}, GREATEST(
                          IF(owner IS NOT NULL, expires_at, {NOW}), COALESCE(intent_until, {NOW})))
                 FROM {lease} WHERE lock_key = ? FOR UPDATE"
            ),
            (key,),
        )
        .await
        .map_err(|e| my_err("reader grant", e))?
        .ok_or_else(|| Error::backend("mysql", "reader grant: the key's row vanished", "no row"))?;
    if blocked != 0 {
        tx.rollback().await.map_err(|e| my_err("ROLLBACK", e))?;
        return Ok(Err(left(busy)));
    }
    tx.exec_drop(
        format!(
            "UPDATE {lease} SET fence = LAST_INSERT_ID(GREATEST(fence + 1, {CLOCK_US}))
             WHERE lock_key = ?"
        ),
        (key,),
    )
    .await
    .map_err(|e| my_err("reader grant", e))?;
    let fence = tx.last_insert_id().filter(|f| *f > 0).ok_or_else(|| {
        Error::backend("mysql", "reader grant: no fence (LAST_INSERT_ID)", "no last_insert_id")
    })?;
    tx.exec_drop(
        format!(
            "INSERT INTO {} (lock_key, owner, fence, expires_at, info)
             VALUES (?, ?, ?, {NOW} + INTERVAL ? MICROSECOND, ?)
             ON DUPLICATE KEY UPDATE fence = VALUES(fence), expires_at = VALUES(expires_at),
               info = VALUES(info)",
            t.readers
        ),
        (key, owner, fence, ttl_us, info),
    )
    .await
    .map_err(|e| my_err("reader grant", e))?;
    recompute(&mut tx, t, key).await?;
    tx.commit().await.map_err(|e| my_err("COMMIT", e))?;
    Ok(Ok(fence))
}

/// Extends `owner`'s reader grant of `key`; whether it was live.
pub(super) async fn renew_shared(
    c: &mut Conn,
    t: &Tables,
    key: &[u8],
    owner: &str,
    ttl_us: u64,
) -> Result<bool> {
    let mut tx = lock_key(c, t, key).await?;
    tx.exec_drop(
        format!(
            "UPDATE {} SET expires_at = {NOW} + INTERVAL ? MICROSECOND
             WHERE lock_key = ? AND owner = ? AND expires_at > {NOW}",
            t.readers
        ),
        (ttl_us, key, owner),
    )
    .await
    .map_err(|e| my_err("reader renew", e))?;
    let renewed = tx.affected_rows() == 1;
    if renewed {
        recompute(&mut tx, t, key).await?;
    }
    tx.commit().await.map_err(|e| my_err("COMMIT", e))?;
    Ok(renewed)
}

/// Deletes `owner`'s reader grant of `key`: `None` without one, else whether it was live.
pub(super) async fn release_shared(
    c: &mut Conn,
    t: &Tables,
    key: &[u8],
    owner: &str,
) -> Result<Option<bool>> {
    let mut tx = lock_key(c, t, key).await?;
    let live: Option<i64> = tx
        .exec_first(
            format!(
                "SELECT expires_at > {NOW} FROM {} WHERE lock_key = ? AND owner = ? FOR UPDATE",
                t.readers
            ),
            (key, owner),
        )
        .await
        .map_err(|e| my_err("reader release", e))?;
    if live.is_some() {
        tx.exec_drop(
            format!("DELETE FROM {} WHERE lock_key = ? AND owner = ?", t.readers),
            (key, owner),
        )
        .await
        .map_err(|e| my_err("reader release", e))?;
        recompute(&mut tx, t, key).await?;
    }
    tx.commit().await.map_err(|e| my_err("COMMIT", e))?;
    Ok(live.map(|l| l != 0))
}

/// Records (or refreshes) a waiting writer's intent: readers are refused until the
/// blockers' expiry plus `ttl_us`, or until it is withdrawn.
pub(super) async fn note_intent(
    c: &mut Conn,
    t: &Tables,
    key: &[u8],
    owner: &str,
    ttl_us: u64,
) -> Result<()> {
    c.exec_drop(
        format!(
            "UPDATE {} SET intent_owner = ?,
               intent_until = GREATEST(expires_at, COALESCE(shared_until, expires_at), {NOW})
                              + INTERVAL ? MICROSECOND
             WHERE lock_key = ?",
            t.lease
        ),
        (owner, ttl_us, key),
    )
    .await
    .map_err(|e| my_err("recording a writer's intent", e))
}

/// Clears `owner`'s intent on `key` (granted, or its wait ran out).
pub(super) async fn clear_intent(c: &mut Conn, t: &Tables, key: &[u8], owner: &str) -> Result<()> {
    c.exec_drop(
        format!(
            "UPDATE {} SET intent_owner = NULL, intent_until = NULL
             WHERE lock_key = ? AND intent_owner = ?",
            t.lease
        ),
        (key, owner),
    )
    .await
    .map_err(|e| my_err("clearing a writer's intent", e))
}

/// A semaphore slot's attempt, in one transaction behind the semaphore's row: refused
/// ([`Error::InvalidInput`]) while a live slot of it was granted for another count; else
/// `grant` (the mutex's statement, with `params`), and the count recorded when granted.
/// Answers the grant's affected rows and fence.
pub(super) async fn grant_slot(
    c: &mut Conn,
    t: &Tables,
    (semaphore, permits): (&str, u32),
    grant: &str,
    params: (&[u8], &str, u64, Option<&[u8]>),
) -> Result<(u64, Option<u64>)> {
    let opts = read_committed();
    let mut tx = c.start_transaction(opts).await.map_err(|e| my_err("BEGIN", e))?;
    let sem = semaphore.as_bytes();
    tx.exec_drop(
        format!(
            "INSERT INTO {} (semaphore) VALUES (?) ON DUPLICATE KEY UPDATE semaphore = semaphore",
            t.semaphores
        ),
        (sem,),
    )
    .await
    .map_err(|e| my_err("locking the semaphore", e))?;
    let held: Option<u32> = tx
        .exec_first(
            format!(
                "SELECT s.permits FROM {} s JOIN {} l ON l.lock_key = s.lock_key AND l.owner = s.owner
                 WHERE s.semaphore = ? AND s.permits <> ? AND l.expires_at > {NOW} LIMIT 1",
                t.slots, t.lease
            ),
            (sem, permits),
        )
        .await
        .map_err(|e| my_err("checking the semaphore's permits", e))?;
    if let Some(held) = held {
        tx.rollback().await.map_err(|e| my_err("ROLLBACK", e))?;
        return Err(Error::invalid(format!(
            "semaphore {semaphore:?} is held with {held} permits; this request named {permits}"
        )));
    }
    tx.exec_drop(grant, params).await.map_err(|e| my_err("grant", e))?;
    let (rows, fence) = (tx.affected_rows(), tx.last_insert_id());
    if matches!(rows, 1 | 2) {
        let (key, owner, _, _) = params;
        tx.exec_drop(
            format!(
                "INSERT INTO {} (lock_key, semaphore, owner, permits) VALUES (?, ?, ?, ?)
                 ON DUPLICATE KEY UPDATE semaphore = VALUES(semaphore), owner = VALUES(owner),
                   permits = VALUES(permits)",
                t.slots
            ),
            (key, sem, owner, permits),
        )
        .await
        .map_err(|e| my_err("recording the slot's permits", e))?;
    }
    tx.commit().await.map_err(|e| my_err("COMMIT", e))?;
    Ok((rows, fence))
}

/// The live readers (of `key`, or of every key): key, owner, fence, µs left, info.
pub(super) async fn readers(
    c: &mut Conn,
    t: &Tables,
    key: Option<&[u8]>,
) -> Result<Vec<(Vec<u8>, String, u64, i64, Option<Vec<u8>>)>> {
    let sql = format!(
        "SELECT lock_key, owner, fence, TIMESTAMPDIFF(MICROSECOND, {NOW}, expires_at), info
         FROM {} WHERE expires_at > {NOW} {} ORDER BY lock_key, fence",
        t.readers,
        if key.is_some() { "AND lock_key = ?" } else { "" }
    );
    let params: Vec<Value> = key.map(Value::from).into_iter().collect();
    c.exec(sql, params).await.map_err(|e| my_err("holders", e))
}
