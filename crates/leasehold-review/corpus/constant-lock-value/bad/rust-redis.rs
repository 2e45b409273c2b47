// Reproduces: std::process::id() as the lock value (every task in the process writes the same value, so one
// task's owner-checked release frees a lock another task holds), the "value must be unique per acquire"
// point of the Redis locking pattern.
use redis::{Connection, RedisResult, Script};

const RELEASE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

pub struct TenantLock {
    owner: String,
}

impl TenantLock {
    pub fn new() -> Self {
        TenantLock { owner: std::process::id().to_string() }
    }

    pub fn try_lock(&self, con: &mut Connection, tenant: &str) -> RedisResult<bool> {
        let reply: Option<String> = redis::cmd("SET") // expect: constant-lock-value
            .arg(format!("lock:tenant:{tenant}"))
            .arg(&self.owner)
            .arg("NX")
            .arg("EX")
            .arg(30)
            .query(con)?;
        Ok(reply.is_some())
    }

    pub fn unlock(&self, con: &mut Connection, tenant: &str) -> RedisResult<bool> {
        let n: i64 = Script::new(RELEASE).key(format!("lock:tenant:{tenant}")).arg(&self.owner).invoke(con)?;
        Ok(n == 1)
    }
}
