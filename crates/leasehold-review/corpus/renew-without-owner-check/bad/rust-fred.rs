// Reproduces: a tokio heartbeat task that renews the lock with a bare PEXPIRE (after the lease lapsed and
// another replica acquired, the heartbeat keeps that replica's lock alive and this replica never learns
// it lost it), the unchecked-extend kind the Redlock "extend" guidance warns about.
use fred::prelude::*;
use std::time::Duration;
use tokio::task::JoinHandle;

pub fn spawn_heartbeat(client: RedisClient, key: String, lease: Duration) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(lease / 3);
        loop {
            every.tick().await;
            let renewed: Result<bool, RedisError> = client.pexpire(&key, lease.as_millis() as i64, None).await; // expect: renew-without-owner-check
            if !matches!(renewed, Ok(true)) {
                break;
            }
        }
    })
}
