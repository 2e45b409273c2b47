// Reproduces: the acquire's Result collapsed with unwrap_or(true), so a timeout is read as a grant (if the
// SET never landed, or another replica's did, two replicas run the settlement), the ambiguous-timeout
// point of Kleppmann's lock analysis, misread the other way.
use fred::prelude::*;
use fred::types::{Expiration, SetOptions};

pub async fn should_settle(client: &RedisClient, day: &str, token: &str) -> bool {
    let key = format!("lock:settle:{day}");
    client.set::<Option<String>, _, _>(key, token, Some(Expiration::EX(300)), Some(SetOptions::NX), false).await.map(|r| r.is_some()).unwrap_or(true) // expect: timeout-misread
}
