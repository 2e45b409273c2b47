// Reproduces: a Redis lock guarding a quota UPDATE in PostgreSQL with no fencing token (a task stalled past its
// lease writes a quota computed from stale data after the next holder wrote), the fencing-token argument
// of Kleppmann's "How to do distributed locking".
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
    let reply: Option<String> = con.set_options(&key, &token, opts).await?; // expect: unfenced-effect
    if reply.is_none() {
        return Ok(false);
    }
    let used: i64 = sqlx::query_scalar("SELECT used FROM quotas WHERE tenant = $1").bind(tenant).fetch_one(pg).await?;
    sqlx::query("UPDATE quotas SET used = $1 WHERE tenant = $2")
        .bind(used + units)
        .bind(tenant)
        .execute(pg)
        .await?;
    let _released: i64 = Script::new(RELEASE).key(&key).arg(&token).invoke_async(con).await?;
    Ok(true)
}
