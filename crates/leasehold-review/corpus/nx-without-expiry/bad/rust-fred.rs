// Reproduces: fred SET with SetOptions::NX but no Expiration, so the lock has no lease (a pod evicted
// mid-rebuild leaves the key and no node rebuilds the index again), the "lock without a lease" kind
// the Redis distributed-locks page warns about.
use fred::prelude::*;
use fred::types::SetOptions;

const RELEASE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

pub async fn rebuild_index<F, Fut>(client: &RedisClient, index: &str, rebuild: F) -> Result<bool, RedisError>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let key = format!("lock:index:{index}");
    let token = uuid::Uuid::new_v4().to_string();
    let reply: Option<String> = client.set(&key, token.as_str(), None, Some(SetOptions::NX), false).await?; // expect: nx-without-expiry
    if reply.is_none() {
        return Ok(false);
    }
    rebuild().await;
    let _: i64 = client.eval(RELEASE, vec![key], vec![token]).await?;
    Ok(true)
}
