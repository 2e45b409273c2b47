//! What leasehold's own tools need of the SQLite store (feature `tools`, not a stable API):
//! the statement that issues a grant's fence, which the testkit's `rules` test runs with
//! chosen clocks against the library's rule.

/// `?1` key, `?2` the clock in µs → the new fence, `max(counter + 1, clock)`.
pub const GRANT_FENCE: &str = super::grant::GRANT_FENCE;
