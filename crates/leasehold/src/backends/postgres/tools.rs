//! What leasehold's own tools need of the PostgreSQL store (feature `tools`, not a stable
//! API): `leasehold bench` runs the very statements the store prepares through pgbench, and
//! the chaos tools connect to the store's server; each answer comes from the URL's parsed
//! configuration ([`crate::StoreUrl`]), never from its text.

pub use super::lease::{LeaseStatements, PrimitiveStatements};
pub use super::session_sql::SessionStatements;
use super::{Form, PostgresUrl};
use crate::{Result, StoreUrl};

/// The configuration of `url`; [`crate::Error::InvalidInput`] if it names another store.
fn config(url: &StoreUrl) -> Result<&PostgresUrl> {
    url.config_of("postgres://")
}

/// The lease-table statements for a `postgres://` URL's `schema` and `table` options.
pub fn lease_statements(url: &StoreUrl) -> Result<LeaseStatements> {
    let o = &config(url)?.opts;
    Ok(LeaseStatements::new(&o.schema, &o.table))
}

/// The readers', intents' and slots' statements beside the lease table of a `postgres://` URL.
pub fn primitive_statements(url: &StoreUrl) -> Result<PrimitiveStatements> {
    let o = &config(url)?.opts;
    Ok(PrimitiveStatements::new(&o.schema, &o.table))
}

/// The lease table of a `postgres://` URL: (schema, table, horizon), for a tool that measures
/// it; and the driver's configuration for that server (leasehold's options removed).
pub fn lease_table(
    url: &StoreUrl,
) -> Result<(String, String, std::time::Duration, tokio_postgres::Config)> {
    let c = config(url)?;
    Ok((c.opts.schema.clone(), c.opts.table.clone(), c.opts.horizon, c.cfg.clone()))
}

/// The session-lock statements for a `postgres://…?mode=session` URL.
pub fn session_statements(url: &StoreUrl) -> Result<SessionStatements> {
    let o = &config(url)?.opts;
    let seq = o.fence.then(|| format!("\"{}\".leasehold_fence_seq", o.schema));
    Ok(SessionStatements::new(seq.as_deref()))
}

/// Whether the URL asks for session advisory locks (`mode=session`).
pub fn is_session(url: &StoreUrl) -> Result<bool> {
    Ok(config(url)?.opts.mode == Form::Session)
}

/// The `schema=` the URL names, if it names one.
pub fn schema(url: &StoreUrl) -> Result<Option<&str>> {
    let o = &config(url)?.opts;
    Ok(o.schema_given.then_some(o.schema.as_str()))
}

/// The driver's configuration the store connects with: leasehold's options removed, its
/// application name and `connect_timeout` applied.
pub fn client_config(url: &StoreUrl) -> Result<tokio_postgres::Config> {
    Ok(config(url)?.cfg.clone())
}

/// The URL the driver's configuration is parsed from (leasehold's options removed,
/// credentials kept), to hand the same server to another client such as pgbench. Never
/// print it.
pub fn driver_url(url: &StoreUrl) -> Result<&str> {
    Ok(&config(url)?.driver_url)
}

/// The same server and database, every connection's `search_path` set to `schema` (an SQL
/// identifier), the URL's other options dropped: where a tool keeps tables of its own.
pub fn with_search_path(url: &StoreUrl, schema: &str) -> Result<StoreUrl> {
    let driver = driver_url(url)?;
    let base = driver.split_once('?').map_or(driver, |(base, _)| base);
    let schema = crate::url::identifier("schema", schema, 63)?;
    StoreUrl::parse(&format!("{base}?options=-csearch_path%3D{schema}"))
}

/// The SQL expression the statements read the server's clock with (µs since 1970); the
/// testkit's `rules` test puts chosen clocks in its place.
pub const CLOCK_US: &str = super::CLOCK_US;

/// How far behind the clock (µs) a session connection's clock-back must find the fence
/// sequence before it moves it (see `SessionStatements::clock_back`).
pub const CLOCK_BACK_SLACK_US: i64 = super::session_sql::CLOCK_BACK_SLACK_US;
