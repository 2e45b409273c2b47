//! What leasehold's own tools need of the MySQL store (feature `tools`, not a stable API):
//! `leasehold bench` sends the very statements the store sends through a raw mysql_async
//! client.

pub use super::lease::{LeaseStatements, lease_statements};
pub use super::session::{SessionStatements, session_statements};

/// The SQL expression the statements read the server's clock with (µs since 1970); the
/// testkit's `rules` test puts chosen clocks in its place.
pub const CLOCK_US: &str = super::CLOCK_US;
