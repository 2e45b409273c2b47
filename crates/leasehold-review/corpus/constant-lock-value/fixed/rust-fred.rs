// Fixed: a fresh UUID per acquire is the lock value and the release compares it.
// (Companion of bad/rust-fred.rs: the literal "locked" as the value.)
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
    let token = uuid::Uuid::new_v4().to_string();
    let reply: Option<String> = client.set(&key, token.as_str(), Some(Expiration::EX(60)), Some(SetOptions::NX), false).await?;
    if reply.is_none() {
        return Ok(false);
    }
    work().await;
    let _: i64 = client.eval(RELEASE, vec![key], vec![token]).await?;
    Ok(true)
}
