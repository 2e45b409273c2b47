// Reproduces: session-level advisory lock and unlock each sent with `&pool` (sqlx checks out a connection per
// query, so the unlock can run on another session and the lock stays on a pooled connection), the kind
// the PostgreSQL advisory-lock docs (session locks belong to the session) warn about.
use sqlx::PgPool;

pub async fn rotate_keys<F, Fut>(pool: &PgPool, key_set: i64, rotate: F) -> Result<bool, sqlx::Error>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)").bind(key_set).fetch_one(pool).await?; // expect: session-lock-on-pool
    if !locked {
        return Ok(false);
    }
    rotate().await;
    let unlocked: bool = sqlx::query_scalar("SELECT pg_advisory_unlock($1)").bind(key_set).fetch_one(pool).await?; // expect: session-lock-on-pool
    Ok(unlocked)
}
