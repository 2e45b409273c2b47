// Reproduces: GET, compare in Rust, then DEL as a second command (the lease can expire and another
// holder acquire between the two round trips, and the DEL then removes that holder's lock), the
// check-then-delete race the Redis distributed-locks page says must be one Lua script.
use fred::prelude::*;
use fred::types::{Expiration, SetOptions};

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
        let current: Option<String> = self.client.get(&key).await?;
        if current.as_deref() != Some(token) {
            return Ok(false);
        }
        let removed: i64 = self.client.del(&key).await?; // expect: release-without-owner-check
        Ok(removed == 1)
    }
}
