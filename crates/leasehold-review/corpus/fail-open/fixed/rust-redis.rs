// Fixed: the acquire's error is propagated with `?`, so the sync never runs without the lock (fail closed).
// (Companion of bad/rust-redis.rs: the error only logged.)
use redis::{Connection, RedisResult, Script};

const RELEASE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

pub fn sync_accounts(con: &mut Connection, sync: impl FnOnce()) -> RedisResult<bool> {
    let key = "lock:account-sync";
    let token = uuid::Uuid::new_v4().to_string();
    let reply: Option<String> =
        redis::cmd("SET").arg(key).arg(&token).arg("NX").arg("EX").arg(120).query(con)?;
    if reply.is_none() {
        return Ok(false);
    }
    sync();
    let released: i64 = Script::new(RELEASE).key(key).arg(&token).invoke(con)?;
    Ok(released == 1)
}
