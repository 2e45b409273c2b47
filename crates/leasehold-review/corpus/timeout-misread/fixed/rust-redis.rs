// Fixed: the acquire's error is returned to the caller instead of being read as "not leader"; the caller
// backs off and retries, and a SET that did land expires after its 10 s lease. (Companion of bad/rust-redis.rs.)
use redis::aio::MultiplexedConnection;
use redis::{AsyncCommands, ExistenceCheck, RedisResult, SetExpiry, SetOptions};

pub async fn try_lead(con: &mut MultiplexedConnection, group: &str, token: &str) -> RedisResult<bool> {
    let key = format!("lock:leader:{group}");
    let opts = SetOptions::default().conditional_set(ExistenceCheck::NX).with_expiration(SetExpiry::EX(10));
    let reply: Option<String> = con.set_options(&key, token, opts).await?;
    Ok(reply.is_some())
}
