// Reproduces: a redis-rs SET NX PX built with redis::cmd whose reply is discarded (`query::<()>`), so the
// warm-up runs on every node whether or not it got the lock, the "check the SET reply" point of the
// Redis locking pattern.
use redis::{Connection, RedisResult, Script};

const RELEASE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

pub fn warm_cache(con: &mut Connection, region: &str, warm: impl FnOnce()) -> RedisResult<()> {
    let key = format!("lock:warmup:{region}");
    let token = uuid::Uuid::new_v4().to_string();
    redis::cmd("SET") // expect: unchecked-acquire
        .arg(&key)
        .arg(&token)
        .arg("NX")
        .arg("PX")
        .arg(45_000)
        .query::<()>(con)?;
    warm();
    let _released: i64 = Script::new(RELEASE).key(&key).arg(&token).invoke(con)?;
    Ok(())
}
