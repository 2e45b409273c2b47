// Reproduces: the literal "locked" as the lock value in fred's SET NX EX (all holders write the same string,
// so the compare in the release cannot tell a stale holder from the current one), the "value must be
// unique per acquire" point of the Redis locking pattern.
use fred::prelude::*;
use fred::types::{Expiration, SetOptions};

const RELEASE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

pub async fn with_export_lock<F, Fut>(client: &RedisClient, export: &str, work: F) -> Result<bool, RedisError>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let key = format!("lock:export:{export}");
    let reply: Option<String> = client.set(&key, "locked", Some(Expiration::EX(60)), Some(SetOptions::NX), false).await?; // expect: constant-lock-value
    if reply.is_none() {
        return Ok(false);
    }
    work().await;
    let _: i64 = client.eval(RELEASE, vec![key], vec!["locked"]).await?;
    Ok(true)
}
