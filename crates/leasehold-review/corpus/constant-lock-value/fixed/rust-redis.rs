// Fixed: try_lock writes a fresh UUID per acquire and returns it; unlock compares that token.
// (Companion of bad/rust-redis.rs: std::process::id() as the lock value.)
use redis::{Connection, RedisResult, Script};

const RELEASE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

pub struct TenantLock;

impl TenantLock {
    /// Returns the owner token when the tenant is now locked by this caller.
    pub fn try_lock(&self, con: &mut Connection, tenant: &str) -> RedisResult<Option<String>> {
        let token = uuid::Uuid::new_v4().to_string();
        let reply: Option<String> = redis::cmd("SET")
            .arg(format!("lock:tenant:{tenant}"))
            .arg(&token)
            .arg("NX")
            .arg("EX")
            .arg(30)
            .query(con)?;
        Ok(reply.map(|_| token))
    }

    pub fn unlock(&self, con: &mut Connection, tenant: &str, token: &str) -> RedisResult<bool> {
        let n: i64 = Script::new(RELEASE).key(format!("lock:tenant:{tenant}")).arg(token).invoke(con)?;
        Ok(n == 1)
    }
}
