//! The ladder of heartbeat buckets: a fixed set of lease lengths (1 s, 10 s, 1 min, 10 min,
//! 1 h) whose heartbeat buckets a task of the store makes when the store opens, while the
//! cluster can place them, so that a TTL whose own bucket cannot be made later (a node of a
//! 3-node cluster down: a new 3-replica stream cannot be placed) finds a longer bucket in
//! `fallback.rs` (`docs/design.md`, NATS JetStream KV, "A new TTL while a node is down").
//!
//! A rung is an ordinary heartbeat bucket (`BUCKET-ttl-10000ms`, `max_age` its length, the
//! URL's replicas and storage): nothing reads it unless a grant names it, and `fallback.rs`'s
//! lookup of existing buckets finds it as it finds any other. What it costs: one stream, on a
//! cluster one Raft group, per rung (five), made once per grants' bucket; a holder granted on
//! a rung because its own TTL's bucket could not be made, and that then dies, is replaced up
//! to the next rung after its last heartbeat (at most ten times its TTL for any TTL from
//! 100 ms to the top rung). A TTL above the top rung has no longer bucket: while its own
//! cannot be made it is still refused.
//!
//! The task never delays nor fails the store's open: it runs beside it, each rung's check or
//! creation bounded by the op timeout (a rung that exists costs one stream-info request). A
//! rung that cannot be made now (the cluster already lacks a node) is only an optimisation
//! for a later outage: it is tried again every [`RETRY_EVERY`] until made, and the task ends
//! once every rung exists, or when the store is dropped. The store keeps the handles of the
//! rungs the task opened ([`Rungs`]), so a fallback to one sends no request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::kv;

use super::{NatsStore, open_bucket};

/// The rungs opened so far by lease length in ms, shared by the store and its ladder task:
/// a fallback then needs no request to find its rung (after a node's loss, chaos `failover`
/// saw a rung's stream-info request go unanswered past the attempt's op timeout).
pub(super) type Rungs = Arc<Mutex<HashMap<u64, kv::Store>>>;

/// The rungs' lease lengths in ms: each at most ten times the one below, so a grant that
/// falls back to the next rung lasts at most ten times its TTL after its holder dies. Exact
/// values of `record::bucket_ttl_ms` (two significant digits), so a TTL of one of them uses
/// the rung itself.
pub(super) const RUNGS_MS: [u64; 5] = [1_000, 10_000, 60_000, 600_000, 3_600_000];

/// How long the task waits before trying again the rungs it could not make.
const RETRY_EVERY: Duration = Duration::from_secs(60);

impl NatsStore {
    /// Makes sure each of `rungs` exists (opening it, creating it when absent), all at once so
    /// that one whose stream does not answer holds up no other; returns those that could not
    /// be made. Each is bounded by the op timeout.
    pub(super) async fn make_rungs(&self, rungs: &[u64]) -> Vec<u64> {
        let each = rungs.iter().map(|&ms| async move {
            let name = super::record::beat_bucket(&self.cfg.bucket, ms);
            let opening = open_bucket(&self.js, &self.cfg, &name, Duration::from_millis(ms));
            (ms, self.bounded("open bucket", false, opening).await)
        });
        let mut missing = Vec::new();
        for (ms, made) in futures_util::future::join_all(each).await {
            match made {
                Ok(b) => {
                    self.rungs().insert(ms, b);
                }
                Err(e) => {
                    tracing::debug!("NATS heartbeat rung of {ms} ms not made (tried later): {e}");
                    missing.push(ms);
                }
            }
        }
        missing.sort_unstable();
        missing
    }

    /// The smallest rung opened so far at least `ttl_ms` long, and its length.
    pub(super) fn rung_at_least(&self, ttl_ms: u64) -> Option<(u64, kv::Store)> {
        let rungs = self.rungs();
        let ms = rungs.keys().copied().filter(|&ms| ms >= ttl_ms).min()?;
        rungs.get(&ms).map(|b| (ms, b.clone()))
    }

    fn rungs(&self) -> std::sync::MutexGuard<'_, HashMap<u64, kv::Store>> {
        self.rungs.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The ladder's task of one store, ended when the store is dropped.
#[derive(Debug)]
pub(super) struct Ladder(tokio::task::AbortHandle);

impl Ladder {
    /// Starts the task on `store` (a handle sharing the store's connection): it makes the
    /// missing rungs now, then every [`RETRY_EVERY`] those still missing, and ends once all
    /// exist. Errors are only logged: no grant needs a rung while its own bucket can be made.
    pub(super) fn start(store: NatsStore) -> Ladder {
        Ladder(
            tokio::spawn(async move {
                let mut missing = store.make_rungs(&RUNGS_MS).await;
                while !missing.is_empty() {
                    tokio::time::sleep(RETRY_EVERY).await;
                    missing = store.make_rungs(&missing).await;
                }
            })
            .abort_handle(),
        )
    }
}

impl Drop for Ladder {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rungs_are_bucket_lengths_and_each_at_most_ten_times_the_last() {
        for ms in RUNGS_MS {
            let rounded = super::super::record::bucket_ttl_ms(Duration::from_millis(ms));
            assert_eq!(rounded, ms, "a TTL of {ms} ms would not use its rung");
        }
        for w in RUNGS_MS.windows(2) {
            assert!(w[0] < w[1] && w[1] <= 10 * w[0], "{w:?}");
        }
        // The smallest TTL a bucket has (100 ms) falls back at most ten times longer.
        assert!(RUNGS_MS[0] <= 10 * super::super::record::bucket_ttl_ms(Duration::ZERO));
    }
}
