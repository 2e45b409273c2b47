//! PostgreSQL in the tools: a private server (or a primary with a streaming standby, or a
//! synchronous pair) to kill and fail over, and chaos's resource in a schema of the user's
//! database.

use leasehold::{Scheme, StoreUrl};

use crate::failure::Plan;
use crate::kit::{ResourceSpec, StoreKit};

#[cfg(feature = "postgres")]
pub mod resource;
pub mod server;
pub mod sync_pair;

/// PostgreSQL's entry in [`super::KITS`].
pub struct Kit;

impl StoreKit for Kit {
    fn schemes(&self) -> &'static [Scheme] {
        &[Scheme::Postgres]
    }

    fn plan(&self, failover: bool) -> Option<Plan> {
        Some(server::plan(failover))
    }

    fn plan_outline(&self, failover: bool) -> &'static str {
        if failover { " (a primary and a streaming standby)" } else { "" }
    }

    /// The store's own schema when the URL names one (letters, digits, `_`), else
    /// `leasehold_chaos`, in the URL's database.
    fn resource(&self, url: &StoreUrl) -> Option<ResourceSpec> {
        if !cfg!(feature = "postgres") {
            return None;
        }
        let raw = url.expose();
        let base = raw.split('?').next().unwrap_or(raw);
        let schema = url
            .option("schema")
            .filter(|s| s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or("leasehold_chaos");
        Some(ResourceSpec {
            spec: format!("{base}?options=-csearch_path%3D{schema}"),
            what: format!(
                "PostgreSQL: table {schema}.data (id 'row-1') and fence table \
                 {schema}.leasehold_fence"
            ),
            transactional: true,
        })
    }
}
