// Reproduces: redis-rs set_nx followed by a separate expire (if the task is cancelled or the connection
// drops between the two awaits, the lock key is left without a TTL and the compaction never runs
// again), the SETNX-then-EXPIRE pattern the Redis SETNX page calls unsafe.
use redis::aio::MultiplexedConnection;
use redis::{AsyncCommands, RedisResult, Script};

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
        let acquired: bool = self.con.set_nx(&key, &token).await?; // expect: nx-without-expiry
        if !acquired {
            return Ok(None);
        }
        let _: bool = self.con.expire(&key, 120).await?;
        Ok(Some(token))
    }

    pub async fn release(&mut self, shard: u32, token: &str) -> RedisResult<bool> {
        let key = format!("lock:compaction:{shard}");
        let deleted: i64 = Script::new(RELEASE).key(&key).arg(token).invoke_async(&mut self.con).await?;
        Ok(deleted == 1)
    }
}
