//! Transaction locks: `pg_advisory_xact_lock` inside the caller's transaction.

use std::time::Duration;

use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, Transaction};

use super::session_sql::LOCK_ID;
use super::{ms, pg_err};
use crate::{Error, Key, Result};

/// Takes `pg_advisory_xact_lock(hashtextextended(KEY, 0))` in `tx`, waiting on the server
/// (bounded by the session's `lock_timeout`, if set). The lock ends when `tx` commits or rolls
/// back; there is no release call and nothing to leak into a pool.
pub async fn xact_lock(tx: &Transaction<'_>, key: &Key) -> Result<()> {
    tx.execute(&format!("SELECT pg_advisory_xact_lock({LOCK_ID})::text"), &[&key.as_str()])
        .await
        .map_err(|e| match e.code() {
        Some(c) if *c == SqlState::LOCK_NOT_AVAILABLE => Error::Busy { key: key.clone() },
        _ => pg_err("pg_advisory_xact_lock", e),
    })?;
    Ok(())
}

/// Like [`xact_lock`] without waiting: `Ok(false)` when another session or transaction holds
/// the key.
pub async fn try_xact_lock(tx: &Transaction<'_>, key: &Key) -> Result<bool> {
    let row = tx
        .query_one(&format!("SELECT pg_try_advisory_xact_lock({LOCK_ID})"), &[&key.as_str()])
        .await
        .map_err(|e| pg_err("pg_try_advisory_xact_lock", e))?;
    Ok(row.get(0))
}

/// Runs `work` in a new transaction on `client` that first takes the transaction lock on
/// `key` (waiting at most `wait`, via `SET LOCAL lock_timeout`; `None` waits as long as the
/// server lets it). Commits if `work` returns `Ok`, rolls back otherwise; either way the lock
/// ends with the transaction. [`Error::Busy`] if the wait ran out.
pub async fn with_xact_lock<T, E>(
    client: &mut Client,
    key: &Key,
    wait: Option<Duration>,
    work: impl AsyncFnOnce(&Transaction<'_>) -> std::result::Result<T, E>,
) -> std::result::Result<T, E>
where
    E: From<Error>,
{
    let tx = client.transaction().await.map_err(|e| pg_err("BEGIN", e))?;
    if let Some(w) = wait {
        let w = if w.is_zero() { 1 } else { ms(w) };
        tx.batch_execute(&format!("SET LOCAL lock_timeout = '{w}ms'"))
            .await
            .map_err(|e| pg_err("SET LOCAL lock_timeout", e))?;
    }
    xact_lock(&tx, key).await?;
    let out = work(&tx).await;
    match out {
        Ok(v) => {
            tx.commit().await.map_err(|e| pg_err("COMMIT", e))?;
            Ok(v)
        }
        Err(e) => {
            // Dropping the transaction rolls it back; say so explicitly to surface errors.
            let _ = tx.rollback().await;
            Err(e)
        }
    }
}
