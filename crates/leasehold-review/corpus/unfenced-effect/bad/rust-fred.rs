// Reproduces: a Redis lock guarding an HTTP PUT to a downstream inventory service with no idempotency key or
// version (a replica whose lease expired during a slow request retries after the next holder's PUT and
// overwrites it), the fencing argument of Kleppmann's "How to do distributed locking".
use fred::prelude::*;
use fred::types::{Expiration, SetOptions};

const RELEASE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

pub async fn publish_listing(redis: &RedisClient, http: &reqwest::Client, listing_id: u64, body: String) -> anyhow::Result<bool> {
    let key = format!("lock:listing:{listing_id}");
    let token = uuid::Uuid::new_v4().to_string();
    let reply: Option<String> = redis.set(&key, token.as_str(), Some(Expiration::PX(10_000)), Some(SetOptions::NX), false).await?; // expect: unfenced-effect
    if reply.is_none() {
        return Ok(false);
    }
    let url = format!("https://inventory.internal/listings/{listing_id}");
    let sent = http.put(url).body(body).send().await.and_then(|r| r.error_for_status());
    let _released: i64 = redis.eval(RELEASE, vec![key], vec![token]).await?;
    sent?;
    Ok(true)
}
