// Reproduces: a Rust const Lua release script that deletes KEYS[1] without comparing ARGV[1], run through
// redis::Script (atomic but not owner-checked: a holder past its lease deletes the next holder's lock),
// the unconditional-release kind the Redis distributed-locks page warns about.
use redis::{Commands, Connection, RedisResult, Script};

const RELEASE_LOCK: &str = r#"return redis.call('DEL', KEYS[1])"#; // expect: release-without-owner-check

pub struct MigrationGuard {
    key: String,
    token: String,
}

pub fn acquire(con: &mut Connection, name: &str) -> RedisResult<Option<MigrationGuard>> {
    let key = format!("lock:migration:{name}");
    let token = uuid::Uuid::new_v4().to_string();
    let reply: Option<String> = redis::cmd("SET")
        .arg(&key)
        .arg(&token)
        .arg("NX")
        .arg("PX")
        .arg(60_000)
        .query(con)?;
    Ok(reply.map(|_| MigrationGuard { key, token }))
}

pub fn release(con: &mut Connection, guard: MigrationGuard) -> RedisResult<bool> {
    let removed: i64 = Script::new(RELEASE_LOCK).key(&guard.key).arg(&guard.token).invoke(con)?;
    Ok(removed == 1)
}

pub fn drop_cached_plan(con: &mut Connection, name: &str) -> RedisResult<()> {
    // Not a lock: a cached migration plan.
    con.del(format!("cache:migration-plan:{name}"))
}
