// Fixed: the try-lock's boolean is fetched with query_scalar and the sweep is skipped when it is false; lock
// and unlock run on the same acquired connection. (Companion of bad/rust-sqlx.rs.)
use sqlx::PgPool;

const SWEEP_LOCK: i64 = 9_001;

pub async fn sweep_expired_sessions<F, Fut>(pool: &PgPool, sweep: F) -> Result<bool, sqlx::Error>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut conn = pool.acquire().await?;
    let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)").bind(SWEEP_LOCK).fetch_one(&mut *conn).await?;
    if !locked {
        return Ok(false);
    }
    sweep().await;
    let unlocked: bool = sqlx::query_scalar("SELECT pg_advisory_unlock($1)").bind(SWEEP_LOCK).fetch_one(&mut *conn).await?;
    Ok(unlocked)
}
