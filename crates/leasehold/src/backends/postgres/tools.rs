//! What leasehold's own tools need of the PostgreSQL store (feature `tools`, not a stable
//! API): `leasehold bench` runs the very statements the store prepares through pgbench.

pub use super::lease::{LeaseStatements, PrimitiveStatements};
use super::parse_url;
pub use super::session::SessionStatements;
use crate::Result;

/// The lease-table statements for a `postgres://` URL's `schema` and `table` options.
pub fn lease_statements(url: &str) -> Result<LeaseStatements> {
    let (_, o) = parse_url(url)?;
    Ok(LeaseStatements::new(&o.schema, &o.table))
}

/// The readers', intents' and slots' statements beside the lease table of a `postgres://` URL.
pub fn primitive_statements(url: &str) -> Result<PrimitiveStatements> {
    let (_, o) = parse_url(url)?;
    Ok(PrimitiveStatements::new(&o.schema, &o.table))
}

/// The lease table of a `postgres://` URL: (schema, table, horizon), for a tool that measures
/// it; and the driver's configuration for that server (leasehold's options removed).
pub fn lease_table(
    url: &str,
) -> Result<(String, String, std::time::Duration, tokio_postgres::Config)> {
    let (cfg, o) = parse_url(url)?;
    Ok((o.schema, o.table, o.horizon, cfg))
}

/// The session-lock statements for a `postgres://…?mode=session` URL.
pub fn session_statements(url: &str) -> Result<SessionStatements> {
    let (_, o) = parse_url(url)?;
    let seq = o.fence.then(|| format!("\"{}\".leasehold_fence_seq", o.schema));
    Ok(SessionStatements::new(seq.as_deref()))
}

/// The SQL expression the statements read the server's clock with (µs since 1970); the
/// testkit's `rules` test puts chosen clocks in its place.
pub const CLOCK_US: &str = super::CLOCK_US;

/// How far behind the clock (µs) a session connection's clock-back must find the fence
/// sequence before it moves it (see `SessionStatements::clock_back`).
pub const CLOCK_BACK_SLACK_US: i64 = super::session::CLOCK_BACK_SLACK_US;
