// Fixed: pg_try_advisory_xact_lock inside a transaction from pool.begin(): the transaction holds one
// connection and COMMIT/ROLLBACK releases the lock. (Companion of bad/rust-sqlx.rs.)
use sqlx::PgPool;

pub async fn rotate_keys<F, Fut>(pool: &PgPool, key_set: i64, rotate: F) -> Result<bool, sqlx::Error>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut tx = pool.begin().await?;
    let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_xact_lock($1)").bind(key_set).fetch_one(&mut *tx).await?;
    if !locked {
        tx.rollback().await?;
        return Ok(false);
    }
    rotate().await;
    tx.commit().await?;
    Ok(true)
}
