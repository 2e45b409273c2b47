// Fixed: the SET NX PX reply is read as Option<String>; None means another node holds the lock and the
// warm-up is skipped. (Companion of bad/rust-redis.rs: the reply discarded with query::<()>.)
use redis::{Connection, RedisResult, Script};

const RELEASE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

pub fn warm_cache(con: &mut Connection, region: &str, warm: impl FnOnce()) -> RedisResult<bool> {
    let key = format!("lock:warmup:{region}");
    let token = uuid::Uuid::new_v4().to_string();
    let reply: Option<String> = redis::cmd("SET")
        .arg(&key)
        .arg(&token)
        .arg("NX")
        .arg("PX")
        .arg(45_000)
        .query(con)?;
    if reply.is_none() {
        return Ok(false);
    }
    warm();
    let released: i64 = Script::new(RELEASE).key(&key).arg(&token).invoke(con)?;
    Ok(released == 1)
}
