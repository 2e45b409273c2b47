// Fixed: the heartbeat renews through a compare-and-pexpire Lua script with this replica's token and stops,
// signalling the loss, as soon as the key is no longer ours. (Companion of bad/rust-fred.rs.)
use fred::prelude::*;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

const EXTEND: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";

pub fn spawn_heartbeat(client: RedisClient, key: String, token: String, lease: Duration, lost: watch::Sender<bool>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(lease / 3);
        loop {
            every.tick().await;
            let args = vec![token.clone(), lease.as_millis().to_string()];
            let renewed: Result<i64, RedisError> = client.eval(EXTEND, vec![key.clone()], args).await;
            if !matches!(renewed, Ok(1)) {
                lost.send_replace(true);
                break;
            }
        }
    })
}
