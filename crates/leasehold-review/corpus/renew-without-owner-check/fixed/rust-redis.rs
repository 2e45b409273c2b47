// Fixed: the extend script compares the stored value with this lease's token before PEXPIRE, so a stalled
// holder learns it lost the lock instead of extending someone else's. (Companion of bad/rust-redis.rs.)
use redis::aio::ConnectionManager;
use redis::{RedisResult, Script};
use std::time::Duration;

const EXTEND_LOCK: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('PEXPIRE', KEYS[1], ARGV[2])
else
    return 0
end"#;

pub struct Lease {
    pub key: String,
    pub token: String,
    pub ttl: Duration,
}

impl Lease {
    pub async fn extend(&self, con: &mut ConnectionManager) -> RedisResult<bool> {
        let extended: i64 = Script::new(EXTEND_LOCK)
            .key(&self.key)
            .arg(&self.token)
            .arg(self.ttl.as_millis() as u64)
            .invoke_async(con)
            .await?;
        Ok(extended == 1)
    }
}
