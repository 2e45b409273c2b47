// Reproduces: the acquire's RedisError only logged with `if let Err(e) = ... { warn!(..) }`, after which
// the sync runs anyway (when Redis is down every node syncs at once: fail-open), the kind Kleppmann's
// lock analysis calls out.
use log::warn;
use redis::{Connection, RedisResult, Script};

const RELEASE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

pub fn sync_accounts(con: &mut Connection, sync: impl FnOnce()) -> RedisResult<()> {
    let key = "lock:account-sync";
    let token = uuid::Uuid::new_v4().to_string();
    let reply: RedisResult<Option<String>> =
        redis::cmd("SET").arg(key).arg(&token).arg("NX").arg("EX").arg(120).query(con);
    if let Err(e) = &reply { // expect: fail-open
        warn!("lock store unavailable, syncing without the lock: {e}");
    } else if matches!(reply, Ok(None)) {
        return Ok(());
    }
    sync();
    let _released: i64 = Script::new(RELEASE).key(key).arg(&token).invoke(con)?;
    Ok(())
}
