// Fixed: while holding the lock the task takes a fence from INCR and the UPDATE applies only if that fence is
// newer than the one stored with the row. (Companion of bad/rust-redis.rs: no fence on the UPDATE.)
use redis::aio::MultiplexedConnection;
use redis::{AsyncCommands, ExistenceCheck, Script, SetExpiry, SetOptions};
use sqlx::PgPool;

const RELEASE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

pub async fn charge_quota(
    con: &mut MultiplexedConnection,
    pg: &PgPool,
    tenant: &str,
    units: i64,
) -> anyhow::Result<bool> {
    let key = format!("lock:quota:{tenant}");
    let token = uuid::Uuid::new_v4().to_string();
    let opts = SetOptions::default().conditional_set(ExistenceCheck::NX).with_expiration(SetExpiry::PX(5_000));
    let reply: Option<String> = con.set_options(&key, &token, opts).await?;
    if reply.is_none() {
        return Ok(false);
    }
    let fence: i64 = con.incr(format!("fence:quota:{tenant}"), 1).await?;
    let applied = sqlx::query("UPDATE quotas SET used = used + $1, fence = $2 WHERE tenant = $3 AND fence < $2")
        .bind(units)
        .bind(fence)
        .bind(tenant)
        .execute(pg)
        .await?
        .rows_affected();
    let _released: i64 = Script::new(RELEASE).key(&key).arg(&token).invoke_async(con).await?;
    Ok(applied == 1)
}
