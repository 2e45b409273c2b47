// Fixed: the acquire's error propagates to the caller, which neither runs the settlement nor reports
// contention until it knows. (Companion of bad/rust-fred.rs: unwrap_or(true) on the acquire.)
use fred::prelude::*;
use fred::types::{Expiration, SetOptions};

pub async fn should_settle(client: &RedisClient, day: &str, token: &str) -> Result<bool, RedisError> {
    let key = format!("lock:settle:{day}");
    let reply: Option<String> = client.set(key, token, Some(Expiration::EX(300)), Some(SetOptions::NX), false).await?;
    Ok(reply.is_some())
}
