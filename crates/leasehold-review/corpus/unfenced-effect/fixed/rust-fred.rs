// Fixed: while holding the lock the replica takes a fence from INCR and sends it as the listing version
// (If-Match-style precondition the inventory service enforces), so a stale replica's PUT is rejected.
// (Companion of bad/rust-fred.rs: a PUT with no version or idempotency key.)
use fred::prelude::*;
use fred::types::{Expiration, SetOptions};

const RELEASE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

pub async fn publish_listing(redis: &RedisClient, http: &reqwest::Client, listing_id: u64, body: String) -> anyhow::Result<bool> {
    let key = format!("lock:listing:{listing_id}");
    let token = uuid::Uuid::new_v4().to_string();
    let reply: Option<String> = redis.set(&key, token.as_str(), Some(Expiration::PX(10_000)), Some(SetOptions::NX), false).await?;
    if reply.is_none() {
        return Ok(false);
    }
    let fence: i64 = redis.incr(format!("fence:listing:{listing_id}")).await?;
    let url = format!("https://inventory.internal/listings/{listing_id}");
    let sent = http
        .put(url)
        .header("X-Fencing-Token", fence.to_string())
        .body(body)
        .send()
        .await
        .and_then(|r| r.error_for_status());
    let _released: i64 = redis.eval(RELEASE, vec![key], vec![token]).await?;
    sent?;
    Ok(true)
}
