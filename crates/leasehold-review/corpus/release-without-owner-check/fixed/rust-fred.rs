// Fixed: compare and delete run atomically in one Lua script through fred's eval, so an expired lease
// cannot make this holder remove its successor's lock. (Companion of bad/rust-fred.rs.)
// Acquire is SET NX PX with a per-acquire UUID.
use fred::prelude::*;
use fred::types::{Expiration, SetOptions};

const RELEASE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

pub struct ShardLock {
    client: RedisClient,
}

impl ShardLock {
    pub async fn lock(&self, shard: &str) -> Result<Option<String>, RedisError> {
        let token = uuid::Uuid::new_v4().to_string();
        let reply: Option<String> = self
            .client
            .set(format!("lock:shard:{shard}"), token.as_str(), Some(Expiration::PX(15_000)), Some(SetOptions::NX), false)
            .await?;
        Ok(reply.map(|_| token))
    }

    pub async fn unlock(&self, shard: &str, token: &str) -> Result<bool, RedisError> {
        let key = format!("lock:shard:{shard}");
        let removed: i64 = self.client.eval(RELEASE, vec![key], vec![token.to_string()]).await?;
        Ok(removed == 1)
    }
}
