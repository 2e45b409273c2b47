//! What every store's fenced resource ([`crate::resource`]) shares: the name of its one row,
//! the SQL resources' data table, and a store client's error as leasehold's.

/// The resource's name in the fence table / hash.
pub const NAME: &str = "row-1";

/// The SQL resources' data table.
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) const DATA: &str =
    "CREATE TABLE IF NOT EXISTS data (id VARCHAR(64) PRIMARY KEY, value TEXT NOT NULL)";

/// A store client's error as leasehold's backend error.
pub(crate) fn backend(
    backend: &'static str,
    e: impl std::error::Error + Send + Sync + 'static,
) -> leasehold::Error {
    leasehold::Error::Backend { backend, message: e.to_string(), source: Some(Box::new(e)) }
}
