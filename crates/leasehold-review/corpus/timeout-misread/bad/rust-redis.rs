// Reproduces: the acquire's Result collapsed with unwrap_or(false), so a timeout or dropped connection is
// read as "someone else holds it" (the SET may have landed and blocks every node for the lease), the
// ambiguous-timeout point of Kleppmann's lock analysis.
use redis::aio::MultiplexedConnection;
use redis::{AsyncCommands, ExistenceCheck, SetExpiry, SetOptions};

pub async fn try_lead(con: &mut MultiplexedConnection, group: &str, token: &str) -> bool {
    let key = format!("lock:leader:{group}");
    let opts = SetOptions::default().conditional_set(ExistenceCheck::NX).with_expiration(SetExpiry::EX(10));
    con.set_options::<_, _, Option<String>>(&key, token, opts).await.map(|r| r.is_some()).unwrap_or(false) // expect: timeout-misread
}
