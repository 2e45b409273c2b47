//! The horizon: how long a key's per-key state (fence counter, lease row, a resource's claim)
//! is kept once nothing of it is live, and why forgetting it cannot make a fence go back
//! (`docs/design.md` §4.6).
//!
//! A clock-backed fence is `max(counter + 1, the store's clock in µs)` (see
//! [`crate::FenceRepeat::ClockBacked`]). A counter forgotten once the horizon `H` has passed
//! since its last grant cannot make the next fence smaller: the next grant reads the clock at
//! least `H` later, so it issues at least `clock - D` where `D` is how far the store's clock
//! may step back, while the forgotten fence was at most its grant's clock plus the counter's
//! lead `L` over the clock. A step back itself lets the counter lead: `L ≤ D + 1 µs` while a
//! key gets at most one grant per µs (`crate::CLOCK_ASSUMPTION`). So it holds while
//! `L + D < H`, i.e. `2D + 1 µs < H` ([`HORIZON_ASSUMPTION`]): the smallest horizon (1 s)
//! leaves a clock that steps back by less than half a second. The protocol model checks this bound
//! (`Config::forget`).
//!
//! Resources ([`crate::fence`]) refuse a claim whose fence is older than the horizon
//! ([`crate::StaleReason::PastHorizon`]), and forget a claim whose fence is
//! older than twice the horizon (the rules `past_horizon` and `may_forget` in
//! `fence/rule.rs`, public as `leasehold::rules` with the feature `tools`).

use std::time::Duration;

/// The horizon when the store URL (`horizon=`) or the resource does not set one: a day. A
/// resource refuses a claim whose fence is older than the horizon and forgets claims twice
/// as old, so it must exceed the longest a grant is held (see the module docs).
pub const DEFAULT_HORIZON: Duration = Duration::from_secs(24 * 3600);

/// The smallest horizon a store or resource accepts.
pub const MIN_HORIZON: Duration = Duration::from_secs(1);

/// The largest horizon a store or resource accepts (a year).
pub const MAX_HORIZON: Duration = Duration::from_secs(366 * 24 * 3600);

/// Fences at or above this (µs since 1970: 2001-09-09) are clock-backed fences and have an
/// age; fences below it (an etcd revision, a ZooKeeper zxid, a counter of a version before
/// clock-backed fences) have none, so no horizon applies to them: resources keep their
/// claims and never refuse them as too old.
pub const CLOCK_FENCE_MIN: u64 = 1_000_000_000_000_000;

/// The assumption under which forgetting per-key state past the horizon keeps fences from
/// going back.
pub const HORIZON_ASSUMPTION: &str = "a key's state is forgotten only after the horizon has \
passed since its last grant, and the horizon exceeds twice the store clock's largest step \
back plus 1 µs (a step back lets the counter lead the clock by as much, plus one grant)";

cfg_networked! {
    /// The `horizon=` option of a store URL, from [`MIN_HORIZON`] to [`MAX_HORIZON`].
    #[cfg_attr(not(feature = "_horizon"), allow(dead_code))]
    pub(crate) fn horizon_option(v: &str) -> crate::Result<Duration> {
        crate::url::duration_option("horizon", v, MIN_HORIZON, MAX_HORIZON)
    }
}

/// How often a store forgets what is past `horizon` (its pruning task's period, after a
/// first round when it opens; the `flock` store's pruning after an acquire): a quarter of the
/// horizon, between 250 ms and 10 minutes. So a key's state is gone at most a quarter of the
/// horizon after it may be (for a process that keeps the store open).
pub fn prune_period(horizon: Duration) -> Duration {
    (horizon / 4).clamp(Duration::from_millis(250), Duration::from_secs(600))
}

/// The horizon in whole microseconds (the unit of clock-backed fences), for the stores and
/// resources that compare it with a clock in µs (every resource with a claim step does).
#[cfg_attr(not(feature = "_fence-claim"), allow(dead_code))]
pub(crate) fn micros(h: Duration) -> i64 {
    i64::try_from(h.as_micros()).unwrap_or(i64::MAX)
}
