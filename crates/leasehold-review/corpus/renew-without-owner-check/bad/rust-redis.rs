// Reproduces: a Rust const "extend" Lua script that PEXPIREs KEYS[1] without comparing ARGV[1] (a holder that
// stalled past its lease extends whoever holds the key now), the unchecked-extend kind the Redlock
// "extend" guidance warns about.
use redis::aio::ConnectionManager;
use redis::{RedisResult, Script};
use std::time::Duration;

const EXTEND_LOCK: &str = "return redis.call('PEXPIRE', KEYS[1], ARGV[2])"; // expect: renew-without-owner-check

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
