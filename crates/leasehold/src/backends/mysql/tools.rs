//! What leasehold's own tools need of the MySQL store (feature `tools`, not a stable API):
//! `leasehold bench` sends the very statements the store sends through a raw mysql_async
//! client, and the chaos tools connect to the store's server; each answer comes from the
//! URL's parsed configuration ([`crate::StoreUrl`]), never from its text.

use super::MysqlUrl;
pub use super::lease::LeaseStatements;
pub use super::session::SessionStatements;
use crate::{Result, StoreUrl};

/// The configuration of `url`; [`crate::Error::InvalidInput`] if it names another store.
fn config(url: &StoreUrl) -> Result<&MysqlUrl> {
    url.config_of("mysql://")
}

/// The lease-table statements for a `mysql://` URL's `table` option.
pub fn lease_statements(url: &StoreUrl) -> Result<LeaseStatements> {
    Ok(super::lease::lease_statements(&config(url)?.o.table))
}

/// The session-lock statements for a `mysql://…?mode=session` URL (its `table` and `fence`
/// options). The lock name is the `prefix` option followed by the key.
pub fn session_statements(url: &StoreUrl) -> Result<SessionStatements> {
    let o = &config(url)?.o;
    Ok(super::session::session_statements(&o.table, o.fence))
}

/// Whether the URL asks for `GET_LOCK` session locks (`mode=session`).
pub fn is_session(url: &StoreUrl) -> Result<bool> {
    Ok(config(url)?.o.session)
}

/// The driver options the store connects with: leasehold's options removed, TCP unless the
/// URL names a socket.
pub fn client_opts(url: &StoreUrl) -> Result<mysql_async::Opts> {
    Ok(config(url)?.opts.clone())
}

/// The SQL expression the statements read the server's clock with (µs since 1970); the
/// testkit's `rules` test puts chosen clocks in its place.
pub const CLOCK_US: &str = super::CLOCK_US;
