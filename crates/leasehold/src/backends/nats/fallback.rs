//! A lease length whose heartbeat bucket cannot be made: while one node of a 3-node cluster is
//! down, a new 3-replica stream cannot be placed, so a TTL never used before would not be
//! granted at all. Such a grant uses the smallest existing heartbeat bucket whose `max_age`
//! `T'` is at least the TTL's `T` (`docs/design.md`, NATS JetStream KV).
//!
//! Safe: the grant record names the bucket used, so contenders judge the heartbeat where it
//! is, and the server keeps the lease `T' ≥ T` after each heartbeat, while the holder's own
//! deadline still counts `T` (the TTL asked). The cost: a holder that dies is replaced only
//! `T'` after its last heartbeat, not `T`. The ladder's rungs (`ladder.rs`, 1 s to 1 h, made
//! when the store opens) are such buckets, so every TTL up to the top rung finds one. With no
//! longer bucket (a TTL above the top rung, or rungs never made), the creation's error stands.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use async_nats::jetstream::kv;
use futures_util::TryStreamExt;

use super::NatsStore;
use crate::Result;

/// How long a bucket that could not be made is not tried again (each try can cost the op
/// timeout, which a renewal cannot spend).
const RETRY_AFTER: Duration = Duration::from_secs(30);

/// Lease lengths in ms whose bucket could not be made, with the bucket used instead and when.
pub(super) type Fallbacks = std::sync::Mutex<HashMap<u64, (u64, Instant)>>;

/// The lease length in ms of heartbeat bucket `stream` (`KV_BUCKET-ttl-Nms`) of `bucket`.
fn stream_ttl_ms(bucket: &str, stream: &str) -> Option<u64> {
    let rest = stream.strip_prefix("KV_")?.strip_prefix(bucket)?.strip_prefix("-ttl-")?;
    rest.strip_suffix("ms")?.parse().ok()
}

/// The smallest of `have` at least `ttl_ms`.
fn smallest_at_least(have: impl IntoIterator<Item = u64>, ttl_ms: u64) -> Option<u64> {
    have.into_iter().filter(|&t| t >= ttl_ms).min()
}

impl NatsStore {
    /// The heartbeat bucket a grant of lease length `ttl_ms` uses, and its own length: the
    /// TTL's bucket, made on first use; if it cannot be made (unavailable: no placement, no
    /// answer in half the op timeout), the smallest rung of the ladder this store opened at
    /// least as long, else the smallest existing bucket at least as long, for
    /// [`RETRY_AFTER`]. Errors: the creation's, when no such bucket exists either (a bucket
    /// whose creation got no answer is unavailable: no grant was written yet).
    pub(super) async fn beats_for(&self, ttl_ms: u64) -> Result<(u64, kv::Store)> {
        let recent = self.fallbacks().get(&ttl_ms).copied();
        let open = self.beats.lock().await.contains_key(&ttl_ms);
        if let Some((longer, since)) = recent
            && since.elapsed() < RETRY_AFTER
            && !open
        {
            return Ok((longer, self.beats(longer).await?));
        }
        // Half the op timeout: the whole attempt has one op timeout, and a creation that gets
        // no answer (seen on a cluster with a node down) must leave the rest of it for the
        // fallback; else the attempt ends unknown and the fallback is never reached.
        let limit = self.op_timeout() / 2;
        let made = match tokio::time::timeout(limit, self.beats(ttl_ms)).await {
            Ok(made) => made,
            Err(_) => Err(crate::Error::unavailable(
                format!("NATS bucket of {ttl_ms} ms got no answer within {limit:?}"),
                None,
            )),
        };
        let err = match made {
            Ok(b) => {
                self.fallbacks().remove(&ttl_ms);
                return Ok((ttl_ms, b));
            }
            Err(e) if e.is_unavailable() => e,
            Err(e) => return Err(e),
        };
        // A rung this store's ladder opened: no request (chaos `failover` saw a rung's
        // stream-info request go unanswered after a node's loss, likely its group electing).
        if let Some((longer, b)) = self.rung_at_least(ttl_ms) {
            self.beats.lock().await.insert(longer, b.clone());
            tracing::debug!("NATS bucket of {ttl_ms} ms cannot be made ({err}): rung {longer} ms");
            self.fallbacks().insert(ttl_ms, (longer, Instant::now()));
            return Ok((longer, b));
        }
        let prefix = format!("{}-ttl-", self.cfg.bucket);
        let names = async {
            let names = self.js.stream_names().try_collect::<Vec<String>>().await;
            names.map_err(|e| super::request::nats_err("list streams", e))
        };
        let Ok(names) = self.bounded("list streams", false, names).await else { return Err(err) };
        let have = names.iter().filter_map(|n| stream_ttl_ms(&self.cfg.bucket, n));
        let Some(longer) = smallest_at_least(have, ttl_ms) else { return Err(err) };
        let b = self.beats(longer).await?;
        tracing::debug!("NATS bucket {prefix}{ttl_ms}ms cannot be made ({err}): using {longer} ms");
        self.fallbacks().insert(ttl_ms, (longer, Instant::now()));
        Ok((longer, b))
    }

    /// The bucket a renewal asking `ttl_ms` writes to, for a grant now in the bucket of
    /// `held_ms`: that one when it is at least as long and the TTL's own bucket is not open
    /// (a grant made on a fallback stays there), else [`NatsStore::beats_for`]'s.
    pub(super) async fn renewal_ttl_ms(&self, ttl_ms: u64, held_ms: u64) -> Result<u64> {
        let open = self.beats.lock().await.contains_key(&ttl_ms);
        if ttl_ms == held_ms || (held_ms > ttl_ms && !open) {
            return Ok(held_ms);
        }
        Ok(self.beats_for(ttl_ms).await?.0)
    }

    fn fallbacks(&self) -> std::sync::MutexGuard<'_, HashMap<u64, (u64, Instant)>> {
        self.fallbacks.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeat_streams_are_recognised_and_the_smallest_longer_is_chosen() {
        assert_eq!(stream_ttl_ms("leasehold", "KV_leasehold-ttl-700ms"), Some(700));
        assert_eq!(stream_ttl_ms("leasehold", "KV_leasehold"), None);
        assert_eq!(stream_ttl_ms("leasehold", "KV_other-ttl-700ms"), None);
        assert_eq!(stream_ttl_ms("leasehold", "KV_leasehold-ttl-x"), None);
        assert_eq!(stream_ttl_ms("lh", "KV_lh-ttl-1500ms"), Some(1500));
        assert_eq!(super::super::record::beat_bucket("lh", 1500), "lh-ttl-1500ms");
        assert_eq!(smallest_at_least([300, 30_000, 2_000], 1_500), Some(2_000));
        assert_eq!(smallest_at_least([300, 1_500], 1_500), Some(1_500));
        assert_eq!(smallest_at_least([300, 1_000], 1_500), None);
    }
}
