// Reproduces: pg_try_advisory_lock sent with sqlx `.execute()` on a dedicated connection, so the returned
// boolean is never fetched (false when another replica holds it, and the sweep runs anyway), the
// unread try-lock kind the PostgreSQL advisory-lock docs imply.
use sqlx::PgPool;

const SWEEP_LOCK: i64 = 9_001;

pub async fn sweep_expired_sessions<F, Fut>(pool: &PgPool, sweep: F) -> Result<(), sqlx::Error>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut conn = pool.acquire().await?;
    sqlx::query("SELECT pg_try_advisory_lock($1)").bind(SWEEP_LOCK).execute(&mut *conn).await?; // expect: unchecked-acquire
    sweep().await;
    sqlx::query("SELECT pg_advisory_unlock($1)").bind(SWEEP_LOCK).execute(&mut *conn).await?;
    Ok(())
}
