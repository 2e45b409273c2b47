//! What leasehold's own tools need of the Redis store (feature `tools`, not a stable API):
//! `leasehold bench` drives a raw redis-rs client with the very scripts the store sends, with
//! the same keys and arguments.

use redis::ScriptInvocation;

/// The Lua source of the grant and release scripts a fenced `redis://` store sends.
/// Grant → `{1, fence}` or `{0, pttl}`; release → 1 if it was the owner's (2: already
/// released by this owner, a retry).
pub fn scripts() -> (&'static str, &'static str) {
    (super::GRANT, super::RELEASE)
}

/// The grant's keys and arguments as the store sends them, for the lease key `lease`
/// (`PREFIX{KEY}`), an owner token, a TTL in ms and the holder's info line
/// ([`crate::HolderInfo::encode`], `""` for none), with the default horizon
/// ([`crate::horizon::DEFAULT_HORIZON`]).
pub fn grant_args(
    inv: &mut ScriptInvocation<'_>,
    lease: &str,
    owner: &str,
    ttl_ms: u64,
    info: &str,
) {
    inv.key(lease).key(format!("{lease}:fence")).key(format!("{lease}:holder"));
    inv.arg(owner).arg(ttl_ms).arg(info);
    inv.arg(crate::horizon::DEFAULT_HORIZON.as_millis() as u64);
}

/// The horizon a `redis://` URL sets (`horizon=`, else the default).
pub fn horizon(url: &str) -> crate::Result<std::time::Duration> {
    Ok(super::parse_query(url)?.1.horizon)
}

/// The release's keys and arguments as a store sends them (its tombstone living the default
/// op timeout), waking waiters with `publish`: `PUBLISH`, or `SPUBLISH` on a cluster.
pub fn release_args(inv: &mut ScriptInvocation<'_>, lease: &str, owner: &str, publish: &str) {
    inv.key(lease).key(format!("{lease}:holder")).key(format!("{lease}:released-by"));
    let tombstone_ms = crate::DEFAULT_OP_TIMEOUT.as_millis() as u64;
    inv.arg(owner).arg(format!("{lease}:released")).arg(tombstone_ms).arg(publish);
}

/// The Lua source of a reader's grant (`KEYS`: lease, fence counter, readers, intents;
/// `ARGV`: owner, ttl ms, info line) → `{1, fence}` or `{0, ms}`, which issues its fence from
/// the key's counter by the mutex's rule.
pub fn shared_grant_script() -> &'static str {
    super::prims::GRANT_SHARED
}
