// Fixed: set_options with ExistenceCheck::NX and SetExpiry::PX sends SET key token NX PX in one command,
// so the key never exists without a TTL. (Companion of bad/rust-redis.rs: set_nx then expire.)
// Release compares the owner token in Lua.
use redis::aio::MultiplexedConnection;
use redis::{AsyncCommands, ExistenceCheck, RedisResult, Script, SetExpiry, SetOptions};

const RELEASE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

pub struct CompactionLock {
    con: MultiplexedConnection,
}

impl CompactionLock {
    /// Returns the owner token when this node now holds the lock.
    pub async fn try_acquire(&mut self, shard: u32) -> RedisResult<Option<String>> {
        let key = format!("lock:compaction:{shard}");
        let token = uuid::Uuid::new_v4().to_string();
        let opts = SetOptions::default()
            .conditional_set(ExistenceCheck::NX)
            .with_expiration(SetExpiry::PX(120_000));
        let reply: Option<String> = self.con.set_options(&key, &token, opts).await?;
        Ok(reply.map(|_| token))
    }

    pub async fn release(&mut self, shard: u32, token: &str) -> RedisResult<bool> {
        let key = format!("lock:compaction:{shard}");
        let deleted: i64 = Script::new(RELEASE).key(&key).arg(token).invoke_async(&mut self.con).await?;
        Ok(deleted == 1)
    }
}
