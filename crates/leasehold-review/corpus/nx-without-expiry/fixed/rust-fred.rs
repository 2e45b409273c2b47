// Fixed: SET NX with Expiration::PX in the same command, so a dead holder's lock expires.
// (Companion of bad/rust-fred.rs: SET NX with no Expiration.)
// Release compares the owner token in Lua.
use fred::prelude::*;
use fred::types::{Expiration, SetOptions};

const RELEASE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

pub async fn rebuild_index<F, Fut>(client: &RedisClient, index: &str, rebuild: F) -> Result<bool, RedisError>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let key = format!("lock:index:{index}");
    let token = uuid::Uuid::new_v4().to_string();
    let reply: Option<String> = client
        .set(&key, token.as_str(), Some(Expiration::PX(300_000)), Some(SetOptions::NX), false)
        .await?;
    if reply.is_none() {
        return Ok(false);
    }
    rebuild().await;
    let _: i64 = client.eval(RELEASE, vec![key], vec![token]).await?;
    Ok(true)
}
