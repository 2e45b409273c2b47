// Fixed: the release script compares the stored value with the guard's token before DEL.
// (Companion of bad/rust-redis.rs: a const release script that deletes unconditionally.)
// Acquire is SET NX PX with a per-acquire UUID.
use redis::{Commands, Connection, RedisResult, Script};

const RELEASE_LOCK: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
else
    return 0
end"#;

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
