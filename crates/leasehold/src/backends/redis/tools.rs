//! What leasehold's own tools need of the Redis store (feature `tools`, not a stable API):
//! `leasehold bench` drives a raw redis-rs client with the very scripts the store sends.

/// The Lua source of the grant and release scripts a fenced `redis://` store sends.
/// Grant: `KEYS` lease, fence counter; `ARGV` owner, ttl ms → `{1, fence}` or `{0, pttl}`.
/// Release: `KEYS` lease; `ARGV` owner, wake-up channel → 1 if it was the owner's.
pub fn scripts() -> (&'static str, &'static str) {
    (super::GRANT, super::RELEASE)
}
