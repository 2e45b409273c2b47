//! What leasehold's own tools need of the NATS store (feature `tools`, not a stable API): the
//! names, headers and values with which `leasehold bench` drives a raw async-nats client
//! through the very requests the store sends (read the key, write the heartbeat and read its
//! stamp, compare-and-set the grant; the release marker).

use std::time::Duration;

/// The header that makes a write a compare-and-set on the subject's last sequence.
pub const EXPECTED_LAST: &str = super::record::EXPECTED_LAST;
/// The release marker's header carrying the released grant's fence.
pub const FENCE_HEADER: &str = super::record::FENCE_HEADER;
/// The KV operation header (`DEL` on a release marker).
pub const KV_OPERATION: &str = super::record::KV_OPERATION;

/// The subject of `key`'s grant in the grants' bucket `bucket`.
pub fn grant_subject(bucket: &str, key: &str) -> String {
    format!("$KV.{bucket}.{}", super::record::token(key))
}

/// The heartbeat bucket a lease of `ttl` uses, and its `max_age`.
pub fn heartbeat_bucket(bucket: &str, ttl: Duration) -> (String, Duration) {
    let ms = super::record::bucket_ttl_ms(ttl);
    (super::record::beat_bucket(bucket, ms), Duration::from_millis(ms))
}

/// The grant's value as the store writes it (owner token, fence, TTL bucket; no holder info).
pub fn grant_value(owner: &crate::OwnerToken, fence: u64, ttl: Duration) -> String {
    let ttl_ms = super::record::bucket_ttl_ms(ttl);
    super::record::Record { owner: *owner, fence, ttl_ms, info: None }.encode()
}

/// The fence a grant issues after `prev`, its heartbeat stamped at `stamp_ns`.
pub fn next_fence(prev: u64, stamp_ns: i128) -> u64 {
    super::record::next_fence(prev, stamp_ns)
}

/// The JetStream stream that holds the grants' bucket of the `nats://` URL `url`
/// (`KV_BUCKET`), whose leader a chaos failover kills. [`crate::Error::InvalidInput`] when
/// `url` is another store's.
pub fn grants_stream(url: &crate::StoreUrl) -> crate::Result<String> {
    let cfg: &super::config::Config = url.config_of("nats://")?;
    Ok(format!("KV_{}", cfg.bucket))
}

/// How many replicas the URL asks of the buckets leasehold creates (`replicas=`, 1 by
/// default). [`crate::Error::InvalidInput`] when `url` is another store's.
pub fn replicas(url: &crate::StoreUrl) -> crate::Result<usize> {
    let cfg: &super::config::Config = url.config_of("nats://")?;
    Ok(cfg.replicas)
}

/// Removes what a released `key` leaves in the grants' bucket of the `nats://` URL `url` (its
/// release marker, which carries the key's last fence), as `Store::forget` does for the
/// sizing probe's keys: a stream purge of the key's subject up to the marker's sequence, so a
/// grant written since is never touched (and no purge marker is left), and a key still held
/// is left alone. The next grant's fence then
/// comes from the server's clock, still above the forgotten ones. Heartbeats need nothing:
/// their bucket's `max_age` expires them. Errors: [`crate::Error::InvalidInput`] for another
/// store's URL; the store's errors when it cannot be reached.
pub async fn forget(url: &crate::StoreUrl, key: &str) -> crate::Result<()> {
    use crate::Store;
    let cfg: &super::config::Config = url.config_of("nats://")?;
    let store = super::NatsStore::open(cfg, crate::limits::Limits::default()).await?;
    store.forget(&crate::Key::new(key)?).await
}

/// What a pruning round does to `key` once it has examined its record at stream sequence
/// `seq` in `store`'s grants' bucket and found it forgettable: purges the subject's messages
/// up to and including `seq`, never one written after (a grant made since the examination).
/// Returns how many messages went. Errors: [`crate::Error::InvalidInput`] for a bad key,
/// [`crate::Error::UnknownOutcome`] when the server does not answer in the op timeout.
pub async fn purge_examined(store: &super::NatsStore, key: &str, seq: u64) -> crate::Result<u64> {
    let key = crate::Key::new(key)?;
    store.purge_through(&store.subject(&key), seq).await
}

/// The NATS client crate the store is built on, so a tool's raw baseline sends its requests
/// through the same client and version (no second client stack).
pub use async_nats;

/// The store a `nats://` URL names, opened on its parsed configuration within
/// [`crate::DEFAULT_CONNECT_TIMEOUT`] as [`super::NatsStore::connect`] opens it (the grants'
/// bucket exists afterwards). [`crate::Error::InvalidInput`] for another store's URL; the
/// connect's own errors otherwise.
pub async fn connect(url: &crate::StoreUrl) -> crate::Result<super::NatsStore> {
    let cfg: &super::config::Config = url.config_of("nats://")?;
    super::NatsStore::open(cfg, super::Limits::default()).await
}

/// A clone of the store's client (it shares the store's connection).
pub fn client(store: &super::NatsStore) -> async_nats::Client {
    store.client.clone()
}
